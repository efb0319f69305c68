// Receive queues, of a QP or an SRQ (IBA 10.8.4, 10.2.9): posting receive WRs.
#include "stack/transport/recv_queue.h"

namespace uroce {

namespace transport {

void RecvQueue::init(uint32_t max_wr, uint32_t max_sge_per_wqe) {
  ring.init(max_wr);
  max_sge = max_sge_per_wqe ? max_sge_per_wqe : 1;
  sges = make_state_array<Sge>(size_t(ring.capacity()) * max_sge);
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

}  // namespace uroce
