// Responder rules (IBA 9.7.5.2, 9.9.3): duplicates, PSN-sequence NAKs, replay
// of READ and atomic responses, ACK coalescing and every NAK type.
#include <cstring>
#include <map>

#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

using wire::PacketDesc;
using Responder = Pair;
constexpr int kNakSeq = 0x60, kNakInvReq = 0x61, kNakRemAccess = 0x62, kNakRemOp = 0x63;

// Receive: SEND Only, acknowledged; then the same SEND again (duplicate).
// Expect: C9-105: it is ACKed again with the last acknowledged PSN, not
// delivered twice; the requester drops the second ACK as a duplicate.
TEST_F(Responder, C9_105_DuplicateSendIsReacked) {
  open();
  fill(a->buf, 0, 64, 1);
  ASSERT_TRUE(b->post_recv(1, 0, 64).ok());
  ASSERT_TRUE(b->post_recv(2, 4096, 64).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(wait_wc(b->rcq).wr_id, 1u);
  ASSERT_EQ(a->port.sent.size(), 1u);
  b->port.inject(frame_of(a->port.sent[0], {a->buf.data(), 64}));
  run_for(100'000);
  EXPECT_EQ(b->count(Counter::duplicate_request), 1u);
  ASSERT_EQ(count_sent(b->port.sent, wire::kRcAcknowledge, 0x1f), 2u);
  EXPECT_EQ(b->port.sent[1].psn, opt.a_sq_psn);
  EXPECT_EQ(b->port.sent[1].aeth_msn, 1u);
  Wc wc;
  EXPECT_EQ(poll_cq(b->rcq, 1, &wc), 0);
  EXPECT_EQ(a->count(Counter::duplicate_response), 1u);
}

// Receive: a 10-packet SEND whose 2nd packet is lost (8 out-of-sequence
// packets), then, in the go-back-N resend, a 2nd gap.
// Expect: C9-111: one PSN-sequence NAK per gap, naming the expected PSN,
// none repeated for the later packets of the same gap; the data arrives whole.
TEST_F(Responder, OneSeqNakPerGap) {
  PairOptions o;
  o.mtu = Mtu::k256;
  open(o);
  std::map<uint32_t, int> seen;
  a->port.hook = [&](const PacketDesc& d) {
    const int n = ++seen[d.psn];
    const bool lose = (d.psn == o.a_sq_psn + 1 && n == 1) || (d.psn == o.a_sq_psn + 5 && n == 2);
    return lose ? TestPort::Action::kDrop : TestPort::Action::kPass;
  };
  fill(a->buf, 0, 2560, 2);
  ASSERT_TRUE(b->post_recv(1, 0, 4096).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 2560).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(wait_wc(b->rcq).byte_len, 2560u);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data(), 2560), 0);
  EXPECT_EQ(b->count(Counter::seq_nak_sent), 2u);
  ASSERT_EQ(count_sent(b->port.sent, wire::kRcAcknowledge, kNakSeq), 2u);
  EXPECT_EQ(b->port.sent[0].psn, o.a_sq_psn + 1);
  EXPECT_EQ(b->count(Counter::out_of_sequence), 8u + 4u);
  EXPECT_EQ(a->count(Counter::rcvd_seq_err), 2u);
}

// Receive: a READ whose last response packet is lost, then the READ again
// from that PSN after the local ACK timeout (a duplicate).
// Expect: the response is replayed from the responder resource (IBA 9.4.4: a retried
// READ is a subset of the original, and every duplicate response packet carries the
// same payload and PSN as the original's).
TEST_F(Responder, C9_DuplicateReadIsReplayed) {
  open();
  fill(b->buf, 8192, 4000, 3);
  bool dropped = false;
  b->port.hook = [&](const PacketDesc& d) {
    if (d.opcode != wire::kRcReadResponseLast || dropped) return TestPort::Action::kPass;
    dropped = true;
    return TestPort::Action::kDrop;
  };
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 4000, 8192).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 8192, 4000), 0);
  EXPECT_EQ(a->count(Counter::local_ack_timeout_err), 1u);
  EXPECT_EQ(b->count(Counter::duplicate_request), 1u);
  EXPECT_EQ(b->count(Counter::read_replayed), 1u);
  // The retried READ asks only for the missing part (IBA 9.7.5.1.1).
  ASSERT_EQ(count_sent(a->port.sent, wire::kRcReadRequest), 2u);
  EXPECT_EQ(a->port.sent.back().psn, opt.a_sq_psn + 3);
  EXPECT_EQ(a->port.sent.back().reth_len, 4000u - 3 * 1024);
}

// Receive: FetchAdd whose Atomic ACK is lost, then the same FetchAdd again.
// Expect: atomics execute exactly once (rxe's atomic_reply replays res->atomic.orig_val, qib's
// rc_rcv_error resends the saved atomic_data): the duplicate gets the saved
// original value and the target is added to once.
TEST_F(Responder, C9_DuplicateAtomicReturnsSavedResult) {
  open();
  const uint64_t start = 1000;
  std::memcpy(b->buf.data() + 128, &start, 8);
  bool dropped = false;
  b->port.hook = [&](const PacketDesc& d) {
    if (d.opcode != wire::kRcAtomicAcknowledge || dropped) return TestPort::Action::kPass;
    dropped = true;
    return TestPort::Action::kDrop;
  };
  Sge g = a->sge(0, 8);
  SendWr wr = fetch_add_wr(0, &g, b->addr(128), b->mr->rkey, 5).signaled();
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kSuccess);
  uint64_t orig, now_v;
  std::memcpy(&orig, a->buf.data(), 8);
  std::memcpy(&now_v, b->buf.data() + 128, 8);
  EXPECT_EQ(orig, 1000u);
  EXPECT_EQ(now_v, 1005u);
  EXPECT_EQ(b->count(Counter::atomic_executed), 1u);
  EXPECT_EQ(b->count(Counter::atomic_replayed), 1u);
  EXPECT_EQ(count_sent(a->port.sent, wire::kRcFetchAdd), 2u);
}

// Receive: 8 SEND Only packets in one burst, each with AckReq.
// Expect: they are acknowledged by one coalesced ACK for the last PSN.
TEST_F(Responder, AckCoalescingOneAckPerBurst) {
  open();
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(b->post_recv(i, size_t(i) * 64, 64).ok());
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(post(WrOpcode::kSend, i, size_t(i) * 64, 64).ok());
  EXPECT_EQ(drain(a->scq).size(), 8u);
  EXPECT_EQ(drain(b->rcq).size(), 8u);
  ASSERT_EQ(count_sent(b->port.sent, wire::kRcAcknowledge), 1u);
  EXPECT_EQ(b->port.sent[0].psn, opt.a_sq_psn + 7);
  EXPECT_EQ(b->port.sent[0].aeth_msn, 8u);
  EXPECT_EQ(b->count(Counter::ack_deferred), 7u);
}

// Receive: in one burst, 4 WRITE Only packets (each with AckReq) for each of
//   two QPs.
// Expect: coalescing stays inside a QP (an ACK names one QP by its BTH DestQP
//   and acknowledges that QP's PSNs only, IBA 9.7.5.1.2 / 9.7.6.1.1): one ACK
//   per QP, each for its own last PSN with its own MSN, and 3 deferred per QP.
//   With one WRITE in flight per QP (bench-mc's many-QP workload) there is
//   therefore nothing to coalesce: every WRITE costs its own ACK.
TEST_F(Responder, AckCoalescingIsPerQp) {
  open();
  Qp *a2 = nullptr, *b2 = nullptr;
  make_qps(opt, a->pd, b->pd, &a2, &b2);
  ASSERT_NE(b2, nullptr);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(post(WrOpcode::kRdmaWrite, i, size_t(i) * 64, 64, size_t(i) * 64).ok());
    ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 10 + i, size_t(i) * 64, 64, 4096 + size_t(i) * 64, kSendSignaled, a2).ok());
  }
  EXPECT_EQ(drain(a->scq).size(), 8u);
  std::map<uint32_t, std::vector<PacketDesc>> acks;  // by DestQP
  for (const PacketDesc& d : b->port.sent) {
    if (d.opcode == wire::kRcAcknowledge) acks[d.dest_qp].push_back(d);
  }
  ASSERT_EQ(acks.size(), 2u);
  for (Qp* q : {a->qp, a2}) {
    ASSERT_EQ(acks[q->qp_num].size(), 1u) << "QP " << q->qp_num;
    EXPECT_EQ(acks[q->qp_num][0].psn, opt.a_sq_psn + 3);
    EXPECT_EQ(acks[q->qp_num][0].aeth_msn, 4u);
  }
  EXPECT_EQ(b->count(Counter::ack_deferred), 6u);
}

// Receive: READ on a QP whose qp_access_flags lack Remote Read.
// Expect: NAK invalid request; requester WC kRemInvReqErr; both QPs in ERR.
TEST_F(Responder, NakInvalidRequest_QpLacksRemoteRead) {
  PairOptions o;
  o.access = kAccessRemoteWrite;
  open(o);
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 64, 0).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcAcknowledge, kNakInvReq), 1u);
  EXPECT_EQ(b->count(Counter::resp_remote_invalid_request), 1u);
  EXPECT_EQ(a->count(Counter::req_remote_invalid_request), 1u);
  EXPECT_TRUE(is_err(a->qp));
  EXPECT_TRUE(is_err(b->qp));
}

// Receive: FetchAdd to an address that is not 8-byte aligned.
// Expect: NAK invalid request (as rxe's atomic_reply and qib_rc_rcv answer an address that is
// not 8-byte aligned); nothing executed.
TEST_F(Responder, NakInvalidRequest_MisalignedAtomic) {
  open();
  ASSERT_TRUE(post(WrOpcode::kAtomicFetchAndAdd, 1, 0, 8, 132).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcAcknowledge, kNakInvReq), 1u);
  EXPECT_EQ(b->count(Counter::atomic_executed), 0u);
}

// Receive: two READs in one burst with max_dest_rd_atomic 1 (the requester's
// max_rd_atomic is 2, a misconfiguration). Expect: the first is answered, the
// second NAKed invalid request (beyond the responder's resources: qib_rc_rcv NAKs invalid
// request when no entry of its ack queue is free).
TEST_F(Responder, NakInvalidRequest_TooManyReadAtomic) {
  PairOptions o;
  o.max_dest_rd_atomic = 1;
  o.max_rd_atomic = 2;
  open(o);
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 64, 0).ok());
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 2, 64, 64, 64).ok());
  const Wc w1 = wait_wc(a->scq);
  const Wc w2 = wait_wc(a->scq);
  EXPECT_EQ(w1.wr_id, 1u);
  EXPECT_EQ(w1.status, WcStatus::kSuccess);
  EXPECT_EQ(w2.wr_id, 2u);
  EXPECT_EQ(w2.status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcAcknowledge, kNakInvReq), 1u);
}

// Receive (max_dest_rd_atomic 1): a duplicate of a READ that has meanwhile
// completed at the requester (its last response was late, not lost), and in
// the same burst the requester's next READ.
// Expect: C9_ResponderResources (IBA 9.7.5.1.4): the requester keeps at most
// max_rd_atomic <= max_dest_rd_atomic outstanding, so the new READ means the
// replayed one is finished: its replay is dropped and the resource recycled,
// not a NAK invalid request (which would fail a valid workload).
TEST_F(Responder, C9_ResponderResources_NewReadRecyclesAPendingReplay) {
  PairOptions o;
  o.timeout = 5;  // 131 us
  o.max_rd_atomic = 1;
  o.max_dest_rd_atomic = 1;
  open(o);
  fill(b->buf, 8192, 4000, 5);
  fill(b->buf, 16384, 64, 6);
  bool last_held = false;
  b->port.hook = [&](const PacketDesc& d) {
    if (d.opcode != wire::kRcReadResponseLast || last_held) return TestPort::Action::kPass;
    last_held = true;
    return TestPort::Action::kHold;
  };
  int requests = 0;
  a->port.hook = [&](const PacketDesc& d) {
    if (d.opcode != wire::kRcReadRequest) return TestPort::Action::kPass;
    ++requests;
    if (requests == 2) return TestPort::Action::kHold;  // the retry of READ 1, after the timeout
    if (requests == 3) a->port.release_held();          // READ 2: the retry goes just ahead of it
    return TestPort::Action::kPass;
  };
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 4000, 8192).ok());
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 2, 4096, 64, 16384).ok());
  ASSERT_TRUE(run_until([&] { return requests == 2; }));
  b->port.release_held();  // READ 1 completes; READ 2 leaves, with the retry ahead of it
  const Wc w1 = wait_wc(a->scq);
  const Wc w2 = wait_wc(a->scq);
  EXPECT_EQ(w1.wr_id, 1u);
  EXPECT_EQ(w1.status, WcStatus::kSuccess);
  EXPECT_EQ(w2.wr_id, 2u);
  EXPECT_EQ(w2.status, WcStatus::kSuccess);
  EXPECT_EQ(requests, 3);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 8192, 4000), 0);
  EXPECT_EQ(std::memcmp(a->buf.data() + 4096, b->buf.data() + 16384, 64), 0);
  EXPECT_EQ(b->count(Counter::read_replayed), 1u);
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcReadResponseLast), 1u);  // the stale replay never left
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcAcknowledge, kNakInvReq), 0u);
  EXPECT_FALSE(is_err(b->qp));
}

// Receive: a 200-byte SEND for a 100-byte receive WQE.
// Expect: NAK invalid request; the receive WQE completes in error; ERR.
TEST_F(Responder, NakInvalidRequest_SendLongerThanReceiveWqe) {
  open();
  ASSERT_TRUE(b->post_recv(5, 0, 100).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 200).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kRemInvReqErr);
  const Wc r = wait_wc(b->rcq);
  EXPECT_EQ(r.wr_id, 5u);
  EXPECT_EQ(r.status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(b->count(Counter::resp_local_length_error), 1u);
  EXPECT_TRUE(is_err(b->qp));
}

// Receive: SEND into a receive WQE whose L_Key is not registered.
// Expect: NAK remote operational error; WC kRemOpErr at the requester, kLocProtErr at the responder.
TEST_F(Responder, NakRemoteOperationalError_BadReceiveLkey) {
  open();
  Sge g = b->sge(0, 64);
  g.lkey ^= 0x00ff0000;
  RecvWr rw;
  rw.wr_id = 3;
  rw.sg_list = &g;
  rw.num_sge = 1;
  ASSERT_TRUE(post_recv(b->qp, &rw, nullptr).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kRemOpErr);
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kLocProtErr);
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcAcknowledge, kNakRemOp), 1u);
  EXPECT_EQ(b->count(Counter::resp_remote_operational_error), 1u);
}

// Receive: RDMA WRITE with an R_Key that fails one check each time.
// Expect: NAK remote access error (the R_Key checks of rxe's check_rkey and rdmavt's rvt_rkey_ok:
// a registered key, the QP's PD, the access flag, the bounds), WC kRemAccessErr, responder QP in ERR.
enum class BadKey { kUnknownKey, kOtherPd, kNoAccessFlag, kOutOfBounds, kLengthOverflow };

class RemoteAccess : public Pair, public ::testing::WithParamInterface<BadKey> {};

TEST_P(RemoteAccess, NakRemoteAccessError) {
  open();
  std::vector<uint8_t> other(8192);
  Sge g = a->sge(0, 64);
  SendWr wr = write_wr(0, &g, b->addr(0), b->mr->rkey).signaled();
  switch (GetParam()) {
    case BadKey::kUnknownKey: wr.rdma.rkey ^= 0x00100000; break;
    case BadKey::kOtherPd: {
      Pd* pd2 = must(alloc_pd(b->ctx.get()));
      wr.rdma.rkey = must(reg_mr(pd2, other.data(), other.size(), kAccessLocalWrite | kAccessRemoteWrite))->rkey;
      wr.rdma.remote_addr = uint64_t(uintptr_t(other.data()));
      break;
    }
    case BadKey::kNoAccessFlag:
      wr.rdma.rkey = must(reg_mr(b->pd, other.data(), other.size(), kAccessLocalWrite | kAccessRemoteRead))->rkey;
      wr.rdma.remote_addr = uint64_t(uintptr_t(other.data()));
      break;
    case BadKey::kOutOfBounds: wr.rdma.remote_addr = b->addr(b->buf.size() - 32); break;
    case BadKey::kLengthOverflow: wr.rdma.remote_addr = ~uint64_t(0) - 16; break;
  }
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kRemAccessErr);
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcAcknowledge, kNakRemAccess), 1u);
  EXPECT_EQ(b->count(Counter::resp_remote_access_errors), 1u);
  EXPECT_EQ(a->count(Counter::req_remote_access_errors), 1u);
  EXPECT_TRUE(is_err(b->qp));
}

INSTANTIATE_TEST_SUITE_P(RKey, RemoteAccess,
                         ::testing::Values(BadKey::kUnknownKey, BadKey::kOtherPd, BadKey::kNoAccessFlag,
                                           BadKey::kOutOfBounds, BadKey::kLengthOverflow));

// Receive: a READ with an R_Key of another PD. Expect: NAK remote access error too.
TEST_F(Responder, NakRemoteAccessError_ReadOtherPd) {
  open();
  std::vector<uint8_t> other(4096);
  Pd* pd2 = must(alloc_pd(b->ctx.get()));
  Mr* mr2 = must(reg_mr(pd2, other.data(), other.size(), kAccessRemoteRead));
  Sge g = a->sge(0, 64);
  SendWr wr = read_wr(0, &g, uint64_t(uintptr_t(other.data())), mr2->rkey).signaled();
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kRemAccessErr);
}

}  // namespace
}  // namespace uroce::test
