// Multipath spraying: path choice and path health (paths.h).
#include "stack/transport/paths.h"

#include <algorithm>

namespace uroce::transport {

void Paths::init(const QpExt& ext, uint16_t sport) {
  *this = Paths{};
  n = std::clamp<uint16_t>(ext.paths, 1, kMaxPaths);
  mode = ext.path_mode;
  base_sport = sport;
  if (ext.flowlet_gap_ns) flowlet_gap_ns = ext.flowlet_gap_ns;
}

bool Paths::live(uint16_t i, uint64_t now_ns) {
  PathState& s = p[i];
  if (!s.down) return true;
  if (now_ns < s.down_until_ns) return false;
  // Probe time: the path is tried again; one more loss takes it down for twice as long.
  s.down = false;
  s.losses = kPathDownLosses - 1;
  s.backoff_ns = std::min(s.backoff_ns * 2, kPathProbeMaxNs);
  return true;
}

uint16_t Paths::next_live(uint16_t from, uint64_t now_ns) {
  for (uint16_t k = 0; k < n; ++k) {
    const uint16_t i = uint16_t((from + k) % n);
    if (live(i, now_ns)) return i;
  }
  // Every path is down: the one that comes back first.
  uint16_t best = 0;
  for (uint16_t i = 1; i < n; ++i) {
    if (p[i].down_until_ns < p[best].down_until_ns) best = i;
  }
  return best;
}

uint16_t Paths::pick(uint64_t now_ns) {
  if (n == 1) return 0;
  if (mode == PathMode::kFlowlet) {
    // A new flowlet (the gap passed) or a dead path moves on to the next live path.
    const bool gap = now_ns - last_tx_ns > flowlet_gap_ns;
    last_tx_ns = now_ns;
    if (!gap && live(next, now_ns)) return next;
    next = next_live(uint16_t((next + 1) % n), now_ns);
    return next;
  }
  const uint16_t i = next_live(next, now_ns);
  next = uint16_t((i + 1) % n);
  return i;
}

uint16_t Paths::pick_other(uint16_t prev, uint64_t now_ns) {
  if (n == 1) return 0;
  return next_live(uint16_t((prev + 1) % n), now_ns);
}

void Paths::delivered(uint16_t i, uint32_t seq) {
  PathState& s = p[i];
  if (int32_t(seq - s.delivered_seq) > 0) s.delivered_seq = seq;
  s.losses = 0;
  s.down = false;
  s.backoff_ns = kPathProbeBaseNs;
}

bool Paths::lost(uint16_t i, uint64_t now_ns) {
  PathState& s = p[i];
  if (n == 1 || s.down) return false;
  if (++s.losses < kPathDownLosses) return false;
  s.down = true;
  s.down_until_ns = now_ns + s.backoff_ns;
  return true;
}

}  // namespace uroce::transport
