#!/usr/bin/python3
"""Turns the runs of tests/cc/report.sh into docs/cc/*.png and the generated
part of docs/CC.md (between <!-- cc-report:begin --> and <!-- cc-report:end -->).

Usage: plot.py RUN_DIR DOCS_DIR COMMIT
RUN_DIR holds runs.jsonl (one `uroce sim --json` summary per line, with a
"run" name) and csv/ (LABEL.series.csv, LABEL.fct.csv from --csv-dir).
"""
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# (run key, label): the schemes the plots show side by side.
SCHEMES = [("dcqcn", "DCQCN (paper)"), ("dcqcn_cx", "DCQCN (ConnectX)"), ("timely", "TIMELY"),
           ("timely_p", "TIMELY (patched)"), ("none", "no CC")]
COLORS = {"dcqcn": "tab:blue", "dcqcn_cx": "tab:cyan", "timely": "tab:orange", "timely_p": "tab:green",
          "none": "tab:red"}
NAMES = dict(SCHEMES, dcqcn_cxb="DCQCN (ConnectX, byte counter in bytes)",
             dcqcn_cx_p100="DCQCN (ConnectX), RED Pmax 100 %", dcqcn_pfc="DCQCN (paper) + PFC",
             dcqcn_cx_pfc="DCQCN (ConnectX) + PFC", timely_p_pfc="TIMELY (patched) + PFC", none_pfc="no CC + PFC",
             timely_p_b08="TIMELY (patched), beta 0.8", timely_p_b01="TIMELY (patched), beta 0.1")
INCAST_KEYS = ["dcqcn", "dcqcn_cx", "dcqcn_cxb", "dcqcn_cx_p100", "timely", "timely_p", "none", "dcqcn_pfc", "dcqcn_cx_pfc",
               "timely_p_pfc", "none_pfc", "timely_p_b08", "timely_p_b01"]


def csv_label(key, scenario, n):
    """The label `uroce sim` gives the run: SCENARIO-CC-nN, CC its --cc name."""
    cc = "dcqcn" if key.startswith("dcqcn") else "timely" if key.startswith("timely") else "none"
    return f"{scenario}-{cc}-n{n}"


def series(run_dir, key, scenario, n):
    path = os.path.join(run_dir, "csv", key, csv_label(key, scenario, n) + ".series.csv")
    with open(path) as f:
        rows = list(csv.DictReader(f))
    t = [float(r["t_us"]) / 1000 for r in rows]
    flows = sorted((k for k in rows[0] if k.startswith("goodput_gbps_")), key=lambda k: int(k.rsplit("_", 1)[1]))
    return t, rows, flows


def fcts(run_dir, key, scenario, n):
    with open(os.path.join(run_dir, "csv", key, csv_label(key, scenario, n) + ".fct.csv")) as f:
        return [r for r in csv.DictReader(f)]


def save(fig, docs, name):
    os.makedirs(os.path.join(docs, "cc"), exist_ok=True)
    fig.tight_layout()
    fig.savefig(os.path.join(docs, "cc", name), dpi=72)
    plt.close(fig)


def rate_grid(run_dir, docs, name, rows_spec, title):
    """Per-flow goodput over time, one column per scheme, one row per (scenario, n)."""
    fig, axes = plt.subplots(len(rows_spec), len(SCHEMES), figsize=(3.6 * len(SCHEMES), 2.8 * len(rows_spec)),
                             sharey="row", squeeze=False)
    for row, (scenario, n, rtitle) in enumerate(rows_spec):
        for col, (key, cname) in enumerate(SCHEMES):
            ax = axes[row][col]
            t, rows, flows = series(run_dir, key, scenario, n)
            for k in flows:
                ax.plot(t, [float(r[k]) for r in rows], lw=0.7)
            ax.set_title(f"{cname}: {rtitle}", fontsize=9)
            ax.set_xlabel("time (ms)", fontsize=8)
            ax.set_ylabel("goodput per flow (Gb/s)", fontsize=8)
            ax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=10)
    save(fig, docs, name)


def queue_plot(run_dir, docs, ns, buffer_kb):
    fig, axes = plt.subplots(1, len(ns) + 1, figsize=(4.3 * (len(ns) + 1), 2.8), squeeze=False)
    ax = axes[0][len(ns)]
    for cc, cname in SCHEMES:
        t, rows, _ = series(run_dir, cc, "incast", ns[-1])
        total, cum = 0, []
        for r in rows:
            total += int(r["retransmits"])
            cum.append(total)
        ax.plot(t, cum, lw=0.8, color=COLORS[cc], label=cname)
    ax.set_title(f"{ns[-1]}:1 incast: packets retransmitted (cumulative)", fontsize=9)
    ax.set_xlabel("time (ms)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7)
    for i, n in enumerate(ns):
        ax = axes[0][i]
        for cc, cname in SCHEMES:
            t, rows, _ = series(run_dir, cc, "incast", n)
            ax.plot(t, [max(float(r["queue_max_kb"]), 0.1) for r in rows], lw=0.8, color=COLORS[cc], label=cname)
        ax.axhline(buffer_kb, color="k", ls="--", lw=0.6, label="buffer")
        ax.set_yscale("log")
        ax.set_title(f"{n}:1 incast: switch egress queue (max per sample)", fontsize=9)
        ax.set_xlabel("time (ms)", fontsize=8)
        ax.set_ylabel("KiB", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
    save(fig, docs, "incast_queue.png")


def fct_plot(run_dir, docs):
    fig, axes = plt.subplots(1, 2, figsize=(11, 3))
    sizes = sorted({int(r["bytes"]) for r in fcts(run_dir, "dcqcn", "mixed", 8)})
    width = 0.16
    for j, (cc, cname) in enumerate(SCHEMES):
        rows = fcts(run_dir, cc, "mixed", 8)
        done = sorted(float(r["fct_us"]) for r in rows if float(r["fct_us"]) >= 0)
        if done:
            axes[0].plot(done, [(i + 1) / len(rows) for i in range(len(done))], color=COLORS[cc], label=cname)
        med = []
        for s in sizes:
            v = sorted(float(r["fct_us"]) for r in rows if int(r["bytes"]) == s and float(r["fct_us"]) >= 0)
            med.append(v[len(v) // 2] if v else 0)
        axes[1].bar([i + (j - 2) * width for i in range(len(sizes))], med, width, color=COLORS[cc], label=cname)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("flow completion time (us)", fontsize=8)
    axes[0].set_ylabel("fraction of short flows done", fontsize=8)
    axes[0].set_title("short flows next to 2 long flows: FCT CDF", fontsize=9)
    axes[0].legend(fontsize=7)
    axes[1].set_xticks(range(len(sizes)))
    axes[1].set_xticklabels([f"{s // 1024} KiB" for s in sizes], fontsize=8)
    axes[1].set_yscale("log")
    axes[1].set_ylabel("median FCT (us)", fontsize=8)
    axes[1].set_title("median FCT by flow size", fontsize=9)
    axes[1].legend(fontsize=7)
    save(fig, docs, "fct.png")


def connectx_plot(run_dir, docs):
    """DCQCN with the ConnectX defaults at 64:1, lossy and with PFC: queue,
    send rate of four flows, drops; first 10 ms."""
    fig, axes = plt.subplots(2, 2, figsize=(12, 5.2), squeeze=False)
    for col, (key, title) in enumerate([("dcqcn_cx", "lossy"), ("dcqcn_cx_pfc", "+ PFC")]):
        t, rows, _ = series(run_dir, key, "incast", 64)
        keep = [i for i, x in enumerate(t) if x <= 10]
        ax = axes[0][col]
        ax.plot([t[i] for i in keep], [float(rows[i]["queue_max_kb"]) for i in keep], lw=0.8, color="k", label="queue")
        ax2 = ax.twinx()
        ax2.bar([t[i] for i in keep], [int(rows[i]["drops"]) for i in keep], width=0.1, color="tab:red",
                label="drops per sample")
        ax.set_title(f"DCQCN (ConnectX) 64:1 {title}: queue (KiB) and drops", fontsize=9)
        ax.set_xlabel("time (ms)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax2.tick_params(labelsize=7)
        ax = axes[1][col]
        for f in range(4):
            ax.plot([t[i] for i in keep], [float(rows[i][f"send_gbps_{f}"]) for i in keep], lw=0.7,
                    label=f"flow {f}")
        ax.set_title(f"DCQCN (ConnectX) 64:1 {title}: send rate of flows 0-3 (Gb/s)", fontsize=9)
        ax.set_xlabel("time (ms)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
    save(fig, docs, "connectx.png")


def worst_window_jain(run_dir, key, n, conv_ms, scenario="incast", window_ms=5.0):
    """The lowest Jain's index of per-flow goodput over consecutive windows
    of window_ms in the steady state (from the middle of the run, or from
    convergence if later, as `uroce sim` measures it)."""
    t, rows, flows = series(run_dir, key, scenario, n)
    worst, start = 1.0, max(t[-1] / 2, conv_ms or 0)
    while start + window_ms <= t[-1] + 1e-9:
        sel = [r for x, r in zip(t, rows) if start < x <= start + window_ms]
        x = [sum(float(r[k]) for r in sel) for k in flows]
        s2 = sum(v * v for v in x)
        if s2 > 0:
            worst = min(worst, sum(x) ** 2 / (len(x) * s2))
        start += window_ms
    return worst


def fmt_conv(r):
    return f"{r['convergence_ms']:.1f}" if r["converged"] else "not converged"


def tables(runs, commit, run_dir):
    out = [f"Generated by `tests/cc/report.sh` at commit `{commit}` (parameters: `tests/cc/config.sh`).", ""]
    out.append("**N:1 incast** (steady state: from convergence or the middle of the run, whichever is later, to"
               " its end; Jain is over the flows' mean goodput in the steady state, and \"worst 5 ms\" is the"
               " lowest Jain of any 5 ms window in it; drops, retransmissions and timeouts over the whole run)")
    out.append("")
    out.append("| N | scheme | utilisation | Jain | worst 5 ms | convergence (ms) | p99 queue (KiB) | max queue (KiB) |"
               " drops | retransmits | timeouts | CNPs | PFC pauses |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in (2, 8, 32, 64):
        for key in INCAST_KEYS:
            r = runs.get(f"incast-{key}-n{n}")
            if not r:
                continue
            worst = worst_window_jain(run_dir, key, n, r["convergence_ms"] if r["converged"] else None)
            failed = f" ({r['failed_flows']} flows failed)" if r["failed_flows"] else ""
            out.append(f"| {n} | {NAMES[key]} | {r['util']:.3f} | {r['jain']:.4f} | {worst:.4f} | {fmt_conv(r)} |"
                       f" {r['p99_queue_kb']:.0f} | {r['max_queue_kb']:.0f} | {r['drops']} |"
                       f" {r['retransmits']}{failed} | {r['timeouts']} | {r['cnp_handled']} | {r['pfc_pauses']} |")
    out.append("")
    out.append(f"Switch buffer for the bottleneck port: {runs['incast-dcqcn-n8']['buffer_kb']:.0f} KiB.")
    out.append("")
    out.append("**READ incast** (host 0 READs 16 KiB at a time, 16 outstanding, from each of N hosts: the READ"
               " responses are the congested data; same definitions)")
    out.append("")
    out.append("| N | scheme | utilisation | Jain | worst 5 ms | convergence (ms) | p99 queue (KiB) | max queue (KiB) |"
               " drops | retransmits | timeouts | CNPs |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in (8, 64):
        for key in ("dcqcn", "dcqcn_cx", "none"):
            r = runs.get(f"incast-read-{key}-n{n}")
            if not r:
                continue
            worst = worst_window_jain(run_dir, key, n, r["convergence_ms"] if r["converged"] else None, "incast-read")
            out.append(f"| {n} | {NAMES[key]} | {r['util']:.3f} | {r['jain']:.4f} | {worst:.4f} | {fmt_conv(r)} |"
                       f" {r['p99_queue_kb']:.0f} | {r['max_queue_kb']:.0f} | {r['drops']} | {r['retransmits']} |"
                       f" {r['timeouts']} | {r['cnp_handled']} |")
    out.append("")
    out.append("**Other scenarios** (8 hosts for mixed: 2 long flows, 6 hosts sending 16 KiB - 1 MiB flows)")
    out.append("")
    out.append("| scenario | scheme | utilisation | Jain | convergence (ms) | p99 queue (KiB) | drops | retransmits |"
               " short flows | FCT p50 (us) | FCT p99 (us) |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for s, n in (("share", 2), ("join-leave", 3), ("mixed", 8)):
        for key, name in SCHEMES:
            r = runs.get(f"{s}-{key}-n{n}")
            if not r:
                continue
            shorts = f"{r['short_flows'] - r['unfinished']}/{r['short_flows']}" if r["short_flows"] else "-"
            fct50 = f"{r['fct_p50_us']:.0f}" if r["short_flows"] else "-"
            fct99 = f"{r['fct_p99_us']:.0f}" if r["short_flows"] else "-"
            out.append(f"| {s} | {name} | {r['util']:.3f} | {r['jain']:.4f} | {fmt_conv(r)} | {r['p99_queue_kb']:.0f} |"
                       f" {r['drops']} | {r['retransmits']} | {shorts} | {fct50} | {fct99} |")
    out.append("")
    out.append("![per-flow goodput, incast](cc/incast_rates.png)")
    out.append("")
    out.append("![queue depth, incast](cc/incast_queue.png)")
    out.append("")
    out.append("![DCQCN with the ConnectX defaults at 64:1](cc/connectx.png)")
    out.append("")
    out.append("![two flows sharing a link; a flow joining and leaving](cc/scenarios.png)")
    out.append("")
    out.append("![flow completion times](cc/fct.png)")
    return "\n".join(out)


def main():
    run_dir, docs, commit = sys.argv[1], sys.argv[2], sys.argv[3]
    runs = {}
    with open(os.path.join(run_dir, "runs.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            runs[r["run"]] = r
    buffer_kb = runs["incast-dcqcn-n8"]["buffer_kb"]
    rate_grid(run_dir, docs, "incast_rates.png",
              [("incast", 2, "2:1"), ("incast", 8, "8:1"), ("incast", 64, "64:1")],
              "per-flow goodput (each line one flow)")
    queue_plot(run_dir, docs, (8, 64), buffer_kb)
    connectx_plot(run_dir, docs)
    rate_grid(run_dir, docs, "scenarios.png",
              [("share", 2, "2 flows, the second joins at T/5"),
               ("join-leave", 3, "flow 1 joins at T/4, flow 2 runs T/2..3T/4")],
              "per-flow goodput")
    fct_plot(run_dir, docs)
    md_path = os.path.join(docs, "CC.md")
    with open(md_path) as f:
        md = f.read()
    begin, end = "<!-- cc-report:begin -->", "<!-- cc-report:end -->"
    a, b = md.index(begin) + len(begin), md.index(end)
    md = md[:a] + "\n" + tables(runs, commit, run_dir) + "\n" + md[b:]
    with open(md_path, "w") as f:
        f.write(md)
    print(f"plot.py: wrote {md_path} and {docs}/cc/*.png", file=sys.stderr)


if __name__ == "__main__":
    main()
