// Frame builders (see frames.h): RFC 826, RFC 4861, RFC 792, RFC 4443.
#include "stack/net/frames.h"

#include <cstring>

#include "stack/wire/checksum.h"

namespace uroce::net {

using wire::csum_finish;
using wire::csum_partial;
using wire::EthHdr;
using wire::Ipv4Hdr;
using wire::Ipv6Hdr;
using wire::ipv6_pseudo_sum;
using wire::VlanTag;

size_t put_eth(uint8_t* p, const MacAddr& dst, const MacAddr& src, uint16_t vlan_id, uint16_t ether_type) {
  auto& eth = *reinterpret_cast<EthHdr*>(p);
  eth.dst = dst;
  eth.src = src;
  if (vlan_id == kNoVlan) {
    eth.ether_type.set(ether_type);
    return sizeof(EthHdr);
  }
  eth.ether_type.set(wire::kEtherTypeVlan);
  auto& tag = *reinterpret_cast<VlanTag*>(p + sizeof(EthHdr));
  tag.tci.set(uint16_t(vlan_id & kVlanIdMask));
  tag.ether_type.set(ether_type);
  return sizeof(EthHdr) + sizeof(VlanTag);
}

void solicited_node_addr(const uint8_t target[16], uint8_t out[16]) {
  static constexpr uint8_t kPrefix[13] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff};
  std::memcpy(out, kPrefix, sizeof(kPrefix));
  std::memcpy(out + 13, target + 13, 3);
}

MacAddr ipv6_multicast_mac(const uint8_t group[16]) {
  return MacAddr{{0x33, 0x33, group[12], group[13], group[14], group[15]}};
}

namespace {

// Zeroes out[from..len) (Ethernet padding).
void pad(std::span<uint8_t> out, size_t from, size_t len) {
  if (len > from) std::memset(out.data() + from, 0, len - from);
}

void put_ipv6(uint8_t* p, uint8_t traffic_class, uint16_t payload_len, uint8_t next_header, uint8_t hop_limit,
              const uint8_t src[16], const uint8_t dst[16]) {
  auto& ip = *reinterpret_cast<Ipv6Hdr*>(p);
  ip.ver_tc_flow.set(6u << 28 | uint32_t(traffic_class) << 20);
  ip.payload_length.set(payload_len);
  ip.next_header = next_header;
  ip.hop_limit = hop_limit;
  std::memcpy(ip.src, src, 16);
  std::memcpy(ip.dst, dst, 16);
}

// Stores the ICMPv6 checksum of the message at msg (checksum field at offset 2).
void icmp6_checksum(uint8_t* msg, size_t len, const uint8_t src[16], const uint8_t dst[16]) {
  msg[2] = msg[3] = 0;
  const uint16_t c = csum_finish(csum_partial({msg, len}, ipv6_pseudo_sum(src, dst, uint32_t(len), kIpProtoIcmpv6)));
  msg[2] = uint8_t(c >> 8);
  msg[3] = uint8_t(c);
}

size_t build_nd(std::span<uint8_t> out, const MacAddr& eth_dst, uint16_t vlan_id, const MacAddr& src_mac,
                const uint8_t src_ip[16], const uint8_t dst_ip[16], uint8_t type, uint32_t flags,
                const uint8_t target[16], uint8_t opt_type) {
  const size_t len = nd_frame_len(vlan_id);
  if (out.size() < len) return 0;
  uint8_t* p = out.data();
  size_t off = put_eth(p, eth_dst, src_mac, vlan_id, wire::kEtherTypeIpv6);
  constexpr uint16_t kMsgLen = sizeof(NdNeighborMsg) + sizeof(NdLinkAddrOpt);
  put_ipv6(p + off, 0, kMsgLen, kIpProtoIcmpv6, kNdHopLimit, src_ip, dst_ip);
  off += sizeof(Ipv6Hdr);
  uint8_t* msg = p + off;
  auto& nd = *reinterpret_cast<NdNeighborMsg*>(msg);
  nd.type = type;
  nd.code = 0;
  nd.flags.set(flags);
  std::memcpy(nd.target, target, 16);
  auto& opt = *reinterpret_cast<NdLinkAddrOpt*>(msg + sizeof(NdNeighborMsg));
  opt.type = opt_type;
  opt.len = 1;
  opt.mac = src_mac;
  icmp6_checksum(msg, kMsgLen, src_ip, dst_ip);
  pad(out, off + kMsgLen, len);
  return len;
}

}  // namespace

size_t build_arp(std::span<uint8_t> out, uint16_t op, const MacAddr& eth_dst, uint16_t vlan_id,
                 const MacAddr& sha, const uint8_t spa[4], const MacAddr& tha, const uint8_t tpa[4]) {
  const size_t len = arp_frame_len(vlan_id);
  if (out.size() < len) return 0;
  const size_t off = put_eth(out.data(), eth_dst, sha, vlan_id, wire::kEtherTypeArp);
  auto& a = *reinterpret_cast<ArpHdr*>(out.data() + off);
  a.htype.set(kArpHtypeEthernet);
  a.ptype.set(wire::kEtherTypeIpv4);
  a.hlen = 6;
  a.plen = 4;
  a.oper.set(op);
  a.sha = sha;
  std::memcpy(a.spa, spa, 4);
  a.tha = tha;
  std::memcpy(a.tpa, tpa, 4);
  pad(out, off + sizeof(ArpHdr), len);
  return len;
}

size_t build_ns(std::span<uint8_t> out, uint16_t vlan_id, const MacAddr& src_mac, const uint8_t src_ip[16],
                const uint8_t target[16]) {
  uint8_t group[16];
  solicited_node_addr(target, group);
  return build_nd(out, ipv6_multicast_mac(group), vlan_id, src_mac, src_ip, group, kNdNeighborSolicit, 0, target,
                  kNdOptSourceLinkAddr);
}

size_t build_na(std::span<uint8_t> out, const MacAddr& eth_dst, uint16_t vlan_id, const MacAddr& src_mac,
                const uint8_t target[16], const uint8_t dst_ip[16], uint32_t flags) {
  return build_nd(out, eth_dst, vlan_id, src_mac, target, dst_ip, kNdNeighborAdvert, flags, target,
                  kNdOptTargetLinkAddr);
}

size_t build_echo_reply4(std::span<uint8_t> out, const MacAddr& eth_dst, uint16_t vlan_id, const MacAddr& src_mac,
                         const uint8_t src_ip[4], const uint8_t dst_ip[4], uint8_t tos, uint16_t ip_id,
                         uint8_t ttl, std::span<const uint8_t> request) {
  const size_t len = echo_reply4_len(vlan_id, request.size());
  if (out.size() < len || request.size() < sizeof(IcmpEcho) || request.size() > 0xffff - sizeof(Ipv4Hdr)) return 0;
  uint8_t* p = out.data();
  size_t off = put_eth(p, eth_dst, src_mac, vlan_id, wire::kEtherTypeIpv4);
  auto& ip = *reinterpret_cast<Ipv4Hdr*>(p + off);
  ip.version_ihl = 0x45;
  ip.tos = tos;
  ip.total_length.set(uint16_t(sizeof(Ipv4Hdr) + request.size()));
  ip.id.set(ip_id);
  ip.flags_frag.set(0);
  ip.ttl = ttl;
  ip.protocol = kIpProtoIcmp;
  ip.checksum.set(0);
  std::memcpy(ip.src, src_ip, 4);
  std::memcpy(ip.dst, dst_ip, 4);
  ip.checksum.set(csum_finish(csum_partial({p + off, sizeof(Ipv4Hdr)})));
  off += sizeof(Ipv4Hdr);
  uint8_t* msg = p + off;
  std::memcpy(msg, request.data(), request.size());
  msg[0] = kIcmpEchoReply;
  msg[1] = 0;
  msg[2] = msg[3] = 0;
  const uint16_t c = csum_finish(csum_partial({msg, request.size()}));
  msg[2] = uint8_t(c >> 8);
  msg[3] = uint8_t(c);
  pad(out, off + request.size(), len);
  return len;
}

size_t build_echo_reply6(std::span<uint8_t> out, const MacAddr& eth_dst, uint16_t vlan_id, const MacAddr& src_mac,
                         const uint8_t src_ip[16], const uint8_t dst_ip[16], uint8_t traffic_class,
                         uint8_t hop_limit, std::span<const uint8_t> request) {
  const size_t len = echo_reply6_len(vlan_id, request.size());
  if (out.size() < len || request.size() < sizeof(IcmpEcho) || request.size() > 0xffff) return 0;
  uint8_t* p = out.data();
  size_t off = put_eth(p, eth_dst, src_mac, vlan_id, wire::kEtherTypeIpv6);
  put_ipv6(p + off, traffic_class, uint16_t(request.size()), kIpProtoIcmpv6, hop_limit, src_ip, dst_ip);
  off += sizeof(Ipv6Hdr);
  uint8_t* msg = p + off;
  std::memcpy(msg, request.data(), request.size());
  msg[0] = kIcmpv6EchoReply;
  msg[1] = 0;
  icmp6_checksum(msg, request.size(), src_ip, dst_ip);
  pad(out, off + request.size(), len);
  return len;
}

}  // namespace uroce::net
