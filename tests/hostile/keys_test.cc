// Keys that cannot be guessed (IBA 10.6.3.1: "the R_Key ... should be
// difficult to guess"; hardware NICs put random key bits beside the table
// index, as stack/mem/mr_table.h does). These tests check the key bits are
// random, are drawn again on every registration, differ between devices, and
// that a peer holding one valid R_Key cannot reach memory with a neighbour of
// it: each forged key gets NAK remote access error (IBA 9.7.5.2) and a count.
#include <bit>
#include <cstring>
#include <set>

#include "stack/wire/aeth.h"
#include "tests/hostile/hostile.h"

namespace uroce::hostile {
namespace {

using wire::PacketDesc;
using Keys = Hostile;

// The table has DeviceConfig::max_mr = 4096 slots: 12 index bits; the rest
// of the 32-bit key is random.
constexpr uint32_t kIndexBits = 12;
constexpr uint32_t kIndexMask = (1u << kIndexBits) - 1;

// Register, deregister and register again 2,000 times in one slot.
// Expect: the slot (index bits) stays the same, every key differs from the
// one before it, nearly every key is new (20 random bits: a birthday
// collision among 2,000 draws is likely once or twice, never dozens), and
// each of the 20 key bits is set in 40-60 % of the keys.
TEST_F(Keys, KeyBitsAreRandomAndRedrawnOnReregistration) {
  GuardedBuf b(4096);
  std::set<uint32_t> seen;
  uint32_t prev = 0;
  uint32_t slot = UINT32_MAX;
  int ones[32] = {};
  constexpr int kN = 2000;
  for (int i = 0; i < kN; ++i) {
    Mr* mr = reg_mr(vpd_, b.data(), b.size(), kAccessLocalWrite | kAccessRemoteWrite).value();
    ASSERT_EQ(mr->lkey, mr->rkey);
    if (slot == UINT32_MAX) slot = mr->rkey & kIndexMask;
    ASSERT_EQ(mr->rkey & kIndexMask, slot) << "the freed slot is reused";
    ASSERT_NE(mr->rkey, prev) << "re-registration must change the key";
    prev = mr->rkey;
    seen.insert(mr->rkey);
    for (uint32_t bit = kIndexBits; bit < 32; ++bit) ones[bit] += (mr->rkey >> bit) & 1;
    ASSERT_TRUE(dereg_mr(mr).ok());
  }
  EXPECT_GE(seen.size(), size_t(kN - 20));
  for (uint32_t bit = kIndexBits; bit < 32; ++bit) {
    EXPECT_GT(ones[bit], kN * 4 / 10) << "key bit " << bit;
    EXPECT_LT(ones[bit], kN * 6 / 10) << "key bit " << bit;
  }
}

// Two devices opened with the default key_seed (0: taken from the TSC).
// Expect: the same sequence of registrations gives different keys on each,
// so knowing one device's keys says nothing about another's.
TEST_F(Keys, DevicesDrawDifferentKeys) {
  loopback::PortConfig pc;
  auto* p1 = fabric_->add_port(MacAddr{{0x02, 0, 0, 0, 1, 1}}, pc).value();
  auto* p2 = fabric_->add_port(MacAddr{{0x02, 0, 0, 0, 1, 2}}, pc).value();
  DeviceConfig c;
  c.max_qp = 4;
  auto d1 = open_device(*p1, c).value();
  auto d2 = open_device(*p2, c).value();
  Pd* pd1 = alloc_pd(d1.get()).value();
  Pd* pd2 = alloc_pd(d2.get()).value();
  GuardedBuf b(4096);
  int same = 0;
  for (int i = 0; i < 16; ++i) {
    const uint32_t k1 = reg_mr(pd1, b.data(), b.size(), kAccessLocalWrite).value()->rkey;
    const uint32_t k2 = reg_mr(pd2, b.data(), b.size(), kAccessLocalWrite).value()->rkey;
    ASSERT_EQ(k1 & kIndexMask, k2 & kIndexMask);
    same += k1 == k2;
  }
  EXPECT_EQ(same, 0);
}

// Receive: RDMA WRITEs, each on a fresh connection, with keys forged from
// the valid R_Key of rw_: rkey + 1 and rkey - 1 (neighbouring slots, which
// hold regions of their own), the same slot with each one of the 20 key
// bits flipped, and the key rw_'s slot had before a deregistration and
// re-registration.
// Expect: every one is refused with NAK remote access error and counted;
// the regions stay unchanged; the genuine key still works afterwards.
TEST_F(Keys, ForgedNeighbourKeysRefused) {
  // A region registered, deregistered and registered again in the same slot.
  GuardedBuf again(4096);
  again.fill(12);
  Mr* first = reg_mr(vpd_, again.data(), again.size(), kAllRemote).value();
  const uint32_t stale = first->rkey;
  ASSERT_TRUE(dereg_mr(first).ok());
  Mr* second = reg_mr(vpd_, again.data(), again.size(), kAllRemote).value();
  ASSERT_EQ(second->rkey & kIndexMask, stale & kIndexMask);
  ASSERT_NE(second->rkey, stale);

  struct Forged {
    uint32_t key;
    uint64_t va;
    const char* what;
  };
  const uint32_t k = rw_mr_->rkey;
  std::vector<Forged> forged = {{k + 1, rw_.addr(0), "rkey + 1"}, {k - 1, rw_.addr(0), "rkey - 1"},
                                {stale, again.addr(0), "key of the deregistered registration"}};
  for (uint32_t bit = kIndexBits; bit < 32; ++bit) forged.push_back({k ^ (1u << bit), rw_.addr(0), "key bit flipped"});
  // The neighbours are real regions: rkey +- 1 lands in a slot that is in use.
  ASSERT_TRUE(((k + 1) & kIndexMask) == (ro_mr_->rkey & kIndexMask) ||
              ((k - 1) & kIndexMask) == (ro_mr_->rkey & kIndexMask) ||
              ((k + 1) & kIndexMask) == (local_mr_->rkey & kIndexMask) ||
              ((k - 1) & kIndexMask) == (local_mr_->rkey & kIndexMask))
      << "expected neighbouring slots in use";

  ASSERT_TRUE(honest_round(0));
  int round = 1;
  for (const Forged& f : forged) {
    fresh_vx();
    PacketDesc d = req(wire::kRcWriteOnly);
    d.reth_va = f.va;
    d.reth_rkey = f.key;
    d.reth_len = 32;
    const uint64_t c0 = count(Counter::resp_remote_access_errors);
    send(d, std::vector<uint8_t>(32, 0xee));
    auto rs = replies(50'000);
    ASSERT_EQ(rs.size(), 1u) << f.what;
    EXPECT_EQ(nak_code(rs[0]), int(wire::NakCode::kRemoteAccessError)) << f.what << " key " << std::hex << f.key;
    EXPECT_EQ(count(Counter::resp_remote_access_errors) - c0, 1u) << f.what;
    ASSERT_TRUE(honest_round(round++)) << f.what;
  }
  EXPECT_TRUE(rw_.unchanged() && ro_.unchanged() && local_.unchanged() && again.unchanged());
  EXPECT_TRUE(again.canaries_intact());

  // The genuine key: accepted and written.
  fresh_vx();
  PacketDesc d = req(wire::kRcWriteOnly);
  d.reth_va = rw_.addr(0);
  d.reth_rkey = k;
  d.reth_len = 32;
  send(d, std::vector<uint8_t>(32, 0x42));
  auto rs = replies(50'000);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(nak_code(rs[0]), -1);
  EXPECT_EQ(rw_.data()[31], 0x42);
  ASSERT_TRUE(dereg_mr(second).ok());
}

}  // namespace
}  // namespace uroce::hostile
