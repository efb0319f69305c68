// DCQCN notification point: one CNP per QP per interval; see cnp.h.
#include "stack/cc/cnp.h"

namespace uroce::cc {

bool CnpGenerator::on_ce_marked(uint64_t now_ns) {
  if (sent_any_ && now_ns - last_cnp_ns_ < interval_ns_) return false;
  sent_any_ = true;
  last_cnp_ns_ = now_ns;
  return true;
}

}  // namespace uroce::cc
