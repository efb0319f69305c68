// DCQCN reaction point: CNP reaction, alpha timer, rate-increase timer and
// byte counter (Zhu et al. SIGCOMM 2015, Section 3.1; ConnectX knobs). See
// dcqcn.h for the state machine and the fixed-point conventions.
#include "stack/cc/dcqcn.h"

#include <algorithm>

namespace uroce::cc {

Status validate(const DcqcnParams& p, uint64_t line_rate_bps) {
  if (line_rate_bps == 0 || line_rate_bps > kMaxLineRateBps)
    return Status(StatusCode::kInvalidArgument, "dcqcn: line rate out of range");
  if (p.rpg_time_reset == 0)
    return Status(StatusCode::kInvalidArgument, "dcqcn: rpg_time_reset must be > 0");
  if (p.dce_tcp_rtt == 0)
    return Status(StatusCode::kInvalidArgument, "dcqcn: dce_tcp_rtt must be > 0");
  if (p.dce_tcp_g > 1024)
    return Status(StatusCode::kInvalidArgument, "dcqcn: dce_tcp_g is in 1/1024 units (<= 1024)");
  if (p.initial_alpha_value > 1024)
    return Status(StatusCode::kInvalidArgument, "dcqcn: initial_alpha_value is in 1/1024 units (<= 1024)");
  if (p.rpg_gd > 30)
    return Status(StatusCode::kInvalidArgument, "dcqcn: rpg_gd (log2 Gd) must be <= 30");
  if (p.rpg_min_dec_fac == 0 || p.rpg_min_dec_fac > 100)
    return Status(StatusCode::kInvalidArgument, "dcqcn: rpg_min_dec_fac is a percentage 1..100");
  if (p.rpg_min_rate == 0 || mbps_to_bps(p.rpg_min_rate) > line_rate_bps)
    return Status(StatusCode::kInvalidArgument, "dcqcn: rpg_min_rate must be in 1 Mb/s..line rate");
  return Status();
}

Dcqcn::Dcqcn(uint64_t line_rate_bps, const DcqcnParams& p)
    : p_(p),
      line_bps_(line_rate_bps),
      max_bps_(p.rpg_max_rate == 0 ? line_rate_bps
                                   : std::min(line_rate_bps, mbps_to_bps(p.rpg_max_rate))),
      min_bps_(mbps_to_bps(p.rpg_min_rate)),
      time_reset_ns_(us_to_ns(p.rpg_time_reset)),
      alpha_period_ns_(us_to_ns(p.dce_tcp_rtt)),
      byte_reset_(uint64_t(p.rpg_byte_reset) * kRpgByteResetUnit),
      rc_bps_(line_rate_bps),
      rt_bps_(line_rate_bps) {}

void Dcqcn::on_cnp(uint64_t now_ns) {
  on_timer(now_ns);  // settle anything due first, so events stay in time order
  // The CNPs read at one instant (one receive burst of a software RP that ran
  // late) came apart, as a notification point spaces them: the k-th of them
  // (from 0) came k spacings after the first, as far as the time since the
  // previous instant a CNP was read allows (they all came after it).
  if (now_ns != last_cnp_ns_) {
    burst_from_ns_ = last_cnp_ns_ == kNeverNs ? 0 : last_cnp_ns_;
    burst_k_ = 0;
  } else if (burst_k_ != UINT16_MAX) {
    ++burst_k_;
  }
  const auto came_apart = [&](uint64_t spacing_ns) {
    return burst_k_ != 0 && burst_k_ * spacing_ns <= now_ns - burst_from_ns_;
  };
  if (!limited_) {
    // First CNP (or first after a release): allocate the limiter, start alpha
    // at initial_alpha_value; this CNP does not also raise alpha (it set it).
    limited_ = true;
    alpha_ = p_.initial_alpha_value << (kAlphaShift - 10);
    alpha_cnp_ = false;
    alpha_cnps_late_ = 0;
    alpha_deadline_ns_ = now_ns + alpha_period_ns_;
    if (p_.rate_to_set_on_first_cnp != 0) {
      rc_bps_ = std::clamp(mbps_to_bps(p_.rate_to_set_on_first_cnp), min_bps_, line_bps_);
      rt_bps_ = rc_bps_;
    }
  } else {
    // The next alpha update raises alpha; a CNP that came a period after
    // another one of this instant is owed a raise of its own (update_alpha).
    if (alpha_cnp_ && came_apart(alpha_period_ns_) && alpha_cnps_late_ != UINT16_MAX) ++alpha_cnps_late_;
    alpha_cnp_ = true;
    if (alpha_deadline_ns_ == kNeverNs) alpha_deadline_ns_ = now_ns + alpha_period_ns_;
  }
  last_cnp_ns_ = now_ns;
  if (!have_cut_ || now_ns >= last_cut_ns_ + monitor_ns()) {
    cut(now_ns);
  } else if (!cut_pending_) {
    cut_pending_ = true;  // fold into one cut at the end of the monitor period
    cut_deadline_ns_ = last_cut_ns_ + monitor_ns();
  } else if (came_apart(monitor_ns()) && cuts_owed_ != UINT16_MAX) {
    ++cuts_owed_;  // a monitor period after another one of this instant: a cut of its own, after the pending one
  }
}

void Dcqcn::cut(uint64_t now_ns) {
  // RT = RC when clamp_tgt_rate is set, when the byte counter has raised the
  // rate since the last cut, or (clamp_tgt_rate_after_time_inc) when the
  // timer has: ConnectX's "the target rate should be updated if the
  // transmission rate was increased due to the timer, and not only due to the
  // byte counter". Without the byte-counter clause a flow that recovers by
  // bytes between cuts keeps RT at the line rate and never converges.
  const bool clamp =
      p_.clamp_tgt_rate || bc_ > 0 || (p_.clamp_tgt_rate_after_time_inc && t_ > 0);
  if (clamp) rt_bps_ = rc_bps_;
  // RC * alpha / Gd, alpha in 1/1024 units  ==  RC * alpha_q20 >> (gd + 10).
  // rc <= 2^40 and alpha <= 2^20, so the product fits in 64 bits.
  const uint64_t dec = (rc_bps_ * alpha_) >> (p_.rpg_gd + kAlphaShift - 10);
  uint64_t rc = dec >= rc_bps_ ? 0 : rc_bps_ - dec;
  rc = std::max(rc, rc_bps_ * p_.rpg_min_dec_fac / 100);  // rpg_min_dec_fac
  rc_bps_ = std::max(rc, min_bps_);
  // Reset the increase machinery: T, BC, byte count, timer.
  t_ = 0;
  bc_ = 0;
  bytes_since_event_ = 0;
  stage_ = DcqcnStage::kFastRecovery;
  increase_deadline_ns_ = now_ns + time_reset_ns_;
  last_cut_ns_ = now_ns;
  have_cut_ = true;
  cut_pending_ = false;
  cut_deadline_ns_ = kNeverNs;
}

void Dcqcn::update_alpha() {
  // Once per dce_tcp_rtt: alpha = (1-g)*alpha + g if a CNP arrived in the
  // period, else (1-g)*alpha, with (1-g) = dce_tcp_g / 1024.
  const uint64_t keep = p_.dce_tcp_g;
  // A period with no CNP of its own raises alpha for a CNP owed one.
  const bool raise = alpha_cnp_ || alpha_cnps_late_ != 0;
  if (!alpha_cnp_ && raise) --alpha_cnps_late_;
  const uint64_t add = raise ? (1024 - keep) * uint64_t(kAlphaOne) : 0;
  alpha_ = uint32_t((uint64_t(alpha_) * keep + add) >> 10);
  alpha_cnp_ = false;
}

void Dcqcn::increase(Event e) {
  const uint32_t f = p_.rpg_threshold;
  if (std::max(t_, bc_) < f) {
    stage_ = DcqcnStage::kFastRecovery;
  } else if (std::min(t_, bc_) > f) {
    stage_ = DcqcnStage::kHyperIncrease;
    rt_bps_ = std::min(rt_bps_ + mbps_to_bps(p_.rpg_hai_rate), max_bps_);
  } else {
    stage_ = DcqcnStage::kAdditiveIncrease;
    rt_bps_ = std::min(rt_bps_ + mbps_to_bps(p_.rpg_ai_rate), max_bps_);
  }
  if (e == Event::kTimer) {
    ++t_;
  } else {
    ++bc_;
  }
  rc_bps_ = (rt_bps_ + rc_bps_ + 1) / 2;  // rounds up: RC reaches RT exactly
  if (rc_bps_ >= max_bps_) release();
}

void Dcqcn::release() {
  // ConnectX rpg_max_rate: at the maximum rate the limiter is freed and the QP
  // is no longer rate limited. Alpha keeps decaying until it reaches zero.
  limited_ = false;
  rc_bps_ = line_bps_;
  rt_bps_ = line_bps_;
  t_ = 0;
  bc_ = 0;
  bytes_since_event_ = 0;
  stage_ = DcqcnStage::kIdle;
  increase_deadline_ns_ = kNeverNs;
  cut_pending_ = false;
  cuts_owed_ = 0;
  cut_deadline_ns_ = kNeverNs;
}

void Dcqcn::on_bytes_sent(uint64_t bytes, uint64_t now_ns) {
  on_timer(now_ns);
  if (!limited_ || p_.rpg_byte_reset == 0) return;
  bytes_since_event_ += bytes;
  while (limited_ && bytes_since_event_ >= byte_reset_) {
    bytes_since_event_ -= byte_reset_;
    increase(Event::kBytes);
  }
}

uint64_t Dcqcn::next_timer_ns() const {
  return std::min({alpha_deadline_ns_, increase_deadline_ns_, cut_deadline_ns_});
}

void Dcqcn::on_timer(uint64_t now_ns) {
  // Each event re-arms from its own deadline, so a late call replays the
  // periods it missed in order. Work is bounded: alpha reaches 0 and the
  // limiter is released after finitely many events.
  for (;;) {
    const uint64_t due = next_timer_ns();
    if (due > now_ns) return;
    if (cut_deadline_ns_ == due) {
      cut(due);
      if (cuts_owed_ != 0) {
        --cuts_owed_;
        cut_pending_ = true;
        cut_deadline_ns_ = due + monitor_ns();
      }
    } else if (alpha_deadline_ns_ == due) {
      update_alpha();
      // The alpha timer stops once alpha is 0 with no CNP pending; the next
      // CNP restarts it.
      alpha_deadline_ns_ = alpha_ == 0 ? kNeverNs : due + alpha_period_ns_;
    } else {
      increase_deadline_ns_ = due + time_reset_ns_;
      increase(Event::kTimer);  // may release and disarm
    }
  }
}

}  // namespace uroce::cc
