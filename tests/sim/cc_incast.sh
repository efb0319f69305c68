#!/usr/bin/env bash
# Congestion control on the simulated fabric (tests/cc/config.sh: 100 Gb/s,
# 16 MiB switch buffer, RED/ECN 50-500 KiB). Asserts with `uroce sim
# --expect-*`, which prints any figure that misses:
#  - 8:1 incast with DCQCN: steady-state bottleneck utilisation >= 0.95,
#    Jain's index >= 0.99, p99 egress queue <= 1 MiB (1/16 of the buffer),
#    the flows converge, no buffer drop and no retransmission;
#  - the contrast without congestion control, 16:1: the queue fills the
#    buffer, tail drops and go-back-N retransmissions, unfair (Jain < 0.99);
#  - CNPs we send decode in tshark as RoCE CNPs (BTH opcode 0x81) addressed to
#    the senders' QPs, with a clean dissection (no malformed/error mark).
# Usage: cc_incast.sh UROCE_BINARY CONFIG_SH
set -euo pipefail
uroce=$1
# shellcheck source=tests/cc/config.sh
source "$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$uroce" sim --scenario incast --flows 8 "${CC_FABRIC[@]}" "${CC_DCQCN[@]}" --duration-us "$CC_TEST_US" \
  --expect-util 0.95 --expect-jain 0.99 --expect-p99-queue-kb 1024 --expect-converged --expect-no-drops
"$uroce" sim --scenario incast --flows 16 "${CC_FABRIC[@]}" --cc none --duration-us "$CC_TEST_US" \
  --expect-drops --expect-jain-below 0.99
# READ incast: host 0 READs from 8 hosts; its NP answers CE-marked READ
# responses with CNPs and the responders' pacers hold their responses. Without
# that the queue holds every outstanding READ (8 x 16 x 16 KiB = 2 MiB).
"$uroce" sim --scenario incast --op read --flows 8 "${CC_FABRIC[@]}" "${CC_DCQCN[@]}" --duration-us "$CC_TEST_US" \
  --expect-util 0.95 --expect-p99-queue-kb 1024 --expect-converged --expect-no-drops

command -v tshark >/dev/null || { echo "cc_incast: tshark not installed" >&2; exit 1; }
# tshark 4.0 has no name for BTH opcode 0x81: it decodes the BTH (opcode 129,
# DestQP, PSN) and shows the rest as "vendor specific" bytes, which must be
# the 16 reserved zero bytes of A17.9.2 followed by the 4-byte ICRC.
pcap=$dir/dcqcn.pcap  # the first 2 ms of the same incast: the CNPs of its start
"$uroce" sim --scenario incast --flows 8 "${CC_FABRIC[@]}" "${CC_DCQCN[@]}" --duration-us 2000 --pcap "$pcap" >/dev/null
tshark -r "$pcap" -Y 'infiniband.bth.opcode == 0x81' \
  -T fields -E separator=' ' -e ip.dsfield.dscp -e ip.dsfield.ecn -e infiniband.bth.destqp -e infiniband.bth.psn \
  -e infiniband.vendor 2>/dev/null >"$dir/cnp.txt"
total=$(tshark -r "$pcap" -T fields -e frame.number 2>/dev/null | wc -l)
ib=$(tshark -r "$pcap" -Y infiniband -T fields -e frame.number 2>/dev/null | wc -l)
bad=$(tshark -r "$pcap" -Y '_ws.malformed || _ws.expert.severity >= "error"' -T fields -e frame.number 2>/dev/null | wc -l)
n_cnp=$(wc -l <"$dir/cnp.txt")
# DSCP 48 (CNP_DSCP), Not-ECT, DestQP 0x11 (each sender's only QP), PSN 0, 16 zero bytes + ICRC.
ok=$(grep -cE '^48 0 0x0*11 0 0{8},0{32}[0-9a-f]{8}$' "$dir/cnp.txt" || true)
echo "cc_incast: $total frames, $ib decoded as InfiniBand, $bad malformed; $n_cnp CNPs, $ok of them as A17.9.2 lays out"
head -n 2 "$dir/cnp.txt"
if [[ $total -eq 0 || $ib -ne $total || $bad -ne 0 || $n_cnp -eq 0 || $ok -ne $n_cnp ]]; then
  echo "cc_incast: tshark does not decode the capture and our CNPs cleanly" >&2
  exit 1
fi
