#!/usr/bin/env bash
# Installs what is missing (Debian 12), builds the `uroce` front end and runs
# the demo: decode every RoCE frame captured in tests/data (rxe <-> rxe and
# host <-> peer traces) and verify each one's lengths, opcode and ICRC.
set -euo pipefail
cd "$(dirname "$0")/.."

.ci/install_deps.sh
[[ -f build/build.ninja ]] || meson setup build
ninja -C build -j"$(nproc)" apps/uroce
./build/apps/uroce dump --verify tests/data/*.pcap
