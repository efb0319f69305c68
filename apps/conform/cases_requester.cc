// The cases with the target as requester: the helper has the target post
// work requests (with no receive posted, so that every completion is the
// requester's), the tester is the responder and answers each request with
// one deviation (docs/CONFORMANCE.md); the target's requests on the wire and
// its completions (from the helper) are checked against the rule.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

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

/// The tester's clock of lapses: when the tester does not run (processes on
/// shared CPUs), it neither sends the CNPs it promised nor reads the target's
/// frames, which then carry the time they were read, not the time they came;
/// when a software target does not run, the CNPs wait in its receive ring
/// and its reaction point, finding none for that long, legitimately raises
/// its rate. A lapse: a gap between two of the tester's polls longer than
/// lapse_ns, or the target silent that long while a probe waits (Probe). A
/// measurement is taken only over a stretch with no lapse.
class LapseClock {
 public:
  explicit LapseClock(uint64_t lapse_ns) : lapse_ns_(lapse_ns) {}
  uint64_t lapse_ns() const { return lapse_ns_; }

  /// Call at every poll (Tester::on_poll).
  void tick(uint64_t now) {
    if (last_) widest_ = std::max(widest_, now - last_);
    if (last_ && now - last_ > lapse_ns_) lapse(now, now - last_, tester_lapses_);
    if (!last_) run_start_ = now;
    last_ = now;
  }
  /// The target did not answer for gap ns, until now.
  void target_lapse(uint64_t now, uint64_t gap) { lapse(now, gap, target_lapses_); }
  /// What is measured from now on starts now (the CNPs begin).
  void restart(uint64_t now) { run_start_ = std::max(run_start_, now); }
  /// Since when there has been no lapse.
  uint64_t run_start() const { return run_start_; }
  uint32_t tester_lapses() const { return tester_lapses_; }
  uint32_t target_lapses() const { return target_lapses_; }
  uint64_t longest_lapse_ns() const { return longest_; }
  /// The widest gap between two polls since the last call.
  uint64_t take_widest() { return std::exchange(widest_, 0); }

 private:
  void lapse(uint64_t now, uint64_t gap, uint32_t& count) {
    run_start_ = std::max(run_start_, now);
    ++count;
    longest_ = std::max(longest_, gap);
  }
  uint64_t lapse_ns_;
  uint64_t last_ = 0, run_start_ = 0, longest_ = 0, widest_ = 0;
  uint32_t tester_lapses_ = 0, target_lapses_ = 0;
};

/// The target's liveness: a zero-length RDMA WRITE with AckReq to its QP
/// (its responder answers at once; only its requester is paced), one every
/// kEveryNs. The target is silent while a probe waits for its answer and no
/// frame of its comes; silence longer than the clock's lapse bound is a lapse
/// of the target's (an ACK queued behind the target's own stream is late,
/// but the stream shows that it runs).
class Probe {
 public:
  static constexpr uint64_t kEveryNs = 20'000;

  explicit Probe(Tester& t) : d_(t.req(wire::kRcWriteOnly)), psn_(t.psn()) {
    d_.reth_va = t.target().va;
    d_.reth_rkey = t.target().rkey;
    d_.reth_len = 0;
  }
  void send(Tester& t, uint64_t now) {
    d_.psn = psn_;
    t.send(d_);
    out_.push_back({psn_, now});
    psn_ = psn_add(psn_, 1);
  }
  /// A frame of the target's came at now (r: an ACK to our QP, or nullptr).
  /// False for a NAK.
  bool heard(const Reply* r, uint64_t now, LapseClock& c) {
    if (const uint64_t since = std::max(heard_, oldest()); since && now > since + c.lapse_ns()) {
      c.target_lapse(now, now - since);
    }
    heard_ = std::max(heard_, now);
    if (!r) return true;
    if (wire::aeth_type(r->d.aeth_syndrome) != AethType::kAck) return false;
    while (head_ < out_.size() && wire::psn_cmp(out_[head_].first, r->d.psn) <= 0) ++head_;
    return true;
  }
  /// When the oldest probe not answered yet went, or 0.
  uint64_t oldest() const { return head_ < out_.size() ? out_[head_].second : 0; }
  /// Since when the target has been silent with a probe waiting, or 0.
  uint64_t silent_since() const { return oldest() ? std::max(heard_, oldest()) : 0; }

 private:
  wire::PacketDesc d_;
  uint32_t psn_;
  std::vector<std::pair<uint32_t, uint64_t>> out_;  // (PSN, sent at)
  size_t head_ = 0;
  uint64_t heard_ = 0;  // the target's last frame
};

/// The target's stream as the tester reads it: each request packet is ACKed
/// when it asks for one (AckReq), so that the stream goes on, and its arrival
/// (poll time) and payload are kept. probe hears every frame.
struct Stream {
  std::vector<std::pair<uint64_t, uint32_t>> pkts;  // (time_ns, payload bytes)
  bool probe_naked = false;
  void take(Tester& t, uint32_t& msn, Probe* probe, LapseClock& clock) {
    for (const Reply& r : t.take()) {
      const bool req = r.d.op().flags & wire::kReq;
      if (probe) probe_naked |= !probe->heard(!req && r.d.opcode == wire::kRcAcknowledge ? &r : nullptr, r.time_ns, clock);
      if (!req) continue;
      pkts.emplace_back(r.time_ns, r.d.payload_len);
      if (r.d.ack_req) t.answer(r.d.psn, kAck, ++msn);
    }
  }
  /// Payload bytes of the packets read after from, through to.
  uint64_t bytes(uint64_t from, uint64_t to) const {
    uint64_t b = 0;
    for (const auto& [time, len] : pkts) b += time > from && time <= to ? len : 0;
    return b;
  }
  /// The most payload bytes read in any span of w ns inside (from, to]
  /// (w no longer than the window).
  uint64_t peak_bytes(uint64_t from, uint64_t to, uint64_t w) const {
    uint64_t best = 0, in = 0;
    size_t head = 0, tail = 0;  // the packets in (a, a + w], a = from, then each packet's time
    for (uint64_t a = from;;) {
      while (head < pkts.size() && pkts[head].first <= a + w) in += pkts[head++].second;
      while (tail < head && pkts[tail].first <= a) in -= pkts[tail++].second;
      best = std::max(best, in);
      if (tail == pkts.size() || pkts[tail].first + w > to) return best;
      a = pkts[tail].first;
    }
  }
};

double mbps(uint64_t bytes, uint64_t ns) { return ns ? double(bytes) * 8e3 / double(ns) : 0; }

// Send: to the target's QP, which streams RDMA WRITEs to us (8 of 32 KiB,
// 256 packets), nothing but ACKs: its rate over that stream's span. Then
// CNPs (BTH opcode 0x81, to its QP) every 4 us (a ConnectX NP's minimum
// spacing); once they have gone kLeadNs with no lapse, 16 more WRITEs are
// posted. The window under CNPs starts kLeadNs after the last lapse (at the
// stream's first packet at the earliest) and ends when the stream ends (it
// must then hold the stream's second half) or after max(1 ms, the first
// stream's span); its rate is the most the target sent in any span half as
// long as the first stream's (a target that stalled in the window does not
// look slowed). A zero-length WRITE to its QP every 20 us tells whether it
// ran (Probe).
// Expect: that rate at most half the first (DCQCN's reaction point cuts the
// rate at each CNP; uroce's is at rpg_min_rate after 0.6 ms of CNPs every
// 4 us from any state, tests/unit/cc/dcqcn_test.cc). A target whose helper
// says it runs no CNP-driven congestion control (cc=none or timely): not
// applicable, and nothing is sent.
// A lapse (LapseClock: the tester or the target did not run for more than
// 100 us) restarts the window, and a first stream with a gap between polls
// longer than that or a 16th of its span is posted again: a reaction point
// legitimately recovers when CNPs stop, and frames read after a lapse carry
// the time they were read, not the time they came. No measurement without a
// lapse: an error, never a verdict.
Outcome cnp_slows_target(Tester& t) {
  constexpr uint32_t kWriteLen = 32 * 1024, kWrites1 = 8, kWrites2 = 16, kTries = 64;
  constexpr uint64_t kCnpEveryNs = 4'000, kLeadNs = 1'000'000, kMinWindowNs = 1'000'000, kLapseNs = 100'000;
  const uint32_t per_write = (kWriteLen + t.target().mtu - 1) / t.target().mtu;
  const size_t want1 = kWrites1 * per_write, want2 = kWrites2 * per_write;
  const uint64_t answer_ns = uint64_t(t.answer_ms()) * 1'000'000;
  if (t.target().cc == "none" || t.target().cc == "timely") {
    // Nothing to test, and nothing sent: 250 000 CNPs a second stalled rxe
    // under QEMU (one TCG vCPU) until its helper missed the control channel.
    return {Verdict::kNotApplicable, "the target runs no CNP-driven congestion control (its helper: cc=" + t.target().cc + ")"};
  }
  std::string err;
  uint32_t msn = 0;
  wire::PacketDesc cnp = t.req(wire::kOpcodeCnp);
  cnp.ack_req = false;
  cnp.psn = 0;
  const auto cnp_frame = t.frame(cnp);
  LapseClock clock(kLapseNs);
  Probe probe(t);
  uint64_t next_cnp = 0, next_probe = 0;
  uint32_t cnps = 0;
  bool cnp_on = false;
  t.on_poll([&] {
    const uint64_t now = steady_now_ns();
    clock.tick(now);
    if (cnp_on && now >= next_cnp) {
      t.send_raw(cnp_frame);
      ++cnps;
      next_cnp = now + kCnpEveryNs;
    }
    if (cnp_on && now >= next_probe) {
      probe.send(t, now);
      next_probe = now + Probe::kEveryNs;
    }
  });
  struct EndPolls {  // before the locals the hook refers to go
    Tester& t;
    ~EndPolls() { t.on_poll(nullptr); }
  } end_polls{t};
  Probe* const probing = &probe;
  // The first stream, no CNP: its rate over its own span, from a try with no
  // gap between polls longer than kLapseNs or a 16th of the span (only the
  // times read matter here; a slow target's long stream may hold a short gap).
  double rate1 = 0;
  uint64_t span1 = 0;
  uint32_t tries1 = 0;
  for (const uint64_t begin1 = steady_now_ns(); !rate1 && tries1 < kTries && steady_now_ns() - begin1 < answer_ns;) {
    ++tries1;
    (void)clock.take_widest();
    const uint64_t asked = steady_now_ns();
    if (!t.post("write", kWriteLen, kWrites1, err)) return error(err);
    Stream s;
    while (s.pkts.size() < want1 && steady_now_ns() - asked < answer_ns) s.take(t, msn, nullptr, clock);
    if (s.pkts.size() < want1) {
      return deviates(strf("the first %u WRITEs came as %zu of %zu packets", kWrites1, s.pkts.size(), want1));
    }
    span1 = s.pkts.back().first - s.pkts.front().first;
    if (clock.take_widest() > std::max(kLapseNs, span1 / 16)) continue;  // between the post and the last packet
    rate1 = mbps(s.bytes(s.pkts.front().first, s.pkts.back().first), span1);
  }
  if (!rate1) {
    return error(strf("the first stream: a gap of the tester's own in each of %u tries (the longest %.1f ms)", tries1,
                      double(clock.longest_lapse_ns()) / 1e6));
  }
  // The second, under CNPs.
  const uint64_t window_ns = std::max(kMinWindowNs, span1);
  cnp_on = true;
  const uint64_t begin = steady_now_ns();
  clock.restart(begin);
  Stream s;
  bool posted = false;
  uint32_t posts2 = 0, restarts = 0;
  uint64_t last_from = 0, idle_since = 0;
  while (steady_now_ns() - begin < answer_ns) {
    s.take(t, msn, probing, clock);
    if (s.probe_naked) return error("the target did not ACK a zero-length WRITE (the liveness probe)");
    if (!posted) {
      // Post once kLeadNs passed with no lapse, so that the stream starts
      // under CNPs; again (a stream that ended before a window could)
      // kLeadNs after its last packet, when the target has taken our ACKs and
      // its send queue is free, or kLeadNs after a post it refused for that.
      const uint64_t now = steady_now_ns();
      if (now - clock.run_start() < kLeadNs || now - idle_since < kLeadNs) continue;
      if (posts2 == kTries) break;
      s = Stream{};
      if (!t.post("write", kWriteLen, kWrites2, err)) {
        if (!posts2 || err.find("post_send_failed") == std::string::npos) return error(err);
        idle_since = steady_now_ns();
        continue;
      }
      ++posts2;
      posted = true;
      continue;
    }
    if (s.pkts.empty()) continue;
    // The window starts kLeadNs after the last lapse, at the stream's first
    // packet at the earliest; a lapse restarts it.
    const uint64_t from = std::max(s.pkts.front().first, clock.run_start() + kLeadNs);
    restarts += last_from && from != last_from && from != s.pkts.front().first;
    last_from = from;
    uint64_t to = 0;
    if (s.pkts.size() >= want2) {
      // The stream ended: a window if it holds the stream's second half.
      if (from > s.pkts[want2 / 2].first) {
        posted = false;
        idle_since = s.pkts.back().first;
        continue;
      }
      to = s.pkts.back().first;
    } else {
      if (steady_now_ns() < from + window_ns) continue;
      for (size_t n = SIZE_MAX; n != s.pkts.size();) {  // what came before the window's end is read before it closes
        n = s.pkts.size();
        s.take(t, msn, probing, clock);
        to = steady_now_ns();
      }
    }
    // The target silent at the window's end: a lapse if that lasts.
    while (probing && probe.silent_since() && probe.silent_since() < to && steady_now_ns() <= probe.silent_since() + kLapseNs) {
      s.take(t, msn, probing, clock);
    }
    if (probing && probe.silent_since() && probe.silent_since() < to) {
      clock.target_lapse(steady_now_ns(), steady_now_ns() - probe.silent_since());
    }
    if (clock.run_start() + kLeadNs > from) continue;  // a lapse in the window: it restarts
    const uint64_t span = std::min(span1 / 2, to - from);
    const double rate2 = mbps(s.peak_bytes(from, to, span), span), mean2 = mbps(s.bytes(from, to), to - from);
    const std::string seen = strf(
        "%.0f Mb/s without CNPs (%zu packets in %.3f ms); under CNPs every 4 us at most %.0f Mb/s over %.3f ms, "
        "%.0f Mb/s over the %.2f ms window %.1f ms after the last lapse (%zu of %zu packets; %u CNPs; streams posted "
        "%u + %u times, the window restarted %u times, for %u lapses of the tester's and %u of the target's, the "
        "longest %.1f ms)",
        rate1, want1, double(span1) / 1e6, rate2, double(span) / 1e6, mean2, double(to - from) / 1e6,
        double(from - clock.run_start()) / 1e6, s.pkts.size(), want2, cnps, tries1, posts2, restarts,
        clock.tester_lapses(), clock.target_lapses(), double(clock.longest_lapse_ns()) / 1e6);
    // The CNPs stop; the rest of the stream is taken (a reaction point
    // recovers), so that none of it reaches the next case.
    cnp_on = false;
    for (const uint64_t end = steady_now_ns(); s.pkts.size() < want2 && steady_now_ns() - end < answer_ns;) {
      s.take(t, msn, nullptr, clock);
    }
    for (const uint64_t end = steady_now_ns(); steady_now_ns() - end < kLeadNs;) s.take(t, msn, nullptr, clock);
    if (rate2 <= rate1 / 2) return conforms(seen);
    return deviates(seen + " (want at most half; the target's helper: cc=" + t.target().cc + ")");
  }
  const std::string seen = strf("no window under CNPs without a lapse in %.0f ms (%u posts; %u lapses of the tester's and "
                                "%u of the target's, the longest %.1f ms; %u CNPs)",
                                double(steady_now_ns() - begin) / 1e6, posts2, clock.tester_lapses(),
                                clock.target_lapses(), double(clock.longest_lapse_ns()) / 1e6, cnps);
  cnp_on = false;
  for (const uint64_t end = steady_now_ns(); posted && s.pkts.size() < want2 && steady_now_ns() - end < answer_ns;) {
    s.take(t, msn, nullptr, clock);  // the rest of the stream, as after a verdict
  }
  return error(seen);
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
     .expect = "the target's WRITE stream, after 1 ms of CNPs every 4 us, runs at most half its rate without them (not applicable: no CNP-driven CC)",
     .setup = {.recvs = 0, .timeout = kQuietTimeout}, .brk = Break::kRxCnpIgnored, .run = cnp_slows_target},
};

}  // namespace

std::span<const Case> requester_cases() { return kCases; }

}  // namespace uroce::apps::conform
