// Completion queues (stack/device/cq.cc, stack/transport/cq.cc): an overrun moves
// the QP to ERR (IBA 11.4.2.1); completion events fire as armed (IBA 11.4.2.2).
#include <uroce/verbs.h>

#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

using CompletionQueue = Pair;

// Receive: 6 SENDs into a receive CQ of 4 entries. Expect: IBA 11.4.2.1: the
// overflow is counted and the QP goes to ERR.
TEST_F(CompletionQueue, OverflowMovesQpToErr) {
  PairOptions o;
  o.cqe = 4;
  open(o);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(b->post_recv(i, size_t(i) * 64, 64).ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(post(WrOpcode::kSend, i, 0, 64, 0, 0).ok());
  run_for(100'000);
  EXPECT_GE(b->count(Counter::cq_overflow), 1u);
  QpAttr at;
  ASSERT_TRUE(query_qp(b->qp, &at, nullptr).ok());
  EXPECT_EQ(at.qp_state, QpState::kErr);
}

// Counts the events of one CQ (the handler set_cq_event_handler calls).
struct EventCount {
  static void on(Cq*, void* self) { ++static_cast<EventCount*>(self)->n; }
  int n = 0;
};

// Send CQ armed for the next completion, three SENDs. Expect: one event, on
// the first completion (an arming is used up), none for a CQ left unarmed.
TEST_F(CompletionQueue, NextArmingRaisesOneEvent) {
  open();
  EventCount ev;
  set_cq_event_handler(a->scq, EventCount::on, &ev);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(b->post_recv(i, size_t(i) * 64, 64).ok());
  ASSERT_TRUE(req_notify_cq(a->scq, false).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 0, 0, 64).ok());
  (void)wait_wc(a->scq);
  EXPECT_EQ(ev.n, 1);
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 2, 0, 64).ok());
  EXPECT_EQ(drain(a->scq).size(), 2u);
  EXPECT_EQ(ev.n, 1);
  ASSERT_TRUE(req_notify_cq(a->scq, false).ok());  // armed again: the next one fires
  ASSERT_TRUE(b->post_recv(3, 0, 64).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 3, 0, 64).ok());
  (void)wait_wc(a->scq);
  EXPECT_EQ(ev.n, 2);
  EXPECT_EQ(a->count(Counter::cq_events), 2u);
}

// Receive CQ armed solicited-only; a SEND without SE, then one with SE
// (kSendSolicited). Expect: IBA 11.4.2.2: only the solicited receive raises
// the event; the first completion is still in the CQ.
TEST_F(CompletionQueue, SolicitedArmingWaitsForTheSeBit) {
  open();
  EventCount ev;
  set_cq_event_handler(b->rcq, EventCount::on, &ev);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(b->post_recv(i, size_t(i) * 64, 64).ok());
  ASSERT_TRUE(req_notify_cq(b->rcq, true).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 0, 0, 64).ok());
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kSuccess);
  EXPECT_EQ(ev.n, 0);
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 64, 0, kSendSignaled | kSendSolicited).ok());
  (void)wait_wc(b->rcq);
  EXPECT_EQ(ev.n, 1);
}

// Receive CQ armed solicited-only, then the QP moved to ERR with receives
// posted. Expect: IBA 11.4.2.2: an unsuccessful completion (the flush)
// raises the event too.
TEST_F(CompletionQueue, SolicitedArmingFiresOnAnError) {
  open();
  EventCount ev;
  set_cq_event_handler(b->rcq, EventCount::on, &ev);
  ASSERT_TRUE(b->post_recv(0, 0, 64).ok());
  ASSERT_TRUE(req_notify_cq(b->rcq, true).ok());
  QpAttr at;
  at.qp_state = QpState::kErr;
  ASSERT_TRUE(modify_qp(b->qp, at, kQpState).ok());
  EXPECT_EQ(wait_wc(b->rcq).status, WcStatus::kWrFlushErr);
  EXPECT_EQ(ev.n, 1);
}

}  // namespace
}  // namespace uroce::test
