// uroce's extension, the part both sides share (selective.h): a QP's
// extension state, attached at INIT -> RTR, and the compile-time ties between
// the selective-repeat window and the go-back-N limits. The responder's side
// is in selective_responder.cc, the requester's in selective_requester.cc.
#include "stack/transport/selective.h"

#include "stack/transport/qp.h"
#include "stack/wire/psn.h"

namespace uroce::transport {

static_assert(kSrWindowPsns == kMaxUnackedPsns, "the responder places all the requester may have in flight");
static_assert((wire::kPsnMask + 1) % kSrWindowPsns == 0, "PSN % window is continuous across the 24-bit wrap");
static_assert(kSrWindowPsns / 8 <= wire::kSackMaxBitmapBytes);
static_assert(kSrResources == kMaxRdAtomic);
static_assert(kSrRuns <= 256, "run_head and run_count are bytes");

void ext_attach(QpImpl& qp) {
  const QpExt& e = qp.attr.ext;
  if (qp.qp_type != QpType::kRc || (!e.selective_repeat && e.paths <= 1)) {
    qp.ext.reset();
    return;
  }
  qp.ext = make_state_object<QpExtState>();
  qp.ext->cfg = e;
  qp.ext->paths.init(e, qp.udp_sport);
}

}  // namespace uroce::transport
