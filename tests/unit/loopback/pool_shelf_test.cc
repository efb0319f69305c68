// Tests for the frame pools a fabric leaves for the next one
// (drivers/loopback/pool_shelf.h): a pool comes back whole or not at all,
// the shelf is bounded, it never makes a pool fail that fits without it, and
// a fabric built after another runs on the first one's pools.

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "drivers/loopback/pool_shelf.h"
#include "tests/unit/eal_env.h"
#include "tests/unit/loopback/fabric_traffic.h"

namespace uroce::loopback {
namespace {

using namespace testing_traffic;

// Each test asks for pool sizes no other test of this program uses, so a pool
// another test left on the shelf is never the one it gets; the tests that
// count the kept pools or need room on the shelf empty it first.

rte_mempool* take(const std::string& name, uint32_t n) {
  Result<rte_mempool*> mp = take_frame_pool(name, n);
  EXPECT_TRUE(mp.ok()) << mp.status().message();
  return mp.ok() ? *mp : nullptr;
}

TEST(PoolShelf, AWholePoolIsKeptAndTakenAgain) {
  rte_mempool* first = take("shelf_whole_a", 101);
  ASSERT_NE(first, nullptr);
  give_back_frame_pool(first);
  EXPECT_EQ(rte_mempool_lookup("shelf_whole_a"), first);  // kept, not freed
  rte_mempool* again = take("shelf_whole_b", 101);
  EXPECT_EQ(again, first);
  EXPECT_EQ(rte_mempool_lookup("shelf_whole_b"), nullptr);  // no second pool made
  EXPECT_EQ(rte_mempool_avail_count(again), 101u);
  give_back_frame_pool(again);
}

TEST(PoolShelf, APoolWithAFrameOutIsFreed) {
  rte_mempool* mp = take("shelf_frame_out", 102);
  ASSERT_NE(mp, nullptr);
  rte_mbuf* m = rte_pktmbuf_alloc(mp);
  ASSERT_NE(m, nullptr);
  give_back_frame_pool(mp);  // m now dangles: a device that leaked it
  EXPECT_EQ(rte_mempool_lookup("shelf_frame_out"), nullptr);
  rte_mempool* next = take("shelf_frame_out_next", 102);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(rte_mempool_lookup("shelf_frame_out_next"), next);  // made new
  EXPECT_EQ(rte_mempool_avail_count(next), 102u);
  give_back_frame_pool(next);
}

TEST(PoolShelf, KeepsAtMostKKeptPools) {
  free_kept_frame_pools();
  ASSERT_EQ(kept_frame_pools(), 0u);
  std::vector<rte_mempool*> pools;
  for (uint32_t i = 0; i <= kKeptPools; ++i) pools.push_back(take("shelf_cap_" + std::to_string(i), 200 + i));
  for (rte_mempool* mp : pools) give_back_frame_pool(mp);
  EXPECT_EQ(kept_frame_pools(), kKeptPools);
  for (uint32_t i = 0; i < kKeptPools; ++i) EXPECT_NE(rte_mempool_lookup(("shelf_cap_" + std::to_string(i)).c_str()), nullptr);
  EXPECT_EQ(rte_mempool_lookup(("shelf_cap_" + std::to_string(kKeptPools)).c_str()), nullptr);  // found it full
  free_kept_frame_pools();
  EXPECT_EQ(kept_frame_pools(), 0u);
  EXPECT_EQ(rte_mempool_lookup("shelf_cap_0"), nullptr);
}

TEST(PoolShelf, KeptPoolsNeverMakeAPoolFailThatFitsWithoutThem) {
  // EAL has 512 MB (default_eal_args): 8 pools of 8,000 frames (about 37 MB
  // each) kept, then one of 50,000 (about 235 MB) fits only once they are freed.
  free_kept_frame_pools();
  std::vector<rte_mempool*> pools;
  for (uint32_t i = 0; i < 8; ++i) pools.push_back(take("shelf_big_" + std::to_string(i), 8000 + i));
  for (rte_mempool* mp : pools) give_back_frame_pool(mp);
  ASSERT_EQ(kept_frame_pools(), 8u);
  rte_mempool* huge = take("shelf_huge", 50'000);
  ASSERT_NE(huge, nullptr);
  EXPECT_EQ(rte_mempool_lookup("shelf_big_0"), nullptr);  // freed to make room
  EXPECT_EQ(kept_frame_pools(), 0u);
  rte_mempool_free(huge);  // not kept: 235 MB would crowd the other tests
}

TEST(PoolShelf, TheNextFabricRunsOnTheLastOnesPools) {
  free_kept_frame_pools();  // room for this fabric's pools, whatever earlier tests left
  PortConfig pc;
  pc.pool_size = 303;
  rte_mempool* before = nullptr;
  {
    auto f = make_fabric();
    Port& a = add(*f, kMacA, pc);
    before = a.tx_pool();
    rte_mbuf* m = make_frame(a.tx_pool(), kMacA, kMacB, 1, 1000);
    ASSERT_EQ(a.tx_burst(&m, 1), 1u);  // in flight when the fabric goes: freed by it, then kept
  }
  auto f = make_fabric();
  Port& a = add(*f, kMacA, pc);
  EXPECT_EQ(a.tx_pool(), before);
  EXPECT_EQ(rte_mempool_avail_count(a.tx_pool()), 303u);
}

}  // namespace
}  // namespace uroce::loopback
