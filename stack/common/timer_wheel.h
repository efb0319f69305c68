// Hashed timer wheel (Varghese & Lauck 1987) for per-QP transport timers:
// the local ACK timeout (IBA 9.7.6.1.3) and the RNR wait (IBA 9.7.5.2.8).
// One timer per id (a QP slot); arm, re-arm and cancel are O(1). Advancing
// the clock visits only the occupied slots among the ticks that passed: a
// two-level occupancy bitmap (one bit per slot, one summary bit per 64 slots)
// finds the next occupied slot with two count-trailing-zeros, so a clock jump
// of any size costs time proportional to the timers in the slots it crosses
// (those due, and those of later revolutions that share their slots), not to
// the slots crossed. Time is injected: advance(now_ns) fires what is due at now_ns.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <vector>

#include "stack/common/state_memory.h"

namespace uroce {

class TimerWheel {
 public:
  static constexpr uint32_t kTickShift = 10;  // 1.024 us ticks
  static constexpr uint32_t kSlots = 4096;    // one revolution: 4.19 ms
  static_assert(std::has_single_bit(kSlots) && kSlots <= 64 * 64, "two bitmap levels cover 4096 slots");

  /// Prepares n_ids timers, all disarmed; now_ns is the current time. Control path.
  void init(uint32_t n_ids, uint64_t now_ns);

  /// Arms (or re-arms) timer id to fire at the first advance() with now_ns >= deadline_ns.
  void arm(uint32_t id, uint64_t deadline_ns);
  void cancel(uint32_t id);
  bool armed(uint32_t id) const { return nodes_[id].armed; }
  /// When timer id fires, if armed.
  uint64_t deadline(uint32_t id) const { return nodes_[id].deadline_ns; }
  /// Timers armed now.
  uint32_t armed_count() const { return armed_count_; }

  /// Fires, by calling fire(id), every timer due at now_ns, disarming it first.
  /// fire may re-arm or cancel its own id only.
  template <typename F>
  void advance(uint64_t now_ns, F&& fire) {
    // Visits ticks open_tick_ .. now_tick. The current tick stays open, since
    // more of its timers may fall due at a later now_ns within it.
    const uint64_t now_tick = now_ns >> kTickShift;
    if (now_tick < open_tick_) return;
    const uint64_t span = now_tick - open_tick_ < kSlots ? now_tick - open_tick_ + 1 : kSlots;
    const uint32_t first = uint32_t(open_tick_) & (kSlots - 1);
    // The crossed slots as at most two ascending ranges: [first, end) and, on wrap, [0, first + span - kSlots).
    const uint32_t end = first + span > kSlots ? kSlots : uint32_t(first + span);
    fire_range(first, end, now_ns, fire);
    if (first + span > kSlots) fire_range(0, uint32_t(first + span - kSlots), now_ns, fire);
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
  /// The first occupied slot in [from, kSlots), or kSlots if none.
  uint32_t next_occupied(uint32_t from) const;

  template <typename F>
  void fire_range(uint32_t from, uint32_t to, uint64_t now_ns, F& fire) {
    for (uint32_t slot = next_occupied(from); slot < to; slot = next_occupied(slot + 1)) {
      for (uint32_t id = heads_[slot]; id != kNil;) {
        const uint32_t next = nodes_[id].next;
        if (nodes_[id].deadline_ns <= now_ns) {
          unlink(id);
          fire(id);
        }
        id = next;
      }
    }
  }

  std::pmr::vector<Node> nodes_{state_memory()};
  // List heads, valid only where the slot's occupied_ bit is set: left
  // uninitialised, so init() costs the ids, not the slots.
  std::unique_ptr<uint32_t[]> heads_;
  std::array<uint64_t, kSlots / 64> occupied_{};  // bit s%64 of word s/64: heads_[s] != kNil
  uint64_t occupied_words_ = 0;                   // bit w: occupied_[w] != 0
  uint32_t armed_count_ = 0;
  uint64_t open_tick_ = 0;  // the earliest tick that may still hold due timers
};

}  // namespace uroce
