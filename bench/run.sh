#!/usr/bin/env bash
# Builds the microbenchmarks (release) and runs them the way
# docs/PERFORMANCE.md reports them: 5 repetitions, aggregates only; then
# prints the medians as a markdown table. Takes about 3 minutes.
#   bench/run.sh [BUILD_DIR]        (default build-bench)
# Extra crc_bench arguments can be given in CRC_BENCH_ARGS, e.g.
#   CRC_BENCH_ARGS=--force-max-simd-bitwidth=256 bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-bench}
[[ -f $build/build.ninja ]] || meson setup "$build" --buildtype=release
ninja -C "$build" bench/crc_bench bench/wire_bench
args=(--benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_out_format=json)
# shellcheck disable=SC2086  # CRC_BENCH_ARGS is a list of words
"$build/bench/crc_bench" "${args[@]}" --benchmark_out="$build/crc_bench.json" ${CRC_BENCH_ARGS:-}
"$build/bench/wire_bench" "${args[@]}" --benchmark_out="$build/wire_bench.json"
python3 bench/table.py "$build/crc_bench.json" "$build/wire_bench.json"
