// What the transport roles use of their device, passed to each call: the MR
// table, the addressing layer's path and QoS state, the transmit stage, the
// transmit schedule, the timers, the clock, the counters and the handler of
// asynchronous events. The engine (or
// a verb on the control path) builds one for each unit of work; when the work
// is for one QP (its received frames, its timer, its transmit turn) the QP's
// counter block comes with it, so every count lands in both the device's
// counters and the QP's. Nothing in stack/transport sees the device itself.
#pragma once

#include <cstdint>

#include <uroce/counters.h>
#include <uroce/verbs.h>

#include "stack/common/ring.h"
#include "stack/common/state_memory.h"
#include "stack/common/timer_wheel.h"
#include "stack/mem/mr_table.h"
#include "stack/net/net_stack.h"
#include "stack/net/tx_stage.h"

namespace uroce::transport {

/// The QP slots with something to transmit, served round-robin by the
/// engine. The flag is per slot (not per QP), so a stale entry of a destroyed
/// QP is never doubled.
class ReadyQueue {
 public:
  void init(uint32_t n_slots) {
    ring_.init(n_slots);
    flag_.assign(n_slots, 0);
  }
  /// Puts slot on the schedule (no-op if it is there already).
  void mark(uint32_t slot) {
    if (flag_[slot]) return;
    flag_[slot] = 1;
    ring_.push() = slot;
  }
  /// Takes the oldest slot off the schedule; the queue must not be empty.
  uint32_t pop() {
    const uint32_t slot = ring_.front();
    ring_.pop();
    flag_[slot] = 0;
    return slot;
  }
  /// The slot k places behind the front (k < size()), for look-ahead.
  uint32_t peek(uint32_t k) const { return ring_.at(ring_.tail() + k); }
  uint32_t size() const { return ring_.size(); }

 private:
  Ring<uint32_t> ring_;
  std::pmr::vector<uint8_t> flag_{state_memory()};
};

/// The transmit options of the device that frame building needs.
struct TxOptions {
  bool zero_copy = false;           // DeviceConfig::tx_zero_copy and the port takes chained extbuf mbufs
  uint32_t zero_copy_min_bytes = 0; // DeviceConfig::tx_zero_copy_min_bytes
};

/// The device's asynchronous event handler (set_async_event_handler).
struct AsyncSink {
  AsyncEventFn fn = nullptr;
  void* arg = nullptr;
};

struct Env {
  mem::MrTable& mrs;
  const net::NetStack& net;   // GID table, QoS policy
  net::TxStage& tx;           // frames built, not yet taken by the port
  ReadyQueue& ready;
  TimerWheel& timers;         // one per QP slot: local ACK timeout, end of an RNR wait
  TimerWheel& pace_timers;    // one per QP slot: the pacer lets the QP send again
  Counters& counters;         // the device's
  QpCounters* qp_counters;    // the block of the QP this work is for, or null
  uint64_t now_ns;            // time of the poll in progress (injected)
  TxOptions tx_options;
  const AsyncSink& async;     // where affiliated asynchronous events go (IBA 11.6.3)

  void inc(Counter c, uint64_t n = 1) {
    counters.inc(c, n);
    if (qp_counters) qp_counters->inc(c, n);
  }
  /// Counts ev (async_events) and hands it to the device's handler, if any.
  void raise(const AsyncEvent& ev) {
    inc(Counter::async_events);
    if (async.fn) async.fn(ev, async.arg);
  }
};

}  // namespace uroce::transport
