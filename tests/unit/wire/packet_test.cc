// Tests for stack/wire/packet.cc: parse and build against real rdma_rxe frames
// (tests/data, golden vectors from an independent implementation), single-bit
// corruption, truncation at every length, one crafted frame per ParseError
// reason, and RoCEv1 / IPv6 / 802.1Q frames.
#include "stack/wire/packet.h"

#include <array>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/wire/icrc_reference.h"
#include "tests/unit/wire/test_util.h"

namespace uroce::wire {
namespace {

using test::captured_roce_frames;
using test::CapturedFrame;
using test::get16;
using test::kBthOff;
using test::kIpOff;
using test::kUdpOff;

uint32_t get24(const uint8_t* p) { return uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2]; }

std::span<const uint8_t> payload_of(const std::vector<uint8_t>& f, const PacketDesc& d) {
  return std::span<const uint8_t>(f).subspan(d.payload_off, d.payload_len);
}

void expect_same_desc(const PacketDesc& a, const PacketDesc& b) {
  EXPECT_EQ(a.dst_mac, b.dst_mac);
  EXPECT_EQ(a.src_mac, b.src_mac);
  EXPECT_EQ(a.has_vlan, b.has_vlan);
  EXPECT_EQ(a.vlan_tci, b.vlan_tci);
  EXPECT_EQ(a.l3, b.l3);
  EXPECT_EQ(a.traffic_class, b.traffic_class);
  EXPECT_EQ(a.hop_limit, b.hop_limit);
  EXPECT_EQ(a.flow_label, b.flow_label);
  EXPECT_EQ(a.sgid, b.sgid);
  EXPECT_EQ(a.dgid, b.dgid);
  EXPECT_EQ(a.udp_sport, b.udp_sport);
  EXPECT_EQ(a.opcode, b.opcode);
  EXPECT_EQ(a.se, b.se);
  EXPECT_EQ(a.mig, b.mig);
  EXPECT_EQ(a.pad, b.pad);
  EXPECT_EQ(a.pkey, b.pkey);
  EXPECT_EQ(a.fecn, b.fecn);
  EXPECT_EQ(a.becn, b.becn);
  EXPECT_EQ(a.dest_qp, b.dest_qp);
  EXPECT_EQ(a.ack_req, b.ack_req);
  EXPECT_EQ(a.psn, b.psn);
  EXPECT_EQ(a.deth_qkey, b.deth_qkey);
  EXPECT_EQ(a.deth_src_qp, b.deth_src_qp);
  EXPECT_EQ(a.reth_va, b.reth_va);
  EXPECT_EQ(a.reth_rkey, b.reth_rkey);
  EXPECT_EQ(a.reth_len, b.reth_len);
  EXPECT_EQ(a.atomic_va, b.atomic_va);
  EXPECT_EQ(a.atomic_rkey, b.atomic_rkey);
  EXPECT_EQ(a.atomic_swap_add, b.atomic_swap_add);
  EXPECT_EQ(a.atomic_compare, b.atomic_compare);
  EXPECT_EQ(a.aeth_syndrome, b.aeth_syndrome);
  EXPECT_EQ(a.aeth_msn, b.aeth_msn);
  EXPECT_EQ(a.atomic_ack_orig, b.atomic_ack_orig);
  EXPECT_EQ(a.imm, b.imm);
  EXPECT_EQ(a.ieth_rkey, b.ieth_rkey);
  EXPECT_EQ(a.payload_len, b.payload_len);
}

TEST(PacketCaptured, A17_EveryCapturedRoceFrameParsesVerifiesAndRebuildsByteForByte) {
  // Receive: every RoCEv2 frame of every bundled rdma_rxe capture (found by
  //   raw bytes: IPv4, UDP dport 4791), with ICRC checking on.
  // Expect: kOk; BTH fields equal the raw bytes; the carried ICRC equals the
  //   zlib reference; build() from the description gives the same bytes.
  const auto& frames = captured_roce_frames();
  ASSERT_FALSE(frames.empty());
  std::set<std::string> files_seen;
  for (const CapturedFrame& cf : frames) {
    SCOPED_TRACE(cf.where());
    files_seen.insert(cf.file);
    const std::vector<uint8_t>& f = cf.bytes;
    PacketDesc d;
    ASSERT_EQ(parse(f, d), ParseError::kOk) << parse_error_name(parse(f, d));
    EXPECT_EQ(d.opcode, f[kBthOff]);
    EXPECT_EQ(d.pkey, get16(&f[kBthOff + 2]));
    EXPECT_EQ(d.dest_qp, get24(&f[kBthOff + 5]));
    EXPECT_EQ(d.ack_req, (f[kBthOff + 8] & 0x80) != 0);
    EXPECT_EQ(d.psn, get24(&f[kBthOff + 9]));
    EXPECT_EQ(d.pad, (f[kBthOff + 1] >> 4) & 3);
    EXPECT_EQ(d.udp_sport, get16(&f[kUdpOff]));
    EXPECT_EQ(d.icrc, test::carried_icrc(f));
    EXPECT_EQ(d.icrc, test::reference_icrc(f));
    EXPECT_EQ(size_t(d.payload_off) + d.payload_len + d.pad + kIcrcBytes, cf.ip_end);

    std::vector<uint8_t> out(f.size() + 64, 0xee);
    const size_t n = build(d, payload_of(f, d), out);
    ASSERT_EQ(n, f.size());
    out.resize(n);
    EXPECT_EQ(out, f);
  }
  EXPECT_EQ(files_seen.size(), test::test_pcaps().size()) << "a bundled pcap has no RoCE frame";
}

TEST(PacketCaptured, A17_3_3_AnySingleBitFlipOutsideMaskedFieldsFailsParse) {
  // Receive: each captured RoCE frame with one bit flipped, for every bit.
  // Expect: parse fails (bad ICRC, bad IP checksum, or another reason) for
  //   every bit the ICRC or IP checksum protects. Unchanged kOk only where the
  //   spec leaves the bit unprotected by design: the MAC addresses (the
  //   Ethernet FCS covers them) and the ICRC-masked UDP checksum and BTH byte 4.
  //   IPv4 TOS/TTL are ICRC-masked but under the IP checksum: bad_ip_checksum.
  size_t flips = 0, failures = 0;
  for (const CapturedFrame& cf : captured_roce_frames()) {
    std::vector<uint8_t> f = cf.bytes;
    for (size_t i = 0; i < f.size(); ++i) {
      const bool mac = i < 12;
      const bool padding = i >= cf.ip_end;
      const bool ip_masked = i == kIpOff + 1 || i == kIpOff + 8;  // TOS, TTL
      const bool ip_csum = i == kIpOff + 10 || i == kIpOff + 11;
      const bool udp_csum = i == kUdpOff + 6 || i == kUdpOff + 7;
      const bool bth_resv8a = i == kBthOff + 4;
      for (int bit = 0; bit < 8; ++bit) {
        f[i] ^= uint8_t(1 << bit);
        PacketDesc d;
        const ParseError e = parse(f, d);
        f[i] ^= uint8_t(1 << bit);
        ++flips;
        bool good;
        if (mac || padding || udp_csum || bth_resv8a) {
          good = e == ParseError::kOk;
        } else if (ip_masked || ip_csum) {
          good = e == ParseError::kBadIpChecksum;
        } else {
          good = e != ParseError::kOk;
        }
        if (!good && ++failures <= 10) {
          ADD_FAILURE() << cf.where() << " byte " << i << " bit " << bit << ": " << parse_error_name(e);
        }
      }
    }
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_GT(flips, 1'000'000u);  // all 422 frames, all bits
}

TEST(PacketCaptured, EveryPrefixOfEveryFrameFailsWithoutReadingPastIt) {
  // Receive: every captured RoCE frame cut to every length 0..size-1, each in a
  //   heap buffer of exactly that size (so ASan flags any read past the end).
  // Expect: an error (never a crash) while the cut is inside the IP datagram;
  //   kOk only once the whole datagram is present.
  for (const CapturedFrame& cf : captured_roce_frames()) {
    for (size_t len = 0; len < cf.bytes.size(); ++len) {
      auto buf = std::make_unique<uint8_t[]>(len == 0 ? 1 : len);
      std::copy_n(cf.bytes.begin(), len, buf.get());
      const std::span<const uint8_t> cut(buf.get(), len);
      PacketDesc d;
      const ParseError e = parse(cut, d);
      const ParseError e_nocheck = parse(cut, d, ParseOptions{.verify_icrc = false});
      if (len < cf.ip_end) {
        ASSERT_NE(e, ParseError::kOk) << cf.where() << " cut to " << len;
        ASSERT_NE(e_nocheck, ParseError::kOk) << cf.where() << " cut to " << len;
        ASSERT_FALSE(is_not_roce(e)) << cf.where() << " cut to " << len << ": " << parse_error_name(e);
      } else {
        ASSERT_EQ(e, ParseError::kOk) << cf.where() << " cut to " << len;
      }
    }
  }
}

TEST(PacketCaptured, EveryConsistentTruncationFailsWithoutReadingPastIt) {
  // Receive: every captured RoCE frame cut to every length from the end of the
  //   IPv4 header to one byte short, with the IPv4 total length and UDP length
  //   rewritten to match the cut and the IP checksum fixed, so the parser gets
  //   past the IP and UDP length checks and into the BTH and extension headers.
  //   Each cut sits in a heap buffer of exactly its size (ASan sees overreads).
  // Expect: never a crash; kShort whenever the cut leaves no room for the BTH,
  //   the opcode's extension headers and the ICRC; with ICRC checking on, never
  //   kOk (the ICRC no longer matches what is left).
  size_t cuts = 0;
  for (const CapturedFrame& cf : captured_roce_frames()) {
    PacketDesc full;
    ASSERT_EQ(parse(cf.bytes, full), ParseError::kOk);
    const size_t headers_end = kBthOff + full.op().hdr_len + kIcrcBytes;
    for (size_t len = kUdpOff; len < cf.ip_end; ++len) {
      std::vector<uint8_t> f(cf.bytes.begin(), cf.bytes.begin() + long(len));
      test::put16(&f[kIpOff + 2], uint16_t(len - kIpOff));
      if (len >= kUdpOff + 6) test::put16(&f[kUdpOff + 4], uint16_t(len - kUdpOff));
      test::fix_ipv4_checksum(f);
      auto buf = std::make_unique<uint8_t[]>(len);
      std::copy(f.begin(), f.end(), buf.get());
      const std::span<const uint8_t> cut(buf.get(), len);
      PacketDesc d;
      const ParseError e = parse(cut, d);
      const ParseError e_nocheck = parse(cut, d, ParseOptions{.verify_icrc = false});
      ASSERT_NE(e, ParseError::kOk) << cf.where() << " cut to " << len;
      if (len < headers_end) {
        ASSERT_TRUE(e == ParseError::kShort || (len < kUdpOff + 8 && e == ParseError::kLengthMismatch))
            << cf.where() << " cut to " << len << ": " << parse_error_name(e);
        ASSERT_EQ(e_nocheck, e) << cf.where() << " cut to " << len;
      }
      ++cuts;
    }
  }
  EXPECT_GT(cuts, 100'000u);
}

// ---- one crafted frame per ParseError reason ----

const CapturedFrame& first_frame_with_opcode(uint8_t opcode) {
  for (const CapturedFrame& cf : captured_roce_frames()) {
    if (cf.bytes[kBthOff] == opcode) return cf;
  }
  ADD_FAILURE() << "no captured frame with opcode " << int(opcode);
  return captured_roce_frames().front();
}

// A non-RoCE frame from the captures whose bytes satisfy pred.
template <typename Pred>
std::vector<uint8_t> captured_other_frame(Pred pred) {
  for (const auto& path : test::test_pcaps()) {
    auto recs = read_pcap(path.string());
    if (!recs.ok()) continue;
    for (const auto& r : *recs) {
      if (pred(r.data)) return r.data;
    }
  }
  ADD_FAILURE() << "no such frame in the captures";
  return {};
}

// Changes the IPv4 total length and UDP length by delta, resizing the frame.
void grow_datagram(std::vector<uint8_t>& f, int delta) {
  test::put16(&f[kIpOff + 2], uint16_t(get16(&f[kIpOff + 2]) + delta));
  test::put16(&f[kUdpOff + 4], uint16_t(get16(&f[kUdpOff + 4]) + delta));
  f.resize(size_t(long(f.size()) + delta));
  test::fix_ipv4_checksum(f);
}

struct Crafted {
  std::string what;
  std::vector<uint8_t> frame;
  ParseError expect;
};

std::vector<Crafted> crafted_frames() {
  std::vector<Crafted> v;
  const std::vector<uint8_t> send = first_frame_with_opcode(kRcSendOnly).bytes;  // 64-byte payload
  const std::vector<uint8_t> ack = first_frame_with_opcode(kRcAcknowledge).bytes;
  auto edit = [&](std::string what, std::vector<uint8_t> f, auto&& fn, ParseError e) {
    fn(f);
    v.push_back({std::move(what), std::move(f), e});
  };

  // Receive: an ARP request (captured). Expect: not_roce_ethertype.
  v.push_back({"ARP", captured_other_frame([](const auto& f) { return f.size() >= 14 && get16(&f[12]) == 0x0806; }),
               ParseError::kNotIp});
  // Receive: a TCP segment of the out-of-band exchange (captured). Expect: not_roce_ip_proto.
  v.push_back({"TCP", captured_other_frame([](const auto& f) {
                 return f.size() >= 34 && get16(&f[12]) == 0x0800 && f[kIpOff + 9] == 6;
               }),
               ParseError::kNotUdp});
  // Receive: a RoCE SEND readdressed to UDP port 4792. Expect: not_roce_udp_port.
  edit("UDP to 4792", send, [](auto& f) { test::put16(&f[kUdpOff + 2], 4792); }, ParseError::kNotRocePort);
  // Receive: 13 bytes, less than an Ethernet header. Expect: short.
  v.push_back({"13-byte frame", std::vector<uint8_t>(send.begin(), send.begin() + 13), ParseError::kShort});
  // Receive: IP and UDP lengths that end the datagram inside the BTH, frame cut there
  //   (consistent lengths, good IP checksum). Expect: short.
  edit("datagram ends inside the BTH", send,
       [](auto& f) { grow_datagram(f, -int(f.size() - (kBthOff + 8))); }, ParseError::kShort);
  // Receive: IP total length 24 (the datagram ends inside the UDP header), the
  //   rest of the frame still there as Ethernet padding. Expect: short.
  edit("datagram ends inside the UDP header", send,
       [](auto& f) {
         test::put16(&f[kIpOff + 2], 24);
         test::fix_ipv4_checksum(f);
       },
       ParseError::kShort);
  // Receive: an ACK cut so the AETH is missing. Expect: short.
  edit("ACK without its AETH", ack, [](auto& f) { grow_datagram(f, -4); }, ParseError::kShort);
  // Receive: Ethertype IPv4 with IP version 6 in the header. Expect: bad_ip_version.
  edit("IP version 6 in an IPv4 frame", send, [](auto& f) { f[kIpOff] = 0x65; }, ParseError::kBadIpVersion);
  // Receive: a SEND with 4 bytes of IPv4 options (IHL 6, NOPs), lengths and checksum
  //   consistent. Expect: ip_options (A17.4.5.1: RoCEv2 IPv4 headers carry no options).
  edit("IPv4 options", send,
       [](auto& f) {
         f.insert(f.begin() + long(kIpOff + 20), {1, 1, 1, 1});
         f[kIpOff] = 0x46;
         test::put16(&f[kIpOff + 2], uint16_t(get16(&f[kIpOff + 2]) + 4));
         test::fix_ipv4_checksum(f);
       },
       ParseError::kIpOptions);
  // Receive: a SEND with More Fragments set (checksum fixed). Expect: ip_fragment.
  edit("IPv4 MF set", send,
       [](auto& f) {
         f[kIpOff + 6] |= 0x20;
         test::fix_ipv4_checksum(f);
       },
       ParseError::kIpFragment);
  // Receive: a SEND with fragment offset 1 (checksum fixed). Expect: ip_fragment.
  edit("IPv4 fragment offset", send,
       [](auto& f) {
         f[kIpOff + 7] = 1;
         test::fix_ipv4_checksum(f);
       },
       ParseError::kIpFragment);
  // Receive: a SEND with its IPv4 header checksum off by one bit. Expect: bad_ip_checksum.
  edit("IPv4 checksum", send, [](auto& f) { f[kIpOff + 11] ^= 1; }, ParseError::kBadIpChecksum);
  // Receive: IP total length 8 bytes beyond the end of the frame (checksum fixed).
  // Expect: length_mismatch.
  edit("IP length past the frame", send,
       [](auto& f) {
         test::put16(&f[kIpOff + 2], uint16_t(get16(&f[kIpOff + 2]) + 8));
         test::fix_ipv4_checksum(f);
       },
       ParseError::kLengthMismatch);
  // Receive: UDP length one less than the IP payload. Expect: length_mismatch.
  edit("UDP length", send, [](auto& f) { test::put16(&f[kUdpOff + 4], uint16_t(get16(&f[kUdpOff + 4]) - 1)); },
       ParseError::kLengthMismatch);
  // Receive: an ACK carrying 4 payload bytes, lengths, checksum and ICRC all
  //   consistent. Expect: length_mismatch (an Acknowledge has no payload).
  edit("ACK with payload", ack,
       [](auto& f) {
         grow_datagram(f, 4);
         test::reseal(f);
       },
       ParseError::kLengthMismatch);
  // Receive: BTH TVer 1, ICRC resealed. Expect: bad_bth_tver.
  edit("BTH TVer 1", send,
       [](auto& f) {
         f[kBthOff + 1] |= 1;
         test::reseal(f);
       },
       ParseError::kBadTver);
  // Receive: opcode 0x15 (reserved in IBA Table 38), ICRC resealed. Expect: unknown_opcode.
  edit("opcode 0x15", send,
       [](auto& f) {
         f[kBthOff] = 0x15;
         test::reseal(f);
       },
       ParseError::kUnknownOpcode);
  // Receive: opcode 0x40 (Reliable Datagram, not used by RoCE), ICRC resealed.
  // Expect: unknown_opcode.
  edit("RD opcode 0x40", send,
       [](auto& f) {
         f[kBthOff] = 0x40;
         test::reseal(f);
       },
       ParseError::kUnknownOpcode);
  // Receive: an ACK with PadCnt 1 (IBA 9.2.3: pad only with payload), ICRC resealed.
  // Expect: bad_pad_count.
  edit("pad on an ACK", ack,
       [](auto& f) {
         f[kBthOff + 1] |= 1 << 4;
         test::reseal(f);
       },
       ParseError::kBadPad);
  // Receive: an ACK carrying 4 bytes with PadCnt 1, lengths and ICRC consistent
  //   (so the pad fits in the bytes present). Expect: bad_pad_count, not
  //   length_mismatch: pad on an opcode without payload is reported first.
  edit("pad on an ACK with bytes", ack,
       [](auto& f) {
         grow_datagram(f, 4);
         f[kBthOff + 1] |= 1 << 4;
         test::reseal(f);
       },
       ParseError::kBadPad);
  // Receive: a SEND Only cut to 2 payload bytes with PadCnt 3 (more pad than
  //   bytes), lengths and ICRC consistent. Expect: bad_pad_count.
  edit("pad longer than the payload", send,
       [](auto& f) {
         grow_datagram(f, -62);
         f[kBthOff + 1] = uint8_t((f[kBthOff + 1] & ~0x30) | 3 << 4);
         test::reseal(f);
       },
       ParseError::kBadPad);
  // Receive: a SEND Only cut to 61 payload bytes with PadCnt 0 (payload +
  //   pad not a whole number of words), lengths and ICRC consistent.
  //   Expect: bad_pad_count.
  edit("payload and pad not words", send,
       [](auto& f) {
         grow_datagram(f, -3);
         f[kBthOff + 1] = uint8_t(f[kBthOff + 1] & ~0x30);
         test::reseal(f);
       },
       ParseError::kBadPad);
  // Receive: a SEND with its ICRC off by one bit. Expect: bad_icrc.
  edit("ICRC", send, [](auto& f) { f[f.size() - 1] ^= 0x80; }, ParseError::kBadIcrc);
  return v;
}

TEST(PacketParse, EachParseErrorReasonComesFromItsCraftedFrame) {
  // Receive: the crafted frames above, each a captured frame with one defect.
  // Expect: each gives exactly its reason, and together they cover every reason.
  std::set<ParseError> seen;
  for (const Crafted& c : crafted_frames()) {
    SCOPED_TRACE(c.what);
    PacketDesc d;
    EXPECT_EQ(parse_error_name(parse(c.frame, d)), parse_error_name(c.expect));
    seen.insert(c.expect);
  }
  for (size_t i = 1; i < size_t(ParseError::kCount); ++i) {
    EXPECT_TRUE(seen.count(ParseError(i))) << "no crafted frame for " << parse_error_name(ParseError(i));
  }
}

TEST(PacketParse, CraftingHelpersWithoutADefectKeepFramesValid) {
  // Receive: the captured SEND Only run through the same editing helpers the
  //   crafted frames use, but without a defect: checksum and ICRC recomputed
  //   unchanged; 4 payload bytes added; payload cut to 4 bytes (whole words:
  //   the pad count stays 0, IBA 9.2.3).
  // Expect: kOk each time (and the reseal reproduces the captured bytes), so
  //   each crafted frame above fails because of its defect alone.
  const std::vector<uint8_t> send = first_frame_with_opcode(kRcSendOnly).bytes;
  std::vector<uint8_t> f = send;
  test::fix_ipv4_checksum(f);
  test::reseal(f);
  EXPECT_EQ(f, send);
  PacketDesc d;
  f = send;
  grow_datagram(f, 4);
  test::reseal(f);
  ASSERT_EQ(parse(f, d), ParseError::kOk);
  EXPECT_EQ(d.payload_len, 68u);
  f = send;
  grow_datagram(f, -60);
  test::reseal(f);
  ASSERT_EQ(parse(f, d), ParseError::kOk);
  EXPECT_EQ(d.payload_len, 4u);
}

TEST(PacketParse, TrailingEthernetPaddingIsIgnored) {
  // Receive: a captured ACK followed by 10 zero bytes (as a NIC may deliver
  //   after the IP datagram).
  // Expect: kOk with the same fields; the ICRC is found at the datagram end.
  const std::vector<uint8_t> ack = first_frame_with_opcode(kRcAcknowledge).bytes;
  std::vector<uint8_t> padded = ack;
  padded.resize(ack.size() + 10, 0);
  PacketDesc a, b;
  ASSERT_EQ(parse(ack, a), ParseError::kOk);
  ASSERT_EQ(parse(padded, b), ParseError::kOk);
  expect_same_desc(a, b);
  EXPECT_EQ(a.icrc, b.icrc);
}

TEST(PacketParse, IBA_9_2_ReservedBitsAreIgnoredOnReceive) {
  // Receive: a captured UD SEND with the BTH resv7 bits (beside AckReq) and the
  //   DETH reserved byte (before SrcQP) set, ICRC resealed.
  // Expect: kOk; PSN, AckReq and SrcQP read as if the bits were zero.
  const std::vector<uint8_t> ud = first_frame_with_opcode(kUdSendOnly).bytes;
  std::vector<uint8_t> f = ud;
  f[kBthOff + 8] |= 0x7f;   // resv7
  f[kBthOff + 12 + 4] = 0xa5;  // DETH resv8
  test::reseal(f);
  PacketDesc want, got;
  ASSERT_EQ(parse(ud, want), ParseError::kOk);
  ASSERT_EQ(parse(f, got), ParseError::kOk);
  EXPECT_EQ(got.psn, want.psn);
  EXPECT_EQ(got.ack_req, want.ack_req);
  EXPECT_EQ(got.deth_src_qp, want.deth_src_qp);
  EXPECT_EQ(got.deth_qkey, want.deth_qkey);
}

TEST(PacketParse, ParseErrorNamesAreDistinctCounterNames) {
  // Receive: every ParseError value. Expect: a distinct, non-empty name each.
  std::set<std::string_view> names;
  for (size_t i = 0; i < size_t(ParseError::kCount); ++i) {
    const std::string_view n = parse_error_name(ParseError(i));
    EXPECT_FALSE(n.empty());
    EXPECT_TRUE(names.insert(n).second) << n;
  }
  EXPECT_EQ(parse_error_name(ParseError::kBadIcrc), "bad_icrc");
}

// ---- frames no capture has: RoCEv1, IPv6, 802.1Q ----

PacketDesc sample_desc(L3Kind l3, uint8_t opcode) {
  PacketDesc d;
  d.dst_mac = MacAddr{{0x52, 0x54, 0x00, 0x50, 0x00, 0x01}};
  d.src_mac = MacAddr{{0x52, 0x54, 0x00, 0x50, 0x00, 0x02}};
  d.l3 = l3;
  d.traffic_class = 0x6a;  // DSCP 26, ECN 10
  d.hop_limit = 17;
  d.flow_label = l3 == L3Kind::kIpv4 ? 0 : 0xabcde;
  d.ip_id = 0x1234;
  if (l3 == L3Kind::kIpv4) {
    const uint8_t s[4] = {10, 50, 0, 2}, t[4] = {10, 50, 0, 1};
    d.sgid = Gid::from_ipv4(s);
    d.dgid = Gid::from_ipv4(t);
  } else {
    for (uint8_t i = 0; i < 16; ++i) {
      d.sgid.raw[i] = uint8_t(0xfe + i);
      d.dgid.raw[i] = uint8_t(0x20 + 3 * i);
    }
  }
  d.udp_sport = 0xc123;
  d.opcode = opcode;
  d.se = true;
  d.pkey = 0x8001;
  d.dest_qp = 0xabcdef;
  d.ack_req = true;
  d.psn = 0xfffffe;
  d.deth_qkey = 0x11111111;
  d.deth_src_qp = 0x000011;
  d.reth_va = 0x0000557485801000;
  d.reth_rkey = 0x204;
  d.reth_len = 4096;
  d.atomic_va = 0x00007f0011223344;
  d.atomic_rkey = 0x305;
  d.atomic_swap_add = 0x0102030405060708;
  d.atomic_compare = 0x1112131415161718;
  d.aeth_syndrome = 0x1f;
  d.aeth_msn = 0x00fffe;
  d.atomic_ack_orig = 0x35313f3855f62652;
  d.imm = 0xddeeff00;
  d.ieth_rkey = 0x4242;
  if (d.op().flags & kPayload) {
    d.payload_len = 13;
    d.pad = pad_for(d.payload_len);
  }
  return d;
}

std::vector<uint8_t> build_frame(const PacketDesc& d) {
  std::vector<uint8_t> payload(d.payload_len);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(0xa0 + i);
  std::vector<uint8_t> out(frame_len(d));
  EXPECT_EQ(build(d, payload, out), out.size());
  return out;
}

// Only the fields the opcode carries survive a round trip; zero the rest.
PacketDesc carried_fields(PacketDesc d) {
  const OpcodeInfo& op = d.op();
  if (!op.has(Hdr::kDeth)) d.deth_qkey = d.deth_src_qp = 0;
  if (!op.has(Hdr::kReth)) d.reth_va = d.reth_rkey = d.reth_len = 0;
  if (!op.has(Hdr::kAtomicEth)) d.atomic_va = d.atomic_rkey = d.atomic_swap_add = d.atomic_compare = 0;
  if (!op.has(Hdr::kAeth)) d.aeth_syndrome = uint8_t(d.aeth_msn = 0);
  if (!op.has(Hdr::kAtomicAckEth)) d.atomic_ack_orig = 0;
  if (!op.has(Hdr::kImmDt)) d.imm = 0;
  if (!op.has(Hdr::kIeth)) d.ieth_rkey = 0;
  if (d.l3 == L3Kind::kGrh) d.udp_sport = 0;
  return d;
}

void expect_round_trip(const PacketDesc& want, uint16_t ether_type) {
  const std::vector<uint8_t> f = build_frame(want);
  const size_t et_off = want.has_vlan ? 16 : 12;
  EXPECT_EQ(get16(&f[et_off]), ether_type);
  PacketDesc got;
  ASSERT_EQ(parse(f, got), ParseError::kOk) << parse_error_name(parse(f, got));
  expect_same_desc(got, carried_fields(want));
  EXPECT_EQ(got.icrc, test::reference_icrc(f));  // hand-made zlib ICRC, not our encoder
  std::vector<uint8_t> again(frame_len(got));
  ASSERT_EQ(build(got, payload_of(f, got), again), f.size());
  EXPECT_EQ(again, f);
}

TEST(PacketBuild, A16_RoceV1GrhFramesOfEveryOpcodeRoundTrip) {
  // Receive: for every valid opcode, a RoCEv1 frame (Ethertype 0x8915, GRH with
  //   next header 0x1B, no UDP) built from a description with every field set.
  // Expect: parse gives the description back, the ICRC equals the zlib
  //   reference over the masked GRH, and rebuilding gives the same bytes.
  for (int op = 0; op < 256; ++op) {
    if (!(kOpcodes[size_t(op)].flags & kValid)) continue;
    SCOPED_TRACE(kOpcodes[size_t(op)].name);
    expect_round_trip(sample_desc(L3Kind::kGrh, uint8_t(op)), 0x8915);
  }
}

TEST(PacketBuild, A17_RoceV2Ipv6FramesOfEveryOpcodeRoundTrip) {
  // Receive: for every valid opcode, a RoCEv2 frame over IPv6 with non-zero
  //   traffic class, flow label and hop limit.
  // Expect: parse gives the description back, the ICRC equals the zlib
  //   reference (TC, flow label, hop limit masked), rebuilding is identical.
  for (int op = 0; op < 256; ++op) {
    if (!(kOpcodes[size_t(op)].flags & kValid)) continue;
    SCOPED_TRACE(kOpcodes[size_t(op)].name);
    expect_round_trip(sample_desc(L3Kind::kIpv6, uint8_t(op)), 0x86dd);
  }
}

TEST(PacketBuild, A17_RoceV2Ipv4FramesOfEveryOpcodeRoundTrip) {
  // Receive: for every valid opcode, a RoCEv2 IPv4 frame with every field set.
  // Expect: parse gives it back, zlib-reference ICRC, identical rebuild.
  for (int op = 0; op < 256; ++op) {
    if (!(kOpcodes[size_t(op)].flags & kValid)) continue;
    SCOPED_TRACE(kOpcodes[size_t(op)].name);
    expect_round_trip(sample_desc(L3Kind::kIpv4, uint8_t(op)), 0x0800);
  }
}

TEST(PacketBuild, IBA_9_2_WriteHeadersWritesEveryHeaderByteWhateverTheBufferHeld) {
  // write_headers does not clear the header block first (it writes every
  // field of every header kOpcodes lays out), so reserved bits (BTH resv6 /
  // resv7, DETH resv8, the CNP's 16 reserved bytes: IBA 9.2, A17.9.2) must
  // still go out as zeros whatever the mbuf held before.
  // Receive: for every valid opcode and L3 kind, headers written into a
  //   buffer of 0x00 bytes and into one of 0xff bytes.
  // Expect: the same header bytes in both.
  for (L3Kind l3 : {L3Kind::kIpv4, L3Kind::kIpv6, L3Kind::kGrh}) {
    for (int op = 0; op < 256; ++op) {
      if (!(kOpcodes[size_t(op)].flags & kValid)) continue;
      SCOPED_TRACE(kOpcodes[size_t(op)].name);
      const PacketDesc d = sample_desc(l3, uint8_t(op));
      std::vector<uint8_t> zeros(header_len(d), 0x00), ones(header_len(d), 0xff);
      ASSERT_EQ(write_headers(d, zeros), zeros.size());
      ASSERT_EQ(write_headers(d, ones), ones.size());
      EXPECT_EQ(zeros, ones);
    }
  }
}

TEST(PacketBuild, Vlan8021QTaggedCapturedFrameRoundTrips) {
  // Receive: captured rxe frames with an 802.1Q tag (TCI 0x6005: PCP 3, VID 5)
  //   inserted by hand after the source MAC.
  // Expect: parse reports the tag and the same transport fields as untagged,
  //   the ICRC is still valid (it does not cover L2), and build() from the
  //   tagged description gives exactly the hand-tagged bytes.
  for (const CapturedFrame& cf : captured_roce_frames()) {
    SCOPED_TRACE(cf.where());
    std::vector<uint8_t> tagged = cf.bytes;
    tagged.insert(tagged.begin() + 12, {0x81, 0x00, 0x60, 0x05});
    PacketDesc plain, got;
    ASSERT_EQ(parse(cf.bytes, plain), ParseError::kOk);
    ASSERT_EQ(parse(tagged, got), ParseError::kOk) << parse_error_name(parse(tagged, got));
    EXPECT_TRUE(got.has_vlan);
    EXPECT_EQ(got.vlan_tci, 0x6005);
    plain.has_vlan = true;
    plain.vlan_tci = 0x6005;
    expect_same_desc(got, plain);
    EXPECT_EQ(got.payload_off, plain.payload_off + 4);
    std::vector<uint8_t> out(frame_len(got));
    ASSERT_EQ(build(got, payload_of(tagged, got), out), tagged.size());
    EXPECT_EQ(out, tagged);
  }
}

// A descriptor whose path fields (those below the BTH) are all wrong, but
// for has_vlan, l3 and udp_sport (written per packet): with d.path set,
// write_headers must not read them.
PacketDesc with_path_fields_scrambled(PacketDesc d, const PathTemplate& t) {
  d.path = &t;
  d.dst_mac = d.src_mac = MacAddr{{0xde, 0xad, 0xbe, 0xef, 0x00, 0x01}};
  d.vlan_tci = 0x0bad;
  d.traffic_class = 0x55;
  d.hop_limit = 3;
  d.flow_label = 0x12345;
  d.ip_id = 0x7777;
  d.dont_fragment = !d.dont_fragment;
  d.sgid = d.dgid = Gid{};
  d.udp_dport = d.udp_checksum = 0x4242;
  return d;
}

TEST(PacketBuild, PathTemplateRebuildsCapturedRxeFramesByteForByte) {
  // Receive: every RoCEv2 frame of the bundled rdma_rxe captures, untagged and
  //   with an 802.1Q tag inserted; for each, a path template made from its
  //   own path fields on another packet (an ACK: no payload, other lengths).
  // Expect: build() through the template, the descriptor's own path fields
  //   scrambled, gives rxe's bytes: the IP total length, IPv4 checksum and UDP
  //   length patched per packet as Linux computed them.
  for (const CapturedFrame& cf : captured_roce_frames()) {
    SCOPED_TRACE(cf.where());
    for (const bool vlan : {false, true}) {
      std::vector<uint8_t> f = cf.bytes;
      if (vlan) f.insert(f.begin() + 12, {0x81, 0x00, 0x60, 0x05});
      PacketDesc d;
      ASSERT_EQ(parse(f, d), ParseError::kOk);
      PacketDesc other = d;
      other.opcode = kRcAcknowledge;
      other.payload_len = 0;
      other.pad = 0;
      PathTemplate t;
      make_path_template(other, t);
      std::vector<uint8_t> out(frame_len(d), 0xee);
      ASSERT_EQ(build(with_path_fields_scrambled(d, t), payload_of(f, d), out), f.size());
      EXPECT_EQ(out, f);
    }
  }
}

TEST(PacketBuild, PathTemplateWritesWhatWriteHeadersWritesForEveryOpcodeAndL3) {
  // Receive: for every valid opcode, L3 kind (IPv4, IPv6, GRH), with and
  //   without 802.1Q, payloads of 0 to 4096 bytes: headers written from a
  //   template made on another opcode and UDP source port (a sprayed QP's
  //   packets leave on other ports than its template's), into buffers of
  //   exactly the frame's size (the shortest frames are shorter than the
  //   template's fixed copy).
  // Expect: the frame write_headers writes from the descriptor's fields, its
  //   own UDP source port included, and one that parses (IPv4 checksum,
  //   lengths) with a zlib-reference ICRC.
  for (L3Kind l3 : {L3Kind::kIpv4, L3Kind::kIpv6, L3Kind::kGrh}) {
    for (const bool vlan : {false, true}) {
      PacketDesc base = sample_desc(l3, kRcAcknowledge);
      base.has_vlan = vlan;
      base.vlan_tci = 0x2007;
      PathTemplate t;
      make_path_template(base, t);
      for (int op = 0; op < 256; ++op) {
        if (!(kOpcodes[size_t(op)].flags & kValid)) continue;
        for (uint32_t len : {0u, 1u, 13u, 4096u}) {
          PacketDesc d = sample_desc(l3, uint8_t(op));
          if (len && !(d.op().flags & kPayload)) continue;
          SCOPED_TRACE(std::string(kOpcodes[size_t(op)].name) + " l3 " + std::to_string(int(l3)) + " vlan " +
                       std::to_string(vlan) + " payload " + std::to_string(len));
          d.has_vlan = vlan;
          d.vlan_tci = 0x2007;
          if (l3 != L3Kind::kGrh) d.udp_sport = uint16_t(base.udp_sport + 1 + op);
          if (d.op().flags & kPayload) {
            d.payload_len = len;
            d.pad = pad_for(len);
          }
          const std::vector<uint8_t> want = build_frame(d);
          std::vector<uint8_t> payload(d.payload_len);
          for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(0xa0 + i);
          std::vector<uint8_t> got(frame_len(d), 0xee);
          ASSERT_EQ(build(with_path_fields_scrambled(d, t), payload, got), got.size());
          EXPECT_EQ(got, want);
          PacketDesc back;
          ASSERT_EQ(parse(got, back), ParseError::kOk) << parse_error_name(parse(got, back));
          EXPECT_EQ(back.icrc, test::reference_icrc(got));
          if (l3 != L3Kind::kGrh) {
            EXPECT_EQ(back.udp_sport, d.udp_sport);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace uroce::wire
