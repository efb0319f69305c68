// CNPs over the DPDK datapath (docs/CC.md, "How it is wired"): two uroce devices on two net_ring
// ethdev ports (rte_eth_from_rings), opened through DpdkPort like any NIC.
// Between them the test is the switch: it moves a's frames to b's RX ring
// and, while "congested", sets ECN-CE on them (RFC 3168; the ICRC masks the
// TOS byte, A17.3.3). b's notification point answers with CNPs (BTH opcode
// 0x81) that travel back over the ring PMD to a, whose DCQCN reaction point
// must cut the QP's rate: a's measured sending rate drops and the counters
// say why. Virtual time drives both engines; no sleeps.
#include <rte_ethdev.h>
#include <rte_eth_ring.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <uroce/eal.h>
#include <uroce/verbs.h>
#include <uroce/wr.h>

#include "drivers/dpdk/dpdk_io.h"
#include "stack/wire/checksum.h"
#include "stack/wire/headers.h"

namespace uroce {
namespace {

constexpr uint32_t kMsgBytes = 16 * 1024;
constexpr uint32_t kDepth = 32;
constexpr uint32_t kWireOverheadBytes = 24;  // preamble+SFD, FCS, inter-frame gap

struct Host {
  std::unique_ptr<dpdk::DpdkPort> port;
  ContextPtr ctx;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  Mr* mr = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 20);
  Gid gid;
  MacAddr mac;
};

// Sets CE on an ECN-capable IPv4 frame and fixes the header checksum.
bool mark_ce(rte_mbuf* m) {
  auto* f = rte_pktmbuf_mtod(m, uint8_t*);
  if (rte_pktmbuf_data_len(m) < 34 || f[12] != 0x08 || f[13] != 0x00) return false;
  uint8_t* ip = f + 14;
  if ((ip[1] & 3) == 0) return false;  // Not-ECT (ACKs, CNPs): leave it
  ip[1] |= 3;
  ip[10] = ip[11] = 0;
  const uint16_t c = wire::csum_finish(wire::csum_partial({ip, sizeof(wire::Ipv4Hdr)}));
  ip[10] = uint8_t(c >> 8);
  ip[11] = uint8_t(c);
  return true;
}

template <typename T>
T value(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : T{};
}

class DpdkCnp : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(init_eal().ok());
    // a -> wire (the test's switch) -> b_rx;  b -> a_rx.
    wire_ = rte_ring_create("i8cnp_wire", 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    b_rx_ = rte_ring_create("i8cnp_brx", 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    a_rx_ = rte_ring_create("i8cnp_arx", 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    ASSERT_TRUE(wire_ && b_rx_ && a_rx_);
    const int pa = rte_eth_from_rings("net_ring_i8cnp_a", &a_rx_, 1, &wire_, 1, SOCKET_ID_ANY);
    const int pb = rte_eth_from_rings("net_ring_i8cnp_b", &b_rx_, 1, &a_rx_, 1, SOCKET_ID_ANY);
    ASSERT_GE(pa, 0);
    ASSERT_GE(pb, 0);
    open_host(a_, pa, 1, true);
    open_host(b_, pb, 2, false);
    connect(a_, b_);
    connect(b_, a_);
  }

  void TearDown() override {
    for (Host* h : {&a_, &b_}) {
      if (h->qp) (void)destroy_qp(h->qp);
      h->ctx.reset();
      h->port.reset();
    }
    for (rte_ring* r : {wire_, b_rx_, a_rx_}) {
      for (void* m = nullptr; r && rte_ring_dequeue(r, &m) == 0;) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
      rte_ring_free(r);
    }
  }

  void open_host(Host& h, int port_id, uint8_t id, bool dcqcn) {
    dpdk::DpdkPortConfig pc;
    pc.device = std::to_string(port_id);
    pc.mtu = 1500;
    h.mac = MacAddr{{0x02, 0x00, 0x00, 0x00, 0x18, id}};  // ring ports from rte_eth_from_rings have none
    auto port = dpdk::DpdkPort::open(pc);
    ASSERT_TRUE(port.ok()) << port.status().message();
    h.port = std::move(port).value();
    const uint8_t v4[4] = {10, 9, 0, id};
    h.gid = Gid::from_ipv4(v4);
    DeviceConfig dc;
    dc.gid = h.gid;
    dc.mac = h.mac;
    dc.key_seed = id;
    dc.ecn = dcqcn;  // only the DCQCN sender sends ECT
    dc.cc.line_rate_mbps = 10'000;
    if (dcqcn) dc.cc.algorithm = CcAlgorithm::kDcqcn;
    auto ctx = open_device(h.port->queue(0), dc);
    ASSERT_TRUE(ctx.ok()) << ctx.status().message();
    h.ctx = std::move(ctx).value();
    h.pd = value(alloc_pd(h.ctx.get()));
    h.cq = value(create_cq(h.ctx.get(), 256));
    h.mr = value(reg_mr(h.pd, h.buf.data(), h.buf.size(), kAccessLocalWrite | kAccessRemoteWrite));
    QpInitAttr ia;
    ia.qp_type = QpType::kRc;
    ia.send_cq = ia.recv_cq = h.cq;
    ia.cap.max_send_wr = kDepth;
    ia.cap.max_recv_wr = 1;
    ia.sq_sig_all = true;
    h.qp = value(create_qp(h.pd, ia));
  }

  void connect(Host& h, Host& peer) {
    QpAttr q;
    q.qp_state = QpState::kInit;
    q.port_num = 1;
    q.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite;
    ASSERT_TRUE(modify_qp(h.qp, q, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags).ok());
    q = {};
    q.qp_state = QpState::kRtr;
    q.path_mtu = Mtu::k1024;
    q.dest_qp_num = peer.qp->qp_num;
    q.ah_attr.dgid = peer.gid;
    q.ah_attr.dmac = peer.mac;
    q.max_dest_rd_atomic = 1;
    q.min_rnr_timer = 1;
    ASSERT_TRUE(modify_qp(h.qp, q, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic |
                                       kQpMinRnrTimer).ok());
    q = {};
    q.qp_state = QpState::kRts;
    q.timeout = 14;
    q.retry_cnt = 7;
    q.rnr_retry = 7;
    q.max_rd_atomic = 1;
    ASSERT_TRUE(modify_qp(h.qp, q, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry |
                                       kQpMaxQpRdAtomic).ok());
  }

  // Runs both engines for ns of virtual time in 1 us steps, a streaming
  // WRITEs to b; the switch marks CE on a's ECT frames while `congested`.
  // Returns a's wire rate in Gb/s over the interval: the bytes of the frames
  // a's port put on the wire ring, plus 24 bytes of Ethernet overhead each.
  double run(uint64_t ns, bool congested) {
    const uint64_t bytes0 = wire_bytes_;
    for (uint64_t end = now_ + ns; now_ < end; now_ += 1000) {
      while (outstanding_ < kDepth) {
        Sge sge{uint64_t(uintptr_t(a_.buf.data())), kMsgBytes, a_.mr->lkey};
        SendWr w = write_wr(0, &sge, uint64_t(uintptr_t(b_.buf.data())), b_.mr->rkey);
        SendWr* bad = nullptr;
        if (!post_send(a_.qp, &w, &bad).ok()) break;
        ++outstanding_;
      }
      poll(a_.ctx.get(), now_);
      std::array<void*, 64> m;
      for (unsigned n; (n = rte_ring_dequeue_burst(wire_, m.data(), m.size(), nullptr)) != 0;) {
        for (unsigned i = 0; i < n; ++i) {
          auto* mb = static_cast<rte_mbuf*>(m[i]);
          wire_bytes_ += rte_pktmbuf_pkt_len(mb) + kWireOverheadBytes;
          if (congested && mark_ce(mb)) ++marked_;
        }
        EXPECT_EQ(rte_ring_enqueue_burst(b_rx_, m.data(), n, nullptr), n);
      }
      poll(b_.ctx.get(), now_);
      Wc wc[32];
      for (int k; (k = poll_cq(a_.cq, 32, wc)) > 0;) {
        for (int i = 0; i < k; ++i) {
          EXPECT_EQ(wc[i].status, WcStatus::kSuccess);
          --outstanding_;
        }
      }
    }
    return double(wire_bytes_ - bytes0) * 8 / double(ns);
  }

  rte_ring* wire_ = nullptr;
  rte_ring* b_rx_ = nullptr;
  rte_ring* a_rx_ = nullptr;
  Host a_, b_;
  uint64_t now_ = 1'000'000;
  uint32_t outstanding_ = 0;
  uint64_t marked_ = 0;
  uint64_t wire_bytes_ = 0;
};

TEST_F(DpdkCnp, CnpsOverNetRingCutTheDcqcnSendersRate) {
  // Events: a streams 16 KiB WRITEs to b at its 10 Gb/s line rate for 2 ms;
  // then for 2 ms every data frame reaches b CE-marked; then 2 ms unmarked.
  // Expect: at line rate before (> 9 Gb/s on the wire); b sends
  // CNPs at most once per 4 us (np_cnp_sent <= 2 ms / 4 us + 1), a handles
  // every one it receives (rp_cnp_handled == rcvd_cnp > 0); a's rate falls
  // below half while marked and climbs again after; every WRITE completes
  // successfully, nothing is retransmitted.
  const double before = run(2'000'000, false);
  EXPECT_GT(before, 9.0);
  EXPECT_EQ(query_counters(a_.ctx.get()).get(Counter::rcvd_cnp), 0u);
  const double marked = run(2'000'000, true);
  const Counters& ca = query_counters(a_.ctx.get());
  const Counters& cb = query_counters(b_.ctx.get());
  std::printf("rate before %.2f Gb/s, while marked %.2f Gb/s; CE marked %llu, CNPs sent %llu, handled %llu\n", before,
              marked, (unsigned long long)marked_, (unsigned long long)cb.get(Counter::np_cnp_sent),
              (unsigned long long)ca.get(Counter::rp_cnp_handled));
  EXPECT_LT(marked, before / 2);
  EXPECT_GT(marked_, 0u);
  EXPECT_EQ(cb.get(Counter::np_ecn_marked_roce_packets), marked_);
  EXPECT_GT(cb.get(Counter::np_cnp_sent), 0u);
  EXPECT_LE(cb.get(Counter::np_cnp_sent), 2'000'000u / 4'000 + 1);
  EXPECT_EQ(ca.get(Counter::rcvd_cnp), cb.get(Counter::np_cnp_sent));
  EXPECT_EQ(ca.get(Counter::rp_cnp_handled), ca.get(Counter::rcvd_cnp));
  EXPECT_EQ(query_qp_counters(a_.qp).get(Counter::rp_cnp_handled), ca.get(Counter::rcvd_cnp));
  EXPECT_EQ(ca.get(Counter::retransmits), 0u);
  const double after = run(2'000'000, false);
  std::printf("rate after the marking stopped %.2f Gb/s\n", after);
  EXPECT_GT(after, marked);
}

}  // namespace
}  // namespace uroce
