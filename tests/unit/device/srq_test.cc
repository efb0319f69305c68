// Shared receive queues (stack/device/srq.cc, IBA 10.2.9): two QPs take their
// receive WQEs from one SRQ, in order.
#include <cstring>

#include <uroce/verbs.h>

#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

using SharedReceiveQueue = Pair;

// Receive: SENDs to two QPs that share one SRQ. Expect: both take WQEs from it, in order.
TEST_F(SharedReceiveQueue, SharedByTwoQps) {
  PairOptions o;
  o.b_srq = true;
  open(o);
  Qp *qa2 = nullptr, *qb2 = nullptr;
  make_qps(o, a->pd, b->pd, &qa2, &qb2);
  EXPECT_EQ(qb2->srq, b->srq);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(b->post_recv(100 + i, size_t(i) * 256, 256).ok());
  RecvWr rw;
  EXPECT_EQ(post_recv(b->qp, &rw, nullptr).code(), StatusCode::kInvalidArgument);  // post to the SRQ instead
  fill(a->buf, 0, 128, 7);
  ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 100).ok());
  ASSERT_TRUE(post(WrOpcode::kSend, 2, 0, 100, 0, kSendSignaled, qa2).ok());
  const Wc r1 = wait_wc(b->rcq);
  const Wc r2 = wait_wc(b->rcq);
  EXPECT_EQ(r1.wr_id, 100u);
  EXPECT_EQ(r2.wr_id, 101u);
  EXPECT_NE(r1.qp_num, r2.qp_num);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 256, 100), 0);
  EXPECT_EQ(destroy_srq(b->srq).code(), StatusCode::kBusy);
}

}  // namespace
}  // namespace uroce::test
