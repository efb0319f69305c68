#!/usr/bin/env python3
"""The self-test of `uroce conform` (docs/CONFORMANCE.md), suite 'conform'.

1. Every case against uroce itself over a net_memif link (`--target self`):
   the command must pass, junit.xml must count every case of `--list` with
   no failure, error or skip, report.json must say 'conforms' for each.
2. An independent reading of each case's pcap: tshark's InfiniBand dissector
   must see the target's frames (opcode, AETH syndrome) that the rule asks
   for (ORACLE below, from the IBA rule each case cites, not from uroce),
   and the tester's first frame must carry the case's deviation.
3. Every case against its broken variant (`--broken`): each must deviate.
4. Bad command lines get a usage error (exit 2).

Usage: conform_self.py UROCE
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

UROCE = sys.argv[1]
TARGET_IP = "10.192.0.1"  # the helper's address under --target self

# Opcodes (IBA Table 38) and AETH syndromes (IBA 9.7.5.1): ACK 0x1f (credits
# invalid), NAK PSN sequence error 0x60, invalid request 0x61, remote access
# error 0x62, RNR NAK with timer 5 = 0x25 (the helper's min_rnr_timer).
ACK, ATOMIC_ACK, READ_RESP_ONLY = 17, 18, 16
A_ACK, N_SEQ, N_INV, N_ACC, RNR5 = 31, 0x60, 0x61, 0x62, 0x25
ORACLE = {
    "resp.dup_write_reacked": [(ACK, A_ACK), (ACK, A_ACK)],
    "resp.psn_ahead_one_nak": [(ACK, N_SEQ), (ACK, A_ACK)],
    "resp.psn_far_behind_not_executed": [(ACK, A_ACK), (ACK, A_ACK), (READ_RESP_ONLY, A_ACK)],
    "resp.dup_read_replayed": [(ACK, A_ACK), (READ_RESP_ONLY, A_ACK), (READ_RESP_ONLY, A_ACK)],
    "resp.dup_atomic_not_reexecuted": [(ATOMIC_ACK, A_ACK), (ATOMIC_ACK, A_ACK), (READ_RESP_ONLY, A_ACK)],
    "resp.middle_without_first": [(ACK, N_INV)],
    "resp.send_longer_than_receive": [(ACK, N_INV)],
    "resp.invalid_rkey": [(ACK, N_ACC)],
    "resp.misaligned_atomic": [(ACK, N_INV)],
    "resp.rnr_nak_timer": [(ACK, RNR5)],
    "resp.bad_icrc_dropped": [(ACK, A_ACK), (READ_RESP_ONLY, A_ACK)],
    "resp.bad_pkey_dropped": [(ACK, A_ACK), (READ_RESP_ONLY, A_ACK)],
}
# The tester's first frame: (opcode, P_Key) as tshark reads them.
FIRST = {
    "resp.middle_without_first": (1, 0xffff),    # SEND Middle
    "resp.bad_pkey_dropped": (10, 0x7123),       # WRITE Only, foreign P_Key
    "resp.misaligned_atomic": (20, 0xffff),      # FETCH_ADD
}

errors = []


def run(args, timeout=120):
    return subprocess.run([UROCE, "conform"] + args, capture_output=True, text=True, timeout=timeout)


def tshark(pcap):
    out = subprocess.run(["tshark", "-r", pcap, "-T", "fields", "-E", "separator=,", "-e", "ip.src",
                          "-e", "infiniband.bth.opcode", "-e", "infiniband.aeth.syndrome", "-e", "infiniband.bth.p_key"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    rows = []
    for line in out.splitlines():
        src, op, syn, pkey = line.split(",")
        rows.append((src, int(op), int(syn) if syn else None, int(pkey, 0) if pkey else None))
    return rows


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


def main():
    listed = run(["--list"])
    names = [l.split("|")[1].strip() for l in listed.stdout.splitlines()[2:]]
    if listed.returncode != 0 or not names:
        sys.exit(f"--list failed: {listed.stderr}")
    for n in names:
        if n not in ORACLE:
            errors.append(f"{n}: no oracle in this test (add the target frames its rule asks for)")

    tmp = tempfile.mkdtemp(prefix="uroce-conform-test-")
    try:
        good = os.path.join(tmp, "good")
        r = run(["--target", "self", "--report-dir", good])
        if r.returncode != 0:
            errors.append(f"--target self exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        got = check_run(good, "conforms", names)
        for n in names:
            if n not in got or n not in ORACLE:
                continue
            rows = tshark(got[n]["pcap"])
            seen = [(op, syn) for src, op, syn, _ in rows if src == TARGET_IP]
            if seen != ORACLE[n]:
                errors.append(f"{n}: tshark reads the target's frames as {seen}, the rule asks for {ORACLE[n]}")
            if n in FIRST:
                first = next(((op, pkey) for src, op, _, pkey in rows if src != TARGET_IP), None)
                if first != FIRST[n]:
                    errors.append(f"{n}: the tester's first frame is {first}, want {FIRST[n]}")

        broken = os.path.join(tmp, "broken")
        r = run(["--target", "self", "--broken", "--report-dir", broken])
        if r.returncode != 0:
            errors.append(f"--target self --broken exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        check_run(broken, "deviates", names)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    for bad in (["--target", "self", "--cases", "no.such.case"], ["--target", "nohost"], [],
                ["--serve", "1", "--target", "self"], ["--target", "self", "--self-test-breaks"]):
        r = run(bad, timeout=30)
        if r.returncode != 2 or "uroce conform:" not in r.stderr:
            errors.append(f"{bad}: exit {r.returncode}, stderr {r.stderr!r}; want a usage error (2)")

    for e in errors:
        print("FAIL:", e)
    print(f"{len(names)} cases: conform against uroce, flag their broken variants; {len(errors)} errors")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
