// The application's share of the port (DeviceConfig::app_rx_ring,
// rx_non_roce): frames that are not RoCE and that the addressing layer does
// not consume go to the application in arrival order, bytes unchanged, up to
// the ring's size; the rest are dropped and counted. RoCE frames never take
// that path. Used by examples/l2fwd_roce.
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstring>
#include <vector>

#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

// An Ethernet frame of the local-experimental EtherType 0x88B5 (IEEE 802),
// tagged with seq in its first payload byte.
std::vector<uint8_t> experimental_frame(uint8_t seq) {
  std::vector<uint8_t> f(60, 0);
  const uint8_t dst[6] = {2, 0, 0, 0, 0, 9}, src[6] = {2, 0, 0, 0, 0, 7};
  std::memcpy(f.data(), dst, 6);
  std::memcpy(f.data() + 6, src, 6);
  f[12] = 0x88;
  f[13] = 0xb5;
  f[14] = seq;
  return f;
}

class AppRx : public ::testing::Test {
 protected:
  void open(uint32_t ring) {
    port = std::make_unique<TestPort>(MacAddr{{2, 0, 0, 0, 0, 9}}, 1500);
    DeviceConfig cfg;
    cfg.key_seed = 1;
    cfg.app_rx_ring = ring;
    ctx = must(open_device(*port, cfg));
  }
  uint64_t count(Counter c) const { return query_counters(ctx.get()).get(c); }
  std::unique_ptr<TestPort> port;
  ContextPtr ctx;
};

// Receive: three non-RoCE frames, ring of 4. Expect: all three back, in
// order and byte for byte; counted as rx_to_app, nothing dropped.
TEST_F(AppRx, NonRoceFramesHandedBackInOrder) {
  open(4);
  for (uint8_t i = 0; i < 3; ++i) port->inject(experimental_frame(i));
  poll(ctx.get(), 1000);
  rte_mbuf* out[8];
  ASSERT_EQ(rx_non_roce(ctx.get(), out, 8), 3);
  for (uint8_t i = 0; i < 3; ++i) {
    const auto want = experimental_frame(i);
    ASSERT_EQ(rte_pktmbuf_data_len(out[i]), want.size());
    EXPECT_EQ(std::memcmp(rte_pktmbuf_mtod(out[i], const uint8_t*), want.data(), want.size()), 0);
    rte_pktmbuf_free(out[i]);
  }
  EXPECT_EQ(rx_non_roce(ctx.get(), out, 8), 0);
  EXPECT_EQ(count(Counter::rx_to_app), 3u);
  EXPECT_EQ(count(Counter::rx_drop_not_roce), 0u);
  EXPECT_EQ(count(Counter::rx_drop_app_ring_full), 0u);
}

// Receive: three frames, ring of 2. Expect: the first two kept, the third
// dropped as rx_drop_app_ring_full; after the application takes one, the
// ring has room again.
TEST_F(AppRx, FullRingDropsAndCounts) {
  open(2);
  for (uint8_t i = 0; i < 3; ++i) port->inject(experimental_frame(i));
  poll(ctx.get(), 1000);
  EXPECT_EQ(count(Counter::rx_drop_app_ring_full), 1u);
  rte_mbuf* out[4];
  ASSERT_EQ(rx_non_roce(ctx.get(), out, 1), 1);
  EXPECT_EQ(rte_pktmbuf_mtod(out[0], const uint8_t*)[14], 0);
  rte_pktmbuf_free(out[0]);
  port->inject(experimental_frame(3));
  poll(ctx.get(), 2000);
  ASSERT_EQ(rx_non_roce(ctx.get(), out, 4), 2);  // seq 1 (wrapped in the ring), then 3
  EXPECT_EQ(rte_pktmbuf_mtod(out[0], const uint8_t*)[14], 1);
  EXPECT_EQ(rte_pktmbuf_mtod(out[1], const uint8_t*)[14], 3);
  for (int i = 0; i < 2; ++i) rte_pktmbuf_free(out[i]);
}

// Without a ring (the default) non-RoCE frames are dropped as before.
TEST_F(AppRx, NoRingDropsAsNotRoce) {
  open(0);
  port->inject(experimental_frame(0));
  poll(ctx.get(), 1000);
  rte_mbuf* out[1];
  EXPECT_EQ(rx_non_roce(ctx.get(), out, 1), 0);
  EXPECT_EQ(count(Counter::rx_drop_not_roce), 1u);
  EXPECT_EQ(count(Counter::rx_to_app), 0u);
}

// Frames left in the ring go back to their pool when the device closes.
TEST_F(AppRx, CloseFreesKeptFrames) {
  open(4);
  const unsigned avail = rte_mempool_avail_count(port->tx_pool());
  port->inject(experimental_frame(0));
  poll(ctx.get(), 1000);
  EXPECT_EQ(rte_mempool_avail_count(port->tx_pool()), avail - 1);
  ctx.reset();
  EXPECT_EQ(rte_mempool_avail_count(port->tx_pool()), avail);
}

}  // namespace
}  // namespace uroce::test
