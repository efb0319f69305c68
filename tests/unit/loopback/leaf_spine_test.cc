// Tests for the in-memory fabric's two-tier leaf/spine topology
// (drivers/loopback): frames between leaves cross one spine path chosen by
// ECMP on the UDP 5-tuple, with each path's own delay, loss, buffer and
// blackhole, while the ports keep their own seeded fault streams.

#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/eal_env.h"
#include "tests/unit/loopback/fabric_traffic.h"

namespace uroce::loopback {
namespace {

using namespace testing_traffic;

/// A two-tier fabric: `spines` paths between leaves, every path `path`.
std::unique_ptr<Fabric> make_leaf_spine(uint32_t leaves, uint32_t spines, const PathConfig& path = {}) {
  FabricConfig fc;
  fc.topology.leaves = leaves;
  fc.topology.spines = spines;
  fc.topology.path = path;
  return make_fabric(fc);
}

PortConfig on_leaf(uint32_t leaf) {
  PortConfig pc;
  pc.leaf = leaf;
  pc.link.tx_queue_bytes = 1 << 20;
  return pc;
}

TEST(FabricLeafSpine, CrossLeafFrameCrossesBothHopsOfOnePath) {
  // Send: one frame from A (leaf 0) to B (leaf 1) over 1 spine: host links
  // 100 Gb/s, 500 ns; the path 25 Gb/s, 2 us each way.
  // Expect: arrival after host uplink + path up + path down + host downlink,
  // each a serialization plus a propagation delay; the path's counters.
  PathConfig path;
  path.rate_bps = 25'000'000'000;
  path.prop_delay_ns = 2000;
  auto f = make_leaf_spine(2, 1, path);
  Port& a = add(*f, kMacA, on_leaf(0));
  Port& b = add(*f, kMacB, on_leaf(1));
  rte_mbuf* m = make_frame(a.tx_pool(), kMacA, kMacB, 1, 1000);
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  send(a, m);
  const auto got = run_until_idle(*f, b);
  ASSERT_EQ(got.size(), 1u);
  const uint64_t host = serialization_ns(a.config().link, len) + 500;
  const uint64_t hop = serialization_ns(path.rate_bps, path.overhead_bytes, len) + 2000;
  EXPECT_EQ(got[0].time_ns, 2 * host + 2 * hop);
  EXPECT_EQ(f->path_counters(0, 0, PathDir::kUp).get(PathCounter::frames), 1u);
  EXPECT_EQ(f->path_counters(0, 0, PathDir::kUp).get(PathCounter::bytes), len);
  EXPECT_EQ(f->path_counters(1, 0, PathDir::kDown).get(PathCounter::frames), 1u);
  EXPECT_EQ(f->path_counters(1, 0, PathDir::kUp).get(PathCounter::frames), 0u);
}

TEST(FabricLeafSpine, SameLeafFramesTakeNoPath) {
  // Send: A -> C, both on leaf 0. Expect: single-switch timing, no path used.
  auto f = make_leaf_spine(2, 4);
  Port& a = add(*f, kMacA, on_leaf(0));
  add(*f, kMacB, on_leaf(1));
  Port& c = add(*f, kMacC, on_leaf(0));
  rte_mbuf* m = make_frame(a.tx_pool(), kMacA, kMacC, 1, 1000);
  const uint64_t ser = serialization_ns(a.config().link, rte_pktmbuf_pkt_len(m));
  send(a, m);
  const auto got = run_until_idle(*f, c);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].time_ns, 2 * (ser + 500));
  for (uint32_t s = 0; s < 4; ++s) EXPECT_EQ(f->path_counters(0, s, PathDir::kUp).get(PathCounter::frames), 0u);
}

TEST(FabricLeafSpine, EcmpHashesTheUdpSourcePort) {
  // Send: 4 frames on each of 256 UDP source ports A -> B over 4 spines.
  // Expect: each source port keeps one spine (ecmp_spine agrees with the
  // counters), every spine carries some ports, none more than twice its share.
  auto f = make_leaf_spine(2, 4);
  Port& a = add(*f, kMacA, on_leaf(0));
  Port& b = add(*f, kMacB, on_leaf(1));
  std::array<uint64_t, 4> expect{};
  for (uint32_t tag = 0; tag < 256; ++tag) {
    rte_mbuf* probe = make_frame(a.tx_pool(), kMacA, kMacB, tag, 64);
    const uint32_t spine = f->ecmp_spine(probe);
    rte_pktmbuf_free(probe);
    ASSERT_LT(spine, 4u);
    for (uint32_t k = 0; k < 4; ++k) {
      // Same tag (source port), other PSN: the PSN is no part of the hash.
      rte_mbuf* m = make_frame(a.tx_pool(), kMacA, kMacB, tag + (k << 16), 64);
      EXPECT_EQ(f->ecmp_spine(m), spine);
      send(a, m);
    }
    expect[spine] += 4;
    EXPECT_EQ(run_until_idle(*f, b).size(), 4u);
  }
  for (uint32_t s = 0; s < 4; ++s) {
    const uint64_t n = f->path_counters(0, s, PathDir::kUp).get(PathCounter::frames);
    EXPECT_EQ(n, expect[s]) << "spine " << s;
    EXPECT_GT(n, 0u);
    EXPECT_LT(n, 2u * 256);
    EXPECT_EQ(f->path_counters(1, s, PathDir::kDown).get(PathCounter::frames), n);
  }
}

TEST(FabricLeafSpine, EcmpHashesIpv6AndNonIpFrames) {
  // Probe: IPv6 RoCEv2 frames on 64 source ports; a broadcast ARP-like frame.
  // Expect: the IPv6 ports reach every one of 4 spines and keep theirs; a
  // frame without UDP still gets a spine (from its MACs), the same each time.
  auto f = make_leaf_spine(2, 4);
  Port& a = add(*f, kMacA, on_leaf(0));
  std::array<bool, 4> seen{};
  for (uint32_t tag = 0; tag < 64; ++tag) {
    rte_mbuf* m = make_frame(a.tx_pool(), kMacA, kMacB, tag, 64, 0, wire::L3Kind::kIpv6);
    rte_mbuf* again = make_frame(a.tx_pool(), kMacA, kMacB, tag + (1u << 16), 64, 0, wire::L3Kind::kIpv6);
    const uint32_t s = f->ecmp_spine(m);
    ASSERT_LT(s, 4u);
    EXPECT_EQ(f->ecmp_spine(again), s);
    seen[s] = true;
    rte_pktmbuf_free(m);
    rte_pktmbuf_free(again);
  }
  EXPECT_EQ(seen, (std::array<bool, 4>{true, true, true, true}));
  rte_mbuf* raw = rte_pktmbuf_alloc(a.tx_pool());
  ASSERT_NE(raw, nullptr);
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(raw, 60));
  std::memset(p, 0, 60);
  std::memcpy(p, kBroadcast.b, 6);
  std::memcpy(p + 6, kMacA.b, 6);
  p[12] = 0x08;
  p[13] = 0x06;  // ARP
  const uint32_t s = f->ecmp_spine(raw);
  EXPECT_LT(s, 4u);
  EXPECT_EQ(f->ecmp_spine(raw), s);
  rte_pktmbuf_free(raw);
}

TEST(FabricLeafSpine, PathDelaysReorderAcrossPathsNotWithin) {
  // Set: spine s has a propagation delay of (s + 1) us. Send 64 frames A -> B
  // on 64 source ports at once. Expect: each frame arrives after its own
  // path's delay (frames on different paths overtake one another), and
  // frames on one path stay in order.
  auto f = make_leaf_spine(2, 4);
  for (uint32_t leaf = 0; leaf < 2; ++leaf) {
    for (uint32_t s = 0; s < 4; ++s) {
      PathConfig pc;
      pc.prop_delay_ns = 1000 * (s + 1);
      f->set_path(leaf, s, pc);
    }
  }
  Port& a = add(*f, kMacA, on_leaf(0));
  Port& b = add(*f, kMacB, on_leaf(1));
  std::map<uint32_t, uint32_t> spine_of;
  for (uint32_t tag = 0; tag < 64; ++tag) {
    rte_mbuf* m = make_frame(a.tx_pool(), kMacA, kMacB, tag, 256);
    spine_of[tag] = f->ecmp_spine(m);
    send(a, m);
  }
  const auto got = run_until_idle(*f, b);
  ASSERT_EQ(got.size(), 64u);
  bool overtaken = false;
  std::map<uint32_t, uint32_t> last_on;
  for (size_t i = 0; i < got.size(); ++i) {
    const uint32_t s = spine_of[got[i].tag];
    if (i > 0 && got[i].tag < got[i - 1].tag) overtaken = true;
    if (last_on.count(s) != 0) {
      EXPECT_GT(got[i].tag, last_on[s]) << "spine " << s;
    }
    last_on[s] = got[i].tag;
  }
  EXPECT_TRUE(overtaken);
}

TEST(FabricLeafSpine, BlackholeDropsEverythingUntilRestored) {
  // Schedule: the path of one source port is a blackhole from 100 to 200 us.
  // Send: a frame on that port every 10 us, and one on a port of another spine.
  // Expect: the frames sent or in flight while it is black are dropped and
  // counted on that path; the other spine's frames all arrive.
  auto f = make_leaf_spine(2, 2);
  Port& a = add(*f, kMacA, on_leaf(0));
  Port& b = add(*f, kMacB, on_leaf(1));
  rte_mbuf* probe = make_frame(a.tx_pool(), kMacA, kMacB, 0, 64);
  const uint32_t black = f->ecmp_spine(probe);
  rte_pktmbuf_free(probe);
  uint32_t other_tag = 1;
  for (;; ++other_tag) {
    probe = make_frame(a.tx_pool(), kMacA, kMacB, other_tag, 64);
    const bool differs = f->ecmp_spine(probe) != black;
    rte_pktmbuf_free(probe);
    if (differs) break;
  }
  f->schedule_blackhole(0, black, 100'000, true);
  f->schedule_blackhole(0, black, 200'000, false);
  std::map<uint32_t, uint32_t> got_per_tag;
  rte_mbuf* burst[8];
  for (uint32_t i = 0; i < 30; ++i) {
    f->advance(i * 10'000);
    send(a, make_frame(a.tx_pool(), kMacA, kMacB, 0, 64));
    send(a, make_frame(a.tx_pool(), kMacA, kMacB, other_tag, 64));
    f->advance(i * 10'000 + 9'999);
    for (uint16_t n; (n = b.rx_burst(burst, 8)) != 0;) {
      for (uint16_t k = 0; k < n; ++k) {
        ++got_per_tag[tag_of(burst[k]) & 0x3fff];
        rte_pktmbuf_free(burst[k]);
      }
    }
  }
  EXPECT_EQ(got_per_tag[0], 20u);
  EXPECT_EQ(got_per_tag[other_tag], 30u);
  EXPECT_EQ(f->path_counters(0, black, PathDir::kUp).get(PathCounter::drop_blackhole), 10u);
  EXPECT_EQ(f->path_counters(0, 1 - black, PathDir::kUp).get(PathCounter::drop_blackhole), 0u);
}

TEST(FabricLeafSpine, PathLossRateWithinBoundsAndSeeded) {
  // Set: 5 % loss on the one path (each direction). Send 4000 frames A -> B.
  // Expect: a loss near 1 - 0.95^2 (both hops), counted on the path; the same
  // seed loses the same frames.
  auto run = [](std::vector<uint32_t>& tags) {
    PathConfig path;
    path.loss = 0.05;
    auto f = make_leaf_spine(2, 1, path);
    Port& a = add(*f, kMacA, on_leaf(0));
    Port& b = add(*f, kMacB, on_leaf(1));
    for (uint32_t i = 0; i < 4000; ++i) {
      send(a, make_frame(a.tx_pool(), kMacA, kMacB, i, 64));
      for (const auto& r : run_until_idle(*f, b)) tags.push_back(r.tag);
    }
    const uint64_t lost = f->path_counters(0, 0, PathDir::kUp).get(PathCounter::drop_loss) +
                          f->path_counters(1, 0, PathDir::kDown).get(PathCounter::drop_loss);
    EXPECT_EQ(tags.size() + lost, 4000u);
  };
  std::vector<uint32_t> t1, t2;
  run(t1);
  run(t2);
  const double loss = 1.0 - double(t1.size()) / 4000;
  EXPECT_NEAR(loss, 1 - 0.95 * 0.95, 0.02);
  EXPECT_EQ(t1, t2);
}

TEST(FabricLeafSpine, PathBufferTailDrops) {
  // Send: 400 frames of 2 KB at once from two hosts of leaf 0 over one 10 Gb/s
  // path with a 32 KB buffer. Expect: tail drops on the path; delivered +
  // dropped = sent.
  PathConfig path;
  path.rate_bps = 10'000'000'000;
  path.buffer_bytes = 32 * 1024;
  auto f = make_leaf_spine(2, 1, path);
  Port& a = add(*f, kMacA, on_leaf(0));
  Port& b = add(*f, kMacB, on_leaf(1));
  Port& c = add(*f, kMacC, on_leaf(0));
  for (uint32_t i = 0; i < 200; ++i) {
    send(a, make_frame(a.tx_pool(), kMacA, kMacB, i, 2000));
    send(c, make_frame(c.tx_pool(), kMacC, kMacB, 1000 + i, 2000));
  }
  const auto got = run_until_idle(*f, b);
  const uint64_t dropped = f->path_counters(0, 0, PathDir::kUp).get(PathCounter::drop_buffer);
  EXPECT_GT(dropped, 50u);
  EXPECT_EQ(got.size() + dropped, 400u);
}

TEST(FabricLeafSpine, PortsKeepTheirFaultStreams) {
  // Run: the faulty traffic of SameSeedSameFaultSequence on one switch and
  // on a leaf/spine fabric (both ports on one leaf), seed 7.
  // Expect: the same deliveries: the paths' streams move no port's draws.
  const Trace one = faulty_run(7);
  const Trace two = faulty_run(7, 2);
  ASSERT_EQ(one.rx.size(), two.rx.size());
  for (size_t i = 0; i < one.rx.size(); ++i) {
    EXPECT_EQ(one.rx[i].time_ns, two.rx[i].time_ns) << i;
    EXPECT_EQ(one.rx[i].data, two.rx[i].data) << i;
  }
  EXPECT_EQ(one.counters.v, two.counters.v);
}

TEST(FabricLeafSpine, RejectsBadTopology) {
  FabricConfig fc;
  fc.topology.leaves = 2;
  fc.topology.spines = 0;
  EXPECT_EQ(Fabric::create(fc).status().code(), StatusCode::kInvalidArgument);
  fc.topology.spines = 257;
  EXPECT_EQ(Fabric::create(fc).status().code(), StatusCode::kInvalidArgument);
  auto f = make_leaf_spine(2, 2);
  EXPECT_EQ(f->add_port(kMacA, on_leaf(2)).status().code(), StatusCode::kInvalidArgument);
  auto one = make_fabric();  // one switch: no leaves to name
  EXPECT_EQ(one->add_port(kMacA, on_leaf(1)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(one->spines(), 0u);
}

}  // namespace
}  // namespace uroce::loopback
