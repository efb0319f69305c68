#!/usr/bin/env bash
# `uroce sim --trace-qp`: the state trace of one QP reaches stderr, with the
# steps of all three roles in the names of stack/transport/states.h, only for
# the QP asked for, and nothing without the switch.
# Usage: trace_qp.sh UROCE
set -euo pipefail
uroce=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# One RC pair of 2 ops with loss (seed 1 loses a frame), QP 0x11 traced on both devices.
"$uroce" sim --seeds 1-1 --qps 1 --ops 2 --trace-qp 17 --quiet >"$tmp/out" 2>"$tmp/trace" || fail "sim failed: $(cat "$tmp/out")"
for step in "requester get_wqe -> chk_fence" "requester send_packet psn=" "responder chk_psn psn=" \
            "responder acknowledge" "completer get_wqe" "completer update_comp"; do
  grep -q "^qp 0x11 $step" "$tmp/trace" || fail "no line 'qp 0x11 $step' in the trace"
done
other=$(grep -cv '^qp 0x11 ' "$tmp/trace" || true)
[[ $other == 0 ]] || fail "$other trace lines of other QPs or other output on stderr"

"$uroce" sim --seeds 1-1 --qps 1 --ops 2 --quiet >"$tmp/out" 2>"$tmp/quiet" || fail "sim without --trace-qp failed"
[[ ! -s $tmp/quiet ]] || fail "stderr not empty without --trace-qp: $(head -3 "$tmp/quiet")"
echo "trace_qp: $(wc -l <"$tmp/trace") steps of QP 0x11 traced, none without the switch"
