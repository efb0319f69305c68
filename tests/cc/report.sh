#!/usr/bin/env bash
# Regenerates the congestion-control report: runs the `uroce sim` CC scenarios
# (N:1 incast for N = 2, 8, 32, 64; two flows sharing a link; a flow joining
# and leaving; long and short flows mixed) for DCQCN, TIMELY and no CC on the
# same fabric, then tests/cc/plot.py writes the PNGs to docs/cc/ and the
# generated part of docs/CC.md (between its report markers).
#
# Usage: tests/cc/report.sh [BUILD_DIR]   (default: build; needs apps/uroce built)
# Plots need /usr/bin/python3 with matplotlib (Debian python3-matplotlib).
# Wall time on 2 shared cores: about 4 minutes (it prints how long the runs took).
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

run() {  # run SCENARIO KEY N ARGS...: one run "SCENARIO-KEY-nN", its JSON summary appended to runs.jsonl
  local scenario=$1 key=$2 n=$3 rc=0
  shift 3
  local name="$scenario-$key-n$n"
  echo "report.sh: $name $*" >&2
  "$uroce" sim "${CC_FABRIC[@]}" --json --scenario "${scenario%-read}" --flows "$n" --csv-dir "$out/csv/$key" "$@" \
    >"$out/one.json" || rc=$?
  # Exit 1 is a run that completed with failed flows (no CC at 32:1): it is
  # reported; anything else is an error.
  [[ $rc -le 1 ]] || { echo "report.sh: $name failed ($rc)" >&2; exit 1; }
  sed "s/^{/{\"run\":\"$name\",/" "$out/one.json" >>"$out/runs.jsonl"
}

start=$(date +%s)
for n in 2 8 32 64; do
  i=(--duration-us "$CC_INCAST_US")
  run incast dcqcn "$n" "${CC_DCQCN[@]}" "${i[@]}"
  run incast dcqcn_cx "$n" "${CC_DCQCN_CX[@]}" "${i[@]}"
  # The byte counter read in bytes (512 x 64 = 32 KiB), for comparison.
  run incast dcqcn_cxb "$n" "${CC_DCQCN_CX[@]}" --rpg-byte-reset 512 "${i[@]}"
  # The ConnectX defaults with RED's marking probability rising to 100 % at
  # Kmax (Pmax 1.0) instead of 10 %: more CNPs per flow.
  run incast dcqcn_cx_p100 "$n" "${CC_DCQCN_CX[@]}" --red-pmax 1.0 "${i[@]}"
  run incast timely "$n" "${CC_TIMELY[@]}" "${i[@]}"
  run incast timely_p "$n" "${CC_TIMELY_P[@]}" "${i[@]}"
  run incast none "$n" --cc none "${i[@]}"
  run incast dcqcn_pfc "$n" "${CC_DCQCN[@]}" "${CC_PFC[@]}" "${i[@]}"
  run incast dcqcn_cx_pfc "$n" "${CC_DCQCN_CX[@]}" "${CC_PFC[@]}" "${i[@]}"
  run incast timely_p_pfc "$n" "${CC_TIMELY_P[@]}" "${CC_PFC[@]}" "${i[@]}"
  run incast none_pfc "$n" --cc none "${CC_PFC[@]}" "${i[@]}"
done
# READ incast: host 0 READs from N hosts; the READ responses are the congested data.
for n in 8 64; do
  run incast-read dcqcn "$n" --op read "${CC_DCQCN[@]}" --duration-us "$CC_INCAST_US"
  run incast-read dcqcn_cx "$n" --op read "${CC_DCQCN_CX[@]}" --duration-us "$CC_INCAST_US"
  run incast-read none "$n" --op read --cc none --duration-us "$CC_INCAST_US"
done
# TIMELY patched with the paper's beta 0.8 and with 0.1, for the beta choice.
for b in 0.8 0.1; do
  for n in 2 8 64; do
    run incast "timely_p_b${b/./}" "$n" "${CC_TIMELY_P[@]}" --timely-beta "$b" --duration-us "$CC_INCAST_US"
  done
done
for s in share join-leave mixed; do
  n=8
  [[ $s == share ]] && n=2
  [[ $s == join-leave ]] && n=3
  s_us=(--duration-us "$CC_SCENARIO_US")
  run "$s" dcqcn "$n" "${CC_DCQCN[@]}" "${s_us[@]}"
  run "$s" dcqcn_cx "$n" "${CC_DCQCN_CX[@]}" "${s_us[@]}"
  run "$s" timely "$n" "${CC_TIMELY[@]}" "${s_us[@]}"
  run "$s" timely_p "$n" "${CC_TIMELY_P[@]}" "${s_us[@]}"
  run "$s" none "$n" --cc none "${s_us[@]}"
done
echo "report.sh: runs took $(($(date +%s) - start)) s" >&2

/usr/bin/python3 "$here/plot.py" "$out" "$root/docs" "$(git -C "$root" rev-parse --short HEAD)"
