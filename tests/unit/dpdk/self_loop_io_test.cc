// drivers/dpdk/self_loop_io.h over a fake wire: frames to the device's own
// MAC come back on receive, before the wire's, in the order sent; every other
// frame (another MAC, broadcast) goes to the wire in order; the burst
// contract holds (what the wire or a full loop refuses stays with the
// caller, in order) and no mbuf leaks.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <uroce/eal.h>

#include "drivers/dpdk/self_loop_io.h"
#include "tests/unit/eal_env.h"

namespace uroce::test {
namespace {

constexpr MacAddr kSelf{{0x02, 0, 0, 0, 0, 0x01}};
constexpr MacAddr kPeer{{0x02, 0, 0, 0, 0, 0x02}};
constexpr MacAddr kBroadcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

rte_mempool* pool() {
  static rte_mempool* p = [] {
    auto r = create_frame_pool("self_loop_test", 2047);
    return r.ok() ? r.value() : nullptr;
  }();
  return p;
}

// A frame to dst carrying seq after the Ethernet addresses.
rte_mbuf* frame(const MacAddr& dst, uint32_t seq) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool());
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 64));
  std::memset(p, 0, 64);
  std::memcpy(p, dst.b, 6);
  std::memcpy(p + 12, &seq, 4);
  return m;
}

uint32_t seq_of(const rte_mbuf* m) {
  uint32_t s;
  std::memcpy(&s, rte_pktmbuf_mtod(m, const uint8_t*) + 12, 4);
  return s;
}

// The wire: transmits at most `accept` frames a burst, recording their
// numbers; receives `incoming` frames numbered from 1000.
class Wire final : public PacketIo {
 public:
  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override {
    const uint16_t k = std::min<uint16_t>(n, incoming);
    for (uint16_t i = 0; i < k; ++i) out[i] = frame(kSelf, 1000 + i);
    incoming = uint16_t(incoming - k);
    return k;
  }
  uint16_t tx_burst(rte_mbuf** in, uint16_t n) override {
    const uint16_t took = std::min(n, accept);
    for (uint16_t i = 0; i < took; ++i) {
      sent.push_back(seq_of(in[i]));
      rte_pktmbuf_free(in[i]);
    }
    return took;
  }
  rte_mempool* tx_pool() override { return pool(); }
  IoCaps caps() const override { return {}; }
  MacAddr mac() const override { return kSelf; }

  uint16_t accept = UINT16_MAX;
  uint16_t incoming = 0;
  std::vector<uint32_t> sent;
};

std::vector<uint32_t> receive(PacketIo& io, uint16_t n) {
  std::vector<rte_mbuf*> got(n);
  const uint16_t k = io.rx_burst(got.data(), n);
  std::vector<uint32_t> seqs;
  for (uint16_t i = 0; i < k; ++i) {
    seqs.push_back(seq_of(got[i]));
    rte_pktmbuf_free(got[i]);
  }
  return seqs;
}

// Six frames: to self, peer, self, broadcast, peer, self. Expect: 1, 3 and 4
// (peer, broadcast, peer) to the wire in order; 0, 2 and 5 back on the next
// receive, before the wire's own frame.
TEST(SelfLoopIo, FramesToSelfComeBackTheRestLeaveInOrder) {
  Wire wire;
  dpdk::SelfLoopIo io(wire, kSelf);
  const MacAddr to[] = {kSelf, kPeer, kSelf, kBroadcast, kPeer, kSelf};
  rte_mbuf* burst[6];
  for (uint32_t i = 0; i < 6; ++i) burst[i] = frame(to[i], i);
  EXPECT_EQ(io.tx_burst(burst, 6), 6);
  EXPECT_EQ(wire.sent, (std::vector<uint32_t>{1, 3, 4}));
  wire.incoming = 1;
  EXPECT_EQ(receive(io, 32), (std::vector<uint32_t>{0, 2, 5, 1000}));
  EXPECT_EQ(io.looped(), 3u);
  EXPECT_EQ(rte_mempool_in_use_count(pool()), 0u);
}

// The wire takes one frame a burst. Expect: the burst stops at the refused
// frame; a frame to self after it stays with the caller too (order).
TEST(SelfLoopIo, WhatTheWireRefusesStaysWithTheCallerInOrder) {
  Wire wire;
  wire.accept = 1;
  dpdk::SelfLoopIo io(wire, kSelf);
  rte_mbuf* burst[3] = {frame(kPeer, 0), frame(kPeer, 1), frame(kSelf, 2)};
  ASSERT_EQ(io.tx_burst(burst, 3), 1);
  ASSERT_EQ(io.tx_burst(burst + 1, 2), 2);  // 1 leaves, then 2 loops
  EXPECT_EQ(wire.sent, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(receive(io, 8), (std::vector<uint32_t>{2}));
  EXPECT_EQ(rte_mempool_in_use_count(pool()), 0u);
}

// More frames to self than the loop holds, none received. Expect: the burst
// stops once the loop is full; every looped frame comes back once, in order,
// and the wrapper frees what it still holds when it goes.
TEST(SelfLoopIo, AFullLoopRefusesUntilTheStackReceives) {
  Wire wire;
  std::vector<rte_mbuf*> burst;
  {
    dpdk::SelfLoopIo io(wire, kSelf);
    for (uint32_t i = 0; i < 300; ++i) burst.push_back(frame(kSelf, i));
    const uint16_t took = io.tx_burst(burst.data(), 300);
    EXPECT_EQ(took, 256);
    const std::vector<uint32_t> back = receive(io, 100);
    ASSERT_EQ(back.size(), 100u);
    for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(back[i], i);
    EXPECT_EQ(io.tx_burst(burst.data() + took, 44), 44);  // room again
  }
  EXPECT_TRUE(wire.sent.empty());
  EXPECT_EQ(rte_mempool_in_use_count(pool()), 0u);
}

}  // namespace
}  // namespace uroce::test
