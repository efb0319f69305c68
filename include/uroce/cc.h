// Congestion-control configuration of a device (DeviceConfig::cc): which
// algorithm each RC/UC QP runs and every parameter of the algorithms, named,
// scaled and defaulted as NVIDIA ConnectX documents them for DCQCN and as the
// TIMELY paper names its own. The algorithms themselves are pure classes in
// stack/cc/ (dcqcn.h, timely.h, cnp.h); this header is their one parameter
// definition, shared by the public API, the stack and `uroce sim` flags.
#pragma once

#include <cstdint>
#include <string_view>

namespace uroce {

/// The congestion control a QP runs (the variant order of cc::CongestionControl).
enum class CcAlgorithm : uint8_t {
  kNone,   ///< no rate control: the requester sends at line rate
  kDcqcn,  ///< DCQCN reaction point, driven by CNPs (Zhu et al. 2015)
  kTimely, ///< TIMELY, driven by the engine's RTT samples on ACKs (Mittal et al. 2015)
};
inline constexpr std::string_view kCcAlgorithmNames[] = {"none", "dcqcn", "timely"};
constexpr std::string_view cc_algorithm_name(CcAlgorithm a) { return kCcAlgorithmNames[uint8_t(a)]; }

/// The unit of DcqcnParams::rpg_byte_reset, bytes.
inline constexpr uint32_t kRpgByteResetUnit = 64;

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
  /// RPG_BYTE_RESET, in units of kRpgByteResetUnit (64) bytes: data sent
  /// between rate increases; 0 disables the byte counter. The NVIDIA text says
  /// "given in bytes", but the field is 15 bits wide (32767 is its largest
  /// value, and the default), and a 32 KiB counter would fire every 2.6 us at
  /// 100 Gb/s, faster than the 4 us monitor period can cut; Google's isekai
  /// ConnectX model counts it in 64-byte units (32767 x 64 B = 2 MiB, the
  /// order of the paper's B = 10 MB). We do the same; docs/CC.md shows what
  /// the byte reading does.
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
  /// kept-share reading is the one Google's isekai ConnectX model uses, and
  /// the one under which the shipped default (1019) gives a DCTCP-like gain.
  uint32_t dce_tcp_g = 1019;
  /// DCE_TCP_RTT, us: the alpha update period (the paper's K): alpha rises
  /// by g at the end of a period in which a CNP arrived, else decays by (1-g).
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
    p.rpg_byte_reset = 10 * 1024 * 1024 / kRpgByteResetUnit;  // B = 10 MB
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

/// DCQCN notification point (the receiver side: CE-marked packet -> CNP).
/// Defaults: ConnectX firmware (MIN_TIME_BETWEEN_CNPS_P1=4, CNP_DSCP_P1=48,
/// CNP_802P_PRIO_P1=6; mlx5 debugfs np_min_time_between_cnps, np_cnp_dscp,
/// np_cnp_prio).
struct CnpParams {
  uint32_t min_time_between_cnps = 4;  ///< MIN_TIME_BETWEEN_CNPS, us (paper: N = 50)
  uint8_t cnp_dscp = 48;               ///< CNP_DSCP
  uint8_t cnp_802p_prio = 6;           ///< CNP_802P_PRIO
};

/// TIMELY parameters, named as in the paper. Defaults: the paper's Section 5
/// values (alpha 0.875, beta 0.8, T_low 50 us, T_high 500 us, minRTT 20 us,
/// delta 10 Mb/s, N = 5); the same alpha, beta, T_low, T_high and minRTT are
/// the TIMELY defaults of the HPCC ns-3 model (alibaba-edu/
/// High-Precision-Congestion-Control, rdma-hw.cc: TimelyAlpha 0.875,
/// TimelyBeta 0.8, TimelyTLow 50000 ns, TimelyTHigh 500000 ns, TimelyMinRtt
/// 20000 ns). delta and N are recalled from the paper, not cross-checked.
struct TimelyParams {
  double alpha = 0.875;               ///< EWMA weight of the newest RTT difference
  double beta = 0.8;                  ///< multiplicative-decrease factor
  uint64_t delta_bps = 10'000'000;    ///< additive-increase step delta
  uint64_t t_low_ns = 50'000;         ///< below: always increase
  uint64_t t_high_ns = 500'000;       ///< above: always decrease
  uint64_t min_rtt_ns = 20'000;       ///< gradient normaliser (propagation RTT)
  uint32_t hai_thresh = 5;            ///< samples with gradient <= 0 before HAI
  uint32_t hai_n = 5;                 ///< HAI multiplier N
  uint64_t min_rate_bps = 10'000'000; ///< floor (ours; the paper states none)
  /// Patched TIMELY (Zhu et al., "ECN or Delay", CoNEXT 2016, 4.3): between
  /// T_low and T_high the gradient only weighs a decrease that is driven by
  /// the RTT's distance from the reference T_low, so all flows that see the
  /// same RTT settle at the same rate (a unique, fair fixed point):
  ///   w(g) = 0 for g <= -1/4, 1 for g >= 1/4, else 2g + 1/2;
  ///   rate = rate * (1 - beta * w * (rtt - T_low) / T_low) + delta * (1 - w).
  /// Off: the original TIMELY rules (Mittal et al. 2015, Algorithm 1).
  bool patched = false;
  /// Weigh each update by min(1, time since the previous one / min_rtt), as
  /// the TIMELY authors' reference code does (eRPC timely.h "delta_factor").
  bool scale_by_elapsed = false;
};


/// DeviceConfig::cc: the device's congestion control. The algorithm applies to
/// every RC and UC QP created on the device; the notification point (CNPs for
/// CE-marked packets received) runs whenever np_enabled is set, whatever the
/// local algorithm, as a ConnectX NP does for its priority.
struct CcConfig {
  CcAlgorithm algorithm = CcAlgorithm::kNone;
  /// Line rate of the port in Mb/s: the rate a QP starts at and returns to,
  /// and the ceiling of every algorithm. The port does not report its speed,
  /// so it is configured here (a 100 GbE NIC by default).
  uint32_t line_rate_mbps = 100'000;
  /// Pacer burst tolerance, bytes: what may leave back to back after an idle
  /// period (at least one packet always may).
  uint32_t pacer_burst_bytes = 16 * 1024;
  /// Send CNPs for CE-marked RoCE packets received (DCQCN NP).
  bool np_enabled = true;
  CnpParams cnp;
  DcqcnParams dcqcn;
  TimelyParams timely;
};

}  // namespace uroce
