#!/usr/bin/env bash
# Regenerates the congestion-control report: runs the `uroce sim` CC scenarios
# (N:1 incast for N = 2, 8, 32, 64; two flows sharing a link; a flow joining
# and leaving; long and short flows mixed) for DCQCN, TIMELY and no CC on the
# same fabric, then tests/cc/plot.py writes the PNGs to docs/cc/ and the
# generated part of docs/CC.md (between its report markers).
#
# Usage: tests/cc/report.sh [BUILD_DIR]   (default: build; needs apps/uroce built)
# Plots need /usr/bin/python3 with matplotlib (Debian python3-matplotlib).
# Wall time on 2 shared cores: about 3 minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
uroce=$build/apps/uroce
[[ -x $uroce ]] || { echo "report.sh: $uroce not built (ninja -C $build apps/uroce)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The fabric and parameters every run shares (docs/CC.md explains each choice).
# shellcheck source=tests/cc/config.sh
source "$here/config.sh"

run() {  # run NAME ARGS...: one scenario, its JSON summary appended to runs.jsonl
  local name=$1 rc=0
  shift
  echo "report.sh: $name $*" >&2
  "$uroce" sim "${CC_FABRIC[@]}" --json --csv-dir "$out/csv" "$@" >"$out/one.json" || rc=$?
  # Exit 1 is a run that completed with failed flows (no CC at 32:1): it is
  # reported; anything else is an error.
  [[ $rc -le 1 ]] || { echo "report.sh: $name failed ($rc)" >&2; exit 1; }
  sed "s/^{/{\"run\":\"$name\",/" "$out/one.json" >>"$out/runs.jsonl"
}

for n in 2 8 32 64; do
  run "incast-dcqcn-n$n" --scenario incast --flows "$n" "${CC_DCQCN[@]}" --duration-us "$CC_INCAST_US"
  run "incast-dcqcn_cx-n$n" --scenario incast --flows "$n" "${CC_DCQCN_CX[@]}" --duration-us "$CC_INCAST_US" \
    --csv-dir "$out/csv-cx"
  run "incast-dcqcn_cx64-n$n" --scenario incast --flows "$n" "${CC_DCQCN_CX[@]}" --rpg-byte-reset 2097088 \
    --duration-us "$CC_INCAST_US" --csv-dir "$out/csv-cx64"
  run "incast-timely-n$n" --scenario incast --flows "$n" "${CC_TIMELY[@]}" --duration-us "$CC_INCAST_US"
  run "incast-none-n$n" --scenario incast --flows "$n" --cc none --duration-us "$CC_INCAST_US"
  run "incast-dcqcn_pfc-n$n" --scenario incast --flows "$n" "${CC_DCQCN[@]}" "${CC_PFC[@]}" \
    --duration-us "$CC_INCAST_US" --csv-dir "$out/csv-pfc"
  run "incast-none_pfc-n$n" --scenario incast --flows "$n" --cc none "${CC_PFC[@]}" \
    --duration-us "$CC_INCAST_US" --csv-dir "$out/csv-pfc"
done
for s in share join-leave mixed; do
  run "$s-dcqcn" --scenario "$s" --flows 8 "${CC_DCQCN[@]}" --duration-us "$CC_SCENARIO_US"
  run "$s-timely" --scenario "$s" --flows 8 "${CC_TIMELY[@]}" --duration-us "$CC_SCENARIO_US"
  run "$s-none" --scenario "$s" --flows 8 --cc none --duration-us "$CC_SCENARIO_US"
done

/usr/bin/python3 "$here/plot.py" "$out" "$root/docs" "$(git -C "$root" rev-parse --short HEAD)"
