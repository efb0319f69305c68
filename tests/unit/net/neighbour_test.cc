// Tests stack/net/neighbour.cc (pure, fake clock): resolution states,
// solicitation backoff, timeout, aging and re-confirmation, learning rules,
// eviction; and the DSCP/ECN policy of stack/net/qos.h.
#include "stack/net/neighbour.h"

#include <gtest/gtest.h>

#include <vector>

#include "stack/net/gid_table.h"
#include "stack/net/qos.h"

namespace uroce::net {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr MacAddr kPeer{{0x02, 0x00, 0x00, 0x00, 0x80, 0x02}};

struct Fixture {
  NetCounters c;
  NeighbourTable t{NeighConfig{}, c};
  std::vector<uint64_t> sent;  // times solicitations went out
  void poll(uint64_t now) {
    t.poll_due(now, [&](const NeighEntry&) {
      sent.push_back(now);
      return true;
    });
  }
};

TEST(Neighbour, ResolveQueuesSolicitationThenResolvesOnReply) {
  Fixture f;
  const Gid ip = ipv4_gid(10, 80, 0, 1);
  // Receive: nothing yet. Expect: pending, and the first request at the next poll.
  EXPECT_EQ(f.t.resolve(ip, kNoVlan, 0, 0).status, ResolveStatus::kPending);
  f.poll(0);
  EXPECT_EQ(f.sent, (std::vector<uint64_t>{0}));
  EXPECT_EQ(f.t.resolve(ip, kNoVlan, 0, 1 * kMs).status, ResolveStatus::kPending);
  // Receive: the solicited reply. Expect: resolved, reachable, no more requests.
  f.t.learn(ip, kNoVlan, kPeer, true, false, 0, 2 * kMs);
  const Resolution r = f.t.resolve(ip, kNoVlan, 0, 3 * kMs);
  EXPECT_EQ(r.status, ResolveStatus::kResolved);
  EXPECT_EQ(r.mac, kPeer);
  EXPECT_EQ(f.t.lookup(ip, kNoVlan)->state, NeighState::kReachable);
  f.poll(10'000 * kMs);
  EXPECT_EQ(f.sent.size(), 1u);
  EXPECT_EQ(f.c.get(NetCounter::neigh_resolve_started), 1u);
  EXPECT_EQ(f.c.get(NetCounter::neigh_resolved), 1u);
}

TEST(Neighbour, BackoffDoublesThenTimesOut) {
  Fixture f;
  const Gid ip = ipv4_gid(10, 80, 0, 9);
  f.t.resolve(ip, kNoVlan, 0, 0);
  for (uint64_t t = 0; t <= 5000 * kMs; t += kMs) f.poll(t);
  // 250 ms doubling, 4 tries: 0, 250, 750, 1750; failed at 3750 ms.
  EXPECT_EQ(f.sent, (std::vector<uint64_t>{0, 250 * kMs, 750 * kMs, 1750 * kMs}));
  EXPECT_EQ(f.c.get(NetCounter::neigh_retransmit), 3u);
  EXPECT_EQ(f.c.get(NetCounter::neigh_resolve_timeout), 1u);
  EXPECT_EQ(f.t.lookup(ip, kNoVlan)->state, NeighState::kFailed);
  EXPECT_EQ(f.t.lookup(ip, kNoVlan)->updated_ns, 3750 * kMs);
  // Held failed for failed_hold_ns, then a new round starts.
  EXPECT_EQ(f.t.resolve(ip, kNoVlan, 0, 4000 * kMs).status, ResolveStatus::kFailed);
  EXPECT_EQ(f.t.resolve(ip, kNoVlan, 0, 4750 * kMs).status, ResolveStatus::kPending);
}

TEST(Neighbour, SendFailureRetriesNextPollWithoutUsingATry) {
  Fixture f;
  const Gid ip = ipv4_gid(10, 80, 0, 7);
  f.t.resolve(ip, kNoVlan, 0, 0);
  int calls = 0;
  f.t.poll_due(0, [&](const NeighEntry&) { return ++calls > 1; });  // burst full
  EXPECT_EQ(f.t.lookup(ip, kNoVlan)->solicits, 0);
  f.t.poll_due(1, [&](const NeighEntry&) { return ++calls > 1; });
  EXPECT_EQ(f.t.lookup(ip, kNoVlan)->solicits, 1);
}

TEST(Neighbour, AgedEntryIsReconfirmedWhileStillUsed) {
  Fixture f;
  const Gid ip = ipv4_gid(10, 80, 0, 1);
  f.t.resolve(ip, kNoVlan, 0, 0);
  f.poll(0);
  f.t.learn(ip, kNoVlan, kPeer, true, false, 0, 1 * kMs);
  const uint64_t later = 1 * kMs + NeighConfig{}.reachable_ns + 1;
  // Expect: the MAC is still returned, and a probe goes out.
  const Resolution r = f.t.resolve(ip, kNoVlan, 0, later);
  EXPECT_EQ(r.status, ResolveStatus::kResolved);
  EXPECT_EQ(f.t.lookup(ip, kNoVlan)->state, NeighState::kProbe);
  f.poll(later);
  EXPECT_EQ(f.sent.size(), 2u);
  // No answer to the probes: the entry fails (the peer is gone).
  for (uint64_t t = later; t <= later + 5000 * kMs; t += 10 * kMs) f.poll(t);
  EXPECT_EQ(f.t.lookup(ip, kNoVlan)->state, NeighState::kFailed);
}

TEST(Neighbour, LearningRules) {
  Fixture f;
  const Gid a = ipv4_gid(10, 80, 0, 1);
  // RFC 826: an unsolicited announcement does not create an entry...
  f.t.learn(a, kNoVlan, kPeer, false, false, 0, 0);
  EXPECT_EQ(f.t.lookup(a, kNoVlan), nullptr);
  // ...but a request to us does (STALE, RFC 4861 7.2.3).
  f.t.learn(a, kNoVlan, kPeer, false, true, 0, 0);
  ASSERT_NE(f.t.lookup(a, kNoVlan), nullptr);
  EXPECT_EQ(f.t.lookup(a, kNoVlan)->state, NeighState::kStale);
  // A stale entry is usable and gets confirmed.
  EXPECT_EQ(f.t.resolve(a, kNoVlan, 0, 1).status, ResolveStatus::kResolved);
  EXPECT_EQ(f.t.lookup(a, kNoVlan)->state, NeighState::kProbe);
  // VLANs are separate keys.
  EXPECT_EQ(f.t.lookup(a, 100), nullptr);
  // A changed MAC without confirmation is recorded as stale.
  f.t.learn(a, kNoVlan, kPeer, true, false, 0, 2);
  const MacAddr other{{2, 0, 0, 0, 0, 0x77}};
  f.t.learn(a, kNoVlan, other, false, false, 0, 3);
  EXPECT_EQ(f.t.lookup(a, kNoVlan)->state, NeighState::kStale);
  EXPECT_EQ(f.t.lookup(a, kNoVlan)->mac, other);
}

TEST(Neighbour, EvictionNeverDropsPendingEntries) {
  NetCounters c;
  NeighConfig cfg;
  cfg.capacity = 8;  // one set of kWays
  NeighbourTable t(cfg, c);
  for (uint8_t i = 0; i < 8; ++i) EXPECT_EQ(t.resolve(ipv4_gid(10, 0, 0, i), kNoVlan, 0, 0).status, ResolveStatus::kPending);
  // Every slot resolving: no room.
  EXPECT_EQ(t.resolve(ipv4_gid(10, 0, 1, 0), kNoVlan, 0, 0).status, ResolveStatus::kFailed);
  EXPECT_EQ(c.get(NetCounter::neigh_table_full), 1u);
  // Confirm two; the older one is evicted for a newcomer.
  t.learn(ipv4_gid(10, 0, 0, 3), kNoVlan, kPeer, true, false, 0, 10);
  t.learn(ipv4_gid(10, 0, 0, 5), kNoVlan, kPeer, true, false, 0, 5);
  EXPECT_EQ(t.resolve(ipv4_gid(10, 0, 1, 0), kNoVlan, 0, 20).status, ResolveStatus::kPending);
  EXPECT_EQ(c.get(NetCounter::neigh_evicted), 1u);
  EXPECT_EQ(t.lookup(ipv4_gid(10, 0, 0, 5), kNoVlan), nullptr);
  EXPECT_NE(t.lookup(ipv4_gid(10, 0, 0, 3), kNoVlan), nullptr);
}

TEST(Qos, TrafficClassPolicy) {
  TrafficClassConfig c;  // DSCP 26, ECT(0)
  EXPECT_EQ(roce_traffic_class(c, 0), 26 << 2 | 2);          // AH asks nothing: device default
  EXPECT_EQ(roce_traffic_class(c, 46 << 2), 46 << 2 | 2);    // AH DSCP (EF) kept, device ECN
  EXPECT_EQ(roce_traffic_class(c, 46 << 2 | 1), 46 << 2 | 1);  // AH ECT(1) kept
  EXPECT_EQ(roce_traffic_class(c, 46 << 2 | 3), 46 << 2 | 2);  // CE is never originated
  c.force_dscp = true;
  EXPECT_EQ(roce_traffic_class(c, 46 << 2), 26 << 2 | 2);
  c.ecn = Ecn::kNotEct;
  EXPECT_EQ(roce_traffic_class(c, 0), 26 << 2);
  EXPECT_EQ(cnp_traffic_class(c), 48 << 2);
  EXPECT_TRUE(validate(c).ok());
  c.dscp = 64;
  EXPECT_EQ(validate(c).code(), StatusCode::kInvalidArgument);
  c.dscp = 0;
  c.ecn = Ecn::kCe;
  EXPECT_EQ(validate(c).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace uroce::net
