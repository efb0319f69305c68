// `uroce demo`'s client, the driver: per case it asks the target to get
// ready, runs the pingpong phase (latency) and the streaming phase
// (bandwidth, message rate) or a matrix case, checks READ results and atomic
// originals, and collects the rows. Data path in the timed loops.
#include "apps/demo/demo.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_cycles.h>

#include <uroce/verbs.h>

namespace uroce::apps::demo {

bool Driver::exchange(Msg m, std::string& err) {
  const MsgType want = m.type == MsgType::kPrepare ? MsgType::kReady : MsgType::kResult;
  if (!oob_.send_bytes(&m, sizeof(m))) {
    broken_ = true;
    err = "out-of-band send failed";
    return false;
  }
  arm();
  while (!oob_.try_recv(&last_, sizeof(last_))) {
    if (oob_.eof() || expired()) {
      broken_ = true;
      err = oob_.eof() ? "the server went away" : g_stop ? "interrupted" : "no answer from the server";
      return false;
    }
    ep_.pump();
  }
  if (last_.type != want) {
    broken_ = true;
    err = "out-of-band protocol error";
    return false;
  }
  if (!last_.ok) {
    err = strf("server: %s", last_.text);
    return false;
  }
  return true;
}

SendWr Driver::make_wr(const Row& row, uint64_t k, uint64_t seed, uint64_t slot_k, Sge& sge) {
  const uint32_t stride = ep_.stride(row.size, row.type);
  SendWr wr;
  wr.wr_id = k;
  wr.opcode = row.op;
  wr.send_flags = kSendSignaled;
  wr.imm_data = msg_imm(seed, k);
  const uint64_t remote = ep_.peer_.area_addr + slot_k * stride;
  if (is_atomic(row.op)) {
    sge = {ep_.addr_of(ep_.local() + (k % (ep_.area_bytes_ / 8)) * 8), 8, ep_.lkey()};
    wr.atomic.remote_addr = ep_.peer_.atomic_addr;
    wr.atomic.rkey = ep_.peer_.rkey;
    wr.atomic.compare_add = row.op == WrOpcode::kAtomicCmpAndSwp ? cas_value(seed, k) : faa_add(seed, k);
    wr.atomic.swap = cas_value(seed, k + 1);
  } else {
    sge = {ep_.addr_of(ep_.local() + slot_k * stride), row.size, ep_.lkey()};
    wr.rdma.remote_addr = remote;
    wr.rdma.rkey = ep_.peer_.rkey;
  }
  wr.sg_list = &sge;
  wr.num_sge = sge.length ? 1 : 0;
  if (row.type == QpType::kUd) {
    wr.ud.ah = ep_.ah_;
    wr.ud.remote_qpn = ep_.peer_.qpn[2];
    wr.ud.remote_qkey = kQkey;
  }
  return wr;
}

namespace {

/// The Prepare message of row's case in mode: count messages from seed.
Msg prepare_msg(const Row& row, Mode mode, uint64_t count, uint64_t seed) {
  Msg m;
  m.type = MsgType::kPrepare;
  m.qp_type = row.type;
  m.op = row.op;
  m.mode = mode;
  m.size = row.size;
  m.count = uint32_t(count);
  m.seed = seed;
  return m;
}

}  // namespace

bool Driver::finish(Msg m, std::string& err) {
  m.type = MsgType::kDone;
  std::string server_err;
  const bool ok = exchange(m, server_err);
  if (err.empty() && !ok) err = server_err;
  return err.empty();
}

bool Driver::pingpong(Row& row, uint64_t seed, std::string& err) {
  const uint64_t n = row.iters;
  const uint32_t stride = ep_.stride(row.size, row.type);
  const uint64_t k_slots = ep_.case_slots(row.size, row.type, Mode::kPingpong);
  const Msg m = prepare_msg(row, Mode::kPingpong, n, seed);
  if (!exchange(m, err)) return false;
  std::vector<uint64_t> lat;
  lat.reserve(n);
  uint64_t wrs_posted = 0, wrs_reaped = 0;  // send-side completions, all drained before the next phase
  const TscClock& clk = ep_.endpoint_.clock();
  Qp* qp = ep_.qp(row.type);
  std::memset(ep_.area(), 0, k_slots * stride);
  uint64_t faa_sum = atomic_initial(seed);
  Wc wc[32];
  for (uint64_t i = 0; i < n && err.empty(); ++i) {
    const uint64_t s = i % k_slots;
    uint8_t* src = ep_.local() + s * stride;
    uint8_t* echo = ep_.area() + s * stride;
    if (row.op == WrOpcode::kSend || row.op == WrOpcode::kRdmaWrite) fill(src, row.size, msg_key(seed, i), msg_tag(i));
    if (row.op == WrOpcode::kRdmaRead) std::memset(src, 0, row.size);
    if (row.op == WrOpcode::kSend) {
      Sge rs{ep_.addr_of(echo), stride, ep_.lkey()};
      RecvWr rw;
      rw.wr_id = i;
      rw.sg_list = &rs;
      rw.num_sge = 1;
      RecvWr* bad_r = nullptr;
      if (Status st = post_recv(qp, &rw, &bad_r); !st.ok()) {
        err = strf("post_recv: %s", st.message());
        break;
      }
    }
    Sge sge;
    SendWr wr = make_wr(row, i, seed, s, sge);
    SendWr* bad = nullptr;
    arm();
    const uint64_t t0 = rte_rdtsc();
    if (Status st = post_send(qp, &wr, &bad); !st.ok()) {
      err = strf("post_send: %s", st.message());
      break;
    }
    ++wrs_posted;
    bool done = false;
    uint64_t t1 = 0;
    while (!done) {
      ep_.pump();
      for (int c = poll_cq(ep_.scq_, 32, wc), j = 0; j < c; ++j) {
        ++wrs_reaped;
        if (wc[j].status != WcStatus::kSuccess) {
          if (err.empty()) err = strf("message %llu: %s", (unsigned long long)wc[j].wr_id, wc_status_str(wc[j].status));
          broken_ = true;
        } else if (row.op == WrOpcode::kRdmaRead || is_atomic(row.op)) {
          t1 = rte_rdtsc();
          done = true;
        }
      }
      if (row.op == WrOpcode::kSend) {
        if (poll_cq(ep_.rcq_, 1, wc) == 1) {
          t1 = rte_rdtsc();
          done = true;
          // A receive that did not succeed was flushed: the QP failed, and the
          // send side's completion says why (kept if it came first).
          if ((wc[0].status != WcStatus::kSuccess || wc[0].byte_len != row.size) && err.empty()) {
            err = strf("echo %llu: %s, %u bytes", (unsigned long long)i, wc_status_str(wc[0].status), wc[0].byte_len);
          }
          broken_ |= wc[0].status != WcStatus::kSuccess;
        }
      } else if (row.op == WrOpcode::kRdmaWrite && echo[row.size - 1] == msg_tag(i)) {
        t1 = rte_rdtsc();
        done = true;
      }
      if (!err.empty()) break;
      if (!done && expired()) {
        err = g_stop ? "interrupted" : strf("message %llu: no completion within %u s", (unsigned long long)i, ep_.cfg_.timeout_s);
        broken_ = !g_stop;
        break;
      }
    }
    // A failed round trip has no latency, and its buffers hold no message:
    // the echo slot still holds the one two round trips back.
    if (!done || !err.empty()) break;
    const bool echoed = row.op == WrOpcode::kSend || row.op == WrOpcode::kRdmaWrite;
    lat.push_back(clk.to_ns(t1 - t0) / (echoed ? 2 : 1));  // as perftest's *_lat report
    // Checks, outside the timed window.
    if (row.op == WrOpcode::kSend || row.op == WrOpcode::kRdmaWrite || row.op == WrOpcode::kRdmaRead) {
      const bool read = row.op == WrOpcode::kRdmaRead;
      const uint8_t* got = read ? src : echo;
      const uint64_t want = read ? s : i;  // a READ returns the target's message s
      if (int64_t off = check(got, row.size, msg_key(seed, want), msg_tag(want)); off >= 0) {
        err = strf("message %llu: %s", (unsigned long long)i, mismatch(got, row.size, seed, want, off).c_str());
      }
    } else {
      uint64_t got;
      std::memcpy(&got, ep_.local() + (i % (ep_.area_bytes_ / 8)) * 8, 8);
      const uint64_t want = row.op == WrOpcode::kAtomicCmpAndSwp ? cas_value(seed, i) : faa_sum;
      faa_sum += faa_add(seed, i);
      if (got != want) err = strf("%s %llu returned 0x%llx, want 0x%llx", op_name(row.op).data(), (unsigned long long)i,
                                 (unsigned long long)got, (unsigned long long)want);
    }
  }
  // The last SENDs' and WRITEs' own completions may still be due: drain them.
  while (err.empty() && wrs_reaped < wrs_posted) {
    ep_.pump();
    for (int c = poll_cq(ep_.scq_, 32, wc), j = 0; j < c; ++j) {
      ++wrs_reaped;
      if (wc[j].status != WcStatus::kSuccess) {
        err = strf("message %llu: %s", (unsigned long long)wc[j].wr_id, wc_status_str(wc[j].status));
        broken_ = true;
      }
    }
    if (err.empty() && expired()) {
      err = g_stop ? "interrupted" : "send completions missing";
      broken_ = !g_stop;
    }
  }
  row.iters = lat.size();
  if (!lat.empty()) {
    std::sort(lat.begin(), lat.end());
    row.lat_med_us = double(lat[lat.size() / 2]) / 1e3;
    row.lat_p99_us = double(lat[std::min(lat.size() - 1, (lat.size() * 99 + 99) / 100 - 1)]) / 1e3;
  }
  if (broken_ || g_stop) return false;
  return finish(m, err);
}

bool Driver::stream(Row& row, uint64_t count, uint32_t depth, uint64_t seed, bool timed, std::string& err) {
  const uint32_t stride = ep_.stride(row.size, row.type);
  // Sources (or poisoned READ destinations) for every message, before the clock starts.
  for (uint64_t k = 0; k < count; ++k) {
    uint8_t* p = ep_.local() + k * stride;
    if (row.op == WrOpcode::kRdmaRead) std::memset(p, 0, row.size);
    else if (!is_atomic(row.op)) fill(p, row.size, msg_key(seed, k), msg_tag(k));
  }
  const Msg m = prepare_msg(row, Mode::kStream, count, seed);
  if (!exchange(m, err)) return false;
  Qp* qp = ep_.qp(row.type);
  uint64_t posted = 0, done = 0;
  uint64_t faa_sum = atomic_initial(seed);  // what FAA k returns: the initial value plus the earlier addends
  Wc wc[32];
  arm();
  const uint64_t t0 = rte_rdtsc();
  while (done < count && err.empty()) {
    ep_.pump();
    if (posted < count && posted - done < depth) {
      SendWr wrs[16];
      Sge sges[16];
      uint32_t n = 0;
      while (n < 16 && posted + n < count && posted + n - done < depth) {
        wrs[n] = make_wr(row, posted + n, seed, posted + n, sges[n]);
        wrs[n].sg_list = &sges[n];
        if (n) wrs[n - 1].next = &wrs[n];
        ++n;
      }
      SendWr* bad = nullptr;
      const Status st = post_send(qp, wrs, &bad);
      posted += st.ok() ? n : uint64_t(bad - wrs);
      if (!st.ok() && st.code() != StatusCode::kResourceExhausted) err = strf("post_send: %s", st.message());
    }
    for (int c = poll_cq(ep_.scq_, 32, wc), j = 0; j < c && err.empty(); ++j) {
      const uint64_t k = done++;
      if (wc[j].status != WcStatus::kSuccess) {
        err = strf("message %llu: %s", (unsigned long long)wc[j].wr_id, wc_status_str(wc[j].status));
        broken_ = true;
      } else if (wc[j].wr_id != k) {
        err = strf("message %llu completed as %llu (out of order)", (unsigned long long)k, (unsigned long long)wc[j].wr_id);
      } else if (is_atomic(row.op)) {
        uint64_t got;
        std::memcpy(&got, ep_.local() + (k % (ep_.area_bytes_ / 8)) * 8, 8);
        const uint64_t want = row.op == WrOpcode::kAtomicCmpAndSwp ? cas_value(seed, k) : faa_sum;
        faa_sum += faa_add(seed, k);
        if (got != want) err = strf("%s %llu returned 0x%llx, want 0x%llx", op_name(row.op).data(), (unsigned long long)k,
                                   (unsigned long long)got, (unsigned long long)want);
      }
    }
    if (err.empty() && expired()) {
      err = g_stop ? "interrupted" : strf("%llu of %llu completions within %u s", (unsigned long long)done,
                                         (unsigned long long)count, ep_.cfg_.timeout_s);
      broken_ = !g_stop;
    }
  }
  const uint64_t t1 = rte_rdtsc();
  row.msgs = done;
  if (timed && done) {
    const double s = double(ep_.endpoint_.clock().to_ns(t1 - t0)) / 1e9;
    row.bw_gbps = double(done) * (is_atomic(row.op) ? 8.0 : double(row.size)) * 8 / s / 1e9;
    row.mmsg = double(done) / s / 1e6;
  }
  if (err.empty() && row.op == WrOpcode::kRdmaRead) {
    for (uint64_t k = 0; k < count && err.empty(); ++k) {
      if (int64_t off = check(ep_.local() + k * stride, row.size, msg_key(seed, k), msg_tag(k)); off >= 0) {
        err = strf("read message %llu: %s", (unsigned long long)k, mismatch(ep_.local() + k * stride, row.size, seed, k, off).c_str());
      }
    }
  }
  if (broken_ || g_stop) return false;
  return finish(m, err);
}

void Driver::perf(WrOpcode op, uint32_t size, std::vector<Row>& rows) {
  Row row;
  row.op = op;
  row.size = is_atomic(op) ? 8 : size;
  row.iters = ep_.cfg_.iters;
  std::string err;
  bool ok = pingpong(row, next_seed(), err);
  const uint64_t k_slots = ep_.case_slots(row.size, row.type, Mode::kStream);
  const uint64_t msgs = std::min<uint64_t>({ep_.cfg_.stream_msgs, ep_.cfg_.stream_bytes / std::max(row.size, 1u), k_slots});
  if (ok && msgs) ok = stream(row, msgs, ep_.cfg_.tx_depth, next_seed(), true, err);
  row.verified = ok;
  row.error = err;
  rows.push_back(row);
}

void Driver::matrix_case(QpType t, WrOpcode op, uint32_t size, std::vector<Row>& rows) {
  Row row;
  row.type = t;
  row.op = op;
  row.size = size;
  std::string err;
  const uint32_t count = ep_.cfg_.matrix_count;
  row.verified = stream(row, count, count, next_seed(), false, err);
  row.error = err;
  rows.push_back(row);
}

}  // namespace uroce::apps::demo
