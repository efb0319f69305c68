#!/usr/bin/env python3
"""bench/loss_recovery_memif.py: go-back-N beside uroce's selective repeat
between two `uroce perf write_bw` processes on a net_memif link, with loss
injected by both ports (`--drop-rate`, drivers/dpdk/fault_io.h: each process
loses that fraction of the frames it sends and of those it receives), in the
same run (docs/LOSS_RECOVERY.md, "Between two processes"). Modes:
  gbn       plain RoCE: go-back-N on one UDP source port;
  sr        --sr on both sides (selective repeat);
  sr-spray  --sr --paths 4 on both sides (one link: the ports change nothing
            on memif, but every packet takes the spraying code path).
Each round runs every mode once at each loss rate, in that order, with the
same drop seeds, so the modes are interleaved and meet the same losses; the
table gives the median of the rounds (goodput MB/s, frames resent, local ACK
timeouts) and SR / GBN. Exit 0 when every run completed.
Usage: bench/loss_recovery_memif.py [--uroce build/apps/uroce] [--rounds 3]
       [--loss 0.001,0.01,0.05] [--size 65536] [--iters 2000] [--qp-timeout 14] [--json FILE]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "dpdk"))
import harness  # noqa: E402  (Proc: a child stopped by its PID)

MODES = {"gbn": [], "sr": ["--sr"], "sr-spray": ["--sr", "--paths", "4"]}
EAL = ["--no-huge", "--no-pci", "--no-shconf", "-m", "256", "--log-level=pmd.net.memif:critical"]


def run_pair(uroce, d, mode, loss, size, iters, seed, port, qp_timeout):
    """One write_bw pair: (MB/s, retransmits, local ACK timeouts, {counter: value}) of the client, or None."""
    sock = os.path.join(d, f"m-{port}.sock")
    def argv(side):
        role = "server" if side == 0 else "client"
        a = [uroce, "perf", *EAL, "-l", str(side), "--", "write_bw", "-s", str(size), "-n", str(iters),
             "--mtu", "4096", "--port-mtu", "4200", "-p", str(port), "--ip", f"10.0.0.{side + 1}",
             "--mac", f"02:00:00:00:00:0{side + 1}", "--dev",
             f"net_memif0,role={role},socket={sock},socket-abstract=no,bsize=4352", "--timeout", "120", "--counters",
             "--drop-rate", str(loss), "--drop-seed", str(seed + 100 * side), "--qp-timeout", str(qp_timeout),
             *MODES[mode]]
        return a + (["127.0.0.1"] if side else [])
    srv = harness.Proc(f"server-{port}", argv(0), d)
    try:
        time.sleep(0.5)
        out = subprocess.run(argv(1), capture_output=True, text=True, timeout=300)
    finally:
        srv.wait(30)  # stopped by its PID if it outlives the client by 30 s
    text = out.stdout + out.stderr
    row = re.search(rf"^\s*{size}\s+{iters}\s+[\d.]+\s+([\d.]+)", text, re.M)
    if out.returncode != 0 or not row:
        sys.stderr.write(f"{mode} loss {loss}: exit {out.returncode}\n{text[-1500:]}\n")
        return None
    counters = dict(re.findall(r"(\w+)=(\d+)", (re.search(r"^# counters:(.*)$", text, re.M) or [None, ""])[1]))
    counters = {k: int(v) for k, v in counters.items()}
    return float(row.group(1)), counters.get("retransmits", 0), counters.get("local_ack_timeout_err", 0), counters


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--uroce", default=os.path.join(os.path.dirname(__file__), "..", "build", "apps", "uroce"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--loss", default="0.001,0.01,0.05")
    p.add_argument("--size", type=int, default=65536)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--json", default="")
    p.add_argument("--qp-timeout", type=int, default=14,
                   help="RC local ACK timeout code of both sides (uroce perf -u; perftest's 14)")
    a = p.parse_args()
    losses = [float(x) for x in a.loss.split(",")]
    res = {(m, l): [] for m in MODES for l in losses}
    failed = 0
    with tempfile.TemporaryDirectory(prefix="uroce-loss-") as d:
        port = 26000 + os.getpid() % 1000
        for r in range(a.rounds):
            for l in losses:
                for m in MODES:
                    port += 1
                    got = run_pair(a.uroce, d, m, l, a.size, a.iters, 1 + r, port, a.qp_timeout)
                    if got is None:
                        failed += 1
                    else:
                        res[(m, l)].append(got)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"CPU: {cpu}; {a.rounds} rounds; write_bw -s {a.size} -n {a.iters}, path MTU 4096, net_memif")
    print("| loss | mode | goodput MB/s (median, range) | frames resent | local ACK timeouts | vs gbn |")
    print("|---|---|---|---|---|---|")
    out = []
    for l in losses:
        gbn = statistics.median([x[0] for x in res[("gbn", l)]]) if res[("gbn", l)] else 0
        for m in MODES:
            runs = res[(m, l)]
            if not runs:
                print(f"| {l:.1%} | {m} | failed | | | |")
                continue
            bw = statistics.median(x[0] for x in runs)
            rt = statistics.median(x[1] for x in runs)
            to = statistics.median(x[2] for x in runs)
            ratio = f"{bw / gbn:.1f}x" if gbn else "-"
            print(f"| {l:.1%} | {m} | {bw:.0f} ({min(x[0] for x in runs):.0f}..{max(x[0] for x in runs):.0f}) "
                  f"| {rt:.0f} | {to:.0f} | {ratio} |")
            out.append({"loss": l, "mode": m, "runs": runs, "goodput_mbs": bw, "resent": rt, "timeouts": to})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": cpu, "size": a.size, "iters": a.iters, "rows": out}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
