// Tests for stack/wire/icrc.cc (both paths: copy and fold for short input,
// ISA-L for long) against independent references: zlib's crc32
// over a pseudo-header masked by hand (tests/unit/wire/icrc_reference.h) and
// the ICRCs rdma_rxe put on the wire (tests/data).
#include "stack/wire/icrc.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "stack/wire/packet.h"
#include "tests/unit/wire/icrc_reference.h"
#include "tests/unit/wire/test_util.h"

namespace uroce::wire {
namespace {

using test::captured_roce_frames;
using test::CapturedFrame;
using test::kBthOff;
using test::kIpOff;
using test::kUdpOff;

std::span<const uint8_t> covered(const std::vector<uint8_t>& f) {
  const test::IcrcSpan s = test::icrc_span(f);
  return std::span<const uint8_t>(f).subspan(s.l3, s.end - 4 - s.l3);
}

TEST(Icrc, Crc32IeeeIsZlibCrc32) {
  // Receive: the check string "123456789", then seeded random buffers of
  //   lengths 0..600 fed whole and in two chained pieces.
  // Expect: 0xCBF43926 (the CRC-32/IEEE check value) and zlib's value each time.
  const char* check = "123456789";
  EXPECT_EQ(crc32_ieee(0, {reinterpret_cast<const uint8_t*>(check), 9}), 0xcbf43926u);
  std::mt19937 rng(7);
  for (size_t len = 0; len <= 600; ++len) {
    std::vector<uint8_t> b(len);
    for (auto& x : b) x = uint8_t(rng());
    const uint32_t want = uint32_t(crc32(0L, b.data(), uInt(b.size())));
    EXPECT_EQ(crc32_ieee(0, b), want) << "len " << len;
    const size_t cut = len / 3;
    const std::span<const uint8_t> s(b);
    EXPECT_EQ(crc32_ieee(crc32_ieee(0, s.first(cut)), s.subspan(cut)), want) << "len " << len;
  }
}

// `b` cut at random points into `pieces` spans (some may be empty).
std::vector<std::span<const uint8_t>> split(std::span<const uint8_t> b, size_t pieces, std::mt19937& rng) {
  std::vector<size_t> cuts = {0, b.size()};
  for (size_t i = 1; i < pieces; ++i) cuts.push_back(b.empty() ? 0 : rng() % (b.size() + 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<std::span<const uint8_t>> out;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) out.push_back(b.subspan(cuts[i], cuts[i + 1] - cuts[i]));
  return out;
}

const CapturedFrame& captured_send() {
  for (const CapturedFrame& c : captured_roce_frames()) {
    if (c.file == "rxe-rc-pingpong-send.pcap") return c;
  }
  ADD_FAILURE() << "rxe-rc-pingpong-send.pcap has no RoCE frame";
  return captured_roce_frames().front();
}

TEST(Icrc, A17_3_3_IcrcOfEveryLengthAlignmentAndSplitIsZlib) {
  // Receive: the 40 bytes of IPv4, UDP and BTH headers of an RC SEND Only
  //   captured from rxe, then seeded random bytes of every length 0..1024 at
  //   every start alignment 0..15, cut into 1 to 4 spans at random points.
  //   The ICRC then covers 48 to 1072 bytes: the folding path up to
  //   kIcrcFoldMaxBytes, ISA-L above.
  // Expect: zlib's crc32 over 8 x 0xFF + the headers masked by hand with
  //   literal offsets + the bytes, each time. Every folding constant is used
  //   (four lanes, the join, the 128-to-32-bit reduction, Barrett), so a wrong
  //   one fails here.
  const std::vector<uint8_t>& f = captured_send().bytes;
  const std::span<const uint8_t> hdr(f.data() + kIpOff, 40);
  std::vector<uint8_t> ref(8 + hdr.size(), 0xff);
  std::copy(hdr.begin(), hdr.end(), ref.begin() + 8);
  ref[8 + 1] = 0xff;               // TOS
  ref[8 + 8] = 0xff;               // TTL
  ref[8 + 10] = ref[8 + 11] = 0xff;  // IP checksum
  ref[28 + 6] = ref[28 + 7] = 0xff;  // UDP checksum
  ref[36 + 4] = 0xff;              // BTH FECN/BECN/resv6
  const uint32_t ref_hdr = uint32_t(crc32(0L, ref.data(), uInt(ref.size())));
  std::mt19937 rng(11);
  std::vector<uint8_t> store(1024 + 16);
  for (auto& x : store) x = uint8_t(rng());
  for (size_t len = 0; len <= 1024; ++len) {
    for (size_t align = 0; align < 16; ++align) {
      const std::span<const uint8_t> b(store.data() + align, len);
      const uint32_t want = uint32_t(crc32(ref_hdr, b.data(), uInt(b.size())));
      const std::vector<std::span<const uint8_t>> spans = split(b, 1 + rng() % 4, rng);
      ASSERT_EQ(icrc_compute(L3Kind::kIpv4, hdr, spans), want)
          << "len " << len << " align " << align << " spans " << spans.size();
    }
  }
}

void expect_icrc_of_every_split(L3Kind kind) {
  // Frames of every payload length 0..1100 (the ICRC covering both sides of
  // kIcrcFoldMaxBytes), built by build(), then re-computed with the bytes
  // after the headers cut into 1 to 4 spans.
  std::mt19937 rng(5);
  PacketDesc d;
  d.l3 = kind;
  for (uint8_t i = 0; i < 16; ++i) {
    d.sgid.raw[i] = uint8_t(0x20 + i);
    d.dgid.raw[i] = uint8_t(0xfe - i);
  }
  if (kind == L3Kind::kIpv4) {
    const uint8_t src[4] = {192, 168, 1, 1};
    const uint8_t dst[4] = {192, 168, 1, 2};
    d.sgid = Gid::from_ipv4(src);
    d.dgid = Gid::from_ipv4(dst);
  }
  d.traffic_class = 0x62;
  d.flow_label = 0x12345;
  d.hop_limit = 9;
  d.udp_sport = 0xc123;
  d.opcode = kRcWriteOnly;
  d.dest_qp = 0x000abc;
  d.psn = 0xfffff0;
  d.reth_va = 0x00007f0012345678;
  d.reth_rkey = 0x1234;
  for (uint32_t len = 0; len <= 1100; ++len) {
    std::vector<uint8_t> payload(len);
    for (auto& x : payload) x = uint8_t(rng());
    d.reth_len = len;
    d.payload_len = len;
    d.pad = pad_for(len);
    std::vector<uint8_t> f(frame_len(d));
    ASSERT_EQ(build(d, payload, f), f.size());
    const uint32_t carried = test::carried_icrc(f);
    // Expect: the ICRC build() stored is zlib's over the hand-masked frame.
    ASSERT_EQ(carried, test::reference_icrc(f)) << "payload " << len;
    // Expect: the same ICRC from the headers and the rest in 1 to 4 pieces.
    const test::IcrcSpan at = test::icrc_span(f);
    const size_t hdr = header_len(d) - at.l3;
    const std::span<const uint8_t> l3(f.data() + at.l3, at.end - 4 - at.l3);
    const std::vector<std::span<const uint8_t>> rest = split(l3.subspan(hdr), 1 + rng() % 4, rng);
    ASSERT_EQ(icrc_compute(kind, l3.first(hdr), rest), carried) << "payload " << len << " spans " << rest.size();
  }
}

TEST(Icrc, A17_3_3_Ipv4IcrcOfEveryLengthAndSplitIsZlib) { expect_icrc_of_every_split(L3Kind::kIpv4); }
TEST(Icrc, A17_3_3_Ipv6IcrcOfEveryLengthAndSplitIsZlib) { expect_icrc_of_every_split(L3Kind::kIpv6); }
TEST(Icrc, A16_GrhIcrcOfEveryLengthAndSplitIsZlib) { expect_icrc_of_every_split(L3Kind::kGrh); }

TEST(Icrc, A17_3_3_HandMaskedZlibCrcOfOneCapturedFrame) {
  // Receive: the first RoCE frame of rxe-rc-pingpong-send.pcap (an RC SEND Only
  //   from rxe), masked here field by field with literal offsets.
  // Expect: zlib crc32 over 8 x 0xFF + masked IPv4 + masked UDP + masked BTH +
  //   rest equals the ICRC rxe carried, little-endian; icrc_compute agrees.
  const CapturedFrame* cf = &captured_send();
  const std::vector<uint8_t>& f = cf->bytes;
  ASSERT_EQ(f[kBthOff], 0x04);  // RC SEND Only
  std::vector<uint8_t> p(8, 0xff);
  p.insert(p.end(), f.begin() + 14, f.begin() + long(cf->ip_end) - 4);  // IP .. end of payload
  // p[8..27] is the IPv4 header, p[28..35] UDP, p[36..47] BTH.
  p[8 + 1] = 0xff;                  // TOS
  p[8 + 8] = 0xff;                  // TTL
  p[8 + 10] = p[8 + 11] = 0xff;     // IP checksum
  p[28 + 6] = p[28 + 7] = 0xff;     // UDP checksum
  p[36 + 4] = 0xff;                 // BTH FECN/BECN/resv6
  const uint32_t want = uint32_t(crc32(0L, p.data(), uInt(p.size())));
  const uint8_t* icrc = &f[cf->ip_end - 4];
  EXPECT_EQ(want, uint32_t(icrc[0] | icrc[1] << 8 | icrc[2] << 16 | uint32_t(icrc[3]) << 24));
  EXPECT_EQ(icrc_compute(L3Kind::kIpv4, covered(f)), want);
}

TEST(Icrc, A17_3_3_EveryCapturedFrameMatchesZlibAndTheWire) {
  // Receive: every captured RoCE frame.
  // Expect: icrc_compute == zlib reference == the ICRC rxe carried.
  for (const CapturedFrame& cf : captured_roce_frames()) {
    SCOPED_TRACE(cf.where());
    const uint32_t carried = test::carried_icrc(cf.bytes);
    EXPECT_EQ(test::reference_icrc(cf.bytes), carried);
    EXPECT_EQ(icrc_compute(L3Kind::kIpv4, covered(cf.bytes)), carried);
  }
}

TEST(Icrc, A17_3_3_MaskedFieldFlipsLeaveTheIcrcUnchanged) {
  // Receive: each captured RoCE frame with one bit of a masked field flipped:
  //   IPv4 TOS or TTL (IP checksum recomputed so only the ICRC is tested), the
  //   UDP checksum, or BTH byte 4 (FECN, BECN, resv6).
  // Expect: parse with ICRC checking gives kOk, the carried ICRC is still the
  //   computed one, and the flipped field reads back flipped (ECN, FECN, BECN).
  size_t checked = 0;
  for (const CapturedFrame& cf : captured_roce_frames()) {
    const uint32_t carried = test::carried_icrc(cf.bytes);
    for (const size_t at : {kIpOff + 1, kIpOff + 8, kUdpOff + 6, kUdpOff + 7, kBthOff + 4}) {
      for (int bit = 0; bit < 8; ++bit) {
        std::vector<uint8_t> f = cf.bytes;
        f[at] ^= uint8_t(1 << bit);
        if (at < kUdpOff) test::fix_ipv4_checksum(f);
        PacketDesc d;
        ASSERT_EQ(parse(f, d), ParseError::kOk) << cf.where() << " byte " << at << " bit " << bit;
        ASSERT_EQ(icrc_compute(L3Kind::kIpv4, covered(f)), carried);
        ASSERT_EQ(test::reference_icrc(f), carried);
        if (at == kIpOff + 1 && bit < 2) {
          EXPECT_EQ(d.ecn(), (cf.bytes[at] ^ (1 << bit)) & 3);
        }
        if (at == kBthOff + 4 && bit == 7) {
          EXPECT_EQ(d.fecn, !(cf.bytes[at] & 0x80));
        }
        if (at == kBthOff + 4 && bit == 6) {
          EXPECT_EQ(d.becn, !(cf.bytes[at] & 0x40));
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, captured_roce_frames().size() * 5 * 8);
}

TEST(Icrc, A17_3_3_UnmaskedBthBitsChangeTheIcrc) {
  // Receive: each captured frame with one bit flipped in BTH bytes 0-3 and 5-11
  //   (opcode, flags, P_Key, QPN, AckReq, PSN), not re-sealed.
  // Expect: icrc_compute differs from the carried ICRC every time.
  for (const CapturedFrame& cf : captured_roce_frames()) {
    const uint32_t carried = test::carried_icrc(cf.bytes);
    for (size_t at = kBthOff; at < kBthOff + 12; ++at) {
      if (at == kBthOff + 4) continue;
      for (int bit = 0; bit < 8; ++bit) {
        std::vector<uint8_t> f = cf.bytes;
        f[at] ^= uint8_t(1 << bit);
        ASSERT_NE(icrc_compute(L3Kind::kIpv4, covered(f)), carried) << cf.where() << " byte " << at;
      }
    }
  }
}

PacketDesc v6_desc(L3Kind l3) {
  PacketDesc d;
  d.l3 = l3;
  d.traffic_class = 0xb9;
  d.flow_label = 0x54321;
  d.hop_limit = 3;
  for (uint8_t i = 0; i < 16; ++i) {
    d.sgid.raw[i] = uint8_t(0x20 + i);
    d.dgid.raw[i] = uint8_t(0xfe - i);
  }
  d.udp_sport = 0xd353;
  d.opcode = kRcWriteOnlyImm;
  d.dest_qp = 0x000123;
  d.psn = 0x456;
  d.ack_req = true;
  d.reth_va = 0x0000557485801000;
  d.reth_rkey = 0x204;
  d.reth_len = 5;
  d.imm = 0x99aabbcc;
  d.payload_len = 5;
  d.pad = pad_for(5);
  return d;
}

void check_v6_family(L3Kind l3) {
  PacketDesc d = v6_desc(l3);
  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5};
  std::vector<uint8_t> f(frame_len(d));
  ASSERT_EQ(build(d, payload, f), f.size());
  const uint32_t icrc = test::carried_icrc(f);
  // Expect: the built ICRC is the hand-masked zlib one.
  EXPECT_EQ(icrc, test::reference_icrc(f));
  // Expect: other traffic class, flow label and hop limit (masked) give the same ICRC.
  d.traffic_class = 0x02;
  d.flow_label = 0x00001;
  d.hop_limit = 255;
  std::vector<uint8_t> g(frame_len(d));
  ASSERT_EQ(build(d, payload, g), g.size());
  EXPECT_NE(g, f);
  EXPECT_EQ(test::carried_icrc(g), icrc);
  PacketDesc back;
  EXPECT_EQ(parse(g, back), ParseError::kOk);
  // Expect: an unmasked change (the source GID) gives another ICRC.
  d.sgid.raw[15] ^= 1;
  ASSERT_EQ(build(d, payload, g), g.size());
  EXPECT_NE(test::carried_icrc(g), icrc);
  EXPECT_EQ(test::carried_icrc(g), test::reference_icrc(g));
}

TEST(Icrc, A17_3_3_Ipv6IcrcIsZlibOverMaskedHeader) {
  // Receive: a RoCEv2-over-IPv6 RDMA WRITE Only with Immediate built by build().
  // Expect: its ICRC equals zlib over 8 x 0xFF + IPv6 header with traffic
  //   class, flow label and hop limit as ones + UDP (checksum ones) + BTH
  //   (byte 4 ones) + RETH, ImmDt, payload, pad; masked fields do not change it.
  check_v6_family(L3Kind::kIpv6);
}

TEST(Icrc, A16_RoceV1IcrcIsZlibOverMaskedGrh) {
  // Receive: the same operation as RoCEv1 (GRH, Ethertype 0x8915, no UDP).
  // Expect: its ICRC equals zlib over 8 x 0xFF + GRH with TClass, FlowLabel and
  //   HopLmt as ones + BTH (byte 4 ones) + the rest; masked fields do not change it.
  check_v6_family(L3Kind::kGrh);
}

}  // namespace
}  // namespace uroce::wire
