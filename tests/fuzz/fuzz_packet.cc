// libFuzzer target: the frame parser (stack/wire/packet.cc) on arbitrary bytes.
//
// Oracle, beyond "no crash, no out-of-bounds read":
//  1. ICRC verification is parse's last check: with and without it, parse
//     gives the same answer except that kOk may become kBadIcrc.
//  2. On kOk the description is self-consistent: header_len(d) == payload_off,
//     payload, pad and ICRC lie inside the IP datagram, which lies inside the frame.
//  3. build(d, payload) reproduces the frame's headers byte for byte, once the
//     reserved bits that parse ignores (IBA: a receiver ignores reserved
//     fields) are cleared in the original: IPv4 flags bit 0, BTH resv6/resv7,
//     DETH resv8 (and the IPv4 checksum redone after clearing).
//  4. The built frame parses (ICRC verified) to the same description; where the
//     original carried a valid ICRC and no reserved bits or pad bytes, the
//     built ICRC equals it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "stack/wire/checksum.h"
#include "stack/wire/ext_headers.h"
#include "stack/wire/packet.h"

#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace uroce::wire;

constexpr char kFuzzTarget[] = "fuzz_packet";

bool same(const PacketDesc& a, const PacketDesc& b) {
  return a.dst_mac == b.dst_mac && a.src_mac == b.src_mac && a.has_vlan == b.has_vlan &&
         a.vlan_tci == b.vlan_tci && a.l3 == b.l3 && a.traffic_class == b.traffic_class &&
         a.hop_limit == b.hop_limit && a.flow_label == b.flow_label && a.ip_id == b.ip_id &&
         a.dont_fragment == b.dont_fragment && a.sgid == b.sgid && a.dgid == b.dgid &&
         a.udp_sport == b.udp_sport && a.udp_dport == b.udp_dport && a.udp_checksum == b.udp_checksum &&
         a.opcode == b.opcode && a.se == b.se && a.mig == b.mig && a.pad == b.pad && a.tver == b.tver &&
         a.pkey == b.pkey && a.fecn == b.fecn && a.becn == b.becn && a.dest_qp == b.dest_qp &&
         a.ack_req == b.ack_req && a.psn == b.psn && a.deth_qkey == b.deth_qkey &&
         a.deth_src_qp == b.deth_src_qp && a.reth_va == b.reth_va && a.reth_rkey == b.reth_rkey &&
         a.reth_len == b.reth_len && a.atomic_va == b.atomic_va && a.atomic_rkey == b.atomic_rkey &&
         a.atomic_swap_add == b.atomic_swap_add && a.atomic_compare == b.atomic_compare &&
         a.aeth_syndrome == b.aeth_syndrome && a.aeth_msn == b.aeth_msn &&
         a.atomic_ack_orig == b.atomic_ack_orig && a.imm == b.imm && a.ieth_rkey == b.ieth_rkey &&
         a.payload_len == b.payload_len && a.payload_off == b.payload_off;
}

// Clears, in a copy of the frame's headers, the reserved bits parse ignores.
// Returns true if any was set.
bool clear_reserved(const PacketDesc& d, std::vector<uint8_t>& h) {
  bool any = false;
  auto clear = [&](size_t off, uint8_t mask) {
    any |= (h[off] & mask) != 0;
    h[off] &= uint8_t(~mask);
  };
  const size_t l3 = sizeof(EthHdr) + (d.has_vlan ? sizeof(VlanTag) : 0);
  size_t bth = l3;
  if (d.l3 == L3Kind::kIpv4) {
    clear(l3 + 6, 0x80);  // flags: reserved bit
    h[l3 + 10] = h[l3 + 11] = 0;
    const uint16_t c = csum_finish(csum_partial({&h[l3], sizeof(Ipv4Hdr)}));
    h[l3 + 10] = uint8_t(c >> 8);
    h[l3 + 11] = uint8_t(c);
    bth += sizeof(Ipv4Hdr) + sizeof(UdpHdr);
  } else {
    bth += sizeof(Ipv6Hdr) + (d.l3 == L3Kind::kIpv6 ? sizeof(UdpHdr) : 0);
  }
  clear(bth + 4, 0x3f);  // BTH resv6 (FECN, BECN kept)
  clear(bth + 8, 0x7f);  // BTH resv7 (AckReq kept)
  if (d.op().has(Hdr::kDeth)) clear(bth + d.op().off[size_t(Hdr::kDeth)] + 4, 0xff);  // DETH resv8
  if (d.op().has(Hdr::kCnp)) {  // A17.9.2: the CNP body is 16 reserved bytes
    for (size_t i = 0; i < sizeof(CnpBody); ++i) clear(bth + d.op().off[size_t(Hdr::kCnp)] + i, 0xff);
  }
  return any;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> f(data, size);
  PacketDesc d;
  PacketDesc dv;
  const ParseError e = parse(f, d, ParseOptions{.verify_icrc = false});
  const ParseError ev = parse(f, dv, ParseOptions{.verify_icrc = true});
  // 1. ICRC verification is the last check.
  FUZZ_CHECK(ev == e || (e == ParseError::kOk && ev == ParseError::kBadIcrc));
  FUZZ_CHECK(!parse_error_name(e).empty());
  if (e != ParseError::kOk) return 0;
  if (ev == ParseError::kOk) FUZZ_CHECK(same(d, dv) && d.icrc == dv.icrc);

  // 2. Self-consistent description.
  const size_t hlen = header_len(d);
  FUZZ_CHECK(hlen == d.payload_off);
  FUZZ_CHECK(size_t(d.payload_off) + d.payload_len + d.pad + kIcrcBytes <= size);
  FUZZ_CHECK(d.op().flags & kValid);
  // Bytes past an opcode's headers only where it carries payload, or as one
  // SACK block after an Acknowledge's AETH (uroce's extension, ext_headers.h).
  const bool sack = d.opcode == kRcAcknowledge && is_sack_block(f.subspan(d.payload_off, d.payload_len));
  FUZZ_CHECK((d.op().flags & kPayload) || ((d.payload_len == 0 || sack) && d.pad == 0));
  FUZZ_CHECK(d.pad <= 3 && d.tver == 0 && d.dest_qp <= kBthQpnMask && d.psn <= kBthPsnMask);

  // 3. build() reproduces the headers.
  const std::span<const uint8_t> payload = f.subspan(d.payload_off, d.payload_len);
  std::vector<uint8_t> out(frame_len(d));
  FUZZ_CHECK(build(d, payload, out) == out.size());
  FUZZ_CHECK(build(d, payload, std::span<uint8_t>(out.data(), out.size() - 1)) == 0);
  std::vector<uint8_t> orig(data, data + hlen);
  const bool had_reserved = clear_reserved(d, orig);
  FUZZ_CHECK(std::memcmp(orig.data(), out.data(), hlen) == 0);
  FUZZ_CHECK(payload.empty() || std::memcmp(out.data() + hlen, payload.data(), payload.size()) == 0);

  // 4. The built frame parses back to the same description.
  PacketDesc back;
  FUZZ_CHECK(parse(out, back) == ParseError::kOk);
  FUZZ_CHECK(same(d, back));
  bool pad_zero = true;
  for (size_t i = 0; i < d.pad; ++i) pad_zero &= data[hlen + d.payload_len + i] == 0;
  if (ev == ParseError::kOk && !had_reserved && pad_zero) FUZZ_CHECK(back.icrc == d.icrc);
  return 0;
}
