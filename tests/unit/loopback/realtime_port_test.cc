// Tests for the driver registry and its loopback driver
// (drivers/registry.h, drivers/loopback/realtime_port.h): ports opened by
// name join a named fabric of the process; frames cross it in real time
// between threads, in order; the fabric's faults apply per port; bad specs
// and names fail with the documented codes.
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <uroce/eal.h>

#include "drivers/registry.h"
#include "tests/unit/eal_env.h"

namespace uroce::drivers {
namespace {

constexpr MacAddr kMacA{{0x02, 0, 0, 0, 0, 0xa}};
constexpr MacAddr kMacB{{0x02, 0, 0, 0, 0, 0xb}};

std::unique_ptr<IoPort> open(const std::string& spec, MacAddr mac) {
  auto p = make_packet_io("loopback", IoConfig{.device = spec, .mac = mac});
  EXPECT_TRUE(p.ok()) << spec << ": " << p.status().message();
  return p.ok() ? std::move(p).value() : nullptr;
}

StatusCode open_error(const IoConfig& cfg) {
  auto p = make_packet_io("loopback", cfg);
  return p.ok() ? StatusCode::kOk : p.status().code();
}

/// A 64-byte frame from src to dst (experimental ethertype) carrying tag.
rte_mbuf* frame(PacketIo& io, MacAddr src, MacAddr dst, uint32_t tag) {
  rte_mbuf* m = rte_pktmbuf_alloc(io.tx_pool());
  if (m == nullptr) return nullptr;
  auto* p = rte_pktmbuf_mtod(m, uint8_t*);
  std::memset(p, 0, 64);
  std::memcpy(p, dst.b, 6);
  std::memcpy(p + 6, src.b, 6);
  p[12] = 0x88;
  p[13] = 0xb5;
  std::memcpy(p + 14, &tag, sizeof tag);
  rte_pktmbuf_append(m, 64);
  return m;
}

uint32_t tag_of(const rte_mbuf* m) {
  uint32_t tag = 0;
  std::memcpy(&tag, rte_pktmbuf_mtod(m, const uint8_t*) + 14, sizeof tag);
  return tag;
}

/// Polls io until n frames came or 2 s passed; returns their tags. count,
/// if given, follows how many came.
std::vector<uint32_t> receive(PacketIo& io, size_t n, std::atomic<size_t>* count = nullptr) {
  std::vector<uint32_t> tags;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (tags.size() < n && std::chrono::steady_clock::now() < end) {
    rte_mbuf* in[32];
    const uint16_t got = io.rx_burst(in, 32);
    for (uint16_t i = 0; i < got; ++i) {
      tags.push_back(tag_of(in[i]));
      rte_pktmbuf_free(in[i]);
    }
    if (count) count->store(tags.size(), std::memory_order_release);
  }
  return tags;
}

void send(PacketIo& io, MacAddr src, MacAddr dst, uint32_t tag) {
  rte_mbuf* m = frame(io, src, dst, tag);
  ASSERT_NE(m, nullptr);
  while (io.tx_burst(&m, 1) == 0) {
  }
}

TEST(Registry, UnknownDriverIsNotFound) {
  auto p = make_packet_io("ring", IoConfig{.device = "x"});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
}

TEST(Registry, EveryNameOpens) {
  // dpdk: a port EAL has not probed and no spec can probe is kNotFound or
  // kInvalidArgument from the dpdk driver itself, never the registry's "no
  // such driver"; loopback opens.
  for (std::string_view name : kDriverNames) {
    auto p = make_packet_io(name, IoConfig{.device = name == "loopback" ? "names" : "no_such_port"});
    if (name == "loopback") {
      ASSERT_TRUE(p.ok()) << p.status().message();
      EXPECT_EQ((*p)->info().driver, "loopback");
    } else {
      ASSERT_FALSE(p.ok());
      EXPECT_NE(std::string_view(p.status().message()), "no packet driver of that name (dpdk, loopback)");
    }
  }
}

TEST(LoopbackDriver, PortsOfOneNameShareAFabricAcrossThreads) {
  auto a = open("share", kMacA);
  auto b = open("share", kMacB);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->info().name, "loopback:share/0");
  EXPECT_EQ(b->info().name, "loopback:share/1");
  EXPECT_EQ(b->info().mac, kMacB);
  EXPECT_EQ(b->io().mac(), kMacB);

  // The sender keeps at most half an RX ring (1024) ahead of the receiver,
  // as a flow-controlled sender would: a full ring drops (next test).
  constexpr uint32_t kFrames = 2000;
  std::vector<uint32_t> got;
  std::atomic<size_t> received{0};
  std::thread rx([&] { got = receive(b->io(), kFrames, &received); });
  for (uint32_t t = 0; t < kFrames; ++t) {
    while (t >= received.load(std::memory_order_acquire) + 512) std::this_thread::yield();
    send(a->io(), kMacA, kMacB, t);
  }
  rx.join();
  ASSERT_EQ(got.size(), kFrames);
  for (uint32_t t = 0; t < kFrames; ++t) ASSERT_EQ(got[t], t) << "frame " << t << " out of order";
  auto sa = a->stats();
  auto sb = b->stats();
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_EQ(sa->tx_packets, kFrames);
  EXPECT_EQ(sb->rx_packets, kFrames);
  EXPECT_EQ(sb->rx_bytes, uint64_t(kFrames) * 64);
}

TEST(LoopbackDriver, AFullRxRingDropsAndCountsIt) {
  auto a = open("full", kMacA);
  auto b = open("full", kMacB);
  ASSERT_TRUE(a && b);
  constexpr uint32_t kRing = 1024;  // fabric.h's PortConfig::rx_ring_size
  for (uint32_t t = 0; t < kRing + 100; ++t) send(a->io(), kMacA, kMacB, t);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // every frame is due: the next burst delivers all
  const std::vector<uint32_t> got = receive(b->io(), kRing + 100);
  ASSERT_EQ(got.size(), kRing);
  EXPECT_EQ(got.back(), kRing - 1);  // the first kRing came, the rest were dropped
  auto sb = b->stats();
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(sb->rx_missed, 100u);
}

TEST(LoopbackDriver, FabricsOfOtherNamesAreApart) {
  auto a = open("left", kMacA);
  auto b = open("right", kMacB);
  ASSERT_TRUE(a && b);
  send(a->io(), kMacA, kMacB, 1);
  EXPECT_TRUE(receive(b->io(), 1).empty());
}

TEST(LoopbackDriver, LossOnAPortLosesWhatIsForwardedToIt) {
  auto a = open("lossy", kMacA);
  auto b = open("lossy,loss=1", kMacB);
  ASSERT_TRUE(a && b);
  for (uint32_t t = 0; t < 10; ++t) send(a->io(), kMacA, kMacB, t);
  EXPECT_TRUE(receive(b->io(), 1).empty());
  for (uint32_t t = 0; t < 10; ++t) send(b->io(), kMacB, kMacA, t);
  EXPECT_EQ(receive(a->io(), 10).size(), 10u);
}

TEST(LoopbackDriver, AFabricLivesAsLongAsItsPorts) {
  {
    auto a = open("again,seed=5", kMacA);
    ASSERT_TRUE(a);
    // The fabric exists: its seed is not this port's to give, its MACs are taken.
    EXPECT_EQ(open_error(IoConfig{.device = "again,seed=6", .mac = kMacB}), StatusCode::kInvalidArgument);
    EXPECT_EQ(open_error(IoConfig{.device = "again", .mac = kMacA}), StatusCode::kInvalidArgument);
  }
  // Its last port closed: the name makes a new fabric, which takes a seed and kMacA.
  EXPECT_TRUE(open("again,seed=6", kMacA));
}

TEST(LoopbackDriver, BadSpecsAreRefused) {
  for (const char* spec : {"", "=x", "f,loss=2", "f,loss=-0.1", "f,rate_gbps=0", "f,colour=red", "f,loss",
                           "f,seed=x", "f,delay_us=1us"}) {
    EXPECT_EQ(open_error(IoConfig{.device = spec, .mac = kMacA}), StatusCode::kInvalidArgument) << spec;
  }
  EXPECT_EQ(open_error(IoConfig{.device = "cap", .mac = kMacA, .pcap_path = "/tmp/x.pcap"}),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace uroce::drivers
