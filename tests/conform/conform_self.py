#!/usr/bin/env python3
"""The self-test of `uroce conform` (docs/CONFORMANCE.md), suite 'conform'.

1. Every case against uroce itself over a net_memif link (`--target self`):
   the command must pass, junit.xml must count every case of `--list` with
   no failure, error or skip, report.json must say 'conforms' for each, and
   no EAL runtime folder of the two ends may be left behind.
2. An independent reading of each case's pcap: tshark's InfiniBand dissector
   must see the target's frames (opcode, AETH syndrome, PSN) that the rule
   asks for (TARGET below, from the IBA rule each case cites, not from
   uroce), and the tester's frames must carry the case's deviation (TESTER).
3. Every case against its broken variant (`--broken`): each must deviate.
4. The rdma-core helper (uroce-conform-helper, built against rdma-core's
   libibverbs and librdmacm) as the target, run under `uroce run` on uroce's
   libibverbs.so.1 over memif: every case must conform through the verbs
   ABI too (the helper is what runs on rxe or a NIC); the tester answers
   the provider's ARP.
5. Bad command lines get a usage error (exit 2).

Usage: conform_self.py UROCE HELPER
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "dpdk"))
import harness  # noqa: E402  (sanitizer_runtimes)

UROCE = sys.argv[1]
HELPER = sys.argv[2]
TARGET_IP = "10.192.0.1"  # the helper's address under --target self

# Opcodes (IBA Table 38) and AETH syndromes (IBA 9.7.5.1): ACK 0x1f (credits
# invalid), NAK PSN sequence error 0x60, invalid request 0x61, remote access
# error 0x62, RNR NAK with timer code N = 0x20 | N (the helper's min_rnr_timer is 5).
SEND_ONLY, WRITE_ONLY, READ_REQ, ACK, ATOMIC_ACK, READ_RESP_ONLY, UD_SEND_ONLY = 4, 10, 12, 17, 18, 16, 100
A_ACK, N_SEQ, N_INV, N_ACC = 31, 0x60, 0x61, 0x62
R = None  # a request: no AETH
# The target's frames each case's rule asks for, as tshark reads them:
# (opcode, AETH syndrome, PSN - the PSN of the target's first frame).
TARGET = {
    "resp.dup_write_reacked": [(ACK, A_ACK, 0), (ACK, A_ACK, 0)],
    "resp.psn_ahead_one_nak": [(ACK, N_SEQ, 0), (ACK, A_ACK, 0)],
    "resp.dup_send_delivered_once": [(ACK, A_ACK, 0), (ACK, A_ACK, 0)],
    "resp.read_invalid_rkey": [(ACK, N_ACC, 0)],
    "resp.write_read_only_region": [(ACK, N_ACC, 0)],
    "resp.rkey_of_other_pd": [(ACK, N_ACC, 0)],
    "resp.uc_opcode_dropped": [(ACK, A_ACK, 0), (READ_RESP_ONLY, A_ACK, 1)],
    "req.coalesced_ack": [(SEND_ONLY, R, 0), (SEND_ONLY, R, 1), (SEND_ONLY, R, 2)],
    "resp.psn_far_behind_not_executed": [(ACK, A_ACK, 0), (ACK, A_ACK, 0), (READ_RESP_ONLY, A_ACK, 1)],
    "resp.dup_read_replayed": [(ACK, A_ACK, 0), (READ_RESP_ONLY, A_ACK, 1), (READ_RESP_ONLY, A_ACK, 1)],
    "resp.dup_atomic_not_reexecuted": [(ATOMIC_ACK, A_ACK, 0), (ATOMIC_ACK, A_ACK, 0), (READ_RESP_ONLY, A_ACK, 1)],
    "resp.middle_without_first": [(ACK, N_INV, 0)],
    "resp.send_longer_than_receive": [(ACK, N_INV, 0)],
    "resp.write_longer_than_pmtu": [(ACK, N_INV, 0)],
    "resp.new_request_inside_message": [(ACK, N_INV, 0)],
    "resp.write_past_region_end": [(ACK, N_ACC, 0)],
    "resp.read_past_region_end": [(ACK, N_ACC, 0)],
    "resp.invalid_rkey": [(ACK, N_ACC, 0)],
    "resp.misaligned_atomic": [(ACK, N_INV, 0)],
    "resp.rnr_nak_timer": [(ACK, 0x25, 0)],
    "resp.bad_icrc_dropped": [(ACK, A_ACK, 0), (READ_RESP_ONLY, A_ACK, 1)],
    "resp.bad_pkey_dropped": [(ACK, A_ACK, 0), (READ_RESP_ONLY, A_ACK, 1)],
    "req.ghost_ack_ignored": [(SEND_ONLY, R, 0)],
    "req.nak_seq_go_back_n": [(SEND_ONLY, R, 0), (SEND_ONLY, R, 1), (SEND_ONLY, R, 2), (SEND_ONLY, R, 1), (SEND_ONLY, R, 2)],
    "req.rnr_nak_wait_retry": [(SEND_ONLY, R, 0)] * 4,
    "req.nak_remote_access": [(WRITE_ONLY, R, 0), (WRITE_ONLY, R, 1)],
    "req.retry_exhausted": [(SEND_ONLY, R, 0), (SEND_ONLY, R, 1)] * 3,
    "req.rnr_retry_exhausted": [(SEND_ONLY, R, 0), (SEND_ONLY, R, 1)] * 2,
    "req.rnr_nak_storm": [(SEND_ONLY, R, 0)] * 21,
    "req.implied_nak_read": [(READ_REQ, R, 0), (SEND_ONLY, R, 1), (READ_REQ, R, 0)],
    "req.reserved_syndrome": [(SEND_ONLY, R, 0)],
    "resp.ack_req_answered": [(ACK, A_ACK, 0)],
    "resp.read_multi_packet_psns": [(13, A_ACK, 0), (14, None, 1), (15, A_ACK, 2), (ACK, A_ACK, 3)],
    "req.nak_invalid_request": [(SEND_ONLY, R, 0), (SEND_ONLY, R, 1)],
    "req.nak_remote_op_error": [(SEND_ONLY, R, 0), (SEND_ONLY, R, 1)],
    "ud.bad_pkey_dropped": [],
    "ud.bad_qkey_dropped": [],
    "cm.req_unknown_service": [(UD_SEND_ONLY, R, 0)],
    "cm.req_bad_transport": [(UD_SEND_ONLY, R, 0)],
    "cm.dreq_unknown_connection": [(UD_SEND_ONLY, R, 0)],
    "resp.wrong_pad_count": [(ACK, A_ACK, 0), (READ_RESP_ONLY, A_ACK, 1)],
    "resp.ack_credits_honest": [(ACK, A_ACK, 0)],
    "req.local_ack_timeout_wait": [(SEND_ONLY, R, 0), (SEND_ONLY, R, 0)],
    "cc.cnp_slows_target": [(6, R, 0)],                 # WRITE First; the stream follows
    "cm.duplicate_req": [(UD_SEND_ONLY, R, 0)],         # one MAD: the MRA of the duplicate
}
# Cases whose TARGET frames are a prefix: after an implied NAK the requester
# goes back N from the READ and may send the acknowledged SEND again too.
PREFIX = {"req.implied_nak_read", "cc.cnp_slows_target"}
# The CM MADs as tshark's CM dissector names them: (from the target?, Info, REJ reason).
CM = {
    "cm.req_unknown_service": [(False, "CM: ConnectRequest", None), (True, "CM: ConnectReject", 8)],
    "cm.req_bad_transport": [(False, "CM: ConnectRequest", None), (True, "CM: ConnectReject", 9)],
    "cm.dreq_unknown_connection": [(False, "CM: DisconnectRequest", None), (True, "CM: DisconnectReply", None)],
}
# The tester's frames that carry each case's deviation: (opcode, AETH
# syndrome, P_Key, DETH Q_Key) of its first frames, in order (None: any).
TESTER = {
    "resp.middle_without_first": [(1, R, 0xffff, None)],               # SEND Middle
    "resp.bad_pkey_dropped": [(WRITE_ONLY, R, 0x7123, None)],         # a foreign P_Key
    "resp.misaligned_atomic": [(20, R, 0xffff, None)],                # FETCH_ADD
    "req.ghost_ack_ignored": [(ACK, A_ACK, 0xffff, None), (ACK, A_ACK, 0xffff, None)],
    "req.nak_seq_go_back_n": [(ACK, N_SEQ, 0xffff, None), (ACK, A_ACK, 0xffff, None)],
    "req.rnr_nak_wait_retry": [(ACK, 0x20 | 24, 0xffff, None)] * 3 + [(ACK, A_ACK, 0xffff, None)],
    "req.nak_remote_access": [(ACK, N_ACC, 0xffff, None)],
    "req.coalesced_ack": [(ACK, A_ACK, 0xffff, None)],
    "req.nak_invalid_request": [(ACK, N_INV, 0xffff, None)],
    "req.nak_remote_op_error": [(ACK, 0x63, 0xffff, None)],
    "req.reserved_syndrome": [(ACK, 0x45, 0xffff, None)],
    "req.rnr_nak_storm": [(ACK, 0x21, 0xffff, None)] * 20 + [(ACK, A_ACK, 0xffff, None)],
    "ud.bad_pkey_dropped": [(UD_SEND_ONLY, R, 0x7123, 0x11111111), (UD_SEND_ONLY, R, 0xffff, 0x11111111)],
    "resp.uc_opcode_dropped": [(0x2a, R, 0xffff, None)],                # UC RDMA WRITE Only
    "req.rnr_retry_exhausted": [(ACK, 0x21, 0xffff, None)] * 2,
    "ud.bad_qkey_dropped": [(UD_SEND_ONLY, R, 0xffff, 0x11111110), (UD_SEND_ONLY, R, 0xffff, 0x11111111)],
}

errors = []


# Under a sanitizer the tester never polls for 100 us without a pause, so the
# case that measures rates over pause-free windows can only report an error
# there: ASan slows the measurement, not the stack it measures. It runs in the
# main build; the sanitized run leaves it out (--cases) and says so.
TIMING_CASES = {"cc.cnp_slows_target"}
CASES = []  # --cases of every run: all but TIMING_CASES under a sanitizer


def sanitized():
    return bool(harness.sanitizer_runtimes(UROCE))


def run(args, timeout=120, cpu=None, env=None):
    if "--report-dir" in args:  # the runs whose cases are checked
        args = args + CASES
    return subprocess.run([UROCE, "conform"] + args, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=pin(cpu), env=env)


def pin(cpu):
    """A preexec_fn that keeps the child on one CPU (as `--target self` puts
    its two ends on lcores 0 and 1): the rdma-core helper's engine thread and
    the tester each poll without a pause, and on one CPU they take turns of
    milliseconds, which cc.cnp_slows_target must take as lapses."""
    cpus = sorted(os.sched_getaffinity(0))
    if cpu is None or len(cpus) < 2:
        return None
    return lambda: os.sched_setaffinity(0, {cpus[cpu]})


def tshark(pcap):
    """(source IP, opcode, AETH syndrome, P_Key, DETH Q_Key, PSN) of each frame, as tshark decodes it."""
    out = subprocess.run(["tshark", "-r", pcap, "-T", "fields", "-E", "separator=,", "-e", "ip.src",
                          "-e", "infiniband.bth.opcode", "-e", "infiniband.aeth.syndrome", "-e", "infiniband.bth.p_key",
                          "-e", "infiniband.deth.q_key", "-e", "infiniband.bth.psn"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    num = lambda v: int(v, 0) if v else None
    return [tuple([f[0]] + [num(v) for v in f[1:]]) for f in (line.split(",") for line in out.splitlines())]


def tshark_cm(pcap):
    out = subprocess.run(["tshark", "-r", pcap, "-T", "fields", "-E", "separator=,", "-e", "ip.src", "-e", "_ws.col.Info",
                          "-e", "infiniband.cm.rej.reason"], capture_output=True, text=True, timeout=60, check=True).stdout
    return [(f[0] == TARGET_IP, f[1], int(f[2], 0) if f[2] else None) for f in (l.split(",") for l in out.splitlines())]


def check_run(d, want_verdict, names):
    tree = ET.parse(os.path.join(d, "junit.xml")).getroot()
    if int(tree.get("tests")) != len(names):
        errors.append(f"{d}: junit.xml counts {tree.get('tests')} cases, --list {len(names)}")
    for k in ("failures", "errors", "skipped"):
        if tree.get(k) != "0":
            errors.append(f"{d}: junit.xml {k}={tree.get(k)}")
    report = json.load(open(os.path.join(d, "report.json")))
    got = {c["name"]: c for c in report["cases"]}
    for n in names:
        if n not in got:
            errors.append(f"{d}: {n} missing from report.json")
        elif got[n]["verdict"] != want_verdict:
            errors.append(f"{d}: {n} is '{got[n]['verdict']}', want '{want_verdict}': {got[n]['seen']}")
        elif not os.path.getsize(got[n]["pcap"]):
            errors.append(f"{d}: {n}: empty pcap")
    return got


def verbs_helper(names):
    """Step 4: the rdma-core helper under `uroce run` as the target."""
    tmp = tempfile.mkdtemp(prefix="uroce-conform-helper-")
    sock = os.path.join(tmp, "memif.sock")
    port = free_port()
    helper = subprocess.Popen(
        [UROCE, "run", "--", "--dev", f"net_memif0,role=server,socket={sock},socket-abstract=no,mac=02:00:00:00:c1:01",
         "--ip", "10.193.0.1", "--mac", "02:00:00:00:c1:01",
         "--cc", "dcqcn", HELPER, "--port", str(port), "--host", "127.0.0.1", "--gid-index", "3", "--mac", "02:00:00:00:c1:01"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=pin(0))
    try:
        deadline = time.time() + 30
        while not os.path.exists(sock) and time.time() < deadline and helper.poll() is None:
            time.sleep(0.05)
        report = os.path.join(tmp, "report")
        r = run(["--", "--dev", f"net_memif0,role=client,socket={sock},socket-abstract=no,mac=02:00:00:00:c1:02",
                 "--ip", "10.193.0.2", "--target", f"127.0.0.1:{port}", "--strict", "--report-dir", report], cpu=1)
        if r.returncode != 0:
            errors.append(f"the rdma-core helper under uroce run: exit {r.returncode}:\n{r.stdout}\n{r.stderr}")
        else:
            check_run(report, "conforms", names)
        try:
            out, _ = helper.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            helper.kill()  # by its PID: the process this test started
            out, _ = helper.communicate()
            errors.append("the helper did not exit after the tester's quit")
        if helper.returncode != 0:
            errors.append(f"the helper exited {helper.returncode}: {out}")
    finally:
        if helper.poll() is None:
            helper.kill()
            helper.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    listed = run(["--list"])
    names = [l.split("|")[1].strip() for l in listed.stdout.splitlines()[2:]]
    if listed.returncode != 0 or not names:
        sys.exit(f"--list failed: {listed.stderr}")
    for n in names:
        if n not in TARGET:
            errors.append(f"{n}: no oracle in this test (add the target frames its rule asks for)")
    if sanitized():
        print(f"sanitized build: {sorted(TIMING_CASES)} left out (it measures rates; the main build runs it)")
        names = [n for n in names if n not in TIMING_CASES]
        CASES.extend(["--cases", ",".join(names)])

    tmp = tempfile.mkdtemp(prefix="uroce-conform-test-")
    try:
        good = os.path.join(tmp, "good")
        run_dir = os.path.join(tmp, "run")  # EAL's runtime folders: the launcher must remove its ends'
        os.mkdir(run_dir)  # EAL makes dpdk/ in it, not the folder itself
        r = run(["--target", "self", "--report-dir", good], env=dict(os.environ, RUNTIME_DIRECTORY=run_dir))
        if r.returncode != 0:
            errors.append(f"--target self exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        clean, msg = harness.no_eal_leftovers(run_dir, "--target self")
        if not clean:
            errors.append(msg)
        got = check_run(good, "conforms", names)
        for n in names:
            if n not in got or n not in TARGET:
                continue
            rows = tshark(got[n]["pcap"])
            theirs = [r for r in rows if r[0] == TARGET_IP]
            seen = [(op, syn, (psn - theirs[0][5]) % (1 << 24)) for _, op, syn, _, _, psn in theirs]
            if seen != TARGET[n] and not (n in PREFIX and seen[:len(TARGET[n])] == TARGET[n]):
                errors.append(f"{n}: tshark reads the target's frames as {seen}, the rule asks for {TARGET[n]}")
            if n in CM and tshark_cm(got[n]["pcap"]) != CM[n]:
                errors.append(f"{n}: tshark reads the MADs as {tshark_cm(got[n]['pcap'])}, want {CM[n]}")
            if n in TESTER:
                ours = [(op, syn, pkey, qkey) for src, op, syn, pkey, qkey, _ in rows if src != TARGET_IP]
                want = TESTER[n]
                # requester cases: the tester's answers (ACK opcode) only
                if want[0][0] == ACK:
                    ours = [o for o in ours if o[0] == ACK]
                if ours[:len(want)] != want:
                    errors.append(f"{n}: tshark reads the tester's frames as {ours[:len(want)]}, want {want}")

        broken = os.path.join(tmp, "broken")
        r = run(["--target", "self", "--broken", "--report-dir", broken])
        if r.returncode != 0:
            errors.append(f"--target self --broken exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        check_run(broken, "deviates", names)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    verbs_helper(names)

    for bad in (["--target", "self", "--cases", "no.such.case"], ["--target", "nohost"], [],
                ["--serve", "1", "--target", "self"], ["--target", "self", "--self-test-breaks"]):
        r = run(bad, timeout=30)
        if r.returncode != 2 or "uroce conform:" not in r.stderr:
            errors.append(f"{bad}: exit {r.returncode}, stderr {r.stderr!r}; want a usage error (2)")

    for e in errors:
        print("FAIL:", e)
    print(f"{len(names)} cases: conform against uroce (its own API, and its libibverbs through the rdma-core "
          f"helper), flag their broken variants; {len(errors)} errors")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
