// init_eal_unpinned: the calling thread keeps its CPUs across rte_eal_init,
// which pins it to the main lcore.
#include <pthread.h>
#include <sched.h>

#include <gtest/gtest.h>

#include <uroce/eal.h>

namespace uroce {
namespace {

TEST(InitEalUnpinned, TheCallingThreadKeepsItsCpus) {
  cpu_set_t before;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof before, &before), 0);
  if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "one CPU: EAL's pinning would change nothing";
  const Status st = init_eal_unpinned();
  ASSERT_TRUE(st.ok()) << st.message();
  cpu_set_t after;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after)) << CPU_COUNT(&before) << " CPUs before, " << CPU_COUNT(&after) << " after";
}

}  // namespace
}  // namespace uroce
