// Per-QP congestion control: set-up and configuration checks; see qp_cc.h.
#include "stack/transport/qp_cc.h"

#include <iterator>

namespace uroce::transport {

Status validate(const CcConfig& cfg) {
  const uint64_t line = cc::mbps_to_bps(cfg.line_rate_mbps);
  if (line == 0 || line > cc::kMaxLineRateBps) return Status(StatusCode::kInvalidArgument, "cc: line_rate_mbps out of range");
  if (uint8_t(cfg.algorithm) >= std::size(kCcAlgorithmNames)) return Status(StatusCode::kInvalidArgument, "cc: unknown algorithm");
  if (cfg.cnp.cnp_dscp > 63 || cfg.cnp.cnp_802p_prio > 7) return Status(StatusCode::kInvalidArgument, "cc: cnp_dscp 0..63, cnp_802p_prio 0..7");
  if (Status s = cc::validate(cfg.dcqcn, line); !s.ok()) return s;
  return cc::validate(cfg.timely, line);
}

void QpCc::init(const CcConfig& cfg, QpType t) {
  const uint64_t line = cc::mbps_to_bps(cfg.line_rate_mbps);
  const CcAlgorithm a = t == QpType::kUd ? CcAlgorithm::kNone : cfg.algorithm;
  switch (a) {
    case CcAlgorithm::kNone: cc_ = cc::CongestionControl(line); break;
    case CcAlgorithm::kDcqcn: cc_ = cc::CongestionControl(cc::Dcqcn(line, cfg.dcqcn)); break;
    case CcAlgorithm::kTimely: cc_ = cc::CongestionControl(cc::Timely(line, cfg.timely)); break;
  }
  paced_ = a != CcAlgorithm::kNone;
  pacer_ = cc::Pacer(line, cfg.pacer_burst_bytes);
  np_ = cc::CnpGenerator(cfg.cnp);
  rtt_head_ = rtt_tail_ = 0;
  rtt_samples_ = 0;
  last_rtt_ns_ = 0;
}

}  // namespace uroce::transport
