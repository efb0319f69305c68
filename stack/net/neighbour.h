// The neighbour table: IP (IPv4-mapped or IPv6 GID) + VLAN -> MAC, filled by
// ARP (RFC 826) and neighbour discovery (RFC 4861 7.3, simplified: states
// INCOMPLETE, REACHABLE, STALE, PROBE, FAILED). A fixed, preallocated,
// set-associative table: each key may live in kWays slots from its hash; no
// allocation after construction, O(kWays) per lookup. Pure state with
// injected time: which solicitations are due is decided here, the frames are
// built by NetStack.
#pragma once

#include <cstdint>
#include <vector>

#include <uroce/addr.h>

#include "stack/net/net_counters.h"

namespace uroce::net {

struct NeighConfig {
  uint32_t capacity = 256;                 ///< entries; rounded up to a power of two >= kWays
  uint64_t retrans_ns = 250'000'000;       ///< first solicitation interval, doubled per retry
  uint64_t max_retrans_ns = 2'000'000'000; ///< backoff cap
  uint8_t max_solicits = 4;                ///< solicitations before an entry fails
  uint64_t reachable_ns = 30'000'000'000;  ///< age after which a MAC is re-confirmed (Linux base_reachable_time)
  uint64_t failed_hold_ns = 1'000'000'000; ///< a failed entry answers kFailed this long before a retry
};

enum class NeighState : uint8_t { kFree, kIncomplete, kReachable, kStale, kProbe, kFailed };

struct NeighEntry {
  Gid ip{};
  uint16_t vlan_id = 0;
  NeighState state = NeighState::kFree;
  uint8_t sgid_index = 0;     ///< GID the solicitations are sent from
  uint8_t solicits = 0;       ///< solicitations sent in this round
  MacAddr mac{};              ///< valid in kReachable, kStale, kProbe
  uint64_t updated_ns = 0;    ///< last confirmation (reachable), learn (stale) or failure
  uint64_t next_tx_ns = 0;    ///< next solicitation (kIncomplete, kProbe)
};

enum class ResolveStatus : uint8_t {
  kResolved,  ///< mac is valid (possibly being re-confirmed in the background)
  kPending,   ///< a solicitation is queued or in flight; ask again later
  kFailed,    ///< no answer (held for failed_hold_ns), no table space, or no source GID
};

struct Resolution {
  ResolveStatus status = ResolveStatus::kPending;
  MacAddr mac{};
};

class NeighbourTable {
 public:
  static constexpr uint32_t kWays = 8;

  /// Control path: allocates the table.
  explicit NeighbourTable(const NeighConfig& cfg, NetCounters& counters);

  /// Looks ip up on vlan_id; starts resolution from sgid_index if unknown
  /// (the solicitation goes out at the next poll_due), and re-confirms a MAC
  /// older than reachable_ns while still returning it.
  Resolution resolve(const Gid& ip, uint16_t vlan_id, uint8_t sgid_index, uint64_t now_ns);

  /// An answer or an unsolicited announcement from ip on vlan_id.
  /// confirmed: a solicited reply (ARP reply to us, NA with S) -> kReachable;
  /// otherwise the MAC is recorded as kStale (RFC 4861 7.2.5 / RFC 826 merge).
  /// create: add the entry if absent (we were the target of the sender's request).
  void learn(const Gid& ip, uint16_t vlan_id, const MacAddr& mac, bool confirmed, bool create,
             uint8_t sgid_index, uint64_t now_ns);

  /// Calls send(entry) -> bool for each entry whose solicitation is due at
  /// now_ns (false: could not send now, try at the next poll), and fails the
  /// entries that have used up max_solicits. Cheap when nothing is pending.
  template <typename Send>
  void poll_due(uint64_t now_ns, Send&& send);

  /// The entry for ip on vlan_id, or nullptr (for tests and dumps).
  const NeighEntry* lookup(const Gid& ip, uint16_t vlan_id) const;
  const NeighConfig& config() const { return cfg_; }

 private:
  NeighEntry* find(const Gid& ip, uint16_t vlan_id);
  NeighEntry* insert(const Gid& ip, uint16_t vlan_id);  // nullptr: every way busy resolving
  uint32_t home(const Gid& ip, uint16_t vlan_id) const;
  void start(NeighEntry& e, NeighState s, uint64_t now_ns);
  uint64_t backoff(uint8_t solicits) const;

  NeighConfig cfg_;
  NetCounters& counters_;
  std::vector<NeighEntry> slots_;
  uint32_t mask_ = 0;
  uint32_t active_ = 0;             // entries in kIncomplete or kProbe
  uint64_t next_due_ns_ = UINT64_MAX;
};

template <typename Send>
void NeighbourTable::poll_due(uint64_t now_ns, Send&& send) {
  if (active_ == 0 || now_ns < next_due_ns_) return;
  uint64_t next = UINT64_MAX;
  for (NeighEntry& e : slots_) {
    if (e.state != NeighState::kIncomplete && e.state != NeighState::kProbe) continue;
    if (e.next_tx_ns > now_ns) {
      next = e.next_tx_ns < next ? e.next_tx_ns : next;
      continue;
    }
    if (e.solicits >= cfg_.max_solicits) {  // the last solicitation's wait is over
      e.state = NeighState::kFailed;
      e.updated_ns = now_ns;
      --active_;
      counters_.inc(NetCounter::neigh_resolve_timeout);
      continue;
    }
    if (send(static_cast<const NeighEntry&>(e))) {
      if (e.solicits) counters_.inc(NetCounter::neigh_retransmit);
      e.next_tx_ns = now_ns + backoff(e.solicits);
      ++e.solicits;
    }
    next = e.next_tx_ns < next ? e.next_tx_ns : next;
  }
  next_due_ns_ = next;
}

}  // namespace uroce::net
