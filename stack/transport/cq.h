// Completion queues (IBA 11.4.2): a fixed ring of work completions.
#pragma once

#include <uroce/verbs.h>

#include "stack/common/ring.h"
#include "stack/transport/env.h"

namespace uroce::transport {

/// What the next completion must be to raise an event (req_notify_cq).
enum class CqArm : uint8_t { kNone, kSolicited, kNext };

struct CqImpl : Cq {
  Ring<Wc> ring;
  uint32_t refs = 0;  // QPs that complete into this CQ
  CqArm arm = CqArm::kNone;
  CqEventFn on_event = nullptr;
  void* event_arg = nullptr;
};

inline CqImpl& impl(Cq* cq) { return *static_cast<CqImpl*>(cq); }

/// Appends wc, raising the CQ's event if its arming asks for this one
/// (solicited: a receive whose message had the SE bit). On a full CQ counts
/// cq_overflow and returns false: the caller moves the QP to the error state
/// (IBA 11.4.2.1: CQ overrun is a QP error).
bool cq_push(Env& env, Cq* cq, const Wc& wc, bool solicited = false);

}  // namespace uroce::transport
