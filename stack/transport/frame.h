// Building transmit frames in place: an mbuf from the port's pool, headers by
// wire::write_headers, payload copied straight from registered memory by the
// caller, ICRC by wire::finish_frame. No retained mbufs: a retransmission is
// built again from the WQE and the memory (IBA 9.7.5.1.1 go-back-N).
#pragma once

#include <cstdint>

#include <uroce/status.h>
#include <uroce/verbs.h>

#include "stack/net/gid_table.h"
#include "stack/transport/env.h"
#include "stack/wire/packet.h"

struct rte_mbuf;

namespace uroce::transport {

struct QpImpl;

/// RoCEv2 UDP source port: 0xC000 | the 14-bit fold of the flow label rxe
/// derives from both QPNs (rdma_calc_flow_label), so both directions of a
/// connection match rxe and RSS spreads QPs over queues (A17.4.5.2).
uint16_t roce_udp_sport(uint32_t lqpn, uint32_t rqpn);

/// The GID table entry an address vector sends from (IBA 11.2.2.1 / A17.4.4:
/// AH sgid_index names an entry of the port's GID table): it must exist and
/// suit the destination: RoCEv2 IPv4 (IPv4-mapped) GIDs pair with IPv4-mapped
/// dgids; RoCEv2 IPv6 and RoCEv1 GIDs with dgids that are not IPv4-mapped.
/// kInvalidArgument otherwise. Control path (create_ah, modify_qp with kQpAv);
/// the entry is copied into the AH / QP so the data path never looks it up.
Result<net::GidEntry> path_source(const net::NetStack& net, const AhAttr& av);

/// Fills the Ethernet (source MAC and 802.1Q tag of the source GID entry), IP
/// or GRH (RoCEv1 for a RoCEv1 entry; TOS / traffic class from the device's
/// DSCP/ECN policy, net::roce_traffic_class), UDP and BTH fields a QP's packet
/// to av/dest_qpn shares.
void fill_path(const net::NetStack& net, const QpImpl& qp, const AhAttr& av, const net::GidEntry& src,
               uint32_t dest_qpn, wire::PacketDesc& d);
/// The same for a sender that is not a QpImpl (QP1, the GSI), with its UDP source port.
void fill_path(const net::NetStack& net, const AhAttr& av, const net::GidEntry& src, uint32_t dest_qpn,
               uint16_t udp_sport, wire::PacketDesc& d);

/// fill_path for a connected (RC/UC) QP's packets to its peer, by its path
/// template: sets d.path and the fields the BTH and the ICRC need (l3,
/// has_vlan, pkey, dest_qp) and d.udp_sport, the QP's usual port (a sprayed
/// packet sets its path's before it is built); write_headers copies the rest. Remakes the
/// template first where modify_qp or set_qos has changed what it was made
/// from. The same bytes as fill_path + write_headers, with a copy and three
/// stores instead of filling and writing every field of every header.
void fill_qp_path(const net::NetStack& net, QpImpl& qp, wire::PacketDesc& d);

/// Starts a frame for d (opcode, payload_len and pad set) on the transmit
/// stage: returns where its payload goes, or nullptr if the stage is full or
/// the pool is empty (counted; nothing is consumed and the caller retries at
/// a later poll). Every begin_frame is followed by its end_frame.
uint8_t* begin_frame(Env& env, const wire::PacketDesc& d, rte_mbuf** m);
/// Finishes the frame begun by begin_frame once its payload is in place: the
/// headers' lengths and the ICRC (a frame with payload counts as tx_copied).
void end_frame(Env& env, const wire::PacketDesc& d, rte_mbuf* m);

/// Builds and stages the frame d (opcode, payload_len and pad set) whose
/// payload is the payload_len bytes at src, which lie inside the registered
/// region `key` names (the caller checked them). Zero-copy where the context
/// allows it (Env::tx_options) and the payload has at least
/// tx_zero_copy_min_bytes: a chain of three mbufs, the headers, the region's
/// bytes attached in place as an external buffer, then pad and ICRC (the
/// ICRC chained over the region's bytes, never copying them); the region's
/// tx_refs count holds it until the port frees the frame. Otherwise copied
/// (begin_frame, memcpy, end_frame). Returns false if the transmit burst is
/// full or the pool is empty (counted; the caller retries at a later poll).
bool send_frame(Env& env, const wire::PacketDesc& d, const uint8_t* src, uint32_t key);

/// The SGE of sges[0..n) that holds all of [off, off+len) of the list's
/// bytes, with *at set to the address of byte off; nullptr if the range
/// spans SGEs.
const Sge* sge_holding(const Sge* sges, uint32_t n, uint32_t off, uint32_t len, uint64_t* at);

/// IBA 10.6.3: every L_Key of sges[0..n) names a valid region of pd that
/// covers its SGE and allows access (the requester's gather list, a receive
/// WQE's scatter list). Inline: the requester checks every WQE it starts.
inline bool sges_valid(const Env& env, const Pd* pd, const Sge* sges, uint32_t n, uint32_t access) {
  for (uint32_t i = 0; i < n; ++i) {
    if (!env.mrs.check(sges[i].lkey, pd, sges[i].addr, sges[i].length, access)) return false;
  }
  return true;
}

/// Copies len bytes from src into the scatter list sges[0..n) at byte offset
/// off of the list, or from the gather list into dst. The SGEs were checked.
void copy_to_sges(const Sge* sges, uint32_t n, uint32_t off, const uint8_t* src, uint32_t len);
void copy_from_sges(const Sge* sges, uint32_t n, uint32_t off, uint8_t* dst, uint32_t len);

/// Largest path MTU whose packets fit an Ethernet MTU of eth_mtu (IP datagram bytes).
Mtu max_path_mtu(uint16_t eth_mtu);

}  // namespace uroce::transport
