// `uroce bench-mc`, the run: the engine loops on their lcores (the
// server's responder loop, the client's rate loop keeping --depth WRITEs in
// flight, the verify loop's rounds and their checks), the per-engine report
// and the main lcore's run that starts, times and stops them. Data path in
// the loops.
#include "apps/bench_mc/bench_mc.h"

#include <rte_mempool.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdarg>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <rte_lcore.h>

#include <uroce/eal.h>
#include <uroce/engine_group.h>
#include <uroce/verbs.h>

#include "apps/common/endpoint.h"
#include "apps/common/launch.h"
#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/eal_args.h"
#include "drivers/dpdk/engine_launcher.h"
#include "drivers/dpdk/fault_io.h"

namespace uroce::apps::bench_mc {

void EngineGroupSide::server_loop(uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop) {
  EngineRun& run = runs_[e];
  std::vector<uint64_t> next_send(cfg_.qps, 0), next_wimm(cfg_.qps, 0);
  Wc wc[32];
  while (!stop.load(std::memory_order_relaxed)) {
    group_->poll(e, clock.now_ns());
    const int n = poll_cq(rcqs_[e], 32, wc);
    for (int i = 0; i < n; ++i) {
      const Wc& w = wc[i];
      const uint32_t j = uint32_t(w.wr_id / kRecvPerQp);
      const bool write = w.imm_data & 0x80000000u;
      const uint64_t round = w.imm_data & 0xfffff;
      bool ok = w.status == WcStatus::kSuccess && (w.wc_flags & kWcWithImm) && j < cfg_.qps &&
                ((w.imm_data >> 20) & 0x7ff) == j && w.qp_num == slots_[j].qp->qp_num;
      if (ok) {
        // The immediate carries the round's low 20 bits; the data is keyed by
        // the whole round (it wraps past 2^20 in a long soak).
        const uint64_t full = (write ? next_wimm[j] : next_send[j])++;
        ok = (round == (full & 0xfffff));
        if (ok && write) ok = w.byte_len == cfg_.size && same(slot_area(j) + cfg_.size, cfg_.size, key_of(j, full, kWriteImmData));
        if (ok && !write) ok = w.byte_len == cfg_.size && same(recv_bufs_ + w.wr_id * slot_bytes_, cfg_.size, key_of(j, full, kSendData));
      }
      (ok ? run.msgs : run.bad).fetch_add(1, std::memory_order_relaxed);
      if (!ok && run.error.empty()) {
        run.error = strf("QP %u: bad receive (status %s, imm 0x%x, len %u)", j, wc_status_str(w.status), w.imm_data, w.byte_len);
      }
      if (j < cfg_.qps) {
        Sge sge{uint64_t(uintptr_t(recv_bufs_ + w.wr_id * slot_bytes_)), cfg_.size, key_};
        RecvWr wr;
        wr.wr_id = w.wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        RecvWr* bad = nullptr;
        (void)post_recv(slots_[j].qp, &wr, &bad);
      }
    }
  }
}

// The client's engines, rate: keep `depth` WRITEs in flight on each of this engine's QPs.
void EngineGroupSide::rate_loop(uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop) {
  EngineRun& run = runs_[e];
  std::vector<QpSlot*> mine;
  for (auto& s : slots_) {
    if (s.engine == e) mine.push_back(&s);
  }
  std::vector<uint32_t> inflight(mine.size(), 0);
  // Tops QP i up to --depth WRITEs in flight, in chains of up to 16 WRs.
  auto top_up = [&](size_t i) {
    const uint32_t j = mine[i]->index;
    while (inflight[i] < cfg_.depth) {
      SendWr wrs[16];
      Sge sges[16];
      uint32_t n = 0;
      while (n < 16 && inflight[i] + n < cfg_.depth) {
        sges[n] = Sge{uint64_t(uintptr_t(local(j))), cfg_.size, key_};
        wrs[n].wr_id = i;
        wrs[n].sg_list = &sges[n];
        wrs[n].num_sge = 1;
        wrs[n].opcode = WrOpcode::kRdmaWrite;
        wrs[n].send_flags = kSendSignaled;
        wrs[n].rdma.remote_addr = peer_.area_addr + uint64_t(j) * peer_.slot_bytes;
        wrs[n].rdma.rkey = peer_.rkey;
        if (n) wrs[n - 1].next = &wrs[n];
        ++n;
      }
      SendWr* bad = nullptr;
      const Status st = post_send(mine[i]->qp, wrs, &bad);
      const uint32_t posted = st.ok() ? n : uint32_t(bad - wrs);
      inflight[i] += posted;
      if (posted < n) break;  // SQ full: the next completion tops it up
    }
  };
  // Fill every QP once; from then on each completion tops its own QP up, so a
  // loop costs what completed, not the number of QPs (16k QPs at depth 1).
  for (size_t i = 0; i < mine.size(); ++i) top_up(i);
  Wc wc[64];
  uint64_t done = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    group_->poll(e, clock.now_ns());
    for (int got = 64; got == 64;) {
      got = poll_cq(scqs_[e], 64, wc);
      for (int k = 0; k < got; ++k) {
        if (wc[k].status != WcStatus::kSuccess) {
          run.bad.fetch_add(1, std::memory_order_relaxed);
          if (run.error.empty()) run.error = strf("WRITE on QP 0x%x: %s", wc[k].qp_num, wc_status_str(wc[k].status));
        }
        if (wc[k].wr_id < inflight.size()) --inflight[wc[k].wr_id];
      }
      for (int k = 0; k < got; ++k) {
        if (wc[k].wr_id < inflight.size()) top_up(size_t(wc[k].wr_id));
      }
      done += uint64_t(got);
    }
    run.msgs.store(done, std::memory_order_relaxed);
  }
}

// The six ops of one verify round, posted as one chain (RC executes them in order).
void EngineGroupSide::post_round(QpSlot& s) {
  const uint32_t j = s.index, len = cfg_.size;
  const uint64_t r = s.round;
  uint8_t* src = local(j);
  fill(src, len, key_of(j, r, kWriteData));  // [0, len): WRITE data; READ lands in [len, 2 len)
  std::memset(src + len, 0, len);
  uint8_t* sbuf = recv_bufs_ + (uint64_t(j) * kRecvPerQp) * slot_bytes_;  // the client posts no receives: free scratch
  uint8_t* wbuf = sbuf + slot_bytes_;
  fill(sbuf, len, key_of(j, r, kSendData));
  fill(wbuf, len, key_of(j, r, kWriteImmData));
  const uint64_t remote = peer_.area_addr + uint64_t(j) * peer_.slot_bytes;
  const uint64_t word = peer_.atomic_addr + 8ull * j;
  Sge sg[6] = {{uint64_t(uintptr_t(src)), len, key_},
               {uint64_t(uintptr_t(src + len)), len, key_},
               {uint64_t(uintptr_t(sbuf)), len, key_},
               {uint64_t(uintptr_t(wbuf)), len, key_},
               {uint64_t(uintptr_t(atomic_result(j))), 8, key_},
               {uint64_t(uintptr_t(atomic_result(j) + 1)), 8, key_}};
  SendWr w[6];
  for (int i = 0; i < 6; ++i) {
    w[i].wr_id = (uint64_t(j) << 8) | uint64_t(i);
    w[i].sg_list = &sg[i];
    w[i].num_sge = 1;
    w[i].send_flags = kSendSignaled;
    if (i) w[i - 1].next = &w[i];
  }
  w[0].opcode = WrOpcode::kRdmaWrite;
  w[0].rdma = {remote, peer_.rkey};
  w[1].opcode = WrOpcode::kRdmaRead;
  w[1].rdma = {remote, peer_.rkey};
  w[2].opcode = WrOpcode::kSendWithImm;
  w[2].imm_data = imm_of(j, r, false);
  w[3].opcode = WrOpcode::kRdmaWriteWithImm;
  w[3].imm_data = imm_of(j, r, true);
  w[3].rdma = {remote + len, peer_.rkey};
  w[4].opcode = WrOpcode::kAtomicFetchAndAdd;
  w[4].atomic.remote_addr = word;
  w[4].atomic.rkey = peer_.rkey;
  w[4].atomic.compare_add = key_of(j, r, kFaa) & 0xffff;
  w[5].opcode = WrOpcode::kAtomicCmpAndSwp;
  w[5].atomic.remote_addr = word;
  w[5].atomic.rkey = peer_.rkey;
  s.cas_expect = s.faa_expect + (key_of(j, r, kFaa) & 0xffff);  // the word after this round's FAA
  w[5].atomic.compare_add = s.cas_expect;
  w[5].atomic.swap = key_of(j, r, kCas);
  atomic_result(j)[0] = atomic_result(j)[1] = ~0ull;
  SendWr* bad = nullptr;
  if (post_send(s.qp, w, &bad).ok()) s.outstanding = 6;
}

bool EngineGroupSide::check_round(QpSlot& s, std::string& why) {
  const uint32_t j = s.index, len = cfg_.size;
  const uint64_t r = s.round;
  if (!same(local(j) + len, len, key_of(j, r, kWriteData))) {
    why = strf("QP %u round %llu: READ data differs from what was written", j, (unsigned long long)r);
    return false;
  }
  if (atomic_result(j)[0] != s.faa_expect) {
    why = strf("QP %u round %llu: FAA returned 0x%llx, want 0x%llx", j, (unsigned long long)r,
              (unsigned long long)atomic_result(j)[0], (unsigned long long)s.faa_expect);
    return false;
  }
  if (atomic_result(j)[1] != s.cas_expect) {
    why = strf("QP %u round %llu: CAS returned 0x%llx, want 0x%llx", j, (unsigned long long)r,
              (unsigned long long)atomic_result(j)[1], (unsigned long long)s.cas_expect);
    return false;
  }
  s.faa_expect = key_of(j, r, kCas);  // CAS swapped this in
  return true;
}

// The client's engines, verify: every QP of this engine runs its rounds, overlapped.
void EngineGroupSide::verify_loop(uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop) {
  EngineRun& run = runs_[e];
  std::vector<QpSlot*> mine;
  for (auto& s : slots_) {
    if (s.engine == e) mine.push_back(&s);
  }
  Wc wc[64];
  size_t left = mine.size();
  const uint64_t end_ns = clock.now_ns() + uint64_t(cfg_.duration_s * 1e9);
  while (!stop.load(std::memory_order_relaxed) && left && run.error.empty()) {
    for (QpSlot* s : mine) {
      if (!s->done && s->outstanding == 0) post_round(*s);
    }
    group_->poll(e, clock.now_ns());
    const int got = poll_cq(scqs_[e], 64, wc);
    for (int k = 0; k < got; ++k) {
      const uint32_t j = uint32_t(wc[k].wr_id >> 8);
      QpSlot& s = slots_[j];
      if (wc[k].status != WcStatus::kSuccess) {
        run.bad.fetch_add(1, std::memory_order_relaxed);
        run.error = strf("QP %u op %llu: %s", j, (unsigned long long)(wc[k].wr_id & 0xff), wc_status_str(wc[k].status));
        break;
      }
      if (--s.outstanding) continue;
      std::string why;
      if (!check_round(s, why)) {
        run.bad.fetch_add(1, std::memory_order_relaxed);
        run.error = why;
        break;
      }
      run.msgs.fetch_add(6, std::memory_order_relaxed);
      ++s.round;
      if (cfg_.duration_s > 0 ? clock.now_ns() >= end_ns : s.round == cfg_.rounds) {
        s.done = true;
        --left;
      }
    }
  }
  // Keep serving (ACKs, retransmits) until main stops us.
  run.finished.store(true, std::memory_order_release);
  while (!stop.load(std::memory_order_relaxed)) group_->poll(e, clock.now_ns());
}

int EngineGroupSide::engine_body(uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop) {
  if (cfg_.server) server_loop(e, clock, stop);
  else if (cfg_.verify) verify_loop(e, clock, stop);
  else rate_loop(e, clock, stop);
  return 0;
}

void EngineGroupSide::report(const char* side) {
  for (uint32_t e = 0; e < cfg_.engines; ++e) {
    const EngineStats& st = group_->stats(e);
    const Counters& c = query_counters(group_->engine(e));
    std::printf("engine side=%s e=%u polls=%llu rx_pkts=%llu sent_pkts=%llu fwd_out=%llu fwd_in=%llu fwd_drop=%llu "
                "retransmits=%llu msgs=%llu bad=%llu\n",
                side, e, (unsigned long long)st.polls, (unsigned long long)c.get(Counter::rcvd_pkts),
                (unsigned long long)c.get(Counter::sent_pkts), (unsigned long long)st.fwd_out,
                (unsigned long long)st.fwd_in, (unsigned long long)st.fwd_drop,
                (unsigned long long)c.get(Counter::retransmits), (unsigned long long)runs_[e].msgs.load(),
                (unsigned long long)runs_[e].bad.load());
  }
}

void EngineGroupSide::engine_totals(uint64_t& good, uint64_t& bad, std::string& err) const {
  for (uint32_t e = 0; e < cfg_.engines; ++e) {
    good += runs_[e].msgs.load();
    bad += runs_[e].bad.load();
    if (err.empty()) err = runs_[e].error;
  }
}

int EngineGroupSide::run() {
  const char* side = cfg_.server ? "server" : "client";
  dpdk::EngineLauncher launcher(*group_);
  const auto lcores = dpdk::EngineLauncher::worker_lcores(cfg_.engines);
  if (lcores.size() != cfg_.engines) {
    std::fprintf(stderr, "uroce bench-mc (%s): %u engines need %u EAL worker lcores, have %zu\n", side, cfg_.engines,
                 cfg_.engines, lcores.size());
    return kExitFailure;
  }
  Status st = launcher.start(lcores, [this](uint32_t e, const dpdk::TscClock& c, const std::atomic<bool>& stop) {
    return engine_body(e, c, stop);
  });
  if (!st.ok()) {
    std::fprintf(stderr, "uroce bench-mc (%s): %s\n", side, st.message());
    return kExitFailure;
  }
  bool ok = true;
  std::string err;
  const auto now = [] { return std::chrono::steady_clock::now(); };
  const std::string done_path = path("client.done");
  RssLog rss;
  if (cfg_.server) {
    while (!g_stop && !std::filesystem::exists(done_path)) {
      rss.sample();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    (void)launcher.stop();
    uint64_t good = 0, bad = 0;
    engine_totals(good, bad, err);
    uint64_t want = 0;
    ok = !g_stop;
    if (cfg_.verify && ok) {
      read_file(done_path, &want, sizeof(want));
      ok = bad == 0 && good == want;
    }
    report(side);
    std::printf("# server: %llu receives verified, %llu bad%s%s%s\n", (unsigned long long)good, (unsigned long long)bad,
                cfg_.verify ? strf(" (want %llu)", (unsigned long long)want).c_str() : "", err.empty() ? "" : "; ", err.c_str());
    if (cfg_.duration_s > 0 && !soak_checks(side, rss, err)) ok = false;
  } else if (cfg_.verify) {
    auto last_progress = now();
    uint64_t last = 0;
    for (;;) {
      uint32_t finished = 0;
      uint64_t total = 0;
      for (uint32_t e = 0; e < cfg_.engines; ++e) {
        finished += runs_[e].finished.load(std::memory_order_acquire);
        total += runs_[e].msgs.load(std::memory_order_relaxed);
      }
      if (finished == cfg_.engines) break;
      rss.sample();
      if (total != last) last = total, last_progress = now();
      if (g_stop || now() - last_progress > std::chrono::seconds(cfg_.timeout_s)) {
        err = g_stop ? "interrupted" : "no progress";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Let the last ACKs reach the server before it is told to stop.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    (void)launcher.stop();
    uint64_t good = 0, bad = 0;
    engine_totals(good, bad, err);
    uint64_t rounds = 0;  // completed, over all QPs (= qps * --rounds without --duration)
    for (const QpSlot& s : slots_) rounds += s.round;
    const uint64_t want_ops = (cfg_.duration_s > 0 ? rounds : uint64_t(cfg_.qps) * cfg_.rounds) * 6;
    ok = err.empty() && bad == 0 && good == want_ops;
    const uint64_t want_recv = rounds * 2;  // SEND imm + WRITE imm per round
    write_file(done_path, &want_recv, sizeof(want_recv));
    report(side);
    std::printf("#%-9s %-6s %-8s %-6s %-10s %-10s %s\n", "engines", "qps", "bytes", "rounds", "ops", "verified", "placement");
    std::printf(" %-9u %-6u %-8u %-6llu %-10llu %-10s %s\n", cfg_.engines, cfg_.qps, cfg_.size,
                (unsigned long long)(rounds / cfg_.qps), (unsigned long long)good, ok ? "yes" : "NO",
                cfg_.cross ? "cross" : "aligned");
    if (!err.empty()) std::printf("# client: %s\n", err.c_str());
    if (cfg_.duration_s > 0 && !soak_checks(side, rss, err)) ok = false;
  } else {
    auto sum = [this] {
      uint64_t t = 0;
      for (uint32_t e = 0; e < cfg_.engines; ++e) t += runs_[e].msgs.load(std::memory_order_relaxed);
      return t;
    };
    std::this_thread::sleep_for(std::chrono::duration<double>(cfg_.warmup));
    const uint64_t m0 = sum();
    const auto t0 = now();
    std::this_thread::sleep_for(std::chrono::duration<double>(cfg_.seconds));
    const uint64_t m1 = sum();
    const double s = std::chrono::duration<double>(now() - t0).count();
    (void)launcher.stop();
    uint64_t bad = 0;
    for (uint32_t e = 0; e < cfg_.engines; ++e) {
      bad += runs_[e].bad.load();
      if (err.empty()) err = runs_[e].error;
    }
    ok = bad == 0 && m1 > m0 && !g_stop;
    const uint64_t zero = 0;
    write_file(done_path, &zero, sizeof(zero));
    report(side);
    const double rate = double(m1 - m0) / s;
    std::printf("#%-9s %-6s %-8s %-6s %-12s %-10s %s\n", "engines", "qps", "bytes", "depth", "msgs", "Mmsg/s", "Gb/s");
    std::printf(" %-9u %-6u %-8u %-6u %-12llu %-10.3f %.3f\n", cfg_.engines, cfg_.qps, cfg_.size, cfg_.depth,
                (unsigned long long)(m1 - m0), rate / 1e6, rate * cfg_.size * 8 / 1e9);
    if (!err.empty()) std::printf("# client: %s\n", err.c_str());
  }
  return ok ? kExitOk : kExitFailure;
}

// After a soak (--duration), with the engines stopped: every mbuf is back in
// its queue's pool, every QP is in RTS with nothing outstanding, and the RSS
// grew by at most 4 MiB from the 1-minute sample to the end (the first minute
// warms caches and mempool objects; steady traffic must not grow memory).

}  // namespace uroce::apps::bench_mc
