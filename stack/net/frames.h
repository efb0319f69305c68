// Builders of the frames the addressing layer sends: ARP request/reply
// (RFC 826), IPv6 Neighbor Solicitation/Advertisement (RFC 4861 4.3/4.4, 7.2),
// ICMP echo reply (RFC 792) and ICMPv6 echo reply (RFC 4443 4.2). Pure
// functions into a caller's buffer, so tests compare their bytes with
// captured kernel frames. Each returns the frame length, or 0 if out is too small.
// VLAN: vlan_id kNoVlan sends untagged, else an 802.1Q tag (PCP 0, DEI 0).
// Frames shorter than the Ethernet minimum are zero-padded to 60 bytes
// (64 when tagged, so they are still 60 once a switch strips the tag).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <uroce/addr.h>

#include "stack/net/net_headers.h"

namespace uroce::net {

inline constexpr MacAddr kBroadcastMac{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

/// Bytes of the Ethernet header (with tag).
inline constexpr size_t eth_hdr_len(uint16_t vlan_id) { return vlan_id == kNoVlan ? 14 : 18; }
/// Minimum frame length without FCS for this tagging.
inline constexpr size_t min_frame_len(uint16_t vlan_id) { return vlan_id == kNoVlan ? 60 : 64; }
/// Length a frame of l2_payload bytes after the Ethernet header takes.
inline constexpr size_t frame_len_for(uint16_t vlan_id, size_t l2_payload) {
  const size_t n = eth_hdr_len(vlan_id) + l2_payload;
  return n < min_frame_len(vlan_id) ? min_frame_len(vlan_id) : n;
}

/// Writes the Ethernet (+802.1Q) header; returns its length.
size_t put_eth(uint8_t* p, const MacAddr& dst, const MacAddr& src, uint16_t vlan_id, uint16_t ether_type);

/// ff02::1:ffXX:XXXX for target (RFC 4291 2.7.1).
void solicited_node_addr(const uint8_t target[16], uint8_t out[16]);
/// 33:33 followed by the last four bytes of an IPv6 multicast address (RFC 2464 7).
MacAddr ipv6_multicast_mac(const uint8_t group[16]);

/// ARP packet (op request or reply) in an Ethernet frame to eth_dst.
size_t build_arp(std::span<uint8_t> out, uint16_t op, const MacAddr& eth_dst, uint16_t vlan_id,
                 const MacAddr& sha, const uint8_t spa[4], const MacAddr& tha, const uint8_t tpa[4]);
inline constexpr size_t arp_frame_len(uint16_t vlan_id) { return frame_len_for(vlan_id, sizeof(ArpHdr)); }

/// Neighbor Solicitation for target from src_ip/src_mac to the solicited-node
/// group, with a Source Link-Layer Address option (RFC 4861 7.2.2).
size_t build_ns(std::span<uint8_t> out, uint16_t vlan_id, const MacAddr& src_mac, const uint8_t src_ip[16],
                const uint8_t target[16]);
/// Neighbor Advertisement for target (also the IPv6 source) to dst_ip/eth_dst
/// with flags (kNa*Flag) and a Target Link-Layer Address option of src_mac.
size_t build_na(std::span<uint8_t> out, const MacAddr& eth_dst, uint16_t vlan_id, const MacAddr& src_mac,
                const uint8_t target[16], const uint8_t dst_ip[16], uint32_t flags);
inline constexpr size_t nd_frame_len(uint16_t vlan_id) {
  return frame_len_for(vlan_id, sizeof(wire::Ipv6Hdr) + sizeof(NdNeighborMsg) + sizeof(NdLinkAddrOpt));
}

/// ICMP echo reply to an echo request message `request` (ICMP header and
/// data): same identifier, sequence and data (RFC 792). IPv4 header without
/// options, DF clear (as Linux sends it), TOS copied by the caller.
size_t build_echo_reply4(std::span<uint8_t> out, const MacAddr& eth_dst, uint16_t vlan_id, const MacAddr& src_mac,
                         const uint8_t src_ip[4], const uint8_t dst_ip[4], uint8_t tos, uint16_t ip_id,
                         uint8_t ttl, std::span<const uint8_t> request);
inline constexpr size_t echo_reply4_len(uint16_t vlan_id, size_t icmp_len) {
  return frame_len_for(vlan_id, sizeof(wire::Ipv4Hdr) + icmp_len);
}

/// ICMPv6 echo reply (RFC 4443 4.2) to request (ICMPv6 header and data).
size_t build_echo_reply6(std::span<uint8_t> out, const MacAddr& eth_dst, uint16_t vlan_id, const MacAddr& src_mac,
                         const uint8_t src_ip[16], const uint8_t dst_ip[16], uint8_t traffic_class,
                         uint8_t hop_limit, std::span<const uint8_t> request);
inline constexpr size_t echo_reply6_len(uint16_t vlan_id, size_t icmp_len) {
  return frame_len_for(vlan_id, sizeof(wire::Ipv6Hdr) + icmp_len);
}

}  // namespace uroce::net
