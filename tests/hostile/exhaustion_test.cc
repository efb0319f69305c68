// Exhaustion: a receive queue that is empty, a CQ that overflows, a transmit
// mbuf pool that runs dry, a send queue and a receive queue that are full,
// and a device out of QPs. Each gives a clear answer (an RNR NAK, a counter
// and the QP in ERR, transmit back-pressure, a kResourceExhausted Status),
// corrupts nothing, does not deadlock, and recovers when the resource comes
// back; the honest QP pair of the harness keeps working throughout.
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstring>

#include "stack/wire/aeth.h"
#include "tests/hostile/hostile.h"

namespace uroce::hostile {
namespace {

using wire::PacketDesc;
using Exhaustion = Hostile;

Sge sge_of(const GuardedBuf& b, Mr* mr, size_t off, uint32_t len) { return Sge{b.addr(off), len, mr->lkey}; }

Status post_one_recv(Qp* qp, uint64_t wr_id, Sge s) {
  RecvWr w;
  w.wr_id = wr_id;
  w.sg_list = &s;
  w.num_sge = 1;
  return post_recv(qp, &w, nullptr);
}

Status post_one_send(Qp* qp, uint64_t wr_id, WrOpcode op, Sge s, uint64_t raddr = 0, uint32_t rkey = 0) {
  SendWr w;
  w.wr_id = wr_id;
  w.sg_list = &s;
  w.num_sge = 1;
  w.opcode = op;
  w.send_flags = kSendSignaled;
  w.rdma = {raddr, rkey};
  return post_send(qp, &w, nullptr);
}

// Receive: a SEND on the honest connection while the victim has no receive
// WQE posted; the victim posts one after its first RNR NAK.
// Expect: IBA 9.7.5.2.8 (class B): RNR NAK carrying the QP's
// min_rnr_timer, counted on both sides; the requester waits and retries from
// the NAKed PSN; once the buffer is posted the SEND lands whole and both
// QPs stay in RTS.
TEST_F(Exhaustion, ReceiveQueueEmpty_RnrNakThenRecovery) {
  for (size_t i = 0; i < 100; ++i) hbuf_.data()[7000 + i] = uint8_t(i * 3 + 1);
  ASSERT_TRUE(post_one_send(hv_, 1, WrOpcode::kSend, sge_of(hbuf_, hbuf_mr_, 7000, 100)).ok());
  for (int i = 0; i < 1000 && count(Counter::send_rnr_err) == 0; ++i) step();
  ASSERT_EQ(count(Counter::send_rnr_err), 1u);
  ASSERT_TRUE(post_one_recv(vh_, 2, sge_of(vhon_, vhon_mr_, 5000, 128)).ok());
  Wc wc{};
  for (int i = 0; i < 5000 && poll_cq(hcq_, 1, &wc) == 0; ++i) step();
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  ASSERT_EQ(poll_cq(vrcq_, 1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.byte_len, 100u);
  EXPECT_EQ(std::memcmp(vhon_.data() + 5000, hbuf_.data() + 7000, 100), 0);
  EXPECT_GE(query_counters(h_.get()).get(Counter::rcvd_rnr_err), 1u);
  EXPECT_EQ(state(vh_), QpState::kRts);
  EXPECT_EQ(state(hv_), QpState::kRts);
  ASSERT_TRUE(honest_round(0));
}

// Receive: an attacker's SEND Only on its connection while no receive WQE is posted.
// Expect: IBA 9.7.5.2.8: an RNR NAK (not a fatal error): the QP stays in RTS
// and nothing is written.
TEST_F(Exhaustion, AttackerSendWithoutReceiveWqe_RnrNak) {
  PacketDesc d = req(wire::kRcSendOnly);
  send(d, std::vector<uint8_t>(64, 0xee));
  auto rs = replies(50'000);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(wire::aeth_type(rs[0].d.aeth_syndrome), wire::AethType::kRnrNak);
  EXPECT_EQ(wire::aeth_value(rs[0].d.aeth_syndrome), 1);  // min_rnr_timer 1 (connect_rc)
  EXPECT_EQ(count(Counter::send_rnr_err), 1u);
  EXPECT_EQ(state(vx_), QpState::kRts);
  EXPECT_TRUE(local_.unchanged());
  ASSERT_TRUE(honest_round(0));
}

// Receive: 2 x the receive CQ's capacity of SENDs on a connection whose
// receive CQ nobody polls.
// Expect: IBA 11.4.2.1 (CQ overrun is an error; the QPs that complete into
// it go to ERR): cq_overflow counted, the QP in ERR; the entries already in
// the CQ are intact and in order (nothing overwritten); the honest QPs keep
// working; after the application drains the CQ and resets the QPs
// (ERR -> RESET -> RTS) the connection carries traffic again.
TEST_F(Exhaustion, CqOverflow_QpToErrNoCorruptionThenRecovery) {
  Cq* small = create_cq(v_.get(), 4).value();
  const uint32_t cap = small->cqe;
  Cq* hs = create_cq(h_.get(), 256).value();
  Qp* qv = make_qp(vpd_, vcq_, small, QpType::kRc);
  Qp* qh = make_qp(hpd_, hs, hs, QpType::kRc);
  connect_rc(qv, qh->qp_num, 0x10, 0x20, hgid_, kHMac, kAllRemote);
  connect_rc(qh, qv->qp_num, 0x20, 0x10, vgid_, kVMac, kAllRemote);
  const uint32_t n = 2 * cap;
  constexpr size_t kSrc = 4400;  // clear of what honest_round uses in hbuf_
  ASSERT_LE(kSrc + 64 * n, 6000u);
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_TRUE(post_one_recv(qv, 100 + i, sge_of(rw_, rw_mr_, 64 * i, 64)).ok());
    for (uint32_t k = 0; k < 64; ++k) hbuf_.data()[kSrc + 64 * i + k] = uint8_t(i * 16 + k);
  }
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_TRUE(post_one_send(qh, 200 + i, WrOpcode::kSend, sge_of(hbuf_, hbuf_mr_, kSrc + 64 * i, 64)).ok());
  }
  for (int i = 0; i < 3000 && state(qv) != QpState::kErr; ++i) step();
  EXPECT_GE(count(Counter::cq_overflow), 1u);
  EXPECT_EQ(state(qv), QpState::kErr);
  ASSERT_TRUE(honest_round(0)) << "the honest QPs share the device";
  // The CQ holds the first `cap` receive completions, in order, intact.
  std::vector<Wc> got(cap + 8);
  const int m = poll_cq(small, int(got.size()), got.data());
  ASSERT_EQ(m, int(cap));
  for (uint32_t i = 0; i < cap; ++i) {
    EXPECT_EQ(got[i].wr_id, 100 + i);
    EXPECT_EQ(got[i].status, WcStatus::kSuccess);
    EXPECT_EQ(got[i].byte_len, 64u);
    EXPECT_EQ(std::memcmp(rw_.data() + 64 * i, hbuf_.data() + kSrc + 64 * i, 64), 0) << "message " << i;
  }
  // Recovery: reset both ends and connect again.
  run_for(100'000);
  Wc drop[512];
  while (poll_cq(small, 512, drop) > 0) {}
  while (poll_cq(hs, 512, drop) > 0) {}
  QpAttr reset;
  reset.qp_state = QpState::kReset;
  ASSERT_TRUE(modify_qp(qv, reset, kQpState).ok());
  ASSERT_TRUE(modify_qp(qh, reset, kQpState).ok());
  while (poll_cq(small, 512, drop) > 0) {}
  while (poll_cq(hs, 512, drop) > 0) {}
  connect_rc(qv, qh->qp_num, 0x800, 0x900, hgid_, kHMac, kAllRemote);
  connect_rc(qh, qv->qp_num, 0x900, 0x800, vgid_, kVMac, kAllRemote);
  ASSERT_TRUE(post_one_recv(qv, 7, sge_of(vhon_, vhon_mr_, 5000, 64)).ok());
  ASSERT_TRUE(post_one_send(qh, 8, WrOpcode::kSend, sge_of(hbuf_, hbuf_mr_, 0, 64)).ok());
  Wc wc{};
  for (int i = 0; i < 5000 && poll_cq(small, 1, &wc) == 0; ++i) step();
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(vhon_.data() + 5000, hbuf_.data(), 64), 0);
  ASSERT_TRUE(destroy_qp(qv).ok());
  ASSERT_TRUE(destroy_qp(qh).ok());
  ASSERT_TRUE(destroy_cq(small).ok());
  ASSERT_TRUE(destroy_cq(hs).ok());
}

// The victim's transmit pool runs dry (every mbuf held elsewhere, as by a
// NIC that has not yet freed them) while the honest peer READs 4 KB from it
// and the victim WRITEs 4 KB to the peer.
// Expect: transmit back-pressure: tx_pool_empty counted, nothing sent and
// nothing lost or completed wrongly meanwhile, no crash; once the mbufs come
// back both operations complete with the right bytes, and when all is quiet
// every mbuf of every port is back in its pool.
TEST_F(Exhaustion, MbufPoolExhausted_BackPressureThenRecovery) {
  rte_mempool* pool = vport_->tx_pool();
  const unsigned total = rte_mempool_avail_count(pool) + rte_mempool_in_use_count(pool);
  run_for(10'000);
  ASSERT_EQ(rte_mempool_avail_count(pool), total);
  std::vector<rte_mbuf*> held;
  while (rte_mbuf* m = rte_pktmbuf_alloc(pool)) held.push_back(m);
  ASSERT_EQ(rte_mempool_avail_count(pool), 0u);

  vhon_.fill(21);
  std::memset(hbuf_.data(), 0, 8192);
  ASSERT_TRUE(post_one_send(hv_, 1, WrOpcode::kRdmaRead, sge_of(hbuf_, hbuf_mr_, 0, 4096), vhon_.addr(0),
                            vhon_mr_->rkey)
                  .ok());
  ASSERT_TRUE(post_one_send(vh_, 2, WrOpcode::kRdmaWrite, sge_of(vhon_, vhon_mr_, 4096, 4096), hbuf_.addr(4096),
                            hbuf_mr_->rkey)
                  .ok());
  run_for(2'000'000);  // 2 ms, well inside the 16.8 ms ACK timeout
  EXPECT_GT(count(Counter::tx_pool_empty), 0u);
  Wc wc{};
  EXPECT_EQ(poll_cq(hcq_, 1, &wc), 0) << "a READ completed without responses";
  EXPECT_EQ(poll_cq(vcq_, 1, &wc), 0);
  EXPECT_EQ(state(vh_), QpState::kRts);

  for (rte_mbuf* m : held) rte_pktmbuf_free(m);
  held.clear();
  for (int i = 0; i < 20000 && poll_cq(hcq_, 1, &wc) == 0; ++i) step();
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  for (int i = 0; i < 20000 && poll_cq(vcq_, 1, &wc) == 0; ++i) step();
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(hbuf_.data(), vhon_.data(), 4096), 0);
  EXPECT_EQ(std::memcmp(hbuf_.data() + 4096, vhon_.data() + 4096, 4096), 0);
  ASSERT_TRUE(honest_round(0));
  run_for(100'000);
  EXPECT_EQ(rte_mempool_avail_count(pool), total) << "mbufs leaked";
  for (loopback::Port* p : {hport_, xport_}) {
    EXPECT_EQ(rte_mempool_in_use_count(p->tx_pool()), 0u) << "port " << p->index();
  }
}

// post_send with more WRs than the send queue holds, and post_recv likewise.
// Expect: IBA 11.4.1 (immediate error "send/receive queue full"):
// kResourceExhausted, *bad_wr names the first WR not posted, the ones before
// it were posted and complete; once completions free the queue the rest post
// and complete. No deadlock, QPs in RTS.
TEST_F(Exhaustion, SendAndReceiveQueueFull_ClearErrorThenRecovery) {
  QpAttr at;
  QpInitAttr ia;
  ASSERT_TRUE(query_qp(hv_, &at, &ia).ok());
  const uint32_t depth = at.cap.max_send_wr;
  ASSERT_GE(depth, 64u);
  std::vector<SendWr> w(depth + 8);
  Sge s = sge_of(hbuf_, hbuf_mr_, 0, 64);
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = write_wr(i, &s, vhon_.addr(0), vhon_mr_->rkey).signaled();
    w[i].next = i + 1 < w.size() ? &w[i + 1] : nullptr;
  }
  SendWr* bad = nullptr;
  Status st = post_send(hv_, w.data(), &bad);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.message();
  ASSERT_EQ(bad, &w[depth]);
  size_t done = 0;
  Wc wc[64];
  for (int i = 0; i < 20000 && done < depth; ++i) {
    step();
    const int k = poll_cq(hcq_, 64, wc);
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(wc[j].wr_id, done + size_t(j));
      EXPECT_EQ(wc[j].status, WcStatus::kSuccess);
    }
    done += size_t(k);
  }
  ASSERT_EQ(done, depth);
  ASSERT_TRUE(post_send(hv_, bad, nullptr).ok());
  for (int i = 0; i < 20000 && done < w.size(); ++i) {
    step();
    const int k = poll_cq(hcq_, 64, wc);
    for (int j = 0; j < k; ++j) EXPECT_EQ(wc[j].wr_id, done + size_t(j));
    done += size_t(k);
  }
  EXPECT_EQ(done, w.size());

  // The receive queue.
  ASSERT_TRUE(query_qp(vh_, &at, &ia).ok());
  std::vector<RecvWr> r(at.cap.max_recv_wr + 1);
  Sge rs = sge_of(local_, local_mr_, 0, 64);
  for (size_t i = 0; i < r.size(); ++i) {
    r[i].wr_id = i;
    r[i].sg_list = &rs;
    r[i].num_sge = 1;
    r[i].next = i + 1 < r.size() ? &r[i + 1] : nullptr;
  }
  RecvWr* rbad = nullptr;
  st = post_recv(vh_, r.data(), &rbad);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.message();
  EXPECT_EQ(rbad, &r[at.cap.max_recv_wr]);
  EXPECT_EQ(state(hv_), QpState::kRts);
  EXPECT_EQ(state(vh_), QpState::kRts);
}

// create_qp until the device's max_qp (16 here) is reached.
// Expect: IBA 11.2.5 (insufficient resources): kResourceExhausted with a
// message naming the limit, never a crash or a half-made QP; the existing
// QPs keep working; destroying one lets the next create_qp succeed.
TEST_F(Exhaustion, TooManyQps_ClearErrorThenRecovery) {
  std::vector<Qp*> made;
  Status last;
  for (int i = 0; i < 64; ++i) {
    QpInitAttr ia;
    ia.send_cq = vcq_;
    ia.recv_cq = vrcq_;
    ia.cap.max_send_wr = 4;
    ia.cap.max_recv_wr = 4;
    auto q = create_qp(vpd_, ia);
    if (!q.ok()) {
      last = q.status();
      break;
    }
    made.push_back(*q);
  }
  EXPECT_EQ(last.code(), StatusCode::kResourceExhausted) << last.message();
  EXPECT_NE(std::string(last.message()).find("max_qp"), std::string::npos);
  EXPECT_EQ(made.size() + 3, 16u);  // vx, vh, vud and the 13 made here
  ASSERT_TRUE(honest_round(0));
  ASSERT_TRUE(destroy_qp(made.back()).ok());
  made.pop_back();
  QpInitAttr ia;
  ia.send_cq = vcq_;
  ia.recv_cq = vrcq_;
  ia.cap.max_send_wr = 4;
  ia.cap.max_recv_wr = 4;
  auto q = create_qp(vpd_, ia);
  ASSERT_TRUE(q.ok()) << q.status().message();
  made.push_back(*q);
  for (Qp* p : made) ASSERT_TRUE(destroy_qp(p).ok());
  ASSERT_TRUE(honest_round(1));
}

}  // namespace
}  // namespace uroce::hostile
