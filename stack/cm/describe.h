// CM MADs on QP1 (IBA 13.5: the General Services Interface): the framing a CM
// MAD travels in, and a one-line human description of a CM MAD found in a
// parsed RoCE packet, for `uroce dump` and traces. In RoCEv2 a CM MAD is the
// whole payload of a UD SEND Only to QP1 with DETH Q_Key 0x80010000 and BTH
// P_Key 0xffff (tests/data/rxe-rping-rdmacm.pcap shows exactly that).
// Control path: allocates.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "stack/cm/mad.h"
#include "stack/wire/packet.h"

namespace uroce::cm {

/// True if d is a UD SEND Only to QP1: a packet for the GSI. Does not look at
/// the Q_Key (13.5.3: QP1 checks it, a dump should still show a bad one).
bool is_gsi_packet(const wire::PacketDesc& d);

/// Sets the transport fields of d for a CM MAD sent to the peer's QP1:
/// UD SEND Only, P_Key 0xffff, DestQP 1, DETH Q_Key 0x80010000, SrcQP 1,
/// 256 bytes of payload, no pad. Leaves addresses, ports and PSN alone.
void set_gsi_framing(wire::PacketDesc& d);

/// One line describing the CM MAD in payload (the packet's payload bytes, as
/// wire::parse found them), e.g.
///   "CM ConnectRequest tid=0x000000028c57c8f0 lcid=0xf0c8578c
///    sid=0x0000000001061c06(tcp:7174) qpn=0x000011 psn=0x92a2ea pkey=0xffff
///    mtu=3 rr=1 id=1 10.50.0.2:42854->10.50.0.1:7174"
/// (one line; wrapped here). nullopt if d is not a GSI packet or the payload
/// is not a CM-class MAD. A malformed CM MAD gives a line naming the error,
/// e.g. "CM malformed(short) len=100". A Q_Key other than 0x80010000 is shown.
std::optional<std::string> describe_cm(const wire::PacketDesc& d, std::span<const uint8_t> payload);

/// The same for a bare MAD (no packet around it): never nullopt-worthy, so it
/// always returns a line.
std::string describe_cm_mad(std::span<const uint8_t> mad);

}  // namespace uroce::cm
