#!/usr/bin/python3
"""Charts of a `uroce compare` run: latency and bandwidth against message size.

Usage: /usr/bin/python3 bench/compare_plot.py COMPARE.json OUT_DIR
Writes OUT_DIR/lat.png (half round trip, usec, log-log) and OUT_DIR/bw.png
(average MB/sec, log-log), one line per kind, from the medians in the JSON
that `uroce compare --json` (or --charts) writes. Needs python3-matplotlib
(Debian's, hence /usr/bin/python3).
"""
import json
import os
import sys

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LAT = [("stack.write_lat", "uroce RC WRITE (memif)"), ("stack.send_lat", "uroce RC SEND (memif)"),
       ("verbs.write_lat", "verbs WRITE"), ("verbs.send_lat", "verbs SEND"),
       ("uroce-run.write_lat", "stock ib_write_lat under uroce run (memif)"),
       ("floor.lat", "raw memif floor: the message's frames, payload copied"),
       ("floor-1frame.lat", "raw memif floor: one frame (before issue 20)"), ("tcp-busy.lat", "kernel TCP, busy poll"),
       ("tcp-block.lat", "kernel TCP, blocking")]
BW = [("stack.write_bw", "uroce RC WRITE (memif)"), ("verbs.write_bw", "verbs WRITE"),
      ("uroce-run.write_bw", "stock ib_write_bw under uroce run (memif)"),
      ("floor.bw", "raw memif floor: the message's frames, payload copied"),
      ("floor-1frame.bw", "raw memif floor: one frame (before issue 20)"), ("tcp-busy.bw", "kernel TCP, busy poll"),
      ("tcp-block.bw", "kernel TCP, blocking")]


def size_label(n):
    """64, 4K, 64K, 1M, 4M: the size axis' tick labels."""
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def chart(res, series, ylabel, title, path):
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=90)
    drawn = 0
    for key, label, *style in series:  # style: [linestyle ("-" if none), [color]]
        pts = sorted((int(s), v) for s, v in res["median"].get(key, {}).items() if v > 0)
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label,
                linestyle=style[0] if style else "-", color=style[1] if len(style) > 1 else None)
        drawn += 1
    ax.set_xscale("log", base=2)
    sizes = sorted(int(s) for s in res["sizes"])
    ax.set_xticks(sizes, [size_label(s) for s in sizes])  # every size run, 4 MB included
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_yscale("log")
    ax.set_xlabel("message size [bytes]")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if drawn:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return drawn


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        res = json.load(f)
    sub = f"medians of {res['rounds']} interleaved rounds, path MTU {res['mtu']}, {res['machine']['cpus_online']} CPUs"
    n = chart(res, LAT, "half round trip [usec]", "Latency (" + sub + ")", os.path.join(sys.argv[2], "lat.png"))
    m = chart(res, BW, "bandwidth [MB/sec]", "Bandwidth (" + sub + ")", os.path.join(sys.argv[2], "bw.png"))
    print(f"compare_plot: {n} latency and {m} bandwidth series in {sys.argv[2]}/lat.png, bw.png", file=sys.stderr)
    return 0 if n and m else 1


if __name__ == "__main__":
    sys.exit(main())
