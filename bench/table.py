#!/usr/bin/env python3
"""Turns Google Benchmark JSON (run with --benchmark_repetitions and
--benchmark_report_aggregates_only) into the markdown table of
docs/PERFORMANCE.md: median CPU time per call, median GB/s (10^9 bytes/s,
not GiB/s), median Mframes/s and the coefficient of variation of the CPU time
across repetitions. CPU time, not wall time: on a shared machine a thread that
is preempted loses wall time but not CPU time, and Google Benchmark computes
its rates from CPU time too."""

import json
import sys


def rows(path):
    with open(path) as f:
        doc = json.load(f)
    by_name = {}
    for b in doc["benchmarks"]:
        if b.get("run_type") != "aggregate":
            continue
        agg = by_name.setdefault(b["run_name"], {})
        agg[b["aggregate_name"]] = b
    return doc["context"], by_name


def fmt_time(b):
    unit = b.get("time_unit", "ns")
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]
    ns = b["cpu_time"] * scale
    return f"{ns:.1f}" if ns < 1000 else f"{ns:.0f}"


def main(paths):
    print("| benchmark | ns | GB/s | Mframes/s | CV | note |")
    print("|---|---:|---:|---:|---:|---|")
    context = {}
    for path in paths:
        ctx, by_name = rows(path)
        context = {**ctx, **context}  # the first file's values win
        for name, agg in by_name.items():
            med = agg["median"]
            gbps = med.get("bytes_per_second")
            fps = med.get("items_per_second")
            cv = agg.get("cv", {}).get("cpu_time")
            cells = [
                name,
                fmt_time(med),
                f"{gbps / 1e9:.2f}" if gbps else "",
                f"{fps / 1e6:.1f}" if fps else "",
                f"{cv * 100:.1f}%" if cv is not None else "",
                med.get("label", ""),
            ]
            print("| " + " | ".join(cells) + " |")
    if context:
        print()
        print(
            f"Context: {context.get('num_cpus')} CPUs at {context.get('mhz_per_cpu')} MHz, "
            f"run {context.get('date')}, benchmark library built as "
            f"{context.get('library_build_type')}, "
            f"DPDK max SIMD bitwidth {context.get('dpdk_max_simd_bitwidth', 'n/a')}."
        )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: table.py BENCH.json...")
    main(sys.argv[1:])
