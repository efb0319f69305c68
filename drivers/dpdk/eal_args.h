// The DPDK command-line convention for uroce programs:
//   uroce <cmd> [EAL args] -- [app args]
// Arguments before "--" go to rte_eal_init verbatim (as in dpdk-testpmd and
// the DPDK examples); those after it belong to the program. Without "--" every
// argument is the program's and EAL gets uroce::default_eal_args() (no
// hugepages, no PCI scan, no shared config), so tools run on any Linux box.
// Control path.
#pragma once

#include <string>
#include <vector>

#include <uroce/status.h>

namespace uroce::dpdk {

struct SplitArgs {
  std::vector<std::string> eal;  ///< before "--" (empty: none given)
  std::vector<std::string> app;  ///< after "--", or all of them without "--"
  bool has_separator = false;    ///< a "--" was present
};

/// Splits argv[first..argc) at the first "--" (which belongs to neither part).
SplitArgs split_eal_args(int argc, const char* const* argv, int first = 1);

/// init_eal(split.eal), or init_eal(default_eal_args()) when split.eal is empty.
Status init_eal_from_args(const SplitArgs& split);

}  // namespace uroce::dpdk
