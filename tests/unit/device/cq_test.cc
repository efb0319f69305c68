// Completion queues (stack/device/cq.cc, stack/transport/cq.cc): an overrun moves
// the QP to ERR (IBA 11.4.2.1).
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

}  // namespace
}  // namespace uroce::test
