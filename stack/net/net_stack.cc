// NetStack receive dispatch and replies (see net_stack.h): ARP (RFC 826),
// ICMP echo (RFC 792, RFC 1122 3.2.2.6), ICMPv6 echo (RFC 4443 4.1-4.2),
// neighbour discovery (RFC 4861 7.1 validation, 7.2.3-7.2.5 NS/NA handling).
#include "stack/net/net_stack.h"

#include <rte_mbuf.h>

#include <cstring>
#include <optional>

#include "stack/net/frames.h"
#include "stack/wire/checksum.h"
#include "stack/wire/locate.h"

namespace uroce::net {

using wire::csum_finish;
using wire::csum_partial;
using wire::EthHdr;
using wire::Ipv4Hdr;
using wire::Ipv6Hdr;
using wire::ipv6_pseudo_sum;

struct NetStack::Rx {
  std::span<const uint8_t> f;  // whole frame
  size_t l3;                   // offset of the Ethernet payload
  uint16_t vlan_id;            // kNoVlan if untagged (or VID 0, priority-tagged)
  MacAddr dst;
  MacAddr src;
  uint64_t now_ns;
};

Result<std::unique_ptr<NetStack>> NetStack::create(const NetConfig& cfg) {
  if (Status s = validate(cfg.qos); !s.ok()) return s;
  return std::unique_ptr<NetStack>(new NetStack(cfg));
}

Status NetStack::set_qos(const TrafficClassConfig& qos) {
  if (Status s = validate(qos); !s.ok()) return s;
  cfg_.qos = qos;
  ++qos_generation_;
  return {};
}

bool NetStack::l2_ours(const MacAddr& dst) const { return dst == kBroadcastMac || gids_.owns_mac(dst); }

uint8_t* NetStack::tx_frame(TxStage& tx, size_t len) {
  if (len > 0xffff) {
    counters_.inc(NetCounter::tx_too_big);
    return nullptr;
  }
  uint8_t* p = tx.append(uint16_t(len));
  if (p) return p;
  switch (tx.error()) {
    case TxStage::Error::kFull: counters_.inc(NetCounter::tx_burst_full); break;
    case TxStage::Error::kPoolEmpty: counters_.inc(NetCounter::tx_pool_empty); break;
    case TxStage::Error::kTooBig: counters_.inc(NetCounter::tx_too_big); break;
    case TxStage::Error::kNone: break;
  }
  return nullptr;
}

bool NetStack::handle(const rte_mbuf* m, uint64_t now_ns, TxStage& tx) {
  if (m->nb_segs != 1) return false;
  const uint16_t tci = (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) ? m->vlan_tci : kNoVlan;
  return handle({rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m)}, tci, now_ns, tx);
}

bool NetStack::handle(std::span<const uint8_t> frame, uint16_t vlan_tci, uint64_t now_ns, TxStage& tx) {
  const std::optional<wire::FrameLayout> loc = wire::locate_headers(frame);
  if (!loc) return false;
  const auto& eth = *reinterpret_cast<const EthHdr*>(frame.data());
  Rx rx{frame, loc->l3_off, vlan_tci == kNoVlan ? kNoVlan : uint16_t(vlan_tci & kVlanIdMask), eth.dst, eth.src,
        now_ns};
  if (loc->has_vlan) rx.vlan_id = uint16_t(loc->vlan_tci & kVlanIdMask);
  if (rx.vlan_id == 0) rx.vlan_id = kNoVlan;  // 802.1Q: VID 0 is a priority tag, not a VLAN
  switch (loc->ether_type) {
    case wire::kEtherTypeArp: return rx_arp(rx, tx);
    case wire::kEtherTypeIpv4: return rx_ipv4(rx, tx);
    case wire::kEtherTypeIpv6: return rx_ipv6(rx, tx);
    default: return false;
  }
}

// ---------------------------------------------------------------- ARP

bool NetStack::rx_arp(const Rx& rx, TxStage& tx) {
  if (rx.f.size() < rx.l3 + sizeof(ArpHdr)) {
    counters_.inc(NetCounter::arp_bad);
    return true;
  }
  const auto& a = *reinterpret_cast<const ArpHdr*>(rx.f.data() + rx.l3);
  const uint16_t op = a.oper.get();
  if (a.htype.get() != kArpHtypeEthernet || a.ptype.get() != wire::kEtherTypeIpv4 || a.hlen != 6 || a.plen != 4 ||
      (op != kArpOpRequest && op != kArpOpReply)) {
    counters_.inc(NetCounter::arp_bad);
    return true;
  }
  if (!l2_ours(rx.dst)) {
    counters_.inc(NetCounter::l2_not_for_us);
    return true;
  }
  const Gid sender = Gid::from_ipv4(a.spa);
  const Gid target = Gid::from_ipv4(a.tpa);
  const bool probe = a.spa[0] == 0 && a.spa[1] == 0 && a.spa[2] == 0 && a.spa[3] == 0;  // RFC 5227 ARP probe
  if (!probe && gids_.find(sender, rx.vlan_id) && !gids_.owns_mac(a.sha)) {
    counters_.inc(NetCounter::arp_conflict);  // someone else claims our address
    return true;
  }
  const std::optional<uint8_t> ours = gids_.find(target, rx.vlan_id);
  if (op == kArpOpReply) {
    counters_.inc(ours ? NetCounter::arp_reply_rcvd : NetCounter::arp_not_for_us);
    // RFC 826 merge: a reply to us confirms; any other only refreshes a known entry.
    if (!probe) neigh_.learn(sender, rx.vlan_id, a.sha, ours.has_value(), false, ours.value_or(0), rx.now_ns);
    return true;
  }
  if (!probe && sender == target) {
    counters_.inc(NetCounter::arp_garp_rcvd);
    neigh_.learn(sender, rx.vlan_id, a.sha, false, false, 0, rx.now_ns);
    return true;
  }
  if (!ours) {
    counters_.inc(NetCounter::arp_not_for_us);
    if (!probe) neigh_.learn(sender, rx.vlan_id, a.sha, false, false, 0, rx.now_ns);
    return true;
  }
  counters_.inc(NetCounter::arp_req_rcvd);
  // RFC 826: "if I am the target, add the sender's triplet".
  if (!probe) neigh_.learn(sender, rx.vlan_id, a.sha, false, true, *ours, rx.now_ns);
  const GidEntry& g = *gids_.at(*ours);
  const size_t len = arp_frame_len(rx.vlan_id);
  uint8_t* p = tx_frame(tx, len);
  if (!p) return true;
  build_arp({p, len}, kArpOpReply, a.sha, rx.vlan_id, g.mac, a.tpa, a.sha, a.spa);
  counters_.inc(NetCounter::arp_reply_sent);
  return true;
}

// ---------------------------------------------------------------- IPv4 / ICMP

bool NetStack::rx_ipv4(const Rx& rx, TxStage& tx) {
  if (rx.f.size() < rx.l3 + sizeof(Ipv4Hdr)) return false;
  const uint8_t* iph = rx.f.data() + rx.l3;
  const auto& ip = *reinterpret_cast<const Ipv4Hdr*>(iph);
  if ((ip.version_ihl >> 4) != 4 || ip.protocol != kIpProtoIcmp) return false;
  const size_t ihl = size_t(ip.version_ihl & 0xf) * 4;
  const size_t total = ip.total_length.get();
  if (ihl < sizeof(Ipv4Hdr) || total < ihl || rx.l3 + total > rx.f.size()) {
    counters_.inc(NetCounter::ip_bad_header);
    return true;
  }
  if (csum_finish(csum_partial({iph, ihl})) != 0) {
    counters_.inc(NetCounter::ip_bad_checksum);
    return true;
  }
  if (ip.flags_frag.get() & (wire::kIpv4FlagMf | wire::kIpv4FragOffsetMask)) {
    counters_.inc(NetCounter::ip_fragment);
    return true;
  }
  if (!gids_.owns_mac(rx.dst)) {  // broadcast/multicast pings are not answered
    counters_.inc(NetCounter::l2_not_for_us);
    return true;
  }
  const std::optional<uint8_t> ours = gids_.find(Gid::from_ipv4(ip.dst), rx.vlan_id);
  if (!ours) {
    counters_.inc(NetCounter::ip_not_for_us);
    return true;
  }
  const std::span<const uint8_t> msg = rx.f.subspan(rx.l3 + ihl, total - ihl);
  if (msg.size() < sizeof(IcmpEcho)) {
    counters_.inc(NetCounter::icmp_bad);
    return true;
  }
  if (csum_finish(csum_partial(msg)) != 0) {
    counters_.inc(NetCounter::icmp_bad_checksum);
    return true;
  }
  if (msg[0] != kIcmpEchoRequest || msg[1] != 0) {
    counters_.inc(NetCounter::icmp_other);
    return true;
  }
  counters_.inc(NetCounter::icmp_echo_rcvd);
  const GidEntry& g = *gids_.at(*ours);
  const size_t len = echo_reply4_len(rx.vlan_id, msg.size());
  uint8_t* p = tx_frame(tx, len);
  if (!p) return true;
  // RFC 1122 3.2.2.6: same identifier, sequence and data; the TOS of the request.
  build_echo_reply4({p, len}, rx.src, rx.vlan_id, g.mac, ip.dst, ip.src, ip.tos, ip_id_++, cfg_.ipv4_ttl, msg);
  counters_.inc(NetCounter::icmp_echo_replied);
  return true;
}

// ---------------------------------------------------------------- IPv6 / ICMPv6 / ND

bool NetStack::rx_ipv6(const Rx& rx, TxStage& tx) {
  if (rx.f.size() < rx.l3 + sizeof(Ipv6Hdr)) return false;
  const uint8_t* ip6 = rx.f.data() + rx.l3;
  const auto& ip = *reinterpret_cast<const Ipv6Hdr*>(ip6);
  if ((ip.ver_tc_flow.get() >> 28) != 6 || ip.next_header != kIpProtoIcmpv6) return false;  // ext headers: not ours
  const size_t plen = ip.payload_length.get();
  if (rx.l3 + sizeof(Ipv6Hdr) + plen > rx.f.size()) {
    counters_.inc(NetCounter::ip6_bad_header);
    return true;
  }
  const bool mcast_mac = rx.dst.b[0] == 0x33 && rx.dst.b[1] == 0x33;  // RFC 2464 7
  if (!mcast_mac && !gids_.owns_mac(rx.dst)) {
    counters_.inc(NetCounter::l2_not_for_us);
    return true;
  }
  const std::span<const uint8_t> msg = rx.f.subspan(rx.l3 + sizeof(Ipv6Hdr), plen);
  if (msg.size() < 4) {
    counters_.inc(NetCounter::icmp6_bad);
    return true;
  }
  if (csum_finish(csum_partial(msg, ipv6_pseudo_sum(ip.src, ip.dst, uint32_t(plen), kIpProtoIcmpv6))) != 0) {
    counters_.inc(NetCounter::icmp6_bad_checksum);
    return true;
  }
  switch (msg[0]) {
    case kNdNeighborSolicit: rx_ns(rx, ip6, msg, tx); return true;
    case kNdNeighborAdvert: rx_na(rx, ip6, msg); return true;
    case kIcmpv6EchoRequest: break;
    default: counters_.inc(NetCounter::icmp6_other); return true;
  }
  if (msg.size() < sizeof(IcmpEcho) || msg[1] != 0) {
    counters_.inc(NetCounter::icmp6_bad);
    return true;
  }
  Gid dst;
  std::memcpy(dst.raw, ip.dst, 16);
  const std::optional<uint8_t> ours = gids_.find(dst, rx.vlan_id);  // unicast only: multicast is never in the table
  if (!ours) {
    counters_.inc(NetCounter::ip6_not_for_us);
    return true;
  }
  counters_.inc(NetCounter::icmp6_echo_rcvd);
  const GidEntry& g = *gids_.at(*ours);
  const size_t len = echo_reply6_len(rx.vlan_id, msg.size());
  uint8_t* p = tx_frame(tx, len);
  if (!p) return true;
  const uint8_t tclass = uint8_t(ip.ver_tc_flow.get() >> 20);  // as Linux: the request's traffic class
  build_echo_reply6({p, len}, rx.src, rx.vlan_id, g.mac, ip.dst, ip.src, tclass, cfg_.ipv6_hop_limit, msg);
  counters_.inc(NetCounter::icmp6_echo_replied);
  return true;
}

namespace {

// The Ethernet link-layer address option of type want in the ND options, or
// nullptr; *bad if an option has length 0 or runs past the end (RFC 4861 7.1.1).
const NdLinkAddrOpt* find_lla(std::span<const uint8_t> opts, uint8_t want, bool* bad) {
  const NdLinkAddrOpt* found = nullptr;
  size_t off = 0;
  while (off + 2 <= opts.size()) {
    const size_t len = size_t(opts[off + 1]) * 8;
    if (len == 0 || off + len > opts.size()) {
      *bad = true;
      return nullptr;
    }
    if (opts[off] == want && len == sizeof(NdLinkAddrOpt)) {
      found = reinterpret_cast<const NdLinkAddrOpt*>(opts.data() + off);
    }
    off += len;
  }
  return found;
}

}  // namespace

void NetStack::rx_ns(const Rx& rx, const uint8_t* ip6, std::span<const uint8_t> msg, TxStage& tx) {
  const auto& ip = *reinterpret_cast<const Ipv6Hdr*>(ip6);
  // RFC 4861 7.1.1: hop limit 255, code 0, at least 24 bytes, target not multicast.
  if (ip.hop_limit != kNdHopLimit || msg[1] != 0 || msg.size() < sizeof(NdNeighborMsg)) {
    counters_.inc(NetCounter::nd_bad);
    return;
  }
  const auto& ns = *reinterpret_cast<const NdNeighborMsg*>(msg.data());
  bool bad = false;
  const NdLinkAddrOpt* slla = find_lla(msg.subspan(sizeof(NdNeighborMsg)), kNdOptSourceLinkAddr, &bad);
  const bool dad = is_unspecified(ip.src);
  uint8_t group[16];
  solicited_node_addr(ns.target, group);
  const bool to_group = std::memcmp(ip.dst, group, 16) == 0;
  // A DAD probe (source ::) goes to the solicited-node group and carries no SLLA.
  if (bad || is_ipv6_multicast(ns.target) || (dad && (!to_group || slla))) {
    counters_.inc(NetCounter::nd_bad);
    return;
  }
  Gid target;
  std::memcpy(target.raw, ns.target, 16);
  const std::optional<uint8_t> ours = gids_.find(target, rx.vlan_id);
  if (!ours || (!to_group && std::memcmp(ip.dst, ns.target, 16) != 0)) {
    counters_.inc(NetCounter::nd_ns_not_for_us);
    return;
  }
  counters_.inc(NetCounter::nd_ns_rcvd);
  const GidEntry& g = *gids_.at(*ours);
  static constexpr uint8_t kAllNodes[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
  MacAddr eth_dst;
  const uint8_t* dst_ip;
  uint32_t flags;
  if (dad) {  // RFC 4861 7.2.4: defend our address to all-nodes, S clear
    counters_.inc(NetCounter::nd_dad_defended);
    eth_dst = ipv6_multicast_mac(kAllNodes);
    dst_ip = kAllNodes;
    flags = kNaOverrideFlag;
  } else {
    Gid sender;
    std::memcpy(sender.raw, ip.src, 16);
    eth_dst = slla ? slla->mac : rx.src;
    // RFC 4861 7.2.3: the solicitation creates or updates the sender's entry (STALE).
    if (slla) neigh_.learn(sender, rx.vlan_id, slla->mac, false, true, *ours, rx.now_ns);
    dst_ip = ip.src;
    flags = kNaSolicitedFlag | kNaOverrideFlag;
  }
  const size_t len = nd_frame_len(rx.vlan_id);
  uint8_t* p = tx_frame(tx, len);
  if (!p) return;
  build_na({p, len}, eth_dst, rx.vlan_id, g.mac, ns.target, dst_ip, flags);
  counters_.inc(NetCounter::nd_na_sent);
}

void NetStack::rx_na(const Rx& rx, const uint8_t* ip6, std::span<const uint8_t> msg) {
  const auto& ip = *reinterpret_cast<const Ipv6Hdr*>(ip6);
  if (ip.hop_limit != kNdHopLimit || msg[1] != 0 || msg.size() < sizeof(NdNeighborMsg)) {
    counters_.inc(NetCounter::nd_bad);
    return;
  }
  const auto& na = *reinterpret_cast<const NdNeighborMsg*>(msg.data());
  const uint32_t flags = na.flags.get();
  bool bad = false;
  const NdLinkAddrOpt* tlla = find_lla(msg.subspan(sizeof(NdNeighborMsg)), kNdOptTargetLinkAddr, &bad);
  // RFC 4861 7.1.2: target not multicast; S clear if sent to a multicast address.
  if (bad || is_ipv6_multicast(na.target) || (is_ipv6_multicast(ip.dst) && (flags & kNaSolicitedFlag))) {
    counters_.inc(NetCounter::nd_bad);
    return;
  }
  counters_.inc(NetCounter::nd_na_rcvd);
  Gid target;
  std::memcpy(target.raw, na.target, 16);
  const MacAddr mac = tlla ? tlla->mac : rx.src;
  if (gids_.find(target, rx.vlan_id)) {
    if (!gids_.owns_mac(mac)) counters_.inc(NetCounter::nd_conflict);
    return;
  }
  // RFC 4861 7.2.5: only an existing entry is updated; S confirms reachability.
  neigh_.learn(target, rx.vlan_id, mac, (flags & kNaSolicitedFlag) != 0, false, 0, rx.now_ns);
}

// ---------------------------------------------------------------- resolution

Resolution NetStack::resolve(const Gid& ip, uint8_t sgid_index, uint64_t now_ns) {
  const GidEntry* g = gids_.at(sgid_index);
  if (!g || g->gid.is_ipv4_mapped() != ip.is_ipv4_mapped()) {
    counters_.inc(NetCounter::neigh_no_source);
    return {ResolveStatus::kFailed, {}};
  }
  // One of our own addresses: the frames go to our MAC (the port or a
  // loopback wrapper delivers them back), as a RoCE device reaches its own GID.
  if (const std::optional<uint8_t> own = gids_.find(ip, g->vlan_id)) return {ResolveStatus::kResolved, gids_.at(*own)->mac};
  return neigh_.resolve(ip, g->vlan_id, sgid_index, now_ns);
}

void NetStack::poll(uint64_t now_ns, TxStage& tx) {
  neigh_.poll_due(now_ns, [this, &tx](const NeighEntry& e) { return solicit(e, tx); });
}

bool NetStack::solicit(const NeighEntry& e, TxStage& tx) {
  const GidEntry* g = gids_.at(e.sgid_index);
  if (!g || g->vlan_id != e.vlan_id || g->gid.is_ipv4_mapped() != e.ip.is_ipv4_mapped()) {
    counters_.inc(NetCounter::neigh_no_source);  // the source GID went away: let the entry time out
    return true;
  }
  if (e.ip.is_ipv4_mapped()) {
    const size_t len = arp_frame_len(g->vlan_id);
    uint8_t* p = tx_frame(tx, len);
    if (!p) return false;
    build_arp({p, len}, kArpOpRequest, kBroadcastMac, g->vlan_id, g->mac, g->gid.raw + 12, MacAddr{},
              e.ip.raw + 12);
    counters_.inc(NetCounter::arp_req_sent);
    return true;
  }
  const size_t len = nd_frame_len(g->vlan_id);
  uint8_t* p = tx_frame(tx, len);
  if (!p) return false;
  build_ns({p, len}, g->vlan_id, g->mac, g->gid.raw, e.ip.raw);
  counters_.inc(NetCounter::nd_ns_sent);
  return true;
}

bool NetStack::announce(uint8_t sgid_index, TxStage& tx) {
  const GidEntry* g = gids_.at(sgid_index);
  if (!g) return false;
  if (g->gid.is_ipv4_mapped()) {
    const size_t len = arp_frame_len(g->vlan_id);
    uint8_t* p = tx_frame(tx, len);
    if (!p) return false;
    build_arp({p, len}, kArpOpRequest, kBroadcastMac, g->vlan_id, g->mac, g->gid.raw + 12, MacAddr{},
              g->gid.raw + 12);
    counters_.inc(NetCounter::arp_garp_sent);
    return true;
  }
  static constexpr uint8_t kAllNodes[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
  const size_t len = nd_frame_len(g->vlan_id);
  uint8_t* p = tx_frame(tx, len);
  if (!p) return false;
  build_na({p, len}, ipv6_multicast_mac(kAllNodes), g->vlan_id, g->mac, g->gid.raw, kAllNodes, kNaOverrideFlag);
  counters_.inc(NetCounter::nd_na_sent);
  return true;
}

}  // namespace uroce::net
