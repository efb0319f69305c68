// TIMELY: RTT-gradient rate control, Mittal et al., "TIMELY: RTT-based
// Congestion Control for the Datacenter", SIGCOMM 2015, Algorithm 1.
//
// Why TIMELY and not Swift (Kumar et al., SIGCOMM 2020) as our RTT scheme:
//  - TIMELY is rate based, like DCQCN, so both drive the same per-QP Pacer
//    through one rate_bps() contract. Swift is window based (fractional cwnd,
//    pacing only below one packet) and would need a second, window
//    enforcement path in the requester.
//  - TIMELY was designed for exactly our setting: an RDMA sender that paces
//    each QP and timestamps its own completions (the paper uses NIC
//    completion timestamps; our engine takes its own TSC on ACK arrival).
//  - Swift's target delay scales with the hop count and the flow count,
//    which we cannot observe until the fabric reports hops.
// Known limit of the original: its gradient term has no unique fixed point,
// so flows need not converge to fair shares (Zhu et al., "ECN or Delay",
// CoNEXT 2016); their patch (below, TimelyParams::patched) fixes that.
//
// Algorithm 1 (per RTT sample new_rtt, i.e. per completion):
//   new_rtt_diff = new_rtt - prev_rtt;  prev_rtt = new_rtt
//   rtt_diff     = (1 - alpha) * rtt_diff + alpha * new_rtt_diff
//   gradient     = rtt_diff / min_rtt
//   new_rtt < t_low:   rate += delta
//   new_rtt > t_high:  rate *= 1 - beta * (1 - t_high / new_rtt)
//   gradient <= 0:     rate += N * delta   (N = 5 once the gradient has been
//                                           <= 0 for hai_thresh samples in a row)
//   otherwise:         rate *= 1 - beta * gradient
// clamped to [min_rate, line rate]. The first sample only seeds prev_rtt.
//
// With TimelyParams::patched (Zhu et al., CoNEXT 2016, "Patched TIMELY") the
// two gradient rules between T_low and T_high become one:
//   w = clamp(2 * gradient + 1/2, 0, 1)
//   rate = rate * (1 - beta * w * (new_rtt - t_low) / t_low) + delta * (1 - w)
// The original's gradient term has no unique fixed point, so flows need not
// converge to fair shares; the patch ties the decrease to the absolute RTT,
// which every flow through the bottleneck shares.
//
// With TimelyParams::scale_by_elapsed every step (delta and every decrease
// factor) is weighed by min(1, time since the previous update / min_rtt), as
// in the TIMELY authors' reference code (which eRPC's timely.h follows): a
// flow that gets samples more often than once per min_rtt then does not
// react more strongly per unit time than one that gets them once per min_rtt.
//
// Arithmetic is integer: alpha and beta are converted once to parts per
// million, rtt_diff is kept in ns (truncated toward zero), so scripted tests
// can expect exact rates.
#pragma once

#include <cstdint>

#include <uroce/status.h>

#include <uroce/cc.h>

#include "stack/cc/units.h"

namespace uroce::cc {

using uroce::TimelyParams;

/// Checks ranges of p for a port of line_rate_bps. Control path.
Status validate(const TimelyParams& p, uint64_t line_rate_bps);

/// TIMELY rate controller for one QP. Construct with validated params.
class Timely {
 public:
  static constexpr int64_t kPpm = 1'000'000;

  Timely(uint64_t line_rate_bps, const TimelyParams& p);

  /// One RTT sample (rtt_ns, from the engine's own send/ACK timestamps) at
  /// now_ns; rtt_ns == 0 means no sample and changes nothing.
  void on_ack(uint64_t bytes_acked, uint64_t rtt_ns, uint64_t now_ns) {
    on_path_ack(bytes_acked, rtt_ns, now_ns, prev_rtt_ns_);
  }
  /// on_ack with the gradient taken against prev_rtt_ns (0: none yet) in
  /// place of the QP's previous sample, and prev_rtt_ns set to this one: the
  /// previous sample of the same path, for a QP sprayed over paths of
  /// different delays (their samples in turn would read as a gradient).
  void on_path_ack(uint64_t bytes_acked, uint64_t rtt_ns, uint64_t now_ns, uint64_t& prev_rtt_ns);
  void on_cnp(uint64_t /*now_ns*/) {}
  void on_bytes_sent(uint64_t /*bytes*/, uint64_t /*now_ns*/) {}
  void on_timer(uint64_t /*now_ns*/) {}
  uint64_t next_timer_ns() const { return kNeverNs; }

  uint64_t rate_bps() const { return rate_bps_; }
  uint64_t line_rate_bps() const { return line_bps_; }
  /// Smoothed RTT difference in ns (the numerator of the gradient).
  int64_t rtt_diff_ns() const { return rtt_diff_ns_; }
  uint32_t neg_gradient_count() const { return neg_count_; }
  const TimelyParams& params() const { return p_; }

 private:
  void add(uint64_t step_bps);
  void scale_down(int64_t dec_ppm);

  TimelyParams p_;
  uint64_t line_bps_;
  int64_t alpha_ppm_;
  int64_t beta_ppm_;
  uint64_t rate_bps_;
  uint64_t prev_rtt_ns_ = 0;  // 0: no sample yet
  int64_t rtt_diff_ns_ = 0;
  uint32_t neg_count_ = 0;
  bool sampled_ = false;      // a sample came (last_update_ns_ is set)
  uint64_t last_update_ns_ = 0;
  int64_t weight_ppm_ = kPpm;  // this update's weight (scale_by_elapsed)
};

}  // namespace uroce::cc
