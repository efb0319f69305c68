#!/usr/bin/env bash
# Installs uroce's build and test dependencies on Debian 12 with apt-get,
# only those that are missing, so it is quick on a machine that has them.
# Runs as root (or through sudo). Used by apps/demo.sh and tests/run_all.sh.
set -euo pipefail

pkgs=(
  clang
  dpdk
  dpdk-dev
  g++
  gdb
  ibverbs-utils
  iproute2
  iputils-ping
  libbenchmark-dev
  libboost-dev
  libclang-rt-14-dev
  libdpdk-dev
  libfabric-bin
  libgmock-dev
  libgtest-dev
  libibverbs-dev
  libisal-dev
  librdmacm-dev
  libopenmpi-dev
  make
  perftest
  meson
  ninja-build
  openmpi-bin
  pkg-config
  rdmacm-utils
  python3
  python3-matplotlib
  qperf
  tshark
  ucx-utils
  zlib1g-dev
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

sudo=()
((EUID == 0)) || sudo=(sudo)
echo "installing: ${missing[*]}"
# tshark asks whether non-root users may capture; answer no, without a prompt.
echo 'wireshark-common wireshark-common/install-setuid boolean false' | "${sudo[@]}" debconf-set-selections
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
