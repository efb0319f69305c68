// --trace-qp: the tools' switch for the state trace of one QP
// (include/uroce/trace.h, docs/TRACE.md). Every state step of the QP whose
// number is given (requester, responder and completer) goes to stderr, one
// line each, while the command runs.
#pragma once

#include <cstdint>

#include <uroce/trace.h>
#include <uroce/verbs.h>

#include "apps/common/args.h"

namespace uroce::apps {

/// The option, for a command's OptSpec table.
#define UROCE_TRACE_QP_OPTION                                                                                    \
  {.name = "trace-qp", .kind = OptKind::kUint, .def = "0",                                                     \
   .help = "print every state step of the QP with this number (17 is 0x11, a device's first) to stderr, as docs/TRACE.md shows; 0: none", \
   .max = 0xffffff, .meta = "QPN"}

/// Traces qp's state steps to stderr if qpn is its number (qpn 0: never).
/// The sink lives as long as the process, so the QP may be destroyed traced.
/// Returns true if qp is now traced.
inline bool trace_qp_if(Qp* qp, uint32_t qpn) {
  static FileTraceSink stderr_sink(stderr);
  return qp && qpn && qp->qp_num == qpn && set_qp_trace(qp, &stderr_sink).ok();
}

}  // namespace uroce::apps
