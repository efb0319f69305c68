// Building transmit frames in place: an mbuf from the port's pool, headers by
// wire::write_headers, payload copied straight from registered memory by the
// caller, ICRC by wire::finish_frame. No retained mbufs: a retransmission is
// built again from the WQE and the memory (IBA 9.7.5.1.1 go-back-N).
#pragma once

#include <cstdint>

#include <uroce/verbs.h>

#include "stack/wire/packet.h"

struct rte_mbuf;

namespace uroce::transport {

struct QpImpl;

/// RoCEv2 UDP source port: 0xC000 | the 14-bit fold of the flow label rxe
/// derives from both QPNs (rdma_calc_flow_label), so both directions of a
/// connection match rxe and RSS spreads QPs over queues (A17.4.5.2).
uint16_t roce_udp_sport(uint32_t lqpn, uint32_t rqpn);

/// Fills the Ethernet, IP, UDP and BTH fields a QP's packet to av/dest_qpn shares.
void fill_path(const Context& ctx, const QpImpl& qp, const AhAttr& av, uint32_t dest_qpn,
               wire::PacketDesc& d);

/// Starts a frame for d (opcode, payload_len and pad set): returns where its
/// payload goes, or nullptr if the transmit burst is full or the pool is empty
/// (counted; nothing is consumed and the caller retries at a later poll).
uint8_t* begin_frame(Context& ctx, const wire::PacketDesc& d, rte_mbuf** m);
/// Finishes the frame begun by begin_frame once its payload is in place and
/// stages it for the next tx_burst.
void end_frame(Context& ctx, const wire::PacketDesc& d, rte_mbuf* m);

/// Copies len bytes from src into the scatter list sges[0..n) at byte offset
/// off of the list, or from the gather list into dst. The SGEs were checked.
void copy_to_sges(const Sge* sges, uint32_t n, uint32_t off, const uint8_t* src, uint32_t len);
void copy_from_sges(const Sge* sges, uint32_t n, uint32_t off, uint8_t* dst, uint32_t len);

/// Largest path MTU whose packets fit an Ethernet MTU of eth_mtu (IP datagram bytes).
Mtu max_path_mtu(uint16_t eth_mtu);

}  // namespace uroce::transport
