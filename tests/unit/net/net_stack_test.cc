// Tests stack/net/net_stack.cc and frames.cc: every frame the stack sends is
// checked byte by byte against a frame the Linux kernel sent in the same
// situation (kernel_frames.h), and checksums against a plain RFC 1071
// implementation written here. The stack plays the kernel's role: B (replies)
// or A (requests). Runs under EAL --no-huge with real mbufs.
#include "stack/net/net_stack.h"

#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <cstring>
#include <string>
#include <vector>

#include <uroce/eal.h>

#include "stack/net/frames.h"
#include "tests/unit/net/kernel_frames.h"

namespace uroce::net {
namespace {

using Bytes = std::vector<uint8_t>;
constexpr uint64_t kMs = 1'000'000;
constexpr MacAddr kMacA{{0x02, 0x00, 0x00, 0x00, 0x80, 0x01}};
constexpr MacAddr kMacB{{0x02, 0x00, 0x00, 0x00, 0x80, 0x02}};

// RFC 1071, the obvious way: one's-complement sum of 16-bit big-endian words.
uint16_t rfc1071(const uint8_t* p, size_t n) {
  uint32_t sum = 0;
  for (size_t i = 0; i < n; i += 2) {
    uint16_t w = uint16_t(p[i] << 8);
    if (i + 1 < n) w = uint16_t(w | p[i + 1]);
    sum += w;
    sum = (sum & 0xffff) + (sum >> 16);
  }
  return uint16_t(~sum & 0xffff);
}

// Inserts an 802.1Q tag with vid after the MAC addresses.
Bytes tagged(const Bytes& f, uint16_t vid) {
  Bytes t(f.begin(), f.begin() + 12);
  t.insert(t.end(), {0x81, 0x00, uint8_t(vid >> 8), uint8_t(vid)});
  t.insert(t.end(), f.begin() + 12, f.end());
  return t;
}

Gid gid(const char* s) { return *parse_gid(s); }

class NetStackTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(init_eal().ok());
    auto p = create_frame_pool("net_test", 256);
    ASSERT_TRUE(p.ok());
    pool_ = *p;
  }
  void SetUp() override {
    auto s = NetStack::create(NetConfig{});
    ASSERT_TRUE(s.ok());
    net_ = std::move(*s);
  }
  void TearDown() override { clear(); }

  // The stack as host B (10.80.0.2, fd00:80::2), optionally on VLAN vlan too.
  void be_b(uint16_t vlan = kNoVlan) {
    ASSERT_TRUE(net_->gids().add({gid("10.80.0.2"), GidType::kRoceV2, vlan, kMacB}).ok());
    ASSERT_TRUE(net_->gids().add({gid("fd00:80::2"), GidType::kRoceV2, vlan, kMacB}).ok());
  }
  void be_a() {
    ASSERT_TRUE(net_->gids().add({gid("10.80.0.1"), GidType::kRoceV2, kNoVlan, kMacA}).ok());  // index 0
    ASSERT_TRUE(net_->gids().add({gid("fd00:80::1"), GidType::kRoceV2, kNoVlan, kMacA}).ok());  // index 1
  }
  bool rx(const Bytes& f, uint16_t tci = kNoVlan) { return net_->handle(std::span<const uint8_t>(f), tci, now_, tx_); }
  void poll() { net_->poll(now_, tx_); }
  // The frames sent so far, as bytes; clears the stage.
  std::vector<Bytes> sent() {
    std::vector<Bytes> out;
    for (uint16_t i = 0; i < tx_.size(); ++i) {
      const auto* p = rte_pktmbuf_mtod(tx_.at(i), const uint8_t*);
      out.emplace_back(p, p + rte_pktmbuf_data_len(tx_.at(i)));
    }
    clear();
    return out;
  }
  void clear() {
    for (uint16_t i = 0; i < tx_.size(); ++i) rte_pktmbuf_free(tx_.at(i));
    tx_.release_all();
  }
  uint64_t count(NetCounter c) const { return net_->counters().get(c); }

  static constexpr uint16_t kCap = 8;
  static inline rte_mempool* pool_ = nullptr;
  std::unique_ptr<NetStack> net_;
  TxStage tx_{pool_, kCap};  // pool_ is made once per suite, before any fixture
  uint64_t now_ = 1000 * kMs;
};

// ------------------------------------------------------------------ ARP

TEST_F(NetStackTest, Rfc826_RequestForOurAddressGetsTheKernelsReply) {
  be_b();
  // Receive: the kernel's "who has 10.80.0.2". Expect: B's kernel reply, padded to 60.
  EXPECT_TRUE(rx(testdata::kArpRequest));
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), 60u);
  Bytes want = testdata::kArpReply;
  want.resize(60, 0);
  EXPECT_EQ(out[0], want);
  EXPECT_EQ(count(NetCounter::arp_req_rcvd), 1u);
  EXPECT_EQ(count(NetCounter::arp_reply_sent), 1u);
  // RFC 826: the requester was added (stale: learned, not confirmed).
  const NeighEntry* e = net_->neighbours().lookup(gid("10.80.0.1"), kNoVlan);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->mac, kMacA);
  EXPECT_EQ(e->state, NeighState::kStale);
}

TEST_F(NetStackTest, Rfc826_RequestForAnotherAddressIsIgnored) {
  ASSERT_TRUE(net_->gids().add({gid("10.80.0.3"), GidType::kRoceV2, kNoVlan, kMacB}).ok());
  EXPECT_TRUE(rx(testdata::kArpRequest));
  EXPECT_TRUE(sent().empty());
  EXPECT_EQ(count(NetCounter::arp_not_for_us), 1u);
}

TEST_F(NetStackTest, Rfc826_ResolveSendsTheKernelsRequestAndLearnsTheReply) {
  be_a();
  // Expect: pending; the next poll sends what A's kernel sent.
  EXPECT_EQ(net_->resolve(gid("10.80.0.2"), 0, now_).status, ResolveStatus::kPending);
  poll();
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  Bytes want = testdata::kArpRequest;
  want.resize(60, 0);
  EXPECT_EQ(out[0], want);
  // Receive: B's reply. Expect: resolved to B's MAC, reachable.
  now_ += kMs;
  EXPECT_TRUE(rx(testdata::kArpReply));
  const Resolution r = net_->resolve(gid("10.80.0.2"), 0, now_);
  EXPECT_EQ(r.status, ResolveStatus::kResolved);
  EXPECT_EQ(r.mac, kMacB);
  EXPECT_EQ(count(NetCounter::arp_reply_rcvd), 1u);
  EXPECT_EQ(count(NetCounter::neigh_resolved), 1u);
}

TEST_F(NetStackTest, Rfc826_UnansweredResolveBacksOffAndTimesOut) {
  be_a();
  net_->resolve(gid("10.80.0.9"), 0, now_);
  size_t frames = 0;
  const uint64_t start = now_;
  for (; now_ < start + 4000 * kMs; now_ += 10 * kMs) {
    poll();
    frames += sent().size();
  }
  EXPECT_EQ(frames, 4u);
  EXPECT_EQ(count(NetCounter::arp_req_sent), 4u);
  EXPECT_EQ(count(NetCounter::neigh_resolve_timeout), 1u);
  EXPECT_EQ(net_->resolve(gid("10.80.0.9"), 0, now_).status, ResolveStatus::kFailed);
}

TEST_F(NetStackTest, Rfc826_ResolveNeedsASourceOfTheSameFamily) {
  be_a();
  EXPECT_EQ(net_->resolve(gid("fd00:80::2"), 0, now_).status, ResolveStatus::kFailed);
  EXPECT_EQ(net_->resolve(gid("10.80.0.2"), 7, now_).status, ResolveStatus::kFailed);
  EXPECT_EQ(count(NetCounter::neigh_no_source), 2u);
}

TEST_F(NetStackTest, Rfc5227_GratuitousArp) {
  be_b();
  ASSERT_TRUE(net_->announce(0, tx_));
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  // Broadcast request, sender = target = 10.80.0.2, target MAC zero.
  const Bytes want = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0x80, 0x02, 0x08, 0x06,
                      0, 1, 0x08, 0, 6, 4, 0, 1, 0x02, 0, 0, 0, 0x80, 0x02, 10, 80, 0, 2,
                      0, 0, 0, 0, 0, 0, 10, 80, 0, 2};
  EXPECT_EQ(Bytes(out[0].begin(), out[0].begin() + 42), want);
  EXPECT_EQ(count(NetCounter::arp_garp_sent), 1u);
}

TEST_F(NetStackTest, Rfc826_ConflictingClaimIsCountedNotLearned) {
  be_a();
  // Receive: B's reply altered to claim our 10.80.0.1 from B's MAC.
  Bytes f = testdata::kArpReply;
  f[31] = 1;
  EXPECT_TRUE(rx(f));
  EXPECT_EQ(count(NetCounter::arp_conflict), 1u);
  EXPECT_EQ(net_->neighbours().lookup(gid("10.80.0.1"), kNoVlan), nullptr);
}

// ------------------------------------------------------------------ ICMP

TEST_F(NetStackTest, Rfc792_EchoRequestGetsTheKernelsReply) {
  be_b();
  EXPECT_TRUE(rx(testdata::kEchoRequest4));
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  const Bytes& got = out[0];
  const Bytes& want = testdata::kEchoReply4;
  ASSERT_EQ(got.size(), want.size());
  // Same bytes except the IP identification (18..19) and so the IP checksum (24..25).
  for (size_t i = 0; i < want.size(); ++i) {
    if (i == 18 || i == 19 || i == 24 || i == 25) continue;
    EXPECT_EQ(got[i], want[i]) << "byte " << i;
  }
  EXPECT_EQ(rfc1071(got.data() + 14, 20), 0);             // IP header checksum verifies
  EXPECT_EQ(rfc1071(got.data() + 34, got.size() - 34), 0);  // ICMP checksum verifies
  EXPECT_EQ(count(NetCounter::icmp_echo_replied), 1u);
}

TEST_F(NetStackTest, Rfc792_BadChecksumsAreDropped) {
  be_b();
  Bytes f = testdata::kEchoRequest4;
  f[40] ^= 1;  // ICMP data
  EXPECT_TRUE(rx(f));
  f = testdata::kEchoRequest4;
  f[22] ^= 1;  // TTL: IP header checksum
  EXPECT_TRUE(rx(f));
  EXPECT_TRUE(sent().empty());
  EXPECT_EQ(count(NetCounter::icmp_bad_checksum), 1u);
  EXPECT_EQ(count(NetCounter::ip_bad_checksum), 1u);
}

TEST_F(NetStackTest, Rfc792_EchoToAnotherAddressOrMacIsNotAnswered) {
  ASSERT_TRUE(net_->gids().add({gid("10.80.0.3"), GidType::kRoceV2, kNoVlan, kMacB}).ok());
  EXPECT_TRUE(rx(testdata::kEchoRequest4));
  EXPECT_EQ(count(NetCounter::ip_not_for_us), 1u);
  Bytes f = testdata::kEchoRequest4;
  f[5] = 0x77;  // another MAC
  EXPECT_TRUE(rx(f));
  EXPECT_EQ(count(NetCounter::l2_not_for_us), 1u);
  EXPECT_TRUE(sent().empty());
}

TEST_F(NetStackTest, OtherProtocolsAreLeftToTheCaller) {
  be_b();
  Bytes udp = testdata::kEchoRequest4;
  udp[23] = 17;  // UDP
  EXPECT_FALSE(rx(udp));
  Bytes lldp = testdata::kArpRequest;
  lldp[12] = 0x88;
  lldp[13] = 0xcc;
  EXPECT_FALSE(rx(lldp));
  Bytes tcp6 = testdata::kEchoRequest6;
  tcp6[20] = 6;
  EXPECT_FALSE(rx(tcp6));
  EXPECT_FALSE(rx(Bytes(10, 0)));
  EXPECT_TRUE(sent().empty());
}

// ------------------------------------------------------------------ IPv6

TEST_F(NetStackTest, Rfc4861_SolicitationGetsTheKernelsAdvertisement) {
  be_b();
  // Receive: NS to the solicited-node group ff02::1:ff00:2 at 33:33:ff:00:00:02.
  EXPECT_TRUE(rx(testdata::kNeighborSolicit));
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], testdata::kNeighborAdvert);  // all 86 bytes, checksum included
  EXPECT_EQ(count(NetCounter::nd_ns_rcvd), 1u);
  EXPECT_EQ(count(NetCounter::nd_na_sent), 1u);
  const NeighEntry* e = net_->neighbours().lookup(gid("fd00:80::1"), kNoVlan);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->mac, kMacA);
}

TEST_F(NetStackTest, Rfc4861_ResolveSendsTheKernelsSolicitationAndLearnsTheAdvert) {
  be_a();
  EXPECT_EQ(net_->resolve(gid("fd00:80::2"), 1, now_).status, ResolveStatus::kPending);
  poll();
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], testdata::kNeighborSolicit);
  EXPECT_TRUE(rx(testdata::kNeighborAdvert));
  const Resolution r = net_->resolve(gid("fd00:80::2"), 1, now_);
  EXPECT_EQ(r.status, ResolveStatus::kResolved);
  EXPECT_EQ(r.mac, kMacB);
  EXPECT_EQ(count(NetCounter::nd_na_rcvd), 1u);
}

TEST_F(NetStackTest, Rfc4861_7_1_1_InvalidSolicitationsAreDropped) {
  be_b();
  Bytes f = testdata::kNeighborSolicit;
  f[21] = 64;  // hop limit != 255 (the checksum does not cover it)
  EXPECT_TRUE(rx(f));
  f = testdata::kNeighborSolicit;
  f[60] ^= 0xff;  // a reserved byte: the checksum no longer verifies
  EXPECT_TRUE(rx(f));
  EXPECT_TRUE(sent().empty());
  EXPECT_EQ(count(NetCounter::nd_bad), 1u);
  EXPECT_EQ(count(NetCounter::icmp6_bad_checksum), 1u);
}

TEST_F(NetStackTest, Rfc4861_7_2_4_DadProbeForOurAddressIsDefended) {
  be_b();
  // NS from :: for fd00:80::2, no SLLA (built with the stack's own builder, then the
  // source zeroed, the option dropped and the checksum recomputed with rfc1071).
  Bytes f = testdata::kNeighborSolicit;
  f.resize(14 + 40 + 24);
  f[18] = 0;
  f[19] = 24;  // payload length
  std::memset(f.data() + 22, 0, 16);
  f[56] = f[57] = 0;
  Bytes pseudo(f.begin() + 22, f.begin() + 54);
  pseudo.insert(pseudo.end(), {0, 0, 0, 24, 0, 0, 0, 58});
  pseudo.insert(pseudo.end(), f.begin() + 54, f.end());
  const uint16_t c = rfc1071(pseudo.data(), pseudo.size());
  f[56] = uint8_t(c >> 8);
  f[57] = uint8_t(c);
  EXPECT_TRUE(rx(f));
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  // To all-nodes (33:33:00:00:00:01, ff02::1) with O set and S clear.
  const Bytes all_nodes_mac = {0x33, 0x33, 0, 0, 0, 1};
  EXPECT_EQ(Bytes(out[0].begin(), out[0].begin() + 6), all_nodes_mac);
  EXPECT_EQ(out[0][38], 0xff);
  EXPECT_EQ(out[0][53], 0x01);
  EXPECT_EQ(out[0][58], 0x20);
  EXPECT_EQ(count(NetCounter::nd_dad_defended), 1u);
}

TEST_F(NetStackTest, Rfc4443_EchoRequestGetsTheKernelsReply) {
  be_b();
  EXPECT_TRUE(rx(testdata::kEchoRequest6));
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  const Bytes& got = out[0];
  const Bytes& want = testdata::kEchoReply6;
  ASSERT_EQ(got.size(), want.size());
  // Same bytes except the flow label (low 20 bits of bytes 14..17): the kernel
  // picks one per flow, we send 0. The ICMPv6 checksum does not cover it.
  for (size_t i = 0; i < want.size(); ++i) {
    if (i == 15) {
      EXPECT_EQ(got[i] & 0xf0, want[i] & 0xf0);
      continue;
    }
    if (i == 16 || i == 17) continue;
    EXPECT_EQ(got[i], want[i]) << "byte " << i;
  }
  EXPECT_EQ(count(NetCounter::icmp6_echo_replied), 1u);
}

TEST_F(NetStackTest, Rfc4861_UnsolicitedAdvertisement) {
  be_b();
  ASSERT_TRUE(net_->announce(1, tx_));
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), 86u);
  EXPECT_EQ(out[0][54], kNdNeighborAdvert);
  EXPECT_EQ(out[0][58], 0x20);  // O only
  Bytes pseudo(out[0].begin() + 22, out[0].begin() + 54);
  pseudo.insert(pseudo.end(), {0, 0, 0, 32, 0, 0, 0, 58});
  pseudo.insert(pseudo.end(), out[0].begin() + 54, out[0].end());
  EXPECT_EQ(rfc1071(pseudo.data(), pseudo.size()), 0);
}

// ------------------------------------------------------------------ VLAN

TEST_F(NetStackTest, Vlan_AnswersOnTheVlanTheRequestCameOn) {
  be_b(100);
  // Receive: the ARP request tagged with VID 100 (PCP 5). Expect: the kernel's
  // reply tagged VID 100 (PCP 0), padded to 64.
  Bytes req = tagged(testdata::kArpRequest, 100);
  req[14] |= 0xa0;
  EXPECT_TRUE(rx(req));
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  Bytes want = tagged(testdata::kArpReply, 100);
  want.resize(64, 0);
  EXPECT_EQ(out[0], want);
  // NS and ping on VLAN 100 too.
  EXPECT_TRUE(rx(tagged(testdata::kNeighborSolicit, 100)));
  EXPECT_TRUE(rx(tagged(testdata::kEchoRequest6, 100)));
  EXPECT_TRUE(rx(tagged(testdata::kEchoRequest4, 100)));
  out = sent();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], tagged(testdata::kNeighborAdvert, 100));
  EXPECT_EQ(Bytes(out[1].begin(), out[1].begin() + 16), Bytes(want.begin(), want.begin() + 16));
  EXPECT_EQ(out[2][12], 0x81);
  EXPECT_EQ(out[2][15], 100);
}

TEST_F(NetStackTest, Vlan_AddressesAreOnlyOursOnTheirVlan) {
  be_b(100);
  EXPECT_TRUE(rx(testdata::kArpRequest));                   // untagged
  EXPECT_TRUE(rx(tagged(testdata::kArpRequest, 200)));      // other VLAN
  EXPECT_TRUE(rx(testdata::kNeighborSolicit));
  EXPECT_TRUE(sent().empty());
  EXPECT_EQ(count(NetCounter::arp_not_for_us), 2u);
  EXPECT_EQ(count(NetCounter::nd_ns_not_for_us), 1u);
}

TEST_F(NetStackTest, Vlan_TagStrippedByThePortIsHonoured) {
  be_b(100);
  EXPECT_TRUE(rx(testdata::kArpRequest, 100));  // the PMD put VID 100 in the mbuf
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0][12], 0x81);
  EXPECT_EQ(out[0][15], 100);
}

TEST_F(NetStackTest, Vlan_ResolveFromAVlanGidSendsTagged) {
  ASSERT_TRUE(net_->gids().add({gid("10.80.0.1"), GidType::kRoceV2, 100, kMacA}).ok());
  EXPECT_EQ(net_->resolve(gid("10.80.0.2"), 0, now_).status, ResolveStatus::kPending);
  poll();
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  Bytes want = tagged(testdata::kArpRequest, 100);
  want.resize(64, 0);
  EXPECT_EQ(out[0], want);
  // The untagged reply does not resolve the VLAN entry; the tagged one does.
  EXPECT_TRUE(rx(testdata::kArpReply));
  EXPECT_EQ(net_->resolve(gid("10.80.0.2"), 0, now_).status, ResolveStatus::kPending);
  EXPECT_TRUE(rx(tagged(testdata::kArpReply, 100)));
  EXPECT_EQ(net_->resolve(gid("10.80.0.2"), 0, now_).status, ResolveStatus::kResolved);
}

// ------------------------------------------------------------------ transmit

TEST_F(NetStackTest, FullBurstIsCountedAndNothingLeaks) {
  be_b();
  for (int i = 0; i < kCap + 2; ++i) rx(testdata::kArpRequest);
  EXPECT_EQ(sent().size(), size_t(kCap));
  EXPECT_EQ(count(NetCounter::tx_burst_full), 2u);
  EXPECT_EQ(count(NetCounter::arp_reply_sent), uint64_t(kCap));
}

TEST_F(NetStackTest, MbufEntryPoint) {
  be_b();
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  ASSERT_NE(m, nullptr);
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, uint16_t(testdata::kEchoRequest4.size())));
  std::memcpy(p, testdata::kEchoRequest4.data(), testdata::kEchoRequest4.size());
  EXPECT_TRUE(net_->handle(m, now_, tx_));
  rte_pktmbuf_free(m);
  EXPECT_EQ(sent().size(), 1u);
}

TEST(NetCounters, NamesMatchTheEnum) {
  EXPECT_EQ(kNetCounterNames[size_t(NetCounter::arp_req_rcvd)], "arp_req_rcvd");
  EXPECT_EQ(kNetCounterNames[size_t(NetCounter::tx_too_big)], "tx_too_big");
}

}  // namespace
}  // namespace uroce::net
