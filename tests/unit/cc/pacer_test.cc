// Tests for stack/cc/pacer.cc: exact send times of the per-QP pacer at fixed
// rates, the burst allowance, idle refill and rate changes.
#include "stack/cc/pacer.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace uroce::cc {
namespace {

// Sends n packets of bytes, each at the earliest allowed time; returns the times.
std::vector<uint64_t> send_times(Pacer& p, uint32_t bytes, int n, uint64_t start_ns) {
  std::vector<uint64_t> out;
  uint64_t now = start_ns;
  for (int i = 0; i < n; ++i) {
    now = std::max(now, p.next_send_ns(bytes));
    EXPECT_TRUE(p.may_send(bytes, now));
    p.on_sent(bytes, now);
    out.push_back(now);
  }
  return out;
}

TEST(Pacer, StrictPacingAt10GbpsIs800nsPer1000Bytes) {
  // Events: 10 Gb/s, burst = one 1000-byte packet, 5 packets from t=0.
  // Expect: sends at 0, 800, 1600, 2400, 3200 ns; not allowed at 799 after the first.
  Pacer p(10'000'000'000, 1000);
  EXPECT_EQ(send_times(p, 1000, 5, 0), (std::vector<uint64_t>{0, 800, 1600, 2400, 3200}));
  Pacer q(10'000'000'000, 1000);
  q.on_sent(1000, 0);
  EXPECT_FALSE(q.may_send(1000, 799));
  EXPECT_TRUE(q.may_send(1000, 800));
}

TEST(Pacer, FractionalNanosecondsCarryWithoutDrift) {
  // Events: 3 Gb/s, 1000-byte packets (2666.67 ns each), strict pacing.
  // Expect: 0, 2666, 5333, 8000 ns: every third packet lands exactly on
  // 8000 ns * k, so 3000 packets take exactly 8 ms.
  Pacer p(3'000'000'000, 1000);
  EXPECT_EQ(send_times(p, 1000, 4, 0), (std::vector<uint64_t>{0, 2666, 5333, 8000}));
  Pacer q(3'000'000'000, 1000);
  const std::vector<uint64_t> t = send_times(q, 1000, 3001, 0);
  EXPECT_EQ(t.back(), 8'000'000u);
}

TEST(Pacer, BurstAllowanceThenPacing) {
  // Events: 10 Gb/s, burst 4000 bytes, 1000-byte packets from t=0; then idle
  // until 100 us and again.
  // Expect: 4 packets at t=0, then 800, 1600; after the idle gap the bucket is
  // full again (4 more at 100 us) but never more than the burst.
  Pacer p(10'000'000'000, 4000);
  EXPECT_EQ(send_times(p, 1000, 6, 0), (std::vector<uint64_t>{0, 0, 0, 0, 800, 1600}));
  EXPECT_EQ(send_times(p, 1000, 5, 100'000),
            (std::vector<uint64_t>{100'000, 100'000, 100'000, 100'000, 100'800}));
}

TEST(Pacer, PacketLargerThanBurstWaitsForEmptyBucket) {
  // Events: 10 Gb/s, burst 1000 bytes, 9000-byte packets.
  // Expect: sends at 0 and 7200 ns (a packet's own time), never blocked forever.
  Pacer p(10'000'000'000, 1000);
  EXPECT_EQ(send_times(p, 9000, 3, 0), (std::vector<uint64_t>{0, 7200, 14400}));
}

TEST(Pacer, RateChangeRescalesDebtToNewRate) {
  // Events: 10 Gb/s, send 1000 B at 0 (debt until 800 ns), rate -> 5 Gb/s at 0.
  // Expect: the 1000 B owed now take 1600 ns: next send at 1600 ns, the one
  // after 1600 ns later (3200 ns).
  Pacer p(10'000'000'000, 1000);
  p.on_sent(1000, 0);
  p.set_rate_bps(5'000'000'000, 0);
  EXPECT_EQ(p.next_send_ns(1000), 1600u);
  p.on_sent(1000, 1600);
  EXPECT_EQ(p.next_send_ns(1000), 3200u);
  EXPECT_EQ(p.rate_bps(), 5'000'000'000u);
}

TEST(Pacer, RaisedRateReleasesPacketSentAtMinimumRate) {
  // Events: 1 Mb/s (a DCQCN flow at rpg_min_rate), burst 0, send 1000 B at 0
  // (debt until 8 ms); at 100 ns the rate goes back to 10 Gb/s.
  // Expect: the 7,999,900 ns left at 1 Mb/s are 799 ns at 10 Gb/s (7999.9
  // bits, truncated): next send at 899 ns, not 8 ms.
  Pacer p(1'000'000, 0);
  p.on_sent(1000, 0);
  EXPECT_EQ(p.next_send_ns(1000), 8'000'000u);
  p.set_rate_bps(10'000'000'000, 100);
  EXPECT_EQ(p.next_send_ns(1000), 899u);
}

}  // namespace
}  // namespace uroce::cc
