// Tests for stack/cc/cc.h: the per-QP CongestionControl wrapper (variant
// dispatch, no allocation) and the "no CC" line-rate implementation.
#include "stack/cc/cc.h"

#include <cstdint>
#include <type_traits>

#include <gtest/gtest.h>

namespace uroce::cc {
namespace {

constexpr uint64_t kG = 1'000'000'000;

TEST(CongestionControl, NoCcIsLineRateWithNoTimers) {
  // Events: CNPs, ACKs with RTT, bytes, timers on a "none" QP.
  // Expect: always the line rate; no timer ever armed.
  CongestionControl cc(25 * kG);
  EXPECT_EQ(cc.algorithm(), Algorithm::kNone);
  cc.on_cnp(0);
  cc.on_ack(4096, 1'000'000, 1);
  cc.on_bytes_sent(1'000'000, 2);
  cc.on_timer(3);
  EXPECT_EQ(cc.rate_bps(), 25 * kG);
  EXPECT_EQ(cc.line_rate_bps(), 25 * kG);
  EXPECT_EQ(cc.next_timer_ns(), kNeverNs);
}

TEST(CongestionControl, DispatchesToDcqcn) {
  // Events: make_dcqcn(100 G, paper), CNP at 0, timer at 55 us.
  // Expect: 50 G after the CNP, 75 G after the first fast-recovery step; the
  // concrete Dcqcn is reachable through get_if.
  Result<CongestionControl> r = CongestionControl::make_dcqcn(100 * kG, DcqcnParams::paper());
  ASSERT_TRUE(r.ok());
  CongestionControl& cc = r.value();
  EXPECT_EQ(cc.algorithm(), Algorithm::kDcqcn);
  EXPECT_EQ(cc_algorithm_name(cc.algorithm()), "dcqcn");
  cc.on_cnp(0);
  EXPECT_EQ(cc.rate_bps(), 50 * kG);
  EXPECT_EQ(cc.next_timer_ns(), 55'000u);
  cc.on_timer(55'000);
  EXPECT_EQ(cc.rate_bps(), 75 * kG);
  ASSERT_NE(cc.get_if<Dcqcn>(), nullptr);
  EXPECT_EQ(cc.get_if<Timely>(), nullptr);
}

TEST(CongestionControl, DispatchesToTimelyAndIgnoresCnp) {
  // Events: make_timely(100 G), CNP, RTT 100 us then 1000 us.
  // Expect: CNP changes nothing; the T_high rule gives 60 G.
  Result<CongestionControl> r = CongestionControl::make_timely(100 * kG, TimelyParams{});
  ASSERT_TRUE(r.ok());
  CongestionControl& cc = r.value();
  EXPECT_EQ(cc.algorithm(), Algorithm::kTimely);
  cc.on_cnp(0);
  EXPECT_EQ(cc.rate_bps(), 100 * kG);
  cc.on_ack(4096, 100'000, 1);
  cc.on_ack(4096, 1'000'000, 2);
  EXPECT_EQ(cc.rate_bps(), 60 * kG);
}

TEST(CongestionControl, FactoriesRejectInvalidParams) {
  // Events: make_dcqcn with rpg_time_reset = 0. Expect: kInvalidArgument.
  DcqcnParams p;
  p.rpg_time_reset = 0;
  Result<CongestionControl> r = CongestionControl::make_dcqcn(100 * kG, p);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(CongestionControl, HeldByValueWithoutAllocation) {
  // Expect: the wrapper is a plain value type (copyable, no heap indirection)
  // small enough to sit inside a QP.
  static_assert(std::is_trivially_copyable_v<LineRate>);
  static_assert(std::is_trivially_copyable_v<Dcqcn>);
  static_assert(std::is_copy_constructible_v<CongestionControl>);
  EXPECT_LE(sizeof(CongestionControl), 256u);
}

}  // namespace
}  // namespace uroce::cc
