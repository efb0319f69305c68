// The run loops' "no progress for --timeout seconds" and Ctrl-C check, for
// the commands that spin on a DPDK queue or engine (perf, floor). Data path:
// it reads the TSC once every kIdleLoopsPerRead loops without progress and
// never in a loop with progress. A read costs about 8 ns here, and a spinning
// loop's own work (an engine poll, an empty rx_burst) is tens of ns, so a read
// per loop slowed what it measured. A stall is reported up to
// kIdleLoopsPerRead empty loops (microseconds) late.
#pragma once

#include <cstdint>
#include <string>

#include <rte_cycles.h>

#include "apps/common/launch.h"  // g_stop

namespace uroce::apps {

class Watchdog {
 public:
  explicit Watchdog(uint32_t timeout_s) : timeout_s_(timeout_s), limit_(uint64_t(timeout_s) * rte_get_tsc_hz()) {}

  /// The loop moved something: the quiet time starts again.
  void progress() { idle_loops_ = 0; }

  /// Call once a loop; moved: the loop posted, sent, received or completed
  /// something. True, with err set, once interrupted or quiet for the timeout.
  bool stalled(bool moved, std::string& err) {
    if (moved) {
      progress();
      return false;
    }
    if (++idle_loops_ % kIdleLoopsPerRead != 0) return false;
    const uint64_t now = rte_rdtsc();
    if (idle_loops_ == kIdleLoopsPerRead) quiet_since_ = now;
    if (g_stop) {
      err = "interrupted";
      return true;
    }
    if (now - quiet_since_ > limit_) {
      err = "no progress for " + std::to_string(timeout_s_) + " s";
      return true;
    }
    return false;
  }

 private:
  static constexpr uint64_t kIdleLoopsPerRead = 256;
  uint32_t timeout_s_;
  uint64_t limit_;  // timeout_s_ in TSC cycles
  uint64_t idle_loops_ = 0;
  uint64_t quiet_since_ = 0;
};

}  // namespace uroce::apps
