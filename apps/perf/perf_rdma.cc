// uroce perf's RDMA side (class Perf): the endpoint, buffers, MR, CQs and
// QPs as perftest sets them up, the QP connection (verbs or rdma_cm), and
// the measured runs, perftest's run_iter_bw / _bw_server / _bi / _lat_*
// timed from the TSC. Data path in the run loops, control path elsewhere.
#include "apps/perf/perf.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include <uroce/counters.h>
#include <uroce/eal.h>
#include <uroce/verbs.h>

#include "apps/commands.h"
#include "apps/common/addr_text.h"
#include "apps/common/args.h"
#include "apps/common/endpoint.h"
#include "apps/common/json_writer.h"
#include "apps/common/launch.h"
#include "apps/common/oob.h"
#include "apps/common/perf_report.h"
#include "apps/common/watchdog.h"
#include "apps/perf/perf_exchange.h"
#include "drivers/dpdk/eal_args.h"

namespace uroce::apps::perftest {

Perf::~Perf() {
  if (cm_ids_.empty()) {
    for (Qp* q : qps_) (void)destroy_qp(q);
  }
  for (CmId* id : cm_ids_) (void)cm_destroy_id(id);  // with its QP
  if (rcq_ && rcq_ != cq_) (void)destroy_cq(rcq_);
  if (cq_) (void)destroy_cq(cq_);
  if (mr_) (void)dereg_mr(mr_);
}

bool Perf::open(std::string& err) {
  // The GID table as -x numbers it (as `uroce pingpong -g`): index 0 = --ip,
  // index 1 = --ip6; the QPs send from index -x (AH sgid_index) and the
  // peer's address is resolved (ARP / ND) from that GID.
  gid_ = *cfg_.ep.addrs.gid(cfg_.gid_idx);
  if (!ep_.open(cfg_.ep, err)) return false;
  curr_mtu_ = ep_.max_mtu();
  return true;
}

bool Perf::setup(std::string& err, const CmPeer* cm) {
  const Verb verb = cfg_.test.verb;
  max_size_ = cfg_.all && verb != Verb::kAtomic ? kMaxSize : cfg_.size;  // -a: slots for 2^23
  // Buffer: 2 x q slots (send areas, then the areas the peer targets / we receive into).
  buf_bytes_ = 2 * uint64_t(cfg_.num_qp) * addr_step(slot(), cache_line) + cache_line;
  mem_ = page_buffer(buf_bytes_);
  buf_ = mem_.get();
  // As perftest's create_single_mr: pseudo-random bytes, except write_lat,
  // which polls its receive slot for the iteration count and starts at zero.
  if (verb == Verb::kWrite && cfg_.test.tst == Tst::kLat) {
    std::memset(buf_, 0, buf_bytes_);
  } else {
    std::mt19937_64 fill(std::random_device{}());
    for (uint64_t i = 0; i < buf_bytes_; i += 8) {
      const uint64_t v = fill();
      std::memcpy(buf_ + i, &v, std::min<uint64_t>(8, buf_bytes_ - i));
    }
  }
  auto mr = reg_mr(ep_.pd(), buf_, buf_bytes_,
                   kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
  if (!mr.ok()) {
    err = std::string("reg_mr: ") + mr.status().message();
    return false;
  }
  mr_ = *mr;
  const uint32_t sq = std::max<uint32_t>(cfg_.tx_depth, 1);
  const uint32_t rq = verb == Verb::kSend ? cfg_.rx_depth : 1;
  auto cq = create_cq(ep_.ctx(), cfg_.num_qp * sq + 16);
  if (!cq.ok()) {
    err = std::string("create_cq: ") + cq.status().message();
    return false;
  }
  cq_ = *cq;
  rcq_ = cq_;
  if (verb == Verb::kSend) {
    auto rcq = create_cq(ep_.ctx(), cfg_.num_qp * rq + 16);
    if (!rcq.ok()) {
      err = std::string("create_cq: ") + rcq.status().message();
      return false;
    }
    rcq_ = *rcq;
  }
  out_reads_ = 1;
  if (verb == Verb::kRead || verb == Verb::kAtomic) {
    const uint32_t max_reads = 16;  // our device's max_qp_rd_atom
    out_reads_ = cfg_.outs == 0 ? max_reads : std::min(cfg_.outs, max_reads);
    if (cfg_.outs > max_reads) {
      std::fprintf(stderr, " Number of outstanding reads is above max = %u\n Changing to that max value\n", max_reads);
    }
  }
  std::random_device rd;
  std::mt19937 rng(rd() ^ uint32_t(getpid()));
  me_.assign(cfg_.num_qp, Dest{});
  rem_.assign(cfg_.num_qp, Dest{});
  for (uint32_t i = 0; i < cfg_.num_qp; ++i) {
    QpInitAttr ia;
    ia.send_cq = cq_;
    ia.recv_cq = rcq_;
    ia.cap.max_send_wr = sq + 1;
    ia.cap.max_recv_wr = rq;
    ia.qp_type = QpType::kRc;
    Dest& d = me_[i];
    d.lid = 0;
    d.out_reads = out_reads_;
    d.psn = rng() & 0xffffff;  // -R: the CM picks the PSNs; this one is only exchanged
    d.rkey = mr_->rkey;
    d.vaddr = uint64_t(uintptr_t(recv_area(i)));
    d.gid = gid_;
    d.srqn = ext_offer(cfg_.ext);
    if (cm) {  // rdma_create_qp puts it in INIT with rdma_cm's access flags
      if (!connect_cm(*cm, ia, err)) return false;
      d.qpn = qps_.back()->qp_num;
      continue;
    }
    auto q = create_qp(ep_.pd(), ia);
    if (!q.ok()) {
      err = "create_qp[" + std::to_string(i) + "]: " + q.status().message();
      return false;
    }
    qps_.push_back(*q);
    ep_.trace_if_asked(*q);
    d.qpn = (*q)->qp_num;
    uint32_t access = 0;
    switch (verb) {  // ctx_modify_qp_to_init
      case Verb::kAtomic: access = kAccessRemoteAtomic; break;
      case Verb::kRead: access = kAccessRemoteRead; break;
      case Verb::kWrite: access = kAccessRemoteWrite; break;
      case Verb::kSend: access = kAccessRemoteWrite | kAccessLocalWrite; break;
    }
    if (!init_qp(*q, access, 0, err)) return false;
  }
  // A time per post and per completion, except for runs timed as a whole
  // (-N, -D: bw only), which keep the first post's and the last completion's.
  const size_t times = cfg_.no_peak ? 1 : size_t(cfg_.iters) * cfg_.num_qp + 1;
  tposted_.assign(times, 0);
  tcompleted_.assign(times, 0);
  return true;
}

bool Perf::connect_cm(const CmPeer& peer, const QpInitAttr& ia, std::string& err) {
  CmConnParam p;  // perftest: READ / atomic resources only for those tests
  const bool rd = cfg_.test.verb == Verb::kRead || cfg_.test.verb == Verb::kAtomic;
  p.responder_resources = rd ? uint8_t(out_reads_) : 0;
  p.initiator_depth = rd ? uint8_t(out_reads_) : 0;
  auto make_qp = [&](CmId* id, std::string& e) {
    const Status s = cm_create_qp(id, ep_.pd(), ia);
    if (!s.ok()) e = std::string("rdma_create_qp: ") + s.message();
    else ep_.trace_if_asked(id->qp);
    return s.ok();
  };
  CmId* id = ep_.cm_connect_rc(peer, p, make_qp, err);
  if (!id) {
    err = "Failed to create RDMA CM connection: " + err;
    return false;
  }
  cm_ids_.push_back(id);
  qps_.push_back(id->qp);
  return true;
}

bool Perf::connect_qps(std::string& err) {  // ctx_connect
  const Gid& peer = rem_[0].gid;
  if (peer == Gid{}) {
    err = "the peer sent no GID: run it with -x (RoCE needs a GID)";
    return false;
  }
  if (peer.is_ipv4_mapped() != gid_.is_ipv4_mapped()) {
    err = "Found Incompatibility issue with GID types: the peer's GID " + gid_str(peer) + ", ours " + gid_str(gid_);
    return false;
  }
  AhAttr ah;
  ah.dgid = peer;
  ah.sgid_index = cfg_.gid_idx;
  ah.hop_limit = 64;  // perftest asks for 0xFF; rxe sends TTL 64 whatever it is given (docs/INTEROP.md)
  ah.sl = cfg_.sl;
  if (!ep_.resolve(peer, cfg_.gid_idx, ah.dmac, Deadline(cfg_.timeout_s), err)) return false;
  const QpExt ext = agreed_ext(cfg_.ext, rem_[0].srqn);
  if (ext_offer(ext) != ext_offer(cfg_.ext)) {
    std::fprintf(stderr, " The peer did not ask for all of uroce's extension (--sr, --paths): it is off where not agreed\n");
  }
  for (size_t i = 0; i < qps_.size(); ++i) {
    // perftest leaves a non-duplex bw server in RTR; RTS changes nothing on the wire
    // (that side posts no sends) and keeps the responder path the same for every role.
    const QpConnect c{.ah = ah,
                      .path_mtu = curr_mtu_,
                      .dest_qpn = rem_[i].qpn,
                      .rq_psn = rem_[i].psn,
                      .sq_psn = me_[i].psn,
                      .max_dest_rd_atomic = uint8_t(std::min<uint32_t>(me_[i].out_reads, 16)),
                      .min_rnr_timer = kMinRnrTimer,
                      .timeout = cfg_.qp_timeout,
                      .max_rd_atomic = uint8_t(std::clamp<uint32_t>(rem_[i].out_reads, 1, 16)),
                      .ext = ext};
    if (!connect_qp(qps_[i], c, err)) return false;
  }
  return true;
}

bool Perf::wc_ok(const Wc& wc, const char* what, std::string& err) const {
  if (wc.status == WcStatus::kSuccess) return true;
  err = std::string(" Completion with error at ") + what + ": Failed status " + std::to_string(int(wc.status)) + " (" +
        wc_status_str(wc.status) + ") syndrom 0x" + std::to_string(wc.vendor_err) + ", QP " + std::to_string(wc.qp_num);
  return false;
}

/// Post number k (0-based, per QP) of a bw or lat requester: the local and the
/// remote address walk by addr_step(size) and wrap in the cycle buffer (bw
/// only, and only when size <= cycle/2), as perftest's increase_*_addr.
bool Perf::post_one(uint32_t qi, uint32_t size, uint64_t k, bool signaled) {
  const Verb verb = cfg_.test.verb;
  const uint64_t off = walk(size).offset(k);
  Sge sge{uint64_t(uintptr_t(send_area(qi))) + off, verb == Verb::kAtomic ? kAtomicBytes : size, mr_->lkey};
  SendWr wr;
  wr.wr_id = qi;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = signaled ? uint32_t(kSendSignaled) : 0u;
  switch (verb) {
    case Verb::kSend:
      wr.opcode = WrOpcode::kSend;
      break;
    case Verb::kWrite:
      wr.opcode = WrOpcode::kRdmaWrite;
      wr.rdma.remote_addr = rem_[qi].vaddr + off;
      wr.rdma.rkey = rem_[qi].rkey;
      break;
    case Verb::kRead:
      wr.opcode = WrOpcode::kRdmaRead;
      wr.rdma.remote_addr = rem_[qi].vaddr + off;
      wr.rdma.rkey = rem_[qi].rkey;
      break;
    case Verb::kAtomic:
      wr.opcode = cfg_.cas ? WrOpcode::kAtomicCmpAndSwp : WrOpcode::kAtomicFetchAndAdd;
      wr.atomic.remote_addr = rem_[qi].vaddr + off;
      wr.atomic.rkey = rem_[qi].rkey;
      wr.atomic.compare_add = cfg_.cas ? 0 : kAtomicAdd;
      wr.atomic.swap = kAtomicSwap;
      break;
  }
  SendWr* bad = nullptr;
  return uroce::post_send(qps_[qi], &wr, &bad).ok();
}

bool Perf::post_recv_one(uint32_t qi, uint32_t size, uint64_t k) {
  const uint64_t off = walk(size).offset(k);
  Sge sge{uint64_t(uintptr_t(recv_area(qi))) + off, size, mr_->lkey};
  RecvWr wr;
  wr.wr_id = qi;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  RecvWr* bad = nullptr;
  return uroce::post_recv(qps_[qi], &wr, &bad).ok();
}

void Perf::fill_bw(uint32_t size, uint64_t tot, bool no_peak, uint32_t cq_mod, BwReport& rep) const {
  // print_report_bw: average over the whole run, peak over every window that
  // starts at a post and ends at a signaled completion.
  const double hz = double(rte_get_tsc_hz());
  const double fmt = cfg_.gbits ? kGbFactor : kMbFactor;
  rep.size = size;
  rep.iters = tot;
  if (tot == 0) return;
  const uint64_t last = no_peak ? 0 : tot - 1;
  const double cycles = double(tcompleted_[last] - tposted_[0]);
  if (cycles <= 0) return;
  rep.bw_avg = double(size) * double(tot) * hz / (cycles * fmt);
  rep.msg_rate = double(tot) * hz / (cycles * 1e6);
  if (no_peak) return;
  const double opt = peak_window_ticks({tposted_.data(), tot}, {tcompleted_.data(), tot}, cq_mod);
  if (opt > 0) rep.bw_peak = double(size) * hz / (opt * fmt);
}

// perftest's perform_warm_up: on each QP in turn, tx-depth WRs of the first
// address, every one signaled, and all their completions reaped, so that the
// timed run starts with the memory, the caches and both engines warm.
bool Perf::warm_up(uint32_t size, std::string& err) {
  Wc wc[16];
  for (uint32_t q = 0; q < cfg_.num_qp; ++q) {
    for (uint32_t i = 0; i < cfg_.tx_depth; ++i) {
      if (!post_one(q, size, 0, true)) {
        err = "Couldn't post send during warm up: qp " + std::to_string(q) + " scnt=" + std::to_string(i);
        return false;
      }
    }
    Watchdog dog(cfg_.timeout_s);
    for (uint32_t left = cfg_.tx_depth; left;) {
      pump();
      const int ne = poll_cq(cq_, 16, wc);
      for (int i = 0; i < ne; ++i) {
        if (!wc_ok(wc[i], "warm up", err)) return false;
      }
      left -= uint32_t(ne);
      if (dog.stalled(ne > 0, err)) return false;
    }
  }
  return true;
}

bool Perf::run_bw(uint32_t size, BwReport& rep, std::string& err) {  // run_iter_bw
  const uint32_t nq = cfg_.num_qp;
  const bool dur = cfg_.duration_s > 0;
  const uint64_t iters = cfg_.iters;
  const uint64_t tot = iters * nq;
  const uint32_t cq_mod = cfg_.cq_mod;
  std::vector<uint64_t> scnt(nq, 0), ccnt(nq, 0);
  uint64_t totscnt = 0, totccnt = 0;
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t start = rte_rdtsc();
  const uint64_t end_tsc = start + uint64_t(cfg_.duration_s) * hz;
  Watchdog dog(cfg_.timeout_s);
  uint64_t dur_done = 0;
  Wc wc[16];
  // Without the peak (-N, and always with -D), only the run's first post and
  // last completion are timed, as perftest's noPeak: a TSC read and a store
  // per post cost this loop about a sixth of its 64 B message rate.
  const bool no_peak = cfg_.no_peak;
  if (no_peak) tposted_[0] = start;
  auto end_no_peak = [&] {
    if (no_peak) tcompleted_[0] = rte_rdtsc();
  };
  // -D: stop when the time is up, with WRs maybe still in flight (perftest does the same;
  // an unsignaled tail has no completion to wait for). The clock is read once a
  // pass, not once a post (a TSC read costs about 8 ns here, a third of a post).
  bool time_left = true;
  auto sending = [&](uint32_t q) { return dur ? time_left : scnt[q] < iters; };
  while (dur ? (time_left = rte_rdtsc() < end_tsc) : (totscnt < tot || totccnt < tot)) {
    bool progress = false;
    for (uint32_t q = 0; q < nq; ++q) {
      while (sending(q) && scnt[q] - ccnt[q] + 1 <= cfg_.tx_depth) {
        const bool sig = scnt[q] % cq_mod == cq_mod - 1 || (!dur && scnt[q] == iters - 1);
        if (!no_peak) tposted_[totscnt] = rte_rdtsc();
        if (!post_one(q, size, scnt[q], sig)) {
          err = "Couldn't post send: qp " + std::to_string(q) + " scnt=" + std::to_string(scnt[q]);
          return false;
        }
        ++scnt[q];
        ++totscnt;
        progress = true;
      }
    }
    pump();
    const int ne = poll_cq(cq_, 16, wc);
    for (int i = 0; i < ne; ++i) {
      if (!wc_ok(wc[i], "send", err)) return false;
      const uint32_t q = uint32_t(wc[i].wr_id);
      // A signaled WR completes cq_mod of them (the last one may complete fewer).
      const uint64_t n = std::min<uint64_t>(cq_mod, scnt[q] - ccnt[q]);
      ccnt[q] += n;
      totccnt += n;
      dur_done += n;
      if (!no_peak) tcompleted_[std::min(totccnt, tot) - 1] = rte_rdtsc();
    }
    if (dog.stalled(progress || ne > 0, err)) {
      end_no_peak();
      fill_bw(size, dur ? dur_done : std::min(totccnt, tot), no_peak, cq_mod, rep);
      return false;
    }
  }
  end_no_peak();
  fill_bw(size, dur ? dur_done : tot, no_peak, cq_mod, rep);
  return true;
}

bool Perf::post_recvs_all(uint32_t size, std::string& err) {  // ctx_set_recv_wqes
  for (uint32_t q = 0; q < cfg_.num_qp; ++q) {
    for (uint32_t j = 0; j < cfg_.rx_depth; ++j) {
      if (!post_recv_one(q, size, j)) {
        err = "Couldn't post recv Qp = " + std::to_string(q) + ": counter=" + std::to_string(j);
        return false;
      }
    }
  }
  return true;
}

bool Perf::run_bw_send_server(uint32_t size, BwReport& rep, std::string& err) {  // run_iter_bw_server
  const uint32_t nq = cfg_.num_qp;
  const bool dur = cfg_.duration_s > 0;
  const uint64_t tot = uint64_t(cfg_.iters) * nq;
  std::vector<uint64_t> posted(nq, cfg_.rx_depth);
  uint64_t rcnt = 0;
  bool first = true;
  uint64_t end_tsc = 0;
  Watchdog dog(cfg_.timeout_s);
  Wc wc[16];
  while (dur ? (first || rte_rdtsc() < end_tsc) : rcnt < tot) {
    pump();
    const int ne = poll_cq(rcq_, 16, wc);
    if (ne > 0 && first) {
      tposted_[0] = rte_rdtsc();
      end_tsc = tposted_[0] + uint64_t(cfg_.duration_s) * rte_get_tsc_hz();
      first = false;
    }
    for (int i = 0; i < ne; ++i) {
      if (!wc_ok(wc[i], "receive", err)) return false;
      const uint32_t q = uint32_t(wc[i].wr_id);
      ++rcnt;
      // The receive credits: one new receive per completion until -n were posted.
      if (dur || posted[q] + 1 <= cfg_.iters) {
        if (!post_recv_one(q, size, posted[q])) {
          err = "Couldn't post recv Qp=" + std::to_string(q);
          return false;
        }
        ++posted[q];
      }
    }
    if (dog.stalled(ne > 0, err)) {
      tcompleted_[0] = rte_rdtsc();
      fill_bw(size, rcnt, true, 1, rep);
      return false;
    }
  }
  tcompleted_[0] = rte_rdtsc();
  fill_bw(size, dur ? rcnt : tot, true, 1, rep);
  return true;
}

bool Perf::run_bi_send(uint32_t size, BwReport& rep, std::string& err) {  // run_iter_bi
  const uint32_t nq = cfg_.num_qp;
  const uint64_t iters = cfg_.iters;
  const uint64_t tot = iters * nq;
  const uint32_t cq_mod = cfg_.cq_mod;
  std::vector<uint64_t> scnt(nq, 0), ccnt(nq, 0), posted(nq, cfg_.rx_depth);
  uint64_t totscnt = 0, totccnt = 0, totrcnt = 0;
  bool before_first_rx = cfg_.server;  // the server sends once the client's first message arrived
  Watchdog dog(cfg_.timeout_s);
  Wc wc[32];
  while (totscnt < tot || totccnt < tot || totrcnt < tot) {
    bool progress = false;
    for (uint32_t q = 0; q < nq && !before_first_rx; ++q) {
      while (scnt[q] < iters && scnt[q] - ccnt[q] + 1 <= cfg_.tx_depth) {
        const bool sig = scnt[q] % cq_mod == cq_mod - 1 || scnt[q] == iters - 1;
        tposted_[totscnt] = rte_rdtsc();
        if (!post_one(q, size, scnt[q], sig)) {
          err = "Couldn't post send: qp " + std::to_string(q);
          return false;
        }
        ++scnt[q];
        ++totscnt;
        progress = true;
      }
    }
    pump();
    int ne = poll_cq(rcq_, 16, wc);
    ne += poll_cq(cq_, 16, wc + ne);
    for (int i = 0; i < ne; ++i) {
      const uint32_t q = uint32_t(wc[i].wr_id);
      if (wc[i].opcode == WcOpcode::kRecv) {
        if (!wc_ok(wc[i], "receive", err)) return false;
        before_first_rx = false;
        ++totrcnt;
        if (posted[q] + 1 <= iters) {
          if (!post_recv_one(q, size, posted[q])) {
            err = "Couldn't post recv Qp=" + std::to_string(q);
            return false;
          }
          ++posted[q];
        }
      } else {
        if (!wc_ok(wc[i], "send", err)) return false;
        const uint64_t n = std::min<uint64_t>(cq_mod, scnt[q] - ccnt[q]);
        ccnt[q] += n;
        totccnt += n;
        tcompleted_[std::min(totccnt, tot) - 1] = rte_rdtsc();
      }
    }
    if (dog.stalled(progress || ne > 0, err)) {
      fill_bw(size, std::min(totccnt, tot), false, cq_mod, rep);
      return false;
    }
  }
  fill_bw(size, tot, false, cq_mod, rep);
  return true;
}

bool Perf::run_lat(uint32_t size, LatReport& rep, std::string& err) {
  const Verb verb = cfg_.test.verb;
  const uint64_t iters = cfg_.iters;
  uint64_t scnt = 0, rcnt = 0, ccnt = 0;
  Watchdog dog(cfg_.timeout_s);
  Wc wc[4];
  auto wait_send = [&]() {  // one signaled completion
    for (;;) {
      pump();
      const int ne = poll_cq(cq_, 1, wc);
      if (ne > 0) {
        if (!wc_ok(wc[0], "send", err)) return false;
        ++ccnt;
        dog.progress();
        return true;
      }
      if (dog.stalled(false, err)) return false;
    }
  };
  bool ok = true;
  if (verb == Verb::kWrite) {  // run_iter_lat_write: poll the last byte of our slot
    volatile uint8_t* poll_buf = recv_area(0) + size - 1;
    volatile uint8_t* post_buf = send_area(0) + size - 1;
    while (ok && (scnt < iters || ccnt < iters || rcnt < iters)) {
      if (rcnt < iters && !(scnt < 1 && cfg_.server)) {
        ++rcnt;
        while (*poll_buf != uint8_t(rcnt)) {
          pump();
          if (dog.stalled(false, err)) {
            ok = false;
            break;
          }
        }
        dog.progress();
        if (!ok) break;
      }
      if (scnt < iters) {
        tposted_[scnt] = rte_rdtsc();
        *post_buf = uint8_t(++scnt);
        if (!post_one(0, size, scnt - 1, true)) {
          err = "Couldn't post send: scnt=" + std::to_string(scnt);
          ok = false;
          break;
        }
        ok = wait_send();
      }
    }
  } else if (verb == Verb::kSend) {  // run_iter_lat_send: SEND ping-pong, the client first
    while (ok && (scnt < iters || rcnt < iters)) {
      if (rcnt < iters && !(scnt < 1 && !cfg_.server)) {
        for (;;) {
          pump();
          const int ne = poll_cq(rcq_, 1, wc);
          if (ne > 0) {
            if (!wc_ok(wc[0], "receive", err)) return false;
            ++rcnt;
            dog.progress();
            if (rcnt + cfg_.rx_depth <= iters && !post_recv_one(0, size, 0)) {
              err = "Couldn't post recv: rcnt=" + std::to_string(rcnt);
              return false;
            }
            break;
          }
          if (dog.stalled(false, err)) return false;
        }
      }
      if (scnt < iters) {
        tposted_[scnt] = rte_rdtsc();
        ++scnt;
        // cq_mod is 1 in latency tests (capped at tx-depth 1): every send is signaled and waited for.
        if (!post_one(0, size, 0, true)) {
          err = "Couldn't post send: scnt=" + std::to_string(scnt);
          return false;
        }
        if (!wait_send()) return false;
      }
    }
  } else {  // run_iter_lat: READ or atomic, one at a time
    while (ok && scnt < iters) {
      tposted_[scnt++] = rte_rdtsc();
      if (!post_one(0, size, 0, true)) {
        err = "Couldn't post send: scnt=" + std::to_string(scnt);
        return false;
      }
      ok = wait_send();
    }
  }
  if (!ok) return false;
  // print_report_lat: post-to-post deltas, halved for ping-pongs.
  const double factor = mhz() * ((verb == Verb::kRead || verb == Verb::kAtomic) ? 1 : 2);
  rep = lat_report(size, std::span<const uint64_t>(tposted_.data(), iters), factor);
  return true;
}

bool Perf::save_buffer(const std::string& path, std::string& err) const {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  bool ok = f && std::fwrite(buf_, 1, buf_bytes_, f) == buf_bytes_;
  if (f && std::fclose(f) != 0) ok = false;
  if (!ok) err = "cannot write " + path + ": " + std::strerror(errno);
  return ok;
}

}  // namespace uroce::apps::perftest
