// Fixed power-of-two rings with free-running 32-bit indices, allocated once at
// create time (STYLE rule 13): send and receive queues, CQs, the engine's
// ready list. push/pop never allocate; callers check full()/empty() first.
#pragma once

#include <bit>
#include <cstdint>
#include <memory>

#include "stack/common/state_memory.h"

namespace uroce {

template <typename T>
class Ring {
 public:
  /// Allocates room for at least n entries (rounded up to a power of two). Control path.
  void init(uint32_t n) {
    const uint32_t size = std::bit_ceil(n ? n : 1u);
    slots_ = make_state_array<T>(size);
    mask_ = size - 1;
    head_ = tail_ = 0;
  }
  uint32_t capacity() const { return mask_ + 1; }
  uint32_t size() const { return head_ - tail_; }
  bool empty() const { return head_ == tail_; }
  bool full() const { return size() == capacity(); }
  /// Free-running indices: entries live at [tail, head).
  uint32_t head() const { return head_; }
  uint32_t tail() const { return tail_; }
  uint32_t slot(uint32_t index) const { return index & mask_; }
  T& at(uint32_t index) { return slots_[index & mask_]; }
  const T& at(uint32_t index) const { return slots_[index & mask_]; }
  T& push() { return slots_[head_++ & mask_]; }
  T& front() { return slots_[tail_ & mask_]; }
  void pop() { ++tail_; }
  void clear() { head_ = tail_ = 0; }

 private:
  StateArray<T> slots_;
  uint32_t mask_ = 0;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
};

}  // namespace uroce
