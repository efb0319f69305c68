// Receive queues and SRQs (IBA 10.8.4, 10.2.9): post and create/destroy.
#include "stack/transport/recv_queue.h"

#include "stack/engine/context.h"

namespace uroce {

namespace transport {

void RecvQueue::init(uint32_t max_wr, uint32_t max_sge_per_wqe) {
  ring.init(max_wr);
  max_sge = max_sge_per_wqe ? max_sge_per_wqe : 1;
  sges = mem::make_state_array<Sge>(size_t(ring.capacity()) * max_sge);
}

Status RecvQueue::post(RecvWr* wr, RecvWr** bad_wr) {
  for (; wr; wr = wr->next) {
    Status s;
    if (wr->num_sge < 0 || uint32_t(wr->num_sge) > max_sge) s = Status(StatusCode::kInvalidArgument, "num_sge > max_recv_sge");
    else if (ring.full()) s = Status(StatusCode::kResourceExhausted, "receive queue full");
    if (!s.ok()) {
      if (bad_wr) *bad_wr = wr;
      return s;
    }
    RecvWqe& w = ring.at(ring.head());
    Sge* dst = &sges[ring.slot(ring.head()) * max_sge];
    w = RecvWqe{wr->wr_id, uint32_t(wr->num_sge), 0};
    for (int i = 0; i < wr->num_sge; ++i) {
      dst[i] = wr->sg_list[i];
      w.length += wr->sg_list[i].length;
    }
    ring.push();
  }
  return {};
}

}  // namespace transport

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

}  // namespace uroce
