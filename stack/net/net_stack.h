// NetStack: the addressing layer of a RoCE device, so that the Linux kernel
// and any peer can reach the stack: the GID table, ARP (RFC 826), IPv6
// neighbour discovery (RFC 4861), ICMP / ICMPv6 echo (RFC 792 / 4443), the
// neighbour table, 802.1Q awareness (answers leave on the VLAN the request
// came on, and only for addresses the GID table has on that VLAN) and the
// DSCP/ECN policy the transport reads (qos.h).
//
// Data path contract: handle() and poll() take the time as now_ns (no clock
// reads), make no syscalls and allocate nothing but the mbufs of the frames
// they send, which they append to the caller's TxStage. One thread owns a
// NetStack (the engine's), as it owns the engine.
//
// Engine hook: for each received frame that wire::parse reports as another
// protocol (wire::is_not_roce), call handle(); it returns true if the frame
// was ARP, ICMP or ICMPv6 (answered or dropped with a NetCounter reason), false
// if it is none of those (the engine counts rx_drop_not_roce). Once per engine
// poll call poll() to send due ARP/NS retransmissions. The received frame
// stays the caller's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include <uroce/addr.h>
#include <uroce/status.h>

#include "stack/net/gid_table.h"
#include "stack/net/net_counters.h"
#include "stack/net/neighbour.h"
#include "stack/net/qos.h"
#include "stack/net/tx_stage.h"

struct rte_mbuf;

namespace uroce::net {

struct NetConfig {
  NeighConfig neigh;
  TrafficClassConfig qos;
  uint8_t ipv4_ttl = 64;        ///< TTL of ICMP echo replies
  uint8_t ipv6_hop_limit = 64;  ///< hop limit of ICMPv6 echo replies
};

class NetStack {
 public:
  /// Control path. kInvalidArgument if cfg.qos is invalid.
  static Result<std::unique_ptr<NetStack>> create(const NetConfig& cfg);

  /// The GID table: add the device's addresses here (control path).
  GidTable& gids() { return gids_; }
  const GidTable& gids() const { return gids_; }

  /// Handles one received Ethernet frame (without FCS). vlan_tci: the tag a
  /// port stripped into mbuf metadata, or kNoVlan (a tag in the bytes wins).
  /// Returns true if the frame was ARP / ICMP / ICMPv6 and was consumed here;
  /// replies (ARP reply, NA, echo reply) are appended to tx. The frame is not
  /// kept or modified.
  bool handle(std::span<const uint8_t> frame, uint16_t vlan_tci, uint64_t now_ns, TxStage& tx);
  /// The same for a single-segment mbuf (multi-segment: false), reading a
  /// stripped VLAN tag from its offload flags.
  bool handle(const rte_mbuf* m, uint64_t now_ns, TxStage& tx);

  /// Sends the ARP requests / NSes that are due (first tries and backoff
  /// retries) and fails entries that ran out of tries. Call once per engine poll.
  void poll(uint64_t now_ns, TxStage& tx);

  /// The MAC of ip (an IPv4-mapped or IPv6 GID) on the VLAN of GID sgid_index,
  /// or kPending after queueing a solicitation from that GID (sent by the next
  /// poll), or kFailed (timed out recently, table full, or sgid_index missing
  /// or of the other IP family). Data path: no allocation.
  Resolution resolve(const Gid& ip, uint8_t sgid_index, uint64_t now_ns);

  /// Gratuitous ARP (IPv4 GID: a broadcast request with sender = target,
  /// RFC 5227 2.3) or an unsolicited NA to ff02::1 with O set (IPv6 GID,
  /// RFC 4861 7.2.6) from GID sgid_index. False if nothing was sent.
  bool announce(uint8_t sgid_index, TxStage& tx);

  /// IPv4 TOS / IPv6 traffic class for RoCE packets of an AH (qos.h).
  uint8_t roce_traffic_class(uint8_t ah_traffic_class) const {
    return net::roce_traffic_class(cfg_.qos, ah_traffic_class);
  }
  const TrafficClassConfig& qos() const { return cfg_.qos; }
  /// Changes with every set_qos: senders that keep headers made under a policy remake them.
  uint32_t qos_generation() const { return qos_generation_; }
  /// Control path; kInvalidArgument leaves the old setting.
  Status set_qos(const TrafficClassConfig& qos);

  const NetCounters& counters() const { return counters_; }
  const NeighbourTable& neighbours() const { return neigh_; }

 private:
  explicit NetStack(const NetConfig& cfg) : cfg_(cfg), neigh_(cfg.neigh, counters_) {}

  struct Rx;  // the decoded Ethernet layer of the frame in hand
  bool rx_arp(const Rx& rx, TxStage& tx);
  bool rx_ipv4(const Rx& rx, TxStage& tx);
  bool rx_ipv6(const Rx& rx, TxStage& tx);
  void rx_ns(const Rx& rx, const uint8_t* ip6, std::span<const uint8_t> msg, TxStage& tx);
  void rx_na(const Rx& rx, const uint8_t* ip6, std::span<const uint8_t> msg);
  bool solicit(const NeighEntry& e, TxStage& tx);
  uint8_t* tx_frame(TxStage& tx, size_t len);
  bool l2_ours(const MacAddr& dst) const;

  NetConfig cfg_;
  NetCounters counters_;
  GidTable gids_;
  NeighbourTable neigh_;
  uint16_t ip_id_ = 0;
  uint32_t qos_generation_ = 1;
};

}  // namespace uroce::net
