#!/usr/bin/env python3
"""tests/multicore: two `uroce bench-mc` processes on a net_memif link with 2
engine lcores each (memif queue pairs 0 and 1, no RSS: software dispatch by
QPN), 8 RC QPs.

  cross    the client's QPs sit on other engines than their peers' queue
           pairing implies, so frames of half the QPs arrive on a queue the
           owner does not poll and are handed over (fwd_out/fwd_in > 0 on both
           engines of both sides); every RC op verified (WRITE, READ back,
           SEND imm, WRITE imm, FAA, CAS; 2500 B = 3 packets)
  aligned  QP j on engine j % 2 at both ends: the same verification, and no
           frame changes engine (fwd_out == 0)
  rate     a short 64 B WRITE message-rate run completes with a positive rate
Both engines of both sides must have sent and received frames. Exit 0 pass,
1 fail, 77 only when not root (EAL). Usage: mc_memif.py PATH/uroce
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dpdk"))
import harness  # noqa: E402


def engines(out):
    """{(side, e): {field: int}} from the 'engine side=S e=E k=v ...' lines."""
    rows = {}
    for line in out.splitlines():
        if line.startswith("engine "):
            f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            rows[(f["side"], int(f["e"]))] = {k: int(v) for k, v in f.items() if v.isdigit()}
    return rows


def run(uroce, args, tag, failures):
    r = subprocess.run([uroce, "bench-mc", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=240)
    print(r.stdout, end="")
    harness.check(r.returncode == 0, f"{tag}: exit {r.returncode}", failures)
    return r.stdout


def main():
    if os.geteuid() != 0:
        print("SKIP: EAL needs root here")
        return harness.SKIP
    uroce = sys.argv[1]
    failures = []
    for placement in ("cross", "aligned"):
        out = run(uroce, ["--engines", "2", "--qps", "8", "--workload", "verify", "--placement", placement,
                          "--size", "2500", "--rounds", "30"], placement, failures)
        rows = engines(out)
        harness.check(len(rows) == 4, f"{placement}: 4 engine lines (2 per side), got {len(rows)}", failures)
        harness.check("# server: 480 receives verified, 0 bad" in out, f"{placement}: server verified all 480 receives",
                      failures)
        for (side, e), f in sorted(rows.items()):
            harness.check(f.get("sent_pkts", 0) > 0 and f.get("rx_pkts", 0) > 0,
                          f"{placement}: {side} engine {e} carried traffic (sent {f.get('sent_pkts')}, "
                          f"received {f.get('rx_pkts')})", failures)
            fwd = f.get("fwd_out", 0)
            if placement == "cross":
                harness.check(fwd > 0 and f.get("fwd_in", 0) > 0,
                              f"cross: {side} engine {e} handed on {fwd} frames, took {f.get('fwd_in')}", failures)
            else:
                harness.check(fwd == 0, f"aligned: {side} engine {e} handed on no frame ({fwd})", failures)
            harness.check(f.get("fwd_drop", 0) == 0, f"{placement}: {side} engine {e} dropped no frame", failures)
    out = run(uroce, ["--engines", "2", "--qps", "8", "--seconds", "1", "--warmup", "0.5"], "rate", failures)
    harness.check(any(ln.startswith(" 2 ") for ln in out.splitlines()), "rate: result row printed", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
