// The Internet checksum (RFC 1071), the one copy in the tree: IPv4 headers
// (parse and build, the fabric's ECN marking), ICMP and ICMPv6 (with the IPv6
// pseudo-header of RFC 8200 8.1). Pure functions over byte spans, inline for
// the data path (an IPv4 header is summed once per parsed or built frame).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace uroce::wire {

/// Adds the bytes as big-endian 16-bit words (an odd last byte is padded with
/// zero) to a 32-bit partial sum and returns it, not folded to 16 bits; chain
/// calls over pieces of even length. Any length: the sum runs in 64 bits and
/// folds to 32 (2^32 = 1 modulo 0xffff, so folding at bit 32 keeps the sum).
inline uint32_t csum_partial(std::span<const uint8_t> b, uint32_t sum = 0) {
  size_t i = 0;
  uint64_t s = sum;
  for (; i + 1 < b.size(); i += 2) s += uint32_t(b[i]) << 8 | b[i + 1];
  if (i < b.size()) s += uint32_t(b[i]) << 8;
  s = (s & 0xffffffff) + (s >> 32);
  return uint32_t((s & 0xffffffff) + (s >> 32));
}

/// Folds a partial sum to 16 bits and returns its one's complement: the
/// value to store. A region whose stored checksum is right gives 0 here.
/// Branch-free: two folds take any 32-bit sum to at most 0xffff.
inline uint16_t csum_finish(uint32_t sum) {
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
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

}  // namespace uroce::wire
