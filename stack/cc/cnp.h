// DCQCN notification point (NP) helper: decides, for one QP, whether an
// arriving ECN-CE-marked packet (IP ECN = 0b11) triggers a CNP (BTH opcode
// 0x81, IBA Annex A17 RoCEv2 CE). Rule: at most one CNP per QP per
// min_time_between_cnps; the first CE-marked packet after the interval has
// passed sends one immediately (Zhu et al. SIGCOMM 2015, Section 3.1 NP
// algorithm, whose N = 50 us is the paper's interval).
//
// Default interval: 4 us, the ConnectX firmware default reported by
// `mlxconfig q` (MIN_TIME_BETWEEN_CNPS_P1=4; mlx5 debugfs
// np_min_time_between_cnps). ConnectX applies it per port unless CNP
// moderation per QP is enabled; we keep one generator per QP, which is the
// paper's rule. cnp_dscp / cnp_802p_prio are what the CNP builder should put
// in the CNP's IP DSCP and VLAN PCP (firmware defaults CNP_DSCP_P1=48,
// CNP_802P_PRIO_P1=6).
#pragma once

#include <cstdint>

#include <uroce/cc.h>

#include "stack/cc/units.h"

namespace uroce::cc {

using uroce::CnpParams;

class CnpGenerator {
 public:
  explicit CnpGenerator(const CnpParams& p = CnpParams{})
      : interval_ns_(us_to_ns(p.min_time_between_cnps)) {}

  /// A CE-marked packet for this QP arrived at now_ns. Returns true if the
  /// caller must send a CNP now (and records it as sent).
  bool on_ce_marked(uint64_t now_ns);

  uint64_t interval_ns() const { return interval_ns_; }
  /// Time the last CNP was sent; meaningful only if one was sent.
  uint64_t last_cnp_ns() const { return last_cnp_ns_; }
  bool sent_any() const { return sent_any_; }

 private:
  uint64_t interval_ns_;
  uint64_t last_cnp_ns_ = 0;
  bool sent_any_ = false;
};

}  // namespace uroce::cc
