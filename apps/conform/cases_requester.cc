// The cases with the target as requester: the helper has the target post
// work requests (with no receive posted, so that every completion is the
// requester's), the tester is the responder and answers each request with
// one deviation (docs/CONFORMANCE.md); the target's requests on the wire and
// its completions (from the helper) are checked against the rule.
#include <algorithm>
#include <initializer_list>
#include <utility>

#include "apps/common/launch.h"
#include "apps/conform/checks.h"
#include "apps/conform/conform.h"
#include "stack/wire/aeth.h"
#include "stack/wire/psn.h"

namespace uroce::apps::conform {

namespace {

using wire::AethType;
using wire::NakCode;
using wire::psn_add;

constexpr uint32_t kLen = 64;  // bytes of each SEND / WRITE the target posts
// A local ACK timeout of 1.07 s (4.096 us * 2^18): no retransmission of the
// target's own within a case that does not test it.
constexpr uint8_t kQuietTimeout = 18;
const uint8_t kAck = wire::aeth_syndrome(AethType::kAck, wire::kAethCreditsInvalid);

uint8_t nak(NakCode c) { return wire::aeth_syndrome(AethType::kNak, uint8_t(c)); }

/// Has the target post each (op, count) in turn and collects the first
/// transmission of all: one-packet requests at q, q+1, ... Sets out to an
/// error or a deviation when they do not come so.
bool start_mixed(Tester& t, std::initializer_list<std::pair<std::string_view, uint32_t>> posts,
                 std::vector<Reply>& rs, Outcome& out) {
  std::string err;
  uint32_t count = 0;
  for (const auto& [op, n] : posts) {
    if (!t.post(op, kLen, n, err)) {
      out = error(err);
      return false;
    }
    count += n;
  }
  rs = t.collect(count);
  const uint32_t q = t.target().psn;
  bool ok = rs.size() >= count;
  for (uint32_t i = 0; ok && i < count; ++i) {
    ok = rs[i].d.psn == psn_add(q, i) && (rs[i].d.op().flags & wire::kReq) &&
         ((rs[i].d.op().flags & wire::kOnly) == wire::kOnly || rs[i].d.opcode == wire::kRcReadRequest);
  }
  if (!ok) out = deviates(strf("the %u posted requests came as: ", count) + describe(rs));
  return ok;
}

/// start_mixed with one kind of WR.
bool start(Tester& t, std::string_view op, uint32_t count, std::vector<Reply>& rs, Outcome& out) {
  return start_mixed(t, {{op, count}}, rs, out);
}

/// The target's completions once n have come, each as wanted, and its QP in qp_state.
Outcome completions_are(Tester& t, std::span<const WcStatus> want, std::string_view qp_state, std::string seen) {
  TargetState st;
  std::string err;
  if (!t.wait_completions(want.size(), st, err)) return error(err);
  if (!std::equal(want.begin(), want.end(), st.completions.begin(), st.completions.end())) {
    return deviates(seen + "; completions " + completions_text(st.completions) + ", want " + completions_text(want));
  }
  if (st.qp_state != qp_state) return deviates(seen + "; QP in " + st.qp_state + ", want " + std::string(qp_state));
  return conforms(seen + "; completions " + completions_text(st.completions) + ", QP in " + st.qp_state);
}

std::string rel(uint32_t psn, uint32_t q) { return strf("q%+d", wire::psn_cmp(psn, q)); }

// Send: an ACK for q+3 after the target's SEND at q (q+3 never sent), then the ACK of q.
// Expect: the ghost ACK completes nothing; the real one completes the SEND.
Outcome ghost_ack_ignored(Tester& t) {
  std::vector<Reply> rs;
  Outcome out;
  if (!start(t, "send", 1, rs, out)) return out;
  const uint32_t q = t.target().psn;
  t.answer(psn_add(q, 3), kAck, 1);
  (void)t.collect(0);
  TargetState st;
  std::string err;
  if (!t.state(st, err)) return error(err);
  if (!st.completions.empty()) {
    return deviates("the ACK for q+3 (never sent) completed the SEND: " + completions_text(st.completions));
  }
  t.answer(q, kAck, 1);
  const WcStatus want[] = {WcStatus::kSuccess};
  return completions_are(t, want, "RTS", "no completion after the ghost ACK");
}

// Send: three SENDs at q, q+1, q+2 arrive; NAK PSN sequence error at q+1
// (q+1 was "lost"; q implicitly acknowledged). Expect: the target resends
// from q+1 (not q), and all three complete once q+2 is ACKed.
Outcome nak_seq_go_back_n(Tester& t) {
  std::vector<Reply> rs;
  Outcome out;
  if (!start(t, "send", 3, rs, out)) return out;
  const uint32_t q = t.target().psn;
  t.answer(psn_add(q, 1), nak(NakCode::kPsnSequenceError), 1);
  const auto again = t.collect(2);
  std::string seen = "resent:";
  for (const Reply& r : again) seen += " " + rel(r.d.psn, q);
  if (again.size() < 2 || again[0].d.psn != psn_add(q, 1) || again[1].d.psn != psn_add(q, 2)) {
    return deviates(seen + " (want q+1 then q+2)");
  }
  t.answer(psn_add(q, 2), kAck, 3);
  const WcStatus want[] = {WcStatus::kSuccess, WcStatus::kSuccess, WcStatus::kSuccess};
  return completions_are(t, want, "RTS", seen);
}

// Send: one ACK for q+2 only, after three SENDs at q, q+1, q+2.
// Expect: the one ACK acknowledges all three: three successful completions.
Outcome coalesced_ack(Tester& t) {
  std::vector<Reply> rs;
  Outcome out;
  if (!start(t, "send", 3, rs, out)) return out;
  t.answer(psn_add(t.target().psn, 2), kAck, 3);
  const WcStatus want[] = {WcStatus::kSuccess, WcStatus::kSuccess, WcStatus::kSuccess};
  return completions_are(t, want, "RTS", "one ACK for q+2");
}

// Send: an RNR NAK with timer code 24 (40.96 ms) to the target's SEND at q,
// three times over (to each resend), then the ACK.
// Expect: each resend at q no sooner than 40.96 ms after its NAK; the SEND
// completes. (A long timer, three times: a target that waits too little
// shows even on a loaded machine, where it may be descheduled for a while.)
Outcome rnr_nak_wait_retry(Tester& t) {
  constexpr uint8_t kTimer = 24;
  constexpr int kRounds = 3;
  std::vector<Reply> rs;
  Outcome out;
  if (!start(t, "send", 1, rs, out)) return out;
  const uint32_t q = t.target().psn;
  const double want_ms = double(wire::rnr_timer_ns(kTimer)) / 1e6;
  std::string seen = "resent q";
  double shortest = 1e9;
  for (int i = 0; i < kRounds; ++i) {
    const uint64_t sent = t.answer(q, wire::aeth_syndrome(AethType::kRnrNak, kTimer), 0);
    const auto again = t.collect(1);
    if (again.empty() || again[0].d.psn != q) return deviates(seen + "; after the next RNR NAK: " + describe(again));
    const double waited_ms = double(again[0].time_ns - sent) / 1e6;
    shortest = std::min(shortest, waited_ms);
    seen += strf("%s %.2f ms", i ? "," : "", waited_ms);
  }
  seen += strf(" after the RNR NAKs (timer %.2f ms)", want_ms);
  if (shortest < want_ms) return deviates(seen);
  t.answer(q, kAck, 1);
  const WcStatus want[] = {WcStatus::kSuccess};
  return completions_are(t, want, "RTS", seen);
}

/// NAK code to the first of two WRs of op (q, q+1): the first must complete
/// with status, the second be flushed, the QP go to ERR (IBA 9.9.3.1.2).
Outcome nak_completes(Tester& t, std::string_view op, NakCode code, WcStatus status) {
  std::vector<Reply> rs;
  Outcome out;
  if (!start(t, op, 2, rs, out)) return out;
  t.answer(t.target().psn, nak(code), 0);
  const WcStatus want[] = {status, WcStatus::kWrFlushErr};
  return completions_are(t, want, "ERR", "NAK " + std::string(wire::nak_code_name(uint8_t(code))) + " to q");
}

// Send: NAK Remote Access Error to the first of two WRITEs (q, q+1).
// Expect: 'remote access error', the second flushed, QP in ERR.
Outcome nak_remote_access(Tester& t) {
  return nak_completes(t, "write", NakCode::kRemoteAccessError, WcStatus::kRemAccessErr);
}

// Send: NAK Invalid Request to the first of two SENDs.
// Expect: 'remote invalid request error', the second flushed, QP in ERR.
Outcome nak_invalid_request(Tester& t) {
  return nak_completes(t, "send", NakCode::kInvalidRequest, WcStatus::kRemInvReqErr);
}

// Send: NAK Remote Operational Error to the first of two SENDs.
// Expect: 'remote operation error', the second flushed, QP in ERR.
Outcome nak_remote_op_error(Tester& t) {
  return nak_completes(t, "send", NakCode::kRemoteOperationalError, WcStatus::kRemOpErr);
}

// Send: no READ response to the target's READ at q, but the ACK of its SEND at q+1.
// Expect: an implied NAK: the READ sent again at q (its response is missing); both
// complete once the READ response and the ACK come.
Outcome implied_nak_read(Tester& t) {
  std::vector<Reply> rs;
  Outcome out;
  if (!start_mixed(t, {{"read", 1}, {"send", 1}}, rs, out)) return out;
  const uint32_t q = t.target().psn;
  t.answer(psn_add(q, 1), kAck, 2);
  const auto again = t.collect(1);
  if (again.empty() || again[0].d.opcode != wire::kRcReadRequest || again[0].d.psn != q) {
    return deviates("after the ACK of q+1 with the READ at q unanswered: " + describe(again) +
                    " (want the READ again at q)");
  }
  wire::PacketDesc d = t.req(wire::kRcReadResponseOnly);
  d.psn = q;
  d.ack_req = false;
  d.aeth_syndrome = kAck;
  d.aeth_msn = 1;
  t.send(d, pattern(kLen, 21));
  t.answer(psn_add(q, 1), kAck, 2);
  const WcStatus want[] = {WcStatus::kSuccess, WcStatus::kSuccess};
  return completions_are(t, want, "RTS", "the READ sent again at q after the ACK of q+1");
}

// Send: a NAK whose AETH syndrome has the reserved type (0x40 | 5) to the target's SEND at q.
// Expect: the SEND completes with 'bad response error'; the QP goes to ERR.
Outcome reserved_syndrome(Tester& t) {
  std::vector<Reply> rs;
  Outcome out;
  if (!start(t, "send", 1, rs, out)) return out;
  t.answer(t.target().psn, wire::aeth_syndrome(AethType::kReserved, 5), 0);
  const WcStatus want[] = {WcStatus::kBadRespErr};
  return completions_are(t, want, "ERR", "AETH syndrome 0x45 (reserved type) to q");
}

/// Counts the tries of the target's one SEND at q (answering each with
/// syndrome, or not at all if syndrome is 0) until it stops sending.
uint32_t count_tries(Tester& t, uint8_t syndrome, std::vector<Reply> first) {
  const uint32_t q = t.target().psn;
  uint32_t tries = 0;
  for (auto rs = std::move(first); !rs.empty(); rs = t.collect(1)) {
    for (const Reply& r : rs) {
      if (r.d.psn != q || !(r.d.op().flags & wire::kReq)) continue;
      ++tries;
      if (syndrome) t.answer(q, syndrome, 0);
    }
  }
  return tries;
}

// Send: nothing, to two SENDs (q, q+1) from a QP with retry_cnt 2 and a 4 ms local ACK timeout.
// Expect: q sent 1 + 2 times, then 'transport retry counter exceeded' for
// the first, the second flushed, QP in ERR.
Outcome retry_exhausted(Tester& t) {
  std::vector<Reply> rs;
  Outcome out;
  if (!start(t, "send", 2, rs, out)) return out;
  const uint32_t tries = count_tries(t, 0, std::move(rs));
  const std::string seen = strf("q sent %u times", tries);
  if (tries != 3) return deviates(seen + " (want 1 + retry_cnt 2)");
  const WcStatus want[] = {WcStatus::kRetryExcErr, WcStatus::kWrFlushErr};
  return completions_are(t, want, "ERR", seen);
}

// Send: an RNR NAK (timer code 1) to every try of q, from a QP with rnr_retry 1 (SENDs q, q+1).
// Expect: q sent 1 + 1 times, then 'RNR retry counter exceeded', the second flushed, QP in ERR.
Outcome rnr_retry_exhausted(Tester& t) {
  std::vector<Reply> rs;
  Outcome out;
  if (!start(t, "send", 2, rs, out)) return out;
  const uint32_t tries = count_tries(t, wire::aeth_syndrome(AethType::kRnrNak, 1), std::move(rs));
  const std::string seen = strf("q sent %u times", tries);
  if (tries != 2) return deviates(seen + " (want 1 + rnr_retry 1)");
  const WcStatus want[] = {WcStatus::kRnrRetryExcErr, WcStatus::kWrFlushErr};
  return completions_are(t, want, "ERR", seen);
}

// Send: an RNR NAK (timer code 1) to the first 20 tries of a SEND from a QP
// with rnr_retry 7 (for ever), then the ACK.
// Expect: the SEND 21 times, then it completes; the QP stays in RTS.
Outcome rnr_nak_storm(Tester& t) {
  constexpr uint32_t kNaks = 20;
  std::vector<Reply> rs;
  Outcome out;
  if (!start(t, "send", 1, rs, out)) return out;
  const uint32_t q = t.target().psn;
  uint32_t tries = 0;
  for (; tries < kNaks && !rs.empty(); rs = t.collect(1)) {
    for (const Reply& r : rs) {
      if (r.d.psn != q || !(r.d.op().flags & wire::kReq) || tries == kNaks) continue;
      ++tries;
      t.answer(q, wire::aeth_syndrome(AethType::kRnrNak, 1), 0);
    }
  }
  if (tries < kNaks || rs.empty() || rs[0].d.psn != q) {
    return deviates(strf("the SEND sent %u times for %u RNR NAKs (want it again after each)", tries + !rs.empty(), kNaks));
  }
  t.answer(q, kAck, 1);
  const WcStatus want[] = {WcStatus::kSuccess};
  return completions_are(t, want, "RTS", strf("the SEND sent %u times for %u RNR NAKs", tries + 1, kNaks));
}

constexpr Case kCases[] = {
    {.name = "req.ghost_ack_ignored", .group = "requester",
     .rule = "IBA 9.7.5.1: an ACK for a PSN the requester never sent is ignored",
     .expect = "an ACK for q+3 (never sent) completes nothing; the ACK of q completes the SEND",
     .setup = {.recvs = 0, .timeout = kQuietTimeout}, .brk = Break::kRxGhostAckTaken, .run = ghost_ack_ignored},
    {.name = "req.nak_seq_go_back_n", .group = "requester",
     .rule = "IBA 9.7.5.1.1 (NAK PSN sequence error: resend from the NAK's PSN; earlier PSNs acknowledged)",
     .expect = "after NAK PSN Sequence Error q+1 to SENDs q..q+2: resent q+1, q+2 (not q); three completions",
     .setup = {.recvs = 0, .timeout = kQuietTimeout}, .brk = Break::kRxAckPsnEarly, .run = nak_seq_go_back_n},
    {.name = "req.coalesced_ack", .group = "requester",
     .rule = "IBA 9.7.5.1 (an ACK acknowledges its PSN and every earlier outstanding one): coalesced ACKs",
     .expect = "one ACK for q+2 after SENDs q..q+2: three successful completions",
     .setup = {.recvs = 0, .timeout = kQuietTimeout}, .brk = Break::kRxAckPsnEarly, .run = coalesced_ack},
    {.name = "req.rnr_nak_wait_retry", .group = "requester",
     .rule = "IBA 9.7.5.2.8: after an RNR NAK the requester waits the encoded time (Table 45), then resends",
     .expect = "three RNR NAKs with timer 24 (40.96 ms): each resend no sooner than 40.96 ms; the SEND completes",
     .setup = {.recvs = 0, .timeout = kQuietTimeout}, .brk = Break::kRxRnrTimerShort, .run = rnr_nak_wait_retry},
    {.name = "req.nak_remote_access", .group = "requester",
     .rule = "IBA 9.9.3.1.2 (class C): a NAK remote access error completes the WR in error, flushes the rest, QP to error",
     .expect = "NAK Remote Access Error to the first of two WRITEs: 'remote access error', 'flushed', QP in ERR",
     .setup = {.recvs = 0, .timeout = kQuietTimeout}, .brk = Break::kRxNakAsAck, .run = nak_remote_access},
    {.name = "req.nak_invalid_request", .group = "requester",
     .rule = "IBA 9.9.3.1.2 (class C): a NAK invalid request completes the WR in error, flushes the rest, QP to error",
     .expect = "NAK Invalid Request to the first of two SENDs: 'remote invalid request error', 'flushed', QP in ERR",
     .setup = {.recvs = 0, .timeout = kQuietTimeout}, .brk = Break::kRxNakAsAck, .run = nak_invalid_request},
    {.name = "req.nak_remote_op_error", .group = "requester",
     .rule = "IBA 9.9.3.1.2: a NAK remote operational error completes the WR in error, flushes the rest, QP to error",
     .expect = "NAK Remote Operational Error to the first of two SENDs: 'remote operation error', 'flushed', QP in ERR",
     .setup = {.recvs = 0, .timeout = kQuietTimeout}, .brk = Break::kRxNakAsAck, .run = nak_remote_op_error},
    {.name = "req.retry_exhausted", .group = "requester",
     .rule = "IBA 9.7.6.1.3 (local ACK timeout, retry_cnt), 11.4.2.1: retry exhaustion completes with its status, QP to error",
     .expect = "no answer to SENDs q, q+1: q 1 + retry_cnt (2) times, 'transport retry counter exceeded', q+1 flushed, QP in ERR",
     .setup = {.recvs = 0, .timeout = 10, .retry_cnt = 2}, .brk = Break::kTxNoRetransmit, .run = retry_exhausted},
    {.name = "req.rnr_retry_exhausted", .group = "requester",
     .rule = "IBA 9.7.5.2.8 (rnr_retry), 11.4.2.1: RNR retry exhaustion completes with its status, QP to error",
     .expect = "RNR NAK to every try of q: q 1 + rnr_retry (1) times, 'RNR retry counter exceeded', q+1 flushed, QP in ERR",
     .setup = {.recvs = 0, .rnr_retry = 1}, .brk = Break::kTxNoRetransmit, .run = rnr_retry_exhausted},
    {.name = "req.rnr_nak_storm", .group = "requester",
     .rule = "IBA 9.7.5.2.8: rnr_retry 7 retries for ever: every RNR NAK is followed by a resend",
     .expect = "20 RNR NAKs (timer 0.01 ms): the SEND 21 times, then it completes; QP in RTS",
     .setup = {.recvs = 0, .timeout = kQuietTimeout}, .brk = Break::kTxNoRetransmit, .run = rnr_nak_storm},
    {.name = "req.implied_nak_read", .group = "requester",
     .rule = "IBA 9.7.5.1 (implied NAK): an ACK past an outstanding READ means its response was lost: the READ is resent",
     .expect = "ACK of the SEND at q+1 with the READ at q unanswered: the READ again at q; both complete",
     .setup = {.recvs = 0, .timeout = kQuietTimeout}, .brk = Break::kTxNoRetransmit, .run = implied_nak_read},
    {.name = "req.reserved_syndrome", .group = "requester",
     .rule = "IBA 9.7.5.1 (AETH syndromes; the reserved type is no ACK or NAK): 'bad response error', QP to error",
     .expect = "AETH syndrome 0x45 (reserved type) to the SEND: 'bad response error', QP in ERR",
     .setup = {.recvs = 0, .timeout = kQuietTimeout}, .brk = Break::kRxNakAsAck, .run = reserved_syndrome},
};

}  // namespace

std::span<const Case> requester_cases() { return kCases; }

}  // namespace uroce::apps::conform
