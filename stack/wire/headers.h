// On-the-wire header layouts for RoCE (IBA Vol 1 ch. 9.2-9.4, Annex A16 RoCE,
// Annex A17 RoCEv2): Ethernet, 802.1Q, IPv4, IPv6, GRH, UDP, BTH and every
// base-transport extension header. Packed byte-order-typed structs, no bitfields.
#pragma once

#include <cstdint>

#include <uroce/addr.h>

#include "stack/wire/byte_order.h"

namespace uroce::wire {

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86dd;
inline constexpr uint16_t kEtherTypeRoceV1 = 0x8915;  // A16: GRH + BTH over Ethernet
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kGrhNextHeaderBth = 0x1b;    // IBA 8.3.1: next header = IBA transport
inline constexpr uint16_t kRoceV2Port = 4791;         // A17.2.1: IANA-assigned UDP port
inline constexpr uint16_t kMinEthFrameBytes = 60;     // without the FCS
inline constexpr uint32_t kIcrcBytes = 4;

using uroce::MacAddr;

struct EthHdr {
  MacAddr dst;
  MacAddr src;
  be16 ether_type;
};
static_assert(sizeof(EthHdr) == 14 && alignof(EthHdr) == 1);

struct VlanTag {  // follows src MAC; ether_type of EthHdr is then 0x8100
  be16 tci;
  be16 ether_type;
};
static_assert(sizeof(VlanTag) == 4 && alignof(VlanTag) == 1);

struct Ipv4Hdr {
  uint8_t version_ihl;
  uint8_t tos;  // DSCP << 2 | ECN
  be16 total_length;
  be16 id;
  be16 flags_frag;
  uint8_t ttl;
  uint8_t protocol;
  be16 checksum;
  uint8_t src[4];
  uint8_t dst[4];
};
static_assert(sizeof(Ipv4Hdr) == 20 && alignof(Ipv4Hdr) == 1);
inline constexpr uint16_t kIpv4FlagDf = 0x4000;
inline constexpr uint16_t kIpv4FlagMf = 0x2000;
inline constexpr uint16_t kIpv4FragOffsetMask = 0x1fff;

// The IPv6 header and the IBA GRH share one layout (IBA 8.3); RoCEv1 uses it as GRH.
struct Ipv6Hdr {
  be32 ver_tc_flow;  // version:4 traffic class:8 flow label:20
  be16 payload_length;
  uint8_t next_header;
  uint8_t hop_limit;
  uint8_t src[16];
  uint8_t dst[16];
};
static_assert(sizeof(Ipv6Hdr) == 40 && alignof(Ipv6Hdr) == 1);
using GrhHdr = Ipv6Hdr;
inline constexpr uint32_t kFlowLabelMask = 0x000fffff;

struct UdpHdr {
  be16 src_port;
  be16 dst_port;
  be16 length;
  be16 checksum;
};
static_assert(sizeof(UdpHdr) == 8 && alignof(UdpHdr) == 1);

// Base Transport Header, IBA 9.2.
struct Bth {
  uint8_t opcode;
  uint8_t flags;  // SE:1 M:1 PadCnt:2 TVer:4
  be16 pkey;
  be32 qpn_word;  // FECN:1 BECN:1 resv6 | DestQP:24 (A17.9.1 uses the resv8a bits for ECN)
  be32 psn_word;  // AckReq:1 resv7 | PSN:24
};
static_assert(sizeof(Bth) == 12 && alignof(Bth) == 1);
inline constexpr uint8_t kBthSeBit = 0x80;
inline constexpr uint8_t kBthMigBit = 0x40;
inline constexpr uint8_t kBthPadShift = 4;
inline constexpr uint8_t kBthPadMask = 0x30;
inline constexpr uint8_t kBthTverMask = 0x0f;
inline constexpr uint32_t kBthFecnBit = 0x80000000;
inline constexpr uint32_t kBthBecnBit = 0x40000000;
inline constexpr uint32_t kBthQpnMask = 0x00ffffff;
inline constexpr uint32_t kGsiQpn = 1;  // QP1, the General Services Interface (IBA 13.5)
inline constexpr uint32_t kBthAckReqBit = 0x80000000;
inline constexpr uint32_t kBthPsnMask = 0x00ffffff;

// RDMA Extended Transport Header, IBA 9.3.3.
struct Reth {
  be64 va;
  be32 rkey;
  be32 dma_length;
};
static_assert(sizeof(Reth) == 16 && alignof(Reth) == 1);

// ACK Extended Transport Header, IBA 9.3.5: syndrome:8 | MSN:24.
struct Aeth {
  be32 word;
};
static_assert(sizeof(Aeth) == 4 && alignof(Aeth) == 1);
inline constexpr uint32_t kAethMsnMask = 0x00ffffff;
inline constexpr uint32_t kAethSyndromeShift = 24;

// Atomic Extended Transport Header, IBA 9.3.4.
struct AtomicEth {
  be64 va;
  be32 rkey;
  be64 swap_add;
  be64 compare;
};
static_assert(sizeof(AtomicEth) == 28 && alignof(AtomicEth) == 1);

// Atomic Acknowledge Extended Transport Header, IBA 9.3.6.
struct AtomicAckEth {
  be64 orig_data;
};
static_assert(sizeof(AtomicAckEth) == 8 && alignof(AtomicAckEth) == 1);

// Immediate Data Extended Transport Header, IBA 9.3.7. The 32 bits are opaque:
// carried in network order and handed to the application as they came.
struct ImmDt {
  be32 imm;
};
static_assert(sizeof(ImmDt) == 4 && alignof(ImmDt) == 1);

// Invalidate Extended Transport Header, IBA 9.3.8.
struct Ieth {
  be32 rkey;
};
static_assert(sizeof(Ieth) == 4 && alignof(Ieth) == 1);

// Datagram Extended Transport Header, IBA 9.3.2.
struct Deth {
  be32 qkey;
  be32 src_qp_word;  // resv8 | SrcQP:24
};
static_assert(sizeof(Deth) == 8 && alignof(Deth) == 1);

// Congestion Notification Packet body after the BTH, A17.9.2: 16 reserved bytes.
struct CnpBody {
  uint8_t reserved[16];
};
static_assert(sizeof(CnpBody) == 16 && alignof(CnpBody) == 1);

// Two-level accessors, as rxe names them.
inline uint32_t bth_qpn(const Bth& h) { return h.qpn_word.get() & kBthQpnMask; }
inline uint32_t bth_psn(const Bth& h) { return h.psn_word.get() & kBthPsnMask; }
inline bool bth_ack_req(const Bth& h) { return h.psn_word.get() & kBthAckReqBit; }
inline uint8_t bth_pad(const Bth& h) { return (h.flags & kBthPadMask) >> kBthPadShift; }
inline uint8_t aeth_syndrome(const Aeth& h) { return uint8_t(h.word.get() >> kAethSyndromeShift); }
inline uint32_t aeth_msn(const Aeth& h) { return h.word.get() & kAethMsnMask; }

}  // namespace uroce::wire
