#!/usr/bin/env bash
# The cost of the libibverbs ABI layer (docs/VERBS.md, "Cost"): stock perftest
# under `uroce run` beside `uroce perf`, the same test on the same memif link,
# in interleaved rounds. Prints one row per run: round, test, tool, figure
# (FAILED, and exit 1 at the end, where a run gave none).
#   bench/verbs_cost.sh [BUILD_DIR] [ROUNDS]
# (UROCE=PATH runs that uroce instead of BUILD_DIR's; perftest comes from PATH.)
set -euo pipefail
B=${1:-build}; ROUNDS=${2:-3}
U=${UROCE:-$B/apps/uroce}  # UROCE: another uroce binary (bench/multicore_device.sh cost)
D=$(mktemp -d /tmp/uroce-cost.XXXXXX)
trap 'rm -rf "$D"' EXIT
dev() { echo "net_memif0,role=$1,socket=$D/m.sock,socket-abstract=no"; }
# pair TOOL ARGS...: TOOL is "stock" (perftest under uroce run) or "uroce" (uroce perf)
pair() {
  local tool=$1 test=$2; shift 2
  local srv cli
  if [[ $tool == stock ]]; then
    srv=("$U" run -- --dev "$(dev server)" --ip 10.79.0.1 --mac 02:00:00:79:00:01 "ib_$test" -x 3 "$@")
    cli=("$U" run -- --dev "$(dev client)" --ip 10.79.0.2 --mac 02:00:00:79:00:02 "ib_$test" -x 3 "$@" 127.0.0.1)
  else
    # EAL pins a process's main thread to its main lcore: the two ends on
    # different cores, as uroce run's library leaves the program's threads unpinned.
    srv=("$U" perf --no-huge --no-pci --no-shconf -m 512 -l 0 -- --dev "$(dev server)" --ip 10.79.0.1 --mac 02:00:00:79:00:01 "$test" "$@")
    cli=("$U" perf --no-huge --no-pci --no-shconf -m 512 -l 1 -- --dev "$(dev client)" --ip 10.79.0.2 --mac 02:00:00:79:00:02 "$test" "$@" 127.0.0.1)
  fi
  # Both ends time-limited: a server whose client gave up waits for it forever.
  timeout 75 "${srv[@]}" > "$D/srv.log" 2>&1 & local spid=$!
  sleep 1.5
  timeout 60 "${cli[@]}" > "$D/cli.log" 2>&1 || true
  wait "$spid" || true
  # lat: t_typical (5th column); bw: MsgRate Mpps (5th column)
  local row
  row=$(awk -v t="$test" -v tool="$tool" -v r="$ROUND" '/^ *[0-9]+ +[0-9]+ +[0-9.]+/ {print r, t, tool, $5; found = 1; exit}
    END {if (!found) print r, t, tool, "FAILED"}' "$D/cli.log")
  echo "$row"
  [[ $row != *FAILED ]] || FAILED=1
}
FAILED=0
echo "round test tool figure   (lat: t_typical us; bw: Mpps)  cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
for ROUND in $(seq 1 "$ROUNDS"); do
  for tool in uroce stock; do
    pair $tool send_lat -s 64 -n 5000
    pair $tool write_lat -s 64 -n 5000
    pair $tool write_bw -s 64 -t 128 -N -n 200000
  done
done
exit $FAILED
