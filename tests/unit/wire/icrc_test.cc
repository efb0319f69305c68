// Tests for stack/wire/icrc.cc (every CRC kernel: the fold for short input,
// ISA-L or the wide fold for long) against independent references: zlib's
// crc32 over a pseudo-header masked by hand (tests/unit/wire/icrc_reference.h)
// and the ICRCs rdma_rxe put on the wire (tests/data). The tests before
// CrcKernels run under the kernel start-up chose; CrcKernels runs each
// kernel this CPU has and skips, naming it, each it lacks.
#include "stack/wire/icrc.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
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

/// zlib's crc32 of 8 x 0xFF and the 40 IPv4, UDP and BTH headers of hdr
/// masked by hand, with the literal offsets of A17.3.3: the reference every
/// ICRC test continues with its payload.
uint32_t masked_headers_crc(std::span<const uint8_t> hdr) {
  std::vector<uint8_t> ref(8 + hdr.size(), 0xff);
  std::copy(hdr.begin(), hdr.end(), ref.begin() + 8);
  ref[8 + 1] = 0xff;                 // TOS
  ref[8 + 8] = 0xff;                 // TTL
  ref[8 + 10] = ref[8 + 11] = 0xff;  // IP checksum
  ref[28 + 6] = ref[28 + 7] = 0xff;  // UDP checksum
  ref[36 + 4] = 0xff;                // BTH FECN/BECN/resv6
  return uint32_t(crc32(0L, ref.data(), uInt(ref.size())));
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
  const uint32_t ref_hdr = masked_headers_crc(hdr);
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

// ---------------------------------------------------------------------------
// Every kernel against zlib and against each other.

// Selects the kernel under test, or skips the test, saying which kernel the
// CPU lacks; restores the start-up kernel after.
class CrcKernels : public ::testing::TestWithParam<CrcKernel> {
 protected:
  void SetUp() override {
    if (!crc_kernel_supported(GetParam())) {
      GTEST_SKIP() << "this CPU lacks the " << crc_kernel_name(GetParam()) << " CRC kernel";
    }
    ASSERT_TRUE(set_crc_kernel(GetParam()).ok());
    ASSERT_EQ(crc_kernel(), GetParam());
  }
  void TearDown() override { ASSERT_TRUE(set_crc_kernel(before_).ok()); }

 private:
  const CrcKernel before_ = crc_kernel();
};

// Restores the kernel in use when it goes out of scope, failed assertions included.
struct KernelRestorer {
  ~KernelRestorer() { EXPECT_TRUE(set_crc_kernel(before).ok()); }
  const CrcKernel before = crc_kernel();
};

// Random bytes at a 64-byte-aligned address, with room for 64 more.
struct Store {
  explicit Store(size_t n, uint32_t seed) : bytes(n + 128) {
    std::mt19937 rng(seed);
    for (auto& x : bytes) x = uint8_t(rng());
    const auto at = reinterpret_cast<uintptr_t>(bytes.data());
    base = bytes.data() + (64 - at % 64) % 64;
  }
  std::vector<uint8_t> bytes;
  uint8_t* base = nullptr;
};

TEST_P(CrcKernels, Crc32OfRandomLengthsAlignmentsAndContinuationsIsZlib) {
  // Receive: every length 0..300, then 3000 seeded random lengths 0..9000,
  //   each at a random alignment 0..63, continued from a random CRC, then cut
  //   at a random point and chained.
  // Expect: zlib's crc32 each time, and 0xCBF43926 for "123456789".
  const char* check = "123456789";
  EXPECT_EQ(crc32_ieee(0, {reinterpret_cast<const uint8_t*>(check), 9}), 0xcbf43926u);
  const Store store(9000 + 64, 21);
  std::mt19937 rng(23);
  for (size_t i = 0; i < 3301; ++i) {
    const size_t len = i <= 300 ? i : rng() % 9001;
    const size_t align = rng() % 64;
    const uint32_t seed = i % 2 == 0 ? 0 : uint32_t(rng());
    const std::span<const uint8_t> b(store.base + align, len);
    const uint32_t want = uint32_t(crc32(seed, b.data(), uInt(b.size())));
    ASSERT_EQ(crc32_ieee(seed, b), want) << "len " << len << " align " << align << " seed " << seed;
    const size_t cut = len == 0 ? 0 : rng() % (len + 1);
    ASSERT_EQ(crc32_ieee(crc32_ieee(seed, b.first(cut)), b.subspan(cut)), want)
        << "len " << len << " align " << align << " cut " << cut;
  }
}

TEST_P(CrcKernels, Crc32OfEveryLengthAroundOneAndTwoSkippedBlocksIsZlib) {
  // Receive: every length 3,800..4,300 and 7,800..8,300 (the avx2 kernel's
  //   wide runs of one and two blocks, of 3,968 or 4,096 bytes, whose first
  //   bytes are moved by XORs rather than folded: one short block, one long,
  //   long and short, two long; and the lengths either side), at alignments
  //   0..63 in turn, from a random CRC.
  // Expect: zlib's crc32 each time.
  const Store store(8300 + 64, 41);
  std::mt19937 rng(43);
  for (const size_t from : {size_t(3800), size_t(7800)}) {
    for (size_t len = from; len <= from + 500; ++len) {
      const size_t align = len % 64;
      const auto seed = uint32_t(rng());
      const std::span<const uint8_t> b(store.base + align, len);
      ASSERT_EQ(crc32_ieee(seed, b), uint32_t(crc32(seed, b.data(), uInt(b.size()))))
          << "len " << len << " align " << align;
    }
  }
}

TEST_P(CrcKernels, A17_3_3_IcrcOfRandomLengthsAlignmentsAndSplitsIsZlib) {
  // Receive: the 40 headers of a captured RC SEND Only, then every length
  //   0..1100 and 2000 seeded random lengths up to 9000, at random alignments
  //   0..63, cut into 1 to 4 spans at random points.
  // Expect: zlib's crc32 over 8 x 0xFF + the hand-masked headers + the bytes.
  const std::vector<uint8_t>& f = captured_send().bytes;
  const std::span<const uint8_t> hdr(f.data() + kIpOff, 40);
  const uint32_t ref_hdr = masked_headers_crc(hdr);
  const Store store(9000 + 64, 31);
  std::mt19937 rng(37);
  for (size_t i = 0; i < 3101; ++i) {
    const size_t len = i <= 1100 ? i : rng() % 9001;
    const size_t align = rng() % 64;
    const std::span<const uint8_t> b(store.base + align, len);
    const uint32_t want = uint32_t(crc32(ref_hdr, b.data(), uInt(b.size())));
    const std::vector<std::span<const uint8_t>> spans = split(b, 1 + rng() % 4, rng);
    ASSERT_EQ(icrc_compute(L3Kind::kIpv4, hdr, spans), want)
        << "len " << len << " align " << align << " spans " << spans.size();
    ASSERT_EQ(icrc_compute(L3Kind::kIpv4, hdr, std::span(&b, 1)), want) << "len " << len << " align " << align;
  }
}

TEST_P(CrcKernels, A17_3_3_EveryCapturedFrameMatchesTheWire) {
  // Receive: every RoCE frame captured from rxe (tests/data), whole and with
  //   its bytes after the 40 header bytes as a second span.
  // Expect: icrc_compute under this kernel == the ICRC rxe carried.
  for (const CapturedFrame& cf : captured_roce_frames()) {
    SCOPED_TRACE(cf.where());
    const uint32_t carried = test::carried_icrc(cf.bytes);
    const std::span<const uint8_t> c = covered(cf.bytes);
    EXPECT_EQ(icrc_compute(L3Kind::kIpv4, c), carried);
    const std::span<const uint8_t> rest = c.subspan(40);
    EXPECT_EQ(icrc_compute(L3Kind::kIpv4, c.first(40), std::span(&rest, 1)), carried);
  }
}

TEST_P(CrcKernels, A17_3_3_Ipv6AndGrhIcrcOfLongFramesIsZlib) {
  // Receive: RoCEv2/IPv6 and RoCEv1 WRITE Only frames of payloads 0..9000 in
  //   steps of 97, built by build() under this kernel.
  // Expect: the stored ICRC is zlib's over the hand-masked frame.
  for (const L3Kind l3 : {L3Kind::kIpv6, L3Kind::kGrh}) {
    PacketDesc d = v6_desc(l3);
    d.opcode = kRcWriteOnly;
    for (uint32_t len = 0; len <= 9000; len += 97) {
      std::vector<uint8_t> payload(len, uint8_t(len));
      d.reth_len = len;
      d.payload_len = len;
      d.pad = pad_for(len);
      std::vector<uint8_t> f(frame_len(d));
      ASSERT_EQ(build(d, payload, f), f.size());
      ASSERT_EQ(test::carried_icrc(f), test::reference_icrc(f)) << "payload " << len;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Each, CrcKernels, ::testing::ValuesIn(kCrcKernels),
                         [](const ::testing::TestParamInfo<CrcKernel>& p) {
                           std::string name(crc_kernel_name(p.param));
                           std::replace(name.begin(), name.end(), '-', '_');  // a test name has no '-'
                           return name;
                         });

TEST(CrcKernel, EveryKernelGivesTheSameBytes) {
  // Receive: 500 seeded random buffers of lengths 0..9000 at alignments
  //   0..63, CRC and ICRC computed under every kernel this CPU has.
  // Expect: one CRC and one ICRC per buffer, whichever kernel; at least the
  //   pclmul and generic kernels ran (every x86-64 CPU uroce runs on has them).
  const KernelRestorer restore;
  std::vector<CrcKernel> have;
  for (const CrcKernel k : kCrcKernels) {
    if (crc_kernel_supported(k)) have.push_back(k);
  }
  ASSERT_GE(have.size(), 2u);
  const Store store(9000 + 64, 41);
  const std::span<const uint8_t> hdr(captured_send().bytes.data() + kIpOff, 40);
  std::mt19937 rng(43);
  for (int i = 0; i < 500; ++i) {
    const size_t len = rng() % 9001;
    const std::span<const uint8_t> b(store.base + rng() % 64, len);
    std::vector<uint32_t> crcs;
    std::vector<uint32_t> icrcs;
    for (const CrcKernel k : have) {
      ASSERT_TRUE(set_crc_kernel(k).ok());
      crcs.push_back(crc32_ieee(0x12345678, b));
      icrcs.push_back(icrc_compute(L3Kind::kIpv4, hdr, std::span(&b, 1)));
    }
    for (size_t k = 1; k < have.size(); ++k) {
      ASSERT_EQ(crcs[k], crcs[0]) << crc_kernel_name(have[k]) << " vs " << crc_kernel_name(have[0]) << " len " << len;
      ASSERT_EQ(icrcs[k], icrcs[0]) << crc_kernel_name(have[k]) << " vs " << crc_kernel_name(have[0]) << " len " << len;
    }
  }
}

TEST(CrcKernel, NamesRoundTripAndAutoIsTheBest) {
  // Expect: each name maps back to its kernel; an unknown name to none; auto
  //   selects crc_kernel_best(), which the CPU has and which is never auto.
  EXPECT_EQ(crc_kernel_from_name(crc_kernel_name(CrcKernel::kAuto)), CrcKernel::kAuto);
  for (const CrcKernel k : kCrcKernels) {
    EXPECT_EQ(crc_kernel_from_name(crc_kernel_name(k)), k);
  }
  EXPECT_EQ(crc_kernel_from_name("avx3"), std::nullopt);
  EXPECT_EQ(crc_kernel_from_name(""), std::nullopt);
  const KernelRestorer restore;
  EXPECT_NE(crc_kernel_best(), CrcKernel::kAuto);
  EXPECT_TRUE(crc_kernel_supported(crc_kernel_best()));
  ASSERT_TRUE(set_crc_kernel(CrcKernel::kAuto).ok());
  EXPECT_EQ(crc_kernel(), crc_kernel_best());
}

TEST(CrcKernel, UnknownOrMissingKernelSettingExitsWithAMessage) {
  // Receive: UROCE_CRC_KERNEL values "avx3" (no such kernel) and, where this
  //   CPU lacks one, that kernel's name.
  // Expect: exit status 2 and a message naming the setting; a kernel the CPU
  //   lacks is refused by set_crc_kernel, leaving the kernel in use as it was.
  EXPECT_EXIT(apply_crc_kernel_setting("avx3"), ::testing::ExitedWithCode(2),
              "UROCE_CRC_KERNEL='avx3' is not a CRC kernel");
  for (const CrcKernel k : kCrcKernels) {
    if (crc_kernel_supported(k)) continue;
    const std::string name(crc_kernel_name(k));
    EXPECT_EXIT(apply_crc_kernel_setting(name.c_str()), ::testing::ExitedWithCode(2),
                "UROCE_CRC_KERNEL=" + name + ": this CPU lacks");
    const CrcKernel before = crc_kernel();
    EXPECT_EQ(set_crc_kernel(k).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(crc_kernel(), before);
  }
}

TEST(CrcKernel, TheMessageNamesOnlyTheFeaturesTheCpuLacks) {
  // Receive: UROCE_CRC_KERNEL=avx2 on a CPU with AVX2 but not VPCLMULQDQ
  //   (Zen 1 and 2, Intel before Ice Lake), avx512 on one with AVX2 and
  //   VPCLMULQDQ but not AVX-512 (Zen 3, Alder Lake). The CPU's features
  //   are read here with the compiler's builtin, not through uroce.
  // Expect: exit status 2, the message naming just the missing features.
  __builtin_cpu_init();
  const bool fold = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  const bool avx2 = fold && __builtin_cpu_supports("avx2");
  const bool vpclmul = __builtin_cpu_supports("vpclmulqdq");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (avx2 && !vpclmul) {
    EXPECT_EXIT(apply_crc_kernel_setting("avx2"), ::testing::ExitedWithCode(2),
                "UROCE_CRC_KERNEL=avx2: this CPU lacks VPCLMULQDQ, which");
  } else if (avx2 && vpclmul && !__builtin_cpu_supports("avx512f")) {
    EXPECT_EXIT(apply_crc_kernel_setting("avx512"), ::testing::ExitedWithCode(2),
                "UROCE_CRC_KERNEL=avx512: this CPU lacks AVX-512F, AVX-512BW, AVX-512DQ and AVX-512VL, which");
  } else {
    GTEST_SKIP() << "this CPU has " << (avx2 && vpclmul && avx512 ? "every kernel" : "neither such mix");
  }
}

TEST(CrcKernel, StartUpHonoursTheSetting) {
  // Receive: the setting as start-up reads it (UROCE_CRC_KERNEL, or unset).
  // Expect: the kernel in use is the one it names, or the best where unset.
  const char* v = std::getenv("UROCE_CRC_KERNEL");
  CrcKernel want = CrcKernel::kAuto;
  if (v != nullptr && *v != '\0') {
    const std::optional<CrcKernel> named = crc_kernel_from_name(v);
    ASSERT_TRUE(named.has_value()) << v;
    want = *named;
  }
  EXPECT_EQ(crc_kernel(), want == CrcKernel::kAuto ? crc_kernel_best() : want);
}

}  // namespace
}  // namespace uroce::wire
