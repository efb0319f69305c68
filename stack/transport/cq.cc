// Completion queues (IBA 11.4.2): writing a completion, as the roles do.
#include "stack/transport/cq.h"

namespace uroce::transport {

bool cq_push(Env& env, Cq* cq, const Wc& wc, bool solicited) {
  CqImpl& c = impl(cq);
  if (c.ring.full()) {
    env.inc(Counter::cq_overflow);
    if (!c.overrun) {
      c.overrun = true;
      env.raise(AsyncEvent{AsyncEventType::kCqErr, nullptr, cq});
    }
    return false;
  }
  c.ring.push() = wc;
  // IBA 11.4.2.2: a solicited-only arming also fires on an unsuccessful
  // completion, so a consumer that waits for solicited ones sees errors.
  const bool fire = c.arm == CqArm::kNext ||
                    (c.arm == CqArm::kSolicited && (solicited || wc.status != WcStatus::kSuccess));
  if (fire) {
    c.arm = CqArm::kNone;
    env.inc(Counter::cq_events);
    if (c.on_event) c.on_event(cq, c.event_arg);
  }
  return true;
}

}  // namespace uroce::transport
