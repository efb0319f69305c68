// Memory regions (stack/mem/mr_table.cc, registered through stack/device/mr.cc):
// keys seeded and new for each registration (IBA 10.6.3.1), access flags and ranges checked.
#include <uroce/verbs.h>

#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

// Register: the same seed gives the same keys (reproducible tests); a slot
// registered again gets a different key (IBA 10.6.3.1: a stale key must not
// reach new memory); the index bits name the slot, the rest is random.
TEST_F(OneDevice, MrKeysSeededAndRerandomised) {
  open(42);
  Mr* m1 = must(reg_mr(pd, buf.data(), buf.size(), kAccessLocalWrite));
  const uint32_t k1 = m1->lkey;
  EXPECT_EQ(m1->lkey, m1->rkey);
  ASSERT_TRUE(dereg_mr(m1).ok());
  Mr* m2 = must(reg_mr(pd, buf.data(), buf.size(), kAccessLocalWrite));
  EXPECT_EQ(m2->lkey & 15, k1 & 15);  // same slot
  EXPECT_NE(m2->lkey, k1);            // new key
  ASSERT_TRUE(dereg_mr(m2).ok());
  open(42);
  EXPECT_EQ(must(reg_mr(pd, buf.data(), buf.size(), kAccessLocalWrite))->lkey, k1);
  open(43);
  EXPECT_NE(must(reg_mr(pd, buf.data(), buf.size(), kAccessLocalWrite))->lkey, k1);
}

// Register: Remote Write or Atomic without Local Write, unknown flags, a range
// that wraps. Expect: kInvalidArgument (IBA 10.6.3.1).
TEST_F(OneDevice, RegMrChecksAccessAndRange) {
  open(1);
  EXPECT_EQ(reg_mr(pd, buf.data(), buf.size(), kAccessRemoteWrite).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg_mr(pd, buf.data(), buf.size(), kAccessRemoteAtomic).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg_mr(pd, buf.data(), buf.size(), 0x100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reg_mr(pd, reinterpret_cast<void*>(~uintptr_t(0) - 10), 100, 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(reg_mr(pd, buf.data(), buf.size(), kAccessRemoteRead).ok());
}

}  // namespace
}  // namespace uroce::test
