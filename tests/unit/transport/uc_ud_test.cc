// Unreliable services: UC (IBA 9.8.3: no ACKs, a PSN gap loses the rest of
// the message) and UD (IBA 9.8.4 and 10.2.5: DETH, Q_Key, GRH area, MTU limit).
#include <cstring>

#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

using wire::PacketDesc;
using Uc = Pair;

// Receive: a 3-packet UC SEND missing its middle packet, then a 1-packet SEND.
// Expect: IBA 9.8.3: the first message is dropped (uc_msg_dropped), the second
// is delivered into the receive WQE the first would have used; no ACKs.
TEST_F(Uc, PsnGapDropsMessage) {
  PairOptions o;
  o.type = QpType::kUc;
  o.mtu = Mtu::k256;
  open(o);
  a->port.hook = [&](const PacketDesc& d) {
    return d.psn == o.a_sq_psn + 1 ? TestPort::Action::kDrop : TestPort::Action::kPass;
  };
  fill(a->buf, 0, 1024, 1);
  ASSERT_TRUE(b->post_recv(1, 0, 1024).ok());
  ASSERT_TRUE(b->post_recv(2, 4096, 1024).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 700).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 2, 800, 100).ok());
  EXPECT_EQ(drain(a->scq).size(), 2u);  // UC completes when sent
  const auto r = drain(b->rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 1u);
  EXPECT_EQ(r[0].byte_len, 100u);
  EXPECT_EQ(std::memcmp(a->buf.data() + 800, b->buf.data(), 100), 0);
  EXPECT_EQ(b->count(Counter::uc_msg_dropped), 1u);
  EXPECT_TRUE(b->port.sent.empty());
}

// Receive: UC WRITE with immediate. Expect: data placed, completion, no ACK.
TEST_F(Uc, WriteWithImm) {
  PairOptions o;
  o.type = QpType::kUc;
  open(o);
  fill(a->buf, 0, 3000, 2);
  ASSERT_TRUE(b->post_recv(1, 0, 0).ok());
  Sge g = a->sge(0, 3000);
  SendWr wr = write_imm_wr(0, &g, b->addr(8192), b->mr->rkey, 42).signaled();
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  const Wc r = wait_wc(b->rcq);
  EXPECT_EQ(r.opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(r.imm_data, 42u);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 8192, 3000), 0);
  EXPECT_TRUE(b->port.sent.empty());
  EXPECT_EQ(post(WrOpcode::kRdmaRead, 1, 0, 8).code(), StatusCode::kInvalidArgument);  // no READ on UC
}

class Ud : public Pair {
 protected:
  void SetUp() override {
    PairOptions o;
    o.type = QpType::kUd;
    o.qkey = 0x11111111;
    open(o);
    AhAttr at;
    at.dgid = b->gid;
    at.dmac = b->mac;
    ah = must(create_ah(a->pd, at));
  }
  SendWr ud_wr(Sge* g, uint32_t qkey) { return ud_send_wr(0, g, ah, b->qp->qp_num, qkey).signaled(); }
  Ah* ah = nullptr;
};

// Receive: UD SEND Only with the right Q_Key. Expect: IBA 11.4.1.2: the first
// 40 bytes hold the GRH area with the IPv4 header in its last 20, kWcGrh,
// byte_len includes the 40, src_qp is the sender's QPN.
TEST_F(Ud, SendFillsGrhAndSrcQp) {
  fill(a->buf, 0, 256, 3);
  ASSERT_TRUE(b->post_recv(1, 0, 40 + 256).ok());
  Sge g = a->sge(0, 256);
  SendWr wr = ud_wr(&g, 0x11111111);
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  const Wc r = wait_wc(b->rcq);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_TRUE(r.wc_flags & kWcGrh);
  EXPECT_EQ(r.src_qp, a->qp->qp_num);
  EXPECT_EQ(r.byte_len, 40u + 256u);
  EXPECT_EQ(b->buf[20], 0x45);                                       // IPv4, IHL 5
  EXPECT_EQ(std::memcmp(b->buf.data() + 20 + 12, a->gid.raw + 12, 4), 0);  // source address
  EXPECT_EQ(std::memcmp(b->buf.data() + 40, a->buf.data(), 256), 0);
  ASSERT_EQ(a->port.sent.size(), 1u);
  EXPECT_EQ(a->port.sent[0].opcode, wire::kUdSendOnly);
  EXPECT_EQ(a->port.sent[0].deth_src_qp, a->qp->qp_num);
}

// Receive: UD SEND with a Q_Key that does not match. Expect: C10-15: silently
// dropped, counted rx_drop_bad_qkey, the receive WQE stays posted.
TEST_F(Ud, QkeyMismatchDropped) {
  ASSERT_TRUE(b->post_recv(1, 0, 1024).ok());
  Sge g = a->sge(0, 64);
  SendWr wr = ud_wr(&g, 0x22222222);
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  EXPECT_EQ(drain(b->rcq).size(), 0u);
  EXPECT_EQ(b->count(Counter::rx_drop_bad_qkey), 1u);
  wr = ud_wr(&g, 0x11111111);
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  EXPECT_EQ(wait_wc(b->rcq).wr_id, 1u);
}

// Send: a WR whose remote Q_Key has the high bit set. Expect: C10-15: the QP's
// own Q_Key goes in the DETH instead.
TEST_F(Ud, QkeyHighBitUsesQpQkey) {
  ASSERT_TRUE(b->post_recv(1, 0, 1024).ok());
  Sge g = a->sge(0, 64);
  SendWr wr = ud_wr(&g, 0x80000000);
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kSuccess);
  EXPECT_EQ(a->port.sent[0].deth_qkey, 0x11111111u);
}

// Send: UD messages longer than the MTU. Expect: post_send refuses them (IBA
// 9.8.4: a UD message is one packet).
TEST_F(Ud, MessageLongerThanMtuRefused) {
  Sge g = a->sge(0, 4097);
  SendWr wr = ud_wr(&g, 0x11111111);
  EXPECT_EQ(post_send(a->qp, &wr, nullptr).code(), StatusCode::kInvalidArgument);
  wr.opcode = WrOpcode::kRdmaWrite;
  g.length = 8;
  EXPECT_EQ(post_send(a->qp, &wr, nullptr).code(), StatusCode::kInvalidArgument);
}

// Send: a UD datagram of 4096 bytes on a port whose Ethernet MTU carries a
// 4096-byte PMTU (a UD QP has no path_mtu attribute).
// Expect: C11_UdMtu (IBA 9.8.4 / 11.4.1.1): the UD MTU is the port's active
// MTU, as rxe takes it from the netdev: the datagram goes whole in one
// packet and arrives whole (byte_len 40 + 4096), not cut at a default 1024.
TEST_F(Ud, C11_UdMtu_IsThePortMtuAndDatagramsArriveWhole) {
  QpAttr at;
  ASSERT_TRUE(query_qp(a->qp, &at, nullptr).ok());
  EXPECT_EQ(at.path_mtu, Mtu::k4096);
  fill(a->buf, 0, 4096, 9);
  ASSERT_TRUE(b->post_recv(1, 0, 40 + 4096).ok());
  Sge g = a->sge(0, 4096);
  SendWr wr = ud_wr(&g, 0x11111111);
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  const Wc r = wait_wc(b->rcq);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_EQ(r.byte_len, 40u + 4096u);
  EXPECT_EQ(std::memcmp(b->buf.data() + 40, a->buf.data(), 4096), 0);
  ASSERT_EQ(a->port.sent.size(), 1u);
  EXPECT_EQ(a->port.sent[0].payload_len, 4096u);
}

// Receive: UD SEND with no receive WQE posted. Expect: dropped (class D), no NAK.
TEST_F(Ud, NoReceiveWqeDropped) {
  Sge g = a->sge(0, 64);
  SendWr wr = ud_wr(&g, 0x11111111);
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  run_for(100'000);
  EXPECT_EQ(b->count(Counter::rx_drop_no_recv_wqe), 1u);
  EXPECT_TRUE(b->port.sent.empty());
}

}  // namespace
}  // namespace uroce::test
