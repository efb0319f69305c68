// Tests for drivers/loopback (the in-memory fabric): raw RoCEv2 frames through
// the simulated switch, checked for timing (rate, propagation, queueing),
// seeded faults (statistics and reproducibility), link state, buffer limits,
// ECN marking, capture, and mbuf accounting.
#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <unistd.h>

#include <uroce/eal.h>

#include "drivers/loopback/fabric.h"
#include "stack/wire/packet.h"
#include "stack/wire/pcap.h"
#include "tests/unit/eal_env.h"
#include "tests/unit/loopback/fabric_traffic.h"

namespace uroce::loopback {
namespace {

using namespace testing_traffic;

// ---------------------------------------------------------------- timing

TEST(Fabric, DeliveryTimingMatchesRateAndDelay) {
  // Send: one frame A -> B over 10 Gb/s links with 1 us propagation.
  // Expect: at the switch after one serialization + propagation, at B after two.
  auto f = make_fabric();
  PortConfig pc;
  pc.link.rate_bps = 10'000'000'000;
  pc.link.prop_delay_ns = 1000;
  Port& a = add(*f, kMacA, pc);
  Port& b = add(*f, kMacB, pc);
  rte_mbuf* m = make_frame(a.tx_pool(), kMacA, kMacB, 1, 1000);
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  const uint64_t ser = serialization_ns(pc.link, len);
  EXPECT_EQ(ser, ((len + 24) * 8 + 9) / 10);  // 10 Gb/s: 0.8 ns per byte, rounded up
  send(a, m);
  EXPECT_EQ(f->next_event_ns(), ser + 1000);
  const uint64_t arrival = 2 * (ser + 1000);
  f->advance(arrival - 1);
  EXPECT_EQ(b.rx_pending(), 0u);
  EXPECT_EQ(f->next_event_ns(), arrival);
  f->advance(arrival);
  EXPECT_EQ(b.rx_pending(), 1u);
  EXPECT_EQ(f->next_event_ns(), Fabric::kNever);
  auto got = run_until_idle(*f, b);
  EXPECT_EQ(f->totals().get(PortCounter::rx_frames), 1u);
}

TEST(Fabric, BackToBackFramesArriveOneSerializationApart) {
  // Send: 8 frames A -> B at once. Expect: pipelined through uplink and
  // downlink, frame k arrives at (k + 2) * ser + 2 * prop.
  auto f = make_fabric();
  PortConfig pc;
  pc.link.rate_bps = 25'000'000'000;
  pc.link.prop_delay_ns = 300;
  Port& a = add(*f, kMacA, pc);
  Port& b = add(*f, kMacB, pc);
  rte_mbuf* ms[8];
  for (uint32_t i = 0; i < 8; ++i) ms[i] = make_frame(a.tx_pool(), kMacA, kMacB, i, 2000);
  const uint64_t ser = serialization_ns(pc.link, rte_pktmbuf_pkt_len(ms[0]));
  ASSERT_EQ(a.tx_burst(ms, 8), 8);
  auto got = run_until_idle(*f, b);
  ASSERT_EQ(got.size(), 8u);
  for (uint32_t k = 0; k < 8; ++k) {
    EXPECT_EQ(got[k].tag, k);
    EXPECT_EQ(got[k].time_ns, (k + 2) * ser + 2 * 300) << "frame " << k;
  }
}

TEST(Fabric, SlowDownlinkIsTheBottleneck) {
  // Send: 4 frames from a 100 Gb/s port to a 10 Gb/s port.
  // Expect: arrivals spaced by the 10 Gb/s serialization time.
  auto f = make_fabric();
  PortConfig fast;
  fast.link.rate_bps = 100'000'000'000;
  fast.link.prop_delay_ns = 100;
  PortConfig slow = fast;
  slow.link.rate_bps = 10'000'000'000;
  Port& a = add(*f, kMacA, fast);
  Port& b = add(*f, kMacB, slow);
  rte_mbuf* ms[4];
  for (uint32_t i = 0; i < 4; ++i) ms[i] = make_frame(a.tx_pool(), kMacA, kMacB, i, 1024);
  const uint32_t len = rte_pktmbuf_pkt_len(ms[0]);
  ASSERT_EQ(a.tx_burst(ms, 4), 4);
  auto got = run_until_idle(*f, b);
  ASSERT_EQ(got.size(), 4u);
  const uint64_t first = serialization_ns(fast.link, len) + 100 + serialization_ns(slow.link, len) + 100;
  for (uint32_t k = 0; k < 4; ++k) EXPECT_EQ(got[k].time_ns, first + k * serialization_ns(slow.link, len));
}

TEST(Fabric, TxBurstRefusesWhenNicQueueFull) {
  // Send: 64 frames of ~4 KB into a 16 KB NIC queue. Expect: tx_burst takes
  // the ones that fit and leaves the rest with the caller (the DPDK contract).
  auto f = make_fabric();
  PortConfig pc;
  pc.link.tx_queue_bytes = 16 * 1024;
  Port& a = add(*f, kMacA, pc);
  Port& b = add(*f, kMacB, pc);
  rte_mbuf* ms[64];
  for (uint32_t i = 0; i < 64; ++i) ms[i] = make_frame(a.tx_pool(), kMacA, kMacB, i, 4000);
  const uint16_t taken = a.tx_burst(ms, 64);
  EXPECT_GT(taken, 1);
  EXPECT_LT(taken, 8);
  EXPECT_EQ(a.counters().get(PortCounter::tx_queue_full), 1u);
  // Once the queue drains, the rest goes out.
  uint16_t sent = taken;
  while (sent < 64) {
    f->advance(f->next_event_ns());
    sent = uint16_t(sent + a.tx_burst(ms + sent, uint16_t(64 - sent)));
  }
  auto got = run_until_idle(*f, b);
  EXPECT_EQ(got.size(), 64u);
}

// ---------------------------------------------------------------- faults

TEST(Fabric, LossRateWithinStatisticalBounds) {
  // Send: 20000 frames through a link with 10% loss (seed 42).
  // Expect: lost within 5 sigma of 2000 (sigma = sqrt(n p (1-p)) = 42.4), and
  // delivered + lost = sent.
  auto f = make_fabric({.seed = 42});
  PortConfig pc;
  pc.faults.loss = 0.10;
  Port& a = add(*f, kMacA);
  Port& b = add(*f, kMacB, pc);
  size_t delivered = 0;
  for (uint32_t i = 0; i < 20000; ++i) {
    send(a, make_frame(a.tx_pool(), kMacA, kMacB, i, 64));
    delivered += run_until_idle(*f, b).size();
  }
  const uint64_t lost = b.counters().get(PortCounter::fault_loss);
  EXPECT_NEAR(double(lost), 2000.0, 5 * 42.4) << "seed 42";
  EXPECT_EQ(delivered + lost, 20000u);
}

TEST(Fabric, SameSeedSameFaultSequence) {
  // Run the same traffic twice with seed 7 and once with seed 8.
  // Expect: identical deliveries (times, order, bytes) for 7; different for 8.
  const Trace t1 = faulty_run(7);
  const Trace t2 = faulty_run(7);
  const Trace t3 = faulty_run(8);
  ASSERT_EQ(t1.rx.size(), t2.rx.size());
  for (size_t i = 0; i < t1.rx.size(); ++i) {
    EXPECT_EQ(t1.rx[i].time_ns, t2.rx[i].time_ns) << i;
    EXPECT_EQ(t1.rx[i].tag, t2.rx[i].tag) << i;
    EXPECT_EQ(t1.rx[i].data, t2.rx[i].data) << i;
  }
  EXPECT_EQ(t1.counters.v, t2.counters.v);
  EXPECT_NE(t1.counters.v, t3.counters.v);
  for (auto c : {PortCounter::fault_loss, PortCounter::fault_duplicate, PortCounter::fault_corrupt,
                 PortCounter::fault_reorder, PortCounter::fault_jitter}) {
    EXPECT_GT(t1.counters.get(c), 0u) << kPortCounterNames[size_t(c)];
  }
}

TEST(Fabric, CorruptionIsCaughtByTheParser) {
  // Send: 2000 frames (IPv4 and IPv6) through a link that corrupts every one.
  // Expect: wire::parse rejects every delivered frame; almost all as bad_icrc
  // (the ICRC covers most bits; the rest hit IP/UDP/BTH fields checked first).
  auto f = make_fabric({.seed = 3});
  PortConfig pc;
  pc.faults.corrupt = 1.0;
  Port& a = add(*f, kMacA);
  Port& b = add(*f, kMacB, pc);
  std::map<wire::ParseError, int> reasons;
  for (uint32_t i = 0; i < 2000; ++i) {
    const auto l3 = i % 2 ? wire::L3Kind::kIpv6 : wire::L3Kind::kIpv4;
    send(a, make_frame(a.tx_pool(), kMacA, kMacB, i, 512, 0, l3));
    for (const auto& r : run_until_idle(*f, b)) {
      wire::PacketDesc d;
      ++reasons[wire::parse(r.data, d)];
    }
  }
  EXPECT_EQ(b.counters().get(PortCounter::fault_corrupt), 2000u);
  EXPECT_EQ(reasons[wire::ParseError::kOk], 0) << "a corrupted frame parsed as valid";
  EXPECT_GT(reasons[wire::ParseError::kBadIcrc], 1800);
}

TEST(Fabric, AnyBitCorruptionChangesExactlyOneBit) {
  // Send: frames through a link with CorruptScope::kAnyBit. Expect: each
  // delivered frame differs from the sent one in exactly one bit.
  auto f = make_fabric({.seed = 5});
  PortConfig pc;
  pc.faults.corrupt = 1.0;
  pc.faults.corrupt_scope = CorruptScope::kAnyBit;
  Port& a = add(*f, kMacA);
  Port& b = add(*f, kMacB, pc);
  for (uint32_t i = 0; i < 200; ++i) {
    rte_mbuf* m = make_frame(a.tx_pool(), kMacA, kMacB, i, 64);
    const auto s = bytes(m);
    const std::vector<uint8_t> orig(s.begin(), s.end());
    send(a, m);
    auto got = run_until_idle(*f, b);
    if (got.empty()) continue;  // a flipped destination MAC bit: no such port
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].data.size(), orig.size());
    int bits = 0;
    for (size_t k = 0; k < orig.size(); ++k) bits += __builtin_popcount(orig[k] ^ got[0].data[k]);
    EXPECT_EQ(bits, 1) << "frame " << i;
  }
}

TEST(Fabric, DuplicatesAreIdenticalCopies) {
  // Send: 100 frames with duplicate = 1. Expect: each tag delivered twice,
  // byte for byte the same, in order (a duplicate follows its original).
  auto f = make_fabric();
  PortConfig pc;
  pc.faults.duplicate = 1.0;
  Port& a = add(*f, kMacA);
  Port& b = add(*f, kMacB, pc);
  for (uint32_t i = 0; i < 100; ++i) send(a, make_frame(a.tx_pool(), kMacA, kMacB, i, 300));
  auto got = run_until_idle(*f, b);
  ASSERT_EQ(got.size(), 200u);
  for (uint32_t i = 0; i < 100; ++i) {
    EXPECT_EQ(got[2 * i].tag, i);
    EXPECT_EQ(got[2 * i + 1].tag, i);
    EXPECT_EQ(got[2 * i].data, got[2 * i + 1].data);
  }
  EXPECT_EQ(b.counters().get(PortCounter::fault_duplicate), 100u);
}

TEST(Fabric, ReorderHoldsFramesBackJitterKeepsOrder) {
  // Send: 1000 frames with jitter only, then with reorder.
  // Expect: jitter delays but keeps FIFO order; reorder delivers all, out of order.
  for (const bool reorder : {false, true}) {
    auto f = make_fabric({.seed = 11});
    PortConfig pc;
    pc.link.tx_queue_bytes = 1 << 20;
    pc.faults.jitter_ns = 2000;
    if (reorder) pc.faults.reorder = 0.2;
    Port& a = add(*f, kMacA, pc);
    Port& b = add(*f, kMacB, pc);
    for (uint32_t i = 0; i < 1000; ++i) send(a, make_frame(a.tx_pool(), kMacA, kMacB, i, 200));
    auto got = run_until_idle(*f, b);
    ASSERT_EQ(got.size(), 1000u);
    std::vector<uint32_t> tags;
    for (const auto& r : got) tags.push_back(r.tag);
    EXPECT_EQ(std::is_sorted(tags.begin(), tags.end()), !reorder);
    std::sort(tags.begin(), tags.end());
    for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(tags[i], i);
    EXPECT_GT(b.counters().get(PortCounter::fault_jitter), 900u);
  }
}

// ---------------------------------------------------------------- links and queues

TEST(Fabric, LinkDownDropsFramesUntilUp) {
  // Schedule: B down at 100 us, up at 200 us. Send one frame every 10 us.
  // Expect: frames that would arrive while B is down are dropped and counted.
  auto f = make_fabric();
  Port& a = add(*f, kMacA);
  Port& b = add(*f, kMacB);
  f->schedule_link(b.index(), 100'000, false);
  f->schedule_link(b.index(), 200'000, true);
  size_t delivered = 0;
  rte_mbuf* burst[8];
  for (uint32_t i = 0; i < 30; ++i) {
    f->advance(i * 10'000);
    send(a, make_frame(a.tx_pool(), kMacA, kMacB, i, 100));
    f->advance(i * 10'000 + 9'999);
    for (uint16_t n; (n = b.rx_burst(burst, 8)) != 0;) {
      delivered += n;
      for (uint16_t k = 0; k < n; ++k) rte_pktmbuf_free(burst[k]);
    }
  }
  EXPECT_EQ(delivered, 20u);
  EXPECT_EQ(b.counters().get(PortCounter::drop_link_down), 10u);
  EXPECT_TRUE(b.link_up());
  // A port whose own link is down drops what it sends.
  f->set_link(a.index(), false);
  send(a, make_frame(a.tx_pool(), kMacA, kMacB, 99, 100));
  EXPECT_EQ(run_until_idle(*f, b).size(), 0u);
  EXPECT_EQ(a.counters().get(PortCounter::drop_link_down), 1u);
}

TEST(Fabric, EgressBufferOverflowTailDrops) {
  // Send: A and C each blast 200 frames of ~2 KB to B at once (2:1 incast)
  // into a 32 KB egress buffer. Expect: tail drops counted on B, and
  // delivered + dropped = sent.
  auto f = make_fabric();
  PortConfig pc;
  pc.link.tx_queue_bytes = 1 << 20;
  PortConfig pb = pc;
  pb.link.buffer_bytes = 32 * 1024;
  Port& a = add(*f, kMacA, pc);
  Port& b = add(*f, kMacB, pb);
  Port& c = add(*f, kMacC, pc);
  for (uint32_t i = 0; i < 200; ++i) {
    send(a, make_frame(a.tx_pool(), kMacA, kMacB, i, 2000));
    send(c, make_frame(c.tx_pool(), kMacC, kMacB, 1000 + i, 2000));
  }
  auto got = run_until_idle(*f, b);
  const uint64_t dropped = b.counters().get(PortCounter::drop_buffer);
  EXPECT_GT(dropped, 50u);
  EXPECT_EQ(got.size() + dropped, 400u);
}

TEST(Fabric, PfcPausesSendersInsteadOfDropping) {
  // Send: the same 2:1 incast of 2 KB frames into a 32 KB egress buffer, with
  // PFC toward B (pause above 16 KB, resume at 8 KB) and 8 KB NIC queues;
  // each sender offers its 200 frames as fast as its NIC takes them.
  // Expect (IEEE 802.1Qbb, lossless): no tail drop, all 400 frames delivered
  // in order per sender, both senders paused, and B's queue never beyond
  // xoff plus the headroom the two NIC queues and links hold.
  auto f = make_fabric();
  PortConfig pc;
  pc.link.tx_queue_bytes = 8 * 1024;
  PortConfig pb = pc;
  pb.link.buffer_bytes = 32 * 1024;
  pb.link.pfc = {.enabled = true, .xoff_bytes = 16 * 1024, .xon_bytes = 8 * 1024};
  Port& a = add(*f, kMacA, pc);
  Port& b = add(*f, kMacB, pb);
  Port& c = add(*f, kMacC, pc);
  struct Sender {
    Port& port;
    MacAddr mac;
    uint32_t base;
    uint32_t next = 0;
  };
  Sender senders[] = {{a, kMacA, 0}, {c, kMacC, 1000}};
  std::vector<uint32_t> got;
  uint64_t max_queue = 0;
  rte_mbuf* burst[32];
  for (uint64_t now = 0; now < 10'000'000; now += 100) {
    f->advance(now);
    max_queue = std::max(max_queue, f->queue_bytes(b.index()));
    for (Sender& s : senders) {
      while (s.next < 200) {
        rte_mbuf* m = make_frame(s.port.tx_pool(), s.mac, kMacB, s.base + s.next, 2000);
        if (s.port.tx_burst(&m, 1) != 1) {
          rte_pktmbuf_free(m);
          break;
        }
        ++s.next;
      }
    }
    for (uint16_t n; (n = b.rx_burst(burst, 32)) != 0;) {
      for (uint16_t i = 0; i < n; ++i) {
        got.push_back(tag_of(burst[i]));
        rte_pktmbuf_free(burst[i]);
      }
    }
    if (got.size() == 400) break;
  }
  EXPECT_EQ(b.counters().get(PortCounter::drop_buffer), 0u);
  ASSERT_EQ(got.size(), 400u);
  for (uint32_t base : {0u, 1000u}) {
    std::vector<uint32_t> mine;
    for (uint32_t t : got) {
      if (t >= base && t < base + 1000) mine.push_back(t - base);
    }
    ASSERT_EQ(mine.size(), 200u);
    for (uint32_t i = 0; i < 200; ++i) EXPECT_EQ(mine[i], i);
  }
  EXPECT_GT(a.counters().get(PortCounter::pfc_pause_rx), 0u);
  EXPECT_GT(c.counters().get(PortCounter::pfc_pause_rx), 0u);
  EXPECT_LE(max_queue, 16u * 1024 + 2 * (8 * 1024 + 2 * 2100));
}

TEST(Fabric, RedMarksEcnCapableFramesAndKeepsThemValid) {
  // Send: 2:1 incast of ECT(0) frames with RED kmin = 4 KB, kmax = 16 KB and
  // a large buffer. Expect: some frames arrive with CE set; every frame still
  // parses (IPv4 checksum fixed, ICRC masks the TOS). Not-ECT frames are never marked.
  for (const uint8_t tos : {uint8_t(0x02), uint8_t(0x00)}) {
    auto f = make_fabric();
    PortConfig pc;
    pc.link.tx_queue_bytes = 1 << 20;
    PortConfig pb = pc;
    pb.link.buffer_bytes = 1 << 20;
    pb.link.red = {.enabled = true, .kmin_bytes = 4096, .kmax_bytes = 16384, .pmax = 0.2};
    Port& a = add(*f, kMacA, pc);
    Port& b = add(*f, kMacB, pb);
    Port& c = add(*f, kMacC, pc);
    for (uint32_t i = 0; i < 100; ++i) {
      send(a, make_frame(a.tx_pool(), kMacA, kMacB, i, 1000, tos));
      send(c, make_frame(c.tx_pool(), kMacC, kMacB, 1000 + i, 1000, tos));
    }
    int ce = 0;
    for (const auto& r : run_until_idle(*f, b)) {
      wire::PacketDesc d;
      ASSERT_EQ(wire::parse(r.data, d), wire::ParseError::kOk);
      ce += d.ecn() == 3;
    }
    EXPECT_EQ(uint64_t(ce), b.counters().get(PortCounter::ecn_marked));
    if (tos != 0) {
      EXPECT_GT(ce, 20);
    } else {
      EXPECT_EQ(ce, 0);
    }
  }
}

TEST(Fabric, BroadcastFloodsUnknownUnicastDrops) {
  // Send: one broadcast from A, one unicast to an unknown MAC.
  // Expect: B and C each get the broadcast; the unicast is dropped and counted on A.
  auto f = make_fabric();
  Port& a = add(*f, kMacA);
  Port& b = add(*f, kMacB);
  Port& c = add(*f, kMacC);
  send(a, make_frame(a.tx_pool(), kMacA, kBroadcast, 1, 64));
  send(a, make_frame(a.tx_pool(), kMacA, MacAddr{{0x02, 0, 0, 0, 0, 0x77}}, 2, 64));
  while (f->next_event_ns() != Fabric::kNever) f->advance(f->next_event_ns());
  EXPECT_EQ(a.rx_pending(), 0u);
  EXPECT_EQ(b.rx_pending(), 1u);
  EXPECT_EQ(c.rx_pending(), 1u);
  EXPECT_EQ(a.counters().get(PortCounter::drop_unknown_dst), 1u);
  run_until_idle(*f, b);
  run_until_idle(*f, c);
}

TEST(Fabric, HookSeesEveryFrameAndCanDropIt) {
  // Hook: drop every frame whose PSN is a multiple of 3.
  // Expect: the hook is called once per frame; exactly those are missing.
  auto f = make_fabric();
  Port& a = add(*f, kMacA);
  Port& b = add(*f, kMacB);
  struct Seen {
    uint64_t calls = 0;
  } seen;
  f->set_hook(
      [](void* user, const FrameEvent& ev, rte_mbuf* m) {
        auto* s = static_cast<Seen*>(user);
        EXPECT_EQ(ev.index, s->calls);
        ++s->calls;
        return tag_of(m) % 3 == 0 ? HookVerdict::kDrop : HookVerdict::kPass;
      },
      &seen);
  for (uint32_t i = 0; i < 30; ++i) send(a, make_frame(a.tx_pool(), kMacA, kMacB, i, 64));
  auto got = run_until_idle(*f, b);
  EXPECT_EQ(seen.calls, 30u);
  EXPECT_EQ(got.size(), 20u);
  for (const auto& r : got) EXPECT_NE(r.tag % 3, 0u);
  EXPECT_EQ(a.counters().get(PortCounter::drop_hook), 10u);
}

TEST(Fabric, CaptureStampsFramesWithSwitchArrivalTime) {
  // Capture to a pcap; send 5 frames. Expect: 5 records, stamped with the
  // virtual time each reached the switch, bytes as sent, and valid RoCE.
  const std::string path = ::testing::TempDir() + "fabric_capture_" + std::to_string(getpid()) + ".pcap";
  {
    auto f = make_fabric({.seed = 1, .pcap_path = path});
    PortConfig pc;
    pc.faults.corrupt = 1.0;  // faults happen after capture
    Port& a = add(*f, kMacA);
    Port& b = add(*f, kMacB, pc);
    rte_mbuf* ms[5];
    for (uint32_t i = 0; i < 5; ++i) ms[i] = make_frame(a.tx_pool(), kMacA, kMacB, i, 128);
    ASSERT_EQ(a.tx_burst(ms, 5), 5);
    run_until_idle(*f, b);
    EXPECT_EQ(f->frames_seen(), 5u);
  }  // the fabric closes the capture
  auto recs = wire::read_pcap(path);
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  ASSERT_EQ(recs->size(), 5u);
  PortConfig def;
  uint64_t ser = 0;
  for (size_t i = 0; i < 5; ++i) {
    const auto& r = (*recs)[i];
    wire::PacketDesc d;
    EXPECT_EQ(wire::parse(r.data, d), wire::ParseError::kOk);
    EXPECT_EQ(d.psn, i);
    if (i == 0) ser = serialization_ns(def.link, uint32_t(r.data.size()));
    EXPECT_EQ(r.time_ns, (i + 1) * ser + def.link.prop_delay_ns);
  }
  std::filesystem::remove(path);
}

// ---------------------------------------------------------------- mbufs

TEST(Fabric, NoMbufLeakedThroughFaults) {
  // Send: 3000 frames through every fault kind, including drops of all kinds.
  // Expect: after draining, every pool is full again.
  auto f = make_fabric({.seed = 9, .copy_pool_size = 512});
  PortConfig pc;
  pc.link.buffer_bytes = 64 * 1024;
  pc.link.tx_queue_bytes = 1 << 20;
  pc.faults = {.loss = 0.1, .duplicate = 0.1, .corrupt = 0.1, .reorder = 0.1, .jitter_ns = 100};
  Port& a = add(*f, kMacA, pc);
  Port& b = add(*f, kMacB, pc);
  Port& c = add(*f, kMacC, pc);
  const unsigned full_a = rte_mempool_avail_count(a.tx_pool());
  f->set_hook([](void*, const FrameEvent& ev, rte_mbuf*) { return ev.index % 50 == 7 ? HookVerdict::kDrop : HookVerdict::kPass; },
              nullptr);
  f->schedule_link(b.index(), 20'000, false);
  f->schedule_link(b.index(), 30'000, true);
  for (uint32_t i = 0; i < 1000; ++i) {
    send(a, make_frame(a.tx_pool(), kMacA, i % 2 ? kMacB : kBroadcast, i, 1500));
    send(c, make_frame(c.tx_pool(), kMacC, kMacB, i, 1500));
    if (i % 100 == 99) {
      run_until_idle(*f, b);
      run_until_idle(*f, c);
      run_until_idle(*f, a);
    }
  }
  run_until_idle(*f, b);
  run_until_idle(*f, c);
  run_until_idle(*f, a);
  EXPECT_GT(b.counters().get(PortCounter::drop_buffer), 0u);
  EXPECT_GT(b.counters().get(PortCounter::drop_link_down), 0u);
  EXPECT_EQ(f->frames_in_flight(), 0u);
  EXPECT_EQ(rte_mempool_avail_count(a.tx_pool()), full_a);
  EXPECT_EQ(rte_mempool_avail_count(b.tx_pool()), full_a);
  EXPECT_EQ(rte_mempool_avail_count(c.tx_pool()), full_a);
}

TEST(Fabric, DestructorFreesFramesInFlight) {
  // Send: frames from a pool the test owns, then destroy the fabric with
  // frames on the links and in the RX ring. Expect: the pool is full again.
  auto pool = create_frame_pool("lbtest_ext", 256);
  ASSERT_TRUE(pool.ok());
  const unsigned full = rte_mempool_avail_count(*pool);
  {
    auto f = make_fabric();
    Port& a = add(*f, kMacA);
    add(*f, kMacB);
    for (uint32_t i = 0; i < 20; ++i) send(a, make_frame(*pool, kMacA, kMacB, i, 64));
    f->advance(2000);  // some delivered to B's ring, some still in flight
    EXPECT_LT(rte_mempool_avail_count(*pool), full);
  }
  EXPECT_EQ(rte_mempool_avail_count(*pool), full);
  rte_mempool_free(*pool);
}

TEST(Fabric, AddPortRejectsBadMacs) {
  auto f = make_fabric();
  add(*f, kMacA);
  EXPECT_EQ(f->add_port(kMacA).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f->add_port(kBroadcast).status().code(), StatusCode::kInvalidArgument);
  PortConfig bad;
  bad.rx_ring_size = 1000;
  EXPECT_EQ(f->add_port(kMacB, bad).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace uroce::loopback
