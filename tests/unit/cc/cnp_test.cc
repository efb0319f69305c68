// Tests for stack/cc/cnp.cc: the DCQCN notification point sends at most one
// CNP per QP per min_time_between_cnps (Zhu et al. 2015, Section 3.1 NP).
#include "stack/cc/cnp.h"

#include <gtest/gtest.h>

namespace uroce::cc {
namespace {

TEST(CnpGenerator, DefaultsAreConnectXFirmwareValues) {
  // Events: none. Expect: 4 us interval, CNP DSCP 48, PCP 6.
  const CnpParams p;
  EXPECT_EQ(p.min_time_between_cnps, 4u);
  EXPECT_EQ(p.cnp_dscp, 48);
  EXPECT_EQ(p.cnp_802p_prio, 6);
  EXPECT_EQ(CnpGenerator().interval_ns(), 4000u);
}

TEST(CnpGenerator, AtMostOneCnpPerInterval) {
  // Events: CE-marked packets at 0, 1, 3.999, 4, 7.999, 8, 20 us (4 us interval).
  // Expect: CNPs at 0, 4, 8 and 20 us only.
  CnpGenerator g;
  EXPECT_TRUE(g.on_ce_marked(0));
  EXPECT_FALSE(g.on_ce_marked(1000));
  EXPECT_FALSE(g.on_ce_marked(3999));
  EXPECT_TRUE(g.on_ce_marked(4000));
  EXPECT_FALSE(g.on_ce_marked(7999));
  EXPECT_TRUE(g.on_ce_marked(8000));
  EXPECT_TRUE(g.on_ce_marked(20000));
  EXPECT_EQ(g.last_cnp_ns(), 20000u);
}

TEST(CnpGenerator, FirstCePacketAlwaysSendsAndIntervalIsFromLastCnp) {
  // Events: paper interval N = 50 us; CE at 123 ns, then every 10 us.
  // Expect: CNP at 123 ns (the first, whatever the time), then at 50.123 us
  // and 100.123 us: the interval counts from the last CNP, not from the last
  // CE-marked packet.
  CnpGenerator g(CnpParams{.min_time_between_cnps = 50});
  EXPECT_FALSE(g.sent_any());
  EXPECT_TRUE(g.on_ce_marked(123));
  int sent = 0;
  uint64_t last = 0;
  for (uint64_t t = 10'123; t <= 100'123; t += 10'000) {
    if (g.on_ce_marked(t)) {
      ++sent;
      last = t;
    }
  }
  EXPECT_EQ(sent, 2);  // at 50 123 and 100 123
  EXPECT_EQ(last, 100'123u);
}

TEST(CnpGenerator, ZeroIntervalSendsForEveryCePacket) {
  // Events: min_time_between_cnps = 0 (mstflint's documented default), CE x3
  // at the same instant. Expect: three CNPs.
  CnpGenerator g(CnpParams{.min_time_between_cnps = 0});
  EXPECT_TRUE(g.on_ce_marked(5));
  EXPECT_TRUE(g.on_ce_marked(5));
  EXPECT_TRUE(g.on_ce_marked(5));
}

}  // namespace
}  // namespace uroce::cc
