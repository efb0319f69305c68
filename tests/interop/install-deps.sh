#!/bin/sh
# Host packages for the interop harness (Debian 12, run as root). build_guest.py installs
# the same set on demand (unless UROCE_INTEROP_NO_APT=1); this script is for CI images.
#   * guest user space is copied from: rdma-core ibverbs-utils ibverbs-providers perftest
#     rdmacm-utils qperf libfabric-bin ucx-utils iproute2 (+ their libraries, UCX's modules),
#     openmpi-bin libopenmpi3 libpmix2 (orted, libmpi, the MCA components); libopenmpi-dev
#     (mpicc) builds the MPI cells' program on the host
#   * the kernel image and busybox-static are fetched with `apt-get download` into the cache
#     by build_guest.py and unpacked with dpkg -x (busybox-static is not installed: it
#     conflicts with the busybox package)
#   * dpdk-testpmd is in dpdk-dev on Debian 12; the af_packet PMD is a separate library
set -eu
PKGS="qemu-system-x86 rdma-core ibverbs-utils ibverbs-providers libibverbs1 librdmacm1 perftest
rdmacm-utils qperf libfabric-bin libfabric1 ucx-utils libucx0 openmpi-bin libopenmpi3 openmpi-common
libpmix2 libhwloc15 libevent-core-2.1-7 libopenmpi-dev iproute2 libc6 libgcc-s1 dpdk-dev
librte-net-af-packet23 librte-mempool-ring23 python3"
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $PKGS || {
  apt-get update -q && apt-get install -y -q --no-install-recommends $PKGS; }
