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
// State machine (paper, Fig. 5/Section 3.1; QCN 802.1Qau 32.13), with the
// ConnectX timing of alpha and of the cut (the semantics the NVIDIA "DCQCN
// parameters" page gives each knob; the same reading as the ConnectX models of
// Google's isekai simulator, rdma_roce_cc_dcqcn.cc, and of the HPCC ns-3
// code, rdma-hw.cc "Mlx" functions):
//   first CNP: the limiter is allocated, alpha = initial_alpha_value (this
//          CNP does not also raise it), RC = RT = rate_to_set_on_first_cnp if set.
//   CNP:   [clamp] RT = RC;  RC = RC * (1 - alpha/2) (alpha / 2^(rpg_gd-10),
//          at most by 100 - rpg_min_dec_fac percent, never below rpg_min_rate);
//          at most one cut per rate_reduce_monitor_period: CNPs inside the
//          period are folded into one cut at its end. RT is clamped when
//          clamp_tgt_rate is set, when the byte counter has raised the rate
//          since the last cut (BC > 0), or when the timer has (T > 0) and
//          clamp_tgt_rate_after_time_inc is set.
//   alpha timer, every dce_tcp_rtt from the first CNP:
//          alpha = (1-g)*alpha + g  if a CNP arrived in the period, else
//          alpha = (1-g)*alpha   (so alpha rises at most once per period).
//   CNPs read at one instant (one receive burst of a software RP that ran
//          late) arrived apart, as a notification point spaces them
//          (min_time_between_cnps): the k-th (from 0) k spacings after the
//          first, as far as the time since the previous instant a CNP was
//          read holds them (they all came after it). So each but the first
//          raises alpha in a period of its own, one per period after the
//          missed ones are replayed, and each but the first that finds a
//          cut pending (the monitor period would fold it in) is owed a cut of
//          its own, one per monitor period after the pending one.
//   rate-increase events, from the timer (every rpg_time_reset, counter T) and
//   the byte counter (every rpg_byte_reset x 64 bytes sent, counter BC); both
//   reset at every cut. The stage is chosen from (T, BC) before the event counts:
//     fast recovery     max(T,BC) <  F          RC = (RT + RC) / 2
//     additive increase otherwise               RT += R_AI;  RC = (RT + RC) / 2
//     hyper increase    min(T,BC) >  F          RT += R_HAI; RC = (RT + RC) / 2
//   with F = rpg_threshold. RT is capped at the maximum rate; halving rounds
//   up so that RC reaches RT exactly instead of stalling one bit/s below it.
//   When RC reaches the maximum rate the rate limiter is released (ConnectX
//   rpg_max_rate semantics) and the QP runs at line rate; alpha keeps decaying.
//
// Fixed point: alpha is held in Q20 (1.0 = 2^20); ConnectX expresses it in
// 1/1024 units (initial_alpha_value, dce_tcp_g), so those map exactly. The
// cut is RC * alpha / 2^rpg_gd with alpha in 1/1024 units, i.e. alpha/2 for
// the default rpg_gd = 11, which is the paper's RC*(1 - alpha/2).
#pragma once

#include <cstdint>

#include <uroce/status.h>

#include <uroce/cc.h>

#include "stack/cc/units.h"

namespace uroce::cc {

using uroce::DcqcnParams;

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
  void update_alpha();
  void increase(Event e);
  void release();
  // rate_reduce_monitor_period in ns, converted where it is used: with it
  // cached too, a QP's whole state passed 2 KB (tests/unit/transport/qp_state_test.cc).
  uint64_t monitor_ns() const { return us_to_ns(p_.rate_reduce_monitor_period); }

  DcqcnParams p_;
  uint64_t line_bps_;
  uint64_t max_bps_;       // rpg_max_rate or line rate
  uint64_t min_bps_;       // rpg_min_rate
  uint64_t time_reset_ns_;
  uint64_t alpha_period_ns_;
  uint64_t byte_reset_;    // rpg_byte_reset in bytes

  uint64_t rc_bps_;
  uint64_t rt_bps_;
  uint32_t alpha_ = 0;
  uint32_t t_ = 0;
  uint32_t bc_ = 0;
  uint16_t cuts_owed_ = 0;  // CNPs read at one instant with another, each owed a cut after the pending one
  uint16_t burst_k_ = 0;    // this CNP's place among those read at last_cnp_ns_
  uint64_t bytes_since_event_ = 0;
  bool limited_ = false;
  bool alpha_cnp_ = false;  // a CNP arrived since the last alpha update
  bool cut_pending_ = false;
  bool have_cut_ = false;
  DcqcnStage stage_ = DcqcnStage::kIdle;
  uint16_t alpha_cnps_late_ = 0;  // CNPs read at one instant with another, each owed a raise
  uint64_t last_cnp_ns_ = kNeverNs;
  uint64_t burst_from_ns_ = 0;  // the instant before last_cnp_ns_ at which a CNP was read (0: none)
  uint64_t last_cut_ns_ = 0;
  uint64_t alpha_deadline_ns_ = kNeverNs;
  uint64_t increase_deadline_ns_ = kNeverNs;
  uint64_t cut_deadline_ns_ = kNeverNs;
};

}  // namespace uroce::cc
