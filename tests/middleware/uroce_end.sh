#!/bin/sh
# tests/middleware/uroce_end.sh: one end of a two-process job (an MPI rank,
# a ucx_perftest side) on a uroce port of its own:
#   uroce_end.sh UROCE DIR PROGRAM [ARGS...]
# End 0 (OMPI_COMM_WORLD_RANK under mpirun, else UROCE_END) is the memif
# server with 10.77.0.1, end 1 the client with 10.77.0.2, on the socket
# DIR/memif.sock. PROGRAM runs under `uroce run --device-files` (the files
# UCX reads, docs/MIDDLEWARE.md) and writes the device counters to
# DIR/end<N>.counters at exit. The other UROCE_* variables (UROCE_PROGRESS,
# UROCE_PCAP) pass through.
set -eu
if [ $# -lt 3 ]; then
  echo "usage: uroce_end.sh UROCE DIR PROGRAM [ARGS...] (end 0 or 1: OMPI_COMM_WORLD_RANK or UROCE_END)" >&2
  exit 2
fi
uroce=$1 dir=$2
shift 2
end=${OMPI_COMM_WORLD_RANK:-${UROCE_END:-}}
case "$end" in
  0) role=server ;;
  1) role=client ;;
  *) echo "uroce_end.sh: end '$end': only ends 0 and 1 have a port" >&2; exit 2 ;;
esac
n=$((end + 1))
exec "$uroce" run --device-files --dev "net_memif0,role=$role,socket=$dir/memif.sock,socket-abstract=no" \
  --ip "10.77.0.$n" --mac "02:00:00:77:00:0$n" --counters "$dir/end$end.counters" "$@"
