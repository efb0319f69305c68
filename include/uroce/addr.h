// Link and network addresses of the public API: Ethernet MAC and 128-bit GID.
#pragma once

#include <cstdint>

namespace uroce {

struct MacAddr {
  uint8_t b[6]{};
  friend constexpr bool operator==(const MacAddr&, const MacAddr&) = default;
};

/// A 128-bit GID: an IPv6 address, or an IPv4 address mapped as ::ffff:a.b.c.d
/// (IBA A17.4.4.1, the RoCEv2 IPv4 GID).
struct Gid {
  uint8_t raw[16]{};
  friend constexpr bool operator==(const Gid&, const Gid&) = default;
  bool is_ipv4_mapped() const;
  static Gid from_ipv4(const uint8_t v4[4]);
};

}  // namespace uroce
