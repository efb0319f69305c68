// Selective repeat and spraying, the requester's side (selective.h,
// docs/LOSS_RECOVERY.md "How it works"): per PSN of the window, whether it
// was sent, SACKed or found lost, on which path and with which transmit
// sequence number; request packets sent on their path, only lost ones again;
// ACKs and SACK blocks taken in; losses found by path order, by time, by the
// tail-loss probe and the reordering timer; READ responses and atomic ACKs
// placed as they come and held until completion reaches them, and the runs
// of lost responses asked for again.
#include "stack/transport/selective.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "stack/transport/frame.h"
#include "stack/transport/qp.h"
#include "stack/wire/aeth.h"
#include "stack/wire/psn.h"

namespace uroce::transport {

namespace {

using wire::psn_add;
using wire::psn_cmp;
using wire::psn_diff;
using wire::psn_prev;

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
  const uint32_t i = sr_slot(psn);
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
  const uint32_t seq = q.rsp_seq[sr_slot(psn)];
  return !q.rack_rr || int32_t(seq - q.rack_rr_seq) > 0 || (seq == q.rack_rr_seq && psn_cmp(psn, q.rack_rr_psn) > 0);
}

// Both responses answer the same request (so leave in PSN order, each on its path).
bool same_request(const SrRequester& q, uint32_t a, uint32_t b) {
  return q.rsp_rr.test(a) == q.rsp_rr.test(b) && (!q.rsp_rr.test(a) || q.rsp_seq[sr_slot(a)] == q.rsp_seq[sr_slot(b)]);
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
  note_ack(env, qp, psn_prev(w.first_psn));
  SrRequester& q = qp.ext->req;
  if (after_rack(q, psn)) {
    if (q.rsp_rr.test(psn)) {
      q.rack_rr = true;
      q.rack_rr_seq = q.rsp_seq[sr_slot(psn)];
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
    while (!q.sent.test(m) && psn_cmp(m, w.first_psn) > 0 && psn_cmp(m, qp.comp.comp_psn) > 0) m = psn_prev(m);
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
    d.aeth_syndrome = wire::kAethAck;
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
      d.psn = psn_prev(q.acked_to);
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
    while (!q.sent.test(m) && psn_cmp(m, w.first_psn) > 0) m = psn_prev(m);
    if (q.sent.test(m)) since = std::max(since, q.sent_ns[sr_slot(m)]);
  } else if (psn_cmp(w.first_psn, qp.comp.comp_psn) == 0) {
    since = std::max(since, q.sent_ns[sr_slot(w.first_psn)]);
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
        q.rsp_late_ns[sr_slot(p)] = env.now_ns;
      }
      const uint32_t p2 = psn_add(p, stride);
      const bool by_path = psn_cmp(p2, w.last_psn) <= 0 && psn_cmp(p2, cap) < 0 && q.rsp_got.test(p2) &&
                           same_request(q, p, p2);
      const uint64_t at = q.rsp_late_ns[sr_slot(p)] + wnd;
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
    if (q.rd_atomic.test(p) && (!q.rd_held || int32_t(q.tx_seq[sr_slot(p)] - q.rd_held_seq) > 0)) {
      q.rd_held = true;  // a READ or atomic held at the responder: those before it on its path are lost
      q.rd_held_seq = q.tx_seq[sr_slot(p)];
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
    const uint32_t i = sr_slot(p);
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
    const uint64_t probe_ns = probe_at(q, in_flight_left ? q.sent_ns[sr_slot(newest)] : q.progress_ns);
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
                        : resend ? x.paths.pick_other(q.path[sr_slot(psn)], env.now_ns)
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

  const uint32_t i = sr_slot(psn);
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
      q.rsp_seq[sr_slot(p)] = seq;
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
