#include "drivers/dpdk/eal_args.h"

#include <string_view>

#include <uroce/eal.h>

namespace uroce::dpdk {

SplitArgs split_eal_args(int argc, const char* const* argv, int first) {
  SplitArgs s;
  int sep = -1;
  for (int i = first; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      sep = i;
      break;
    }
  }
  if (sep < 0) {
    for (int i = first; i < argc; ++i) s.app.emplace_back(argv[i]);
    return s;
  }
  s.has_separator = true;
  for (int i = first; i < sep; ++i) s.eal.emplace_back(argv[i]);
  for (int i = sep + 1; i < argc; ++i) s.app.emplace_back(argv[i]);
  return s;
}

Status init_eal_from_args(const SplitArgs& split) {
  return init_eal(split.eal.empty() ? default_eal_args() : split.eal);
}

}  // namespace uroce::dpdk
