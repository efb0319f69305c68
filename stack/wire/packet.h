// A RoCE packet as a description of its decoded fields, the parser that fills
// one from frame bytes and the builder that writes frame bytes from one. The
// two are exact inverses for well-formed frames (tests check this on every
// captured rxe frame). Parse once, with every length checked, at the edge of
// the stack; later stages never re-check lengths.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "stack/wire/headers.h"
#include "stack/wire/icrc.h"
#include "stack/wire/opcodes.h"

namespace uroce::wire {

using uroce::Gid;

// Why a frame is not a valid RoCE packet. The first three mean "not RoCE at
// all" (another protocol), the rest are malformed RoCE. Each has a counter.
#define UROCE_PARSE_ERRORS(X)                                                          \
  X(kOk, "ok")                                                                         \
  X(kNotIp, "not_roce_ethertype")     /* ARP, LLDP, ... */                             \
  X(kNotUdp, "not_roce_ip_proto")     /* TCP, ICMP, ... */                             \
  X(kNotRocePort, "not_roce_udp_port")  /* UDP, but not to port 4791 */                \
  X(kShort, "short")                  /* frame ends inside a header */                 \
  X(kBadIpVersion, "bad_ip_version")                                                   \
  X(kIpOptions, "ip_options")         /* IPv4 IHL != 5: A17.4.5.1 forbids options */   \
  X(kIpFragment, "ip_fragment")       /* MF or fragment offset set */                  \
  X(kBadIpChecksum, "bad_ip_checksum")                                                 \
  X(kLengthMismatch, "length_mismatch")  /* IP/UDP/GRH lengths disagree with frame */  \
  X(kBadTver, "bad_bth_tver")         /* BTH transport header version != 0 */          \
  X(kUnknownOpcode, "unknown_opcode")                                                  \
  X(kBadPad, "bad_pad_count")         /* pad w/o payload, > len, payload+pad not words */ \
  X(kBadIcrc, "bad_icrc")

enum class ParseError : uint8_t {
#define UROCE_ENUM(e, s) e,
  UROCE_PARSE_ERRORS(UROCE_ENUM)
#undef UROCE_ENUM
      kCount
};

/// Counter-style name of a parse error, e.g. "bad_icrc".
std::string_view parse_error_name(ParseError e);
/// True for the errors that mean "another protocol", not "broken RoCE".
inline bool is_not_roce(ParseError e) {
  return e == ParseError::kNotIp || e == ParseError::kNotUdp || e == ParseError::kNotRocePort;
}

struct PathTemplate;

struct PacketDesc {
  // Where set, write_headers copies the Ethernet, 802.1Q, IP/GRH and UDP
  // headers from this template (made by make_path_template from a descriptor
  // with the same fields up to the UDP header) and fills in only the lengths,
  // the IPv4 checksum and the UDP source port (udp_sport, which differs per
  // path where a QP sprays); those fields of this descriptor are not read,
  // except has_vlan and l3, which must match the template's, and udp_sport.
  // parse never sets it.
  const PathTemplate* path = nullptr;

  // Ethernet.
  MacAddr dst_mac{};
  MacAddr src_mac{};
  bool has_vlan = false;
  uint16_t vlan_tci = 0;  // PCP:3 DEI:1 VID:12

  // IP (RoCEv2) or GRH (RoCEv1).
  L3Kind l3 = L3Kind::kIpv4;
  uint8_t traffic_class = 0;  // IPv4 TOS / IPv6 traffic class: DSCP << 2 | ECN
  uint8_t hop_limit = 64;     // IPv4 TTL / IPv6 hop limit
  uint32_t flow_label = 0;    // IPv6 and GRH only
  uint16_t ip_id = 0;         // IPv4 only
  bool dont_fragment = true;  // IPv4 only
  Gid sgid{};
  Gid dgid{};

  // UDP (RoCEv2).
  uint16_t udp_sport = 0;
  uint16_t udp_dport = kRoceV2Port;
  uint16_t udp_checksum = 0;  // A17.4.2: may be zero; carried verbatim

  // BTH.
  uint8_t opcode = 0;
  bool se = false;
  bool mig = false;
  uint8_t pad = 0;
  uint8_t tver = 0;
  uint16_t pkey = 0xffff;
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;
  bool ack_req = false;
  uint32_t psn = 0;

  // Extension headers; meaningful only where kOpcodes[opcode] has them.
  uint32_t deth_qkey = 0;
  uint32_t deth_src_qp = 0;
  uint64_t reth_va = 0;
  uint32_t reth_rkey = 0;
  uint32_t reth_len = 0;
  uint64_t atomic_va = 0;
  uint32_t atomic_rkey = 0;
  uint64_t atomic_swap_add = 0;
  uint64_t atomic_compare = 0;
  uint8_t aeth_syndrome = 0;
  uint32_t aeth_msn = 0;
  uint64_t atomic_ack_orig = 0;
  uint32_t imm = 0;  // ImmDt in wire order as a big-endian number
  uint32_t ieth_rkey = 0;

  // Payload: parse fills both; build reads payload_len only.
  uint32_t payload_len = 0;  // bytes, excluding pad and ICRC
  uint16_t payload_off = 0;  // from the start of the frame
  uint32_t icrc = 0;         // parse: the value carried in the frame

  const OpcodeInfo& op() const { return kOpcodes[opcode]; }
  bool is_ipv4() const { return l3 == L3Kind::kIpv4; }
  uint8_t ecn() const { return traffic_class & 0x3; }
};

struct ParseOptions {
  bool verify_icrc = true;  ///< false where the NIC has checked it already
};

/// Parses an Ethernet frame (without FCS). Returns kOk and fills `out`, or the
/// first reason the frame is not a valid RoCE packet. Never reads outside
/// `frame`. Trailing bytes after the IP datagram (Ethernet padding) are ignored.
ParseError parse(std::span<const uint8_t> frame, PacketDesc& out, ParseOptions opt = {});

/// Ethernet header bytes (with the 802.1Q tag if any).
inline size_t eth_len(const PacketDesc& d) { return sizeof(EthHdr) + (d.has_vlan ? sizeof(VlanTag) : 0); }
/// IP header and UDP header bytes (RoCEv2), or the GRH's (RoCEv1).
inline size_t l3_hdr_len(L3Kind k) {
  switch (k) {
    case L3Kind::kIpv4: return sizeof(Ipv4Hdr) + sizeof(UdpHdr);
    case L3Kind::kIpv6: return sizeof(Ipv6Hdr) + sizeof(UdpHdr);
    case L3Kind::kGrh: return sizeof(GrhHdr);
  }
  return 0;
}
// Inline: the transmit path asks for these three or four times a frame.
/// Bytes from the start of the frame to the first payload byte.
inline size_t header_len(const PacketDesc& d) { return eth_len(d) + l3_hdr_len(d.l3) + d.op().hdr_len; }
/// Total frame length for d (headers, payload, pad, ICRC, Ethernet padding to 60).
inline size_t frame_len(const PacketDesc& d) {
  const size_t n = header_len(d) + d.payload_len + d.pad + kIcrcBytes;
  return n < kMinEthFrameBytes ? kMinEthFrameBytes : n;
}

/// The headers below the BTH that every packet a sender sends on one path
/// shares (Ethernet, 802.1Q tag, IPv4/IPv6/GRH, UDP), as they go on the
/// wire, with the length fields, the IPv4 checksum and the UDP source port
/// left to each packet.
struct PathTemplate {
  static constexpr size_t kMaxBytes = 14 + 4 + 40 + 8;  // Ethernet, 802.1Q, IPv6, UDP
  std::array<uint8_t, kMaxBytes> bytes{};
  uint8_t len = 0;        // bytes before the BTH; 0: not made
  bool has_vlan = false;  // as in the descriptor it was made from
  L3Kind l3 = L3Kind::kIpv4;
  uint32_t ipv4_sum = 0;  // IPv4: RFC 1071 sum of the header with total length and checksum zero
};

/// Makes t from the path fields of d (those write_headers writes below the BTH).
void make_path_template(const PacketDesc& d, PathTemplate& t);

/// Writes every header of d into out (computing IP/UDP lengths and the IPv4
/// checksum from d.payload_len and d.pad). Returns header_len(d), or 0 if out
/// is too small. The payload, pad and ICRC are written by finish_frame.
size_t write_headers(const PacketDesc& d, std::span<uint8_t> out);

/// Given a frame whose headers and payload are in place, zeroes the pad,
/// computes and stores the ICRC and zeroes Ethernet padding. Returns frame_len(d).
size_t finish_frame(const PacketDesc& d, std::span<uint8_t> frame);

/// write_headers + payload copy + finish_frame. Returns the frame length, or 0
/// if out is too small or payload.size() != d.payload_len.
size_t build(const PacketDesc& d, std::span<const uint8_t> payload, std::span<uint8_t> out);

/// Pad count that rounds len up to a multiple of 4 (IBA 9.2.3).
inline constexpr uint8_t pad_for(uint32_t len) { return uint8_t((4 - (len & 3)) & 3); }

}  // namespace uroce::wire
