// Per-QP pacer: a token bucket kept as a theoretical next-send time (the
// GCRA / virtual-scheduling form of ITU-T I.371), at ns resolution with the
// sub-ns remainder carried so that long runs at a fixed rate do not drift.
// The requester asks may_send(bytes, now) before each packet and calls
// on_sent(bytes, now) after it; next_send_ns(bytes) tells the engine when to
// poll again. The rate comes from the QP's congestion control
// (set_rate_bps(cc.rate_bps(), now)). No allocation, no clock: time is injected.
#pragma once

#include <cstdint>

#include "stack/cc/units.h"

namespace uroce::cc {

class Pacer {
 public:
  /// rate_bps > 0; burst_bytes: how many bytes may leave back to back after
  /// an idle period (at least one MTU-sized packet is always allowed once the
  /// bucket is empty, so a burst smaller than a packet means strict pacing).
  Pacer(uint64_t rate_bps, uint32_t burst_bytes);

  /// Changes the rate at now_ns. The debt not yet paid off (bytes already
  /// sent whose time runs past now_ns) is rescaled to the new rate, as a NIC
  /// rate limiter schedules its next departure at the current rate: a flow
  /// cut to 1 Mb/s that sent a 4 KB packet is not held 32 ms after its rate
  /// has been raised again.
  void set_rate_bps(uint64_t rate_bps, uint64_t now_ns);
  uint64_t rate_bps() const { return rate_bps_; }
  uint32_t burst_bytes() const { return burst_bytes_; }

  /// True if a packet of bytes may be sent at now_ns.
  bool may_send(uint32_t bytes, uint64_t now_ns) const { return now_ns >= next_send_ns(bytes); }
  /// Earliest time at which may_send(bytes, t) is true.
  uint64_t next_send_ns(uint32_t bytes) const;
  /// Records that bytes were sent at now_ns (whether or not may_send allowed it).
  void on_sent(uint32_t bytes, uint64_t now_ns);

  /// Transmission time of bytes at the current rate, in ns (rounded down).
  uint64_t tx_time_ns(uint32_t bytes) const { return uint64_t(bytes) * 8 * kNsPerSec / rate_bps_; }

 private:
  void recompute_tau();

  uint64_t rate_bps_;
  uint32_t burst_bytes_;
  uint64_t tau_ns_ = 0;   // burst_bytes at rate_bps, in ns
  uint64_t tat_ns_ = 0;   // theoretical arrival time: when the bucket is full again
  uint64_t frac_ = 0;     // remainder of tat in units of 1/rate_bps ns
};

}  // namespace uroce::cc
