// DSCP and ECN for RoCE traffic (A17.9 ECN; RFC 2474 DSCP; RFC 3168 ECN), as
// data the transport reads when it builds IP headers. A per-device default
// (like mlx5's roce_tc / traffic_class sysfs knobs) and the per-AH traffic
// class of the verbs API (AhAttr::traffic_class, DSCP << 2 | ECN), combined by
// one pure function. The transport never hard-codes a TOS byte.
#pragma once

#include <cstdint>

#include <uroce/status.h>

namespace uroce::net {

/// ECN codepoints of the two low traffic-class bits (RFC 3168 5).
enum class Ecn : uint8_t { kNotEct = 0, kEct1 = 1, kEct0 = 2, kCe = 3 };

inline constexpr uint8_t kDscpMax = 63;
inline constexpr uint8_t kPcpMax = 7;

struct TrafficClassConfig {
  /// DSCP of RoCE data packets when the AH asks for none (DSCP 0). 26 (AF31)
  /// is the common lossless-RoCE class (NVIDIA/Mellanox RoCE configuration guides).
  uint8_t dscp = 26;
  /// ECN codepoint of RoCE data packets: ECT(0) lets switches mark CE, which
  /// DCQCN needs (A17.9.1). kNotEct turns marking off. kCe is never originated.
  Ecn ecn = Ecn::kEct0;
  /// Use dscp even when the AH carries one (mlx5's per-device traffic_class override).
  bool force_dscp = false;
  /// DSCP and ECN of CNPs (A17.9.2); mlx5's cnp_dscp default is 48.
  uint8_t cnp_dscp = 48;
  Ecn cnp_ecn = Ecn::kNotEct;
  /// 802.1p priority (PCP) of VLAN-tagged RoCE frames (the priority PFC protects).
  uint8_t vlan_pcp = 3;
};

/// kInvalidArgument if a DSCP is over 63, the PCP over 7, or an ECN codepoint is CE.
inline Status validate(const TrafficClassConfig& c) {
  if (c.dscp > kDscpMax || c.cnp_dscp > kDscpMax) return {StatusCode::kInvalidArgument, "DSCP above 63"};
  if (c.vlan_pcp > kPcpMax) return {StatusCode::kInvalidArgument, "PCP above 7"};
  if (c.ecn == Ecn::kCe || c.cnp_ecn == Ecn::kCe) return {StatusCode::kInvalidArgument, "a sender never sets CE"};
  return {};
}

/// The IPv4 TOS / IPv6 traffic class byte of a RoCE data packet on a path whose
/// AH asked for ah_traffic_class (DSCP << 2 | ECN): the AH's DSCP unless it is 0
/// or the device forces its own; the AH's ECN bits if they name ECT(0)/ECT(1),
/// else the device's codepoint (CE from an AH is never sent).
inline constexpr uint8_t roce_traffic_class(const TrafficClassConfig& c, uint8_t ah_traffic_class) {
  const uint8_t ah_dscp = uint8_t(ah_traffic_class >> 2);
  const uint8_t ah_ecn = uint8_t(ah_traffic_class & 3);
  const uint8_t dscp = (c.force_dscp || ah_dscp == 0) ? c.dscp : ah_dscp;
  const bool ah_ect = ah_ecn == uint8_t(Ecn::kEct0) || ah_ecn == uint8_t(Ecn::kEct1);
  const uint8_t ecn = ah_ect ? ah_ecn : uint8_t(c.ecn);
  return uint8_t(dscp << 2 | ecn);
}

/// The traffic class byte of a CNP.
inline constexpr uint8_t cnp_traffic_class(const TrafficClassConfig& c) {
  return uint8_t(c.cnp_dscp << 2 | uint8_t(c.cnp_ecn));
}

}  // namespace uroce::net
