// Responder (IBA 9.7.5.2, 9.9.3): checks each inbound
// request in the order rxe and the spec do (PSN, opcode sequence, opcode
// validity, resources, length, R_Key), places data, completes receive WQEs,
// executes atomics exactly once, keeps responder resources to replay READ and
// atomic responses for duplicates, and coalesces ACKs: one pending ACK per QP,
// overwritten by later ones and sent at the QP's transmit turn.
// Error states map to the IBA error classes in one place, do_error().
#include <algorithm>
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

struct Req {
  Env& env;
  QpImpl& qp;
  ResponderState& s;
  const wire::PacketDesc& pkt;
  const uint8_t* frame;
  const uint8_t* payload;
  uint32_t flags;  // kOpcodes[pkt.opcode].flags
};

uint8_t nak_syndrome(NakCode c) { return wire::aeth_syndrome(AethType::kNak, uint8_t(c)); }

// Sets the ACK/NAK to send at the next transmit turn; a later one replaces an
// earlier one (ACK coalescing: an ACK acknowledges every earlier PSN), except
// that a NAK is not hidden by an ACK that is not past it.
void set_ack(Req& r, uint8_t syndrome, uint32_t psn) { responder_set_ack(r.env, r.qp, syndrome, psn); }

// UC (IBA 9.8.3, class D1): abandon the message in progress; its receive WQE,
// if any, is kept for the next message.
void uc_drop_message(Req& r) {
  if (!r.s.uc_drop) r.env.inc(Counter::uc_msg_dropped);
  r.s.uc_drop = true;
  r.s.msg_kind = 0;
  r.s.rwqe_off = 0;
  r.s.epsn = wire::psn_add(r.pkt.psn, 1);
}

RespRes* find_res(Req& r, uint32_t kind) {
  for (uint32_t i = 0; i < r.qp.attr.max_dest_rd_atomic; ++i) {
    RespRes& res = r.s.res[i];
    if (res.kind == kind && psn_cmp(r.pkt.psn, res.first_psn) >= 0 &&
        psn_cmp(r.pkt.psn, resp_last_psn(r.qp, res)) <= 0) {
      return &res;
    }
  }
  return nullptr;
}

RespState chk_psn(Req& r) {
  switch (r.qp.qp_type) {
    case QpType::kRc: {
      const int32_t d = psn_cmp(r.pkt.psn, r.s.epsn);
      if (d > 0) return RespState::kErrPsnOutOfSeq;
      if (d < 0) return RespState::kDuplicate;  // C9-104
      r.s.nak_sent = false;  // C9-111: the gap is repaired, a new one may be NAKed
      return RespState::kChkOpSeq;
    }
    case QpType::kUc:
      // IBA 9.8.3: a PSN gap loses the rest of the current message; resume at a First/Only.
      if (r.pkt.psn != r.s.epsn && (r.s.msg_kind || !(r.flags & wire::kFirst))) uc_drop_message(r);
      r.s.epsn = r.pkt.psn;
      if (r.s.uc_drop) {
        if (!(r.flags & wire::kFirst)) {
          r.s.epsn = wire::psn_add(r.pkt.psn, 1);
          return RespState::kDone;
        }
        r.s.uc_drop = false;
      }
      return RespState::kChkOpSeq;
    case QpType::kUd: return RespState::kChkOpValid;
  }
  return RespState::kDone;
}

// IBA 9.8.2.2: inside a message only Middle/Last of the same kind may follow.
RespState chk_op_seq(Req& r) {
  const bool ok = r.s.msg_kind ? (r.flags & r.s.msg_kind) && (r.flags & (wire::kMiddle | wire::kLast)) &&
                                     !(r.flags & wire::kFirst)
                               : (r.flags & wire::kFirst);
  if (ok) return RespState::kChkOpValid;
  if (r.qp.qp_type == QpType::kUc) {
    uc_drop_message(r);
    return RespState::kDone;
  }
  return r.s.msg_kind ? RespState::kErrMissingOpcodeLast : RespState::kErrMissingOpcodeFirst;
}

// The QP must allow the operation (qp_access_flags, as rxe's check_op_valid and qib_rc_rcv
// check them) and, for UD,
// the Q_Key must match (C10-15).
RespState chk_op_valid(Req& r) {
  if (r.qp.qp_type == QpType::kUd) {
    if (r.pkt.deth_qkey != r.qp.attr.qkey) {
      r.env.inc(Counter::rx_drop_bad_qkey);
      return RespState::kDone;
    }
    return RespState::kChkResource;
  }
  const uint32_t need = (r.flags & wire::kWrite) && (r.flags & wire::kFirst) ? kAccessRemoteWrite
                        : (r.flags & wire::kRead)                             ? kAccessRemoteRead
                        : (r.flags & wire::kAtomic)                           ? kAccessRemoteAtomic
                                                                              : 0u;
  if ((r.qp.attr.qp_access_flags & need) == need) return RespState::kChkResource;
  if (r.qp.qp_type == QpType::kUc) {
    uc_drop_message(r);
    return RespState::kDone;
  }
  return RespState::kErrUnsupportedOpcode;
}

// Takes the next receive WQE (SRQ or RQ) and checks its scatter list (IBA 10.6.3).
RespState take_rwqe(Req& r) {
  RecvQueue& q = r.qp.srq ? impl(r.qp.srq).rq : r.qp.rq;
  if (q.ring.empty()) return RespState::kErrRnr;
  ResponderState& s = r.s;
  s.rwqe = q.ring.front();
  std::copy_n(q.sges_of(q.ring.tail()), s.rwqe.num_sge, r.qp.rwqe_sges.get());
  q.ring.pop();
  if (r.qp.srq) [[unlikely]] {
    SrqImpl& srq = impl(r.qp.srq);
    if (srq.limit && q.ring.size() < srq.limit) {  // IBA 10.2.9.3: once per arming, as rxe's get_srq_wqe
      srq.limit = 0;
      r.env.raise(AsyncEvent{AsyncEventType::kSrqLimitReached, nullptr, nullptr, r.qp.srq});
    }
  }
  s.has_rwqe = true;
  s.rwqe_off = 0;
  if (!sges_valid(r.env, r.qp.pd, r.qp.rwqe_sges.get(), s.rwqe.num_sge, kAccessLocalWrite)) {
    return RespState::kErrMalformedWqe;
  }
  return RespState::kChkLength;
}

RespState chk_resource(Req& r) {
  if (r.flags & (wire::kRead | wire::kAtomic)) {
    // The oldest resource is recycled (next_res). The requester keeps at most
    // max_rd_atomic <= max_dest_rd_atomic outstanding (IBA 9.7.5.1.4), so a
    // new request means the one max_dest_rd_atomic before it has completed
    // at the requester: a replay of it still pending (for a duplicate that
    // crossed the original responses) is no longer wanted and is dropped.
    // Only if its original responses are not all out yet has the requester
    // exceeded our resources: NAK invalid request.
    const RespRes& oldest = r.s.res[r.s.res_head];
    if (!r.qp.attr.max_dest_rd_atomic || (oldest.pending && !oldest.replay)) return RespState::kErrTooManyRdAtomic;
    return RespState::kChkLength;
  }
  // A SEND takes its WQE at First; a WRITE with immediate at its Last.
  const bool needs_wqe = (r.flags & wire::kSend) ? (r.flags & wire::kFirst) : (r.flags & wire::kRwr);
  if (needs_wqe && !r.s.has_rwqe) return take_rwqe(r);
  return RespState::kChkLength;
}

RespState chk_length(Req& r) {
  const uint32_t len = r.pkt.payload_len;
  const bool ud = r.qp.qp_type == QpType::kUd;
  const uint32_t mtu = r.qp.mtu();  // UD: the port's MTU (set at create_qp)
  // IBA 9.7.5.2, C9-92: First and Middle carry exactly one PMTU, Last/Only at most one.
  if ((r.flags & wire::kPayload) && ((r.flags & wire::kLast) ? len > mtu : len != mtu)) return RespState::kErrLength;
  if ((r.flags & wire::kSend) && r.s.rwqe_off + (ud ? kUdGrhBytes : 0) + len > r.s.rwqe.length) {
    return RespState::kErrLength;
  }
  if (r.flags & wire::kWrite) {
    const uint32_t left = (r.flags & wire::kFirst) ? r.pkt.reth_len : r.s.write_left;
    if (left > kMaxMsgBytes || len > left || ((r.flags & wire::kLast) && len != left)) return RespState::kErrLength;
  }
  if ((r.flags & wire::kRead) && r.pkt.reth_len > kMaxMsgBytes) return RespState::kErrLength;
  return RespState::kChkRkey;
}

// IBA 9.7.5.2: R_Key valid, same PD as the QP, access allowed, range
// inside the region without wrapping; atomics 8-byte aligned.
RespState chk_rkey(Req& r) {
  const wire::PacketDesc& p = r.pkt;
  if (r.flags & wire::kAtomic) {
    if (p.atomic_va & 7) return RespState::kErrMisalignedAtomic;
    if (!r.env.mrs.check(p.atomic_rkey, r.qp.pd, p.atomic_va, 8, kAccessRemoteAtomic)) {
      return RespState::kErrRkeyViolation;
    }
  } else if ((r.flags & wire::kRead) || ((r.flags & wire::kWrite) && (r.flags & wire::kFirst))) {
    const uint32_t access = (r.flags & wire::kRead) ? kAccessRemoteRead : kAccessRemoteWrite;
    if (!r.env.mrs.check(p.reth_rkey, r.qp.pd, p.reth_va, p.reth_len, access)) return RespState::kErrRkeyViolation;
  }
  return RespState::kExecute;
}

// The resource for a new READ or atomic: the oldest, whatever it still holds.
RespRes& next_res(Req& r) {
  RespRes& res = r.s.res[r.s.res_head];
  r.s.res_head = uint8_t((r.s.res_head + 1) % r.qp.attr.max_dest_rd_atomic);
  return res;
}

// A READ or atomic is answered by its response (which also acknowledges every
// earlier request), so a coalesced ACK still pending is superseded.
void queue_response(Req& r, RespRes& res) {
  if (r.s.ack_pending && wire::aeth_type(r.s.ack_syndrome) == AethType::kAck) {
    r.s.ack_pending = false;
    r.env.inc(Counter::ack_deferred);
  }
  res.pending = true;
  mark_ready(r.env, r.qp);
}

RespState execute(Req& r) {
  ResponderState& s = r.s;
  const wire::PacketDesc& p = r.pkt;
  const uint32_t len = p.payload_len;
  if (r.flags & wire::kSend) {
    // IBA 10.6.6 / 9.7.5.2: a key that names no region of the QP's PD, or a
    // region not open to remote invalidation, is an invalid request.
    if ((r.flags & wire::kInv) && !r.env.mrs.invalidate(p.ieth_rkey, r.qp.pd, true)) {
      return RespState::kErrInvalidateRkey;
    }
    if (r.qp.qp_type == QpType::kUd) {
      // IBA 11.4.1.2: the first 40 bytes receive the GRH; for RoCEv2 over IPv4
      // the IPv4 header fills the last 20 of them.
      uint8_t grh[kUdGrhBytes] = {};
      const uint8_t* l3 = r.frame + sizeof(wire::EthHdr) + (p.has_vlan ? sizeof(wire::VlanTag) : 0);
      if (p.is_ipv4()) std::memcpy(grh + kUdGrhBytes - sizeof(wire::Ipv4Hdr), l3, sizeof(wire::Ipv4Hdr));
      else std::memcpy(grh, l3, kUdGrhBytes);
      copy_to_sges(r.qp.rwqe_sges.get(), s.rwqe.num_sge, 0, grh, kUdGrhBytes);
      s.rwqe_off = kUdGrhBytes;
    }
    copy_to_sges(r.qp.rwqe_sges.get(), s.rwqe.num_sge, s.rwqe_off, r.payload, len);
    s.rwqe_off += len;
    s.msg_kind = (r.flags & wire::kLast) ? 0u : uint32_t(wire::kSend);
  } else if (r.flags & wire::kWrite) {
    if (r.flags & wire::kFirst) {
      s.write_va = p.reth_va;
      s.write_left = s.write_len = p.reth_len;
    }
    if (len) std::memcpy(reinterpret_cast<void*>(s.write_va), r.payload, len);
    s.write_va += len;
    s.write_left -= len;
    s.msg_kind = (r.flags & wire::kLast) ? 0u : uint32_t(wire::kWrite);
  } else if (r.flags & wire::kRead) {
    s.msn = wire::psn_add(s.msn, 1);
    RespRes& res = next_res(r);
    res = RespRes{p.reth_va, p.reth_rkey, p.reth_len, p.psn, p.psn, s.msn, uint16_t(wire::kRead), false, false};
    s.epsn = wire::psn_add(resp_last_psn(r.qp, res), 1);  // a READ consumes one PSN per response packet
    queue_response(r, res);
    return RespState::kDone;
  } else {  // atomic: executed exactly once; the original value is kept for duplicates
    auto* target = reinterpret_cast<uint64_t*>(p.atomic_va);
    const uint64_t orig = *target;
    if (p.opcode == wire::kRcCompareSwap) {
      if (orig == p.atomic_compare) *target = p.atomic_swap_add;
    } else {
      *target = orig + p.atomic_swap_add;
    }
    r.env.inc(Counter::atomic_executed);
    s.msn = wire::psn_add(s.msn, 1);
    RespRes& res = next_res(r);
    res = RespRes{orig, p.atomic_rkey, 8, p.psn, p.psn, s.msn, uint16_t(wire::kAtomic), false, false};
    s.epsn = wire::psn_add(p.psn, 1);
    queue_response(r, res);
    return RespState::kDone;
  }
  s.epsn = wire::psn_add(p.psn, 1);
  if (r.flags & wire::kLast) {
    s.msn = wire::psn_add(s.msn, 1);  // IBA 9.7.6.1.1: MSN counts completed messages
    r.env.inc(Counter::rdma_recvs);
  }
  return RespState::kComplete;
}

Wc recv_wc(const Req& r, WcStatus status) {
  Wc wc{};
  wc.wr_id = r.s.rwqe.wr_id;
  wc.status = status;
  wc.opcode = (r.flags & wire::kWrite) ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv;
  wc.qp_num = r.qp.qp_num;
  return wc;
}

RespState complete(Req& r) {
  if (!(r.flags & wire::kRwr)) return RespState::kAcknowledge;
  Wc wc = recv_wc(r, WcStatus::kSuccess);
  wc.byte_len = (r.flags & wire::kSend) ? r.s.rwqe_off : r.s.write_len;
  if (r.flags & wire::kImm) {
    wc.wc_flags |= kWcWithImm;
    wc.imm_data = r.pkt.imm;
  }
  if (r.flags & wire::kInv) {
    wc.wc_flags |= kWcWithInv;
    wc.invalidated_rkey = r.pkt.ieth_rkey;
  }
  if (r.qp.qp_type == QpType::kUd) {
    wc.wc_flags |= kWcGrh;
    wc.src_qp = r.pkt.deth_src_qp;
  }
  r.s.has_rwqe = false;
  r.s.rwqe_off = 0;
  if (!cq_push(r.env, r.qp.recv_cq, wc, r.pkt.se)) return RespState::kErrCqOverflow;
  return RespState::kAcknowledge;
}

RespState acknowledge(Req& r) {
  if (r.qp.qp_type == QpType::kRc && r.pkt.ack_req) set_ack(r, wire::kAethAck, r.pkt.psn);
  return RespState::kDone;
}

// C9-104/105: a duplicate SEND/WRITE is acknowledged again (with the latest PSN
// acknowledged) and not executed; a duplicate READ is answered again from its
// responder resource; a duplicate atomic gets the saved original value and is
// not executed again. Without a resource the duplicate is dropped (class D).
RespState duplicate(Req& r) {
  r.env.inc(Counter::duplicate_request);
  if (r.flags & (wire::kSend | wire::kWrite)) {
    set_ack(r, wire::kAethAck, wire::psn_prev(r.s.epsn));
    return RespState::kDone;
  }
  RespRes* res = find_res(r, r.flags & (wire::kRead | wire::kAtomic));
  if (!res) {
    r.env.inc(Counter::dup_rd_atomic_dropped);
    return RespState::kDone;
  }
  r.env.inc((r.flags & wire::kRead) ? Counter::read_replayed : Counter::atomic_replayed);
  // Selective repeat re-requests the runs of a READ's responses that were
  // lost: each is sent on its own, beside whatever the resource still sends.
  if ((r.flags & wire::kRead) && sr_on(r.qp)) [[unlikely]] {
    ext_read_rerequest(r.env, r.qp, *res, r.pkt);
    return RespState::kDone;
  }
  res->cur_psn = r.pkt.psn;
  res->replay = true;
  queue_response(r, *res);
  return RespState::kDone;
}

// Class C (IBA 9.9.3.1.2): RC NAKs and the QP goes to ERR with the affiliated
// error event (IBA 11.6.3.1), the receive WQE in use completing with wc; UC
// and UD drop the message (classes D1/E).
RespState class_c(Req& r, NakCode nak, WcStatus wc, AsyncEventType event) {
  if (r.qp.qp_type != QpType::kRc) {  // a receive WQE already taken is kept for the next message
    if (r.qp.qp_type == QpType::kUc) uc_drop_message(r);
    return RespState::kDone;
  }
  set_ack(r, nak_syndrome(nak), r.pkt.psn);
  if (r.s.has_rwqe) {
    r.s.has_rwqe = false;
    cq_push(r.env, r.qp.recv_cq, recv_wc(r, wc));
  }
  qp_fail(r.env, r.qp, event);
  return RespState::kDone;
}

// The one place responder errors map to IBA error classes and NAK codes.
RespState do_error(Req& r, RespState err) {
  switch (err) {
    case RespState::kErrPsnOutOfSeq:  // class B
      r.env.inc(Counter::out_of_sequence);
      if (!r.s.nak_sent) {  // C9-111: one NAK per gap, none again until it is repaired
        r.s.nak_sent = true;
        r.env.inc(Counter::seq_nak_sent);
        set_ack(r, nak_syndrome(NakCode::kPsnSequenceError), r.s.epsn);
      }
      return RespState::kDone;
    case RespState::kErrRnr:  // class B for RC; UC/UD drop (class D)
      if (r.qp.qp_type == QpType::kRc) {
        r.s.nak_sent = true;  // later packets of the window are dropped without NAKs
        r.env.inc(Counter::send_rnr_err);
        set_ack(r, wire::aeth_syndrome(AethType::kRnrNak, r.qp.attr.min_rnr_timer), r.pkt.psn);
      } else {
        r.env.inc(Counter::rx_drop_no_recv_wqe);
        if (r.qp.qp_type == QpType::kUc) uc_drop_message(r);
      }
      return RespState::kDone;
    // The event names the error as ConnectX does: a transport error (opcode)
    // is an invalid request, the request's own faults an access violation.
    case RespState::kErrMissingOpcodeFirst:
    case RespState::kErrMissingOpcodeLast:
    case RespState::kErrUnsupportedOpcode:
      r.env.inc(Counter::resp_remote_invalid_request);
      return class_c(r, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, AsyncEventType::kQpReqErr);
    case RespState::kErrLength:
      r.env.inc(Counter::resp_local_length_error);
      [[fallthrough]];
    case RespState::kErrMisalignedAtomic:
    case RespState::kErrTooManyRdAtomic:
    case RespState::kErrInvalidateRkey:
      r.env.inc(Counter::resp_remote_invalid_request);
      return class_c(r, NakCode::kInvalidRequest, WcStatus::kRemInvReqErr, AsyncEventType::kQpAccessErr);
    case RespState::kErrRkeyViolation:
      r.env.inc(Counter::resp_remote_access_errors);
      return class_c(r, NakCode::kRemoteAccessError, WcStatus::kRemAccessErr, AsyncEventType::kQpAccessErr);
    case RespState::kErrMalformedWqe:  // class A, all QP types: the receive WQE is unusable
      r.env.inc(Counter::resp_remote_operational_error);
      if (r.qp.qp_type == QpType::kRc) set_ack(r, nak_syndrome(NakCode::kRemoteOperationalError), r.pkt.psn);
      r.s.has_rwqe = false;
      cq_push(r.env, r.qp.recv_cq, recv_wc(r, WcStatus::kLocProtErr));
      qp_to_error(r.env, r.qp);
      return RespState::kDone;
    case RespState::kErrCqOverflow:  // class G: no completion can report it
      qp_fail(r.env, r.qp, AsyncEventType::kQpFatal);
      return RespState::kDone;
    case RespState::kChkPsn:
    case RespState::kChkOpSeq:
    case RespState::kChkOpValid:
    case RespState::kChkResource:
    case RespState::kChkLength:
    case RespState::kChkRkey:
    case RespState::kExecute:
    case RespState::kComplete:
    case RespState::kAcknowledge:
    case RespState::kDuplicate:
    case RespState::kDone:
      break;
  }
  return RespState::kDone;
}

bool send_ack(Env& env, QpImpl& qp) {
  if (qp.ext) [[unlikely]] return ext_send_ack(env, qp);
  wire::PacketDesc d;
  fill_qp_path(env.net, qp, d);
  d.opcode = wire::kRcAcknowledge;
  d.psn = qp.resp.ack_psn;
  d.aeth_syndrome = qp.resp.ack_syndrome;
  d.aeth_msn = qp.resp.ack_msn;
  rte_mbuf* m = nullptr;
  if (!begin_frame(env, d, &m)) return false;
  end_frame(env, d, m);
  return true;
}

// The state trace (include/uroce/trace.h): the step from -> to of the packet r handles.
void trace_step(const Req& r, RespState from, RespState to) {
  TraceRecord t{r.qp.qp_num, TraceRole::kResponder, resp_state_name(from), resp_state_name(to)};
  t.psn = r.pkt.psn;
  t.opcode = r.pkt.opcode;
  t.has_psn = t.has_opcode = true;
  r.qp.trace->on_step(t);
}

// The driver, once without the trace and once with it (run_traced): an
// untraced QP pays one test of its trace pointer per packet, none per step.
// The cold traced copy is flattened (it inlines the handlers into itself), so
// that the untraced driver stays their only caller and inlines them as it
// did before there was a trace: its code is the same but for that test.
template <bool kTraced>
[[gnu::always_inline]] inline void run(Req& r) {
  RespState s = RespState::kChkPsn;
  for (;;) {
    [[maybe_unused]] const RespState from = s;
    switch (s) {
      case RespState::kChkPsn: s = chk_psn(r); break;
      case RespState::kChkOpSeq: s = chk_op_seq(r); break;
      case RespState::kChkOpValid: s = chk_op_valid(r); break;
      case RespState::kChkResource: s = chk_resource(r); break;
      case RespState::kChkLength: s = chk_length(r); break;
      case RespState::kChkRkey: s = chk_rkey(r); break;
      case RespState::kExecute: s = execute(r); break;
      case RespState::kComplete: s = complete(r); break;
      case RespState::kAcknowledge: s = acknowledge(r); break;
      case RespState::kDuplicate: s = duplicate(r); break;
      case RespState::kDone: return;
      case RespState::kErrPsnOutOfSeq:
      case RespState::kErrRnr:
      case RespState::kErrMissingOpcodeFirst:
      case RespState::kErrMissingOpcodeLast:
      case RespState::kErrUnsupportedOpcode:
      case RespState::kErrMisalignedAtomic:
      case RespState::kErrTooManyRdAtomic:
      case RespState::kErrLength:
      case RespState::kErrInvalidateRkey:
      case RespState::kErrRkeyViolation:
      case RespState::kErrMalformedWqe:
      case RespState::kErrCqOverflow: s = do_error(r, s); break;
    }
    if constexpr (kTraced) trace_step(r, from, s);
  }
}

[[gnu::noinline, gnu::cold, gnu::flatten]] void run_traced(Env& env, QpImpl& qp, const wire::PacketDesc& pkt,
                                                           const uint8_t* frame) {
  Req r{env, qp, qp.resp, pkt, frame, frame ? frame + pkt.payload_off : nullptr, pkt.op().flags};
  run<true>(r);
}

}  // namespace

uint32_t resp_last_psn(const QpImpl& qp, const RespRes& res) {
  // A READ takes one PSN per response packet at the path MTU (the MTU
  // responder_send_response segments by), an atomic one.
  return res.kind == wire::kRead ? wire::psn_add(res.first_psn, pkts_for(res.length, qp.mtu()) - 1) : res.first_psn;
}

// IBA 9.7.5.2: READ responses are regenerated from memory, checked again, on each send.
RespSend responder_send_response(Env& env, QpImpl& qp, const RespRes& res, uint32_t psn, uint16_t sport) {
  wire::PacketDesc d;
  fill_qp_path(env.net, qp, d);
  d.psn = psn;
  d.aeth_syndrome = wire::kAethAck;
  d.aeth_msn = res.msn;
  const uint8_t* src = nullptr;
  if (res.kind == wire::kAtomic) {
    d.opcode = wire::kRcAtomicAcknowledge;
    d.atomic_ack_orig = res.word;
  } else {
    const uint32_t off = wire::psn_diff(psn, res.first_psn) * qp.mtu();
    const bool first = psn == res.first_psn;
    const bool last = psn == resp_last_psn(qp, res);
    d.opcode = first ? (last ? wire::kRcReadResponseOnly : wire::kRcReadResponseFirst)
                     : (last ? wire::kRcReadResponseLast : wire::kRcReadResponseMiddle);
    d.payload_len = std::min(qp.mtu(), res.length - off);
    d.pad = wire::pad_for(d.payload_len);
    if (!env.mrs.check(res.rkey, qp.pd, res.word + off, d.payload_len, kAccessRemoteRead)) return RespSend::kGone;
    src = reinterpret_cast<const uint8_t*>(res.word + off);
  }
  if (sport) d.udp_sport = sport;  // sprayed (uroce's extension)
  if (!send_frame(env, d, src, res.rkey)) return RespSend::kNoRoom;
  qp.cc.on_sent(env.now_ns, uint32_t(wire::frame_len(d)) + kWireOverheadBytes, psn, false, false);
  return RespSend::kSent;
}

void responder_set_ack(Env& env, QpImpl& qp, uint8_t syndrome, uint32_t psn) {
  ResponderState& s = qp.resp;
  if (s.ack_pending && wire::aeth_type(s.ack_syndrome) != AethType::kAck && psn_cmp(psn, s.ack_psn) <= 0) return;
  if (s.ack_pending) env.inc(Counter::ack_deferred);
  s.ack_pending = true;
  s.ack_syndrome = syndrome;
  s.ack_psn = psn;
  s.ack_msn = s.msn;
  mark_ready(env, qp);
}

void responder_error(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, RespState err) {
  Req r{env, qp, qp.resp, pkt, nullptr, nullptr, pkt.op().flags};  // the error states read no payload
  do_error(r, err);
}

bool responder_complete(Env& env, QpImpl& qp, const wire::PacketDesc& pkt) {
  Req r{env, qp, qp.resp, pkt, nullptr, nullptr, pkt.op().flags};  // complete() reads no payload
  const RespState s = complete(r);
  if (s == RespState::kAcknowledge) return true;
  do_error(r, s);
  return false;
}

void responder_run(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  if (qp.trace) [[unlikely]] return run_traced(env, qp, pkt, frame);
  Req r{env, qp, qp.resp, pkt, frame, frame ? frame + pkt.payload_off : nullptr, pkt.op().flags};
  run<false>(r);
}

void responder_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  // IBA 11.6.3.1: the first request a connected QP in RTR receives.
  if (qp.state == QpState::kRtr && !qp.resp.comm_est && qp.qp_type != QpType::kUd) [[unlikely]] {
    qp.resp.comm_est = true;
    env.raise(AsyncEvent{AsyncEventType::kCommEst, &qp});
  }
  if (qp.ext) [[unlikely]] return ext_responder_rx(env, qp, pkt, frame);
  responder_run(env, qp, pkt, frame);
}

bool responder_tx(Env& env, QpImpl& qp) {
  // Responses to requests accepted before a fatal error still go out, ahead of its NAK.
  ResponderState& s = qp.resp;
  // Selective repeat: the runs of READ responses asked for again go first,
  // ahead of later READs' responses: completion at the requester waits on them.
  if (qp.ext) [[unlikely]] {
    switch (ext_send_runs(env, qp)) {
      case RunsTx::kNoRoom: return true;
      case RunsTx::kPaced: return false;
      case RunsTx::kDone: break;
    }
  }
  const uint32_t n = qp.attr.max_dest_rd_atomic;
  for (uint32_t i = 0; i < n; ++i) {  // oldest first: responses leave in PSN order
    RespRes& res = s.res[(s.res_head + i) % n];
    while (res.pending) {
      // READ responses are this QP's data toward its peer: the requester's
      // NP answers CE-marked responses with CNPs to this QP (engine.cc
      // rx_qp), and this QP's rate paces them as it paces requests. A held
      // response holds the ACKs behind it too (PSN order); the pacing timer
      // brings the QP back.
      if (!pacer_allows(env, qp)) return false;
      const uint16_t sport = qp.ext ? ext_response_sport(qp, res, res.cur_psn) : 0;
      switch (responder_send_response(env, qp, res, res.cur_psn, sport)) {
        case RespSend::kNoRoom: return true;
        case RespSend::kGone: res.pending = false; continue;
        case RespSend::kSent: break;
      }
      res.pending = psn_cmp(res.cur_psn, resp_last_psn(qp, res)) < 0;
      res.cur_psn = wire::psn_add(res.cur_psn, 1);
    }
  }
  if (s.ack_pending) {
    if (!send_ack(env, qp)) return true;
    s.ack_pending = false;
    env.inc(Counter::ack_sent);
  }
  return false;
}

}  // namespace uroce::transport
