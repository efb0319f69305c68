// Asynchronous events (set_async_event_handler; stack/transport/qp.cc, cq.cc,
// responder.cc; the SRQ limit of stack/device/srq.cc): each affiliated event of IBA 11.6.3.1 that uroce raises
// fires once, when its condition arises, naming its CQ or QP, and a
// modify_qp to ERR by the application raises no error event.
#include <vector>

#include <uroce/verbs.h>

#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

using AsyncEvents = Pair;

// The events one device raised, in order (the handler set_async_event_handler calls).
struct Events {
  static void on(const AsyncEvent& e, void* self) { static_cast<Events*>(self)->v.push_back(e); }
  void watch(Side& s) { set_async_event_handler(s.ctx.get(), on, this); }
  std::vector<AsyncEvent> v;
};

// Receive: 4 SENDs into a receive CQ of 4 entries, then 2 more. Expect: IBA
// 11.4.2.1 / 11.6.3.1: nothing while the CQ has room; at the completion that
// finds it full, one CQ error naming the CQ, then one QP fatal (Local Work
// Queue Catastrophic Error) naming the QP that could not complete; the later
// flush completions that overflow too raise nothing more.
TEST_F(AsyncEvents, CqOverrunRaisesCqErrThenQpFatalOnce) {
  PairOptions o;
  o.cqe = 4;
  o.sq_sig_all = false;  // a's send CQ stays empty
  open(o);
  Events ev;
  ev.watch(*b);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(b->post_recv(i, size_t(i) * 64, 64).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(post(WrOpcode::kSend, i, 0, 64, 0, 0).ok());
  run_for(100'000);
  EXPECT_TRUE(ev.v.empty());
  for (int i = 4; i < 6; ++i) ASSERT_TRUE(post(WrOpcode::kSend, i, 0, 64, 0, 0).ok());
  run_for(100'000);
  ASSERT_EQ(ev.v.size(), 2u);
  EXPECT_EQ(ev.v[0].type, AsyncEventType::kCqErr);
  EXPECT_EQ(ev.v[0].cq, b->rcq);
  EXPECT_EQ(ev.v[0].qp, nullptr);
  EXPECT_EQ(ev.v[1].type, AsyncEventType::kQpFatal);
  EXPECT_EQ(ev.v[1].qp, b->qp);
  EXPECT_TRUE(is_err(b->qp));
  EXPECT_EQ(b->count(Counter::async_events), 2u);
}

// Receive: RDMA WRITE with an R_Key b never issued. Expect: IBA 11.6.3.1 (Local
// Access Violation Work Queue Error, for a request no receive WQE reports):
// b raises one QP access error naming its QP; a, whose completion reports
// the NAK (kRemAccessErr), raises nothing.
TEST_F(AsyncEvents, RkeyViolationRaisesQpAccessErr) {
  open();
  Events eva, evb;
  eva.watch(*a);
  evb.watch(*b);
  Sge g = a->sge(0, 64);
  SendWr wr;
  wr.sg_list = &g;
  wr.num_sge = 1;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.send_flags = kSendSignaled;
  wr.rdma.remote_addr = b->addr(0);
  wr.rdma.rkey = b->mr->rkey ^ 0x100;
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kRemAccessErr);
  run_for(100'000);
  ASSERT_EQ(evb.v.size(), 1u);
  EXPECT_EQ(evb.v[0].type, AsyncEventType::kQpAccessErr);
  EXPECT_EQ(evb.v[0].qp, b->qp);
  EXPECT_TRUE(eva.v.empty());
}

// Receive: a misaligned FetchAdd. Expect: the same access error (ConnectX
// reports misaligned atomics as access violations), once.
TEST_F(AsyncEvents, MisalignedAtomicRaisesQpAccessErr) {
  open();
  Events ev;
  ev.watch(*b);
  ASSERT_TRUE(post(WrOpcode::kAtomicFetchAndAdd, 1, 0, 8, 132).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kRemInvReqErr);
  run_for(100'000);
  ASSERT_EQ(ev.v.size(), 1u);
  EXPECT_EQ(ev.v[0].type, AsyncEventType::kQpAccessErr);
}

// Receive: READ on a QP without Remote Read (an opcode the QP does not
// support). Expect: IBA 11.6.3.1: Invalid Request Local Work Queue Error,
// once, naming b's QP.
TEST_F(AsyncEvents, UnsupportedOpcodeRaisesQpReqErr) {
  PairOptions o;
  o.access = kAccessRemoteWrite;
  open(o);
  Events ev;
  ev.watch(*b);
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 64, 0).ok());
  EXPECT_EQ(wait_wc(a->scq).status, WcStatus::kRemInvReqErr);
  run_for(100'000);
  ASSERT_EQ(ev.v.size(), 1u);
  EXPECT_EQ(ev.v[0].type, AsyncEventType::kQpReqErr);
  EXPECT_EQ(ev.v[0].qp, b->qp);
}

// Traffic, then the application moves both QPs to ERR with receives posted.
// Expect: the flushes are completions, not errors: no event on either side
// (IBA 11.6.3.1 reports errors the consumer did not cause).
TEST_F(AsyncEvents, ModifyToErrRaisesNothing) {
  open();
  Events eva, evb;
  eva.watch(*a);
  evb.watch(*b);
  ASSERT_TRUE(b->post_recv(1, 0, 64).ok());
  ASSERT_TRUE(b->post_recv(2, 64, 64).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kSuccess);
  QpAttr at;
  at.qp_state = QpState::kErr;
  ASSERT_TRUE(modify_qp(a->qp, at, kQpState).ok());
  ASSERT_TRUE(modify_qp(b->qp, at, kQpState).ok());
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kWrFlushErr);
  run_for(100'000);
  EXPECT_TRUE(eva.v.empty());
  EXPECT_TRUE(evb.v.empty());
  EXPECT_EQ(a->count(Counter::async_events) + b->count(Counter::async_events), 0u);
}

// b's QP on an SRQ, moved to ERR by the application, then to ERR again.
// Expect: IBA 10.2.9.5: one Last WQE Reached naming the QP (it takes no
// more WQEs from the SRQ, which the consumer waits for before destroying
// it), and no error event.
TEST_F(AsyncEvents, SrqQpToErrRaisesLastWqeReachedOnce) {
  PairOptions o;
  o.b_srq = true;
  open(o);
  Events ev;
  ev.watch(*b);
  ASSERT_TRUE(b->post_recv(1, 0, 64).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kSuccess);
  EXPECT_TRUE(ev.v.empty());
  QpAttr at;
  at.qp_state = QpState::kErr;
  ASSERT_TRUE(modify_qp(b->qp, at, kQpState).ok());
  ASSERT_EQ(ev.v.size(), 1u);
  EXPECT_EQ(ev.v[0].type, AsyncEventType::kQpLastWqeReached);
  EXPECT_EQ(ev.v[0].qp, b->qp);
  ASSERT_TRUE(modify_qp(b->qp, at, kQpState).ok());
  run_for(100'000);
  EXPECT_EQ(ev.v.size(), 1u);
}

// b's SRQ with 4 WQEs, its limit armed at 3; three SENDs. Expect: IBA
// 10.2.9.3: no event while 3 are left, one SRQ Limit Reached naming the SRQ
// when the second leaves 2, none for the third (the limit is disarmed,
// query_srq reads 0); armed above max_wr: kInvalidArgument.
TEST_F(AsyncEvents, SrqLimitRaisesOncePerArming) {
  PairOptions o;
  o.b_srq = true;
  open(o);
  Events ev;
  ev.watch(*b);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(b->post_recv(i, size_t(i) * 64, 64).ok());
  EXPECT_EQ(modify_srq(b->srq, o.max_recv_wr + 1).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(modify_srq(b->srq, 3).ok());
  SrqInitAttr q;
  ASSERT_TRUE(query_srq(b->srq, &q).ok());
  EXPECT_EQ(q.srq_limit, 3u);
  ASSERT_TRUE(post(WrOpcode::kSend, 0, 0, 64).ok());
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kSuccess);
  EXPECT_TRUE(ev.v.empty());
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kSuccess);
  ASSERT_EQ(ev.v.size(), 1u);
  EXPECT_EQ(ev.v[0].type, AsyncEventType::kSrqLimitReached);
  EXPECT_EQ(ev.v[0].srq, b->srq);
  EXPECT_EQ(ev.v[0].qp, nullptr);
  ASSERT_TRUE(post(WrOpcode::kSend, 2, 0, 64).ok());
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kSuccess);
  EXPECT_EQ(ev.v.size(), 1u);
  ASSERT_TRUE(query_srq(b->srq, &q).ok());
  EXPECT_EQ(q.srq_limit, 0u);
}

// b's QP left in RTR; two SENDs, then b to RTS and a third. Expect: IBA
// 11.6.3.1: Communication Established once, at the first request received in
// RTR (which is delivered as usual), not again in RTR nor in RTS.
TEST_F(AsyncEvents, FirstRequestInRtrRaisesCommEstOnce) {
  PairOptions o;
  o.b_stops_in_rtr = true;
  open(o);
  Events ev;
  ev.watch(*b);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(b->post_recv(i, size_t(i) * 64, 64).ok());
  run_for(100'000);
  EXPECT_TRUE(ev.v.empty());
  ASSERT_TRUE(post(WrOpcode::kSend, 0, 0, 64).ok());
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kSuccess);
  ASSERT_EQ(ev.v.size(), 1u);
  EXPECT_EQ(ev.v[0].type, AsyncEventType::kCommEst);
  EXPECT_EQ(ev.v[0].qp, b->qp);
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kSuccess);
  QpAttr at;
  at.qp_state = QpState::kRts;
  at.sq_psn = o.b_sq_psn;
  at.timeout = o.timeout;
  at.retry_cnt = o.retry_cnt;
  at.rnr_retry = o.rnr_retry;
  at.max_rd_atomic = o.max_rd_atomic;
  ASSERT_TRUE(modify_qp(b->qp, at, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic)
                  .ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 2, 0, 64).ok());
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kSuccess);
  EXPECT_EQ(ev.v.size(), 1u);
}

}  // namespace
}  // namespace uroce::test
