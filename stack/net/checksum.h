// The Internet checksum (RFC 1071) for IPv4 headers, ICMP and ICMPv6 (with the
// IPv6 pseudo-header of RFC 8200 8.1). Pure functions over byte spans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uroce::net {

/// Adds the bytes as big-endian 16-bit words (an odd last byte is padded with
/// zero) to a 32-bit partial sum; chain calls over pieces of even length.
inline uint32_t csum_partial(std::span<const uint8_t> b, uint32_t sum = 0) {
  size_t i = 0;
  uint64_t s = sum;
  for (; i + 1 < b.size(); i += 2) s += uint32_t(b[i]) << 8 | b[i + 1];
  if (i < b.size()) s += uint32_t(b[i]) << 8;
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return uint32_t(s);
}

/// Folds a partial sum and returns its one's complement: the value to store.
/// A region whose stored checksum is right gives 0 here.
inline uint16_t csum_finish(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(~sum);
}

/// Partial sum of the IPv6 pseudo-header (src, dst, upper-layer length, next header).
inline uint32_t ipv6_pseudo_sum(const uint8_t src[16], const uint8_t dst[16], uint32_t len, uint8_t next_header) {
  uint32_t s = csum_partial({src, 16});
  s = csum_partial({dst, 16}, s);
  const uint8_t tail[8] = {uint8_t(len >> 24), uint8_t(len >> 16), uint8_t(len >> 8), uint8_t(len), 0, 0, 0,
                           next_header};
  return csum_partial(tail, s);
}

}  // namespace uroce::net
