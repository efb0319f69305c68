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
  bool overrun = false;  // IBA 11.4.2.1: overran once; its CQ error event was raised
};

inline CqImpl& impl(Cq* cq) { return *static_cast<CqImpl*>(cq); }

/// Appends wc, raising the CQ's event if its arming asks for this one
/// (solicited: a receive whose message had the SE bit). On a full CQ counts
/// cq_overflow, raises the CQ error event the first time (IBA 11.4.2.1, as
/// rxe_cq_post does) and returns false: the caller moves the QP to the error
/// state with a QP fatal event (qp_fail).
bool cq_push(Env& env, Cq* cq, const Wc& wc, bool solicited = false);

}  // namespace uroce::transport
