#!/usr/bin/env python3
"""`uroce conform` against Linux rxe in the QEMU guest of tests/interop
(docs/CONFORMANCE.md): the guest runs uroce-conform-helper (rdma-core's
libibverbs and librdmacm on rxe0, handed in by fw_cfg), the tester runs in
the harness's namespace on the guest's tap (DPDK net_af_packet) with the
stack's address 10.70.0.3, and talks to the helper over TCP.

The test: every case must come out as docs/CONFORMANCE.md classifies rxe
(Linux 6.1, rdma-core 44): conforms, except the deviations in RXE_DEVIATES,
each documented there with its pcap frames. A change in rxe, in a case or
in the tester shows as a difference here.

Usage: rxe.py UROCE HELPER OUT_DIR [--cases PATTERN]
Exit: 0 as classified, 1 otherwise or on a harness failure, 77 skipped (no root / tap).
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
import guest  # noqa: E402

UROCE, HELPER, OUT = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
CASES = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--cases" else "*"
CONTROL_PORT = 18600
RXE_DEVIATES = {
    "resp.send_longer_than_receive",  # NAK Remote Operational Error, not Invalid Request
    "resp.wrong_pad_count",           # 1021 bytes with PadCnt 0: NAK Invalid Request, not dropped
    "req.ghost_ack_ignored",          # an ACK for a PSN never sent completes the SEND
    "req.rnr_retry_exhausted",        # rnr_retry 1: resends for as long as RNR NAKs come
    "req.reserved_syndrome",          # a reserved AETH type completes the WR successfully
    "cm.req_bad_transport",           # REJ reason 28 (consumer), not 9, for an RD REQ
}
# rxe has no congestion control (the helper runs with --cc none).
RXE_NOT_APPLICABLE = {"cc.cnp_slows_target"}
# Either verdict, by timing: rxe's retransmit timer is whole jiffies and
# fired 0.9 ms early in one of two runs (66.23 ms for 67.11 ms; 68.88 ms in
# the other), a deviation whenever it happens.
RXE_EITHER = {"req.local_ack_timeout_wait": ("conforms", "deviates")}

# The helper goes in stripped and gzipped (its 2.7 MB with debug info are 0.4 MB so): the
# guest's qemu_fw_cfg driver reads a file a byte at a time by port I/O, which under TCG took
# 161 s for the 2.7 MB on a loaded host (2026-12-02). busybox's zcat unpacks it in the guest.
GUEST_SCRIPT = f"""
H=/tmp/uroce-conform-helper
zcat /sys/firmware/qemu_fw_cfg/by_name/opt/uroce/helper/raw > $H && chmod +x $H
uroce-step helper $H --port {CONTROL_PORT} --host {guest.GUEST_IP4} --gid-index $GID4 --cc none
"""
# How long the guest may take from UROCE-READY to starting the helper (the fw_cfg read), and
# then the tester to reach it (its --timeout): the first no longer counts against the second.
HELPER_START_S = 300
TESTER_TIMEOUT_S = 120


def packed_helper(out):
    """HELPER without its symbols and debug info, gzipped, in OUT: the file the guest reads."""
    stripped = os.path.join(out, "uroce-conform-helper.stripped")
    subprocess.run(["strip", "-o", stripped, HELPER], check=True)
    packed = os.path.join(out, "uroce-conform-helper.gz")
    with open(stripped, "rb") as f, gzip.open(packed, "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(stripped)
    print(f"# helper for the guest: {os.path.getsize(HELPER)} bytes, {os.path.getsize(packed)} stripped and gzipped")
    return packed


def main():
    if (rc := guest.preflight(UROCE)) is not None:
        return rc
    os.makedirs(OUT, exist_ok=True)
    helper = packed_helper(OUT)
    with guest.Session(OUT) as s:
        s.add_tap()
        g = s.start_guest("rxe", GUEST_SCRIPT, s.tap_netdev(), ip4=guest.GUEST_IP4, mac=guest.GUEST_MAC,
                          files={"helper": helper}, timeout=900)
        ready = g.wait_ready(300)
        started = g.proc.wait_for(r"UROCE-STEP-BEGIN helper|UROCE-CMD-EXIT", HELPER_START_S)
        if started is None or "UROCE-STEP-BEGIN" not in started[1].group(0):
            g.finish(30)
            print(f"FAIL: the guest did not start the helper within {HELPER_START_S} s of UROCE-READY ({g.proc.logpath})")
            return 1
        print(f"# the guest started the helper {started[0] - ready:.1f} s after UROCE-READY")
        report = os.path.join(OUT, "report")
        tester = s.start_host("tester", " ".join([
            UROCE, "conform", "-l", "0", "--no-huge", "-m", "256", "--no-pci", "--file-prefix", s.ns,
            f"--vdev=net_af_packet0,iface={guest.TAP}", "--",
            "--dev", "net_af_packet0", "--ip", guest.STACK_IP4, "--mac", guest.STACK_MAC,
            "--target", f"{guest.GUEST_IP4}:{CONTROL_PORT}", "--timeout", str(TESTER_TIMEOUT_S),
            "--wait-ms", "300", "--answer-ms", "4000", "--cases", f"'{CASES}'", "--report-dir", report]), 900)
        rc = tester.wait(900)
        g.finish(120)
        print(tester.text())
        print(f"# tester exit {rc}; guest helper steps {g.steps}; pcap of the guest's NIC {g.pcap}")
    try:
        cases = json.load(open(os.path.join(report, "report.json")))["cases"]
    except (OSError, ValueError) as e:
        print(f"FAIL: no report from the tester: {e}")
        return 1
    errors = []
    for c in cases:
        want = ("deviates" if c["name"] in RXE_DEVIATES else
                "not applicable" if c["name"] in RXE_NOT_APPLICABLE else "conforms")
        if c["name"] in RXE_EITHER:
            print(f"# {c['name']}: {c['verdict']} ({c['seen']})")
            if c["verdict"] not in RXE_EITHER[c["name"]]:
                errors.append(f"{c['name']}: {c['verdict']} ({c['seen']}), classified as {RXE_EITHER[c['name']]}")
            continue
        if c["verdict"] != want:
            errors.append(f"{c['name']}: {c['verdict']} ({c['seen']}), classified as {want}")
    if not cases:
        errors.append("no cases ran")
    if g.steps.get("helper", {}).get("rc") != 0:
        errors.append(f"the helper in the guest: {g.steps}")
    for e in errors:
        print("FAIL:", e)
    print(f"{len(cases)} cases against rxe: {len(errors)} differ from the classification")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
