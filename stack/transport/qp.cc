// The error paths of a queue pair, shared by its roles and the verbs: ending
// a WQE, flushing the send and receive queues, and the moves to SQE and ERR
// (IBA 10.3.1.10-11) with their asynchronous events (IBA 11.6.3.1).
#include "stack/transport/qp.h"

#include "stack/transport/cq.h"

namespace uroce::transport {

void complete_wqe(SendWqe& wqe, WcStatus status) {
  wqe.status = status;
  wqe.state = WqeState::kDone;
}

void flush_sq(Env& env, QpImpl& qp) {
  for (uint32_t i = qp.sq.tail(); i != qp.sq.head(); ++i) {
    SendWqe& w = qp.sq.at(i);
    if (w.state != WqeState::kDone) complete_wqe(w, WcStatus::kWrFlushErr);
  }
  qp.req.req_idx = qp.sq.head();
  retire_done(env, qp);
  qp.req.rd_atomic_inflight = 0;
}

namespace {

void flush_recv(Env& env, QpImpl& qp, uint64_t wr_id) {
  Wc wc{};
  wc.wr_id = wr_id;
  wc.status = WcStatus::kWrFlushErr;
  wc.opcode = WcOpcode::kRecv;
  wc.qp_num = qp.qp_num;
  cq_push(env, qp.recv_cq, wc);  // an overflow here is only counted: the QP is in ERR already
}

}  // namespace

void flush_rq(Env& env, QpImpl& qp) {
  if (qp.resp.has_rwqe) flush_recv(env, qp, qp.resp.rwqe.wr_id);
  qp.resp.has_rwqe = false;
  if (qp.srq) return;  // IBA 10.2.9.5: WQEs still on an SRQ stay there
  for (; !qp.rq.ring.empty(); qp.rq.ring.pop()) flush_recv(env, qp, qp.rq.ring.front().wr_id);
}

namespace {

// The move to ERR itself, before its Last WQE Reached event.
void enter_error(Env& env, QpImpl& qp) {
  qp.state = QpState::kErr;
  qp.attr.qp_state = QpState::kErr;
  env.timers.cancel(qp.index);
  qp.req.rnr_wait = false;
  flush_sq(env, qp);
  flush_rq(env, qp);
  mark_ready(env, qp);  // a final NAK may still be pending
}

// IBA 10.2.9.5: once in ERR, a QP on an SRQ takes no more of its WQEs (the
// one in progress was flushed): the consumer may now destroy it.
void last_wqe_reached(Env& env, QpImpl& qp) {
  if (qp.srq) env.raise(AsyncEvent{AsyncEventType::kQpLastWqeReached, &qp});
}

}  // namespace

void qp_to_error(Env& env, QpImpl& qp) {
  if (qp.state == QpState::kErr) return;
  enter_error(env, qp);
  last_wqe_reached(env, qp);
}

void qp_fail(Env& env, QpImpl& qp, AsyncEventType event) {
  if (qp.state == QpState::kErr) return;
  enter_error(env, qp);
  env.raise(AsyncEvent{event, &qp});
  last_wqe_reached(env, qp);
}

void qp_to_sqe(Env& env, QpImpl& qp) {
  qp.state = QpState::kSqe;
  qp.attr.qp_state = QpState::kSqe;
  flush_sq(env, qp);
}

}  // namespace uroce::transport
