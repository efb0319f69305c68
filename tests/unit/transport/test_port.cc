// The back-to-back test port.
#include "tests/unit/transport/test_port.h"

#include <algorithm>
#include <atomic>

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <uroce/eal.h>

namespace uroce::test {

TestPort::TestPort(MacAddr mac, uint16_t eth_mtu) : mac_(mac), eth_mtu_(eth_mtu) {
  static std::atomic<int> seq{0};
  auto pool = create_frame_pool("tport" + std::to_string(seq++), 2048);
  if (pool.ok()) pool_ = *pool;
}

TestPort::~TestPort() {
  for (rte_mbuf* m : inbox_) rte_pktmbuf_free(m);
  for (rte_mbuf* m : held_) rte_pktmbuf_free(m);
  rte_mempool_free(pool_);
}

void TestPort::connect(TestPort& a, TestPort& b) {
  a.peer_ = &b;
  b.peer_ = &a;
}

uint16_t TestPort::rx_burst(rte_mbuf** out, uint16_t n) {
  uint16_t k = 0;
  for (; k < n && !inbox_.empty(); ++k) {
    out[k] = inbox_.front();
    inbox_.pop_front();
  }
  return k;
}

void TestPort::deliver(rte_mbuf* m) {
  if (m->nb_segs > 1) {  // what a wire does: the peer receives the bytes in one buffer
    rte_mbuf* flat = rte_pktmbuf_copy(m, pool_, 0, UINT32_MAX);
    rte_pktmbuf_free(m);
    m = flat;
  }
  if (peer_) peer_->inbox_.push_back(m);
  else rte_pktmbuf_free(m);  // unconnected: the wire goes nowhere
}

uint16_t TestPort::tx_burst(rte_mbuf** in, uint16_t n) {
  n = std::min(n, tx_accept);
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = in[i];
    if (m->nb_segs > 1) {
      EXPECT_TRUE(multiseg) << "a chained frame on a port without tx_multiseg";
      ++chained;
    }
    std::vector<uint8_t> bytes(rte_pktmbuf_pkt_len(m));
    const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, uint32_t(bytes.size()), bytes.data()));
    wire::PacketDesc d;
    wire::parse({p, bytes.size()}, d);
    sent.push_back(d);
    if (keep_bytes) sent_bytes.emplace_back(p, p + bytes.size());
    switch (hook ? hook(d) : Action::kPass) {
      case Action::kPass: deliver(m); break;
      case Action::kDrop: rte_pktmbuf_free(m); break;
      case Action::kDuplicate:
        deliver(rte_pktmbuf_copy(m, pool_, 0, UINT32_MAX));
        deliver(m);
        break;
      case Action::kHold: held_.push_back(m); break;
    }
  }
  return n;
}

void TestPort::inject(std::span<const uint8_t> frame) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, uint16_t(frame.size())));
  std::copy(frame.begin(), frame.end(), p);
  inbox_.push_back(m);
}

void TestPort::release_held() {
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) deliver(*it);
  held_.clear();
}

void TestPort::release_held_in_order() {
  for (rte_mbuf* m : held_) deliver(m);
  held_.clear();
}

std::vector<uint8_t> frame_of(const wire::PacketDesc& d, std::span<const uint8_t> payload) {
  std::vector<uint8_t> f(wire::frame_len(d));
  wire::build(d, payload, f);
  return f;
}

size_t count_sent(const std::vector<wire::PacketDesc>& log, uint8_t op, int syndrome) {
  return size_t(std::count_if(log.begin(), log.end(), [&](const wire::PacketDesc& d) {
    return d.opcode == op && (syndrome < 0 || d.aeth_syndrome == syndrome);
  }));
}

}  // namespace uroce::test
