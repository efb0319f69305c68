// EngineLauncher: engines on EAL worker lcores (control path; the loop in
// lcore_main is the engines' data path).
#include "drivers/dpdk/engine_launcher.h"

#include <rte_launch.h>
#include <rte_lcore.h>

namespace uroce::dpdk {

std::vector<unsigned> EngineLauncher::worker_lcores(uint32_t n) {
  std::vector<unsigned> out;
  unsigned lc = 0;
  RTE_LCORE_FOREACH_WORKER(lc) {
    if (out.size() == n) break;
    out.push_back(lc);
  }
  return out;
}

int EngineLauncher::lcore_main(void* arg) {
  const Slot& s = *static_cast<const Slot*>(arg);
  EngineLauncher& l = *s.self;
  if (l.body_) return l.body_(s.engine, l.clock_, l.stop_);
  while (!l.stop_.load(std::memory_order_relaxed)) l.group_.poll(s.engine, l.clock_.now_ns());
  return 0;
}

Status EngineLauncher::start(std::span<const unsigned> lcores, Body body) {
  if (running()) return Status(StatusCode::kBusy, "engines already running");
  if (lcores.size() != group_.size()) return Status(StatusCode::kInvalidArgument, "one lcore per engine");
  for (unsigned lc : lcores) {
    if (lc >= RTE_MAX_LCORE || !rte_lcore_is_enabled(lc) || lc == rte_get_main_lcore() || lc == rte_lcore_id()) {
      return Status(StatusCode::kInvalidArgument, "engine lcores must be enabled EAL worker lcores");
    }
  }
  body_ = std::move(body);
  stop_.store(false, std::memory_order_relaxed);
  slots_.clear();
  for (uint32_t e = 0; e < group_.size(); ++e) slots_.push_back(Slot{this, e});
  for (uint32_t e = 0; e < group_.size(); ++e) {
    if (rte_eal_remote_launch(lcore_main, &slots_[e], lcores[e]) != 0) {
      (void)stop();
      return Status(StatusCode::kBusy, "an engine lcore is busy");
    }
    lcores_.push_back(lcores[e]);
  }
  return {};
}

Status EngineLauncher::stop() {
  stop_.store(true, std::memory_order_relaxed);
  bool ok = true;
  for (unsigned lc : lcores_) ok &= rte_eal_wait_lcore(lc) == 0;
  lcores_.clear();
  if (!ok) return Status(StatusCode::kInternal, "an engine lcore returned an error");
  return {};
}

}  // namespace uroce::dpdk
