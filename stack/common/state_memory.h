// Memory for the stack's own per-object state: the verbs objects (QPs, CQs,
// SRQs, PDs, AHs), their rings and scatter lists, and the per-slot tables of a
// device (QP counters, timers, the MR table). It comes from one process-wide
// pool whose chunks lie on transparent huge pages where the kernel offers them
// (madvise(MADV_HUGEPAGE); Linux's THP setting "always" or "madvise").
//
// Why: with thousands of QPs the data path's first touch of a QP's state, its
// next WQE and its counters is a cache miss, and with 4 KiB pages it is a TLB
// miss too: engine_bench's 16,000 QPs a side with 32 WRs in flight each hold
// hundreds of MB of state (QP objects, WQE rings, a CQ of half a million
// entries), tens of thousands of 4 KiB pages against a second-level TLB of
// about 2,000 entries; on 2 MiB pages, a few hundred (docs/PERFORMANCE.md,
// "Many QPs": engine/qps/16000/32 went from 311 to 247-250 ns per WRITE). Packet
// buffers are not here: they are DPDK's (hugepages unless --no-huge). A huge
// page is resident as a whole once touched: a process that would rather
// spend TLB misses than memory sets prctl(PR_SET_THP_DISABLE).
//
// Control path only (create and destroy); the pool is thread-safe. Under
// AddressSanitizer everything goes to operator new instead, so that ASan
// still sees each object's bounds.
#pragma once

#include <cstddef>
#include <memory>
#include <memory_resource>

namespace uroce {

/// The process-wide resource the stack's state is allocated from. Never
/// destroyed: objects an application keeps in statics may outlive it otherwise.
std::pmr::memory_resource* state_memory();

/// Bytes of state_memory() the process holds now: what its objects asked
/// for, without the pool's own slack (its chunks are larger and are kept for
/// reuse when objects go).
size_t state_memory_bytes();

/// Returns an array to state_memory(); it knows the array's length.
template <typename T>
class StateArrayDelete {
 public:
  StateArrayDelete() = default;
  explicit StateArrayDelete(size_t n) : n_(n) {}
  void operator()(T* p) const {
    std::destroy_n(p, n_);
    std::pmr::polymorphic_allocator<T>(state_memory()).deallocate(p, n_);
  }

 private:
  size_t n_ = 0;
};
template <typename T>
using StateArray = std::unique_ptr<T[], StateArrayDelete<T>>;

/// An array of n value-initialised T from state_memory().
template <typename T>
StateArray<T> make_state_array(size_t n) {
  std::pmr::polymorphic_allocator<T> a(state_memory());
  T* p = a.allocate(n);
  std::uninitialized_value_construct_n(p, n);
  return StateArray<T>(p, StateArrayDelete<T>(n));
}

/// One T from state_memory().
template <typename T>
struct StateDelete {
  void operator()(T* p) const { std::pmr::polymorphic_allocator<T>(state_memory()).delete_object(p); }
};
template <typename T>
using StateBox = std::unique_ptr<T, StateDelete<T>>;

template <typename T>
StateBox<T> make_state_object() {
  return StateBox<T>(std::pmr::polymorphic_allocator<T>(state_memory()).template new_object<T>());
}

}  // namespace uroce
