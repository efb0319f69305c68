// Link and network addresses of the public API: Ethernet MAC and 128-bit GID.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace uroce {

namespace detail {
// The addresses' ==: memcmp, which the compiler turns into a few wide loads;
// a defaulted == compares the arrays a byte at a time, and the receive path
// compares a MAC and two GIDs per frame.
template <size_t N>
constexpr bool bytes_equal(const uint8_t (&x)[N], const uint8_t (&y)[N]) {
  if (std::is_constant_evaluated()) return std::equal(x, x + N, y);
  return std::memcmp(x, y, N) == 0;
}
}  // namespace detail

struct MacAddr {
  uint8_t b[6]{};
  friend constexpr bool operator==(const MacAddr& x, const MacAddr& y) { return detail::bytes_equal(x.b, y.b); }
};

/// A 128-bit GID: an IPv6 address, or an IPv4 address mapped as ::ffff:a.b.c.d
/// (IBA A17.4.4.1, the RoCEv2 IPv4 GID).
struct Gid {
  uint8_t raw[16]{};
  friend constexpr bool operator==(const Gid& x, const Gid& y) { return detail::bytes_equal(x.raw, y.raw); }
  bool is_ipv4_mapped() const;
  static Gid from_ipv4(const uint8_t v4[4]);
};

}  // namespace uroce
