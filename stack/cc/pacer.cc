// Per-QP pacer (GCRA form of a token bucket); see pacer.h.
#include "stack/cc/pacer.h"

#include <algorithm>

namespace uroce::cc {

Pacer::Pacer(uint64_t rate_bps, uint32_t burst_bytes)
    : rate_bps_(rate_bps == 0 ? 1 : rate_bps), burst_bytes_(burst_bytes) {
  recompute_tau();
}

void Pacer::recompute_tau() { tau_ns_ = tx_time_ns(burst_bytes_); }

void Pacer::set_rate_bps(uint64_t rate_bps, uint64_t now_ns) {
  if (rate_bps == 0) rate_bps = 1;
  if (rate_bps == rate_bps_) return;
  if (tat_ns_ > now_ns) {
    // remaining ns at the old rate -> the same bits at the new rate.
    // (ns left) * rate can pass 2^64 (32 ms x 1 Tb/s): 128-bit product.
    __extension__ using U128 = unsigned __int128;
    const U128 bits_x_1e9 = U128(tat_ns_ - now_ns) * rate_bps_;
    tat_ns_ = now_ns + uint64_t(bits_x_1e9 / rate_bps);
  }
  rate_bps_ = rate_bps;
  frac_ = 0;  // the remainder was in units of the old rate
  recompute_tau();
}

uint64_t Pacer::next_send_ns(uint32_t bytes) const {
  // Conforming iff the packet's own time fits in the burst tolerance on top
  // of the current debt: tat + cost <= now + tau. A packet bigger than the
  // burst goes as soon as the debt is paid (tat <= now).
  const uint64_t cost = tx_time_ns(bytes);
  const uint64_t slack = tau_ns_ > cost ? tau_ns_ - cost : 0;
  return tat_ns_ > slack ? tat_ns_ - slack : 0;
}

void Pacer::on_sent(uint32_t bytes, uint64_t now_ns) {
  if (tat_ns_ < now_ns) {
    tat_ns_ = now_ns;  // idle: the bucket refilled (credit is capped by tau)
    frac_ = 0;
  }
  // bytes * 8e9 < 2^32 * 2^33 = 2^65 would overflow: split the product.
  const uint64_t bits = uint64_t(bytes) * 8;
  const uint64_t whole = bits / rate_bps_ * kNsPerSec;
  const uint64_t num = bits % rate_bps_ * kNsPerSec + frac_;  // < rate * 1e9 + rate
  tat_ns_ += whole + num / rate_bps_;
  frac_ = num % rate_bps_;
}

}  // namespace uroce::cc
