// Memory regions (IBA 10.6): the key table, access flags, bounds checks and
// invalidation. An L_Key/R_Key is index bits (the table slot) plus random key
// bits (IBA 10.6.3.1: keys must not be guessable), drawn from a splitmix64
// stream seeded by DeviceConfig::key_seed, and drawn again on every
// registration of a slot so a stale key never matches a new region.
// One key serves as both L_Key and R_Key (as rxe does); the access flags decide
// what it may be used for.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <uroce/verbs.h>

#include "stack/common/state_memory.h"

namespace uroce::mem {

/// A registered region. `pub` is what the application sees.
struct MrEntry {
  Mr pub{};
  bool valid = false;  // registered and not invalidated (IBA 10.6.6: Invalid state)
  bool in_use = false; // slot taken (valid or invalidated)
};

class MrTable {
 public:
  MrTable() = default;
  /// Keeps the transmit reference counts alive (leaks them) if a port still
  /// holds zero-copy frames: their free callbacks run after the context is gone.
  ~MrTable();
  MrTable(const MrTable&) = delete;
  MrTable& operator=(const MrTable&) = delete;

  /// Sizes the table (rounded up to a power of two) and seeds the key stream.
  void init(uint32_t max_mr, uint64_t key_seed);

  /// Registers [addr, addr+length) of pd with `access` (AccessFlags). Control path.
  Result<Mr*> reg(Context* ctx, Pd* pd, void* addr, size_t length, uint32_t access);
  /// kBusy while zero-copy frames that point into the region are in flight
  /// (tx_refs of its key is nonzero): the port has not freed them yet.
  Status dereg(Mr* mr);

  /// The count of transmitted frames whose payload is an external buffer in
  /// the region `key` names (its slot), taken when a zero-copy frame is built
  /// and dropped by the mbuf's free callback, on whatever thread the port
  /// frees it. Data path.
  std::atomic<uint32_t>& tx_refs(uint32_t key) { return tx_refs_[key & index_mask_]; }

  /// Returns the region `key` names if it is valid, belongs to pd, allows every
  /// bit of `access` and covers [va, va+len) without wrapping; else nullptr.
  /// A zero-length access checks nothing and returns a non-null sentinel
  /// (C9-88: a zero-length RDMA access carries no valid R_Key).
  const MrEntry* check(uint32_t key, const Pd* pd, uint64_t va, uint64_t len, uint32_t access) const;

  /// LOCAL_INV (remote = false) or SEND with Invalidate from a peer (remote =
  /// true) (IBA 10.6.6): moves the region to the Invalid state. False if the
  /// key names no valid region of pd or, for a remote invalidation, a region
  /// registered without kAccessRemoteInvalidate.
  bool invalidate(uint32_t key, const Pd* pd, bool remote);

 private:
  uint32_t next_key_bits();

  StateArray<MrEntry> slots_;
  StateArray<std::atomic<uint32_t>> tx_refs_;  // per slot, see tx_refs()
  uint32_t index_mask_ = 0;
  uint64_t rng_ = 0;
  MrEntry zero_len_{};
};

}  // namespace uroce::mem
