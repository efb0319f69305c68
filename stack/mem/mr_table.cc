// Memory region table (IBA 10.6): registration, keys, checks, invalidation.
#include "stack/mem/mr_table.h"

#include <bit>

#include "stack/common/rng.h"

namespace uroce::mem {

namespace {

constexpr uint32_t kAllAccess =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic | kAccessRemoteInvalidate;

}  // namespace

void MrTable::init(uint32_t max_mr, uint64_t key_seed) {
  const uint32_t n = std::bit_ceil(max_mr < 2 ? 2u : max_mr);
  slots_ = make_state_array<MrEntry>(n);
  tx_refs_ = make_state_array<std::atomic<uint32_t>>(n);
  index_mask_ = n - 1;
  rng_ = key_seed;
}

MrTable::~MrTable() {
  if (!tx_refs_) return;
  for (uint32_t i = 0; i <= index_mask_; ++i) {
    if (tx_refs_[i].load(std::memory_order_acquire)) {
      (void)tx_refs_.release();  // frames still in a port: their callbacks will write here
      return;
    }
  }
}

uint32_t MrTable::next_key_bits() { return uint32_t(splitmix64(rng_)) & ~index_mask_; }

Result<Mr*> MrTable::reg(Context* ctx, Pd* pd, void* addr, size_t length, uint32_t access) {
  if (!pd || (access & ~kAllAccess)) return Status(StatusCode::kInvalidArgument, "bad pd or access flags");
  // IBA 10.6.3.1: Remote Write or Remote Atomic requires Local Write.
  if ((access & (kAccessRemoteWrite | kAccessRemoteAtomic)) && !(access & kAccessLocalWrite)) {
    return Status(StatusCode::kInvalidArgument, "remote write/atomic access needs local write");
  }
  const auto va = reinterpret_cast<uint64_t>(addr);
  if (va + length < va) return Status(StatusCode::kInvalidArgument, "region wraps the address space");
  for (uint32_t i = 0; i <= index_mask_; ++i) {
    MrEntry& e = slots_[i];
    if (e.in_use) continue;
    uint32_t key = next_key_bits() | i;
    if (key == e.pub.lkey) key ^= index_mask_ + 1;  // re-registration always changes the key
    e = MrEntry{Mr{ctx, pd, addr, length, access, key, key}, true, true};
    return &e.pub;
  }
  return Status(StatusCode::kResourceExhausted, "memory region table full");
}

Status MrTable::dereg(Mr* mr) {
  if (!mr) return Status(StatusCode::kInvalidArgument, "null mr");
  MrEntry& e = slots_[mr->lkey & index_mask_];
  if (!e.in_use || &e.pub != mr) return Status(StatusCode::kNotFound, "not a registered mr");
  if (tx_refs_[mr->lkey & index_mask_].load(std::memory_order_acquire)) {
    return Status(StatusCode::kBusy, "zero-copy frames from this mr are still in the port");
  }
  e.in_use = false;
  e.valid = false;  // pub.lkey stays so the next registration draws a different key
  return {};
}

const MrEntry* MrTable::check(uint32_t key, const Pd* pd, uint64_t va, uint64_t len, uint32_t access) const {
  if (len == 0) return &zero_len_;
  const MrEntry& e = slots_[key & index_mask_];
  if (!e.valid || e.pub.lkey != key || e.pub.pd != pd) return nullptr;
  if ((e.pub.access & access) != access) return nullptr;
  const auto base = reinterpret_cast<uint64_t>(e.pub.addr);
  if (va + len < va || va < base || va + len > base + e.pub.length) return nullptr;  // bounds, and no va + len wrap
  return &e;
}

bool MrTable::invalidate(uint32_t key, const Pd* pd, bool remote) {
  MrEntry& e = slots_[key & index_mask_];
  if (!e.valid || e.pub.lkey != key || e.pub.pd != pd) return false;
  if (remote && !(e.pub.access & kAccessRemoteInvalidate)) return false;
  e.valid = false;
  return true;
}

}  // namespace uroce::mem
