// Requester (IBA 9.7.4 and 9.7.5.1): turns send
// WQEs into request packets. Segments SEND/WRITE by path MTU with
// First/Middle/Last opcodes, assigns PSNs (a READ takes as many PSNs as
// response packets), sets AckReq on the last packet of every message and
// every kAckReqEveryPkts packets inside long ones, enforces fences,
// max_rd_atomic and the PSN window, obeys the QP's pacer (congestion control),
// and arms the local ACK timer. Retransmission regenerates packets from the
// WQE and registered memory from the PSN requester_rewind sets (go-back-N);
// a QP with uroce's extension builds its packets in selective_requester.cc
// (placement header, path) and resends only the PSNs found lost.
#include <algorithm>
#include <cstring>

#include "stack/transport/ah.h"
#include "stack/transport/frame.h"
#include "stack/transport/qp.h"
#include "stack/transport/states.h"
#include "stack/wire/aeth.h"
#include "stack/wire/psn.h"

namespace uroce::transport {

namespace {

using wire::psn_cmp;
using wire::psn_diff;

struct ReqRun {
  Env& env;
  QpImpl& qp;
  uint32_t budget;
  SendWqe* wqe = nullptr;
  WcStatus err = WcStatus::kSuccess;
  bool more = false;  // stopped with packets ready to go (budget, transmit room, pacer)
  uint8_t opcode = 0; // of the last packet built (for the state trace)
  uint32_t psns = 1;  // PSNs the last packet built stands for (a READ request: its responses')
};

ReqState get_wqe(ReqRun& r) {
  QpImpl& qp = r.qp;
  if ((qp.state != QpState::kRts && qp.state != QpState::kSqd) || qp.req.rnr_wait) return ReqState::kDone;
  if (qp.req.req_idx == qp.sq.head()) return ReqState::kDone;
  r.wqe = &qp.sq.at(qp.req.req_idx);
  if (r.wqe->state == WqeState::kStarted) return ReqState::kChkWindow;
  // IBA 10.3.1.7: in SQD no new WQE is started; those in progress complete.
  return qp.state == QpState::kSqd ? ReqState::kDone : ReqState::kChkFence;
}

// IBA 10.8.3.3: a fenced WQE waits until every earlier READ and atomic completed.
ReqState chk_fence(ReqRun& r) {
  if ((r.wqe->send_flags & kSendFence) && r.qp.req.rd_atomic_inflight) return ReqState::kDone;
  return ReqState::kChkRdAtomic;
}

// IBA 9.7.5.1.4: at most max_rd_atomic READ/atomic requests outstanding.
ReqState chk_rd_atomic(ReqRun& r) {
  if (is_rd_atomic(*r.wqe) && r.qp.req.rd_atomic_inflight >= r.qp.attr.max_rd_atomic) return ReqState::kDone;
  return ReqState::kChkLocal;
}

// IBA 10.6.3: every L_Key must name a valid region of the QP's PD covering the
// SGE; READ and atomic results are written, so they need Local Write.
ReqState chk_local(ReqRun& r) {
  const SendWqe& w = *r.wqe;
  const uint32_t access = is_rd_atomic(w) ? uint32_t(kAccessLocalWrite) : 0u;
  if (!sges_valid(r.env, r.qp.pd, r.qp.sges_of(r.qp.req.req_idx), w.num_sge, access)) {
    r.err = WcStatus::kLocProtErr;
    return ReqState::kErrLocal;
  }
  return wr_op(w.opcode).flags ? ReqState::kStartWqe : ReqState::kExecLocal;
}

// LOCAL_INV (IBA 10.6.6.1): executes in order and completes like any WQE.
ReqState exec_local(ReqRun& r) {
  if (!r.env.mrs.invalidate(r.wqe->invalidate_rkey, r.qp.pd, false)) {
    r.err = WcStatus::kLocProtErr;
    return ReqState::kErrLocal;
  }
  complete_wqe(*r.wqe, WcStatus::kSuccess);
  ++r.qp.req.req_idx;
  retire_done(r.env, r.qp);
  return ReqState::kGetWqe;
}

ReqState start_wqe(ReqRun& r) {
  RequesterState& q = r.qp.req;
  SendWqe& w = *r.wqe;
  const uint32_t flags = wr_op(w.opcode).flags;
  const uint32_t n =
      (flags & wire::kAtomic) || r.qp.qp_type == QpType::kUd ? 1 : pkts_for(w.length, seg_bytes(r.qp, flags));
  w.first_psn = q.sq_psn;
  w.last_psn = wire::psn_add(q.sq_psn, n - 1);
  q.sq_psn = wire::psn_add(w.last_psn, 1);
  q.req_psn = w.first_psn;
  w.state = WqeState::kStarted;
  if (r.qp.ext) [[unlikely]] ext_start_wqe(r.qp, w);
  if (flags & (wire::kRead | wire::kAtomic)) ++q.rd_atomic_inflight;
  r.env.inc(Counter::rdma_sends);
  return ReqState::kChkWindow;
}

ReqState chk_window(ReqRun& r) {
  if (r.qp.qp_type == QpType::kRc && psn_diff(r.qp.req.req_psn, r.qp.comp.comp_psn) >= kMaxUnackedPsns) {
    return ReqState::kDone;  // an ACK reopens the window and reschedules the QP
  }
  return ReqState::kChkPacer;
}

// Congestion control (stack/transport/qp_cc.h): a packet the pacer holds
// waits, never dropped (pacer_allows arms the pacing timer).
ReqState chk_pacer(ReqRun& r) {
  return pacer_allows(r.env, r.qp) ? ReqState::kSendPacket : ReqState::kDone;
}

// Stages the frame d with its payload from byte off of the WQE's data: in
// place from registered memory where it lies in one SGE (send_frame decides
// zero-copy or copy), else copied from the inline area or across SGEs.
// False if there is no transmit room now.
bool build_packet(ReqRun& r, const wire::PacketDesc& d, uint32_t off) {
  QpImpl& qp = r.qp;
  const SendWqe& w = *r.wqe;
  const Sge* sges = qp.sges_of(qp.req.req_idx);
  uint64_t at = 0;
  const Sge* g = w.num_sge && d.payload_len ? sge_holding(sges, w.num_sge, off, d.payload_len, &at) : nullptr;
  if (g) return send_frame(r.env, d, reinterpret_cast<const uint8_t*>(at), g->lkey);
  rte_mbuf* m = nullptr;
  uint8_t* payload = begin_frame(r.env, d, &m);
  if (!payload) return false;
  if (w.num_sge == 0) std::memcpy(payload, qp.inline_of(qp.req.req_idx) + off, d.payload_len);
  else copy_from_sges(sges, w.num_sge, off, payload, d.payload_len);
  end_frame(r.env, d, m);
  return true;
}

// Builds the packet at req_psn from the WQE and the memory it names.
ReqState send_packet(ReqRun& r) {
  QpImpl& qp = r.qp;
  const SendWqe& w = *r.wqe;
  const WrOpInfo& op = wr_op(w.opcode);
  const bool ud = qp.qp_type == QpType::kUd;
  const uint32_t psn = qp.req.req_psn;
  const uint32_t seg = seg_bytes(qp, op.flags);  // data bytes per packet
  const uint32_t off = psn_diff(psn, w.first_psn) * seg;
  const bool first = psn == w.first_psn;
  const bool last = psn == w.last_psn;

  wire::PacketDesc d;
  if (ud) fill_path(r.env.net, qp, w.ah->attr, static_cast<const AhImpl*>(w.ah)->sgid, w.remote_qpn, d);
  else fill_qp_path(r.env.net, qp, d);
  d.psn = psn;
  if (op.flags & wire::kRead) {
    // IBA 9.7.5.1.1: a READ retried from a middle PSN asks for the rest only.
    d.opcode = op.only;
    d.reth_va = w.remote_addr + off;
    d.reth_rkey = w.rkey;
    d.reth_len = w.length - off;
    d.ack_req = true;
  } else if (op.flags & wire::kAtomic) {
    d.opcode = op.only;
    d.atomic_va = w.remote_addr;
    d.atomic_rkey = w.rkey;
    const bool cas = w.opcode == WrOpcode::kAtomicCmpAndSwp;
    d.atomic_swap_add = cas ? w.swap : w.compare_add;
    d.atomic_compare = cas ? w.compare_add : 0;
    d.ack_req = true;
  } else {
    d.payload_len = std::min(seg, w.length - off) + (qp.mtu() - seg);  // and the placement header, if any
    d.pad = wire::pad_for(d.payload_len);
    if (ud) {
      d.opcode = op.ud;
      d.deth_qkey = w.remote_qkey;
      d.deth_src_qp = qp.qp_num;
    } else {
      d.opcode = first ? (last ? op.only : op.first) : (last ? op.last : op.middle);
      if (qp.qp_type == QpType::kUc) d.opcode |= wire::kOpServiceUc;
      // AckReq on the last packet of a message, and periodically inside long ones.
      d.ack_req = qp.qp_type == QpType::kRc &&
                  (last || (psn_diff(psn, w.first_psn) + 1) % kAckReqEveryPkts == 0);
    }
    if ((op.flags & wire::kWrite) && first) {
      d.reth_va = w.remote_addr;
      d.reth_rkey = w.rkey;
      d.reth_len = w.length;
    }
    d.imm = w.imm_data;
    d.ieth_rkey = w.invalidate_rkey;
    d.se = last && (w.send_flags & kSendSolicited);
  }
  r.opcode = d.opcode;
  if (qp.ext) [[unlikely]] {  // may cut a READ to the run of its responses to ask again (selective repeat)
    switch (ext_send_request(r.env, qp, qp.req.req_idx, d, off)) {
      case ExtSend::kSent: break;
      case ExtSend::kSkip: return ReqState::kGetWqe;
      case ExtSend::kNoRoom:
        r.more = true;
        return ReqState::kDone;
    }
  } else if (!build_packet(r, d, off)) {
    r.more = true;
    return ReqState::kDone;
  }
  // One READ request stands for all its response PSNs.
  r.psns = (op.flags & wire::kRead) ? pkts_for(d.reth_len, qp.mtu()) : 1;
  const bool retransmit = psn_cmp(psn, qp.req.psn_hwm) < 0;
  qp.cc.on_sent(r.env.now_ns, uint32_t(wire::frame_len(d)) + kWireOverheadBytes, psn, d.ack_req, retransmit,
                qp.ext ? qp.ext->paths.last : 0);
  if (retransmit) r.env.inc(Counter::retransmits);
  // IBA 9.7.6.1.3: the local ACK timer runs while anything is unacknowledged.
  if (qp.qp_type == QpType::kRc && qp.attr.timeout && !r.env.timers.armed(qp.index)) {
    r.env.timers.arm(qp.index, r.env.now_ns + local_ack_timeout_ns(qp.attr.timeout));
  }
  return ReqState::kNextPacket;
}

ReqState next_packet(ReqRun& r) {
  QpImpl& qp = r.qp;
  SendWqe& w = *r.wqe;
  qp.req.req_psn = wire::psn_add(qp.req.req_psn, r.psns);
  if (psn_cmp(qp.req.req_psn, qp.req.psn_hwm) > 0) qp.req.psn_hwm = qp.req.req_psn;
  if (psn_cmp(qp.req.req_psn, w.last_psn) > 0) {
    ++qp.req.req_idx;
    if (qp.qp_type != QpType::kRc) {  // UC and UD complete when sent
      complete_wqe(w, WcStatus::kSuccess);
      retire_done(r.env, qp);
    }
  }
  if (--r.budget == 0) {
    r.more = true;
    return ReqState::kDone;
  }
  return ReqState::kGetWqe;
}

// A local error ends the WQE; RC goes to ERR, UC/UD to SQE (IBA 10.3.1.10).
ReqState err_local(ReqRun& r) {
  complete_wqe(*r.wqe, r.err);
  if (r.qp.qp_type == QpType::kRc) qp_to_error(r.env, r.qp);
  else qp_to_sqe(r.env, r.qp);
  return ReqState::kDone;
}

// The state trace (include/uroce/trace.h): the step from -> to, at the PSN
// the step began with once the WQE has PSNs.
void trace_step(const ReqRun& r, ReqState from, ReqState to, uint32_t psn) {
  TraceRecord t{r.qp.qp_num, TraceRole::kRequester, req_state_name(from), req_state_name(to)};
  t.psn = psn;
  t.has_psn = from == ReqState::kChkWindow || from == ReqState::kChkPacer || from == ReqState::kSendPacket ||
              from == ReqState::kNextPacket;
  t.opcode = r.opcode;
  t.has_opcode = from == ReqState::kSendPacket && to == ReqState::kNextPacket;
  r.qp.trace->on_step(t);
}

// The driver, once without the trace and once with it (run_traced): an
// untraced QP pays one test of its trace pointer per call, none per step.
// The cold traced copy is flattened (it inlines the handlers into itself), so
// that the untraced driver stays their only caller and inlines them as it
// did before there was a trace: its code is the same but for that test.
template <bool kTraced>
[[gnu::always_inline]] inline bool run(ReqRun& r) {
  ReqState s = ReqState::kGetWqe;
  for (;;) {
    [[maybe_unused]] const ReqState from = s;
    [[maybe_unused]] const uint32_t psn = kTraced ? r.qp.req.req_psn : 0;
    switch (s) {
      case ReqState::kGetWqe: s = get_wqe(r); break;
      case ReqState::kChkFence: s = chk_fence(r); break;
      case ReqState::kChkRdAtomic: s = chk_rd_atomic(r); break;
      case ReqState::kChkLocal: s = chk_local(r); break;
      case ReqState::kExecLocal: s = exec_local(r); break;
      case ReqState::kStartWqe: s = start_wqe(r); break;
      case ReqState::kChkWindow: s = chk_window(r); break;
      case ReqState::kChkPacer: s = chk_pacer(r); break;
      case ReqState::kSendPacket: s = send_packet(r); break;
      case ReqState::kNextPacket: s = next_packet(r); break;
      case ReqState::kErrLocal: s = err_local(r); break;
      case ReqState::kDone: return r.more;
    }
    if constexpr (kTraced) trace_step(r, from, s, psn);
  }
}

[[gnu::noinline, gnu::cold, gnu::flatten]] bool run_traced(Env& env, QpImpl& qp, uint32_t budget) {
  ReqRun r{env, qp, budget};
  return run<true>(r);
}

}  // namespace

bool pacer_allows(Env& env, QpImpl& qp) {
  if (qp.cc.may_send(env.now_ns, qp.mtu())) return true;
  env.inc(Counter::cc_tx_paced);
  env.pace_timers.arm(qp.index, qp.cc.next_send_ns(qp.mtu()));
  return false;
}

void prefetch_qp(const QpImpl& qp) {
  // The lines a transmit turn or a received packet reads first: the QP's
  // type, state and index, its peer's GID (the source check), the SQ ring's
  // bounds, the requester and responder state.
  __builtin_prefetch(&qp.qp_type);
  __builtin_prefetch(&qp.attr.ah_attr.dgid);
  __builtin_prefetch(&qp.state);
  __builtin_prefetch(&qp.index);
  __builtin_prefetch(&qp.sq);
  __builtin_prefetch(&qp.req);
  __builtin_prefetch(&qp.resp);
}

void prefetch_next_wqe(QpImpl& qp) {
  if (qp.req.req_idx == qp.sq.head()) return;
  const SendWqe& w = qp.sq.at(qp.req.req_idx);
  __builtin_prefetch(&w);
  __builtin_prefetch(reinterpret_cast<const uint8_t*>(&w) + sizeof(SendWqe) - 1);
  __builtin_prefetch(qp.sges_of(qp.req.req_idx));
}

bool requester_tx(Env& env, QpImpl& qp, uint32_t budget) {
  // The untraced run's state is its own (its address never reaches the
  // traced copy), so that it can live in registers.
  if (qp.trace) [[unlikely]] return run_traced(env, qp, budget);
  ReqRun r{env, qp, budget};
  return run<false>(r);
}

void requester_rewind(QpImpl& qp, uint32_t psn) {
  // The resend point is a PSN of a started WQE that is not done yet, or the
  // first WQE not started: never a WQE already retired or about to be.
  uint32_t i = qp.sq.tail();
  for (; i != qp.sq.head(); ++i) {
    const SendWqe& w = qp.sq.at(i);
    if (w.state == WqeState::kPosted) break;
    if (w.state == WqeState::kStarted && psn_cmp(psn, w.first_psn) >= 0 && psn_cmp(psn, w.last_psn) <= 0) {
      qp.req.req_idx = i;
      qp.req.req_psn = psn;
      return;
    }
  }
  qp.req.req_idx = i;
  qp.req.req_psn = qp.req.sq_psn;
}

}  // namespace uroce::transport
