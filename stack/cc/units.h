// Units shared by the congestion-control classes: rates are bit/s (uint64_t),
// times are nanoseconds (uint64_t) on the caller's clock, and kNeverNs means
// "no timer armed". Parameters that ConnectX expresses in Mb/s or us keep
// those units in the params structs and are converted here, once, at
// construction (control path).
#pragma once

#include <cstdint>
#include <limits>

namespace uroce::cc {

/// next_timer_ns() value meaning "no timer armed".
inline constexpr uint64_t kNeverNs = std::numeric_limits<uint64_t>::max();

/// Highest line rate the integer rate arithmetic supports (2^40 b/s, about
/// 1.1 Tb/s): rate * Q20 fraction must fit in 64 bits.
inline constexpr uint64_t kMaxLineRateBps = uint64_t(1) << 40;

inline constexpr uint64_t kNsPerUs = 1000;
inline constexpr uint64_t kNsPerSec = 1'000'000'000;
inline constexpr uint64_t kBpsPerMbps = 1'000'000;

constexpr uint64_t us_to_ns(uint64_t us) { return us * kNsPerUs; }
constexpr uint64_t mbps_to_bps(uint64_t mbps) { return mbps * kBpsPerMbps; }
constexpr uint64_t gbps_to_bps(uint64_t gbps) { return gbps * 1000 * kBpsPerMbps; }

}  // namespace uroce::cc
