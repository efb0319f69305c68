// TIMELY rate update per RTT sample (Mittal et al. SIGCOMM 2015, Algorithm 1).
#include "stack/cc/timely.h"

#include <algorithm>
#include <cmath>

namespace uroce::cc {

Status validate(const TimelyParams& p, uint64_t line_rate_bps) {
  if (line_rate_bps == 0 || line_rate_bps > kMaxLineRateBps)
    return Status(StatusCode::kInvalidArgument, "timely: line rate out of range");
  if (!(p.alpha >= 0.0 && p.alpha <= 1.0))
    return Status(StatusCode::kInvalidArgument, "timely: alpha must be in [0, 1]");
  if (!(p.beta >= 0.0 && p.beta <= 1.0))
    return Status(StatusCode::kInvalidArgument, "timely: beta must be in [0, 1]");
  if (p.min_rtt_ns == 0)
    return Status(StatusCode::kInvalidArgument, "timely: min_rtt_ns must be > 0");
  if (p.t_low_ns > p.t_high_ns || p.t_high_ns == 0)
    return Status(StatusCode::kInvalidArgument, "timely: need 0 < t_low_ns <= t_high_ns");
  if (p.min_rate_bps == 0 || p.min_rate_bps > line_rate_bps)
    return Status(StatusCode::kInvalidArgument, "timely: min_rate_bps must be in 1..line rate");
  return Status();
}

Timely::Timely(uint64_t line_rate_bps, const TimelyParams& p)
    : p_(p),
      line_bps_(line_rate_bps),
      alpha_ppm_(std::llround(p.alpha * double(kPpm))),
      beta_ppm_(std::llround(p.beta * double(kPpm))),
      rate_bps_(line_rate_bps) {}

void Timely::add(uint64_t step_bps) {
  step_bps = step_bps * uint64_t(weight_ppm_) / uint64_t(kPpm);
  rate_bps_ = std::min(rate_bps_ + step_bps, line_bps_);
}

void Timely::scale_down(int64_t dec_ppm) {
  // rate *= 1 - dec_ppm / 1e6; rate <= 2^40 times dec_ppm < 2^20 fits in 64 bits.
  dec_ppm = dec_ppm * weight_ppm_ / kPpm;
  if (dec_ppm >= kPpm) {
    rate_bps_ = p_.min_rate_bps;
    return;
  }
  if (dec_ppm <= 0) return;
  const uint64_t dec = rate_bps_ * uint64_t(dec_ppm) / uint64_t(kPpm);
  rate_bps_ = std::max(rate_bps_ - dec, p_.min_rate_bps);
}

void Timely::on_path_ack(uint64_t /*bytes_acked*/, uint64_t rtt_ns, uint64_t now_ns, uint64_t& prev_rtt_ns) {
  if (rtt_ns == 0) return;
  if (prev_rtt_ns == 0) {  // the first sample (of the path) only seeds it
    prev_rtt_ns = rtt_ns;
    if (!sampled_) last_update_ns_ = now_ns;
    sampled_ = true;
    return;
  }
  // scale_by_elapsed: this update weighs min(1, elapsed / min_rtt).
  weight_ppm_ = kPpm;
  if (p_.scale_by_elapsed) {
    const uint64_t elapsed = now_ns > last_update_ns_ ? now_ns - last_update_ns_ : 0;
    weight_ppm_ = int64_t(std::min<uint64_t>(elapsed, p_.min_rtt_ns) * uint64_t(kPpm) / p_.min_rtt_ns);
  }
  last_update_ns_ = now_ns;
  const int64_t new_rtt_diff = int64_t(rtt_ns) - int64_t(prev_rtt_ns);
  prev_rtt_ns = rtt_ns;
  rtt_diff_ns_ = ((kPpm - alpha_ppm_) * rtt_diff_ns_ + alpha_ppm_ * new_rtt_diff) / kPpm;

  if (rtt_ns < p_.t_low_ns) {
    add(p_.delta_bps);
    return;
  }
  if (rtt_ns > p_.t_high_ns) {
    neg_count_ = 0;
    // beta * (1 - t_high / rtt) = beta * (rtt - t_high) / rtt
    scale_down(beta_ppm_ * int64_t(rtt_ns - p_.t_high_ns) / int64_t(rtt_ns));
    return;
  }
  if (p_.patched) {
    // Zhu et al. 2016: w(g) in ppm from the normalised gradient g (ppm), the
    // error (rtt - T_low) / T_low in ppm; rtt >= T_low here.
    const int64_t diff = std::clamp<int64_t>(rtt_diff_ns_, -(int64_t(1) << 40), int64_t(1) << 40);
    const int64_t g_ppm = diff * kPpm / int64_t(p_.min_rtt_ns);
    const int64_t w_ppm = std::clamp<int64_t>(2 * g_ppm + kPpm / 2, 0, kPpm);
    const int64_t err_ppm = int64_t(rtt_ns - p_.t_low_ns) * kPpm / int64_t(p_.t_low_ns);
    // beta * w * err, in ppm; each factor < 2^24 after the division, no overflow.
    scale_down(beta_ppm_ * w_ppm / kPpm * err_ppm / kPpm);
    add(uint64_t(p_.delta_bps * uint64_t(kPpm - w_ppm) / uint64_t(kPpm)));
    return;
  }
  if (rtt_diff_ns_ <= 0) {
    ++neg_count_;
    add(neg_count_ >= p_.hai_thresh ? p_.hai_n * p_.delta_bps : p_.delta_bps);
    return;
  }
  neg_count_ = 0;
  // beta * rtt_diff / min_rtt; the product cannot overflow for rtt_diff < 2^43 ns.
  const int64_t diff = std::min<int64_t>(rtt_diff_ns_, int64_t(1) << 40);
  scale_down(beta_ppm_ * diff / int64_t(p_.min_rtt_ns));
}

}  // namespace uroce::cc
