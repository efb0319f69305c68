// Protection domains (stack/device/pd.cc, IBA 10.2.3): the objects in a PD, and
// the QPs on a CQ, keep it from being destroyed.
#include <uroce/verbs.h>

#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

// Destroy: a PD with an MR, a CQ with a QP. Expect: kBusy until they are gone.
TEST_F(OneDevice, ReferencesPreventDestroy) {
  open(1);
  Mr* mr = must(reg_mr(pd, buf.data(), buf.size(), 0));
  EXPECT_EQ(dealloc_pd(pd).code(), StatusCode::kBusy);
  ASSERT_TRUE(dereg_mr(mr).ok());
  Cq* cq = must(create_cq(ctx.get(), 8));
  QpInitAttr ia;
  ia.send_cq = ia.recv_cq = cq;
  Qp* qp = must(create_qp(pd, ia));
  EXPECT_EQ(destroy_cq(cq).code(), StatusCode::kBusy);
  EXPECT_EQ(dealloc_pd(pd).code(), StatusCode::kBusy);
  ASSERT_TRUE(destroy_qp(qp).ok());
  EXPECT_TRUE(destroy_cq(cq).ok());
  EXPECT_TRUE(dealloc_pd(pd).ok());
}

}  // namespace
}  // namespace uroce::test
