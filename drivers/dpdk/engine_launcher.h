// Runs the engines of an EngineGroup on EAL worker lcores (DESIGN
// "Shared-nothing engines"): engine e polls on lcores[e] with
// rte_eal_remote_launch until stop(), passing the TSC in ns (TscClock) as
// now_ns. An application on an engine's own lcore instead calls
// EngineGroup::poll itself (run-to-completion) and does not use this class.
// Control path: start() and stop() come from the main lcore.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <uroce/engine_group.h>
#include <uroce/status.h>

#include "tsc_clock.h"  // beside this file, in the tree and where it is installed (<uroce/dpdk/>)

namespace uroce::dpdk {

class EngineLauncher {
 public:
  /// What runs on each lcore: called with the engine index, the clock and the
  /// stop flag; returns the lcore's exit code. The default body polls
  /// group.poll(e, clock.now_ns()) until stop is set.
  using Body = std::function<int(uint32_t engine, const TscClock& clock, const std::atomic<bool>& stop)>;

  explicit EngineLauncher(EngineGroup& group) : group_(group) {}
  ~EngineLauncher() { (void)stop(); }
  EngineLauncher(const EngineLauncher&) = delete;
  EngineLauncher& operator=(const EngineLauncher&) = delete;

  /// Starts engine e on lcores[e] (group.size() worker lcores, none of them
  /// the caller's). Errors: kInvalidArgument (wrong count, not an enabled
  /// worker lcore), kBusy (an lcore is running something else); engines
  /// already started are stopped again.
  Status start(std::span<const unsigned> lcores, Body body = {});
  /// The first group.size() enabled worker lcores (EAL -l/--lcores order).
  static std::vector<unsigned> worker_lcores(uint32_t n);
  /// Sets the stop flag and waits for every lcore (rte_eal_wait_lcore).
  /// Returns kInternal if any body returned nonzero. Idempotent.
  Status stop();
  bool running() const { return !lcores_.empty(); }
  const TscClock& clock() const { return clock_; }

 private:
  struct Slot {
    EngineLauncher* self;
    uint32_t engine;
  };
  static int lcore_main(void* arg);

  EngineGroup& group_;
  TscClock clock_;
  Body body_;
  std::atomic<bool> stop_{false};
  std::vector<unsigned> lcores_;
  std::vector<Slot> slots_;
};

}  // namespace uroce::dpdk
