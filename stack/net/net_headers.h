// Wire layouts of the addressing protocols: ARP (RFC 826), ICMP echo (RFC 792),
// ICMPv6 (RFC 4443) and IPv6 neighbour discovery messages and options
// (RFC 4861 4.3, 4.4, 4.6.1). Packed byte-order-typed structs as in
// stack/wire/headers.h, which holds Ethernet, 802.1Q, IPv4 and IPv6.
#pragma once

#include <cstdint>

#include "stack/wire/headers.h"

namespace uroce::net {

using wire::be16;
using wire::be32;

inline constexpr uint16_t kArpHtypeEthernet = 1;
inline constexpr uint16_t kArpOpRequest = 1;
inline constexpr uint16_t kArpOpReply = 2;
inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIpProtoIcmpv6 = 58;
inline constexpr uint8_t kIcmpEchoReply = 0;
inline constexpr uint8_t kIcmpEchoRequest = 8;
inline constexpr uint8_t kIcmpv6EchoRequest = 128;
inline constexpr uint8_t kIcmpv6EchoReply = 129;
inline constexpr uint8_t kNdNeighborSolicit = 135;
inline constexpr uint8_t kNdNeighborAdvert = 136;
inline constexpr uint8_t kNdOptSourceLinkAddr = 1;
inline constexpr uint8_t kNdOptTargetLinkAddr = 2;
inline constexpr uint8_t kNdHopLimit = 255;  // RFC 4861 7.1.1: ND is link-local only
inline constexpr uint32_t kNaRouterFlag = 0x80000000;
inline constexpr uint32_t kNaSolicitedFlag = 0x40000000;
inline constexpr uint32_t kNaOverrideFlag = 0x20000000;
inline constexpr uint16_t kVlanIdMask = 0x0fff;
inline constexpr uint16_t kNoVlan = 0xffff;  // "untagged" where a VLAN id is expected

struct ArpHdr {  // RFC 826, Ethernet/IPv4 only
  be16 htype;
  be16 ptype;
  uint8_t hlen;
  uint8_t plen;
  be16 oper;
  MacAddr sha;
  uint8_t spa[4];
  MacAddr tha;
  uint8_t tpa[4];
};
static_assert(sizeof(ArpHdr) == 28 && alignof(ArpHdr) == 1);

// ICMP and ICMPv6 share the first four bytes; echo adds identifier and sequence.
struct IcmpEcho {
  uint8_t type;
  uint8_t code;
  be16 checksum;
  be16 id;
  be16 seq;
};
static_assert(sizeof(IcmpEcho) == 8 && alignof(IcmpEcho) == 1);

// NS and NA (RFC 4861 4.3 / 4.4): for NS the word is reserved, for NA it holds R|S|O.
struct NdNeighborMsg {
  uint8_t type;
  uint8_t code;
  be16 checksum;
  be32 flags;
  uint8_t target[16];
};
static_assert(sizeof(NdNeighborMsg) == 24 && alignof(NdNeighborMsg) == 1);

// Source/Target Link-Layer Address option for Ethernet (RFC 4861 4.6.1): len in 8-byte units.
struct NdLinkAddrOpt {
  uint8_t type;
  uint8_t len;
  MacAddr mac;
};
static_assert(sizeof(NdLinkAddrOpt) == 8 && alignof(NdLinkAddrOpt) == 1);

}  // namespace uroce::net
