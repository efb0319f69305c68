// The GID table of a RoCE device (IBA A17.4.4 RoCEv2 GIDs, A16.4 RoCEv1 GIDs;
// modelled on the kernel's ib_core GID cache that rxe and mlx5 fill): per
// index a GID, its type, its VLAN (or none) and the source MAC frames sent
// from it carry. RoCEv2 GIDs are IP addresses, IPv4 mapped as ::ffff:a.b.c.d
// or native IPv6; RoCEv1 GIDs are the link-local fe80::EUI-64 of the MAC and,
// as Linux adds them, the same IP addresses (carried in the GRH).
// Every address in the table is one the stack answers ARP / NS / ping for,
// on that entry's VLAN. Control path: set/add/remove return Status; find is
// the per-packet "is this frame for us?" lookup (no allocation).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include <uroce/addr.h>
#include <uroce/status.h>

#include "stack/net/net_headers.h"

namespace uroce::net {

enum class GidType : uint8_t { kRoceV1, kRoceV2 };

struct GidEntry {
  Gid gid{};
  GidType type = GidType::kRoceV2;
  uint16_t vlan_id = kNoVlan;  ///< 0..4094, or kNoVlan for untagged
  MacAddr mac{};               ///< source MAC of frames sent from this GID
  friend constexpr bool operator==(const GidEntry&, const GidEntry&) = default;
};

/// ::ffff:a.b.c.d
Gid ipv4_gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d);
/// The IPv4 address of an IPv4-mapped GID.
inline void gid_to_ipv4(const Gid& g, uint8_t out[4]) {
  for (int i = 0; i < 4; ++i) out[i] = g.raw[12 + i];
}
/// fe80::(mac[0]^2)mac[1]:mac[2]ff:fe mac[3]:mac[4]mac[5] (RFC 4291 App. A,
/// as rxe/ib_core make the default RoCEv1 GID from the netdev's MAC).
Gid link_local_gid(const MacAddr& mac);
/// Parses "a.b.c.d" (to an IPv4-mapped GID) or an RFC 4291 IPv6 text address.
std::optional<Gid> parse_gid(const char* text);
inline bool is_ipv6_multicast(const uint8_t a[16]) { return a[0] == 0xff; }
inline bool is_unspecified(const uint8_t a[16]) {
  for (int i = 0; i < 16; ++i) {
    if (a[i]) return false;
  }
  return true;
}

class GidTable {
 public:
  static constexpr uint8_t kSize = 16;  ///< rxe's default GID table length

  /// Puts e at index. Errors: kInvalidArgument (index >= kSize, zero or
  /// multicast GID, RoCEv1 GID that is IPv4-mapped, VLAN id > 4094, zero or
  /// multicast MAC, the same GID/type/VLAN already at another index);
  /// kBusy (index already holds an entry: remove it first).
  Status set(uint8_t index, const GidEntry& e);
  /// Puts e at the lowest free index and returns it; kResourceExhausted when
  /// full, otherwise the errors of set.
  Result<uint8_t> add(const GidEntry& e);
  /// kInvalidArgument (index >= kSize), kNotFound (empty).
  Status remove(uint8_t index);
  /// kInvalidArgument (index >= kSize), kNotFound (empty).
  Result<GidEntry> query(uint8_t index) const;

  /// The entry at index, or nullptr (data path).
  const GidEntry* at(uint8_t index) const { return index < kSize && valid_[index] ? &e_[index] : nullptr; }
  /// Index of the entry whose address is gid on vlan_id (any type), for
  /// ARP/NS/ping targets and RoCE destination checks; nullopt if none.
  std::optional<uint8_t> find(const Gid& gid, uint16_t vlan_id) const;
  /// As find, restricted to one GID type (RoCEv2 for UDP/IP frames, RoCEv1 for 0x8915).
  std::optional<uint8_t> find(const Gid& gid, uint16_t vlan_id, GidType type) const;
  /// True if mac is the source MAC of some entry.
  bool owns_mac(const MacAddr& mac) const;
  uint8_t count() const { return count_; }

 private:
  std::array<GidEntry, kSize> e_{};
  std::array<bool, kSize> valid_{};
  uint8_t count_ = 0;
};

}  // namespace uroce::net
