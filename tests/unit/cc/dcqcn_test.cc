// Tests for stack/cc/dcqcn.cc: the DCQCN reaction point (Zhu et al. SIGCOMM
// 2015, Section 3.1) driven by scripted CNP / timer / byte events on a fake
// clock, with exact expected rates (bit/s) and alpha (Q20, 2^20 = 1.0).
#include "stack/cc/dcqcn.h"

#include <cstdint>
#include <initializer_list>
#include <utility>

#include <gtest/gtest.h>

namespace uroce::cc {
namespace {

constexpr uint64_t kG = 1'000'000'000;  // 1 Gb/s
constexpr uint64_t kUs = 1000;          // 1 us in ns

TEST(Dcqcn, ConnectXDefaultsMatchFirmware) {
  // Events: none. Expect: the mlxconfig-reported ConnectX-4 Lx defaults.
  const DcqcnParams p = DcqcnParams::connectx();
  EXPECT_FALSE(p.clamp_tgt_rate);
  EXPECT_TRUE(p.clamp_tgt_rate_after_time_inc);
  EXPECT_EQ(p.rpg_time_reset, 300u);
  EXPECT_EQ(p.rpg_byte_reset, 32767u);
  EXPECT_EQ(p.rpg_threshold, 1u);
  EXPECT_EQ(p.rpg_max_rate, 0u);
  EXPECT_EQ(p.rpg_ai_rate, 5u);
  EXPECT_EQ(p.rpg_hai_rate, 50u);
  EXPECT_EQ(p.rpg_gd, 11u);
  EXPECT_EQ(p.rpg_min_dec_fac, 50u);
  EXPECT_EQ(p.rpg_min_rate, 1u);
  EXPECT_EQ(p.rate_to_set_on_first_cnp, 0u);
  EXPECT_EQ(p.dce_tcp_g, 1019u);
  EXPECT_EQ(p.dce_tcp_rtt, 1u);
  EXPECT_EQ(p.rate_reduce_monitor_period, 4u);
  EXPECT_EQ(p.initial_alpha_value, 1023u);
  EXPECT_TRUE(validate(p, 100 * kG).ok());
  EXPECT_TRUE(validate(DcqcnParams::paper(), 100 * kG).ok());
}

TEST(Dcqcn, ValidateRejectsBadParams) {
  // Events: validate() with out-of-range fields. Expect: kInvalidArgument.
  DcqcnParams p;
  p.rpg_time_reset = 0;
  EXPECT_EQ(validate(p, 100 * kG).code(), StatusCode::kInvalidArgument);
  p = DcqcnParams{};
  p.dce_tcp_g = 1025;
  EXPECT_EQ(validate(p, 100 * kG).code(), StatusCode::kInvalidArgument);
  p = DcqcnParams{};
  p.rpg_min_dec_fac = 0;
  EXPECT_EQ(validate(p, 100 * kG).code(), StatusCode::kInvalidArgument);
  p = DcqcnParams{};
  EXPECT_EQ(validate(p, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(validate(p, kMaxLineRateBps + 1).code(), StatusCode::kInvalidArgument);
}

TEST(Dcqcn, UnlimitedUntilFirstCnp) {
  // Events: 10 MB sent, timers polled, no CNP.
  // Expect: line rate, not limited, no timer armed.
  Dcqcn d(100 * kG, DcqcnParams::connectx());
  for (int i = 0; i < 10000; ++i) d.on_bytes_sent(1000, uint64_t(i) * 80);
  d.on_timer(1'000'000);
  EXPECT_EQ(d.rate_bps(), 100 * kG);
  EXPECT_FALSE(d.limited());
  EXPECT_EQ(d.next_timer_ns(), kNeverNs);
  EXPECT_EQ(d.stage(), DcqcnStage::kIdle);
}

TEST(Dcqcn, PaperFirstCnpHalvesRateAndAlphaDecaysAfterK) {
  // Events: line 100 Gb/s, paper params (alpha starts at 1, g = 1/256,
  // K = T = 55 us); CNP at t=0; no CNP until t=55 us.
  // Expect: RT = 100 G, RC = 100 G * (1 - 1/2) = 50 G; alpha stays 1
  // ((1-g)*1 + g); at 55 us alpha = (1-g)*1 = 255/256 and the first fast
  // recovery step RC = (RT + RC)/2 = 75 G.
  Dcqcn d(100 * kG, DcqcnParams::paper());
  d.on_cnp(0);
  EXPECT_TRUE(d.limited());
  EXPECT_EQ(d.rate_bps(), 50 * kG);
  EXPECT_EQ(d.target_rate_bps(), 100 * kG);
  EXPECT_EQ(d.alpha_q20(), Dcqcn::kAlphaOne);
  EXPECT_EQ(d.next_timer_ns(), 55 * kUs);

  d.on_timer(55 * kUs - 1);
  EXPECT_EQ(d.rate_bps(), 50 * kG);
  d.on_timer(55 * kUs);
  EXPECT_EQ(d.alpha_q20(), Dcqcn::kAlphaOne / 256 * 255);  // 1044480
  EXPECT_EQ(d.rate_bps(), 75 * kG);
  EXPECT_EQ(d.stage(), DcqcnStage::kFastRecovery);
  EXPECT_EQ(d.time_stage(), 1u);

  d.on_timer(110 * kUs);
  EXPECT_EQ(d.alpha_q20(), 1040400u);  // 1044480 * 255/256
}

TEST(Dcqcn, PaperFastRecoveryFiveHalvingsThenAdditiveIncreaseToRelease) {
  // Events: paper params, CNP at t=0 (RC 50 G), then timer periods of 55 us.
  // Expect: F = 5 fast-recovery steps halve the gap to RT = 100 G each time
  // (75, 87.5, 93.75, 96.875, 98.4375 G); the 6th step is additive increase
  // with RT capped at line rate (99.21875 G); RC then keeps closing the gap
  // and, on reaching line rate, the limiter is released (no timers but alpha).
  Dcqcn d(100 * kG, DcqcnParams::paper());
  d.on_cnp(0);
  const uint64_t expect_fr[] = {75'000'000'000, 87'500'000'000, 93'750'000'000,
                                96'875'000'000, 98'437'500'000};
  for (int i = 0; i < 5; ++i) {
    d.on_timer(uint64_t(i + 1) * 55 * kUs);
    EXPECT_EQ(d.rate_bps(), expect_fr[i]) << "step " << i;
    EXPECT_EQ(d.stage(), DcqcnStage::kFastRecovery);
    EXPECT_EQ(d.target_rate_bps(), 100 * kG);
  }
  d.on_timer(6 * 55 * kUs);
  EXPECT_EQ(d.stage(), DcqcnStage::kAdditiveIncrease);
  EXPECT_EQ(d.target_rate_bps(), 100 * kG);  // RT + R_AI capped at line rate
  EXPECT_EQ(d.rate_bps(), 99'218'750'000u);
  d.on_timer(7 * 55 * kUs);
  EXPECT_EQ(d.rate_bps(), 99'609'375'000u);

  uint64_t t = 7 * 55 * kUs;
  int steps = 0;
  while (d.limited() && steps < 100) {
    t += 55 * kUs;
    d.on_timer(t);
    ++steps;
    EXPECT_LE(d.rate_bps(), 100 * kG);
  }
  EXPECT_FALSE(d.limited());
  EXPECT_EQ(d.rate_bps(), 100 * kG);
  EXPECT_EQ(d.stage(), DcqcnStage::kIdle);
  EXPECT_EQ(d.next_timer_ns(), t + 55 * kUs);  // only the alpha timer remains
}

TEST(Dcqcn, ConnectXFirstCnpUsesInitialAlpha1023) {
  // Events: line 100 Gb/s, ConnectX defaults, CNP at t=0.
  // Expect: RC = 100 G * (1 - 1023/2048) = 50 048 828 125; RT unclamped
  // (no increase yet) = 100 G; alpha = initial_alpha_value 1023/1024 in Q20
  // = 1047552 (the first CNP sets alpha, it does not also raise it); next
  // timer = alpha period dce_tcp_rtt = 1 us; the increase timer is at
  // rpg_time_reset = 300 us.
  Dcqcn d(100 * kG, DcqcnParams::connectx());
  d.on_cnp(0);
  EXPECT_EQ(d.rate_bps(), 50'048'828'125u);
  EXPECT_EQ(d.target_rate_bps(), 100 * kG);
  EXPECT_EQ(d.alpha_q20(), 1047552u);
  EXPECT_EQ(d.next_timer_ns(), 1 * kUs);
  // Alpha decays each microsecond without CNP: 1047552 * 1019 / 1024.
  d.on_timer(1 * kUs);
  EXPECT_EQ(d.alpha_q20(), 1042437u);
  EXPECT_EQ(d.rate_bps(), 50'048'828'125u);
}

DcqcnParams fixed_alpha_params() {
  // alpha pinned at 1 (g = 0) so that each cut is exactly a halving.
  DcqcnParams p;
  p.initial_alpha_value = 1024;
  p.dce_tcp_g = 1024;
  p.dce_tcp_rtt = 1000;  // 1 ms: out of the way
  p.rpg_time_reset = 1000;
  p.rpg_byte_reset = 0;
  return p;
}

TEST(Dcqcn, MonitorPeriodFoldsCnpsIntoOneCut) {
  // Events: alpha pinned at 1, rate_reduce_monitor_period = 4 us; CNPs at
  // 0, 1 us and 2 us; timers polled to 4 us; CNP at 9 us.
  // Expect: cut to 50 G at 0; no cut at 1 and 2 us (next timer = 4 us);
  // one cut to 25 G at 4 us; the CNP at 9 us (>= 4 + 4) cuts at once: 12.5 G.
  Dcqcn d(100 * kG, fixed_alpha_params());
  d.on_cnp(0);
  EXPECT_EQ(d.rate_bps(), 50 * kG);
  d.on_cnp(1 * kUs);
  d.on_cnp(2 * kUs);
  EXPECT_EQ(d.rate_bps(), 50 * kG);
  EXPECT_EQ(d.next_timer_ns(), 4 * kUs);
  d.on_timer(4 * kUs - 1);
  EXPECT_EQ(d.rate_bps(), 50 * kG);
  d.on_timer(4 * kUs);
  EXPECT_EQ(d.rate_bps(), 25 * kG);
  d.on_cnp(9 * kUs);
  EXPECT_EQ(d.rate_bps(), 12'500'000'000u);
}

TEST(Dcqcn, ByteCounterAndTimerDriveAdditiveThenHyperIncrease) {
  // Events: line 10 G, alpha pinned at 1, clamp RT on every cut, F = 1,
  // R_AI = 100 Mb/s, R_HAI = 1000 Mb/s, T = 100 us, B = 16 x 64 = 1024 bytes, no
  // monitor period. CNPs at 0 and 1 ns (RT = 5 G, RC = 2.5 G), then
  // interleaved byte-counter (BC) and timer (T) events.
  // Expect (stage from (T, BC) before the event):
  //   BC ev (0,0) FR: RC = 3.75 G
  //   BC ev (0,1) AI: RT = 5.1 G, RC = 4.425 G
  //   T  ev (0,2) AI: RT = 5.2 G, RC = 4.8125 G
  //   BC ev (1,2) AI: RT = 5.3 G, RC = 5.05625 G
  //   T  ev (1,3) AI: RT = 5.4 G, RC = 5.228125 G
  //   BC ev (2,3) HAI: RT = 6.4 G, RC = 5.8140625 G
  DcqcnParams p = fixed_alpha_params();
  p.clamp_tgt_rate = true;
  p.rpg_threshold = 1;
  p.rpg_ai_rate = 100;
  p.rpg_hai_rate = 1000;
  p.rpg_time_reset = 100;
  p.rpg_byte_reset = 16;  // 64-byte units: 1024 bytes
  p.rate_reduce_monitor_period = 0;
  Dcqcn d(10 * kG, p);
  d.on_cnp(0);
  d.on_cnp(1);
  EXPECT_EQ(d.target_rate_bps(), 5 * kG);
  EXPECT_EQ(d.rate_bps(), 2'500'000'000u);

  d.on_bytes_sent(1023, 10);  // below the byte threshold: nothing
  EXPECT_EQ(d.rate_bps(), 2'500'000'000u);
  d.on_bytes_sent(1, 10);
  EXPECT_EQ(d.stage(), DcqcnStage::kFastRecovery);
  EXPECT_EQ(d.rate_bps(), 3'750'000'000u);

  d.on_bytes_sent(1024, 20);
  EXPECT_EQ(d.stage(), DcqcnStage::kAdditiveIncrease);
  EXPECT_EQ(d.target_rate_bps(), 5'100'000'000u);
  EXPECT_EQ(d.rate_bps(), 4'425'000'000u);

  d.on_timer(100 * kUs + 1);
  EXPECT_EQ(d.stage(), DcqcnStage::kAdditiveIncrease);
  EXPECT_EQ(d.target_rate_bps(), 5'200'000'000u);
  EXPECT_EQ(d.rate_bps(), 4'812'500'000u);

  d.on_bytes_sent(1024, 100 * kUs + 10);
  EXPECT_EQ(d.target_rate_bps(), 5'300'000'000u);
  EXPECT_EQ(d.rate_bps(), 5'056'250'000u);

  d.on_timer(200 * kUs + 1);
  EXPECT_EQ(d.target_rate_bps(), 5'400'000'000u);
  EXPECT_EQ(d.rate_bps(), 5'228'125'000u);
  EXPECT_EQ(d.time_stage(), 2u);
  EXPECT_EQ(d.byte_stage(), 3u);

  d.on_bytes_sent(1024, 200 * kUs + 10);
  EXPECT_EQ(d.stage(), DcqcnStage::kHyperIncrease);
  EXPECT_EQ(d.target_rate_bps(), 6'400'000'000u);
  EXPECT_EQ(d.rate_bps(), 5'814'062'500u);
}

TEST(Dcqcn, CutResetsIncreaseStages) {
  // Events: as above up to one timer event (T = 1), then a CNP.
  // Expect: T and BC back to 0, the increase timer restarts at the cut.
  DcqcnParams p = fixed_alpha_params();
  p.rpg_time_reset = 100;
  p.rate_reduce_monitor_period = 0;
  Dcqcn d(10 * kG, p);
  d.on_cnp(0);
  d.on_timer(100 * kUs);
  EXPECT_EQ(d.time_stage(), 1u);
  d.on_cnp(150 * kUs);
  EXPECT_EQ(d.time_stage(), 0u);
  EXPECT_EQ(d.byte_stage(), 0u);
  EXPECT_EQ(d.next_timer_ns(), 250 * kUs);
}

TEST(Dcqcn, ClampAfterTimeIncreaseOnlyWhenTimerRaisedRate) {
  // Events: ConnectX clamp flags (clamp_tgt_rate = 0, after_time_inc = 1),
  // alpha pinned at 1, T = 100 us. CNP at 0 (RC 50 G, RT 100 G); CNP at
  // 10 us (no timer event yet); timer at 110 us (FR); CNP at 120 us.
  // Expect: second cut leaves RT = 100 G (T = 0); after the timer step RC is
  // (100 + 25) / 2 = 62.5 G and the third cut clamps RT to it: RT = 62.5 G,
  // RC = 31.25 G.
  DcqcnParams p = fixed_alpha_params();
  p.rpg_time_reset = 100;
  p.rate_reduce_monitor_period = 0;
  Dcqcn d(100 * kG, p);
  d.on_cnp(0);
  d.on_cnp(10 * kUs);
  EXPECT_EQ(d.target_rate_bps(), 100 * kG);
  EXPECT_EQ(d.rate_bps(), 25 * kG);
  d.on_timer(110 * kUs);
  EXPECT_EQ(d.rate_bps(), 62'500'000'000u);
  d.on_cnp(120 * kUs);
  EXPECT_EQ(d.target_rate_bps(), 62'500'000'000u);
  EXPECT_EQ(d.rate_bps(), 31'250'000'000u);
}

TEST(Dcqcn, RateNeverBelowRpgMinRate) {
  // Events: line 100 G, rpg_min_rate = 40 000 Mb/s, alpha pinned at 1,
  // CNPs at 0 and 10 us.
  // Expect: 50 G, then max(25 G, 40 G) = 40 G; further CNPs stay at 40 G.
  DcqcnParams p = fixed_alpha_params();
  p.rpg_min_rate = 40'000;
  p.rate_reduce_monitor_period = 0;
  Dcqcn d(100 * kG, p);
  d.on_cnp(0);
  EXPECT_EQ(d.rate_bps(), 50 * kG);
  d.on_cnp(10 * kUs);
  EXPECT_EQ(d.rate_bps(), 40 * kG);
  d.on_cnp(20 * kUs);
  EXPECT_EQ(d.rate_bps(), 40 * kG);
}

TEST(Dcqcn, MinDecFacBoundsOneCut) {
  // Events: rpg_gd = 10 (cut = alpha * RC, i.e. to zero at alpha = 1),
  // rpg_min_dec_fac = 50 %, then 80 %; CNP at 0.
  // Expect: the cut leaves 50 % (50 G), then 80 % (80 G) of the rate.
  DcqcnParams p = fixed_alpha_params();
  p.rpg_gd = 10;
  Dcqcn d(100 * kG, p);
  d.on_cnp(0);
  EXPECT_EQ(d.rate_bps(), 50 * kG);
  p.rpg_min_dec_fac = 80;
  Dcqcn d80(100 * kG, p);
  d80.on_cnp(0);
  EXPECT_EQ(d80.rate_bps(), 80 * kG);
}

TEST(Dcqcn, RpgMaxRateReleasesLimiter) {
  // Events: line 100 G, rpg_max_rate = 60 000 Mb/s, alpha pinned at 1,
  // CNP at 0 (50 G), one timer step (FR to 75 G >= 60 G).
  // Expect: ConnectX semantics: at rpg_max_rate the limiter is released and
  // the QP runs unlimited at line rate.
  DcqcnParams p = fixed_alpha_params();
  p.rpg_max_rate = 60'000;
  p.rpg_time_reset = 100;
  Dcqcn d(100 * kG, p);
  d.on_cnp(0);
  EXPECT_EQ(d.rate_bps(), 50 * kG);
  d.on_timer(100 * kUs);
  EXPECT_FALSE(d.limited());
  EXPECT_EQ(d.rate_bps(), 100 * kG);
}

TEST(Dcqcn, RateToSetOnFirstCnp) {
  // Events: line 100 G, rate_to_set_on_first_cnp = 20 000 Mb/s, alpha 1;
  // CNP at 0.
  // Expect: RC = RT = 20 G when the limiter is allocated, then the cut: 10 G.
  DcqcnParams p = fixed_alpha_params();
  p.rate_to_set_on_first_cnp = 20'000;
  Dcqcn d(100 * kG, p);
  d.on_cnp(0);
  EXPECT_EQ(d.target_rate_bps(), 20 * kG);
  EXPECT_EQ(d.rate_bps(), 10 * kG);
}

TEST(Dcqcn, ByteCounterDisabledWhenZero) {
  // Events: rpg_byte_reset = 0, CNP at 0, 100 MB sent before the timer.
  // Expect: rate unchanged by bytes.
  Dcqcn d(100 * kG, fixed_alpha_params());
  d.on_cnp(0);
  for (int i = 0; i < 100; ++i) d.on_bytes_sent(1'000'000, 1 + uint64_t(i));
  EXPECT_EQ(d.rate_bps(), 50 * kG);
  EXPECT_EQ(d.byte_stage(), 0u);
}

TEST(Dcqcn, ByteResetCountsSixtyFourByteUnits) {
  // Events: ConnectX defaults (rpg_byte_reset = 32767), line 100 G, CNP at 0
  // (RC 50 048 828 125, RT 100 G); 32767 x 64 - 1 = 2 097 087 bytes sent,
  // then 1 more byte.
  // Expect: no increase until 2 097 088 bytes; then one fast-recovery step,
  // RC = (100 G + 50 048 828 125 + 1) / 2 = 75 024 414 063, BC = 1.
  Dcqcn d(100 * kG, DcqcnParams::connectx());
  d.on_cnp(0);
  d.on_bytes_sent(2'097'087, 10);
  EXPECT_EQ(d.rate_bps(), 50'048'828'125u);
  EXPECT_EQ(d.byte_stage(), 0u);
  d.on_bytes_sent(1, 20);
  EXPECT_EQ(d.byte_stage(), 1u);
  EXPECT_EQ(d.stage(), DcqcnStage::kFastRecovery);
  EXPECT_EQ(d.rate_bps(), 75'024'414'063u);
}

/// The alpha-period tests' RP: g = 1/4 (dce_tcp_g 768), dce_tcp_rtt 10 us,
/// alpha 0.5 (initial_alpha_value 512) from its first CNP, at 0.
Dcqcn quarter_gain_after_first_cnp() {
  DcqcnParams p = fixed_alpha_params();
  p.initial_alpha_value = 512;
  p.dce_tcp_g = 768;
  p.dce_tcp_rtt = 10;
  Dcqcn d(100 * kG, p);
  d.on_cnp(0);
  return d;
}

/// Runs d's alpha updates at first_us, first_us + 10, ... us and expects
/// alpha (Q20) after each.
void expect_alpha_per_period(Dcqcn& d, uint64_t first_us, std::initializer_list<uint32_t> alpha_q20) {
  uint64_t t = (first_us - 10) * kUs;
  for (const uint32_t a : alpha_q20) {
    t += 10 * kUs;
    d.on_timer(t);
    EXPECT_EQ(d.alpha_q20(), a) << "at " << t / kUs << " us";
  }
}

TEST(Dcqcn, AlphaRisesAtMostOncePerPeriod) {
  // Events: quarter_gain_after_first_cnp, then three CNPs at 1, 2, 3 us;
  // alpha updates at 10 us (CNP seen) and 20 us (none).
  // Expect: the first CNP sets alpha = 0.5 (Q20 524288) and does not raise
  // it; at 10 us one raise for the three CNPs: 0.5 * 3/4 + 1/4 = 0.625
  // (655360); at 20 us one decay: 0.625 * 3/4 = 0.46875 (491520).
  Dcqcn d = quarter_gain_after_first_cnp();
  EXPECT_EQ(d.alpha_q20(), 524288u);
  d.on_cnp(1 * kUs);
  d.on_cnp(2 * kUs);
  d.on_cnp(3 * kUs);
  EXPECT_EQ(d.alpha_q20(), 524288u);
  expect_alpha_per_period(d, 10, {655360, 491520});
}

TEST(Dcqcn, CnpsReadAtOneInstantRaiseAlphaOnceEach) {
  // Events: quarter_gain_after_first_cnp (a CNP at 0), then three CNPs read
  // at 35 us, all three (one receive burst of an RP that ran late: they came
  // apart, and 35 us leave room for three 10 us periods); alpha updates at
  // 40, 50, 60 and 70 us.
  // Expect: the decays at 10, 20 and 30 us: 0.5 -> 0.2109375 (221184); then
  // one raise per CNP of the burst, one per period: 0.408203125 (428032) ->
  // 0.5561523... (583168) -> 0.6671142... (699520), then a decay at 70 us:
  // 0.5003356... (524640).
  Dcqcn d = quarter_gain_after_first_cnp();
  d.on_timer(30 * kUs);
  EXPECT_EQ(d.alpha_q20(), 221184u);
  for (int i = 0; i < 3; ++i) d.on_cnp(35 * kUs);
  expect_alpha_per_period(d, 40, {428032, 583168, 699520, 524640});
}

TEST(Dcqcn, CnpsReadAtOneInstantCutOnceEach) {
  // Events: alpha pinned at 1 (each cut halves), monitor period 4 us; a CNP
  // at 0, then four read at 40 us (one receive burst of an RP that ran late);
  // timers to 60 us.
  // Expect: 50 G after the first; at 40 us a cut to 25 G, then one cut a
  // monitor period apart for each other CNP of the burst: 12.5 G at 44 us,
  // 6.25 G at 48, 3.125 G at 52, and no more. (Folded into one cut, the
  // burst left 12.5 G: an RP that read 48 CNPs after a 1 ms nap stayed at
  // gigabits for another millisecond under CNPs.)
  Dcqcn d(100 * kG, fixed_alpha_params());
  d.on_cnp(0);
  EXPECT_EQ(d.rate_bps(), 50 * kG);
  for (int i = 0; i < 4; ++i) d.on_cnp(40 * kUs);
  EXPECT_EQ(d.rate_bps(), 25 * kG);
  using UsBps = std::pair<uint64_t, uint64_t>;
  for (const auto& [us, bps] : {UsBps{44, 12'500'000'000}, {48, 6'250'000'000}, {52, 3'125'000'000}, {60, 3'125'000'000}}) {
    d.on_timer(us * kUs);
    EXPECT_EQ(d.rate_bps(), bps) << "at " << us << " us";
  }
}

TEST(Dcqcn, CnpsReadAtOneInstantOweNoMoreThanTheirTimeAllows) {
  // The CNPs of one instant came after the previous instant a CNP was read:
  // no more of them came a period apart than that time holds.
  // Events: alpha pinned at 1, monitor 4 us; a CNP at 0, then four read at
  // 6 us; timers to 20 us. Expect: a cut at 6 us (25 G) and the one the
  // monitor period folds the others into at 10 us (12.5 G): 6 us hold no
  // third and fourth CNP 4 us apart.
  Dcqcn d(100 * kG, fixed_alpha_params());
  d.on_cnp(0);
  for (int i = 0; i < 4; ++i) d.on_cnp(6 * kUs);
  EXPECT_EQ(d.rate_bps(), 25 * kG);
  d.on_timer(20 * kUs);
  EXPECT_EQ(d.rate_bps(), 12'500'000'000u);
  // Events: quarter_gain_after_first_cnp (10 us periods), three CNPs read at
  // 3 us. Expect: one raise at 10 us, as for CNPs read at three instants
  // (AlphaRisesAtMostOncePerPeriod), then a decay.
  Dcqcn a = quarter_gain_after_first_cnp();
  for (int i = 0; i < 3; ++i) a.on_cnp(3 * kUs);
  expect_alpha_per_period(a, 10, {655360, 491520});
}

TEST(Dcqcn, ByteCounterIncreaseClampsTargetOnNextCut) {
  // Events: ConnectX clamp flags, alpha pinned at 1, B = 16 x 64 bytes, no
  // monitor period, line 100 G. CNP at 0 (RC 50 G, RT 100 G), CNP at 1 us
  // (no increase in between: RT stays 100 G, RC 25 G), 1024 bytes sent (FR:
  // RC 62.5 G, BC = 1), CNP at 2 us.
  // Expect: the third cut clamps RT to RC = 62.5 G (the byte counter raised
  // the rate), RC = 31.25 G.
  DcqcnParams p = fixed_alpha_params();
  p.rpg_byte_reset = 16;
  p.rate_reduce_monitor_period = 0;
  Dcqcn d(100 * kG, p);
  d.on_cnp(0);
  d.on_cnp(1 * kUs);
  EXPECT_EQ(d.target_rate_bps(), 100 * kG);
  EXPECT_EQ(d.rate_bps(), 25 * kG);
  d.on_bytes_sent(1024, 1 * kUs + 10);
  EXPECT_EQ(d.rate_bps(), 62'500'000'000u);
  d.on_cnp(2 * kUs);
  EXPECT_EQ(d.target_rate_bps(), 62'500'000'000u);
  EXPECT_EQ(d.rate_bps(), 31'250'000'000u);
}

TEST(Dcqcn, LateTimerCallReplaysMissedPeriodsInOrder) {
  // Events: paper params, CNP at 0, then a single on_timer at 5 * 55 us.
  // Expect: the same state as five calls at each period: RC = 98.4375 G,
  // T = 5, alpha = 2^20 * (255/256)^5 with per-step truncation.
  Dcqcn a(100 * kG, DcqcnParams::paper());
  Dcqcn b(100 * kG, DcqcnParams::paper());
  a.on_cnp(0);
  b.on_cnp(0);
  a.on_timer(5 * 55 * kUs);
  for (int i = 1; i <= 5; ++i) b.on_timer(uint64_t(i) * 55 * kUs);
  EXPECT_EQ(a.rate_bps(), 98'437'500'000u);
  EXPECT_EQ(a.rate_bps(), b.rate_bps());
  EXPECT_EQ(a.alpha_q20(), b.alpha_q20());
  EXPECT_EQ(a.time_stage(), 5u);
}

TEST(Dcqcn, CnpEvery4UsReachesMinRateFromAnyState) {
  // What cc.cnp_slows_target (apps/conform) relies on, ConnectX defaults.
  // Events: CNPs every 4 us for 0.6 ms on a fresh QP. Expect: rpg_min_rate.
  // Events: CNPs every 4 us for 2 ms, none for 0.4 / 1 / 5 ms (the tester
  // descheduled), then every 4 us again. Expect: the rate-increase timer
  // brought RC back to half the line rate or more (RT was never clamped: no
  // increase between the cuts), and 0.6 ms of CNPs bring it to rpg_min_rate
  // again, however far alpha decayed meanwhile.
  const DcqcnParams p = DcqcnParams::connectx();
  const uint64_t min_bps = uint64_t(p.rpg_min_rate) * 1'000'000;
  Dcqcn fresh(100 * kG, p);
  for (uint64_t t = 0; t <= 600 * kUs; t += 4 * kUs) fresh.on_cnp(t);
  EXPECT_EQ(fresh.rate_bps(), min_bps);
  for (const uint64_t gap_us : {400, 1000, 5000}) {
    SCOPED_TRACE(gap_us);
    Dcqcn d(100 * kG, p);
    uint64_t t = 0;
    for (; t < 2000 * kUs; t += 4 * kUs) d.on_cnp(t);
    EXPECT_EQ(d.rate_bps(), min_bps);
    t += gap_us * kUs;
    d.on_timer(t);
    EXPECT_GE(d.rate_bps(), 50 * kG);
    for (const uint64_t end = t + 600 * kUs; t <= end; t += 4 * kUs) d.on_cnp(t);
    EXPECT_EQ(d.rate_bps(), min_bps);
  }
}

TEST(Dcqcn, CnpsReadInBurstsReachMinRate) {
  // What cc.cnp_slows_target relies on when the target is a software RP on a
  // busy CPU (uroce's libibverbs on a shared core): CNPs every 4 us, but read
  // 5 at a time every 20 us. Events, ConnectX defaults: CNPs every 4 us for
  // 2 ms, none for 5 ms (alpha decays to 0 and the timer brings RC back to
  // half the line rate or more, the limiter still on), then the bursts.
  // Expect: RC at most 10 Mb/s after 1 ms of bursts, rpg_min_rate after
  // 1.2 ms. (With a burst's CNPs counted as one, alpha stayed near 0.05 and
  // RC at 13 Gb/s after 1 ms.)
  const DcqcnParams p = DcqcnParams::connectx();
  const uint64_t min_bps = uint64_t(p.rpg_min_rate) * 1'000'000;
  Dcqcn d(100 * kG, p);
  uint64_t t = 0;
  for (; t < 2000 * kUs; t += 4 * kUs) d.on_cnp(t);
  t += 5000 * kUs;
  d.on_timer(t);
  EXPECT_EQ(d.alpha_q20(), 0u);
  EXPECT_TRUE(d.limited());
  EXPECT_GE(d.rate_bps(), 50 * kG);
  const uint64_t bursts = t;
  for (; t <= bursts + 1200 * kUs; t += 20 * kUs) {
    for (int i = 0; i < 5; ++i) d.on_cnp(t);
    if (t == bursts + 1000 * kUs) {
      EXPECT_LE(d.rate_bps(), 10'000'000u);
    }
  }
  EXPECT_EQ(d.rate_bps(), min_bps);
}

TEST(Dcqcn, CnpsReadAfterANapBringTheRateDown) {
  // What cc.cnp_slows_target saw of the rdma-core helper under `uroce run`
  // when its engine thread napped 1.2 ms under CNPs (ConnectX defaults).
  // Events: CNPs every 4 us for 2 ms; none read for 1.2 ms (the increase
  // timer lifts RC to 87.5 G, alpha decays to 0); then the 48 that waited,
  // read at one instant, and 3 read at one instant every 50 us.
  // Expect: RC at most 1 % of the line rate 0.3 ms after the nap. (With a
  // burst folded into one cut it was still 36.5 G there.)
  const DcqcnParams p = DcqcnParams::connectx();
  Dcqcn d(100 * kG, p);
  uint64_t t = 0;
  for (; t < 2000 * kUs; t += 4 * kUs) d.on_cnp(t);
  t += 1200 * kUs;
  const uint64_t woke = t;
  for (int i = 0; i < 48; ++i) d.on_cnp(t);
  for (; t <= woke + 300 * kUs; t += 50 * kUs) {
    for (int i = 0; i < 3; ++i) d.on_cnp(t);
  }
  d.on_timer(woke + 300 * kUs);
  EXPECT_LE(d.rate_bps(), 1 * kG);
}

}  // namespace
}  // namespace uroce::cc
