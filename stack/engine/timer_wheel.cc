// Hashed timer wheel: arm, cancel, unlink (advance is inline in the header).
#include "stack/engine/timer_wheel.h"

namespace uroce::engine {

void TimerWheel::init(uint32_t n_ids, uint64_t now_ns) {
  nodes_.assign(n_ids, Node{});
  heads_.assign(kSlots, kNil);
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
  n.next = heads_[n.slot];
  if (n.next != kNil) nodes_[n.next].prev = id;
  heads_[n.slot] = id;
  n.armed = true;
}

void TimerWheel::cancel(uint32_t id) {
  if (nodes_[id].armed) unlink(id);
}

void TimerWheel::unlink(uint32_t id) {
  Node& n = nodes_[id];
  if (n.prev != kNil) nodes_[n.prev].next = n.next;
  else heads_[n.slot] = n.next;
  if (n.next != kNil) nodes_[n.next].prev = n.prev;
  n.prev = n.next = kNil;
  n.armed = false;
}

}  // namespace uroce::engine
