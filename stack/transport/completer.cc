// Completer (IBA 9.7.5.1, 9.9.2): matches each ACK, NAK,
// READ response and atomic ACK to the oldest outstanding send WQE, places READ
// data and atomic results, completes WQEs in order (implicitly on a later
// response), and drives retries: go-back-N on a PSN-sequence NAK, an
// implied NAK or a READ response gap; the local ACK timeout; the RNR wait.
// retry_cnt and rnr_retry bound them (rnr_retry 7 is infinite, retry_cnt 7 is not).
#include <cstring>

#include "stack/transport/cq.h"
#include "stack/transport/frame.h"
#include "stack/transport/qp.h"
#include "stack/transport/states.h"
#include "stack/wire/aeth.h"
#include "stack/wire/psn.h"

namespace uroce::transport {

namespace {

using wire::AethType;
using wire::NakCode;
using wire::psn_cmp;

struct Resp {
  Env& env;
  QpImpl& qp;
  const wire::PacketDesc& pkt;
  const uint8_t* payload;
  uint32_t flags;  // kOpcodes[pkt.opcode].flags
  SendWqe* wqe = nullptr;
  uint32_t wqe_idx = 0;
  bool progress = false;  // this packet completed or acknowledged something
  WcStatus err = WcStatus::kSuccess;
};

// Forward progress: everything before psn is acknowledged. Resets the retry
// counters and ends a retry in progress. After a go-back-N rewind, ACKs and
// responses to the original transmissions may overtake the requester's
// resend point: nothing before comp_psn is sent again, so the requester moves
// forward to it (otherwise req_idx could name a WQE this packet retires, and
// its slot is reused by the next post_send).
void advance_comp(Resp& c, uint32_t psn) {
  CompleterState& s = c.qp.comp;
  if (psn_cmp(psn, s.comp_psn) <= 0) return;
  // Congestion control: the ACK's RTT sample (stack/transport/qp_cc.h).
  const uint64_t acked = uint64_t(wire::psn_diff(psn, s.comp_psn)) * c.qp.mtu();
  if (c.qp.cc.on_acked(c.env.now_ns, psn, acked)) c.env.inc(Counter::cc_rtt_samples);
  s.comp_psn = psn;
  s.retry_left = c.qp.attr.retry_cnt;
  s.rnr_left = c.qp.attr.rnr_retry;
  s.started_retry = false;
  c.progress = true;
  if (psn_cmp(c.qp.req.req_psn, psn) < 0) requester_rewind(c.qp, psn);
}

CompState get_wqe(Resp& c) {
  for (uint32_t i = c.qp.sq.tail(); i != c.qp.sq.head(); ++i) {
    SendWqe& w = c.qp.sq.at(i);
    if (w.state == WqeState::kPosted) break;
    if (w.state == WqeState::kStarted) {
      c.wqe = &w;
      c.wqe_idx = i;
      return CompState::kChkPsn;
    }
  }
  return c.progress ? CompState::kUpdateComp : CompState::kDrop;  // nothing outstanding: a ghost
}

CompState chk_psn(Resp& c) {
  const SendWqe& w = *c.wqe;
  // IBA 9.7.5.1: a response must answer a request that was sent; one for a
  // PSN at or past the highest ever sent is invalid and silently dropped
  // (it would otherwise complete WQEs the responder never saw).
  if (psn_cmp(c.pkt.psn, c.qp.req.psn_hwm) >= 0) {
    c.env.inc(Counter::unsent_psn_response);
    return CompState::kDone;
  }
  if (psn_cmp(c.pkt.psn, c.qp.comp.comp_psn) < 0) return CompState::kDrop;  // stale or duplicate
  if (psn_cmp(c.pkt.psn, w.last_psn) > 0) {
    // IBA 9.7.5.1.5: a response to a later request acknowledges an
    // earlier SEND/WRITE, but an unanswered READ/atomic before it was lost.
    if (is_rd_atomic(w)) {
      c.env.inc(Counter::implied_nak_seq_err);
      return CompState::kRetry;
    }
    return CompState::kCompWqe;
  }
  if ((c.flags & wire::kRead) && c.pkt.psn != c.qp.comp.comp_psn) return CompState::kRetry;  // a response is missing
  return CompState::kChkAck;
}

CompState chk_ack(Resp& c) {
  const SendWqe& w = *c.wqe;
  if (c.flags & wire::kRead) {
    // The opcode must sit where this PSN sits in the READ (IBA 9.7.5.1).
    uint32_t want = (c.pkt.psn == w.first_psn ? uint32_t(wire::kFirst) : 0u) | (c.pkt.psn == w.last_psn ? uint32_t(wire::kLast) : 0u);
    if (!want) want = wire::kMiddle;
    if (w.opcode != WrOpcode::kRdmaRead || (c.flags & (wire::kFirst | wire::kMiddle | wire::kLast)) != want) {
      return CompState::kBadResp;
    }
    if (c.pkt.op().has(wire::Hdr::kAeth) && wire::aeth_type(c.pkt.aeth_syndrome) != AethType::kAck) {
      return CompState::kBadResp;
    }
    return CompState::kRead;
  }
  if (c.flags & wire::kAtomic) return wr_op(w.opcode).flags & wire::kAtomic ? CompState::kAtomic : CompState::kBadResp;
  const uint8_t value = wire::aeth_value(c.pkt.aeth_syndrome);
  switch (wire::aeth_type(c.pkt.aeth_syndrome)) {
    case AethType::kAck:
      if (is_rd_atomic(w)) return CompState::kDrop;  // a re-ACK inside a READ: only its response completes it
      if (c.pkt.psn == w.last_psn) return CompState::kCompWqe;
      advance_comp(c, wire::psn_add(c.pkt.psn, 1));  // a periodic ACK inside a long message
      return CompState::kUpdateComp;
    case AethType::kRnrNak: return CompState::kRnr;
    case AethType::kReserved: return CompState::kBadResp;
    case AethType::kNak: break;
  }
  if (value > uint8_t(NakCode::kInvalidRdRequest)) return CompState::kBadResp;
  switch (NakCode(value)) {
    case NakCode::kPsnSequenceError:  // everything before the NAK's PSN is acknowledged
      c.env.inc(Counter::rcvd_seq_err);
      advance_comp(c, c.pkt.psn);
      // Selective repeat resends the NAKed PSN only once it is found lost
      // (ext_completer_rx), not everything from it, and spends no retry_cnt.
      return sr_on(c.qp) ? CompState::kUpdateComp : CompState::kRetry;
    case NakCode::kInvalidRequest:
      c.env.inc(Counter::req_remote_invalid_request);
      c.err = WcStatus::kRemInvReqErr;
      return CompState::kErr;
    case NakCode::kRemoteAccessError:
      c.env.inc(Counter::req_remote_access_errors);
      c.err = WcStatus::kRemAccessErr;
      return CompState::kErr;
    case NakCode::kRemoteOperationalError:
      c.err = WcStatus::kRemOpErr;
      return CompState::kErr;
    case NakCode::kInvalidRdRequest: return CompState::kBadResp;  // RD only
  }
  return CompState::kBadResp;
}

CompState read(Resp& c) {
  const SendWqe& w = *c.wqe;
  const uint32_t off = wire::psn_diff(c.pkt.psn, w.first_psn) * c.qp.mtu();
  if (c.pkt.payload_len != std::min(c.qp.mtu(), w.length - off)) return CompState::kBadResp;
  copy_to_sges(c.qp.sges_of(c.wqe_idx), w.num_sge, off, c.payload, c.pkt.payload_len);
  advance_comp(c, wire::psn_add(c.pkt.psn, 1));
  return c.pkt.psn == w.last_psn ? CompState::kCompWqe : CompState::kUpdateComp;
}

CompState atomic(Resp& c) {
  const uint64_t orig = c.pkt.atomic_ack_orig;
  std::memcpy(reinterpret_cast<void*>(c.qp.sges_of(c.wqe_idx)[0].addr), &orig, sizeof(orig));
  return CompState::kCompWqe;
}

// Completes the WQE, and with it every later SEND or WRITE that the packet
// acknowledges whole, in one pass: the PSN advances, the congestion control
// takes its one RTT sample and the queue retires once per packet, not once
// per WQE. A packet acknowledges a WQE whose last PSN lies before its own
// (IBA 9.7.5.1.5: a coalesced ACK, or a response that implies one), and an
// ACK also the WQE that ends at its PSN. The run stops at a READ or atomic
// (a response past it is an implied NAK, chk_psn) and at a WQE not sent yet.
CompState comp_wqe(Resp& c) {
  const bool ack = !(c.flags & (wire::kRead | wire::kAtomic)) && wire::aeth_type(c.pkt.aeth_syndrome) == AethType::kAck;
  SendWqe* w = c.wqe;
  complete_wqe(*w, WcStatus::kSuccess);
  for (uint32_t i = c.wqe_idx + 1; i != c.qp.sq.head(); ++i) {
    SendWqe& next = c.qp.sq.at(i);
    const int past = psn_cmp(c.pkt.psn, next.last_psn);
    if (next.state != WqeState::kStarted || is_rd_atomic(next) || past < 0 || (past == 0 && !ack)) break;
    complete_wqe(next, WcStatus::kSuccess);
    w = &next;
  }
  advance_comp(c, wire::psn_add(w->last_psn, 1));
  c.progress = true;
  retire_done(c.env, c.qp);
  // The same packet may acknowledge later WQEs too.
  return psn_cmp(c.pkt.psn, w->last_psn) > 0 ? CompState::kGetWqe : CompState::kUpdateComp;
}

void restart_timer(Env& env, QpImpl& qp) {
  if (qp.comp.comp_psn == qp.req.sq_psn || !qp.attr.timeout) env.timers.cancel(qp.index);
  else env.timers.arm(qp.index, env.now_ns + local_ack_timeout_ns(qp.attr.timeout));
}

// A response that is out of sequence (beyond a gap) or a duplicate (of a PSN
// already acknowledged or placed) still shows that the responder is alive and
// working through what we sent. A responder that finishes the READs it has
// started before it serves a re-request (rxe does; IBA 9.7.5.2 leaves the
// order of the replay to it) streams seconds of them after one lost response
// of a multi-MiB READ; a slow one (rxe in an emulated guest) works through a
// backlog of resent SENDs and WRITEs, ACKing each duplicate (IBA 9.7.5.2.2),
// long after our timer last saw progress. The local ACK timer (IBA 9.7.6.1.3)
// is there to find a responder that went silent, so it restarts on these
// instead of spending retry_cnt (and sending yet more resends) while the
// stream is live. Not progress: retry_cnt is not restored. The stream is
// finite: duplicates answer our resends, and no resend leaves while the timer
// runs, so a responder that stops working lets the timer expire. rxe's own
// completer restarts its timer on every response the same way.
void responder_alive(Resp& c) {
  if (!c.qp.req.rnr_wait) restart_timer(c.env, c.qp);
}

CompState update_comp(Resp& c) {
  if (!c.qp.req.rnr_wait) restart_timer(c.env, c.qp);
  mark_ready(c.env, c.qp);  // the window, a fence or max_rd_atomic may have opened
  return CompState::kDone;
}

// Go-back-N from the oldest unacknowledged PSN (IBA 9.7.5.1.1), counted against retry_cnt.
CompState retry(Resp& c) {
  CompleterState& s = c.qp.comp;
  if (s.started_retry) {  // one retry per gap, until progress
    responder_alive(c);
    return CompState::kDone;
  }
  if (s.retry_left == 0) {
    c.env.inc(Counter::retry_exceeded_err);
    c.err = WcStatus::kRetryExcErr;
    return CompState::kErr;
  }
  --s.retry_left;
  s.started_retry = true;
  resend_from(c.qp, s.comp_psn);
  return CompState::kUpdateComp;
}

// IBA 9.7.5.2.8: wait the NAK's RNR timer, then resend from its PSN.
CompState rnr(Resp& c) {
  CompleterState& s = c.qp.comp;
  advance_comp(c, c.pkt.psn);
  c.env.inc(Counter::rcvd_rnr_err);
  if (s.rnr_left == 0) {
    c.env.inc(Counter::retry_rnr_exceeded_err);
    c.err = WcStatus::kRnrRetryExcErr;
    return CompState::kErr;
  }
  if (c.qp.attr.rnr_retry != 7) --s.rnr_left;  // 7 means retry forever (IBA 9.7.5.2.8)
  resend_from(c.qp, c.pkt.psn);
  c.qp.req.rnr_wait = true;
  c.env.timers.arm(c.qp.index, c.env.now_ns + wire::rnr_timer_ns(wire::aeth_value(c.pkt.aeth_syndrome)));
  return CompState::kDone;
}

CompState bad_resp(Resp& c) {
  c.env.inc(Counter::completer_bad_resp);
  c.err = WcStatus::kBadRespErr;
  return CompState::kErr;
}

// A fatal error ends the oldest outstanding WQE with c.err; the QP goes to ERR.
CompState err(Resp& c) {
  complete_wqe(*c.wqe, c.err);
  qp_to_error(c.env, c.qp);
  return CompState::kDone;
}

CompState drop(Resp& c) {
  c.env.inc(Counter::duplicate_response);
  responder_alive(c);
  return CompState::kDone;
}

// The first WQE still outstanding, for a failure not tied to a packet.
SendWqe* oldest_started(QpImpl& qp) {
  for (uint32_t i = qp.sq.tail(); i != qp.sq.head(); ++i) {
    if (qp.sq.at(i).state == WqeState::kStarted) return &qp.sq.at(i);
  }
  return nullptr;
}

// The state trace (include/uroce/trace.h): the step from -> to of the packet c handles.
void trace_step(const Resp& c, CompState from, CompState to) {
  TraceRecord t{c.qp.qp_num, TraceRole::kCompleter, comp_state_name(from), comp_state_name(to)};
  t.psn = c.pkt.psn;
  t.opcode = c.pkt.opcode;
  t.has_psn = t.has_opcode = true;
  c.qp.trace->on_step(t);
}

// The driver, once without the trace and once with it (run_traced): an
// untraced QP pays one test of its trace pointer per packet, none per step.
// The cold traced copy is flattened (it inlines the handlers into itself), so
// that the untraced driver stays their only caller and inlines them as it
// did before there was a trace: its code is the same but for that test.
template <bool kTraced>
[[gnu::always_inline]] inline void run(Resp& c) {
  CompState s = CompState::kGetWqe;
  for (;;) {
    [[maybe_unused]] const CompState from = s;
    switch (s) {
      case CompState::kGetWqe: s = get_wqe(c); break;
      case CompState::kChkPsn: s = chk_psn(c); break;
      case CompState::kChkAck: s = chk_ack(c); break;
      case CompState::kRead: s = read(c); break;
      case CompState::kAtomic: s = atomic(c); break;
      case CompState::kCompWqe: s = comp_wqe(c); break;
      case CompState::kUpdateComp: s = update_comp(c); break;
      case CompState::kRetry: s = retry(c); break;
      case CompState::kRnr: s = rnr(c); break;
      case CompState::kBadResp: s = bad_resp(c); break;
      case CompState::kErr: s = err(c); break;
      case CompState::kDrop: s = drop(c); break;
      case CompState::kDone: return;
    }
    if constexpr (kTraced) trace_step(c, from, s);
  }
}

[[gnu::noinline, gnu::cold, gnu::flatten]] void run_traced(Env& env, QpImpl& qp, const wire::PacketDesc& pkt,
                                                           const uint8_t* frame) {
  Resp c{env, qp, pkt, frame + pkt.payload_off, pkt.op().flags};
  run<true>(c);
}

}  // namespace

void completer_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  // An Acknowledge has payload only with a SACK block (wire::parse): the
  // extension's, which a QP without it refuses.
  if (qp.ext || (pkt.payload_len && pkt.opcode == wire::kRcAcknowledge)) [[unlikely]] {
    return ext_completer_rx(env, qp, pkt, frame);
  }
  completer_run(env, qp, pkt, frame);
}

void completer_run(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  if (qp.trace) [[unlikely]] return run_traced(env, qp, pkt, frame);
  Resp c{env, qp, pkt, frame + pkt.payload_off, pkt.op().flags};
  run<false>(c);
}

void completer_timer(Env& env, QpImpl& qp) {
  if (qp.req.rnr_wait) {  // the RNR wait is over: resend from the NAKed PSN
    qp.req.rnr_wait = false;
    mark_ready(env, qp);
    return;
  }
  if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return;
  if (sr_on(qp) && ext_on_timer(env, qp)) return;  // selective repeat's reordering timer
  SendWqe* w = oldest_started(qp);
  if (!w) return;
  env.inc(Counter::local_ack_timeout_err);  // IBA 9.7.6.1.3
  if (qp.comp.retry_left == 0) {
    env.inc(Counter::retry_exceeded_err);
    complete_wqe(*w, WcStatus::kRetryExcErr);
    qp_to_error(env, qp);
    return;
  }
  --qp.comp.retry_left;
  qp.comp.started_retry = true;
  resend_from(qp, qp.comp.comp_psn);
  mark_ready(env, qp);
  // The timer runs on from here, not from the resend: a port that takes no
  // frame (a memif whose peer died refuses every burst) gives the requester
  // no turn to resend and re-arm it, and the QP would wait for ever instead
  // of reaching retry_cnt (IBA 9.7.6.1.3).
  env.timers.arm(qp.index, env.now_ns + local_ack_timeout_ns(qp.attr.timeout));
}

void retire_done(Env& env, QpImpl& qp) {
  bool overflow = false;
  bool retired = false;
  for (; !qp.sq.empty() && qp.sq.front().state == WqeState::kDone; qp.sq.pop()) {
    const SendWqe& w = qp.sq.front();
    retired = true;
    if (is_rd_atomic(w) && qp.req.rd_atomic_inflight) --qp.req.rd_atomic_inflight;
    if (w.status == WcStatus::kSuccess && !(w.send_flags & kSendSignaled)) continue;  // unsignaled
    Wc wc{};
    wc.wr_id = w.wr_id;
    wc.status = w.status;
    wc.opcode = wr_op(w.opcode).wc;
    wc.byte_len = w.length;
    wc.qp_num = qp.qp_num;
    overflow |= !cq_push(env, qp.send_cq, wc);
  }
  if (overflow) qp_fail(env, qp, AsyncEventType::kQpFatal);  // IBA 11.4.2.1: CQ overrun
  if (retired) mark_ready(env, qp);
}

}  // namespace uroce::transport
