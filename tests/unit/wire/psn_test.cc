// Tests for stack/wire/psn.h: 24-bit PSN arithmetic across the 0xFFFFFF -> 0
// wrap and at the half-window (2^23) boundary (IBA 9.7.1), checked against a
// plain reference written with 64-bit integers.
#include "stack/wire/psn.h"

#include <cstdint>
#include <random>

#include <gtest/gtest.h>

namespace uroce::wire {
namespace {

// Reference: the distance a - b taken into [-2^23, 2^23) by plain arithmetic.
int64_t ref_cmp(uint32_t a, uint32_t b) {
  int64_t d = (int64_t(a) - int64_t(b)) % (int64_t(1) << 24);
  if (d < 0) d += int64_t(1) << 24;
  return d >= (int64_t(1) << 23) ? d - (int64_t(1) << 24) : d;
}

int sign(int64_t v) { return (v > 0) - (v < 0); }

TEST(Psn, IBA_9_7_1_AddWrapsFrom0xFFFFFFTo0) {
  // Receive: psn_add at the top of the space.
  // Expect: results modulo 2^24.
  EXPECT_EQ(psn_add(0xffffff, 1), 0u);
  EXPECT_EQ(psn_add(0xffffff, 0), 0xffffffu);
  EXPECT_EQ(psn_add(0xfffff0, 0x20), 0x10u);
  EXPECT_EQ(psn_add(0, 0xffffff), 0xffffffu);
  EXPECT_EQ(psn_add(5, 1u << 24), 5u);
  EXPECT_EQ(psn_add(0x800000, 0x800000), 0u);
}

TEST(Psn, IBA_9_7_1_DiffIsForwardDistanceAcrossTheWrap) {
  // Receive: psn_diff(a, b), the distance from b forward to a.
  // Expect: 1 from 0xFFFFFF to 0; 0x20 across the wrap; 0xFFFFFF backwards by one.
  EXPECT_EQ(psn_diff(0, 0xffffff), 1u);
  EXPECT_EQ(psn_diff(0x10, 0xfffff0), 0x20u);
  EXPECT_EQ(psn_diff(0xffffff, 0), 0xffffffu);
  EXPECT_EQ(psn_diff(7, 7), 0u);
}

TEST(Psn, IBA_9_7_1_CmpOrdersAcrossTheWrap) {
  // Receive: PSNs on either side of 0xFFFFFF -> 0.
  // Expect: 0 is after 0xFFFFFF, 0xFFFFFF before 0, equal is 0.
  EXPECT_GT(psn_cmp(0, 0xffffff), 0);
  EXPECT_LT(psn_cmp(0xffffff, 0), 0);
  EXPECT_GT(psn_cmp(3, 0xfffffd), 0);
  EXPECT_EQ(psn_cmp(3, 0xfffffd), 6);
  EXPECT_EQ(psn_cmp(0xfffffd, 3), -6);
  EXPECT_EQ(psn_cmp(0x123456, 0x123456), 0);
}

TEST(Psn, IBA_9_7_1_HalfWindowBoundary) {
  // Receive: b + 2^23 - 1 and b + 2^23 compared with b, for b near 0, the
  //   middle and the top of the space.
  // Expect: up to 2^23 - 1 ahead is "after"; exactly 2^23 ahead counts as
  //   before (the valid region is half the space); 2^23 behind is "before".
  for (const uint32_t b : {0u, 1u, 0x7fffffu, 0x800000u, 0xfffffeu, 0xffffffu}) {
    SCOPED_TRACE(b);
    EXPECT_EQ(psn_cmp(psn_add(b, kPsnHalfWindow - 1), b), int32_t(kPsnHalfWindow - 1));
    EXPECT_EQ(psn_cmp(psn_add(b, kPsnHalfWindow), b), -int32_t(kPsnHalfWindow));
    EXPECT_EQ(psn_cmp(b, psn_add(b, kPsnHalfWindow - 1)), -int32_t(kPsnHalfWindow - 1));
    EXPECT_EQ(psn_cmp(psn_add(b, kPsnHalfWindow + 1), b), -int32_t(kPsnHalfWindow - 1));
  }
}

TEST(Psn, IgnoresBitsAbove24) {
  // Receive: PSNs with garbage in bits 24..31 (as read from a BTH word unmasked).
  // Expect: only the low 24 bits count.
  EXPECT_EQ(psn_cmp(0xff000001, 0x00000000), 1);
  EXPECT_EQ(psn_cmp(0x01ffffff, 0xab000000), -1);
  EXPECT_EQ(psn_add(0xff000000, 1), 1u);
  EXPECT_EQ(psn_diff(0xab000001, 0xcdffffff), 2u);
}

TEST(Psn, MatchesReferenceOnRandomAndBoundaryPairs) {
  // Receive: 200000 seeded random pairs plus every pair of boundary values.
  // Expect: psn_cmp equals the reference distance, psn_diff its value modulo
  //   2^24, and psn_add(b, psn_diff(a, b)) == a.
  std::mt19937 rng(1234);
  auto check = [](uint32_t a, uint32_t b) {
    const int64_t r = ref_cmp(a, b);
    ASSERT_EQ(psn_cmp(a, b), r) << std::hex << a << " " << b;
    ASSERT_EQ(sign(psn_cmp(b, a)), r == -(int64_t(1) << 23) ? -1 : -sign(r)) << std::hex << a << " " << b;
    ASSERT_EQ(int64_t(psn_diff(a, b)), (r + (int64_t(1) << 24)) % (int64_t(1) << 24));
    ASSERT_EQ(psn_add(b, psn_diff(a, b)), a);
  };
  for (int i = 0; i < 200000; ++i) check(rng() & kPsnMask, rng() & kPsnMask);
  const uint32_t edges[] = {0, 1, 2, 0x7ffffe, 0x7fffff, 0x800000, 0x800001, 0xfffffe, 0xffffff};
  for (const uint32_t a : edges) {
    for (const uint32_t b : edges) check(a, b);
  }
}

}  // namespace
}  // namespace uroce::wire
