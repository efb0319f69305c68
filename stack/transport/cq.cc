// Completion queues (IBA 11.4.2): writing a completion, as the roles do.
#include "stack/transport/cq.h"

namespace uroce::transport {

bool cq_push(Env& env, Cq* cq, const Wc& wc) {
  auto& ring = impl(cq).ring;
  if (ring.full()) {
    env.inc(Counter::cq_overflow);
    return false;
  }
  ring.push() = wc;
  return true;
}

}  // namespace uroce::transport
