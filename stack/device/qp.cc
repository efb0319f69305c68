// Queue pairs, the verbs: create, destroy, query and posting work requests
// (IBA 11.2.5, 11.4.1). The protocol state they create is stack/transport/qp.h.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "stack/device/context.h"
#include "stack/device/telemetry.h"
#include "stack/transport/qp.h"

namespace uroce {

using transport::QpImpl;

namespace {

bool in_range(const QpCap& c) {
  return c.max_send_wr <= transport::kMaxWr && c.max_recv_wr <= transport::kMaxWr &&
         c.max_send_sge <= transport::kMaxSge && c.max_recv_sge <= transport::kMaxSge &&
         c.max_inline_data <= transport::kMaxInlineData;
}

}  // namespace

Result<Qp*> create_qp(Pd* pd, const QpInitAttr& a) {
  if (!pd || !a.send_cq || !a.recv_cq) return Status(StatusCode::kInvalidArgument, "pd, send_cq and recv_cq are required");
  if (a.qp_type != QpType::kRc && a.qp_type != QpType::kUc && a.qp_type != QpType::kUd) {
    return Status(StatusCode::kInvalidArgument, "unknown qp_type");
  }
  if (!in_range(a.cap)) return Status(StatusCode::kInvalidArgument, "qp capabilities out of range");
  Context& ctx = *pd->context;
  if (a.send_cq->context != &ctx || a.recv_cq->context != &ctx || (a.srq && a.srq->pd != pd)) {
    return Status(StatusCode::kInvalidArgument, "cq or srq of another device or pd");
  }
  uint32_t index = 0;
  QpImpl* qp = nullptr;
  {
    std::lock_guard lock(telemetry_mutex());  // telemetry reads the table (telemetry.h)
    qp = ctx.qps.add(&index);
  }
  if (!qp) return Status(StatusCode::kResourceExhausted, "max_qp reached");
  qp->context = &ctx;
  qp->qp_context = a.qp_context;
  qp->pd = pd;
  qp->send_cq = a.send_cq;
  qp->recv_cq = a.recv_cq;
  qp->srq = a.srq;
  qp->qp_num = qpn_of_slot(ctx, index);  // unique across the engines of a device
  qp->state = QpState::kReset;
  qp->qp_type = a.qp_type;
  qp->index = index;
  qp->init_attr = a;
  qp->cc.init(ctx.cfg.cc, a.qp_type);

  // A UD QP has no path: its MTU is the port's active MTU (IBA 11.4.1.1 /
  // 9.8: a UD message is one packet of at most the PMTU; rxe's get_mtu uses
  // the port's mtu_cap for UD). RC and UC set path_mtu at RTR.
  if (a.qp_type == QpType::kUd) qp->attr.path_mtu = ctx.max_mtu;
  QpCap& cap = qp->attr.cap;
  cap = a.cap;
  cap.max_send_sge = cap.max_send_sge ? cap.max_send_sge : 1;
  qp->sq.init(cap.max_send_wr);
  cap.max_send_wr = qp->sq.capacity();
  qp->sq_sges = make_state_array<Sge>(size_t(cap.max_send_wr) * cap.max_send_sge);
  qp->sq_inline = make_state_array<uint8_t>(size_t(cap.max_send_wr) * cap.max_inline_data);
  if (a.srq) {
    cap.max_recv_wr = 0;
    cap.max_recv_sge = 0;
    ++transport::impl(a.srq).refs;
  } else {
    qp->rq.init(cap.max_recv_wr, cap.max_recv_sge);
    cap.max_recv_wr = qp->rq.ring.capacity();
    cap.max_recv_sge = qp->rq.max_sge;
  }
  qp->rwqe_sges = make_state_array<Sge>(a.srq ? transport::impl(a.srq).rq.max_sge : qp->rq.max_sge);
  qp->init_attr.cap = cap;
  ++transport::impl(a.send_cq).refs;
  ++transport::impl(a.recv_cq).refs;
  ++static_cast<PdImpl*>(pd)->refs;
  return static_cast<Qp*>(qp);
}

Status destroy_qp(Qp* q) {
  if (!q) return Status(StatusCode::kInvalidArgument, "null qp");
  Context& ctx = *q->context;
  QpImpl& qp = transport::impl(q);
  if (ctx.qps.at(qp.index) != &qp) return Status(StatusCode::kNotFound, "unknown qp");
  if (ctx.qp1) ctx.qp1->qp_destroyed(q);
  ctx.timers.cancel(qp.index);
  ctx.pace_timers.cancel(qp.index);
  --transport::impl(qp.send_cq).refs;
  --transport::impl(qp.recv_cq).refs;
  if (qp.srq) --transport::impl(qp.srq).refs;
  --static_cast<PdImpl*>(qp.pd)->refs;
  std::lock_guard lock(telemetry_mutex());  // telemetry reads the table (telemetry.h)
  ctx.qps.remove(&qp);
  return {};
}

Status query_qp(Qp* q, QpAttr* attr, QpInitAttr* init_attr) {
  if (!q) return Status(StatusCode::kInvalidArgument, "null qp");
  QpImpl& qp = transport::impl(q);
  if (attr) {
    *attr = qp.attr;
    attr->qp_state = attr->cur_qp_state = qp.state;
  }
  if (init_attr) *init_attr = qp.init_attr;
  return {};
}

namespace {

// Checks one send WR against the QP (IBA 11.4.1.1 post send: the checks
// that make the post fail rather than complete in error).
Status check_send_wr(const QpImpl& qp, const SendWr& wr, uint32_t* length) {
  const transport::WrOpInfo* info = transport::find_wr_op(wr.opcode);
  if (!info) return Status(StatusCode::kInvalidArgument, "bad opcode");
  const transport::WrOpInfo& op = *info;
  const uint32_t kind = op.flags;
  const bool remote_rd_atomic = kind & (wire::kRead | wire::kAtomic);
  switch (qp.qp_type) {
    case QpType::kRc: break;
    case QpType::kUc:
      if (remote_rd_atomic || (kind & wire::kInv)) return Status(StatusCode::kInvalidArgument, "opcode not valid on UC");
      break;
    case QpType::kUd:
      if (!op.ud) return Status(StatusCode::kInvalidArgument, "opcode not valid on UD");
      if (!wr.ud.ah || wr.ud.ah->pd != qp.pd) return Status(StatusCode::kInvalidArgument, "UD needs an AH of the QP's PD");
      break;
  }
  if (wr.num_sge < 0 || uint32_t(wr.num_sge) > qp.attr.cap.max_send_sge) {
    return Status(StatusCode::kInvalidArgument, "num_sge > max_send_sge");
  }
  uint64_t len = 0;
  for (int i = 0; i < wr.num_sge; ++i) len += wr.sg_list[i].length;
  if (len > transport::kMaxMsgBytes) return Status(StatusCode::kInvalidArgument, "message longer than 2^31");
  if ((wr.send_flags & kSendInline) && len > qp.attr.cap.max_inline_data) {
    return Status(StatusCode::kInvalidArgument, "inline data > max_inline_data");
  }
  if (qp.qp_type == QpType::kUd && len > qp.mtu()) {
    return Status(StatusCode::kInvalidArgument, "UD message longer than the MTU");
  }
  if ((kind & wire::kAtomic) && (wr.num_sge != 1 || len != 8)) {
    return Status(StatusCode::kInvalidArgument, "atomic needs one 8-byte SGE");
  }
  if (remote_rd_atomic && qp.attr.max_rd_atomic == 0) {
    return Status(StatusCode::kInvalidArgument, "max_rd_atomic is 0");
  }
  *length = uint32_t(len);
  return {};
}

}  // namespace

Status post_send(Qp* q, SendWr* wr, SendWr** bad_wr) {
  QpImpl& qp = transport::impl(q);
  Context& ctx = *qp.context;
  for (; wr; wr = wr->next) {
    uint32_t len = 0;
    Status s;
    // C10-96 (IBA 1.2, the number rdmavt's qp.c gives above ib_rvt_state_ops): send WRs are
    // accepted in RTS, SQD, SQE and ERR (the last two complete them in error: flushed).
    if (qp.state == QpState::kReset || qp.state == QpState::kInit || qp.state == QpState::kRtr) {
      s = Status(StatusCode::kInvalidQpState, "post_send before RTS");
    } else if (qp.sq.full()) {
      s = Status(StatusCode::kResourceExhausted, "send queue full");
    } else {
      s = check_send_wr(qp, *wr, &len);
    }
    if (!s.ok()) {
      if (bad_wr) *bad_wr = wr;
      return s;
    }
    const uint32_t i = qp.sq.head();
    transport::SendWqe& w = qp.sq.at(i);
    w = transport::SendWqe{};
    w.wr_id = wr->wr_id;
    w.opcode = wr->opcode;
    w.send_flags = wr->send_flags | (qp.init_attr.sq_sig_all ? uint32_t(kSendSignaled) : 0u);
    w.imm_data = wr->imm_data;
    w.invalidate_rkey = wr->invalidate_rkey;
    w.length = len;
    const bool atomic = transport::wr_op(wr->opcode).flags & wire::kAtomic;
    w.remote_addr = atomic ? wr->atomic.remote_addr : wr->rdma.remote_addr;
    w.rkey = atomic ? wr->atomic.rkey : wr->rdma.rkey;
    w.compare_add = wr->atomic.compare_add;
    w.swap = wr->atomic.swap;
    w.ah = wr->ud.ah;
    w.remote_qpn = wr->ud.remote_qpn;
    // C10-15 (IBA 10.2.5): a Q_Key with the high bit set means "use the QP's Q_Key".
    w.remote_qkey = (wr->ud.remote_qkey & 0x80000000u) ? qp.attr.qkey : wr->ud.remote_qkey;
    w.state = transport::WqeState::kPosted;
    if (wr->send_flags & kSendInline) {
      uint8_t* dst = qp.inline_of(i);
      for (int k = 0; k < wr->num_sge; ++k) {
        std::memcpy(dst, reinterpret_cast<const void*>(wr->sg_list[k].addr), wr->sg_list[k].length);
        dst += wr->sg_list[k].length;
      }
      w.num_sge = 0;
    } else {
      std::copy_n(wr->sg_list, wr->num_sge, qp.sges_of(i));
      w.num_sge = uint16_t(wr->num_sge);
    }
    qp.sq.push();
  }
  if (qp.state == QpState::kErr || qp.state == QpState::kSqe) {
    transport::Env env = ctx.env();
    transport::flush_sq(env, qp);
  } else {
    ctx.ready.mark(qp.index);
  }
  return {};
}

Status post_recv(Qp* q, RecvWr* wr, RecvWr** bad_wr) {
  QpImpl& qp = transport::impl(q);
  if (qp.srq) {
    if (bad_wr) *bad_wr = wr;
    return Status(StatusCode::kInvalidArgument, "qp uses an srq: post to the srq");
  }
  if (qp.state == QpState::kReset) {
    if (bad_wr) *bad_wr = wr;
    return Status(StatusCode::kInvalidQpState, "post_recv in RESET");
  }
  Status s = qp.rq.post(wr, bad_wr);
  if (qp.state == QpState::kErr) {
    transport::Env env = qp.context->env();
    transport::flush_rq(env, qp);
  }
  return s;
}

}  // namespace uroce
