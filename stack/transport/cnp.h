// Congestion notification on the wire (IBA Annex A17.9; DCQCN, Zhu et al.
// 2015, 3.1): the notification point, which answers a CE-marked packet with
// a CNP to the QP that sent it, and the reaction point, which hands a CNP
// addressed to one of our QPs to its algorithm (qp_cc.h).
#pragma once

#include <uroce/cc.h>

#include "stack/transport/env.h"
#include "stack/transport/qp.h"
#include "stack/wire/packet.h"

namespace uroce::transport {

/// Notification point: qp received a CE-marked packet. Sends a CNP to its
/// peer unless the QP sent one less than min_time_between_cnps ago. The CNP
/// is BTH opcode 0x81 to the peer QP, PSN 0, 16 reserved bytes and the ICRC;
/// it goes out with p's DSCP and 802.1p priority and Not-ECT (a CNP must not
/// be marked itself).
void notify_congestion(Env& env, QpImpl& qp, const CnpParams& p);

/// Reaction point: the CNP d names qp. Only a connected QP's peer, whose
/// notification point saw the marks, may slow it down (IBA 9.6, as for any
/// packet): a CNP from anyone else is dropped and counted.
void cnp_rx(Env& env, QpImpl& qp, const wire::PacketDesc& d);

}  // namespace uroce::transport
