#!/usr/bin/python3
"""Charts of the middleware comparisons: latency and bandwidth against message
size through each middleware over uroce (solid) and over its kernel-TCP
transport (dashed), from the JSON that bench/middleware_compare.py --json
(libfabric's fi_pingpong) and tests/middleware/ucx_mpi.py --compare N JSON
(ucx_perftest, the MPI program) write: {"cpu", "rounds", "sizes", "median":
{"LAYER.TRANSPORT.lat|bw": {size: value}}}.

Usage: /usr/bin/python3 bench/middleware_plot.py OUT_DIR RESULT.json...
Writes OUT_DIR/middleware_lat.png (half round trip, usec) and
OUT_DIR/middleware_bw.png (MB/sec), both log-log, and prints uroce / TCP at
each size. Needs python3-matplotlib (Debian's, hence /usr/bin/python3).
"""
import json
import os
import sys

from compare_plot import chart  # noqa: E402  (one chart style for every comparison)

LAYERS = [("libfabric", "fi_pingpong verbs;ofi_rxm rdm", "C0"), ("ucx", "ucx_perftest tag (rc_verbs)", "C1"),
          ("mpi", "Open MPI pml ucx (rc_verbs)", "C2")]  # one color per layer
TRANSPORTS = [("uroce", "uroce", "-"), ("tcp", "kernel TCP", "--")]


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    res = {"median": {}, "sizes": set()}
    cpus, rounds = set(), set()
    for path in sys.argv[2:]:
        with open(path) as f:
            r = json.load(f)
        res["median"].update(r["median"])
        res["sizes"].update(r["sizes"])
        cpus.add(r["cpu"])
        rounds.add(r["rounds"])
    sub = f"medians of {'/'.join(map(str, sorted(rounds)))} rounds; {'; '.join(sorted(cpus))}"
    drawn = []
    for metric, ylabel, name in (("lat", "half round trip [usec]", "middleware_lat.png"),
                                 ("bw", "bandwidth [MB/sec]", "middleware_bw.png")):
        series = [(f"{layer}.{t}.{metric}", f"{label} over {tl}", ls, color)
                  for layer, label, color in LAYERS for t, tl, ls in TRANSPORTS]
        drawn.append(chart(res, series, ylabel, f"Middleware {metric} ({sub})", os.path.join(sys.argv[1], name)))
        for layer, label, _ in LAYERS:
            u, t = res["median"].get(f"{layer}.uroce.{metric}", {}), res["median"].get(f"{layer}.tcp.{metric}", {})
            ratios = [f"{s}: {u[s] / t[s]:.2f}" for s in sorted(u, key=int) if s in t and t[s] > 0]
            if ratios:
                print(f"{label} {metric}, uroce / TCP: " + ", ".join(ratios))
    print(f"middleware_plot: {drawn[0]} latency and {drawn[1]} bandwidth series in {sys.argv[1]}", file=sys.stderr)
    return 0 if all(drawn) else 1


if __name__ == "__main__":
    sys.exit(main())
