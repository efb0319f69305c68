// The loss hooks of drivers/dpdk/fault_io.h over a fake port: RandomDropIo
// loses the asked fraction of frames in each direction, the same frames for
// the same seed, keeps the burst contract (frames the port refuses stay with
// the caller, lost ones count as sent) and leaks no mbuf.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <uroce/eal.h>

#include "drivers/dpdk/fault_io.h"
#include "tests/unit/eal_env.h"

namespace uroce::test {
namespace {

// A port that receives frames numbered 0, 1, 2, ... (the number in the first
// 4 bytes) and transmits at most `accept` frames per burst, recording them.
class FakePort final : public PacketIo {
 public:
  explicit FakePort(rte_mempool* pool) : pool_(pool) {}
  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override {
    for (uint16_t i = 0; i < n; ++i) {
      out[i] = rte_pktmbuf_alloc(pool_);
      *rte_pktmbuf_mtod(out[i], uint32_t*) = next_rx_++;
      out[i]->data_len = out[i]->pkt_len = 64;
    }
    return n;
  }
  uint16_t tx_burst(rte_mbuf** in, uint16_t n) override {
    const uint16_t took = std::min(n, accept);
    for (uint16_t i = 0; i < took; ++i) {
      sent.push_back(*rte_pktmbuf_mtod(in[i], uint32_t*));
      rte_pktmbuf_free(in[i]);
    }
    return took;
  }
  rte_mempool* tx_pool() override { return pool_; }
  IoCaps caps() const override { return {}; }
  MacAddr mac() const override { return {}; }

  uint16_t accept = UINT16_MAX;
  std::vector<uint32_t> sent;

 private:
  rte_mempool* pool_;
  uint32_t next_rx_ = 0;
};

rte_mempool* pool() {
  static rte_mempool* p = [] {
    auto r = create_frame_pool("fault_io_test", 1023);
    return r.ok() ? r.value() : nullptr;
  }();
  return p;
}

// Receives `frames` through io; returns the numbers that got through.
std::vector<uint32_t> receive(dpdk::RandomDropIo& io, uint32_t frames) {
  std::vector<uint32_t> got;
  rte_mbuf* b[32];
  for (uint32_t done = 0; done < frames; done += 32) {
    const uint16_t n = io.rx_burst(b, 32);
    for (uint16_t i = 0; i < n; ++i) {
      got.push_back(*rte_pktmbuf_mtod(b[i], uint32_t*));
      rte_pktmbuf_free(b[i]);
    }
  }
  return got;
}

// Sends frames numbered 0 .. frames-1 in bursts of 32, offering again what
// the port refused, as the stack does.
void send(dpdk::RandomDropIo& io, uint32_t frames) {
  std::vector<rte_mbuf*> pending;
  uint32_t next = 0;
  while (next < frames || !pending.empty()) {
    while (pending.size() < 32 && next < frames) {
      rte_mbuf* m = rte_pktmbuf_alloc(pool());
      *rte_pktmbuf_mtod(m, uint32_t*) = next++;
      m->data_len = m->pkt_len = 64;
      pending.push_back(m);
    }
    const uint16_t n = io.tx_burst(pending.data(), uint16_t(pending.size()));
    pending.erase(pending.begin(), pending.begin() + n);
  }
}

// Receive and send 20000 frames at 5% loss. Expect: 4-6% lost each way, the
// counters say how many, every other frame passes once and in order.
TEST(RandomDropIo, LosesTheAskedFractionBothWays) {
  const unsigned free_before = rte_mempool_avail_count(pool());
  FakePort port(pool());
  dpdk::RandomDropIo io(port, 0.05, 7);
  const std::vector<uint32_t> got = receive(io, 20000);
  send(io, 20000);
  EXPECT_EQ(got.size() + io.rx_dropped(), 20000u);
  EXPECT_EQ(port.sent.size() + io.tx_dropped(), 20000u);
  for (uint64_t lost : {io.rx_dropped(), io.tx_dropped()}) {
    EXPECT_GT(lost, 800u);
    EXPECT_LT(lost, 1200u);
  }
  for (size_t i = 1; i < got.size(); ++i) EXPECT_LT(got[i - 1], got[i]);
  for (size_t i = 1; i < port.sent.size(); ++i) EXPECT_LT(port.sent[i - 1], port.sent[i]);
  EXPECT_EQ(rte_mempool_avail_count(pool()), free_before);  // nothing leaked
}

// The same seed twice, and another seed. Expect: the same frames lost, then others.
TEST(RandomDropIo, SeedRepeatsTheLosses) {
  FakePort a(pool()), b(pool()), c(pool());
  dpdk::RandomDropIo ia(a, 0.01, 42), ib(b, 0.01, 42), ic(c, 0.01, 43);
  const auto ra = receive(ia, 5000), rb = receive(ib, 5000), rc = receive(ic, 5000);
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
}

// A port that takes 3 frames per burst, at 20% loss. Expect: what the port
// refused comes back to the caller (tx_burst's count), lost frames count as
// sent, every frame is either sent once or lost, none leaks.
TEST(RandomDropIo, RefusedFramesStayWithTheCaller) {
  const unsigned free_before = rte_mempool_avail_count(pool());
  FakePort port(pool());
  port.accept = 3;
  dpdk::RandomDropIo io(port, 0.2, 1);
  send(io, 3000);
  EXPECT_EQ(port.sent.size() + io.tx_dropped(), 3000u);
  EXPECT_GT(io.tx_dropped(), 450u);
  for (size_t i = 1; i < port.sent.size(); ++i) EXPECT_LT(port.sent[i - 1], port.sent[i]);
  EXPECT_EQ(rte_mempool_avail_count(pool()), free_before);
}

// Rate 0 and rate 1. Expect: everything passes; nothing passes.
TEST(RandomDropIo, RateZeroPassesRateOneLosesAll) {
  FakePort p0(pool()), p1(pool());
  dpdk::RandomDropIo none(p0, 0, 1), all(p1, 1, 1);
  EXPECT_EQ(receive(none, 640).size(), 640u);
  EXPECT_EQ(receive(all, 640).size(), 0u);
  send(none, 100);
  send(all, 100);
  EXPECT_EQ(p0.sent.size(), 100u);
  EXPECT_EQ(p1.sent.size(), 0u);
  EXPECT_EQ(none.rx_dropped() + none.tx_dropped(), 0u);
  EXPECT_EQ(all.rx_dropped() + all.tx_dropped(), 740u);
}

}  // namespace
}  // namespace uroce::test
