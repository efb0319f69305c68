#!/usr/bin/env bash
# Runs the loss-recovery experiments of docs/LOSS_RECOVERY.md (issue 23) with
# `uroce sim`, then bench/loss_recovery_plot.py writes docs/loss/*.png and
# the generated part of docs/LOSS_RECOVERY.md (between its markers):
#   loss       one RC QP, 64 KB WRITEs at 100 Gb/s, 0.1 / 1 / 5 % loss, go-back-N beside selective repeat
#   reorder    one QP sprayed over 8 paths whose delays differ by 250 ns, 1, 4, 16 us each
#   read       the same two with 64 KB READs (--op read): the data are READ responses
#   blackhole  the QP's path fails for good mid-run: time series, recovery
#   balance    8 QPs on one source port each beside 8 sprayed QPs on 4 paths, seeds 1-10
#   survive    the fault runs with retry_cnt 7 beside the mix, heavy reordering and the defaults
#   faults     the fault runs with the extension over SEEDS seeds (the CI set-up)
# Every figure is in virtual time except the wall-clock times of the fault
# runs, which come with the CPU's name (lscpu).
#
# Usage: bench/loss_recovery.sh [BUILD_DIR] [SEEDS] [OUT_DIR]
#   defaults: build, 2000, a temporary directory (removed after plotting).
#   A 100,000-seed run's JSON (uroce sim --json) named by LR_FAULTS_100K is
#   reported beside the others.
# Wall time on 2 shared cores: about 4 minutes with 2000 seeds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build}
seeds=${2:-2000}
uroce=$build/apps/uroce
[[ -x $uroce ]] || { echo "loss_recovery.sh: $uroce not built (ninja -C $build apps/uroce)" >&2; exit 1; }
if [[ -n ${3:-} ]]; then
  out=$3
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

# Shared by the leaf/spine scenarios: local ACK timeout 524 us (code 7, the
# shortest the fault runs draw), 20 ms of virtual time.
common=(--qp-timeout 7 --duration-us 20000)
# The fault runs as tests/sim/meson.build runs them in CI.
faults=(--loss 0.1 --reorder 0.05 --dup 0.02 --corrupt 0.02 --link-flap 0.03)
heavy=(--loss 0.02 --reorder 0.4 --dup 0.1 --corrupt 0.1 --link-flap 0)

run() {  # run NAME ARGS...: `uroce sim ARGS --json` into OUT/NAME.json
  local name=$1 rc=0
  shift
  echo "loss_recovery.sh: $name: uroce sim $*" >&2
  "$uroce" sim "$@" --json >"$out/$name.json" || rc=$?
  [[ $rc -eq 0 ]] || { echo "loss_recovery.sh: $name failed ($rc)" >&2; exit 1; }
}

start=$(date +%s)
for l in 0.001 0.01 0.05; do
  run "loss-$l" --scenario loss --path-loss "$l" "${common[@]}"
done
for step in 250 1000 4000 16000; do
  run "reorder-$step" --scenario reorder --path-delay-step-ns "$step" --sq-depth 64 "${common[@]}"
done
for l in 0.001 0.01 0.05; do
  run "read-loss-$l" --scenario loss --op read --path-loss "$l" "${common[@]}"
done
for step in 250 1000 4000 16000; do
  run "read-reorder-$step" --scenario reorder --op read --path-delay-step-ns "$step" "${common[@]}"
done
run blackhole --scenario blackhole --path-delay-step-ns 0 --sample-us 50 --csv-dir "$out/csv" "${common[@]}"
for s in 1 2 3 4 5 6 7 8 9 10; do
  run "balance-$s" --scenario balance --seed-start "$s" "${common[@]}"
done
for ext in off sr-spray; do
  for rc in 7 mix; do
    run "survive-heavy-$rc-$ext" --seeds "1-$seeds" "${heavy[@]}" --retry-cnt "$rc" --ext "$ext"
    run "survive-default-$rc-$ext" --seeds "1-$seeds" --retry-cnt "$rc" --ext "$ext"
  done
done
run "faults-$seeds" --seeds "1-$seeds" "${faults[@]}" --ext sr-spray
echo "loss_recovery.sh: runs took $(($(date +%s) - start)) s" >&2
[[ -n ${LR_FAULTS_100K:-} ]] && cp "$LR_FAULTS_100K" "$out/faults-100k.json"
lscpu | sed -n 's/^Model name: *//p' | head -1 >"$out/cpu.txt"

/usr/bin/python3 "$here/loss_recovery_plot.py" "$out" "$root/docs" "$(git -C "$root" rev-parse --short HEAD)"
