// DCQCN reaction point (RP): the per-QP sender rate controller of
// Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
// SIGCOMM 2015, Section 3.1 (RP algorithm, itself QCN's IEEE 802.1Qau RP
// with DCTCP's alpha), with the knobs named, scaled and defaulted as NVIDIA
// ConnectX firmware exposes them (mlxconfig RoCE CC ECN *_P1 settings; mlx5
// debugfs cc_params rp_*; MLNX_OFED sysfs ecn/roce_rp/params).
//
// Pure logic: no I/O, no clock. The engine calls
//   on_cnp(now)               when a CNP (BTH opcode 0x81) arrives for this QP,
//   on_bytes_sent(bytes, now) for every packet it puts on the wire,
//   on_timer(now)             whenever now >= next_timer_ns(),
// and paces the QP at rate_bps(). No call allocates.
//
// State machine (paper, Fig. 5/Section 3.1; QCN 802.1Qau 32.13):
//   CNP:   [if clamp] RT = RC;  RC = RC * (1 - alpha/2);  alpha = (1-g)*alpha + g
//          at most one rate cut per rate_reduce_monitor_period: CNPs inside the
//          period are folded into one cut at its end (ConnectX semantics).
//   alpha timer (dce_tcp_rtt after the last CNP or decay): alpha = (1-g)*alpha.
//   rate-increase events, from the timer (every rpg_time_reset, counter T) and
//   the byte counter (every rpg_byte_reset bytes sent, counter BC); both reset
//   at every cut. The stage is chosen from (T, BC) before the event counts:
//     fast recovery     max(T,BC) <  F          RC = (RT + RC) / 2
//     additive increase otherwise               RT += R_AI;  RC = (RT + RC) / 2
//     hyper increase    min(T,BC) >  F          RT += R_HAI; RC = (RT + RC) / 2
//   with F = rpg_threshold. RT is capped at the maximum rate; halving rounds
//   up so that RC reaches RT exactly instead of stalling one bit/s below it.
//   When RC reaches the maximum rate the rate limiter is released (ConnectX
//   rpg_max_rate semantics) and the QP runs at line rate with no timers.
//
// Fixed point: alpha is held in Q20 (1.0 = 2^20); ConnectX expresses it in
// 1/1024 units (initial_alpha_value, dce_tcp_g), so those map exactly. The
// cut is RC * alpha / 2^rpg_gd with alpha in 1/1024 units, i.e. alpha/2 for
// the default rpg_gd = 11, which is the paper's RC*(1 - alpha/2).
#pragma once

#include <cstdint>

#include <uroce/status.h>

#include "stack/cc/units.h"

namespace uroce::cc {

/// DCQCN RP parameters, named and scaled as ConnectX names them.
///
/// Defaults: the ConnectX firmware defaults, as reported by
/// `mlxconfig -d <dev> q` on a ConnectX-4 Lx (RPG_TIME_RESET_P1=300,
/// RPG_BYTE_RESET_P1=32767, RPG_THRESHOLD_P1=1, RPG_MAX_RATE_P1=0,
/// RPG_AI_RATE_P1=5, RPG_HAI_RATE_P1=50, RPG_GD_P1=11, RPG_MIN_DEC_FAC_P1=50,
/// RPG_MIN_RATE_P1=1, RATE_TO_SET_ON_FIRST_CNP_P1=0, DCE_TCP_G_P1=1019,
/// DCE_TCP_RTT_P1=1, RATE_REDUCE_MONITOR_PERIOD_P1=4, INITIAL_ALPHA_VALUE_P1=1023,
/// CLAMP_TGT_RATE_P1=0, CLAMP_TGT_RATE_AFTER_TIME_INC_P1=1). Meanings from the
/// parameter descriptions in mstflint's mlxconfig (mlxcfg_param_lib / RoCE
/// Congestion Control ECN group) and the Linux mlx5 cong.c debugfs names; note
/// that the "Default=" texts in old mstflint builds (time_reset 2, byte_reset
/// 150, threshold 5, ai_rate 10, gd 7, min_rate 2000, dce_tcp_g 64) are
/// stale and differ from what shipping firmware reports.
/// `paper()` gives the values of Zhu et al. 2015 instead.
struct DcqcnParams {
  /// CLAMP_TGT_RATE: on every rate cut set the target rate RT to the current
  /// rate RC (the paper's behaviour).
  bool clamp_tgt_rate = false;
  /// CLAMP_TGT_RATE_AFTER_TIME_INC: clamp RT = RC on a cut only if the rate
  /// had been raised by the timer (T > 0) since the previous cut.
  bool clamp_tgt_rate_after_time_inc = true;
  /// RPG_TIME_RESET, us: time between rate increases without CNPs.
  uint32_t rpg_time_reset = 300;
  /// RPG_BYTE_RESET, bytes: data sent between rate increases; 0 disables the
  /// byte counter.
  uint32_t rpg_byte_reset = 32767;
  /// RPG_THRESHOLD (F): rate-increase events spent in fast recovery.
  uint32_t rpg_threshold = 1;
  /// RPG_MAX_RATE, Mb/s: once RC reaches it the limiter is released and the
  /// QP is no longer rate limited; 0 means the line rate.
  uint32_t rpg_max_rate = 0;
  /// RPG_AI_RATE, Mb/s: R_AI, the RT step in additive increase.
  uint32_t rpg_ai_rate = 5;
  /// RPG_HAI_RATE, Mb/s: R_HAI, the RT step in hyper increase.
  uint32_t rpg_hai_rate = 50;
  /// RPG_GD: log2(Gd); a cut is RC * alpha / Gd with alpha in 1/1024 units.
  uint32_t rpg_gd = 11;
  /// RPG_MIN_DEC_FAC, percent (1..100): one cut leaves at least this share of RC.
  uint32_t rpg_min_dec_fac = 50;
  /// RPG_MIN_RATE, Mb/s: RC never goes below it.
  uint32_t rpg_min_rate = 1;
  /// RATE_TO_SET_ON_FIRST_CNP, Mb/s: RC and RT when the first CNP allocates
  /// the limiter (before that CNP's cut); 0 keeps the current (line) rate.
  uint32_t rate_to_set_on_first_cnp = 0;
  /// DCE_TCP_G, 1/1024 units: the share of alpha kept at each update, so the
  /// paper's gain is g = (1024 - dce_tcp_g) / 1024 (1019 -> g = 5/1024;
  /// g = 1/256 is 1020). ConnectX documents this field only as "used to
  /// update the congestion estimator (alpha) once every dce_tcp_rtt"; the
  /// kept-share reading is ours, chosen because it is the one under which the
  /// shipped default (1019) gives a DCTCP-like small gain.
  uint32_t dce_tcp_g = 1019;
  /// DCE_TCP_RTT, us: the alpha timer (the paper's K): alpha decays once per
  /// period without CNPs.
  uint32_t dce_tcp_rtt = 1;
  /// RATE_REDUCE_MONITOR_PERIOD, us: minimum time between two cuts; CNPs
  /// that arrive inside the period cause one cut at its end.
  uint32_t rate_reduce_monitor_period = 4;
  /// INITIAL_ALPHA_VALUE, 1/1024 units: alpha set by the first CNP (1023 is
  /// the largest value of the 10-bit field; 1024 means exactly 1.0).
  uint32_t initial_alpha_value = 1023;

  /// The ConnectX firmware defaults above.
  static constexpr DcqcnParams connectx() { return DcqcnParams{}; }
  /// Zhu et al. 2015, Section 5 (as used in the paper's testbed and
  /// simulations): g = 1/256, K = 55 us alpha timer, T = 55 us rate-increase
  /// timer, B = 10 MB byte counter, F = 5, R_AI = 40 Mb/s, RT always clamped
  /// to RC on a cut, one cut per CNP (no monitor period), alpha starting at 1.
  /// These are recalled from the paper, not re-checked against its text here;
  /// R_HAI = 10 x R_AI is our choice, not a paper value. Override as needed.
  static constexpr DcqcnParams paper() {
    DcqcnParams p;
    p.clamp_tgt_rate = true;
    p.clamp_tgt_rate_after_time_inc = false;
    p.rpg_time_reset = 55;
    p.rpg_byte_reset = 10 * 1024 * 1024;
    p.rpg_threshold = 5;
    p.rpg_ai_rate = 40;
    p.rpg_hai_rate = 400;
    p.rate_reduce_monitor_period = 0;
    p.dce_tcp_g = 1020;
    p.dce_tcp_rtt = 55;
    p.initial_alpha_value = 1024;
    return p;
  }
};

/// Checks ranges and consistency of p for a port of line_rate_bps. Control path.
Status validate(const DcqcnParams& p, uint64_t line_rate_bps);

/// Rate-increase stage of the last increase event (for tests and counters).
enum class DcqcnStage : uint8_t {
  kIdle,          ///< not rate limited: no CNP yet, or limiter released
  kFastRecovery,
  kAdditiveIncrease,
  kHyperIncrease,
};

/// DCQCN reaction point for one QP. Construct with validated params.
class Dcqcn {
 public:
  static constexpr uint32_t kAlphaShift = 20;  ///< alpha fixed point: Q20
  static constexpr uint32_t kAlphaOne = uint32_t(1) << kAlphaShift;

  Dcqcn(uint64_t line_rate_bps, const DcqcnParams& p);

  /// A CNP for this QP arrived at now_ns.
  void on_cnp(uint64_t now_ns);
  /// bytes (wire bytes of one packet) were sent at now_ns: drives the byte counter.
  void on_bytes_sent(uint64_t bytes, uint64_t now_ns);
  /// ACKs carry no DCQCN signal; present for the common interface.
  void on_ack(uint64_t /*bytes_acked*/, uint64_t /*rtt_ns*/, uint64_t /*now_ns*/) {}
  /// Runs every timer event due at or before now_ns, in deadline order.
  void on_timer(uint64_t now_ns);
  /// Earliest pending timer deadline, or kNeverNs.
  uint64_t next_timer_ns() const;

  /// Current rate RC in bit/s.
  uint64_t rate_bps() const { return rc_bps_; }
  /// Target rate RT in bit/s.
  uint64_t target_rate_bps() const { return rt_bps_; }
  uint64_t line_rate_bps() const { return line_bps_; }
  /// alpha in Q20 (kAlphaOne = 1.0).
  uint32_t alpha_q20() const { return alpha_; }
  bool limited() const { return limited_; }
  DcqcnStage stage() const { return stage_; }
  uint32_t time_stage() const { return t_; }   ///< T: timer events since the last cut
  uint32_t byte_stage() const { return bc_; }  ///< BC: byte-counter events since the last cut
  const DcqcnParams& params() const { return p_; }

 private:
  enum class Event : uint8_t { kTimer, kBytes };
  void cut(uint64_t now_ns);
  void raise_alpha();
  void increase(Event e);
  void release();

  DcqcnParams p_;
  uint64_t line_bps_;
  uint64_t max_bps_;       // rpg_max_rate or line rate
  uint64_t min_bps_;       // rpg_min_rate
  uint64_t ai_bps_;
  uint64_t hai_bps_;
  uint64_t time_reset_ns_;
  uint64_t alpha_period_ns_;
  uint64_t monitor_ns_;

  uint64_t rc_bps_;
  uint64_t rt_bps_;
  uint32_t alpha_ = 0;
  uint32_t t_ = 0;
  uint32_t bc_ = 0;
  uint64_t bytes_since_event_ = 0;
  bool limited_ = false;
  bool cut_pending_ = false;
  bool have_cut_ = false;
  DcqcnStage stage_ = DcqcnStage::kIdle;
  uint64_t last_cut_ns_ = 0;
  uint64_t alpha_deadline_ns_ = kNeverNs;
  uint64_t increase_deadline_ns_ = kNeverNs;
  uint64_t cut_deadline_ns_ = kNeverNs;
};

}  // namespace uroce::cc
