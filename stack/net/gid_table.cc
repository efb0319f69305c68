// GID table (see gid_table.h): IBA A16.4 / A17.4.4, the ib_core GID cache model.
#include "stack/net/gid_table.h"

#include <arpa/inet.h>

#include <cstring>

namespace uroce::net {

Gid ipv4_gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  const uint8_t v4[4] = {a, b, c, d};
  return Gid::from_ipv4(v4);
}

Gid link_local_gid(const MacAddr& mac) {
  Gid g;
  g.raw[0] = 0xfe;
  g.raw[1] = 0x80;
  g.raw[8] = uint8_t(mac.b[0] ^ 0x02);  // RFC 4291 App. A: invert the universal/local bit
  g.raw[9] = mac.b[1];
  g.raw[10] = mac.b[2];
  g.raw[11] = 0xff;
  g.raw[12] = 0xfe;
  g.raw[13] = mac.b[3];
  g.raw[14] = mac.b[4];
  g.raw[15] = mac.b[5];
  return g;
}

std::optional<Gid> parse_gid(const char* text) {  // control path: inet_pton is fine here
  Gid g;
  uint8_t v4[4];
  if (inet_pton(AF_INET, text, v4) == 1) return Gid::from_ipv4(v4);
  if (inet_pton(AF_INET6, text, g.raw) == 1) return g;
  return std::nullopt;
}

namespace {

bool zero_mac(const MacAddr& m) { return m == MacAddr{}; }
bool multicast_mac(const MacAddr& m) { return m.b[0] & 1; }

}  // namespace

Status GidTable::set(uint8_t index, const GidEntry& e) {
  if (index >= kSize) return {StatusCode::kInvalidArgument, "GID index out of range"};
  if (is_unspecified(e.gid.raw)) return {StatusCode::kInvalidArgument, "GID is zero"};
  if (is_ipv6_multicast(e.gid.raw)) return {StatusCode::kInvalidArgument, "GID is multicast"};
  if (e.vlan_id != kNoVlan && e.vlan_id > 4094) return {StatusCode::kInvalidArgument, "VLAN id above 4094"};
  if (zero_mac(e.mac) || multicast_mac(e.mac)) return {StatusCode::kInvalidArgument, "source MAC not unicast"};
  if (valid_[index]) return {StatusCode::kBusy, "GID index in use"};
  if (find(e.gid, e.vlan_id, e.type)) return {StatusCode::kInvalidArgument, "GID already in the table"};
  e_[index] = e;
  valid_[index] = true;
  ++count_;
  return {};
}

Result<uint8_t> GidTable::add(const GidEntry& e) {
  for (uint8_t i = 0; i < kSize; ++i) {
    if (valid_[i]) continue;
    if (Status s = set(i, e); !s.ok()) return s;
    return i;
  }
  return Status{StatusCode::kResourceExhausted, "GID table full"};
}

Status GidTable::remove(uint8_t index) {
  if (index >= kSize) return {StatusCode::kInvalidArgument, "GID index out of range"};
  if (!valid_[index]) return {StatusCode::kNotFound, "no GID at that index"};
  valid_[index] = false;
  e_[index] = GidEntry{};
  --count_;
  return {};
}

Result<GidEntry> GidTable::query(uint8_t index) const {
  if (index >= kSize) return Status{StatusCode::kInvalidArgument, "GID index out of range"};
  if (!valid_[index]) return Status{StatusCode::kNotFound, "no GID at that index"};
  return e_[index];
}

std::optional<uint8_t> GidTable::find(const Gid& gid, uint16_t vlan_id) const {
  for (uint8_t i = 0; i < kSize; ++i) {
    if (valid_[i] && e_[i].vlan_id == vlan_id && e_[i].gid == gid) return i;
  }
  return std::nullopt;
}

std::optional<uint8_t> GidTable::find(const Gid& gid, uint16_t vlan_id, GidType type) const {
  for (uint8_t i = 0; i < kSize; ++i) {
    if (valid_[i] && e_[i].type == type && e_[i].vlan_id == vlan_id && e_[i].gid == gid) return i;
  }
  return std::nullopt;
}

bool GidTable::owns_mac(const MacAddr& mac) const {
  for (uint8_t i = 0; i < kSize; ++i) {
    if (valid_[i] && e_[i].mac == mac) return true;
  }
  return false;
}

}  // namespace uroce::net
