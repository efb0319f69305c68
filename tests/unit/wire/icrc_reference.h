// A reference ICRC for the tests, computed with zlib's crc32 over a masked
// pseudo-header written out byte by byte from the raw frame. It shares no code
// with stack/wire (not icrc_compute, not the header structs), so agreement
// between the two is evidence, not a tautology. The rule (IBA 7.8.1, A16 for
// RoCEv1, A17.3.3 for RoCEv2; rxe_icrc.c does the same):
//   CRC-32 (IEEE, reflected; zlib) over
//   8 x 0xFF (the absent LRH),
//   IPv4 header with TOS, TTL, header checksum set to ones, or
//   IPv6 header / GRH with traffic class, flow label, hop limit set to ones,
//   UDP header with the checksum set to ones (RoCEv2),
//   BTH with byte 4 (FECN, BECN, resv6) set to ones,
//   the rest of the packet up to the ICRC; the ICRC is stored little-endian.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <vector>

#include "tests/unit/wire/test_util.h"

namespace uroce::wire::test {

struct IcrcSpan {
  size_t l3 = 0;   // first byte of the IP header or GRH
  size_t end = 0;  // one past the ICRC
  bool ok = false;
};

/// Where the ICRC-covered bytes are in an Ethernet frame (optionally 802.1Q
/// tagged) carrying IPv4, IPv6 or RoCEv1; read from raw bytes.
inline IcrcSpan icrc_span(const std::vector<uint8_t>& f) {
  IcrcSpan s;
  if (f.size() < 14) return s;
  s.l3 = 14;
  uint16_t et = get16(&f[12]);
  if (et == 0x8100) {
    if (f.size() < 18) return s;
    et = get16(&f[16]);
    s.l3 = 18;
  }
  if (et == 0x0800) {
    if (f.size() < s.l3 + 20) return s;
    s.end = s.l3 + get16(&f[s.l3 + 2]);
  } else if (et == 0x86dd || et == 0x8915) {
    if (f.size() < s.l3 + 40) return s;
    s.end = s.l3 + 40 + get16(&f[s.l3 + 4]);
  } else {
    return s;
  }
  s.ok = s.end <= f.size();
  return s;
}

/// zlib CRC-32 of the masked pseudo-packet. The frame must be well formed.
inline uint32_t reference_icrc(const std::vector<uint8_t>& f) {
  const IcrcSpan s = icrc_span(f);
  std::vector<uint8_t> p(8, 0xff);  // masked LRH
  const uint16_t et = get16(&f[s.l3 - 2]);
  size_t bth;
  if (et == 0x0800) {
    const size_t ihl = size_t(f[s.l3] & 0x0f) * 4;
    p.insert(p.end(), f.begin() + long(s.l3), f.begin() + long(s.l3 + ihl));
    uint8_t* ip = &p[8];
    ip[1] = 0xff;                // TOS
    ip[8] = 0xff;                // TTL
    ip[10] = ip[11] = 0xff;      // header checksum
    bth = s.l3 + ihl + 8;
  } else {
    p.insert(p.end(), f.begin() + long(s.l3), f.begin() + long(s.l3 + 40));
    uint8_t* ip = &p[8];
    ip[0] |= 0x0f;               // low nibble of the traffic class
    ip[1] = ip[2] = ip[3] = 0xff;  // rest of the traffic class, flow label
    ip[7] = 0xff;                // hop limit
    bth = s.l3 + 40 + (et == 0x86dd ? 8 : 0);
  }
  if (et != 0x8915) {            // UDP header, checksum as ones
    p.insert(p.end(), f.begin() + long(bth - 8), f.begin() + long(bth));
    p[p.size() - 1] = p[p.size() - 2] = 0xff;
  }
  p.insert(p.end(), f.begin() + long(bth), f.begin() + long(s.end - 4));
  p[p.size() - (s.end - 4 - bth) + 4] = 0xff;  // BTH byte 4
  return uint32_t(crc32(0L, p.data(), uInt(p.size())));
}

/// The ICRC carried in the frame (little-endian in its last four bytes).
inline uint32_t carried_icrc(const std::vector<uint8_t>& f) {
  const size_t e = icrc_span(f).end;
  return uint32_t(f[e - 4]) | uint32_t(f[e - 3]) << 8 | uint32_t(f[e - 2]) << 16 | uint32_t(f[e - 1]) << 24;
}

/// Recomputes and stores the ICRC of a hand-edited frame with the reference.
inline void reseal(std::vector<uint8_t>& f) {
  const size_t e = icrc_span(f).end;
  const uint32_t c = reference_icrc(f);
  for (int i = 0; i < 4; ++i) f[e - 4 + size_t(i)] = uint8_t(c >> (8 * i));
}

}  // namespace uroce::wire::test
