#!/bin/sh
# tests/middleware/uroce_end.sh: one end of a two-process job (an MPI rank,
# a ucx_perftest side) on a uroce port of its own:
#   uroce_end.sh UROCE DIR PROGRAM [ARGS...]
# End 0 (OMPI_COMM_WORLD_RANK under mpirun, else UROCE_END) takes
# net_af_packet0 on veth end va with 10.77.0.1, end 1 end vb with 10.77.0.2:
# the veth pair of the network namespace the job runs in, which
# tests/middleware/ucx_mpi.py creates. PROGRAM runs under
# `uroce run --device-files` (the files UCX reads, docs/MIDDLEWARE.md) and
# writes the device counters to DIR/end<N>.counters at exit. The other
# UROCE_* variables (UROCE_PROGRESS, UROCE_PCAP) pass through.
# af_packet, not memif: see docs/MIDDLEWARE.md ("Why af_packet").
set -eu
if [ $# -lt 3 ]; then
  echo "usage: uroce_end.sh UROCE DIR PROGRAM [ARGS...] (end 0 or 1: OMPI_COMM_WORLD_RANK or UROCE_END)" >&2
  exit 2
fi
uroce=$1 dir=$2
shift 2
end=${OMPI_COMM_WORLD_RANK:-${UROCE_END:-}}
case "$end" in
  0) iface=va ;;
  1) iface=vb ;;
  *) echo "uroce_end.sh: end '$end': only ends 0 and 1 have a port" >&2; exit 2 ;;
esac
n=$((end + 1))
# framecnt=4096: a ring of 4096 frames (af_packet's default is 512), so that
# a burst of a 64 KiB message at path MTU 1024 is not dropped by the kernel
# while the receiving process is off its CPU.
exec "$uroce" run --no-huge --no-pci --no-shconf -m 256 "--log-level=lib.*:error" \
  "--vdev=net_af_packet0,iface=$iface,framecnt=4096" -- \
  --device-files --dev net_af_packet0 --ip "10.77.0.$n" --mac "02:00:00:77:00:0$n" \
  --counters "$dir/end$end.counters" "$@"
