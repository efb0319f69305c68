#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, -Dfuzz=true) in
# build-fuzz/ if needed and runs each for N seconds (default 60, or
# $FUZZ_SECONDS) from its committed corpus in tests/fuzz/corpus/<target>,
# $FUZZ_JOBS of them at a time (default: one a CPU; each fuzzer is one
# single-threaded process, so each still gets its N seconds of a CPU).
# Exits nonzero if any ends with a crash, sanitizer report, leak, timeout or
# oracle failure; the input that did it is left in
# build-fuzz/fuzz-artifacts/<target>/ (replay: build-fuzz/tests/fuzz/fuzz_<target>
# <file>). New inputs found during the run go to a scratch directory, so the
# committed corpus stays as it is. See docs/FUZZING.md.
#   tests/fuzz/run.sh [seconds] [target...]     targets: packet cm_mad cm_protocol rx
set -euo pipefail
cd "$(dirname "$0")/../.."

secs=${1:-${FUZZ_SECONDS:-60}}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(packet cm_mad cm_protocol rx)
build=${FUZZ_BUILD_DIR:-build-fuzz}

if [[ ! -f $build/build.ninja ]]; then
  CC=clang CXX=clang++ meson setup "$build" -Dfuzz=true -Db_sanitize=address,undefined \
    -Db_lundef=false --buildtype=debugoptimized
fi
ninja -C "$build" "${targets[@]/#/tests/fuzz/fuzz_}"

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
jobs=${FUZZ_JOBS:-$(nproc)}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# One target's run; its status in $scratch/<target>.rc, its log in $scratch/<target>.log.
fuzz() {
  local t=$1 rc=0
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t/" \
    "$scratch/$t" "tests/fuzz/corpus/$t" 2>"$scratch/$t.log" || rc=$?
  echo "$rc" >"$scratch/$t.rc"
}

for t in "${targets[@]}"; do
  mkdir -p "$build/fuzz-artifacts/$t" "$scratch/$t"
  while (($(jobs -pr | wc -l) >= jobs)); do wait -n || true; done
  echo "== fuzz_$t: ${secs} s"
  fuzz "$t" &
done
wait

failed=()
for t in "${targets[@]}"; do
  if [[ $(cat "$scratch/$t.rc") != 0 ]]; then
    tail -n 60 "$scratch/$t.log"
    echo "== fuzz_$t FAILED; reproducer in $build/fuzz-artifacts/$t/" >&2
    failed+=("$t")
  else
    echo "== fuzz_$t:"
    grep -E '^(stat::number_of_executed_units|stat::new_units_added|#[0-9]+ +DONE)' "$scratch/$t.log" || true
  fi
done
((${#failed[@]} == 0)) || exit 1
echo "== fuzz: ${targets[*]} ran ${secs} s each without a finding, ${jobs} at a time"
