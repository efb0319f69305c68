// Neighbour table (see neighbour.h): RFC 826 merge rules, RFC 4861 7.2-7.3
// states, binary exponential backoff of solicitations, aging.
#include "stack/net/neighbour.h"

#include <bit>
#include <cstring>

namespace uroce::net {

NeighbourTable::NeighbourTable(const NeighConfig& cfg, NetCounters& counters)
    : cfg_(cfg), counters_(counters) {
  const uint32_t n = std::bit_ceil(cfg.capacity < kWays ? kWays : cfg.capacity);
  slots_.resize(n);
  mask_ = n - 1;
  cfg_.capacity = n;
  if (cfg_.max_solicits == 0) cfg_.max_solicits = 1;
}

uint32_t NeighbourTable::home(const Gid& ip, uint16_t vlan_id) const {
  uint32_t h = 2166136261u;  // FNV-1a
  for (uint8_t b : ip.raw) h = (h ^ b) * 16777619u;
  h = (h ^ uint8_t(vlan_id)) * 16777619u;
  h = (h ^ uint8_t(vlan_id >> 8)) * 16777619u;
  return h & mask_;
}

NeighEntry* NeighbourTable::find(const Gid& ip, uint16_t vlan_id) {
  const uint32_t h = home(ip, vlan_id);
  for (uint32_t w = 0; w < kWays; ++w) {
    NeighEntry& e = slots_[(h + w) & mask_];
    if (e.state != NeighState::kFree && e.vlan_id == vlan_id && e.ip == ip) return &e;
  }
  return nullptr;
}

const NeighEntry* NeighbourTable::lookup(const Gid& ip, uint16_t vlan_id) const {
  return const_cast<NeighbourTable*>(this)->find(ip, vlan_id);
}

NeighEntry* NeighbourTable::insert(const Gid& ip, uint16_t vlan_id) {
  // Victim preference: free, failed, stale, then the least recently confirmed
  // reachable entry. Entries being resolved or probed are never evicted.
  const uint32_t h = home(ip, vlan_id);
  NeighEntry* victim = nullptr;
  auto rank = [](NeighState s) -> int {
    switch (s) {
      case NeighState::kFree: return 0;
      case NeighState::kFailed: return 1;
      case NeighState::kStale: return 2;
      case NeighState::kReachable: return 3;
      case NeighState::kIncomplete:
      case NeighState::kProbe: return 4;
    }
    return 4;
  };
  for (uint32_t w = 0; w < kWays; ++w) {
    NeighEntry& e = slots_[(h + w) & mask_];
    if (rank(e.state) == 4) continue;
    if (!victim || rank(e.state) < rank(victim->state) ||
        (rank(e.state) == rank(victim->state) && e.updated_ns < victim->updated_ns)) {
      victim = &e;
    }
  }
  if (!victim) {
    counters_.inc(NetCounter::neigh_table_full);
    return nullptr;
  }
  if (victim->state != NeighState::kFree) counters_.inc(NetCounter::neigh_evicted);
  *victim = NeighEntry{};
  victim->ip = ip;
  victim->vlan_id = vlan_id;
  return victim;
}

uint64_t NeighbourTable::backoff(uint8_t solicits) const {
  uint64_t t = cfg_.retrans_ns;
  for (uint8_t i = 0; i < solicits && t < cfg_.max_retrans_ns; ++i) t <<= 1;
  return t < cfg_.max_retrans_ns ? t : cfg_.max_retrans_ns;
}

void NeighbourTable::start(NeighEntry& e, NeighState s, uint64_t now_ns) {
  const bool was_active = e.state == NeighState::kIncomplete || e.state == NeighState::kProbe;
  e.state = s;
  e.solicits = 0;
  e.next_tx_ns = now_ns;
  if (!was_active) ++active_;
  if (now_ns < next_due_ns_) next_due_ns_ = now_ns;
}

Resolution NeighbourTable::resolve(const Gid& ip, uint16_t vlan_id, uint8_t sgid_index, uint64_t now_ns) {
  NeighEntry* e = find(ip, vlan_id);
  if (!e) {
    e = insert(ip, vlan_id);
    if (!e) return {ResolveStatus::kFailed, {}};
    e->sgid_index = sgid_index;
    start(*e, NeighState::kIncomplete, now_ns);
    counters_.inc(NetCounter::neigh_resolve_started);
    return {ResolveStatus::kPending, {}};
  }
  switch (e->state) {
    case NeighState::kIncomplete: return {ResolveStatus::kPending, {}};
    case NeighState::kReachable:
      if (now_ns - e->updated_ns <= cfg_.reachable_ns) return {ResolveStatus::kResolved, e->mac};
      e->sgid_index = sgid_index;
      start(*e, NeighState::kProbe, now_ns);  // aged: re-confirm, keep using the MAC meanwhile
      return {ResolveStatus::kResolved, e->mac};
    case NeighState::kStale:
      e->sgid_index = sgid_index;
      start(*e, NeighState::kProbe, now_ns);  // learned, never confirmed: confirm it
      return {ResolveStatus::kResolved, e->mac};
    case NeighState::kProbe: return {ResolveStatus::kResolved, e->mac};
    case NeighState::kFailed:
      if (now_ns - e->updated_ns < cfg_.failed_hold_ns) return {ResolveStatus::kFailed, {}};
      e->sgid_index = sgid_index;
      start(*e, NeighState::kIncomplete, now_ns);
      counters_.inc(NetCounter::neigh_resolve_started);
      return {ResolveStatus::kPending, {}};
    case NeighState::kFree: break;
  }
  return {ResolveStatus::kFailed, {}};
}

void NeighbourTable::learn(const Gid& ip, uint16_t vlan_id, const MacAddr& mac, bool confirmed, bool create,
                           uint8_t sgid_index, uint64_t now_ns) {
  NeighEntry* e = find(ip, vlan_id);
  if (!e) {
    if (!create) return;
    e = insert(ip, vlan_id);
    if (!e) return;
    e->sgid_index = sgid_index;
    e->state = NeighState::kStale;
    counters_.inc(NetCounter::neigh_learned);
  } else {
    if (e->state == NeighState::kIncomplete) counters_.inc(NetCounter::neigh_resolved);
    else counters_.inc(NetCounter::neigh_updated);
    if (e->state == NeighState::kIncomplete || e->state == NeighState::kProbe) --active_;
  }
  const bool changed = !(e->mac == mac);
  e->mac = mac;
  if (confirmed) {
    e->state = NeighState::kReachable;
  } else if (changed || e->state == NeighState::kIncomplete || e->state == NeighState::kFailed ||
             e->state == NeighState::kProbe || e->state == NeighState::kFree) {
    e->state = NeighState::kStale;  // RFC 4861 7.2.5/7.2.3: unconfirmed or changed MAC
  }
  e->updated_ns = now_ns;
  e->solicits = 0;
}

}  // namespace uroce::net
