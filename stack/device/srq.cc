// Shared receive queues, the verbs (IBA 10.2.9): create, destroy, post, and
// the SRQ limit (IBA 10.2.9.3) with its query.
#include "stack/device/context.h"
#include "stack/transport/recv_queue.h"

namespace uroce {

Result<Srq*> create_srq(Pd* pd, const SrqInitAttr& attr) {
  if (!pd) return Status(StatusCode::kInvalidArgument, "null pd");
  if (attr.max_wr == 0 || attr.max_wr > transport::kMaxWr || attr.max_sge > transport::kMaxSge) {
    return Status(StatusCode::kInvalidArgument, "srq max_wr/max_sge out of range");
  }
  Context& ctx = *pd->context;
  auto* srq = ctx.srqs.add();
  if (!srq) return Status(StatusCode::kResourceExhausted, "max_srq reached");
  srq->rq.init(attr.max_wr, attr.max_sge);
  srq->context = &ctx;
  srq->pd = pd;
  srq->srq_context = attr.srq_context;
  srq->limit = attr.srq_limit <= srq->rq.ring.capacity() ? attr.srq_limit : 0;
  ++static_cast<PdImpl*>(pd)->refs;
  return static_cast<Srq*>(srq);
}

Status destroy_srq(Srq* srq) {
  if (!srq) return Status(StatusCode::kInvalidArgument, "null srq");
  if (transport::impl(srq).refs) return Status(StatusCode::kBusy, "srq still used by a qp");
  Pd* pd = srq->pd;
  if (!srq->context->srqs.remove(&transport::impl(srq))) return Status(StatusCode::kNotFound, "unknown srq");
  --static_cast<PdImpl*>(pd)->refs;
  return {};
}

Status post_srq_recv(Srq* srq, RecvWr* wr, RecvWr** bad_wr) { return transport::impl(srq).rq.post(wr, bad_wr); }

Status modify_srq(Srq* srq, uint32_t srq_limit) {
  if (!srq) return Status(StatusCode::kInvalidArgument, "null srq");
  transport::SrqImpl& s = transport::impl(srq);
  if (srq_limit > s.rq.ring.capacity()) return Status(StatusCode::kInvalidArgument, "srq_limit above max_wr");
  s.limit = srq_limit;
  return {};
}

Status query_srq(Srq* srq, SrqInitAttr* attr) {
  if (!srq || !attr) return Status(StatusCode::kInvalidArgument, "null srq or attr");
  const transport::SrqImpl& s = transport::impl(srq);
  *attr = SrqInitAttr{srq->srq_context, s.rq.ring.capacity(), s.rq.max_sge, s.limit};
  return {};
}

}  // namespace uroce
