// DPDK EAL start-up for uroce programs and tests. DPDK is required, a NIC is
// not: with the defaults EAL runs without hugepages or PCI, so the stack, the
// in-memory fabric and every protocol test run on any Linux box.
#pragma once

#include <string>
#include <vector>

#include <uroce/status.h>

struct rte_mempool;

namespace uroce {

/// Arguments EAL gets when the user passes none: no hugepages, no PCI scan,
/// no shared config files, 512 MB, quiet logs.
std::vector<std::string> default_eal_args();

/// Initialises EAL once per process with args (argv[0] is added). Later calls
/// succeed without doing anything. Returns kUnavailable if EAL refuses.
/// Control path: call it from the main thread before any other uroce call
/// (not thread-safe). EAL's telemetry socket, which `uroce stat` and
/// dpdk-telemetry.py read, lies in EAL's runtime directory
/// (/var/run/dpdk/<--file-prefix> for root), with or without --no-shconf.
Status init_eal(const std::vector<std::string>& args = default_eal_args());

/// The runtime folder EAL makes for file_prefix, as EAL finds it:
/// $RUNTIME_DIRECTORY/dpdk/<prefix> if set, else /var/run/dpdk/<prefix> for
/// root, else $XDG_RUNTIME_DIR/dpdk/<prefix> or /tmp/dpdk/<prefix>. It holds
/// the telemetry socket (dpdk_telemetry.v2) and, without --no-shconf, the
/// shared config; EAL never removes the folder itself. Control path.
std::string eal_runtime_dir(const std::string& file_prefix);

/// init_eal, but the calling thread keeps the CPUs it had (rte_eal_init pins
/// it to the main lcore): for a program that places its threads itself, such
/// as a verbs program under `uroce run` or fuzzers run side by side (pinned,
/// every one of them would share the first CPU).
Status init_eal_unpinned(const std::vector<std::string>& args = default_eal_args());

/// While it lives, the calling thread, one the program started rather than
/// EAL, has an lcore ID of its own (rte_thread_register) and with it a cache
/// in every mempool. Without one, each mbuf the thread takes or frees goes
/// through the pool's shared ring, first in first out, so a thread that
/// moves frames cycles through the whole pool: a 64 B ib_write_bw server
/// under `uroce run` (its engine thread does the receiving) took a page fault
/// on about 400 mbufs' first use, 5 to 10 us each. Best effort: where EAL has
/// no ID left (RTE_MAX_LCORE) or refuses, the thread runs as before. Call it
/// after init_eal.
class ThreadLcore {
 public:
  ThreadLcore();
  ~ThreadLcore();
  ThreadLcore(const ThreadLcore&) = delete;
  ThreadLcore& operator=(const ThreadLcore&) = delete;

 private:
  bool registered_;  // the thread got an ID: the destructor gives it back
};

/// Mbuf data room for any RoCE frame up to a 4096-byte path MTU (plus VLAN,
/// IPv6, the largest transport headers and ICRC), after the headroom.
inline constexpr unsigned kFrameRoomBytes = 4352;

/// Creates a packet-mbuf pool of n frames of kFrameRoomBytes (name must be
/// unique). Control path; the caller owns the pool (rte_mempool_free).
/// Errors: kResourceExhausted.
Result<rte_mempool*> create_frame_pool(const std::string& name, unsigned n);

}  // namespace uroce
