// Every RC operation end to end, at the smallest and largest path MTU, with
// the data checked byte for byte (IBA 9.4 operations, 9.7 RC transport).
#include <cstring>

#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

using Requester = Pair;

class Ops : public Pair, public ::testing::WithParamInterface<Mtu> {
 protected:
  void SetUp() override {
    PairOptions o;
    o.mtu = GetParam();
    open(o);
  }
  uint32_t len() const { return 3 * mtu_bytes(GetParam()) + 100; }  // First, Middle x2, Last
  bool same(size_t a_off, size_t b_off, size_t n) const {
    return std::memcmp(a->buf.data() + a_off, b->buf.data() + b_off, n) == 0;
  }
  uint64_t b_u64(size_t off) const {
    uint64_t v;
    std::memcpy(&v, b->buf.data() + off, 8);
    return v;
  }
  uint64_t a_u64(size_t off) const {
    uint64_t v;
    std::memcpy(&v, a->buf.data() + off, 8);
    return v;
  }
  void set_b_u64(size_t off, uint64_t v) { std::memcpy(b->buf.data() + off, &v, 8); }
};

// Receive: SEND First/Middle/Middle/Last. Expect: one receive completion with all bytes; send completion.
TEST_P(Ops, Send) {
  fill(a->buf, 0, len(), 1);
  ASSERT_TRUE(b->post_recv(7, 0, 1 << 16).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, len()).ok());
  const Wc r = wait_wc(b->rcq);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_EQ(r.opcode, WcOpcode::kRecv);
  EXPECT_EQ(r.wr_id, 7u);
  EXPECT_EQ(r.byte_len, len());
  EXPECT_EQ(r.qp_num, b->qp->qp_num);
  EXPECT_TRUE(same(0, 0, len()));
  const Wc s = wait_wc(a->scq);
  EXPECT_EQ(s.status, WcStatus::kSuccess);
  EXPECT_EQ(s.opcode, WcOpcode::kSend);
  EXPECT_EQ(s.wr_id, 1u);
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcAcknowledge), 1u);  // one ACK per message, as rxe
}

// Receive: SEND with immediate. Expect: kWcWithImm and the immediate value.
TEST_P(Ops, SendWithImm) {
  fill(a->buf, 0, len(), 2);
  ASSERT_TRUE(b->post_recv(7, 0, 1 << 16).ok());
  Sge g = a->sge(0, len());
  SendWr wr = send_imm_wr(0, &g, 0x12345678).signaled();
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  const Wc r = wait_wc(b->rcq);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_TRUE(r.wc_flags & kWcWithImm);
  EXPECT_EQ(r.imm_data, 0x12345678u);
  EXPECT_EQ(r.byte_len, len());
  EXPECT_TRUE(same(0, 0, len()));
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
}

// Receive: SEND with Invalidate of an R_Key of b. Expect: kWcWithInv, the key is
// invalid afterwards (a WRITE with it gets a remote access error).
TEST_P(Ops, SendWithInvalidate) {
  std::vector<uint8_t> other(4096);
  Mr* target = must(
      reg_mr(b->pd, other.data(), other.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteInvalidate));
  fill(a->buf, 0, len(), 3);
  ASSERT_TRUE(b->post_recv(7, 0, 1 << 16).ok());
  Sge g = a->sge(0, len());
  SendWr wr = send_inv_wr(0, &g, target->rkey).signaled();
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  const Wc r = wait_wc(b->rcq);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_TRUE(r.wc_flags & kWcWithInv);
  EXPECT_EQ(r.invalidated_rkey, target->rkey);
  EXPECT_TRUE(same(0, 0, len()));
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);

  Sge g2 = a->sge(0, 64);
  SendWr w2 = write_wr(0, &g2, uint64_t(uintptr_t(other.data())), target->rkey).signaled();
  ASSERT_TRUE(post_send(a->qp, &w2, nullptr).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kRemAccessErr);
}

// Receive: RDMA WRITE First/Middle/Last. Expect: the bytes land at the remote address.
TEST_P(Ops, Write) {
  fill(a->buf, 0, len(), 4);
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, len(), 4096).ok());
  const Wc s = wait_wc(a->scq);
  EXPECT_EQ(s.status, WcStatus::kSuccess);
  EXPECT_EQ(s.opcode, WcOpcode::kRdmaWrite);
  EXPECT_TRUE(same(0, 4096, len()));
  Wc none;
  EXPECT_EQ(poll_cq(b->rcq, 1, &none), 0);  // a WRITE consumes no receive WQE
}

// Receive: RDMA WRITE with immediate. Expect: data placed and a kRecvRdmaWithImm completion.
TEST_P(Ops, WriteWithImm) {
  fill(a->buf, 0, len(), 5);
  ASSERT_TRUE(b->post_recv(9, 0, 0).ok());
  Sge g = a->sge(0, len());
  SendWr wr = write_imm_wr(0, &g, b->addr(8192), b->mr->rkey, 0xabcdef01).signaled();
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  const Wc r = wait_wc(b->rcq);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_EQ(r.opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(r.imm_data, 0xabcdef01u);
  EXPECT_EQ(r.byte_len, len());
  EXPECT_TRUE(same(0, 8192, len()));
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
}

// Receive: RDMA READ Request; send Read Response First/Middle/Last. Expect: the bytes at the requester.
TEST_P(Ops, Read) {
  fill(b->buf, 4096, len(), 6);
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 65536, len(), 4096).ok());
  const Wc s = wait_wc(a->scq);
  EXPECT_EQ(s.status, WcStatus::kSuccess);
  EXPECT_EQ(s.opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(s.byte_len, len());
  EXPECT_TRUE(same(65536, 4096, len()));
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcReadResponseMiddle), 2u);
}

// Receive: CmpSwap that matches, then one that does not. Expect: swapped once; both return the old value.
TEST_P(Ops, CompareAndSwap) {
  set_b_u64(128, 5);
  Sge g = a->sge(256, 8);
  SendWr wr = cmp_swap_wr(0, &g, b->addr(128), b->mr->rkey, 5, 9).signaled();
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  const Wc s = wait_wc(a->scq);
  EXPECT_EQ(s.status, WcStatus::kSuccess);
  EXPECT_EQ(s.opcode, WcOpcode::kCompSwap);
  EXPECT_EQ(a_u64(256), 5u);
  EXPECT_EQ(b_u64(128), 9u);
  wr.atomic.swap = 11;  // compare 5 no longer matches
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(a_u64(256), 9u);
  EXPECT_EQ(b_u64(128), 9u);
}

// Receive: FetchAdd. Expect: the old value returned, the sum stored.
TEST_P(Ops, FetchAndAdd) {
  set_b_u64(128, 100);
  Sge g = a->sge(256, 8);
  SendWr wr = fetch_add_wr(0, &g, b->addr(128), b->mr->rkey, 23).signaled();
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  const Wc s = wait_wc(a->scq);
  EXPECT_EQ(s.status, WcStatus::kSuccess);
  EXPECT_EQ(s.opcode, WcOpcode::kFetchAdd);
  EXPECT_EQ(a_u64(256), 100u);
  EXPECT_EQ(b_u64(128), 123u);
  EXPECT_EQ(b->count(Counter::atomic_executed), 1u);
}

// Send: a SEND gathered from three SGEs into a receive WQE scattered over two.
// Expect: the concatenation arrives in order.
TEST_P(Ops, GatherScatter) {
  fill(a->buf, 0, 3 * 4096, 8);
  Sge g[3] = {a->sge(0, 1000), a->sge(4096, 2000), a->sge(8192, 1500)};
  SendWr wr = send_wr(0, g).signaled();
  wr.num_sge = 3;
  Sge r[2] = {b->sge(0, 3000), b->sge(16384, 3000)};
  RecvWr rw;
  rw.sg_list = r;
  rw.num_sge = 2;
  ASSERT_TRUE(post_recv(b->qp, &rw, nullptr).ok());
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  EXPECT_EQ(wait_wc(b->rcq).byte_len, 4500u);
  EXPECT_TRUE(same(0, 0, 1000));
  EXPECT_TRUE(same(4096, 1000, 2000));
  EXPECT_TRUE(same(8192, 16384, 1500));
}

INSTANTIATE_TEST_SUITE_P(Mtu, Ops, ::testing::Values(Mtu::k256, Mtu::k4096),
                         [](const auto& p) { return "mtu" + std::to_string(mtu_bytes(p.param)); });

// Send: SEND, WRITE and READ with sq_psn just below the 24-bit wrap. Expect:
// PSNs go 0xFFFFFE, 0xFFFFFF, 0, 1, ... and every operation succeeds (IBA 9.7.1).
TEST_F(Requester, PsnWrapMidMessage) {
  PairOptions o;
  o.mtu = Mtu::k256;
  o.a_sq_psn = 0xfffffe;
  open(o);
  const uint32_t n = 5 * 256;
  fill(a->buf, 0, n, 9);
  ASSERT_TRUE(b->post_recv(1, 0, n).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, n).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(wait_wc(b->rcq).byte_len, n);
  ASSERT_GE(a->port.sent.size(), 5u);
  EXPECT_EQ(a->port.sent[0].psn, 0xfffffeu);
  EXPECT_EQ(a->port.sent[1].psn, 0xffffffu);
  EXPECT_EQ(a->port.sent[2].psn, 0u);
  EXPECT_EQ(a->port.sent[4].psn, 2u);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data(), n), 0);
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 2, 0, n, 8192).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 8192, n), 0);
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 3, 16384, n, 8192).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a->buf.data() + 16384, b->buf.data() + 8192, n), 0);
}

}  // namespace
}  // namespace uroce::test
