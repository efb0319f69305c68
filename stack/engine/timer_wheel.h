// Hashed timer wheel (Varghese & Lauck 1987) for per-QP transport timers:
// the local ACK timeout (IBA 9.7.6.1.3) and the RNR wait (IBA 9.7.5.2.8).
// One timer per id (a QP slot); arm, re-arm and cancel are O(1); advancing the
// clock visits only the slots of the ticks that passed (at most kSlots), never
// every QP. Time is injected: advance(now_ns) fires what is due at now_ns.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace uroce::engine {

class TimerWheel {
 public:
  static constexpr uint32_t kTickShift = 10;  // 1.024 us ticks
  static constexpr uint32_t kSlots = 4096;    // one revolution: 4.19 ms
  static_assert(std::has_single_bit(kSlots));

  /// Prepares n_ids timers, all disarmed; now_ns is the current time. Control path.
  void init(uint32_t n_ids, uint64_t now_ns);

  /// Arms (or re-arms) timer id to fire at the first advance() with now_ns >= deadline_ns.
  void arm(uint32_t id, uint64_t deadline_ns);
  void cancel(uint32_t id);
  bool armed(uint32_t id) const { return nodes_[id].armed; }

  /// Fires, by calling fire(id), every timer due at now_ns, disarming it first.
  /// fire may re-arm or cancel its own id only.
  template <typename F>
  void advance(uint64_t now_ns, F&& fire) {
    // Visits ticks open_tick_ .. now_tick. The current tick stays open, since
    // more of its timers may fall due at a later now_ns within it.
    const uint64_t now_tick = now_ns >> kTickShift;
    if (now_tick < open_tick_) return;
    const uint64_t span = now_tick - open_tick_ < kSlots ? now_tick - open_tick_ + 1 : kSlots;
    for (uint64_t t = 0; t < span; ++t) {
      const uint32_t slot = uint32_t(open_tick_ + t) & (kSlots - 1);
      for (uint32_t id = heads_[slot]; id != kNil;) {
        const uint32_t next = nodes_[id].next;
        if (nodes_[id].deadline_ns <= now_ns) {
          unlink(id);
          fire(id);
        }
        id = next;
      }
    }
    open_tick_ = now_tick;
  }

 private:
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Node {
    uint64_t deadline_ns = 0;
    uint32_t next = kNil;
    uint32_t prev = kNil;
    uint32_t slot = 0;
    bool armed = false;
  };
  void unlink(uint32_t id);

  std::vector<Node> nodes_;
  std::vector<uint32_t> heads_;
  uint64_t open_tick_ = 0;  // the earliest tick that may still hold due timers
};

}  // namespace uroce::engine
