// Completion queues (IBA 11.4.2): a fixed ring of work completions.
#pragma once

#include <uroce/verbs.h>

#include "stack/common/ring.h"
#include "stack/transport/env.h"

namespace uroce::transport {

struct CqImpl : Cq {
  Ring<Wc> ring;
  uint32_t refs = 0;  // QPs that complete into this CQ
};

inline CqImpl& impl(Cq* cq) { return *static_cast<CqImpl*>(cq); }

/// Appends wc. On a full CQ counts cq_overflow and returns false: the caller
/// moves the QP to the error state (IBA 11.4.2.1: CQ overrun is a QP error).
bool cq_push(Env& env, Cq* cq, const Wc& wc);

}  // namespace uroce::transport
