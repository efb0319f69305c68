#!/usr/bin/env bash
# Frames produced by the transport in a `uroce sim` run (every frame the
# fabric's switch saw, before fault injection) must all pass
# `uroce dump --verify` (well-formed RoCE, correct ICRC) and decode cleanly in
# tshark, an independent dissector: every frame is InfiniBand and none is
# malformed. Usage: capture_verify.sh UROCE_BINARY
set -euo pipefail
uroce=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$uroce" sim --seeds 1-4 --capture --pcap-dir "$dir" --quiet \
  --loss 0.1 --reorder 0.05 --dup 0.02 --corrupt 0.02 >"$dir/sim.log" 2>&1 || {
  cat "$dir/sim.log"
  echo "capture_verify: uroce sim failed" >&2
  exit 1
}
for s in 1 2 3 4; do
  [[ -s "$dir/sim-seed-$s.pcap" ]] || { echo "capture_verify: no capture for seed $s" >&2; exit 1; }
done
"$uroce" dump --verify "$dir"/sim-seed-*.pcap >"$dir/dump.log"
tail -n 3 "$dir/dump.log"
if ! command -v tshark >/dev/null; then
  echo "capture_verify: tshark not installed" >&2
  exit 1
fi
# Payload bytes are test patterns: keep tshark's heuristic payload dissectors
# (RPC-over-RDMA, SMB Direct, ...) from claiming them.
ts=(tshark)
for p in smc smb_direct rpcordma nvme-rdma lnet iser infiniband.eoib infiniband_sdp fcoib; do ts+=(--disable-protocol "$p"); done
for f in "$dir"/sim-seed-*.pcap; do
  total=$("${ts[@]}" -r "$f" -T fields -e frame.number 2>/dev/null | wc -l)
  ib=$("${ts[@]}" -r "$f" -Y infiniband -T fields -e frame.number 2>/dev/null | wc -l)
  # tshark calls a zero UDP checksum over IPv6 an error; RoCEv2 relies on the
  # ICRC and rxe sends zero too (its tunnel socket has no_check6_tx, RFC 6935).
  bad=$("${ts[@]}" -r "$f" -Y '_ws.malformed || (_ws.expert.severity >= "error" && !(ipv6 && udp.checksum == 0))' \
    -T fields -e frame.number 2>/dev/null | wc -l)
  echo "$(basename "$f"): $total frames, $ib decoded as InfiniBand by tshark, $bad malformed"
  if [[ $total -eq 0 || $ib -ne $total || $bad -ne 0 ]]; then
    echo "capture_verify: tshark does not decode every frame of $f cleanly" >&2
    exit 1
  fi
done
