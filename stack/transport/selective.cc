// Selective repeat and the multipath send side of uroce's extension
// (selective.h, docs/LOSS_RECOVERY.md "How it works").
#include "stack/transport/selective.h"

#include <algorithm>
#include <cstring>

#include "stack/transport/frame.h"
#include "stack/transport/qp.h"
#include "stack/wire/aeth.h"
#include "stack/wire/psn.h"

namespace uroce::transport {

namespace {

using wire::psn_add;
using wire::psn_cmp;
using wire::psn_diff;

static_assert(kSrWindowPsns == kMaxUnackedPsns, "the responder places all the requester may have in flight");
static_assert((wire::kPsnMask + 1) % kSrWindowPsns == 0, "PSN % window is continuous across the 24-bit wrap");
static_assert(kSrWindowPsns / 8 <= wire::kSackMaxBitmapBytes);
static_assert(kSrResources == kMaxRdAtomic);
static_assert(kSrRuns <= 256, "run_head and run_count are bytes");

uint8_t ack_syndrome() { return wire::aeth_syndrome(wire::AethType::kAck, wire::kAethCreditsInvalid); }
uint32_t slot(uint32_t psn) { return psn % kSrWindowPsns; }
uint32_t before(uint32_t psn) { return psn_add(psn, wire::kPsnMask); }

// ------------------------------------------------------------------ responder

// Where a SEND/WRITE packet's data goes, from its placement header.
struct Place {
  wire::Placement h;
  const uint8_t* data = nullptr;
  uint32_t len = 0;       // data bytes
  uint32_t off = 0;       // of the message
  uint32_t rq_index = 0;  // SEND, WRITE with immediate: the receive WQE's RQ ring index
  bool has_rq = false;    // rq_index is set
};

// The checks of IBA 9.7.5.2 (opcode sequence, access, resources, length,
// R_Key) for one packet on its own, by its placement header. kDone if the
// packet may be placed, else the error state it meets.
RespState check(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame, Place& pl) {
  const uint32_t flags = pkt.op().flags;
  const uint8_t* payload = frame + pkt.payload_off;
  if (!wire::read_placement({payload, pkt.payload_len}, pl.h) || pl.h.msg_len > kMaxMsgBytes) {
    return RespState::kErrLength;
  }
  pl.data = payload + wire::kPlaceHdrBytes;
  pl.len = pkt.payload_len - wire::kPlaceHdrBytes;
  const uint32_t seg = seg_bytes(qp, flags);
  const uint32_t n = pkts_for(pl.h.msg_len, seg);
  const uint32_t idx = psn_diff(pkt.psn, pl.h.first_psn);
  if (psn_cmp(pkt.psn, pl.h.first_psn) < 0 || idx >= n) return RespState::kErrMissingOpcodeFirst;
  if (bool(flags & wire::kFirst) != (idx == 0)) return RespState::kErrMissingOpcodeFirst;
  if (bool(flags & wire::kLast) != (idx == n - 1)) return RespState::kErrMissingOpcodeLast;
  pl.off = idx * seg;
  if (pl.len != std::min(seg, pl.h.msg_len - pl.off)) return RespState::kErrLength;
  if (flags & wire::kWrite) {
    if (!(qp.attr.qp_access_flags & kAccessRemoteWrite)) return RespState::kErrUnsupportedOpcode;
    if (!env.mrs.check(pl.h.rkey, qp.pd, pl.h.va + pl.off, pl.len, kAccessRemoteWrite)) {
      return RespState::kErrRkeyViolation;
    }
  }
  if (!(flags & (wire::kSend | wire::kRwr))) return RespState::kDone;
  // The receive WQE the message takes, by its sequence number: posted yet?
  const uint32_t ahead = pl.h.recv_seq - qp.ext->resp.recv_done;
  if (ahead >= qp.rq.ring.size()) return RespState::kErrRnr;
  pl.rq_index = qp.rq.ring.tail() + ahead;
  pl.has_rq = true;
  if (!(flags & wire::kSend)) return RespState::kDone;
  const RecvWqe& w = qp.rq.ring.at(pl.rq_index);
  if (uint64_t(pl.off) + pl.len > w.length) return RespState::kErrLength;
  if (!sges_valid(env, qp.pd, qp.rq.sges_of(pl.rq_index), w.num_sge, kAccessLocalWrite)) {  // as take_rwqe
    return RespState::kErrMalformedWqe;
  }
  return RespState::kDone;
}

// The receive WQE at the head of the RQ becomes the responder's message in
// progress (ResponderState::rwqe), for its completion or its error.
void take_front_rwqe(QpImpl& qp) {
  ResponderState& s = qp.resp;
  s.rwqe = qp.rq.ring.front();
  std::copy_n(qp.rq.sges_of(qp.rq.ring.tail()), s.rwqe.num_sge, qp.rwqe_sges.get());
  qp.rq.ring.pop();
  s.has_rwqe = true;
  ++qp.ext->resp.recv_done;
}

// The message whose Last is at psn completes (in order: epsn has reached it).
// False if that failed and the QP is in error.
bool complete_message(Env& env, QpImpl& qp, uint32_t psn, const SrLast& l) {
  ResponderState& s = qp.resp;
  const uint32_t flags = wire::kOpcodes[l.opcode].flags;
  wire::PacketDesc d;  // what completion reads of the Last packet
  d.opcode = l.opcode;
  d.psn = psn;
  d.se = l.se;
  d.imm = l.imm_or_rkey;
  d.ieth_rkey = l.imm_or_rkey;
  if (flags & wire::kRwr) {
    if (qp.rq.ring.empty()) {  // cannot be: check() saw it posted, and only this takes it
      responder_error(env, qp, d, RespState::kErrMalformedWqe);
      return false;
    }
    take_front_rwqe(qp);
    s.rwqe_off = s.write_len = l.msg_len;
    // IBA 10.6.6: SEND with Invalidate executes as its message completes.
    if ((flags & wire::kInv) && !env.mrs.invalidate(l.imm_or_rkey, qp.pd, true)) {
      responder_error(env, qp, d, RespState::kErrInvalidateRkey);
      return false;
    }
  }
  s.msn = psn_add(s.msn, 1);  // IBA 9.7.6.1.1
  env.inc(Counter::rdma_recvs);
  return responder_complete(env, qp, d);
}

// The request a READ or atomic response answers came on path sport: its
// responses go back over it (and the paths after it, Paths::response_path).
void record_res_path(QpImpl& qp, uint8_t res_slot, const wire::PacketDesc& pkt) {
  const RespRes& res = qp.resp.res[res_slot];
  if ((pkt.op().flags & (wire::kRead | wire::kAtomic)) && res.kind && res.first_psn == pkt.psn) {
    qp.ext->resp.res_path[res_slot] = qp.ext->paths.index(pkt.udp_sport);
  }
}

// Runs a READ or atomic request at epsn (the go-back-N machine), noting its path.
void run_rd_atomic(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  const uint8_t res_slot = qp.resp.res_head;
  responder_run(env, qp, pkt, frame);
  record_res_path(qp, res_slot, pkt);
}

// Takes the READ or atomic request held for psn into rd; false if none is.
bool take_held_request(SrResponder& x, uint32_t psn, wire::PacketDesc& rd) {
  for (uint32_t i = 0; i < x.rd_count; ++i) {
    if (x.rd_held[i].psn != psn) continue;
    rd = x.rd_held[i];
    x.rd_held[i] = x.rd_held[--x.rd_count];
    return true;
  }
  return false;
}

// A READ or atomic request ahead of epsn, inside the window: held until
// epsn reaches it, and SACKed at once; the requester does not send it again.
// False if the hold is full.
bool hold_request(Env& env, QpImpl& qp, const wire::PacketDesc& pkt) {
  SrResponder& x = qp.ext->resp;
  if (x.held.test(pkt.psn)) {  // a duplicate of one held: the current SACK
    env.inc(Counter::duplicate_request);
  } else if (x.rd_count == kSrResources) {
    return false;
  } else {
    x.rd_held[x.rd_count++] = pkt;
    x.held.set(pkt.psn);
    env.inc(Counter::sr_ooo_placed);
  }
  responder_set_ack(env, qp, ack_syndrome(), before(qp.resp.epsn));
  return true;
}

// epsn moves over every contiguous held PSN, completing the messages whose
// Last it passes. from: where epsn was before the packet at hand (a READ
// moves it over its response PSNs; anything held there is stale).
void advance(Env& env, QpImpl& qp, uint32_t from) {
  ResponderState& s = qp.resp;
  SrResponder& x = qp.ext->resp;
  wire::PacketDesc rd;
  for (uint32_t p = from, k = 0; p != s.epsn && k < kSrWindowPsns; p = psn_add(p, 1), ++k) x.held.clear(p);
  while (x.held.test(s.epsn) && qp.state != QpState::kErr) {
    const uint32_t p = s.epsn;
    x.held.clear(p);
    if (take_held_request(x, p, rd)) {  // a READ or atomic that came ahead: its turn
      run_rd_atomic(env, qp, rd, nullptr);
      for (uint32_t q = psn_add(p, 1), k = 0; q != s.epsn && k < kSrWindowPsns; q = psn_add(q, 1), ++k) x.held.clear(q);
      continue;
    }
    s.epsn = psn_add(p, 1);
    const SrLast l = x.last[slot(p)];
    const uint32_t flags = wire::kOpcodes[l.opcode].flags;
    s.msg_kind = (flags & wire::kLast) ? 0u : flags & (wire::kSend | wire::kWrite);
    if ((flags & wire::kLast) && !complete_message(env, qp, p, l)) return;
  }
}

// A SEND/WRITE packet at or past epsn, inside the window.
void place(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  ResponderState& s = qp.resp;
  SrResponder& x = qp.ext->resp;
  const uint32_t flags = pkt.op().flags;
  const bool at_epsn = pkt.psn == s.epsn;
  if (x.held.test(pkt.psn)) {  // a duplicate of a PSN held: the current SACK
    env.inc(Counter::duplicate_request);
    responder_set_ack(env, qp, ack_syndrome(), before(s.epsn));
    return;
  }
  Place pl;
  const RespState err = check(env, qp, pkt, frame, pl);
  if (err != RespState::kDone) {
    // Out of order: dropped, not SACKed; resent, it meets the same check at
    // epsn and gets the standard NAK there (C9-111 for RNR).
    if (!at_epsn) {
      env.inc(Counter::sr_dropped_ooo);
      return;
    }
    s.nak_sent = false;
    if (pl.has_rq && pl.rq_index == qp.rq.ring.tail()) take_front_rwqe(qp);  // the error completes it
    responder_error(env, qp, pkt, err);
    return;
  }
  if (pl.len) {
    if (flags & wire::kWrite) std::memcpy(reinterpret_cast<void*>(pl.h.va + pl.off), pl.data, pl.len);
    else copy_to_sges(qp.rq.sges_of(pl.rq_index), qp.rq.ring.at(pl.rq_index).num_sge, pl.off, pl.data, pl.len);
  }
  x.held.set(pkt.psn);
  x.last[slot(pkt.psn)] = SrLast{pl.h.msg_len, (flags & wire::kInv) ? pkt.ieth_rkey : pkt.imm, pkt.opcode, pkt.se};
  const uint32_t from = s.epsn;
  if (at_epsn) {
    s.nak_sent = false;
    advance(env, qp, from);
    if (qp.state == QpState::kErr) return;
  } else {
    env.inc(Counter::sr_ooo_placed);
  }
  // SACK at once out of order (the requester learns of a gap in one round
  // trip), on AckReq, and when a gap closes.
  if (!at_epsn || pkt.ack_req || psn_diff(s.epsn, from) > 1) {
    responder_set_ack(env, qp, ack_syndrome(), before(s.epsn));
  }
}

// The SACK block's bitmap for what is held past epsn into bits (bit i: PSN
// epsn + i); returns its length in bytes (a multiple of 4), 0 if nothing is held.
uint32_t sack_bitmap(const SrResponder& x, uint32_t epsn, uint8_t* bits) {
  uint32_t top = 0;
  std::memset(bits, 0, kSrWindowPsns / 8);
  for (uint32_t i = 1; i < kSrWindowPsns; ++i) {
    if (!x.held.test(psn_add(epsn, i))) continue;
    bits[i / 8] |= uint8_t(1u << (i % 8));
    top = i;
  }
  return top ? (top / 32 + 1) * 4 : 0;
}

// ------------------------------------------------------------------ requester

// One past the last PSN whose bits the window holds: the highest sent, or
// a window past comp_psn where a READ's response PSNs reach further (only its
// first PSN has bits, and it lies inside).
uint32_t scan_end(const QpImpl& qp) {
  const uint32_t cap = psn_add(qp.comp.comp_psn, kSrWindowPsns);
  return psn_cmp(qp.req.psn_hwm, cap) < 0 ? qp.req.psn_hwm : cap;
}

bool in_flight(const QpImpl& qp, uint32_t psn) {
  return psn_cmp(psn, qp.comp.comp_psn) >= 0 && psn_cmp(psn, scan_end(qp)) < 0;
}

// The first PSN after psn and before the highest sent that is marked lost,
// else the highest sent: where the send point goes after psn.
uint32_t next_to_send(const QpImpl& qp, uint32_t psn) {
  const SrRequester& q = qp.ext->req;
  const uint32_t end = scan_end(qp);
  for (uint32_t p = psn_add(psn, 1); psn_cmp(p, end) < 0; p = psn_add(p, 1)) {
    if (q.lost.test(p)) return p;
  }
  return qp.req.psn_hwm;
}

// The transmission of psn was delivered (SACKed or acknowledged).
void delivered(Env& env, QpImpl& qp, uint32_t psn) {
  QpExtState& x = *qp.ext;
  SrRequester& q = x.req;
  const uint32_t i = slot(psn);
  x.paths.delivered(q.path[i], q.tx_seq[i]);
  q.probed = false;
  if (int32_t(q.tx_seq[i] - q.delivered_seq) > 0) q.delivered_seq = q.tx_seq[i];
  if (!q.resent.test(psn)) q.rtt_max_ns = std::max(q.rtt_max_ns, env.now_ns - q.sent_ns[i]);
}

// The started WQE whose PSNs hold psn, with its SQ index; null if none.
SendWqe* wqe_of(QpImpl& qp, uint32_t psn, uint32_t* idx) {
  for (uint32_t i = qp.sq.tail(); i != qp.sq.head(); ++i) {
    SendWqe& w = qp.sq.at(i);
    if (w.state == WqeState::kPosted) break;
    if (w.state == WqeState::kStarted && psn_cmp(psn, w.first_psn) >= 0 && psn_cmp(psn, w.last_psn) <= 0) {
      *idx = i;
      return &w;
    }
  }
  return nullptr;
}

// Response psn was sent after the last one delivered of its kind (RACK):
// not overtaken by it.
bool after_rack(const SrRequester& q, uint32_t psn) {
  if (!q.rsp_rr.test(psn)) return !q.rack_orig || psn_cmp(psn, q.rack_orig_psn) > 0;
  const uint32_t seq = q.rsp_seq[slot(psn)];
  return !q.rack_rr || int32_t(seq - q.rack_rr_seq) > 0 || (seq == q.rack_rr_seq && psn_cmp(psn, q.rack_rr_psn) > 0);
}

// Both responses answer the same request (so leave in PSN order, each on its path).
bool same_request(const SrRequester& q, uint32_t a, uint32_t b) {
  return q.rsp_rr.test(a) == q.rsp_rr.test(b) && (!q.rsp_rr.test(a) || q.rsp_seq[slot(a)] == q.rsp_seq[slot(b)]);
}

// The responder has w's request (a response of it came, or an ACK past it).
bool heard(const QpImpl& qp, const SendWqe& w) {
  return psn_cmp(w.first_psn, qp.comp.comp_psn) < 0 || qp.ext->req.rd_heard.test(w.first_psn);
}

void note_ack(Env& env, QpImpl& qp, uint32_t psn);

// Response psn of w was delivered: it may be the one sent last (RACK), the
// request it answers reached the responder, and so did every request before
// w's (the responder executes READs and atomics in order: IBA 9.7.5.1.5).
void note_response(Env& env, QpImpl& qp, const SendWqe& w, uint32_t psn) {
  note_ack(env, qp, before(w.first_psn));
  SrRequester& q = qp.ext->req;
  if (after_rack(q, psn)) {
    if (q.rsp_rr.test(psn)) {
      q.rack_rr = true;
      q.rack_rr_seq = q.rsp_seq[slot(psn)];
      q.rack_rr_psn = psn;
    } else {
      q.rack_orig = true;
      q.rack_orig_psn = psn;
    }
  }
  // The request: the READ's (its first PSN), or the re-request of a run
  // (the nearest PSN sent at or before psn).
  if (in_flight(qp, w.first_psn)) q.rd_heard.set(w.first_psn);
  uint32_t m = psn;
  if (!q.rsp_rr.test(psn)) m = w.first_psn;
  else
    while (!q.sent.test(m) && psn_cmp(m, w.first_psn) > 0 && psn_cmp(m, qp.comp.comp_psn) > 0) m = before(m);
  if (in_flight(qp, m) && q.sent.test(m) && !q.sacked.test(m)) {
    q.sacked.set(m);
    delivered(env, qp, m);
  }
}

// An ACK of every request PSN up to psn: those are delivered, and
// completion goes on to it once the READ responses before it are in.
void note_ack(Env& env, QpImpl& qp, uint32_t psn) {
  SrRequester& q = qp.ext->req;
  if (psn_cmp(psn, qp.comp.comp_psn) < 0 || psn_cmp(psn, qp.req.psn_hwm) >= 0) return;
  for (uint32_t p = qp.comp.comp_psn; psn_cmp(p, psn) <= 0 && in_flight(qp, p); p = psn_add(p, 1)) {
    // A READ asked for again from a middle PSN went later than the PSNs
    // after it: no ACK by PSN order says it arrived.
    if (!q.sent.test(p) || q.rsp_rr.test(p)) continue;
    if (q.rd_atomic.test(p)) q.rd_heard.set(p);  // ran: its responses came before this ACK
    if (q.sacked.test(p)) continue;
    q.sacked.set(p);
    if (!q.rd_atomic.test(p)) q.lost.clear(p);  // a READ's: its response may be missing still
    delivered(env, qp, p);
  }
  const uint32_t to = psn_add(psn, 1);
  if (!q.acked_ahead || psn_cmp(to, q.acked_to) > 0) q.acked_to = to;
  q.acked_ahead = true;
}

// A READ response or atomic ACK ahead of comp_psn: checked on its own, placed, held.
void hold_response(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  SrRequester& q = qp.ext->req;
  uint32_t idx = 0;
  SendWqe* w = wqe_of(qp, pkt.psn, &idx);
  if (!w || psn_diff(pkt.psn, qp.comp.comp_psn) >= kSrWindowPsns || !response_fits(qp, *w, pkt)) {
    env.inc(Counter::sr_dropped_ooo);  // it meets the completer's checks when it comes in order
    return;
  }
  if (q.rsp_got.test(pkt.psn)) {
    env.inc(Counter::duplicate_response);
    return;
  }
  if (pkt.op().flags & wire::kRead) {
    const uint32_t off = psn_diff(pkt.psn, w->first_psn) * qp.mtu();
    copy_to_sges(qp.sges_of(idx), w->num_sge, off, frame + pkt.payload_off, pkt.payload_len);
  } else {
    place_atomic_result(qp, idx, pkt);
  }
  q.rsp_got.set(pkt.psn);
  q.lost.clear(pkt.psn);  // late, not lost: not asked for again
  env.inc(Counter::sr_ooo_placed);
  note_response(env, qp, *w, pkt.psn);
}

// Completion moves over the held responses and an ACK that went past them,
// in order: each is run through the completer as the packet it stood for.
void complete_held(Env& env, QpImpl& qp) {
  SrRequester& q = qp.ext->req;
  for (;;) {
    uint32_t idx = 0;
    const uint32_t p = qp.comp.comp_psn;
    const SendWqe* w = wqe_of(qp, p, &idx);
    if (!w) break;
    wire::PacketDesc d;
    d.aeth_syndrome = ack_syndrome();
    if (is_rd_atomic(*w)) {
      if (!q.rsp_got.test(p)) break;
      q.rsp_got.clear(p);
      d.psn = p;
      if (w->opcode != WrOpcode::kRdmaRead) {
        d.opcode = wire::kRcAtomicAcknowledge;
      } else {
        const bool first = p == w->first_psn;
        const bool last = p == w->last_psn;
        d.opcode = first ? (last ? wire::kRcReadResponseOnly : wire::kRcReadResponseFirst)
                         : (last ? wire::kRcReadResponseLast : wire::kRcReadResponseMiddle);
        d.payload_len = std::min(qp.mtu(), w->length - psn_diff(p, w->first_psn) * qp.mtu());
      }
    } else {
      if (!q.acked_ahead || psn_cmp(q.acked_to, p) <= 0) break;
      d.opcode = wire::kRcAcknowledge;
      d.psn = before(q.acked_to);
    }
    completer_run(env, qp, d, nullptr);
    if (qp.state == QpState::kErr || qp.comp.comp_psn == p) break;
  }
  if (q.acked_ahead && psn_cmp(q.acked_to, qp.comp.comp_psn) <= 0) q.acked_ahead = false;
}

// Marks lost every READ response (and atomic ACK) of a request the responder
// has, in the window, at or after psn, and not in yet.
void mark_responses_lost(QpImpl& qp, uint32_t psn) {
  SrRequester& q = qp.ext->req;
  const uint32_t cap = psn_add(qp.comp.comp_psn, kSrWindowPsns);
  for (uint32_t i = qp.sq.tail(); i != qp.sq.head(); ++i) {
    const SendWqe& w = qp.sq.at(i);
    if (w.state == WqeState::kPosted || psn_cmp(w.first_psn, qp.req.psn_hwm) >= 0) break;
    if (w.state != WqeState::kStarted || !is_rd_atomic(w) || !heard(qp, w)) continue;
    for (uint32_t p = psn_cmp(w.first_psn, psn) > 0 ? w.first_psn : psn;
         psn_cmp(p, w.last_psn) <= 0 && psn_cmp(p, cap) < 0; p = psn_add(p, 1)) {
      if (!q.rsp_got.test(p)) q.lost.set(p);
    }
  }
}

// The missing response p of w that completion has reached: lost when nothing
// came for it a slowest round trip (+ a quarter, + kReorderMinNs) after
// completion reached it and after the request that last asked for it left.
// (Nothing after it may come to tell: a window of READs all waiting on it,
// or a lost re-request.) Else lowers recheck_ns to then.
bool head_of_line_lost(const Env& env, QpImpl& qp, const SendWqe& w, uint32_t p, uint64_t& recheck_ns) {
  const SrRequester& q = qp.ext->req;
  if (!q.rtt_max_ns) return false;
  uint64_t since = q.progress_ns;
  if (q.rsp_rr.test(p)) {
    uint32_t m = p;
    while (!q.sent.test(m) && psn_cmp(m, w.first_psn) > 0) m = before(m);
    if (q.sent.test(m)) since = std::max(since, q.sent_ns[slot(m)]);
  } else if (psn_cmp(w.first_psn, qp.comp.comp_psn) == 0) {
    since = std::max(since, q.sent_ns[slot(w.first_psn)]);
  }
  const uint64_t at = since + q.rtt_max_ns + q.rtt_max_ns / 4 + kReorderMinNs;
  if (env.now_ns > at) return true;
  recheck_ns = std::min(recheck_ns, at + 1);
  return false;
}

// Missing READ responses (and atomic ACKs) of requests the responder has: one
// is lost once a later response of the same request on its path came (the
// responder sends a request's responses in PSN order, path after path,
// Paths::response_path; more than kReorderThreshPkts later on one path or
// per flowlet), or once any response sent after it came a slowest round trip
// (+ kReorderMinNs) ago. Sets found/first as detect_losses does, and lowers
// recheck_ns to the next time one runs out.
void detect_response_losses(Env& env, QpImpl& qp, bool& found, uint32_t& first, uint64_t& recheck_ns) {
  QpExtState& x = *qp.ext;
  SrRequester& q = x.req;
  if (!q.rack_orig && !q.rack_rr) return;
  const uint32_t stride = x.paths.n > 1 && x.paths.mode == PathMode::kPacket ? x.paths.n : kReorderThreshPkts + 1;
  const uint64_t wnd = q.rtt_max_ns + kReorderMinNs;
  const uint32_t cap = psn_add(qp.comp.comp_psn, kSrWindowPsns);
  auto mark = [&](uint32_t p) {
    q.lost.set(p);
    env.inc(Counter::sr_lost);
    if (!found || psn_cmp(p, first) < 0) first = p;
    found = true;
  };
  for (uint32_t i = qp.sq.tail(); i != qp.sq.head(); ++i) {
    const SendWqe& w = qp.sq.at(i);
    if (w.state == WqeState::kPosted || psn_cmp(w.first_psn, qp.req.psn_hwm) >= 0) break;
    // A request nothing was heard of is the request rules' (detect_losses).
    if (w.state != WqeState::kStarted || !is_rd_atomic(w) || !heard(qp, w)) continue;
    const uint32_t lo = psn_cmp(w.first_psn, qp.comp.comp_psn) > 0 ? w.first_psn : qp.comp.comp_psn;
    for (uint32_t p = lo; psn_cmp(p, w.last_psn) <= 0 && psn_cmp(p, cap) < 0; p = psn_add(p, 1)) {
      if (q.rsp_got.test(p) || q.lost.test(p)) continue;
      if (p == qp.comp.comp_psn && head_of_line_lost(env, qp, w, p, recheck_ns)) {
        mark(p);
        continue;
      }
      if (after_rack(q, p)) continue;
      if (!q.rsp_late.test(p)) {
        q.rsp_late.set(p);
        q.rsp_late_ns[slot(p)] = env.now_ns;
      }
      const uint32_t p2 = psn_add(p, stride);
      const bool by_path = psn_cmp(p2, w.last_psn) <= 0 && psn_cmp(p2, cap) < 0 && q.rsp_got.test(p2) &&
                           same_request(q, p, p2);
      const uint64_t at = q.rsp_late_ns[slot(p)] + wnd;
      if (!by_path && env.now_ns < at) {
        recheck_ns = std::min(recheck_ns, at);
        continue;
      }
      mark(p);
    }
  }
}

void apply_sack(Env& env, QpImpl& qp, uint32_t ack_psn, std::span<const uint8_t> bitmap) {
  SrRequester& q = qp.ext->req;
  for (uint32_t i = 1; i < bitmap.size() * 8; ++i) {
    if (!(bitmap[i / 8] >> (i % 8) & 1)) continue;
    const uint32_t p = psn_add(ack_psn, 1 + i);
    if (!in_flight(qp, p) || !q.sent.test(p) || q.sacked.test(p)) continue;
    q.sacked.set(p);
    q.lost.clear(p);
    delivered(env, qp, p);
    if (q.rd_atomic.test(p) && (!q.rd_held || int32_t(q.tx_seq[slot(p)] - q.rd_held_seq) > 0)) {
      q.rd_held = true;  // a READ or atomic held at the responder: those before it on its path are lost
      q.rd_held_seq = q.tx_seq[slot(p)];
    }
  }
}

// Sets the QP's timer to at_ns as the reordering timer: only under a running
// local ACK timer (none runs with timeout 0, infinite), and only to move it
// earlier. The local ACK timeout it displaces is kept (again, where progress
// has set the timer since the last time).
void arm_reo_timer(Env& env, QpImpl& qp, uint64_t at_ns) {
  SrRequester& q = qp.ext->req;
  if (!env.timers.armed(qp.index) || env.timers.deadline(qp.index) <= at_ns) return;
  if (!q.reo_timer || env.timers.deadline(qp.index) != q.reo_deadline_ns) q.ack_deadline_ns = env.timers.deadline(qp.index);
  q.reo_timer = true;
  q.reo_deadline_ns = at_ns;
  env.timers.arm(qp.index, at_ns);
}

// When the newest transmission in flight, sent at sent_ns, is probed: two
// slowest round trips later (none before a round trip was measured).
uint64_t probe_at(const SrRequester& q, uint64_t sent_ns) {
  return q.rtt_max_ns ? sent_ns + 2 * q.rtt_max_ns + kReorderMinNs : UINT64_MAX;
}

// Marks lost every PSN in flight, not SACKed, whose transmission was
// overtaken by a delivered later one on its path (by more than the reorder
// threshold where one path's order is not the send order), or by one on any
// path after the slowest round trip seen; each loss counts against its path.
// probe (the QP's timer fired): if nothing else is found and the newest
// transmission in flight has gone unanswered for two slowest round trips,
// it is sent again (a tail-loss probe: a loss at the end of a burst has no
// later delivery to reveal it, and the responder SACKs the probe). Then sets
// the reordering timer to the next such deadline, where it comes before the
// local ACK timeout.
void detect_losses(Env& env, QpImpl& qp, bool probe) {
  QpExtState& x = *qp.ext;
  SrRequester& q = x.req;
  const int32_t thresh = x.paths.n > 1 && x.paths.mode == PathMode::kPacket ? 0 : int32_t(kReorderThreshPkts);
  const uint64_t reo_ns = q.rtt_max_ns + q.rtt_max_ns / 4 + kReorderMinNs;
  bool found = false;
  uint32_t first = 0;
  uint64_t recheck_ns = UINT64_MAX;  // when the next PSN overtaken on another path runs out of time
  bool in_flight_left = false;       // newest*: the newest transmission still in flight
  uint32_t newest = 0;
  uint32_t newest_seq = 0;
  const uint32_t end = scan_end(qp);
  for (uint32_t p = qp.comp.comp_psn; psn_cmp(p, end) < 0; p = psn_add(p, 1)) {
    // A READ asked for again from a middle PSN: its responses' rules find a
    // loss. A READ or atomic held at the responder (SACKed) but not run when
    // completion reached it: the head-of-line rule below.
    if (!q.sent.test(p) || q.lost.test(p) || q.rsp_rr.test(p)) continue;
    const bool head_rd = p == qp.comp.comp_psn && q.rd_atomic.test(p) && !q.rd_heard.test(p);
    if (q.sacked.test(p) && !head_rd) continue;
    const uint32_t i = slot(p);
    bool by_path = int32_t(x.paths.p[q.path[i]].delivered_seq - q.tx_seq[i]) > thresh;
    bool overtaken = int32_t(q.delivered_seq - q.tx_seq[i]) > 0 || q.nakd.test(p);
    bool by_time = overtaken && env.now_ns - q.sent_ns[i] > reo_ns;
    if (q.rd_atomic.test(p)) {
      // A READ or atomic request is found lost otherwise: its answer waits
      // behind the responses of those before it, so deliveries of later
      // requests learned from their answers say nothing of it. The READs and
      // atomics keep to one path (Paths::pick_ordered): a later one held at
      // the responder (SACKed) came without it; a PSN sequence error NAK
      // names it (the responder's hold was full).
      by_path = !q.sacked.test(p) && q.rd_held && int32_t(q.rd_held_seq - q.tx_seq[i]) > 0;
      overtaken = q.nakd.test(p);
      by_time = overtaken && env.now_ns - q.sent_ns[i] > reo_ns;
      // Completion has reached one nothing was heard of: the responder, done
      // with all before it, would have answered within a round trip.
      const uint64_t since = std::max(q.sent_ns[i], q.progress_ns);
      if (head_rd && q.rtt_max_ns) {
        if (env.now_ns - since > reo_ns) by_time = true;
        else recheck_ns = std::min(recheck_ns, since + reo_ns + 1);
      }
    }
    if (!by_path && !by_time) {
      if (overtaken) recheck_ns = std::min(recheck_ns, q.sent_ns[i] + reo_ns + 1);
      if (!in_flight_left || int32_t(q.tx_seq[i] - newest_seq) > 0) {
        newest = p;
        newest_seq = q.tx_seq[i];
      }
      in_flight_left = true;
      continue;
    }
    q.lost.set(p);
    env.inc(Counter::sr_lost);
    if (x.paths.lost(q.path[i], env.now_ns)) env.inc(Counter::paths_down);
    if (!found) first = p;
    found = true;
  }
  detect_response_losses(env, qp, found, first, recheck_ns);
  // With no request in flight, comp_psn inside a READ (a PSN with no request
  // of its own) means that its last responses stopped coming: the probe asks
  // for the rest of it, timed from the last response.
  const bool read_tail = !in_flight_left && psn_cmp(qp.comp.comp_psn, qp.req.psn_hwm) < 0 && !q.sent.test(qp.comp.comp_psn);
  if ((in_flight_left || read_tail) && !q.probed) {
    const uint32_t target = in_flight_left ? newest : qp.comp.comp_psn;
    const uint64_t probe_ns = probe_at(q, in_flight_left ? q.sent_ns[slot(newest)] : q.progress_ns);
    if (probe && !found && env.now_ns >= probe_ns) {
      q.lost.set(target);
      q.probed = true;
      env.inc(Counter::sr_probes);
      first = target;
      found = true;
    } else {
      recheck_ns = std::min(recheck_ns, probe_ns);
    }
  }
  if (recheck_ns != UINT64_MAX) arm_reo_timer(env, qp, recheck_ns);
  if (!found) return;
  if (psn_cmp(first, qp.req.req_psn) < 0) requester_rewind(qp, first);
  mark_ready(env, qp);
}

}  // namespace

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

namespace {

// A request packet of a selective-repeat QP.
void sr_responder_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  const uint32_t from = qp.resp.epsn;
  const uint32_t ahead = psn_diff(pkt.psn, from);
  if (psn_cmp(pkt.psn, from) < 0) return responder_run(env, qp, pkt, frame);  // duplicates, as go-back-N
  if (ahead >= kSrWindowPsns) {
    env.inc(Counter::sr_dropped_ooo);
    return;
  }
  if (pkt.op().flags & (wire::kSend | wire::kWrite)) return place(env, qp, pkt, frame);
  // READ and atomics run in order only; out of order they are held. If the
  // hold is full, one is dropped (sent again) and the gap before it is NAKed
  // as go-back-N NAKs it (a PSN sequence error, once per gap, C9-111): the
  // requester takes the NAK as evidence of a loss, not as a go-back-N retry.
  if (ahead) {
    if (hold_request(env, qp, pkt)) return;
    env.inc(Counter::sr_dropped_ooo);
    return responder_run(env, qp, pkt, frame);
  }
  run_rd_atomic(env, qp, pkt, frame);
  if (qp.state == QpState::kErr) return;
  const uint32_t after = qp.resp.epsn;
  advance(env, qp, from);
  // PSNs held past the READ or atomic completed: acknowledge them (after its
  // response, which the transmit turn sends first).
  if (qp.resp.epsn != after) responder_set_ack(env, qp, ack_syndrome(), before(qp.resp.epsn));
}

}  // namespace

void ext_responder_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  QpExtState& x = *qp.ext;
  x.resp.ack_sport = pkt.udp_sport;  // the answer goes back over the request's path
  if (x.cfg.selective_repeat) return sr_responder_rx(env, qp, pkt, frame);
  if (psn_cmp(pkt.psn, qp.resp.epsn) < 0) return responder_run(env, qp, pkt, frame);  // a duplicate
  run_rd_atomic(env, qp, pkt, frame);
}

bool ext_send_ack(Env& env, QpImpl& qp) {
  QpExtState& x = *qp.ext;
  const ResponderState& s = qp.resp;
  wire::PacketDesc d;
  fill_qp_path(env.net, qp, d);
  d.opcode = wire::kRcAcknowledge;
  d.psn = s.ack_psn;
  d.aeth_syndrome = s.ack_syndrome;
  d.aeth_msn = s.ack_msn;
  uint8_t bits[kSrWindowPsns / 8];
  uint32_t bitmap_bytes = 0;
  if (x.cfg.selective_repeat && wire::aeth_type(s.ack_syndrome) == wire::AethType::kAck) {
    // The state at the time the ACK leaves: never older than what asked for it.
    d.psn = before(s.epsn);
    d.aeth_msn = s.msn;
    bitmap_bytes = sack_bitmap(x.resp, s.epsn, bits);
    if (bitmap_bytes) d.payload_len = uint32_t(sizeof(wire::SackHdr)) + bitmap_bytes;
  }
  if (x.resp.ack_sport) d.udp_sport = x.resp.ack_sport;
  rte_mbuf* m = nullptr;
  uint8_t* payload = begin_frame(env, d, &m);
  if (!payload) return false;
  if (bitmap_bytes) {
    auto* h = reinterpret_cast<wire::SackHdr*>(payload);
    h->kind = wire::kSackKind;
    h->reserved = 0;
    h->bitmap_bytes.set(uint16_t(bitmap_bytes));
    std::memcpy(payload + sizeof(wire::SackHdr), bits, bitmap_bytes);
    env.inc(Counter::sr_sacks_sent);
  }
  end_frame(env, d, m);
  return true;
}

void ext_read_rerequest(Env& env, QpImpl& qp, const RespRes& res, const wire::PacketDesc& pkt) {
  SrResponder& x = qp.ext->resp;
  const uint32_t mtu = qp.mtu();
  const uint64_t off = uint64_t(psn_diff(pkt.psn, res.first_psn)) * mtu;
  // It must name the rest of the READ from its PSN on, or a part of that
  // (rxe checks the same), under the READ's R_Key; else it is dropped (class D).
  if (pkt.reth_rkey != res.rkey || pkt.reth_va != res.word + off || off + pkt.reth_len > res.length ||
      x.run_count == kSrRuns) {
    env.inc(Counter::dup_rd_atomic_dropped);
    return;
  }
  const uint32_t n = pkt.reth_len ? pkts_for(pkt.reth_len, mtu) : 1;
  SrRun& run = x.runs[(x.run_head + x.run_count++) % kSrRuns];
  run = SrRun{res.first_psn, pkt.psn, pkt.psn, psn_add(pkt.psn, n - 1), qp.ext->paths.index(pkt.udp_sport),
              uint8_t(&res - qp.resp.res.data())};
  mark_ready(env, qp);
}

uint16_t ext_response_sport(const QpImpl& qp, const RespRes& res, uint32_t psn) {
  const QpExtState& x = *qp.ext;
  if (x.paths.n == 1) return 0;
  const uint16_t req = x.resp.res_path[size_t(&res - qp.resp.res.data())];
  return x.paths.sport(x.paths.response_path(req, res.first_psn, psn));
}

RunsTx ext_send_runs(Env& env, QpImpl& qp) {
  QpExtState& x = *qp.ext;
  SrResponder& r = x.resp;
  while (r.run_count) {
    SrRun& run = r.runs[r.run_head];
    const RespRes& res = qp.resp.res[run.res];
    // Still the READ it was asked of (a resource is recycled by a later READ).
    if (res.kind == wire::kRead && res.first_psn == run.read_first && psn_cmp(run.cur, run.end) <= 0) {
      if (!pacer_allows(env, qp)) return RunsTx::kPaced;
      const uint16_t sport = x.paths.n > 1 ? x.paths.sport(x.paths.response_path(run.path, run.first, run.cur)) : 0;
      switch (responder_send_response(env, qp, res, run.cur, sport)) {
        case RespSend::kNoRoom: return RunsTx::kNoRoom;
        case RespSend::kGone: run.cur = psn_add(run.end, 1); break;
        case RespSend::kSent: run.cur = psn_add(run.cur, 1); break;
      }
      if (psn_cmp(run.cur, run.end) <= 0) continue;
    }
    r.run_head = uint8_t((r.run_head + 1) % kSrRuns);
    --r.run_count;
  }
  return RunsTx::kDone;
}

void ext_start_wqe(QpImpl& qp, SendWqe& w) {
  const uint32_t flags = wr_op(w.opcode).flags;
  if ((flags & wire::kSend) || (flags & (wire::kWrite | wire::kImm)) == (wire::kWrite | wire::kImm)) {
    w.recv_seq = qp.ext->req.recv_seq++;
  }
}

ExtSend ext_send_request(Env& env, QpImpl& qp, uint32_t idx, wire::PacketDesc& d, uint32_t off) {
  QpExtState& x = *qp.ext;
  SrRequester& q = x.req;
  const uint32_t psn = d.psn;
  const bool resend = psn_cmp(psn, qp.req.psn_hwm) < 0;
  if (x.cfg.selective_repeat && resend && !q.lost.test(psn)) {
    requester_rewind(qp, next_to_send(qp, psn));
    return ExtSend::kSkip;
  }
  SendWqe& w = qp.sq.at(idx);
  const uint32_t flags = wr_op(w.opcode).flags;
  // A READ the responder has, asked for again: the run of lost responses
  // from psn (IBA 9.7.5.1.4: the RETH names the part asked for).
  uint32_t run_end = psn;
  const bool run = x.cfg.selective_repeat && resend && (flags & wire::kRead) && heard(qp, w);
  if (run) {
    for (uint32_t p = psn_add(psn, 1); psn_cmp(p, w.last_psn) <= 0 && psn_diff(p, qp.comp.comp_psn) < kSrWindowPsns &&
                                        q.lost.test(p) && !q.rsp_got.test(p);
         p = psn_add(p, 1)) {
      run_end = p;
    }
    d.reth_len = std::min((psn_diff(run_end, psn) + 1) * qp.mtu(), d.reth_len);
  }
  const uint16_t path = (flags & (wire::kRead | wire::kAtomic)) && !run ? x.paths.pick_ordered(env.now_ns)
                        : resend ? x.paths.pick_other(q.path[slot(psn)], env.now_ns)
                                 : x.paths.pick(env.now_ns);
  d.udp_sport = x.paths.sport(path);
  rte_mbuf* m = nullptr;
  uint8_t* payload = begin_frame(env, d, &m);
  if (!payload) return ExtSend::kNoRoom;
  uint32_t len = d.payload_len;
  if (x.cfg.selective_repeat && (flags & (wire::kSend | wire::kWrite))) {
    const bool write = flags & wire::kWrite;
    const bool rwqe = (flags & wire::kSend) || (flags & wire::kImm);
    wire::write_placement({w.first_psn, w.length, write ? w.remote_addr : 0, write ? w.rkey : 0, rwqe ? w.recv_seq : 0},
                          payload);
    payload += wire::kPlaceHdrBytes;
    len -= wire::kPlaceHdrBytes;
  }
  if (len) {
    if (w.num_sge == 0) std::memcpy(payload, qp.inline_of(idx) + off, len);
    else copy_from_sges(qp.sges_of(idx), w.num_sge, off, payload, len);
  }
  end_frame(env, d, m);

  const uint32_t i = slot(psn);
  const uint32_t seq = q.next_tx_seq++;
  if (!resend) {
    q.sacked.clear(psn);
    q.resent.clear(psn);
    q.rd_heard.clear(psn);
  } else {
    q.resent.set(psn);
  }
  for (uint32_t p = psn;; p = psn_add(p, 1)) {
    if (q.lost.test(p)) {
      q.lost.clear(p);
      env.inc(Counter::sr_resent);
    }
    if (run) {  // its responses answer this request now
      q.rsp_rr.set(p);
      q.rsp_late.clear(p);
      q.rsp_seq[slot(p)] = seq;
    }
    if (p == run_end) break;
  }
  q.sent.set(psn);
  q.nakd.clear(psn);
  if (flags & (wire::kRead | wire::kAtomic)) q.rd_atomic.set(psn);
  else q.rd_atomic.clear(psn);
  q.tx_seq[i] = seq;
  q.path[i] = uint8_t(path);
  x.paths.last = uint8_t(path);
  q.sent_ns[i] = env.now_ns;
  if (x.cfg.selective_repeat) {
    // The tail-loss probe's time; the local ACK timer first, if this packet starts it.
    if (qp.attr.timeout && !env.timers.armed(qp.index)) {
      env.timers.arm(qp.index, env.now_ns + local_ack_timeout_ns(qp.attr.timeout));
    }
    if (const uint64_t at = probe_at(q, env.now_ns); at != UINT64_MAX && !q.probed) arm_reo_timer(env, qp, at);
  }
  return ExtSend::kSent;
}

void resend_from(QpImpl& qp, uint32_t psn) {
  if (sr_on(qp)) {
    SrRequester& q = qp.ext->req;
    q.lost.set(psn);  // the resend point, even a READ's middle PSN (the rest of the READ)
    const uint32_t end = scan_end(qp);
    for (uint32_t p = psn_add(psn, 1); psn_cmp(p, end) < 0; p = psn_add(p, 1)) {
      if (q.sent.test(p) && !q.sacked.test(p)) q.lost.set(p);
    }
    mark_responses_lost(qp, psn);
  }
  requester_rewind(qp, psn);
}

bool ext_on_timer(Env& env, QpImpl& qp) {
  SrRequester& q = qp.ext->req;
  if (!q.reo_timer) return false;
  q.reo_timer = false;
  // The local ACK timer was set again after the reordering timer displaced
  // it (progress restarted it): this is its timeout.
  if (env.now_ns >= q.ack_deadline_ns) return false;
  env.timers.arm(qp.index, q.ack_deadline_ns);  // back to the local ACK timeout ...
  detect_losses(env, qp, true);                 // ... unless another PSN needs a check before it
  return true;
}

void ext_completer_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  const bool sack = pkt.payload_len && pkt.opcode == wire::kRcAcknowledge;
  if (!sr_on(qp)) {
    if (sack) {
      env.inc(Counter::rx_drop_sack);  // only a selective-repeat QP takes SACKs
      return;
    }
    return completer_run(env, qp, pkt, frame);
  }
  SrRequester& q = qp.ext->req;
  const uint32_t from = qp.comp.comp_psn;
  if (sack) {
    env.inc(Counter::sr_sacks_rcvd);
    apply_sack(env, qp, pkt.psn, wire::sack_bitmap({frame + pkt.payload_off, pkt.payload_len}));
  }
  const bool response = pkt.op().flags & (wire::kRead | wire::kAtomic);
  if (response && psn_cmp(pkt.psn, from) > 0 && psn_cmp(pkt.psn, qp.req.psn_hwm) < 0) {
    hold_response(env, qp, pkt, frame);
  } else {
    uint32_t idx = 0;
    if (response && pkt.psn == from) {
      if (const SendWqe* w = wqe_of(qp, pkt.psn, &idx)) note_response(env, qp, *w, pkt.psn);
    } else if (pkt.opcode == wire::kRcAcknowledge && wire::aeth_type(pkt.aeth_syndrome) == wire::AethType::kAck) {
      note_ack(env, qp, pkt.psn);
    }
    completer_run(env, qp, pkt, frame);
  }
  if (qp.state == QpState::kErr) return;
  complete_held(env, qp);
  if (qp.state == QpState::kErr) return;
  // Acknowledged cumulatively: delivered, and out of the window.
  const uint32_t acked = psn_diff(qp.comp.comp_psn, from);
  if (acked) q.progress_ns = env.now_ns;
  const uint32_t start = acked > kSrWindowPsns ? psn_add(qp.comp.comp_psn, 0x1000000 - kSrWindowPsns) : from;
  for (uint32_t p = start; p != qp.comp.comp_psn; p = psn_add(p, 1)) {
    if (q.sent.test(p) && !q.sacked.test(p)) delivered(env, qp, p);
    q.sent.clear(p);
    q.sacked.clear(p);
    q.lost.clear(p);
    q.resent.clear(p);
    q.rd_atomic.clear(p);
    q.rsp_got.clear(p);
    q.rsp_rr.clear(p);
    q.rsp_late.clear(p);
    q.rd_heard.clear(p);
    q.nakd.clear(p);
  }
  // A PSN sequence error NAK (the responder's epsn, where a READ or atomic
  // behind it was dropped, its hold full; completer_run took only its
  // cumulative part): its PSN was overtaken, and is lost once out for the
  // reordering window.
  const uint32_t nak = pkt.psn;
  if (pkt.opcode == wire::kRcAcknowledge && wire::aeth_type(pkt.aeth_syndrome) == wire::AethType::kNak &&
      wire::aeth_value(pkt.aeth_syndrome) == uint8_t(wire::NakCode::kPsnSequenceError) && in_flight(qp, nak) &&
      q.sent.test(nak) && !q.sacked.test(nak)) {
    q.nakd.set(nak);
  }
  detect_losses(env, qp, false);
}

}  // namespace uroce::transport
