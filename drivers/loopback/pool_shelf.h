// Frame pools kept for this process's next fabric. DPDK zeroes a mempool's
// memory as it frees it, about 9.5 MB for a port's 2,048 frames: that was
// more than half the time of a `uroce sim` seed, which builds a fabric and
// tears it down. A fabric takes its pools here and gives them back as it
// goes; a pool is kept only with every frame back in it (so a frame leaked
// by a device never reaches the next fabric), and at most kKeptPools.
// Thread-safe: the fabrics of realtime ports live in several threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <uroce/status.h>

struct rte_mempool;

namespace uroce::loopback {

inline constexpr size_t kKeptPools = 16;

/// A pool of n frames (create_frame_pool's kind): a kept one of that size,
/// else a new one named name (unique, as create_frame_pool wants). When DPDK
/// has no memory left for it, the kept pools are freed and it tries again.
/// Errors: kResourceExhausted.
Result<rte_mempool*> take_frame_pool(const std::string& name, uint32_t n);

/// Gives back a pool from take_frame_pool (null: nothing): kept if every
/// frame is in it and there is room, else freed.
void give_back_frame_pool(rte_mempool* mp);

/// How many pools are kept now.
size_t kept_frame_pools();

/// Frees the kept pools (what take_frame_pool does for a pool that does not
/// fit beside them).
void free_kept_frame_pools();

}  // namespace uroce::loopback
