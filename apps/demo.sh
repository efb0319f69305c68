#!/usr/bin/env bash
# Installs what is missing (Debian 12), builds the `uroce` front end and runs
# the demo: two uroce endpoints in two processes on a DPDK memif link run RC
# SEND, WRITE, READ and atomics (pingpong latency and streaming bandwidth,
# every byte verified); then decode and verify every RoCE frame captured from
# Linux rxe in tests/data (lengths, opcodes, ICRC).
set -euo pipefail
cd "$(dirname "$0")/.."

.ci/install_deps.sh
[[ -f build/build.ninja ]] || meson setup build
ninja -C build -j"$(nproc)" apps/uroce
./build/apps/uroce demo
./build/apps/uroce dump --verify tests/data/*.pcap | tail -n 12
