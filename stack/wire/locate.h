// The one walk over a frame's headers below the BTH: Ethernet, one 802.1Q
// tag, IPv4 / IPv6 / the RoCEv1 GRH (A16, A17.4) and UDP. It finds where each
// header is, with every length checked against the frame, and judges nothing
// else: versions, IPv4 options, checksums and the lengths the headers claim
// are left to the caller (parse() rejects what RoCE forbids; the ARP/ICMP
// stack, the engine's steering and the fabric's ECN marking and corruption
// want different rules). Inline: parse() and steering call it once a frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "stack/wire/headers.h"
#include "stack/wire/icrc.h"

namespace uroce::wire {

/// Where the headers of an Ethernet frame lie, as far as the frame holds
/// them. Offsets are bytes from the first byte of the frame.
struct FrameLayout {
  uint16_t ether_type = 0;    ///< of the Ethernet payload: after the 802.1Q tag, if any
  uint16_t vlan_tci = 0;      ///< PCP:3 DEI:1 VID:12; 0 without a tag
  bool has_vlan = false;      ///< an 802.1Q tag follows the source MAC
  bool has_l3 = false;        ///< ether_type is IPv4, IPv6 or RoCEv1 and its fixed header (20 or 40 bytes) is in the frame
  L3Kind l3 = L3Kind::kIpv4;  ///< with has_l3
  bool has_udp = false;       ///< IPv4 or IPv6, l4_proto is UDP and the whole UDP header is in the frame
  uint8_t l4_proto = 0;       ///< with has_l3: IPv4 protocol, IPv6 or GRH next header
  uint16_t l3_off = 0;        ///< 14, or 18 after a tag
  uint16_t l4_off = 0;        ///< with has_l3: first byte after the IP header (IPv4: IHL * 4, IPv6 and GRH: 40); 0 if IHL < 5
  uint16_t udp_dport = 0;     ///< with has_udp: the UDP destination port
};

/// Locates the headers of frame (without FCS). Returns nullopt if the frame
/// ends inside the Ethernet header or its 802.1Q tag; otherwise the layout,
/// with has_l3 / has_udp false where the frame is not IP, carries no UDP, or
/// ends before those headers. Reads only inside frame; keeps no pointer to it.
inline std::optional<FrameLayout> locate_headers(std::span<const uint8_t> frame) {
  const uint8_t* p = frame.data();
  const size_t n = frame.size();
  // [[unlikely]] on the early returns: without it GCC laid the RoCEv2 case
  // out of line in parse(), the frame that is cut short falling through.
  if (n < sizeof(EthHdr)) [[unlikely]] return std::nullopt;
  FrameLayout h;
  h.ether_type = reinterpret_cast<const EthHdr*>(p)->ether_type.get();
  size_t off = sizeof(EthHdr);
  if (h.ether_type == kEtherTypeVlan) {
    if (n < off + sizeof(VlanTag)) [[unlikely]] return std::nullopt;
    const auto* tag = reinterpret_cast<const VlanTag*>(p + off);
    h.has_vlan = true;
    h.vlan_tci = tag->tci.get();
    h.ether_type = tag->ether_type.get();
    off += sizeof(VlanTag);
  }
  h.l3_off = uint16_t(off);
  if (h.ether_type == kEtherTypeIpv4) {
    if (n < off + sizeof(Ipv4Hdr)) [[unlikely]] return h;
    const auto* ip = reinterpret_cast<const Ipv4Hdr*>(p + off);
    h.has_l3 = true;
    h.l3 = L3Kind::kIpv4;
    h.l4_proto = ip->protocol;
    const size_t ihl = size_t(ip->version_ihl & 0xf) * 4;  // RFC 791: header length in 32-bit words
    if (ihl < sizeof(Ipv4Hdr)) [[unlikely]] return h;
    off += ihl;
  } else if (h.ether_type == kEtherTypeIpv6 || h.ether_type == kEtherTypeRoceV1) {
    if (n < off + sizeof(Ipv6Hdr)) [[unlikely]] return h;
    h.has_l3 = true;
    h.l3 = h.ether_type == kEtherTypeIpv6 ? L3Kind::kIpv6 : L3Kind::kGrh;
    h.l4_proto = reinterpret_cast<const Ipv6Hdr*>(p + off)->next_header;
    off += sizeof(Ipv6Hdr);
  } else {
    return h;
  }
  h.l4_off = uint16_t(off);
  if (h.l3 == L3Kind::kGrh || h.l4_proto != kIpProtoUdp || n < off + sizeof(UdpHdr)) [[unlikely]] return h;
  h.has_udp = true;
  h.udp_dport = reinterpret_cast<const UdpHdr*>(p + off)->dst_port.get();
  return h;
}

}  // namespace uroce::wire
