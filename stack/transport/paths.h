// Multipath spraying (QpExt::paths > 1, docs/LOSS_RECOVERY.md "How it works"):
// a QP's request packets leave on one of `paths` UDP source ports, so that
// ECMP in the fabric spreads them over its paths; per packet (the next live
// path) or per flowlet (a burst stays on one path). READ and atomic requests
// keep to one path; READ responses are sprayed from it (response_path). Each path keeps what the
// selective-repeat requester learned of it: the newest transmission delivered
// on it (paths are FIFO, so an older one still missing was lost), consecutive
// losses, and whether it is down (avoided) until a probe time that backs off
// exponentially. Path 0 is the QP's usual port (roce_udp_sport).
#pragma once

#include <array>
#include <cstdint>

#include <uroce/verbs.h>

namespace uroce::transport {

inline constexpr uint32_t kMaxPaths = 256;
inline constexpr uint8_t kPathDownLosses = 3;          // consecutive losses with no delivery: the path is down
inline constexpr uint64_t kPathProbeBaseNs = 100'000;   // first wait before a down path is tried again
inline constexpr uint64_t kPathProbeMaxNs = 100'000'000;
inline constexpr uint32_t kDefaultFlowletGapNs = 50'000;

struct PathState {
  uint64_t down_until_ns = 0;  // down: avoided until then (then probed)
  uint64_t backoff_ns = kPathProbeBaseNs;
  uint32_t delivered_seq = 0;  // newest transmit sequence number (s)acked on this path
  uint8_t losses = 0;          // consecutive, since the last delivery
  bool down = false;
};

struct Paths {
  uint16_t n = 1;
  PathMode mode = PathMode::kPacket;
  uint16_t base_sport = 0;     // path 0
  uint16_t next = 0;           // kPacket: where the round robin goes next; kFlowlet: the flowlet's path
  uint32_t flowlet_gap_ns = kDefaultFlowletGapNs;
  uint64_t last_tx_ns = 0;     // kFlowlet: when the flowlet's last packet left
  uint8_t last = 0;            // the path of the last request sent (its RTT sample's path)
  uint16_t ordered = 0;        // READ and atomic requests' path (pick_ordered)
  std::array<PathState, kMaxPaths> p{};

  /// Sets up n paths from the QP's usual source port (control path, INIT -> RTR).
  void init(const QpExt& ext, uint16_t sport);
  /// UDP source port of path i: inside RoCE's 0xC000..0xFFFF, distinct per path.
  uint16_t sport(uint16_t i) const { return uint16_t(0xC000 | ((base_sport - 0xC000 + i) & 0x3fff)); }
  /// The path whose port is sport (0 for a port that is none of them).
  uint16_t index(uint16_t sport) const {
    const uint16_t i = uint16_t((sport - base_sport) & 0x3fff);
    return i < n ? i : 0;
  }
  /// The path of a response packet psn to a request that came on path req:
  /// per packet, the paths in turn from req (run_first, the request's first
  /// response PSN, on req); per flowlet, req. The requester knows each
  /// response's path from its request's and the PSN, as the FIFO rule of
  /// selective repeat needs.
  uint16_t response_path(uint16_t req, uint32_t run_first, uint32_t psn) const {
    if (n == 1 || mode == PathMode::kFlowlet) return req;
    return uint16_t((req + ((psn - run_first) & 0x00ffffff)) % n);
  }
  /// The path of the next new packet at now_ns (a live one where there is one).
  uint16_t pick(uint64_t now_ns);
  /// The path of a READ or atomic request: one path, kept while it is live,
  /// so that they arrive in order (a responder runs them only in order and
  /// drops one that comes ahead of its turn); their responses are sprayed.
  uint16_t pick_ordered(uint64_t now_ns) {
    if (n > 1 && !live(ordered, now_ns)) ordered = next_live(uint16_t((ordered + 1) % n), now_ns);
    return ordered;
  }
  /// The path of a resend whose last transmission went on prev: another live one.
  uint16_t pick_other(uint16_t prev, uint64_t now_ns);
  /// A transmission with sequence number seq sent on path i was delivered.
  void delivered(uint16_t i, uint32_t seq);
  /// A transmission on path i was lost; true if that took the path down.
  bool lost(uint16_t i, uint64_t now_ns);

 private:
  bool live(uint16_t i, uint64_t now_ns);
  uint16_t next_live(uint16_t from, uint64_t now_ns);
};

}  // namespace uroce::transport
