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

// Send: nothing to the target's SEND at q (local ACK timeout 14: 4.096 us *
// 2^14 = 67.11 ms), then, once it is resent, the ACK.
// Expect: the resend no sooner than 67.11 ms after the tester asked the
// helper to post the SEND (the SEND cannot have left earlier, so a
// conforming target can never look early here); the SEND completes.
Outcome local_ack_timeout_wait(Tester& t) {
  constexpr uint8_t kTimeout = 14;
  const double want_ms = 4.096e-3 * double(1u << kTimeout);
  const uint64_t asked = steady_now_ns();
  std::vector<Reply> rs;
  Outcome out;
  if (!start(t, "send", 1, rs, out)) return out;
  const uint32_t q = t.target().psn;
  // The resend: what came after the first copy while start() collected, or the next frame.
  std::vector<Reply> again(rs.begin() + 1, rs.end());
  if (again.empty()) again = t.collect(1);
  if (again.empty() || again[0].d.psn != q || !(again[0].d.op().flags & wire::kReq)) {
    return deviates("no answer to the SEND at q, then: " + describe(again) + " (want q again after the timeout)");
  }
  const double since_post = double(again[0].time_ns - asked) / 1e6, since_first = double(again[0].time_ns - rs[0].time_ns) / 1e6;
  const std::string seen = strf("q resent %.2f ms after the post (%.2f ms after its first copy came; timeout %.2f ms)",
                                since_post, since_first, want_ms);
  if (since_post < want_ms) return deviates(seen);
  t.answer(q, kAck, 1);
  const WcStatus want[] = {WcStatus::kSuccess};
  return completions_are(t, want, "RTS", seen);
}

/// Payload bytes of the target's requests in rs, ACKing each that asks for
/// one (AckReq) so that the stream goes on; first/last: arrival times.
uint64_t take_stream(Tester& t, std::span<const Reply> rs, uint32_t& msn, uint64_t& first, uint64_t& last, uint32_t& pkts) {
  uint64_t bytes = 0;
  for (const Reply& r : rs) {
    if (!(r.d.op().flags & wire::kReq)) continue;
    if (!pkts++) first = r.time_ns;
    last = r.time_ns;
    bytes += r.d.payload_len;
    if (r.d.ack_req) t.answer(r.d.psn, kAck, ++msn);
  }
  return bytes;
}

// Send: to the target's QP, which streams RDMA WRITEs to us (8 of 32 KiB,
// 256 packets), nothing but ACKs: its rate. Then CNPs (BTH opcode 0x81, to
// its QP) every 10 us, from 2 ms before 8 more WRITEs are posted until 20 ms
// after: its rate under CNPs.
// Expect: the rate under CNPs at most half the first (DCQCN's reaction
// point cuts the rate at each CNP). A target whose helper says it runs no
// CNP-driven congestion control and whose rate does not fall: not applicable.
Outcome cnp_slows_target(Tester& t) {
  constexpr uint32_t kWriteLen = 32 * 1024, kWrites = 8;
  constexpr uint64_t kCnpEveryNs = 4'000, kLeadNs = 2'000'000, kWindowNs = 20'000'000;
  const uint32_t want_pkts = kWrites * ((kWriteLen + t.target().mtu - 1) / t.target().mtu);
  std::string err;
  uint32_t msn = 0;
  // The first stream, no CNP.
  if (!t.post("write", kWriteLen, kWrites, err)) return error(err);
  uint64_t first = 0, last = 0, bytes1 = 0;
  uint32_t pkts1 = 0;
  for (uint64_t start = steady_now_ns(); pkts1 < want_pkts && steady_now_ns() - start < uint64_t(t.answer_ms()) * 1'000'000;) {
    bytes1 += take_stream(t, t.take(), msn, first, last, pkts1);
  }
  if (pkts1 < want_pkts || last <= first) return deviates(strf("the first %u WRITEs came as %u of %u packets", kWrites, pkts1, want_pkts));
  const double rate1 = double(bytes1) * 8e3 / double(last - first);  // Mb/s
  // The second, under CNPs.
  wire::PacketDesc cnp = t.req(wire::kOpcodeCnp);
  cnp.ack_req = false;
  cnp.psn = 0;
  const auto cnp_frame = t.frame(cnp);
  uint64_t next_cnp = 0;
  uint32_t cnps = 0;
  t.on_poll([&] {
    if (const uint64_t now = steady_now_ns(); now >= next_cnp) {
      t.send_raw(cnp_frame);
      ++cnps;
      next_cnp = now + kCnpEveryNs;
    }
  });
  for (const uint64_t lead = steady_now_ns(); steady_now_ns() - lead < kLeadNs;) (void)t.take();
  if (!t.post("write", kWriteLen, kWrites, err)) return error(err);
  const uint64_t posted = steady_now_ns();
  uint64_t first2 = 0, last2 = 0, bytes2 = 0;
  uint32_t pkts2 = 0;
  while (pkts2 < want_pkts && steady_now_ns() - posted < kWindowNs) bytes2 += take_stream(t, t.take(), msn, first2, last2, pkts2);
  t.on_poll(nullptr);
  const uint64_t span2 = (pkts2 < want_pkts ? steady_now_ns() : last2) - (pkts2 ? first2 : posted);
  const double rate2 = span2 ? double(bytes2) * 8e3 / double(span2) : 0;
  const std::string seen = strf("%.0f Mb/s without CNPs (%u packets), %.0f Mb/s under %u CNPs (%u packets in %.1f ms)", rate1,
                                pkts1, rate2, cnps, pkts2, double(span2) / 1e6);
  if (rate2 <= rate1 / 2) return conforms(seen);
  if (t.target().cc == "none" || t.target().cc == "timely") {
    return {Verdict::kNotApplicable, "the target runs no CNP-driven congestion control (its helper: cc=" + t.target().cc + "): " + seen};
  }
  return deviates(seen + " (want at most half; the target's helper: cc=" + t.target().cc + ")");
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
    {.name = "req.local_ack_timeout_wait", .group = "requester",
     .rule = "IBA 9.7.6.1.3 (transport timer: 4.096 us * 2^timeout): a request is not resent before its local ACK timeout",
     .expect = "no answer to a SEND from a QP with timeout 14: resent no sooner than 67.11 ms after it was posted; then it completes",
     .setup = {.recvs = 0, .timeout = 14}, .brk = Break::kTxResendEarly, .run = local_ack_timeout_wait},
    {.name = "cc.cnp_slows_target", .group = "congestion",
     .rule = "IBA Annex A17.9 (RoCEv2 congestion management: CNP, opcode 0x81, to the QP that caused it); DCQCN reaction point",
     .expect = "the target's WRITE stream under CNPs every 10 us runs at most half its rate without them (not applicable: no CNP-driven CC)",
     .setup = {.recvs = 0, .timeout = kQuietTimeout}, .brk = Break::kRxCnpIgnored, .run = cnp_slows_target},
};

}  // namespace

std::span<const Case> requester_cases() { return kCases; }

}  // namespace uroce::apps::conform
