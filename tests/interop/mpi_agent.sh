#!/bin/bash
# tests/interop/mpi_agent.sh: Open MPI's remote launcher (plm_rsh_agent) for the QEMU guest of the
# interop harness, in place of ssh: mpirun runs it as `AGENT HOST ORTED-COMMAND...` and it hands
# the command line to the guest's listener (a busybox `nc -l -p PORT -e sh` in the guest's step,
# tests/interop/verbs.py), which runs it in sh with stdin and stdout on this connection (its stderr
# is the guest step's output: "mpi_agent.sh: starting orted on HOST" there, a line a job). It keeps
# the connection, orted's output coming back on it, until orted ends (then the guest's sh reads
# the `exit` after it) or mpirun ends this process.
#   mpirun --mca plm_rsh_agent "env bash tests/interop/mpi_agent.sh" ...
# (mpirun looks the agent's first word up in PATH; env is there and runs bash on this script.)
# UROCE_MPI_AGENT_PORT: the listener's port; it tries to connect for UROCE_MPI_AGENT_WAIT_S
# seconds (default 90): the guest's listener may start after mpirun (the harness starts both
# sides of a cell at once).
set -u
if [ $# -lt 2 ]; then
  echo "usage: mpi_agent.sh HOST COMMAND... (UROCE_MPI_AGENT_PORT: the guest's listener)" >&2
  exit 2
fi
host=$1
shift
port=${UROCE_MPI_AGENT_PORT:?the port of the listener in the guest}
end=$((SECONDS + ${UROCE_MPI_AGENT_WAIT_S:-90}))
connect() { exec 3<>"/dev/tcp/$host/$port"; } 2>/dev/null
until connect; do
  if [ $SECONDS -ge $end ]; then
    echo "mpi_agent.sh: no listener at $host:$port" >&2
    exit 255
  fi
  sleep 0.2
done
# a line on the guest's stderr first, which the harness counts (one a job), then orted
# shellcheck disable=SC2016  # $(hostname) is the guest's, expanded there
printf 'echo "mpi_agent.sh: starting orted on $(hostname)" >&2\n%s\nexit\n' "$*" >&3
cat <&3
