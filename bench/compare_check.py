#!/usr/bin/env python3
"""compare_smoke: `uroce compare --quick` must produce a complete, sane report.

Runs `UROCE compare --quick --json --charts DIR` (1 round, sizes 64 and 4096,
short runs) and checks, without any timing threshold:
  - the command exits 0 and its JSON parses, with no failed measurement;
  - every metric of every kind run (stack, tcp-block, tcp-busy, floor,
    floor-1frame) has a finite, positive median at every size, and one value
    per round, each with the positive cache-line round trip between the two
    CPUs probed before its measurement (line_rtt_ns);
  - each latency is at least the floor's lowest possible (above 0) and each
    message rate times the size agrees with the bandwidth (MB/sec = Mmsg/s x
    bytes / 2^20) within 5 %, for the stack and TCP rows (they come from one run);
  - every ratio the targets are stated in is present at 64 B;
  - the verbs column says it ran or why it was skipped;
  - lat.png and bw.png exist and are PNG files;
  - `--kinds stack,uroce-run` (stock perftest under `uroce run`, when perftest
    is installed) gives the uroce-run metrics and their ratios to the stack at
    64 B, and without perftest on PATH it exits 1 saying so;
  - `--memif-zc` runs the stack and the floor with every client's memif port
    in zero-copy mode (the children's config lines say so) and says memif_zc
    in the JSON;
  - `--kinds stack,demo` gives uroce demo's SEND, WRITE and READ pingpongs
    beside uroce perf's (stack.read_lat too) and the three demo / perf ratios.
Usage: compare_check.py PATH/uroce
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

KINDS = {
    "stack": ["stack.write_lat", "stack.send_lat", "stack.write_bw", "stack.write_rate"],
    "tcp-block": ["tcp-block.lat", "tcp-block.bw", "tcp-block.rate"],
    "tcp-busy": ["tcp-busy.lat", "tcp-busy.bw", "tcp-busy.rate"],
    "floor": ["floor.lat", "floor.bw", "floor.rate"],
    "floor-1frame": ["floor-1frame.lat", "floor-1frame.bw", "floor-1frame.rate"],
}
RATIOS = ["stack write_lat / floor lat", "stack send_lat / floor lat", "tcp-block lat / stack write_lat",
          "tcp-busy lat / stack write_lat", "stack write rate / floor frame rate", "stack write bw / tcp-block bw"]


def uroce_run(uroce, check):
    """The opt-in kind: stock ib_write_lat and ib_write_bw under `uroce run`."""
    p = subprocess.run([uroce, "compare", "--kinds", "stack,uroce-run"], env=dict(os.environ, PATH="/nonexistent"),
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 1 and "needs perftest's ib_write_lat on PATH" in p.stderr,
          f"uroce-run without perftest: exit {p.returncode}, {p.stderr.strip()!r}")
    if not shutil.which("ib_write_lat") or not shutil.which("ib_write_bw"):
        print("compare_smoke: perftest not installed, the uroce-run rows not run")
        return
    p = subprocess.run([uroce, "compare", "--quick", "--sizes", "64", "--kinds", "stack,uroce-run", "--json"],
                       capture_output=True, text=True, timeout=600)
    sys.stderr.write(p.stderr[-4000:])
    check(p.returncode == 0, f"uroce-run: exit status {p.returncode}")
    res = json.loads(p.stdout) if p.returncode == 0 else {"median": {}, "ratios": {}}
    for m in ("uroce-run.write_lat", "uroce-run.write_bw", "uroce-run.write_rate"):
        v = res["median"].get(m, {}).get("64")
        check(v is not None and math.isfinite(v) and v > 0, f"{m} at 64 B: {v}")
    for name in ("uroce-run write_lat / stack write_lat", "uroce-run rate / stack write rate"):
        v = res["ratios"].get(name, {}).get("64")
        check(v is not None and math.isfinite(v) and v > 0, f"ratio '{name}' at 64 B: {v}")


def demo_kind(uroce, check):
    """The opt-in kind: uroce demo's pingpongs beside uroce perf's."""
    p = subprocess.run([uroce, "compare", "--quick", "--sizes", "64", "--kinds", "stack,demo", "--json"],
                       capture_output=True, text=True, timeout=600)
    sys.stderr.write(p.stderr[-4000:])
    check(p.returncode == 0, f"demo: exit status {p.returncode}")
    res = json.loads(p.stdout) if p.returncode == 0 else {"median": {}, "ratios": {}}
    for m in ("demo.send_lat", "demo.write_lat", "demo.read_lat", "stack.read_lat"):
        v = res["median"].get(m, {}).get("64")
        check(v is not None and math.isfinite(v) and v > 0, f"{m} at 64 B: {v}")
    for op in ("send", "write", "read"):
        v = res["ratios"].get(f"demo {op}_lat / stack {op}_lat", {}).get("64")
        check(v is not None and math.isfinite(v) and v > 0, f"ratio 'demo {op}_lat / stack {op}_lat' at 64 B: {v}")


def memif_zc(uroce, check):
    """--memif-zc: the client side's memif port in zero-copy mode, for every kind on memif."""
    p = subprocess.run([uroce, "compare", "--quick", "--sizes", "4096", "--kinds", "stack,floor", "--memif-zc", "--keep",
                        "--json"], capture_output=True, text=True, timeout=600)
    sys.stderr.write(p.stderr[-4000:])
    check(p.returncode == 0, f"memif-zc: exit status {p.returncode}")
    res = json.loads(p.stdout) if p.returncode == 0 else {"median": {}, "memif_zc": None}
    check(res["memif_zc"] is True, f"memif-zc: JSON memif_zc {res['memif_zc']}")
    for m in KINDS["stack"] + KINDS["floor"]:
        v = res["median"].get(m, {}).get("4096")
        check(v is not None and math.isfinite(v) and v > 0, f"memif-zc: {m} at 4096 B: {v}")
    # Every client the run started opened its port in zero-copy mode, with the
    # EAL argument the PMD needs for it; every server in copy mode.
    tmp = next((line.split("temp dir ")[1].strip() for line in p.stderr.splitlines() if "temp dir " in line), None)
    check(tmp is not None and os.path.isdir(tmp), f"memif-zc: kept temp dir {tmp}")
    if tmp and os.path.isdir(tmp):
        names = sorted(os.listdir(tmp))
        clients = [n for n in names if n.endswith(".client")]
        check(len(clients) >= 5, f"memif-zc: {len(clients)} client outputs in {tmp}")
        for n in names:
            text = open(os.path.join(tmp, n), errors="replace").read()
            if n.endswith(".client"):
                check("zero-copy=yes" in text, f"memif-zc: {n} not in zero-copy mode")
            elif n.endswith(".server"):
                check("zero-copy" not in text, f"memif-zc: {n} in zero-copy mode")
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    uroce = sys.argv[1]
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="uroce-compare-smoke-") as d:
        p = subprocess.run([uroce, "compare", "--quick", "--json", "--charts", d], capture_output=True, text=True,
                           timeout=600)
        sys.stderr.write(p.stderr[-4000:])
        check(p.returncode == 0, f"exit status {p.returncode}")
        try:
            res = json.loads(p.stdout)
        except json.JSONDecodeError as e:
            print(f"FAIL: the JSON does not parse: {e}\n{p.stdout[:2000]}")
            return 1
        check(res["memif_zc"] is False, f"memif_zc {res['memif_zc']} without --memif-zc")
        sizes = [str(s) for s in res["sizes"]]
        check(sizes == ["64", "4096"], f"sizes {sizes}")
        check(res["failures"] == [], f"failed measurements {res['failures']}")
        for kind, metrics in KINDS.items():
            for m in metrics:
                for s in sizes:
                    v = res["median"].get(m, {}).get(s)
                    check(v is not None and math.isfinite(v) and v > 0, f"{m} at {s} B: {v}")
                    runs = res["runs"].get(m, {}).get(s, [])
                    check(len(runs) == res["rounds"], f"{m} at {s} B: {len(runs)} runs for {res['rounds']} rounds")
                    rtt = res["line_rtt_ns"].get(m, {}).get(s, [])
                    check(len(rtt) == len(runs) and all(math.isfinite(x) and x > 0 for x in rtt),
                          f"{m} at {s} B: line round trips {rtt} beside {len(runs)} runs")
        for kind in ("stack", "tcp-block", "tcp-busy"):
            bw = "stack.write_bw" if kind == "stack" else f"{kind}.bw"
            rate = "stack.write_rate" if kind == "stack" else f"{kind}.rate"
            for s in sizes:
                b, r = res["median"].get(bw, {}).get(s), res["median"].get(rate, {}).get(s)
                if b and r:
                    derived = r * 1e6 * int(s) / 2**20
                    check(abs(derived - b) <= 0.05 * b, f"{kind} at {s} B: rate {r} Mmsg/s x {s} B = {derived:.2f} MB/s, bw {b}")
        for name in RATIOS:
            v = res["ratios"].get(name, {}).get("64")
            check(v is not None and math.isfinite(v) and v > 0, f"ratio '{name}' at 64 B: {v}")
        status = res["verbs"]["status"]
        check(status.startswith("ran on ") or status.startswith("skipped: "), f"verbs status '{status}'")
        for png in ("lat.png", "bw.png"):
            path = os.path.join(d, png)
            ok = os.path.exists(path) and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
            check(ok, f"{png} missing or not a PNG")
    uroce_run(uroce, check)
    demo_kind(uroce, check)
    memif_zc(uroce, check)
    for f in failures:
        print("FAIL:", f)
    print(f"compare_smoke: {'PASS' if not failures else 'FAIL'} ({len(failures)} problem(s)); verbs: {status}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
