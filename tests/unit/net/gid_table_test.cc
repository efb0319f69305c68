// Tests stack/net/gid_table.cc: add/set/remove/query with typed errors, lookup
// by address and VLAN, IPv4-mapped and RoCEv1 link-local GIDs.
#include "stack/net/gid_table.h"

#include <gtest/gtest.h>

#include <cstring>

namespace uroce::net {
namespace {

constexpr MacAddr kMacA{{0x02, 0x00, 0x00, 0x00, 0x80, 0x01}};

Gid gid(const char* s) { return *parse_gid(s); }

TEST(GidTable, Ipv4MappedLayout) {
  // A17.4.4.1: ::ffff:a.b.c.d
  const Gid g = ipv4_gid(10, 80, 0, 2);
  const uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 80, 0, 2};
  EXPECT_EQ(0, std::memcmp(g.raw, want, 16));
  EXPECT_TRUE(g.is_ipv4_mapped());
  EXPECT_EQ(g, gid("10.80.0.2"));
  EXPECT_EQ(g, gid("::ffff:10.80.0.2"));
}

TEST(GidTable, RoceV1LinkLocalMatchesKernel) {
  // The kernel gave ka (02:00:00:00:80:01) fe80::ff:fe00:8001 (kernel_frames.h
  // capture, MLD report source): RFC 4291 App. A EUI-64 with the U/L bit flipped.
  EXPECT_EQ(link_local_gid(kMacA), gid("fe80::ff:fe00:8001"));
  const MacAddr m{{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}};
  EXPECT_EQ(link_local_gid(m), gid("fe80::5054:ff:fe12:3456"));
}

TEST(GidTable, AddQueryRemove) {
  GidTable t;
  auto i0 = t.add({gid("10.80.0.2"), GidType::kRoceV2, kNoVlan, kMacA});
  ASSERT_TRUE(i0.ok());
  EXPECT_EQ(*i0, 0);
  auto i1 = t.add({gid("fd00:80::2"), GidType::kRoceV2, kNoVlan, kMacA});
  ASSERT_TRUE(i1.ok());
  EXPECT_EQ(*i1, 1);
  auto i2 = t.add({link_local_gid(kMacA), GidType::kRoceV1, kNoVlan, kMacA});
  ASSERT_TRUE(i2.ok());
  // RoCEv1 and RoCEv2 entries may share an address (rxe lists both types).
  auto i3 = t.add({link_local_gid(kMacA), GidType::kRoceV2, kNoVlan, kMacA});
  ASSERT_TRUE(i3.ok());
  EXPECT_EQ(t.count(), 4);

  auto q = t.query(1);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->gid, gid("fd00:80::2"));
  EXPECT_EQ(t.query(9).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(t.query(GidTable::kSize).status().code(), StatusCode::kInvalidArgument);

  ASSERT_TRUE(t.remove(0).ok());
  EXPECT_EQ(t.remove(0).code(), StatusCode::kNotFound);
  EXPECT_EQ(t.remove(200).code(), StatusCode::kInvalidArgument);
  // The freed index is reused first.
  auto again = t.add({gid("10.80.0.3"), GidType::kRoceV2, kNoVlan, kMacA});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
}

// Linux (ib_core's roce_gid_mgmt) gives an IPv4 address a RoCEv1 entry too,
// ::ffff:a.b.c.d in the GRH: a ConnectX's table lists it at index 2 beside
// the RoCEv2 one at 3, and tools pick those indexes.
TEST(GidTable, RoceV1TakesAnIpv4MappedGidAsLinuxDoes) {
  GidTable t;
  ASSERT_TRUE(t.set(2, {gid("10.0.0.1"), GidType::kRoceV1, kNoVlan, kMacA}).ok());
  ASSERT_TRUE(t.set(3, {gid("10.0.0.1"), GidType::kRoceV2, kNoVlan, kMacA}).ok());
  EXPECT_EQ(t.find(gid("10.0.0.1"), kNoVlan, GidType::kRoceV1), std::optional<uint8_t>(2));
  EXPECT_EQ(t.find(gid("10.0.0.1"), kNoVlan, GidType::kRoceV2), std::optional<uint8_t>(3));
}

TEST(GidTable, TypedErrors) {
  GidTable t;
  EXPECT_EQ(t.set(0, {Gid{}, GidType::kRoceV2, kNoVlan, kMacA}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.set(0, {gid("ff02::1"), GidType::kRoceV2, kNoVlan, kMacA}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.set(0, {gid("10.0.0.1"), GidType::kRoceV2, 4095, kMacA}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.set(0, {gid("10.0.0.1"), GidType::kRoceV2, kNoVlan, MacAddr{}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(t.set(0, {gid("10.0.0.1"), GidType::kRoceV2, kNoVlan, MacAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(t.set(GidTable::kSize, {gid("10.0.0.1"), GidType::kRoceV2, kNoVlan, kMacA}).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(t.set(3, {gid("10.0.0.1"), GidType::kRoceV2, kNoVlan, kMacA}).ok());
  EXPECT_EQ(t.set(3, {gid("10.0.0.2"), GidType::kRoceV2, kNoVlan, kMacA}).code(), StatusCode::kBusy);
  EXPECT_EQ(t.set(4, {gid("10.0.0.1"), GidType::kRoceV2, kNoVlan, kMacA}).code(), StatusCode::kInvalidArgument);
  // The same address on another VLAN is another entry.
  EXPECT_TRUE(t.set(4, {gid("10.0.0.1"), GidType::kRoceV2, 100, kMacA}).ok());
  EXPECT_FALSE(parse_gid("10.0.0.256").has_value());
  EXPECT_FALSE(parse_gid("fd00::1::2").has_value());
}

TEST(GidTable, FullTableIsResourceExhausted) {
  GidTable t;
  for (uint8_t i = 0; i < GidTable::kSize; ++i) ASSERT_TRUE(t.add({ipv4_gid(10, 0, 0, uint8_t(i + 1)), GidType::kRoceV2, kNoVlan, kMacA}).ok());
  EXPECT_EQ(t.add({ipv4_gid(10, 0, 1, 1), GidType::kRoceV2, kNoVlan, kMacA}).status().code(),
            StatusCode::kResourceExhausted);
}

TEST(GidTable, FindByAddressAndVlan) {
  GidTable t;
  ASSERT_TRUE(t.set(0, {gid("10.80.0.2"), GidType::kRoceV2, kNoVlan, kMacA}).ok());
  ASSERT_TRUE(t.set(5, {gid("10.80.100.2"), GidType::kRoceV2, 100, kMacA}).ok());
  ASSERT_TRUE(t.set(6, {link_local_gid(kMacA), GidType::kRoceV1, kNoVlan, kMacA}).ok());
  EXPECT_EQ(t.find(gid("10.80.0.2"), kNoVlan), std::optional<uint8_t>(0));
  EXPECT_EQ(t.find(gid("10.80.100.2"), 100), std::optional<uint8_t>(5));
  EXPECT_FALSE(t.find(gid("10.80.100.2"), kNoVlan));  // a VLAN address is not ours untagged
  EXPECT_FALSE(t.find(gid("10.80.0.2"), 100));
  EXPECT_EQ(t.find(link_local_gid(kMacA), kNoVlan, GidType::kRoceV1), std::optional<uint8_t>(6));
  EXPECT_FALSE(t.find(link_local_gid(kMacA), kNoVlan, GidType::kRoceV2));
  EXPECT_TRUE(t.owns_mac(kMacA));
  EXPECT_FALSE(t.owns_mac(MacAddr{{2, 0, 0, 0, 0, 9}}));
}

}  // namespace
}  // namespace uroce::net
