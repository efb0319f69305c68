// 24-bit packet sequence number arithmetic (IBA 9.7.1). PSNs wrap from
// 0xFFFFFF to 0; two PSNs compare by their distance modulo 2^24, so "a before b"
// holds while b is less than 2^23 ahead of a. Plain < on PSNs is banned.
#pragma once

#include <cstdint>

namespace uroce::wire {

inline constexpr uint32_t kPsnMask = 0x00ffffff;
inline constexpr uint32_t kPsnHalfWindow = 0x00800000;  // 2^23: IBA 9.7.1 valid region

/// Signed distance a - b in the 24-bit circle: negative if a is before b.
inline constexpr int32_t psn_cmp(uint32_t a, uint32_t b) { return int32_t((a - b) << 8) >> 8; }

/// a + n modulo 2^24.
inline constexpr uint32_t psn_add(uint32_t a, uint32_t n) { return (a + n) & kPsnMask; }

/// a - 1 modulo 2^24: the PSN before a (an ACK of everything before epsn).
inline constexpr uint32_t psn_prev(uint32_t a) { return psn_add(a, kPsnMask); }

/// Unsigned distance from b forward to a, modulo 2^24.
inline constexpr uint32_t psn_diff(uint32_t a, uint32_t b) { return (a - b) & kPsnMask; }

static_assert(psn_cmp(0, 0xffffff) == 1);
static_assert(psn_cmp(0xffffff, 0) == -1);
static_assert(psn_add(0xffffff, 2) == 1);
static_assert(psn_diff(1, 0xffffff) == 2);
static_assert(psn_prev(0) == 0xffffff);

}  // namespace uroce::wire
