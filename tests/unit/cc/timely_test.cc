// Tests for stack/cc/timely.cc: TIMELY (Mittal et al. SIGCOMM 2015,
// Algorithm 1) reactions to scripted RTT samples with the paper's parameters
// (alpha 0.875, beta 0.8, delta 10 Mb/s, T_low 50 us, T_high 500 us,
// minRTT 20 us, HAI N = 5), on a 100 Gb/s line. Rates are exact: the
// arithmetic is integer (ppm factors, ns differences truncated toward zero).
#include "stack/cc/timely.h"

#include <cstdint>

#include <gtest/gtest.h>

namespace uroce::cc {
namespace {

constexpr uint64_t kG = 1'000'000'000;
constexpr uint64_t kUs = 1000;

TEST(Timely, FirstSampleOnlySeedsPrevRtt) {
  // Events: one RTT sample of 1 ms (above T_high); a zero "no sample".
  // Expect: rate unchanged at line rate: there is no difference yet.
  Timely t(100 * kG, TimelyParams{});
  t.on_ack(4096, 0, 0);
  t.on_ack(4096, 1000 * kUs, 0);
  EXPECT_EQ(t.rate_bps(), 100 * kG);
  EXPECT_EQ(t.rtt_diff_ns(), 0);
}

TEST(Timely, AboveTHighDecreasesByBetaTimesExcess) {
  // Events: RTT 100 us, then 1000 us (> T_high = 500 us).
  // Expect: rate *= 1 - 0.8 * (1 - 500/1000) = 0.6 -> 60 G; rtt_diff =
  // 0.875 * 900 us = 787.5 us.
  Timely t(100 * kG, TimelyParams{});
  t.on_ack(4096, 100 * kUs, 0);
  t.on_ack(4096, 1000 * kUs, 1);
  EXPECT_EQ(t.rate_bps(), 60 * kG);
  EXPECT_EQ(t.rtt_diff_ns(), 787'500);

  // Events: then RTT 40 us (< T_low).
  // Expect: additive increase by delta regardless of the gradient: 60.01 G;
  // rtt_diff = 0.125 * 787 500 + 0.875 * (-960 000) = -741 562 (truncated).
  t.on_ack(4096, 40 * kUs, 2);
  EXPECT_EQ(t.rate_bps(), 60'010'000'000u);
  EXPECT_EQ(t.rtt_diff_ns(), -741'562);
}

TEST(Timely, PositiveGradientDecreasesNegativeGradientIncreasesThenHai) {
  // Events: RTT 100 us, 110 us, 110 us, then 100 us repeatedly (all between
  // T_low and T_high).
  // Expect:
  //   110: rtt_diff = 8750 ns, gradient 0.4375, rate *= 1 - 0.35 -> 65 G
  //   110: rtt_diff = 1093 ns, rate *= 1 - 0.04372 -> 62 158 200 000
  //   100: rtt_diff = -8613 <= 0: +delta (1st) -> 62 168 200 000
  //   100 x3: rtt_diff -1076, -134, -16: +delta each -> 62 198 200 000
  //   100: rtt_diff -2: 5th in a row -> HAI +5 delta -> 62 248 200 000
  //   100: rtt_diff 0 (truncated): still <= 0 -> HAI -> 62 298 200 000
  Timely t(100 * kG, TimelyParams{});
  t.on_ack(4096, 100 * kUs, 0);
  t.on_ack(4096, 110 * kUs, 1);
  EXPECT_EQ(t.rtt_diff_ns(), 8750);
  EXPECT_EQ(t.rate_bps(), 65 * kG);
  t.on_ack(4096, 110 * kUs, 2);
  EXPECT_EQ(t.rtt_diff_ns(), 1093);
  EXPECT_EQ(t.rate_bps(), 62'158'200'000u);
  t.on_ack(4096, 100 * kUs, 3);
  EXPECT_EQ(t.rtt_diff_ns(), -8613);
  EXPECT_EQ(t.neg_gradient_count(), 1u);
  EXPECT_EQ(t.rate_bps(), 62'168'200'000u);
  const int64_t diffs[] = {-1076, -134, -16};
  for (int i = 0; i < 3; ++i) {
    t.on_ack(4096, 100 * kUs, 4 + uint64_t(i));
    EXPECT_EQ(t.rtt_diff_ns(), diffs[i]);
  }
  EXPECT_EQ(t.rate_bps(), 62'198'200'000u);
  t.on_ack(4096, 100 * kUs, 7);
  EXPECT_EQ(t.rtt_diff_ns(), -2);
  EXPECT_EQ(t.neg_gradient_count(), 5u);
  EXPECT_EQ(t.rate_bps(), 62'248'200'000u);
  t.on_ack(4096, 100 * kUs, 8);
  EXPECT_EQ(t.rtt_diff_ns(), 0);
  EXPECT_EQ(t.rate_bps(), 62'298'200'000u);
}

TEST(Timely, RateBoundedByLineRateAndMinRate) {
  // Events: (a) at line rate, RTT 10 us samples (< T_low);
  // (b) RTT 100 us then 400 us: gradient 0.875 * 300 us / 20 us = 13.1.
  // Expect: (a) stays at exactly line rate; (b) 1 - beta * gradient < 0, so
  // the rate falls to min_rate (10 Mb/s), never to zero.
  Timely a(100 * kG, TimelyParams{});
  for (int i = 0; i < 10; ++i) a.on_ack(4096, 10 * kUs, uint64_t(i));
  EXPECT_EQ(a.rate_bps(), 100 * kG);

  Timely b(100 * kG, TimelyParams{});
  b.on_ack(4096, 100 * kUs, 0);
  b.on_ack(4096, 400 * kUs, 1);
  EXPECT_EQ(b.rate_bps(), 10'000'000u);
}

TEST(Timely, ValidateRejectsBadParams) {
  // Events: validate() with alpha > 1, min_rtt 0, t_low > t_high.
  // Expect: kInvalidArgument each time; the defaults pass.
  EXPECT_TRUE(validate(TimelyParams{}, 100 * kG).ok());
  TimelyParams p;
  p.alpha = 1.5;
  EXPECT_EQ(validate(p, 100 * kG).code(), StatusCode::kInvalidArgument);
  p = TimelyParams{};
  p.min_rtt_ns = 0;
  EXPECT_EQ(validate(p, 100 * kG).code(), StatusCode::kInvalidArgument);
  p = TimelyParams{};
  p.t_low_ns = 600'000;
  EXPECT_EQ(validate(p, 100 * kG).code(), StatusCode::kInvalidArgument);
}

TEST(Timely, PatchedWeighsDecreaseByGradientAndRttError) {
  // Zhu et al. CoNEXT 2016 patch, paper parameters otherwise (T_low 50 us,
  // minRTT 20 us, beta 0.8, delta 10 Mb/s). Events: RTT 100 us (seed), then
  // 100, 110 and 90 us.
  // Expect:
  //   100: rtt_diff 0, g 0, w = 1/2; err = (100-50)/50 = 1:
  //        rate = 100 G * (1 - 0.8 * 0.5 * 1) + 10 M * 0.5 = 60 005 000 000
  //   110: rtt_diff 8750, g 0.4375 >= 1/4, w = 1; err 1.2:
  //        rate *= 1 - 0.96, no additive part -> 2 400 200 000
  //    90: rtt_diff -16406, g -0.82 <= -1/4, w = 0: no decrease, + delta
  //        -> 2 410 200 000
  TimelyParams p;
  p.patched = true;
  Timely t(100 * kG, p);
  t.on_ack(4096, 100 * kUs, 0);
  t.on_ack(4096, 100 * kUs, 1);
  EXPECT_EQ(t.rate_bps(), 60'005'000'000u);
  t.on_ack(4096, 110 * kUs, 2);
  EXPECT_EQ(t.rtt_diff_ns(), 8750);
  EXPECT_EQ(t.rate_bps(), 2'400'200'000u);
  t.on_ack(4096, 90 * kUs, 3);
  EXPECT_EQ(t.rtt_diff_ns(), -16406);
  EXPECT_EQ(t.rate_bps(), 2'410'200'000u);
}

TEST(Timely, ScaleByElapsedWeighsEachUpdate) {
  // Original rules, scale_by_elapsed, minRTT 20 us. Events: RTT 100 us at
  // t = 0 (seed); 110 us at 10 us; 40 us at 50 us; 40 us at 55 us.
  // Expect:
  //   10 us: weight 10/20 = 0.5; gradient 0.4375: rate *= 1 - 0.35 * 0.5 -> 82.5 G
  //   50 us: weight 1 (40 us >= minRTT); below T_low: + delta -> 82.51 G
  //   55 us: weight 5/20 = 0.25: + delta / 4 -> 82 512 500 000
  TimelyParams p;
  p.scale_by_elapsed = true;
  Timely t(100 * kG, p);
  t.on_ack(4096, 100 * kUs, 0);
  t.on_ack(4096, 110 * kUs, 10 * kUs);
  EXPECT_EQ(t.rate_bps(), 82'500'000'000u);
  t.on_ack(4096, 40 * kUs, 50 * kUs);
  EXPECT_EQ(t.rate_bps(), 82'510'000'000u);
  t.on_ack(4096, 40 * kUs, 55 * kUs);
  EXPECT_EQ(t.rate_bps(), 82'512'500'000u);
}

}  // namespace
}  // namespace uroce::cc
