// Invariant CRC (IBA 7.8.1; RoCEv2 Annex A17.3.3): CRC-32 with the IEEE 802.3
// polynomial (not CRC-32C), reflected, as zlib computes it, over
//   8 bytes of 0xFF standing in for the LRH,
//   the IP header (IPv4: TOS, TTL and checksum as ones; IPv6/GRH: traffic
//   class, flow label and hop limit as ones),
//   the UDP header with its checksum as ones (RoCEv2 only),
//   the BTH with byte 4 (FECN, BECN, resv6) as ones,
//   then everything up to the ICRC, which is stored in little-endian order.
// Two paths, one result, neither copying the payload. Where the ICRC covers
// at most kIcrcFoldMaxBytes and the CPU has PCLMULQDQ, one pass reads the
// headers and the rest in place, masking the headers in registers, and folds
// them with a kernel derived in icrc.cc. Longer frames (and other CPUs) use
// ISA-L: over a masked copy of the headers, then over the rest in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uroce::wire {

enum class L3Kind : uint8_t {
  kIpv4,  // RoCEv2 over IPv4
  kIpv6,  // RoCEv2 over IPv6
  kGrh,   // RoCEv1: GRH directly over Ethernet, no UDP
};

/// The most bytes an ICRC covers (the 8 ones included) for which icrc_compute
/// folds with its own kernel; ISA-L's AVX-512 kernel is faster above. Chosen
/// by measurement: docs/PERFORMANCE.md, "A whole ICRC per frame".
inline constexpr size_t kIcrcFoldMaxBytes = 1024;

/// CRC-32 (IEEE, reflected, zlib convention) of buf continued from crc;
/// crc32_ieee(0, ...) is the CRC of buf alone. Uses ISA-L's folding kernel.
uint32_t crc32_ieee(uint32_t crc, std::span<const uint8_t> buf);

/// ICRC of a packet. `l3` runs from the first byte of the IP header (or GRH)
/// to the last byte before the ICRC; for IPv4 the header must be 20 bytes.
/// The caller has checked that `l3` holds at least the L3, UDP and BTH headers.
uint32_t icrc_compute(L3Kind kind, std::span<const uint8_t> l3);
/// The same over a packet held in pieces (a chained mbuf whose payload is
/// registered memory): `l3` runs from the IP header (or GRH) to some point at
/// or after the BTH, then the bytes of each span of `rest` follow in order,
/// up to the last byte before the ICRC. The one
/// implementation: the single-span form is this with `rest` empty.
uint32_t icrc_compute(L3Kind kind, std::span<const uint8_t> l3, std::span<const std::span<const uint8_t>> rest);

}  // namespace uroce::wire
