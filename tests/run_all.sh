#!/usr/bin/env bash
# Installs what is missing (Debian 12), then builds and tests uroce three times:
#   build/       -Dwerror=true -Ddebug=false    every suite  (meson test; -O2 and the asserts as the
#                                               default build, without -g: nothing here reads debug
#                                               information, and it is about 30 % of the compile time)
#   build-asan/  -Dwerror=true, ASan + UBSan    the unit, hostile, sim, verbs and conform suites (300 sim seeds;
#                                               the stock verbs binaries load our libraries with the runtimes)
#   build-fuzz/  clang, libFuzzer, ASan + UBSan each fuzz target for $FUZZ_SECONDS (60) s
# Exits nonzero on the first failure. Run as root on a fresh machine, or as a
# user who has the packages already. This is what .ci/run runs.
set -euo pipefail
cd "$(dirname "$0")/.."

.ci/install_deps.sh

# meson setup, or reconfigure a build dir that exists already.
setup() {
  local dir=$1
  shift
  if [[ -f $dir/build.ninja ]]; then
    meson setup --reconfigure "$dir" "$@"
  else
    meson setup "$dir" "$@"
  fi
}

start=$SECONDS
setup build -Dwerror=true -Ddebug=false
ninja -C build -j"$(nproc)"
meson test -C build --print-errorlogs
echo "== build: built and tested in $((SECONDS - start)) s"

# -O0 (buildtype debug) compiles much faster, and the optimised build above
# has had the warnings that need optimisation. meson test builds only what
# the unit suite needs. ASan and LeakSanitizer reports fail a test by default;
# UBSan's only with halt_on_error.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
start=$SECONDS
setup build-asan -Dwerror=true -Db_sanitize=address,undefined --buildtype=debug
meson test -C build-asan --suite unit --suite hostile --suite sim --suite verbs --suite conform --print-errorlogs
echo "== build-asan: built and tested in $((SECONDS - start)) s"

start=$SECONDS
tests/fuzz/run.sh "${FUZZ_SECONDS:-60}"
echo "== build-fuzz: built and fuzzed in $((SECONDS - start)) s"
