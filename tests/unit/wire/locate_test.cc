// Tests for stack/wire/locate.h, the one header walk: every frame of every
// bundled capture (real rdma_rxe RoCEv2, ARP and TCP traffic, tests/data),
// each read independently from its raw bytes at the offsets of IEEE 802.3,
// RFC 791, RFC 8200 and RFC 768; captured frames given an 802.1Q tag or IPv4
// options (IEEE 802.1Q 9.3, RFC 791 3.1); IPv6 and RoCEv1 (A16.4) frames laid
// out by hand from those specs; truncation at every length; non-UDP traffic.
#include "stack/wire/locate.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/wire/test_util.h"

namespace uroce::wire {
namespace {

using test::get16;
using test::put16;

// A frame of every kind the captures hold: RoCEv2 (UDP 4791), ARP, TCP.
struct Sample {
  std::vector<uint8_t> roce;
  std::vector<uint8_t> arp;
  std::vector<uint8_t> tcp;
};

const Sample& samples() {
  static const Sample s = [] {
    Sample v;
    for (const auto& path : test::test_pcaps()) {
      auto recs = read_pcap(path.string());
      if (!recs.ok()) continue;
      for (auto& r : *recs) {
        const auto& b = r.data;
        if (b.size() < 34) continue;
        if (v.roce.empty() && test::looks_like_rocev2(b)) v.roce = b;
        if (v.arp.empty() && get16(&b[12]) == 0x0806) v.arp = b;
        if (v.tcp.empty() && get16(&b[12]) == 0x0800 && b[23] == 6) v.tcp = b;
      }
    }
    return v;
  }();
  return s;
}

// Inserts an 802.1Q tag (TPID 0x8100, then the TCI) after the MAC addresses.
std::vector<uint8_t> with_vlan(std::vector<uint8_t> f, uint16_t tci) {
  const uint8_t tag[4] = {0x81, 0x00, uint8_t(tci >> 8), uint8_t(tci)};
  f.insert(f.begin() + 12, tag, tag + 4);
  return f;
}

// Inserts option words after the 20-byte IPv4 header at 14 and raises IHL.
std::vector<uint8_t> with_ip_options(std::vector<uint8_t> f, const std::vector<uint8_t>& opts) {
  f.insert(f.begin() + 34, opts.begin(), opts.end());
  f[14] = uint8_t(0x40 | (5 + opts.size() / 4));
  put16(&f[16], uint16_t(get16(&f[16]) + opts.size()));
  return f;
}

// Ethernet II + the 40-byte IPv6 header (RFC 8200 3) or GRH + next bytes,
// written byte by byte: version 6, payload length, next header, hop limit.
std::vector<uint8_t> ipv6_frame(uint16_t ether_type, uint8_t next_header, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> f(14 + 40);
  for (int i = 0; i < 6; ++i) f[i] = uint8_t(0x02 + i), f[6 + i] = uint8_t(0x12 + i);
  put16(&f[12], ether_type);
  f[14] = 0x60;  // version 6, traffic class 0, flow label 0
  put16(&f[18], uint16_t(payload.size()));
  f[20] = next_header;
  f[21] = 64;
  for (int i = 0; i < 16; ++i) f[22 + i] = uint8_t(0xfe), f[38 + i] = uint8_t(0xa0 + i);
  f.insert(f.end(), payload.begin(), payload.end());
  return f;
}

// A UDP header (RFC 768) to port dport, then a 12-byte BTH and 4 bytes of ICRC.
std::vector<uint8_t> udp_bth(uint16_t dport) {
  std::vector<uint8_t> u(8 + 12 + 4);
  put16(&u[0], 49152);
  put16(&u[2], dport);
  put16(&u[4], uint16_t(u.size()));
  u[8] = 0x04;  // RC SEND Only
  return u;
}

// Locates a copy of the first n bytes in a buffer of exactly n bytes, so that
// a read past the end is a heap overflow under the sanitizers.
std::optional<FrameLayout> locate_prefix(const std::vector<uint8_t>& f, size_t n) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[n ? n : 1]);
  std::copy(f.begin(), f.begin() + ptrdiff_t(n), copy.get());
  return locate_headers({copy.get(), n});
}

// Every frame of every capture: what locate_headers finds equals what the raw
// bytes say at the spec's offsets.
TEST(Locate, EveryCapturedFrameMatchesItsRawBytes) {
  std::map<uint16_t, size_t> per_type;
  size_t udp = 0;
  for (const auto& path : test::test_pcaps()) {
    auto recs = read_pcap(path.string());
    ASSERT_TRUE(recs.ok()) << path;
    for (size_t i = 0; i < recs->size(); ++i) {
      const std::vector<uint8_t>& b = (*recs)[i].data;
      SCOPED_TRACE(path.filename().string() + " frame " + std::to_string(i + 1));
      const auto loc = locate_headers(b);
      ASSERT_TRUE(loc);  // no capture holds runts
      const uint16_t type = get16(&b[12]);
      ++per_type[type];
      EXPECT_EQ(loc->ether_type, type);
      EXPECT_FALSE(loc->has_vlan);
      EXPECT_EQ(loc->l3_off, 14u);
      if (type != 0x0800) {
        EXPECT_FALSE(loc->has_l3);
        continue;
      }
      ASSERT_TRUE(loc->has_l3);
      EXPECT_EQ(loc->l3, L3Kind::kIpv4);
      EXPECT_EQ(loc->l4_proto, b[23]);
      EXPECT_EQ(loc->l4_off, 14u + (b[14] & 0xfu) * 4);
      EXPECT_EQ(loc->has_udp, b[23] == 17);
      if (loc->has_udp) {
        ++udp;
        EXPECT_EQ(loc->udp_dport, get16(&b[loc->l4_off + 2]));
      }
    }
  }
  // The captures hold RoCEv2, its TCP out-of-band exchange and ARP.
  EXPECT_GT(per_type[0x0800], 100u);
  EXPECT_GT(per_type[0x0806], 0u);
  EXPECT_GT(udp, 100u);
}

// A captured RoCEv2 frame with an 802.1Q tag, PCP 5 DEI 0 VID 100: the
// tag's TCI is reported and every later offset moves by 4.
TEST(Locate, VlanTaggedCapturedFrame) {
  ASSERT_FALSE(samples().roce.empty());
  const auto f = with_vlan(samples().roce, 0xa064);
  const auto loc = locate_headers(f);
  ASSERT_TRUE(loc);
  EXPECT_TRUE(loc->has_vlan);
  EXPECT_EQ(loc->vlan_tci, 0xa064);
  EXPECT_EQ(loc->ether_type, kEtherTypeIpv4);
  EXPECT_EQ(loc->l3_off, 18u);
  ASSERT_TRUE(loc->has_l3);
  EXPECT_EQ(loc->l4_off, 38u);
  ASSERT_TRUE(loc->has_udp);
  EXPECT_EQ(loc->udp_dport, kRoceV2Port);
}

// A captured RoCEv2 frame with 8 bytes of IPv4 options (NOP, NOP, NOP, EOL,
// padding): UDP starts after IHL * 4 bytes, not after 20. (parse() rejects
// options, A17.4.5.1; the locator only finds the headers.)
TEST(Locate, Ipv4OptionsMoveTheUdpHeader) {
  ASSERT_FALSE(samples().roce.empty());
  const auto f = with_ip_options(samples().roce, {1, 1, 1, 0, 0, 0, 0, 0});
  const auto loc = locate_headers(f);
  ASSERT_TRUE(loc && loc->has_l3);
  EXPECT_EQ(loc->l4_off, 14u + 28u);
  ASSERT_TRUE(loc->has_udp);
  EXPECT_EQ(loc->udp_dport, kRoceV2Port);
}

// An IHL below 5 is no IPv4 header: the L3 header is found, L4 is not.
TEST(Locate, Ipv4IhlBelowFiveLocatesNoL4) {
  auto f = samples().roce;
  ASSERT_FALSE(f.empty());
  f[14] = 0x44;
  const auto loc = locate_headers(f);
  ASSERT_TRUE(loc && loc->has_l3);
  EXPECT_EQ(loc->l4_off, 0u);
  EXPECT_FALSE(loc->has_udp);
}

// RoCEv2 over IPv6 (A17.4.2), tagged and untagged, and IPv6 carrying TCP.
TEST(Locate, Ipv6) {
  const auto f = ipv6_frame(0x86dd, 17, udp_bth(4791));
  auto loc = locate_headers(f);
  ASSERT_TRUE(loc && loc->has_l3);
  EXPECT_EQ(loc->l3, L3Kind::kIpv6);
  EXPECT_EQ(loc->l4_proto, 17);
  EXPECT_EQ(loc->l4_off, 54u);
  ASSERT_TRUE(loc->has_udp);
  EXPECT_EQ(loc->udp_dport, 4791);

  loc = locate_headers(with_vlan(f, 0x0007));
  ASSERT_TRUE(loc && loc->has_l3 && loc->has_udp);
  EXPECT_EQ(loc->vlan_tci, 7);
  EXPECT_EQ(loc->l4_off, 58u);

  loc = locate_headers(ipv6_frame(0x86dd, 6, std::vector<uint8_t>(20)));
  ASSERT_TRUE(loc && loc->has_l3);
  EXPECT_EQ(loc->l4_proto, 6);
  EXPECT_EQ(loc->l4_off, 54u);
  EXPECT_FALSE(loc->has_udp);
}

// RoCEv1 (A16.4): ether type 0x8915, a GRH and the BTH right after it, no UDP.
TEST(Locate, RoceV1Grh) {
  std::vector<uint8_t> bth(12 + 4);
  bth[0] = 0x04;
  const auto loc = locate_headers(ipv6_frame(0x8915, 0x1b, bth));
  ASSERT_TRUE(loc && loc->has_l3);
  EXPECT_EQ(loc->l3, L3Kind::kGrh);
  EXPECT_EQ(loc->l4_proto, 0x1b);
  EXPECT_EQ(loc->l4_off, 54u);
  EXPECT_FALSE(loc->has_udp);
}

// Real ARP and TCP frames, UDP to another port: located, but no RoCE.
TEST(Locate, NonUdpAndOtherPorts) {
  ASSERT_FALSE(samples().arp.empty());
  ASSERT_FALSE(samples().tcp.empty());
  auto loc = locate_headers(samples().arp);
  ASSERT_TRUE(loc);
  EXPECT_EQ(loc->ether_type, kEtherTypeArp);
  EXPECT_EQ(loc->l3_off, 14u);
  EXPECT_FALSE(loc->has_l3);
  EXPECT_FALSE(loc->has_udp);

  loc = locate_headers(samples().tcp);
  ASSERT_TRUE(loc && loc->has_l3);
  EXPECT_EQ(loc->l4_proto, 6);
  EXPECT_EQ(loc->l4_off, 34u);
  EXPECT_FALSE(loc->has_udp);
  EXPECT_EQ(loc->udp_dport, 0u);

  auto f = samples().roce;
  put16(&f[36], 53);
  loc = locate_headers(f);
  ASSERT_TRUE(loc && loc->has_udp);
  EXPECT_EQ(loc->udp_dport, 53u);
}

// Every prefix of an untagged IPv4, a tagged IPv4, a tagged IPv4 with options,
// an IPv6 and a RoCEv1 frame: nullopt until the Ethernet header (and tag)
// fit, has_l3 from the length that holds the fixed L3 header, has_udp from
// the one that holds the UDP header, and the same fields as the whole frame
// wherever they are reported. Never a read outside the prefix.
TEST(Locate, TruncatedAtEveryLength) {
  ASSERT_FALSE(samples().roce.empty());
  std::vector<uint8_t> bth(16);
  const std::vector<std::vector<uint8_t>> frames = {
      samples().roce,
      with_vlan(samples().roce, 0x2001),
      with_vlan(with_ip_options(samples().roce, {1, 1, 1, 0}), 0x2001),
      ipv6_frame(0x86dd, 17, udp_bth(4791)),
      ipv6_frame(0x8915, 0x1b, bth),
  };
  for (const auto& f : frames) {
    const auto whole = locate_headers(f);
    ASSERT_TRUE(whole && whole->has_l3);
    const size_t l2_len = whole->l3_off;
    const size_t l3_len = whole->l3 == L3Kind::kIpv4 ? 20 : 40;
    for (size_t n = 0; n <= f.size(); ++n) {
      SCOPED_TRACE("ether type " + std::to_string(whole->ether_type) + " vlan " +
                   std::to_string(whole->has_vlan) + ", length " + std::to_string(n));
      const auto loc = locate_prefix(f, n);
      ASSERT_EQ(loc.has_value(), n >= l2_len);
      if (!loc) continue;
      EXPECT_EQ(loc->ether_type, whole->ether_type);
      EXPECT_EQ(loc->has_vlan, whole->has_vlan);
      EXPECT_EQ(loc->vlan_tci, whole->vlan_tci);
      EXPECT_EQ(loc->l3_off, whole->l3_off);
      ASSERT_EQ(loc->has_l3, n >= l2_len + l3_len);
      if (!loc->has_l3) continue;
      EXPECT_EQ(loc->l3, whole->l3);
      EXPECT_EQ(loc->l4_proto, whole->l4_proto);
      EXPECT_EQ(loc->l4_off, whole->l4_off);
      EXPECT_EQ(loc->has_udp, whole->has_udp && n >= size_t(whole->l4_off) + 8);
      if (loc->has_udp) {
        EXPECT_EQ(loc->udp_dport, whole->udp_dport);
      }
    }
  }
  // A frame that ends inside its 802.1Q tag is as short as one without Ethernet.
  const auto tagged = with_vlan(samples().roce, 1);
  for (size_t n = 14; n < 18; ++n) EXPECT_FALSE(locate_prefix(tagged, n)) << n;
}

}  // namespace
}  // namespace uroce::wire
