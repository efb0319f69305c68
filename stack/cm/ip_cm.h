// IP addressing over CM, as rdma_cm uses it (IBA Annex A11 "RDMA IP CM
// Service"; Linux drivers/infiniband/core/cma.c, librdmacm cma.h): the service
// ID that carries an IP port space and port, and the private-data header that
// rdma_cm puts at the start of every REQ's private data (IP version, source
// port, source and destination addresses).
//
// Facts checked against Linux cma.c (cma_get_service_id: (ps << 16) + port;
// struct cma_hdr; CMA_VERSION 0), include/rdma/rdma_cm.h (enum
// rdma_ucm_port_space), ib_cm.h (IB_CMA_SERVICE_ID / _MASK), Wireshark's "IP CM"
// decoding and the rxe rping / ucmatose captures in tests/data.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "stack/cm/mad.h"

namespace uroce::cm {

// ---------------------------------------------------------------------------
// Service IDs.

/// rdma_cm port spaces (Linux enum rdma_ucm_port_space). The service ID is
/// uint64(ps) << 16 | port; for TCP, UDP and IB the port space itself holds
/// the A11 prefix 0x01 and the IP protocol number (TCP 6, UDP 17, IB 0x3f).
enum class PortSpace : uint16_t {
  kIpoib = 0x0002,  // Linux-only; not an A11 IP CM service ID
  kTcp = 0x0106,
  kUdp = 0x0111,
  kIb = 0x013f,
};

// A11: IP CM service IDs are 0x0000000001 | protocol:8 | port:16.
inline constexpr uint64_t kIpCmServiceId = 0x0000000001000000;      // IB_CMA_SERVICE_ID
inline constexpr uint64_t kIpCmServiceIdMask = 0xffffffffff000000;  // IB_CMA_SERVICE_ID_MASK
inline constexpr uint32_t kServiceIdPortSpaceShift = 16;
inline constexpr uint64_t kServiceIdPortMask = 0xffff;
inline constexpr uint64_t kServiceIdPortSpaceMask = 0xffff;
inline constexpr uint64_t kServiceIdProtocolMask = 0xff;

/// The service ID rdma_cm listens on and connects to for (ps, port).
inline constexpr uint64_t rdma_cm_service_id(PortSpace ps, uint16_t port) {
  return uint64_t(ps) << kServiceIdPortSpaceShift | port;
}
/// True if sid is an A11 IP CM service ID (TCP, UDP or IB port space).
inline constexpr bool is_ip_cm_service_id(uint64_t sid) { return (sid & kIpCmServiceIdMask) == kIpCmServiceId; }
/// The port space bits of an rdma_cm service ID (0x0106 for TCP).
inline constexpr uint16_t service_id_port_space(uint64_t sid) {
  return uint16_t((sid >> kServiceIdPortSpaceShift) & kServiceIdPortSpaceMask);
}
/// The IP protocol byte of an IP CM service ID (6 for TCP).
inline constexpr uint8_t service_id_protocol(uint64_t sid) {
  return uint8_t((sid >> kServiceIdPortSpaceShift) & kServiceIdProtocolMask);
}
inline constexpr uint16_t service_id_port(uint64_t sid) { return uint16_t(sid & kServiceIdPortMask); }

static_assert(rdma_cm_service_id(PortSpace::kTcp, 7174) == 0x0000000001061c06);  // rping, captured
static_assert(is_ip_cm_service_id(rdma_cm_service_id(PortSpace::kUdp, 1)));
static_assert(!is_ip_cm_service_id(rdma_cm_service_id(PortSpace::kIpoib, 1)));

// ---------------------------------------------------------------------------
// The rdma_cm private-data header (struct cma_hdr): the first 36 bytes of a
// REQ's private data from rdma_connect(), and of a SIDR_REQ's for UDP.

struct CmaHdr {
  uint8_t cma_version;  // 0 (CMA_VERSION); Wireshark: major:4 | minor:4
  uint8_t ip_version;   // IPVersion:4 | resv:4
  be16 src_port;
  uint8_t src_addr[16];  // IPv6, or 12 zero bytes then the IPv4 address
  uint8_t dst_addr[16];
};
static_assert(sizeof(CmaHdr) == 36 && alignof(CmaHdr) == 1);
inline constexpr uint8_t kCmaVersion = 0x00;
inline constexpr uint8_t kCmaIpVersionShift = 4;
inline constexpr size_t kCmaIpv4AddrOffset = 12;  // ip4.addr after pad[3]

/// Consumer private data left in a REQ after the header (92 - 36).
inline constexpr size_t kCmaReqConsumerBytes = kReqPrivateDataBytes - sizeof(CmaHdr);

struct CmaHdrDesc {
  uint8_t ip_version = 4;  // 4 or 6
  uint16_t src_port = 0;
  std::array<uint8_t, 16> src_addr{};  // as carried: for IPv4, bytes 12-15 hold the address
  std::array<uint8_t, 16> dst_addr{};
  friend bool operator==(const CmaHdrDesc&, const CmaHdrDesc&) = default;
};

/// Decodes the header at the start of private data. kShort if fewer than 36
/// bytes, kBadCmaVersion if the version byte is not 0, kBadCmaIpVersion if the
/// IP version is not 4 or 6. The reserved nibble is ignored.
CmError decode_cma_hdr(std::span<const uint8_t> private_data, CmaHdrDesc& out);

/// Writes the 36-byte header into out. kShort if out is smaller, kFieldRange
/// if ip_version is not 4 or 6.
CmError encode_cma_hdr(const CmaHdrDesc& d, std::span<uint8_t> out);

/// Header for an IPv4 connection from src:src_port to dst.
CmaHdrDesc cma_hdr_ipv4(const uint8_t src[4], uint16_t src_port, const uint8_t dst[4]);

}  // namespace uroce::cm
