// Parse and build RoCE frames (IBA 9.2-9.3, A16 RoCEv1, A17 RoCEv2).
#include "stack/wire/packet.h"

#include <array>
#include <cstring>
#include <optional>
#include <type_traits>

#include "stack/wire/checksum.h"
#include "stack/wire/ext_headers.h"
#include "stack/wire/locate.h"

namespace uroce {

bool Gid::is_ipv4_mapped() const {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(raw, kPrefix, sizeof(kPrefix)) == 0;
}

Gid Gid::from_ipv4(const uint8_t v4[4]) {
  Gid g;
  g.raw[10] = g.raw[11] = 0xff;
  std::memcpy(g.raw + 12, v4, 4);
  return g;
}

}  // namespace uroce

namespace uroce::wire {

std::string_view parse_error_name(ParseError e) {
  static constexpr std::array<std::string_view, size_t(ParseError::kCount)> kNames = {
#define UROCE_NAME(e, s) s,
      UROCE_PARSE_ERRORS(UROCE_NAME)
#undef UROCE_NAME
  };
  return size_t(e) < kNames.size() ? kNames[size_t(e)] : "invalid";
}

namespace {

// RFC 1071 partial sum over an IPv4 header (checksum.h), not yet folded.
// Inline: without the hint GCC calls it out of line from parse and
// write_headers, and parse without ICRC is 10 % slower (bench/wire_bench).
inline uint32_t ipv4_sum(const Ipv4Hdr& h) {
  return csum_partial({reinterpret_cast<const uint8_t*>(&h), sizeof h});
}

inline uint16_t ipv4_checksum(const Ipv4Hdr& h) { return csum_finish(ipv4_sum(h)); }

// Decodes BTH and extension headers at `bth` (which holds at least hdr_len bytes).
void read_transport(const uint8_t* bth_p, const OpcodeInfo& info, PacketDesc& d) {
  const auto& bth = *reinterpret_cast<const Bth*>(bth_p);
  d.se = bth.flags & kBthSeBit;
  d.mig = bth.flags & kBthMigBit;
  d.pad = bth_pad(bth);
  d.tver = bth.flags & kBthTverMask;
  d.pkey = bth.pkey.get();
  const uint32_t qw = bth.qpn_word.get();
  d.fecn = qw & kBthFecnBit;
  d.becn = qw & kBthBecnBit;
  d.dest_qp = qw & kBthQpnMask;
  d.ack_req = bth_ack_req(bth);
  d.psn = bth_psn(bth);
  auto hdr = [&](Hdr h) { return bth_p + info.off[size_t(h)]; };
  if (info.has(Hdr::kDeth)) {
    const auto& h = *reinterpret_cast<const Deth*>(hdr(Hdr::kDeth));
    d.deth_qkey = h.qkey.get();
    d.deth_src_qp = h.src_qp_word.get() & kBthQpnMask;
  }
  if (info.has(Hdr::kReth)) {
    const auto& h = *reinterpret_cast<const Reth*>(hdr(Hdr::kReth));
    d.reth_va = h.va.get();
    d.reth_rkey = h.rkey.get();
    d.reth_len = h.dma_length.get();
  }
  if (info.has(Hdr::kAtomicEth)) {
    const auto& h = *reinterpret_cast<const AtomicEth*>(hdr(Hdr::kAtomicEth));
    d.atomic_va = h.va.get();
    d.atomic_rkey = h.rkey.get();
    d.atomic_swap_add = h.swap_add.get();
    d.atomic_compare = h.compare.get();
  }
  if (info.has(Hdr::kAeth)) {
    const auto& h = *reinterpret_cast<const Aeth*>(hdr(Hdr::kAeth));
    d.aeth_syndrome = wire::aeth_syndrome(h);
    d.aeth_msn = aeth_msn(h);
  }
  if (info.has(Hdr::kAtomicAckEth)) {
    d.atomic_ack_orig = reinterpret_cast<const AtomicAckEth*>(hdr(Hdr::kAtomicAckEth))->orig_data.get();
  }
  if (info.has(Hdr::kImmDt)) d.imm = reinterpret_cast<const ImmDt*>(hdr(Hdr::kImmDt))->imm.get();
  if (info.has(Hdr::kIeth)) d.ieth_rkey = reinterpret_cast<const Ieth*>(hdr(Hdr::kIeth))->rkey.get();
}

// Writes every byte of the BTH and of each extension header the opcode has
// (kOpcodes lays them out back to back, so that is all hdr_len bytes): no
// memset of the whole block first, whose variable-length `rep stos` was half
// of this function's time (bench/engine_bench, docs/PERFORMANCE.md).
void write_transport(const PacketDesc& d, uint8_t* bth_p) {
  const OpcodeInfo& info = d.op();
  auto& bth = *reinterpret_cast<Bth*>(bth_p);
  bth.opcode = d.opcode;
  bth.flags = uint8_t((d.se ? kBthSeBit : 0) | (d.mig ? kBthMigBit : 0) |
                      (d.pad << kBthPadShift & kBthPadMask) | (d.tver & kBthTverMask));
  bth.pkey.set(d.pkey);
  bth.qpn_word.set((d.fecn ? kBthFecnBit : 0) | (d.becn ? kBthBecnBit : 0) | (d.dest_qp & kBthQpnMask));
  bth.psn_word.set((d.ack_req ? kBthAckReqBit : 0) | (d.psn & kBthPsnMask));
  auto hdr = [&](Hdr h) { return bth_p + info.off[size_t(h)]; };
  if (info.has(Hdr::kDeth)) {
    auto& h = *reinterpret_cast<Deth*>(hdr(Hdr::kDeth));
    h.qkey.set(d.deth_qkey);
    h.src_qp_word.set(d.deth_src_qp & kBthQpnMask);
  }
  if (info.has(Hdr::kReth)) {
    auto& h = *reinterpret_cast<Reth*>(hdr(Hdr::kReth));
    h.va.set(d.reth_va);
    h.rkey.set(d.reth_rkey);
    h.dma_length.set(d.reth_len);
  }
  if (info.has(Hdr::kAtomicEth)) {
    auto& h = *reinterpret_cast<AtomicEth*>(hdr(Hdr::kAtomicEth));
    h.va.set(d.atomic_va);
    h.rkey.set(d.atomic_rkey);
    h.swap_add.set(d.atomic_swap_add);
    h.compare.set(d.atomic_compare);
  }
  if (info.has(Hdr::kAeth)) {
    reinterpret_cast<Aeth*>(hdr(Hdr::kAeth))
        ->word.set(uint32_t(d.aeth_syndrome) << kAethSyndromeShift | (d.aeth_msn & kAethMsnMask));
  }
  if (info.has(Hdr::kAtomicAckEth)) {
    reinterpret_cast<AtomicAckEth*>(hdr(Hdr::kAtomicAckEth))->orig_data.set(d.atomic_ack_orig);
  }
  if (info.has(Hdr::kImmDt)) reinterpret_cast<ImmDt*>(hdr(Hdr::kImmDt))->imm.set(d.imm);
  if (info.has(Hdr::kIeth)) reinterpret_cast<Ieth*>(hdr(Hdr::kIeth))->rkey.set(d.ieth_rkey);
  if (info.has(Hdr::kCnp)) std::memset(hdr(Hdr::kCnp), 0, sizeof(CnpBody));  // A17.9.2: reserved
}

}  // namespace

ParseError parse(std::span<const uint8_t> f, PacketDesc& d, ParseOptions opt) {
  // Reset from a fresh descriptor that has long been in memory: `d =
  // PacketDesc{}` built a zeroed temporary and copied it, and the copy's
  // loads missed store forwarding (about half of a parse without ICRC,
  // bench/wire_bench); constructing in place zeroed the 184 bytes with a
  // `rep stos`, a quarter of a parse's time in engine_bench. A copy of a
  // constant size is a dozen vector moves.
  static const PacketDesc kFresh{};
  static_assert(std::is_trivially_copyable_v<PacketDesc>);
  std::memcpy(&d, &kFresh, sizeof d);
  if (f.size() < sizeof(EthHdr)) return ParseError::kShort;
  const auto* eth = reinterpret_cast<const EthHdr*>(f.data());
  d.dst_mac = eth->dst;
  d.src_mac = eth->src;
  const std::optional<FrameLayout> loc = locate_headers(f);
  if (!loc) return ParseError::kShort;  // the 802.1Q tag is cut off
  d.has_vlan = loc->has_vlan;
  d.vlan_tci = loc->vlan_tci;
  if (!loc->has_l3) {  // not IP, or the frame ends inside the IP header or GRH
    switch (loc->ether_type) {
      case kEtherTypeIpv4: d.l3 = L3Kind::kIpv4; return ParseError::kShort;
      case kEtherTypeIpv6: d.l3 = L3Kind::kIpv6; return ParseError::kShort;
      case kEtherTypeRoceV1: d.l3 = L3Kind::kGrh; return ParseError::kShort;
      default: return ParseError::kNotIp;
    }
  }
  d.l3 = loc->l3;
  size_t off = loc->l3_off;
  const size_t l3_off = off;
  size_t end;  // one past the last byte of the IP datagram (or RoCEv1 packet)
  if (d.l3 == L3Kind::kIpv4) {
    const auto* ip = reinterpret_cast<const Ipv4Hdr*>(f.data() + off);
    if (ip->version_ihl >> 4 != 4) return ParseError::kBadIpVersion;
    if (ip->protocol != kIpProtoUdp) return ParseError::kNotUdp;
    if ((ip->version_ihl & 0xf) != 5) return ParseError::kIpOptions;
    const uint16_t ff = ip->flags_frag.get();
    if (ff & (kIpv4FlagMf | kIpv4FragOffsetMask)) return ParseError::kIpFragment;
    end = off + ip->total_length.get();
    if (ip->total_length.get() < sizeof(Ipv4Hdr) || end > f.size()) return ParseError::kLengthMismatch;
    if (ipv4_checksum(*ip) != 0) return ParseError::kBadIpChecksum;
    d.traffic_class = ip->tos;
    d.hop_limit = ip->ttl;
    d.ip_id = ip->id.get();
    d.dont_fragment = ff & kIpv4FlagDf;
    d.sgid = Gid::from_ipv4(ip->src);
    d.dgid = Gid::from_ipv4(ip->dst);
    off += sizeof(Ipv4Hdr);
  } else {  // IPv6 or the RoCEv1 GRH: one layout
    const auto* ip = reinterpret_cast<const Ipv6Hdr*>(f.data() + off);
    const uint32_t w = ip->ver_tc_flow.get();
    if (w >> 28 != 6) return ParseError::kBadIpVersion;  // IBA 8.3.1: GRH IPVer is 6 too
    const uint8_t want_next = d.l3 == L3Kind::kIpv6 ? kIpProtoUdp : kGrhNextHeaderBth;
    if (ip->next_header != want_next) return ParseError::kNotUdp;
    end = off + sizeof(Ipv6Hdr) + ip->payload_length.get();
    if (end > f.size()) return ParseError::kLengthMismatch;
    d.traffic_class = uint8_t(w >> 20);
    d.flow_label = w & kFlowLabelMask;
    d.hop_limit = ip->hop_limit;
    std::memcpy(d.sgid.raw, ip->src, 16);
    std::memcpy(d.dgid.raw, ip->dst, 16);
    off += sizeof(Ipv6Hdr);
  }

  if (d.l3 != L3Kind::kGrh) {
    // IP carries UDP here and IPv4 has no options, so the UDP header is at l4_off == off.
    if (!loc->has_udp || off + sizeof(UdpHdr) > end) return ParseError::kShort;
    if (loc->udp_dport != kRoceV2Port) return ParseError::kNotRocePort;
    const auto* udp = reinterpret_cast<const UdpHdr*>(f.data() + off);
    if (udp->length.get() != end - off) return ParseError::kLengthMismatch;
    d.udp_sport = udp->src_port.get();
    d.udp_dport = udp->dst_port.get();
    d.udp_checksum = udp->checksum.get();
    off += sizeof(UdpHdr);
  }

  const size_t bth_off = off;
  if (bth_off + sizeof(Bth) + kIcrcBytes > end) return ParseError::kShort;
  d.opcode = f[bth_off];
  const OpcodeInfo& info = d.op();
  if ((f[bth_off + 1] & kBthTverMask) != 0) return ParseError::kBadTver;
  if (!(info.flags & kValid)) return ParseError::kUnknownOpcode;
  if (bth_off + info.hdr_len + kIcrcBytes > end) return ParseError::kShort;
  read_transport(f.data() + bth_off, info, d);

  d.payload_off = uint16_t(bth_off + info.hdr_len);
  const size_t body = end - kIcrcBytes - d.payload_off;  // payload + pad
  // IBA 9.2.3: PadCnt pads the payload to a whole number of 4-byte words, so
  // payload + pad is one (on IB the LRH counts the packet in words; RoCEv2's
  // UDP length counts bytes and can say otherwise). Every header is words too.
  if (d.pad > body || (d.pad && !(info.flags & kPayload)) || ((info.flags & kPayload) && body % 4 != 0)) {
    return ParseError::kBadPad;
  }
  d.payload_len = uint32_t(body - d.pad);
  // Only an RC Acknowledge may carry bytes past its headers, and then exactly
  // one SACK block (ext_headers.h); whether its QP takes SACKs is the
  // completer's question.
  if (!(info.flags & kPayload) && d.payload_len != 0 &&
      (d.opcode != kRcAcknowledge || !is_sack_block(f.subspan(d.payload_off, d.payload_len)))) {
    return ParseError::kLengthMismatch;
  }

  const uint8_t* icrc_p = f.data() + end - kIcrcBytes;
  d.icrc = uint32_t(icrc_p[0]) | uint32_t(icrc_p[1]) << 8 | uint32_t(icrc_p[2]) << 16 |
           uint32_t(icrc_p[3]) << 24;
  if (opt.verify_icrc && icrc_compute(d.l3, f.subspan(l3_off, end - kIcrcBytes - l3_off)) != d.icrc) {
    return ParseError::kBadIcrc;
  }
  return ParseError::kOk;
}

namespace {

// Bytes after the L3 header: UDP (RoCEv2), transport headers, payload, pad, ICRC.
size_t l4_len(const PacketDesc& d) {
  return (d.l3 == L3Kind::kGrh ? 0 : sizeof(UdpHdr)) + d.op().hdr_len + d.payload_len + d.pad + kIcrcBytes;
}

// write_headers from d.path: the template, then this packet's lengths and
// UDP source port.
void write_path_from_template(const PacketDesc& d, std::span<uint8_t> out) {
  const PathTemplate& t = *d.path;
  uint8_t* p = out.data();
  // A copy of constant size where the frame has room (the transport headers
  // overwrite the excess): a few vector moves instead of a call.
  if (out.size() >= PathTemplate::kMaxBytes) std::memcpy(p, t.bytes.data(), PathTemplate::kMaxBytes);
  else std::memcpy(p, t.bytes.data(), t.len);
  const size_t l3_off = eth_len(d);
  const size_t l4 = l4_len(d);
  if (d.l3 == L3Kind::kIpv4) {
    auto& ip = *reinterpret_cast<Ipv4Hdr*>(p + l3_off);
    const auto total = uint16_t(sizeof(Ipv4Hdr) + l4);
    ip.total_length.set(total);
    ip.checksum.set(csum_finish(t.ipv4_sum + total));
    auto& udp = *reinterpret_cast<UdpHdr*>(p + l3_off + sizeof(Ipv4Hdr));
    udp.src_port.set(d.udp_sport);
    udp.length.set(uint16_t(l4));
  } else {
    reinterpret_cast<Ipv6Hdr*>(p + l3_off)->payload_length.set(uint16_t(l4));
    if (d.l3 == L3Kind::kIpv6) {
      auto& udp = *reinterpret_cast<UdpHdr*>(p + l3_off + sizeof(Ipv6Hdr));
      udp.src_port.set(d.udp_sport);
      udp.length.set(uint16_t(l4));
    }
  }
}

}  // namespace

size_t write_headers(const PacketDesc& d, std::span<uint8_t> out) {
  const size_t hlen = header_len(d);
  if (out.size() < hlen) return 0;
  uint8_t* p = out.data();
  if (d.path) {
    write_path_from_template(d, out);
    write_transport(d, p + d.path->len);
    return hlen;
  }
  auto& eth = *reinterpret_cast<EthHdr*>(p);
  eth.dst = d.dst_mac;
  eth.src = d.src_mac;
  const uint16_t l3_type = d.l3 == L3Kind::kIpv4   ? kEtherTypeIpv4
                           : d.l3 == L3Kind::kIpv6 ? kEtherTypeIpv6
                                                   : kEtherTypeRoceV1;
  size_t off = sizeof(EthHdr);
  if (d.has_vlan) {
    eth.ether_type.set(kEtherTypeVlan);
    auto& tag = *reinterpret_cast<VlanTag*>(p + off);
    tag.tci.set(d.vlan_tci);
    tag.ether_type.set(l3_type);
    off += sizeof(VlanTag);
  } else {
    eth.ether_type.set(l3_type);
  }
  const size_t l4 = l4_len(d);
  if (d.l3 == L3Kind::kIpv4) {
    auto& ip = *reinterpret_cast<Ipv4Hdr*>(p + off);
    ip.version_ihl = 0x45;
    ip.tos = d.traffic_class;
    ip.total_length.set(uint16_t(sizeof(Ipv4Hdr) + l4));
    ip.id.set(d.ip_id);
    ip.flags_frag.set(d.dont_fragment ? kIpv4FlagDf : 0);
    ip.ttl = d.hop_limit;
    ip.protocol = kIpProtoUdp;
    ip.checksum.set(0);
    std::memcpy(ip.src, d.sgid.raw + 12, 4);
    std::memcpy(ip.dst, d.dgid.raw + 12, 4);
    ip.checksum.set(ipv4_checksum(ip));
    off += sizeof(Ipv4Hdr);
  } else {
    auto& ip = *reinterpret_cast<Ipv6Hdr*>(p + off);
    ip.ver_tc_flow.set(6u << 28 | uint32_t(d.traffic_class) << 20 | (d.flow_label & kFlowLabelMask));
    ip.payload_length.set(uint16_t(l4));
    ip.next_header = d.l3 == L3Kind::kIpv6 ? kIpProtoUdp : kGrhNextHeaderBth;
    ip.hop_limit = d.hop_limit;
    std::memcpy(ip.src, d.sgid.raw, 16);
    std::memcpy(ip.dst, d.dgid.raw, 16);
    off += sizeof(Ipv6Hdr);
  }
  if (d.l3 != L3Kind::kGrh) {
    auto& udp = *reinterpret_cast<UdpHdr*>(p + off);
    udp.src_port.set(d.udp_sport);
    udp.dst_port.set(d.udp_dport);
    udp.length.set(uint16_t(l4));
    udp.checksum.set(d.udp_checksum);
    off += sizeof(UdpHdr);
  }
  write_transport(d, p + off);
  return hlen;
}

void make_path_template(const PacketDesc& d, PathTemplate& t) {
  PacketDesc proto = d;  // its own opcode: only the bytes below the BTH are kept
  proto.path = nullptr;
  proto.payload_len = 0;
  proto.pad = 0;
  std::array<uint8_t, 256> buf{};  // room for the largest header set
  write_headers(proto, buf);
  t = PathTemplate{};
  t.len = uint8_t(eth_len(d) + l3_hdr_len(d.l3));
  t.has_vlan = d.has_vlan;
  t.l3 = d.l3;
  std::memcpy(t.bytes.data(), buf.data(), t.len);
  if (d.l3 == L3Kind::kIpv4) {
    auto ip = *reinterpret_cast<const Ipv4Hdr*>(buf.data() + eth_len(d));
    ip.total_length.set(0);
    ip.checksum.set(0);
    t.ipv4_sum = ipv4_sum(ip);
  }
}

size_t finish_frame(const PacketDesc& d, std::span<uint8_t> f) {
  const size_t l3_off = eth_len(d);
  size_t end = header_len(d) + d.payload_len;
  std::memset(f.data() + end, 0, d.pad);
  end += d.pad;
  const uint32_t crc = icrc_compute(d.l3, f.subspan(l3_off, end - l3_off));
  for (int i = 0; i < 4; ++i) f[end + i] = uint8_t(crc >> (8 * i));
  end += kIcrcBytes;
  if (end < kMinEthFrameBytes) std::memset(f.data() + end, 0, kMinEthFrameBytes - end);
  return frame_len(d);
}

size_t build(const PacketDesc& d, std::span<const uint8_t> payload, std::span<uint8_t> out) {
  if (payload.size() != d.payload_len || out.size() < frame_len(d)) return 0;
  const size_t hlen = write_headers(d, out);
  if (!payload.empty()) std::memcpy(out.data() + hlen, payload.data(), payload.size());
  return finish_frame(d, out);
}

}  // namespace uroce::wire
