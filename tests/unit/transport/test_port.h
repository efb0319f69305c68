// A minimal PacketIo for transport tests: two ports joined back to back by
// in-memory queues, with a hook that sees every transmitted frame (parsed) and
// may pass, drop, duplicate or hold it (held frames are released later, which
// reorders them), a log of everything sent, and injection of crafted frames.
// Why not drivers/loopback: the fabric is a timed model (a switch with
// queues, link rates and delays, seeded faults drawn from an RNG), and its
// hook can only pass or drop. Protocol tests need the opposite: delivery at
// the next poll with no clock of its own, so that a test's virtual time is
// the transport's timers alone, and per-frame control chosen by the test
// (duplicate this frame, hold that one and release it after the next, to
// make exactly the reorder the rule needs), with the parsed log of what was
// sent. The fabric is tested and used where its model matters
// (tests/unit/loopback, `uroce sim`).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <uroce/packet_io.h>

#include "stack/wire/packet.h"

namespace uroce::test {

class TestPort : public PacketIo {
 public:
  enum class Action { kPass, kDrop, kDuplicate, kHold };

  TestPort(MacAddr mac, uint16_t eth_mtu);
  ~TestPort() override;

  /// Joins a and b: what one transmits, the other receives.
  static void connect(TestPort& a, TestPort& b);

  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override;
  uint16_t tx_burst(rte_mbuf** in, uint16_t n) override;
  rte_mempool* tx_pool() override { return pool_; }
  IoCaps caps() const override { return IoCaps{.mtu = eth_mtu_, .rx_icrc_checked = false, .tx_multiseg = multiseg}; }
  MacAddr mac() const override { return mac_; }

  /// Called for each frame this port transmits; nullptr passes everything.
  std::function<Action(const wire::PacketDesc&)> hook;
  /// Every frame this port transmitted, parsed, in order (also dropped ones).
  std::vector<wire::PacketDesc> sent;
  /// The most frames one tx_burst accepts (to provoke tx_ring_full).
  uint16_t tx_accept = UINT16_MAX;
  /// IoCaps::tx_multiseg: chained (zero-copy) frames are accepted; each is
  /// delivered to the peer as a single-segment copy, as a wire would.
  bool multiseg = true;
  /// Chained frames transmitted so far.
  uint64_t chained = 0;
  /// If set, the bytes of every frame transmitted, in order.
  bool keep_bytes = false;
  std::vector<std::vector<uint8_t>> sent_bytes;

  /// Queues a crafted frame for this port's next rx_burst.
  void inject(std::span<const uint8_t> frame);
  /// Delivers the held frames to the peer, in reverse order.
  void release_held();
  /// Delivers the held frames to the peer in the order they were held (a slow, FIFO path).
  void release_held_in_order();

 private:
  void deliver(rte_mbuf* m);

  MacAddr mac_;
  uint16_t eth_mtu_;
  rte_mempool* pool_ = nullptr;
  TestPort* peer_ = nullptr;
  std::deque<rte_mbuf*> inbox_;
  std::vector<rte_mbuf*> held_;
};

/// Builds the frame d describes with payload (for re-injecting a copy of a sent packet).
std::vector<uint8_t> frame_of(const wire::PacketDesc& d, std::span<const uint8_t> payload);

/// Counts the frames in `log` whose opcode is op (and AETH syndrome, if given).
size_t count_sent(const std::vector<wire::PacketDesc>& log, uint8_t op, int syndrome = -1);

}  // namespace uroce::test
