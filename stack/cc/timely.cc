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

void Timely::add(uint64_t step_bps) { rate_bps_ = std::min(rate_bps_ + step_bps, line_bps_); }

void Timely::scale_down(int64_t dec_ppm) {
  // rate *= 1 - dec_ppm / 1e6; rate <= 2^40 times dec_ppm < 2^20 fits in 64 bits.
  if (dec_ppm >= kPpm) {
    rate_bps_ = p_.min_rate_bps;
    return;
  }
  if (dec_ppm <= 0) return;
  const uint64_t dec = rate_bps_ * uint64_t(dec_ppm) / uint64_t(kPpm);
  rate_bps_ = std::max(rate_bps_ - dec, p_.min_rate_bps);
}

void Timely::on_ack(uint64_t /*bytes_acked*/, uint64_t rtt_ns, uint64_t /*now_ns*/) {
  if (rtt_ns == 0) return;
  if (!have_prev_) {
    prev_rtt_ns_ = rtt_ns;
    have_prev_ = true;
    return;
  }
  const int64_t new_rtt_diff = int64_t(rtt_ns) - int64_t(prev_rtt_ns_);
  prev_rtt_ns_ = rtt_ns;
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
