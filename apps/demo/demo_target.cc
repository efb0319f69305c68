// `uroce demo`'s server, the target: per case it posts the receives,
// prepares the target area, checks every SEND and WRITE that lands (and
// echoes pingpongs back) and reports what it found. Data path in step().
#include "apps/demo/demo.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_cycles.h>

#include <uroce/verbs.h>
#include <uroce/wr.h>

namespace uroce::apps::demo {

void Target::post_recvs() {
  // At most k_ receives ahead: a slot is reused only after its message was checked.
  const uint64_t ahead = std::min<uint64_t>(kRqDepth - 1, k_);
  while (recvs_posted_ < expected_recvs_ && recvs_posted_ - recvs_done_ < ahead) {
    Sge sge{ep_.addr_of(slot(recvs_posted_)), stride_, ep_.lkey()};
    RecvWr wr;
    wr.wr_id = recvs_posted_;
    wr.sg_list = &sge;
    wr.num_sge = cur_.op == WrOpcode::kRdmaWriteWithImm ? 0 : 1;
    RecvWr* bad = nullptr;
    if (Status s = post_recv(ep_.qp(cur_.qp_type), &wr, &bad); !s.ok()) {
      fail(strf("post_recv: %s", s.message()));
      return;
    }
    ++recvs_posted_;
  }
}

void Target::prepare() {
  active_ = true;
  error_.clear();
  stride_ = ep_.stride(cur_.size, cur_.qp_type);
  k_ = ep_.case_slots(cur_.size, cur_.qp_type, cur_.mode);
  recvs_posted_ = recvs_done_ = echo_next_ = 0;
  unchecked_.reset();
  expected_recvs_ = consumes_recv(cur_.op) ? cur_.count : 0;
  const uint64_t used = std::min<uint64_t>(cur_.count, k_);
  if (cur_.op == WrOpcode::kRdmaRead) {
    for (uint64_t k = 0; k < used; ++k) fill(slot(k), cur_.size, msg_key(cur_.seed, k), msg_tag(k));
  } else if (is_atomic(cur_.op)) {
    *ep_.atomic_word() = atomic_initial(cur_.seed);
  } else {
    std::memset(ep_.area(), 0, used * stride_);  // poison: a write that did not happen shows
  }
  post_recvs();
}

void Target::on_recv(const Wc& wc) {
  check_echoed();  // before the next message is taken: its slot comes round again
  const uint64_t k = recvs_done_++;
  if (!active_ || k >= expected_recvs_) return fail(strf("unexpected receive completion %llu", (unsigned long long)k));
  if (wc.status != WcStatus::kSuccess) return fail(strf("receive %llu: %s", (unsigned long long)k, wc_status_str(wc.status)));
  if (wc.wr_id != k) return fail(strf("receive %llu completed as WR %llu (out of order)", (unsigned long long)k, (unsigned long long)wc.wr_id));
  const bool ud = cur_.qp_type == QpType::kUd;
  const bool pingpong = cur_.mode == Mode::kPingpong && cur_.op == WrOpcode::kSend;
  uint8_t* data = slot(k) + (ud ? 40 : 0);
  if (pingpong) echo(k, data, WrOpcode::kSend);  // first: the client times the round trip
  const bool write_imm = cur_.op == WrOpcode::kRdmaWriteWithImm;
  const WcOpcode want_op = write_imm ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv;
  const uint32_t want_len = cur_.size + (ud ? 40 : 0);
  if (wc.opcode != want_op || wc.byte_len != want_len) {
    return fail(strf("receive %llu: opcode %u byte_len %u, want %u and %u", (unsigned long long)k, unsigned(wc.opcode),
                    wc.byte_len, unsigned(want_op), want_len));
  }
  if (has_imm(cur_.op) && (!(wc.wc_flags & kWcWithImm) || wc.imm_data != msg_imm(cur_.seed, k))) {
    return fail(strf("receive %llu: immediate %s0x%x, want 0x%x", (unsigned long long)k,
                    (wc.wc_flags & kWcWithImm) ? "" : "missing, ", wc.imm_data, msg_imm(cur_.seed, k)));
  }
  if (ud && wc.src_qp != ep_.peer_.qpn[2]) return fail(strf("UD receive %llu from QP 0x%x", (unsigned long long)k, wc.src_qp));
  if (pingpong) {
    unchecked_ = k;  // its data, and the next receive, once the echo is out
    return;
  }
  if (int64_t off = check(data, cur_.size, msg_key(cur_.seed, k), msg_tag(k)); off >= 0) {
    return fail(strf("message %llu: %s", (unsigned long long)k, mismatch(data, cur_.size, cur_.seed, k, off).c_str()));
  }
  post_recvs();
}

// Sends pingpong message k back, a SEND from where it landed or a WRITE into
// the client's slot of k, and pumps so that it leaves before anything else.
void Target::echo(uint64_t k, uint8_t* data, WrOpcode op) {
  Sge sge{ep_.addr_of(data), cur_.size, ep_.lkey()};
  SendWr wr = op == WrOpcode::kSend ? send_wr(k, cur_.size ? &sge : nullptr)
                                    : write_wr(k, &sge, ep_.peer_.area_addr + (k % k_) * stride_, ep_.peer_.rkey);
  wr.signaled();
  SendWr* bad = nullptr;
  if (Status s = post_send(ep_.rc_, &wr, &bad); !s.ok()) fail(strf("echo post_send: %s", s.message()));
  ep_.pump();
}

void Target::check_echoed() {
  if (!unchecked_) return;
  const uint64_t k = *unchecked_;
  unchecked_.reset();
  const uint8_t* data = slot(k) + (cur_.op == WrOpcode::kSend && cur_.qp_type == QpType::kUd ? 40 : 0);
  if (int64_t off = check(data, cur_.size, msg_key(cur_.seed, k), msg_tag(k)); off >= 0) {
    return fail(strf("message %llu: %s", (unsigned long long)k, mismatch(data, cur_.size, cur_.seed, k, off).c_str()));
  }
  if (cur_.op == WrOpcode::kSend) post_recvs();
}

void Target::step() {
  if (ep_.pump() == 0) check_echoed();  // idle: the last echo is on the wire
  Wc wc[32];
  for (int n = poll_cq(ep_.rcq_, 32, wc), i = 0; i < n; ++i) on_recv(wc[i]);
  for (int n = poll_cq(ep_.scq_, 32, wc), i = 0; i < n; ++i) {
    if (wc[i].status != WcStatus::kSuccess) fail(strf("echo %llu: %s", (unsigned long long)wc[i].wr_id, wc_status_str(wc[i].status)));
  }
  // WRITE pingpong: the last byte of message k's slot turns to its tag when
  // the message has been placed (RC places in PSN order): echo it.
  if (active_ && cur_.mode == Mode::kPingpong && cur_.op == WrOpcode::kRdmaWrite && echo_next_ < cur_.count &&
      cur_.size != 0 && slot(echo_next_)[cur_.size - 1] == msg_tag(echo_next_)) {
    check_echoed();
    const uint64_t k = echo_next_++;
    echo(k, slot(k), WrOpcode::kRdmaWrite);
    unchecked_ = k;
  }
}

void Target::finish(Msg& reply) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(ep_.cfg_.timeout_s);
  const bool echo_writes = cur_.mode == Mode::kPingpong && cur_.op == WrOpcode::kRdmaWrite;
  while ((recvs_done_ < expected_recvs_ || (echo_writes && echo_next_ < cur_.count)) && !g_stop &&
         std::chrono::steady_clock::now() < end) {
    step();
  }
  check_echoed();
  if (recvs_done_ < expected_recvs_) {
    fail(strf("%llu of %llu messages received", (unsigned long long)recvs_done_, (unsigned long long)expected_recvs_));
  }
  if (cur_.op == WrOpcode::kRdmaWrite && cur_.mode == Mode::kStream) {
    // A UC WRITE completes at the sender when it leaves (no ACK), so the
    // client's "done" can overtake its last frames: keep polling until every
    // message is in place, and fail only at the deadline.
    for (uint64_t k = 0; k < cur_.count && error_.empty(); ++k) {
      int64_t off;
      while ((off = check(slot(k), cur_.size, msg_key(cur_.seed, k), msg_tag(k))) >= 0 && !g_stop &&
             std::chrono::steady_clock::now() < end) {
        step();
      }
      if (off >= 0) {
        fail(strf("written message %llu: %s", (unsigned long long)k, mismatch(slot(k), cur_.size, cur_.seed, k, off).c_str()));
      }
    }
  }
  if (is_atomic(cur_.op)) {
    const uint64_t want = atomic_final(cur_.seed, cur_.op, cur_.count);
    if (*ep_.atomic_word() != want) {
      fail(strf("atomic word 0x%llx after %u %s, want 0x%llx", (unsigned long long)*ep_.atomic_word(), cur_.count,
               op_name(cur_.op).data(), (unsigned long long)want));
    }
  }
  reply = cur_;
  reply.type = MsgType::kResult;
  reply.ok = error_.empty();
  std::snprintf(reply.text, sizeof(reply.text), "%s", error_.c_str());
  ++cases_;
  failed_ += !error_.empty();
  active_ = false;
}

int Target::run(std::string& err) {
  // While a case runs the client says nothing until its "done", so the
  // out-of-band socket is read only once every kOobEverySteps steps: a recv()
  // per step cost the target about 40 % of its time (perf record, 4 KB WRITE
  // pingpong) and about 1 us per bounce. "done" then waits at most that many
  // idle steps, well under a millisecond, once per case.
  constexpr uint64_t kOobEverySteps = 1024;
  for (uint64_t n = 0;; ++n) {
    step();
    Msg m;
    if ((!active_ || n % kOobEverySteps == 0) && oob_.try_recv(&m, sizeof(m))) {
      if (m.type == MsgType::kBye) return failed_ ? kExitFailure : kExitOk;
      if (m.type == MsgType::kPrepare) {
        cur_ = m;
        prepare();
        Msg r = cur_;
        r.type = MsgType::kReady;
        r.ok = error_.empty();
        std::snprintf(r.text, sizeof(r.text), "%s", error_.c_str());
        if (!oob_.send_bytes(&r, sizeof(r))) break;
      } else if (m.type == MsgType::kDone) {
        Msg r;
        finish(r);
        if (!oob_.send_bytes(&r, sizeof(r))) break;
      }
    }
    if (oob_.eof()) break;
    if (g_stop) {
      err = "interrupted";
      return kExitFailure;
    }
  }
  err = "the client went away before saying bye";
  return kExitFailure;
}

}  // namespace uroce::apps::demo
