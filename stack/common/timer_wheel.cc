// Hashed timer wheel: arm, cancel, unlink and the occupancy bitmap (advance is
// inline in the header).
#include "stack/common/timer_wheel.h"

namespace uroce {

void TimerWheel::init(uint32_t n_ids, uint64_t now_ns) {
  nodes_.assign(n_ids, Node{});
  if (!heads_) heads_ = std::make_unique_for_overwrite<uint32_t[]>(kSlots);
  occupied_.fill(0);
  occupied_words_ = 0;
  armed_count_ = 0;
  open_tick_ = now_ns >> kTickShift;
}

void TimerWheel::arm(uint32_t id, uint64_t deadline_ns) {
  if (nodes_[id].armed) unlink(id);
  uint64_t tick = deadline_ns >> kTickShift;
  if (tick < open_tick_) tick = open_tick_;  // already due: fire at the next advance
  Node& n = nodes_[id];
  n.deadline_ns = deadline_ns;
  n.slot = uint32_t(tick) & (kSlots - 1);
  n.prev = kNil;
  n.next = occupied_[n.slot / 64] & (uint64_t(1) << (n.slot % 64)) ? heads_[n.slot] : kNil;
  if (n.next != kNil) nodes_[n.next].prev = id;
  heads_[n.slot] = id;
  occupied_[n.slot / 64] |= uint64_t(1) << (n.slot % 64);
  occupied_words_ |= uint64_t(1) << (n.slot / 64);
  n.armed = true;
  ++armed_count_;
}

void TimerWheel::cancel(uint32_t id) {
  if (nodes_[id].armed) unlink(id);
}

void TimerWheel::unlink(uint32_t id) {
  Node& n = nodes_[id];
  if (n.prev != kNil) nodes_[n.prev].next = n.next;
  else heads_[n.slot] = n.next;
  if (n.next != kNil) nodes_[n.next].prev = n.prev;
  if (heads_[n.slot] == kNil) {
    uint64_t& word = occupied_[n.slot / 64];
    word &= ~(uint64_t(1) << (n.slot % 64));
    if (!word) occupied_words_ &= ~(uint64_t(1) << (n.slot / 64));
  }
  n.prev = n.next = kNil;
  n.armed = false;
  --armed_count_;
}

uint32_t TimerWheel::next_occupied(uint32_t from) const {
  if (from >= kSlots) return kSlots;
  const uint32_t w = from / 64;
  // The rest of from's own word, then the first nonempty word after it.
  const uint64_t here = occupied_[w] & (~uint64_t(0) << (from % 64));
  if (here) return w * 64 + uint32_t(std::countr_zero(here));
  const uint64_t later = w + 1 < 64 ? occupied_words_ & (~uint64_t(0) << (w + 1)) : 0;
  if (!later) return kSlots;
  const uint32_t w2 = uint32_t(std::countr_zero(later));
  return w2 * 64 + uint32_t(std::countr_zero(occupied_[w2]));
}

}  // namespace uroce
