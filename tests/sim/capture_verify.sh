#!/usr/bin/env bash
# Frames captured from a `uroce sim` run (every frame the fabric's switch saw,
# before fault injection) must all pass `uroce dump --verify`: well-formed
# RoCE with a correct ICRC. Usage: capture_verify.sh UROCE_BINARY
set -euo pipefail
uroce=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The sim's own verdict is the sim suite's business: exit 1 (a violation) is
# accepted here, a usage error or a crash is not.
rc=0
"$uroce" sim --seeds 1-4 --capture --pcap-dir "$dir" --quiet \
  --loss 0.1 --reorder 0.05 --dup 0.02 --corrupt 0.02 >"$dir/sim.log" 2>&1 || rc=$?
if [[ $rc -ne 0 && $rc -ne 1 ]]; then
  cat "$dir/sim.log"
  echo "capture_verify: uroce sim exited $rc" >&2
  exit 1
fi
for s in 1 2 3 4; do
  [[ -s "$dir/sim-seed-$s.pcap" ]] || { echo "capture_verify: no capture for seed $s" >&2; exit 1; }
done
"$uroce" dump --verify "$dir"/sim-seed-*.pcap >"$dir/dump.log"
tail -n 3 "$dir/dump.log"
