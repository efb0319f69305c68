// Tests for stack/net/tx_stage.h's early doorbell, on a port of the in-memory
// fabric (drivers/loopback), whose NIC transmit queue refuses what it cannot
// hold and counts each refused tx_burst (tx_queue_full).
#include "stack/net/tx_stage.h"

#include <cstring>
#include <memory>

#include <gtest/gtest.h>

#include "drivers/loopback/fabric.h"
#include "tests/unit/eal_env.h"

namespace uroce::net {
namespace {

constexpr MacAddr kMac{{0x02, 0, 0, 0, 0, 0x1}};
constexpr uint16_t kFrame = 4096;  // a 4096-byte path MTU frame, about

struct Port {
  explicit Port(uint32_t tx_queue_bytes) {
    auto f = loopback::Fabric::create();
    EXPECT_TRUE(f.ok());
    fabric = std::move(f).value();
    loopback::PortConfig cfg;
    cfg.link.tx_queue_bytes = tx_queue_bytes;
    auto p = fabric->add_port(kMac, cfg);
    EXPECT_TRUE(p.ok());
    port = *p;
  }
  uint64_t count(loopback::PortCounter c) const { return port->counters().get(c); }

  std::unique_ptr<loopback::Fabric> fabric;
  loopback::Port* port = nullptr;
};

// Stages one frame to a MAC no port has (the fabric drops it after counting it sent).
bool stage(TxStage& tx) {
  uint8_t* p = tx.append(kFrame);
  if (p == nullptr) return false;
  std::memset(p, 0, kFrame);
  std::memset(p, 0xee, 6);  // destination MAC
  return true;
}

TEST(TxStage, RingsItsPortOnceSixteenKiBAreStaged) {
  // Stage: five 4 KB frames into a stage with its port.
  // Expect: the fifth append hands the first four (16 KiB) to the port, then
  // flush the fifth; both counted, each frame once.
  Port port(1 << 20);
  TxStage tx(port.port->tx_pool(), TxStage::kMaxFrames, port.port);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(stage(tx));
  EXPECT_EQ(port.count(loopback::PortCounter::tx_frames), 0u);
  ASSERT_TRUE(stage(tx));
  EXPECT_EQ(port.count(loopback::PortCounter::tx_frames), 4u);
  EXPECT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx.take_rung_early(), 4u);
  EXPECT_EQ(tx.take_rung_early(), 0u);
  EXPECT_EQ(tx.flush(*port.port), 1u);
  EXPECT_EQ(port.count(loopback::PortCounter::tx_frames), 5u);
  EXPECT_EQ(tx.appended(), 5u);
}

TEST(TxStage, WithoutAPortFramesLeaveOnlyAtFlush) {
  Port port(1 << 20);
  TxStage tx(port.port->tx_pool());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(stage(tx));
  EXPECT_EQ(port.count(loopback::PortCounter::tx_frames), 0u);
  EXPECT_EQ(tx.flush(*port.port), 10u);
}

TEST(TxStage, APortThatRefusesIsNotRungAgainUntilTheFlush) {
  // Stage: a port whose NIC queue holds one 4 KB frame; twelve frames staged.
  // Expect: the early doorbell at the fifth frame is taken for one frame and
  // refused for the rest; no later append knocks again (one refused
  // tx_burst), the stage keeps every frame in order; the flush tries again.
  Port port(kFrame + 100);
  TxStage tx(port.port->tx_pool(), TxStage::kMaxFrames, port.port);
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(stage(tx));
  EXPECT_EQ(port.count(loopback::PortCounter::tx_frames), 1u);
  EXPECT_EQ(port.count(loopback::PortCounter::tx_queue_full), 1u);
  EXPECT_EQ(tx.size(), 11u);
  EXPECT_EQ(tx.take_rung_early(), 1u);
  EXPECT_EQ(tx.flush(*port.port), 0u);  // the queue is still full: no time passed
  EXPECT_EQ(port.count(loopback::PortCounter::tx_queue_full), 2u);
  port.fabric->advance(1'000'000);  // the queue drains
  ASSERT_TRUE(stage(tx));           // rung early again after the flush: one more frame taken
  EXPECT_EQ(port.count(loopback::PortCounter::tx_frames), 2u);
}

}  // namespace
}  // namespace uroce::net
