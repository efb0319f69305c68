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
/// calls over pieces of even length. Any length: words are summed in 32 bits
/// in runs of at most 65536 (whose sum cannot overflow), the runs in 64 bits,
/// and the total folds to 32 (2^32 = 1 modulo 0xffff, so that keeps the sum).
/// A short constant length (the 20-byte IPv4 header) is one run, and
/// nothing of the 64-bit part is left once inlined.
inline uint32_t csum_partial(std::span<const uint8_t> b, uint32_t sum = 0) {
  const uint8_t* p = b.data();
  size_t words = b.size() / 2;
  uint64_t s = sum;
  while (words) {
    const size_t run = words < 65536 ? words : 65536;
    uint32_t part = 0;
    for (size_t i = 0; i < run; ++i) part += uint32_t(p[2 * i]) << 8 | p[2 * i + 1];
    s += part;
    p += 2 * run;
    words -= run;
  }
  if (b.size() & 1) s += uint32_t(b[b.size() - 1]) << 8;
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
