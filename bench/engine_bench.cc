// CPU cost of the whole stack per RC RDMA WRITE: requester, responder and
// completer of two uroce devices in one thread, joined back to back by two
// in-memory rings of mbufs (the cheapest possible wire, so what is timed is
// the stack: post_send, the requester's frame building and ICRC, poll, parse
// and ICRC check, the responder's checks, placement and ACK, the completer,
// poll_cq). The clock is virtual (100 ns per engine round), so no timer ever
// fires. Unlike the two-process runs of `uroce compare`, this is CPU time on
// one core and does not depend on how the other processes on a shared
// machine are scheduled.
//
//   engine/write/<bytes>/<depth>  WRITEs of <bytes> (path MTU 4096), <depth>
//                                 in flight on one QP, every 16th signaled
//   engine/qps/<qps>/<depth>      64-byte WRITEs, <depth> in flight on each of
//                                 <qps> QPs (bench-mc's many-QP workload)
//   engine/group/<engines>        bench-mc's load of one engine (8 QPs, 32
//                                 64-byte WRITEs in flight on each) on engine 0
//                                 of an EngineGroup of <engines> a side, the
//                                 others idle and not polled: what belonging to
//                                 a group costs an engine (each frame's DestQP
//                                 peek and owner, the empty rings from the
//                                 others), with one engine's working set
//   engine/idle                   one poll of a device with a connected QP and
//                                 nothing to receive or send: what a poll-mode
//                                 loop pays between frames, and so the
//                                 granularity at which it sees the next one
//
// items_per_second is WRITEs per CPU second for both sides together and
// ns_per_write its inverse (the time column is per engine round, which
// means little); ack_per_write counts the ACKs the responder sent per WRITE.
#include <benchmark/benchmark.h>

#include <rte_mbuf.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include <uroce/eal.h>
#include <uroce/engine_group.h>
#include <uroce/packet_io.h>
#include <uroce/verbs.h>
#include <uroce/wr.h>

namespace {

using namespace uroce;

// One direction of the wire: a bounded FIFO of mbufs.
struct Fifo {
  std::vector<rte_mbuf*> slots = std::vector<rte_mbuf*>(4096);
  uint32_t head = 0, tail = 0;
};

// A port whose tx_burst appends to the peer's FIFO and whose rx_burst drains its own.
class RingPort : public PacketIo {
 public:
  RingPort(MacAddr mac, rte_mempool* pool, Fifo* in, Fifo* out) : mac_(mac), pool_(pool), in_(in), out_(out) {}
  uint16_t rx_burst(rte_mbuf** m, uint16_t n) override {
    uint16_t k = 0;
    for (; k < n && in_->tail != in_->head; ++k) m[k] = in_->slots[in_->tail++ % in_->slots.size()];
    return k;
  }
  uint16_t tx_burst(rte_mbuf** m, uint16_t n) override {
    uint16_t k = 0;
    for (; k < n && out_->head - out_->tail < out_->slots.size(); ++k) out_->slots[out_->head++ % out_->slots.size()] = m[k];
    return k;
  }
  rte_mempool* tx_pool() override { return pool_; }
  IoCaps caps() const override { return IoCaps{.mtu = 4200, .rx_icrc_checked = false, .tx_multiseg = false}; }
  MacAddr mac() const override { return mac_; }

 private:
  MacAddr mac_;
  rte_mempool* pool_;
  Fifo* in_;
  Fifo* out_;
};

bool g_failed = false;  // a WRITE completed in error: the run (and the bench suite's smoke test) fails

void must(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "engine_bench: %s: %s\n", what, std::string(s.message()).c_str());
    std::exit(1);
  }
}
template <typename T>
T must(Result<T> r, const char* what) {
  must(r.status(), what);
  return std::move(r).value();
}

struct End {
  MacAddr mac;
  Gid gid;
  std::vector<std::unique_ptr<RingPort>> ports;  // ports[0] is the wire; the others idle (groups)
  ContextPtr own;                                // the device, or
  std::unique_ptr<EngineGroup> group;            // the group whose engine 0 carries the QPs
  Context* ctx = nullptr;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  std::vector<Qp*> qps;
  Mr* mr = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 20);
};

// Two devices with n_qps connected RC QPs each (a sends, b receives); with
// n_engines > 0 each device is an EngineGroup of that many engines and the
// QPs are engine 0's.
struct Rig {
  Fifo ab, ba;
  Fifo idle;  // the idle engines' queues, in and out: they are never polled
  End a, b;
  uint64_t now = 1'000'000;

  Rig(uint32_t n_qps, uint32_t sq_depth, uint32_t n_engines = 0) {
    static rte_mempool* pool_a = must(create_frame_pool("engine_bench_a", 8191), "pool");
    static rte_mempool* pool_b = must(create_frame_pool("engine_bench_b", 8191), "pool");
    End* ends[2] = {&a, &b};
    for (uint8_t i = 0; i < 2; ++i) {
      End& e = *ends[i];
      e.mac = MacAddr{{0x02, 0, 0, 0, 0, uint8_t(i + 1)}};
      const uint8_t v4[4] = {10, 0, 0, uint8_t(i + 1)};
      e.gid = Gid::from_ipv4(v4);
      rte_mempool* pool = i == 0 ? pool_a : pool_b;
      e.ports.push_back(std::make_unique<RingPort>(e.mac, pool, i == 0 ? &ba : &ab, i == 0 ? &ab : &ba));
      for (uint32_t k = 1; k < n_engines; ++k) e.ports.push_back(std::make_unique<RingPort>(e.mac, pool, &idle, &idle));
      DeviceConfig cfg;
      cfg.gid = e.gid;
      cfg.max_qp = n_qps;
      if (n_engines == 0) {
        e.own = must(open_device(*e.ports[0], cfg), "open_device");
        e.ctx = e.own.get();
      } else {
        std::vector<PacketIo*> queues;
        for (auto& p : e.ports) queues.push_back(p.get());
        e.group = must(EngineGroup::open(queues, cfg), "EngineGroup::open");
        e.ctx = e.group->engine(0);
      }
      e.pd = must(alloc_pd(e.ctx), "alloc_pd");
      e.cq = must(create_cq(e.ctx, std::max(4096u, n_qps * sq_depth)), "create_cq");
      e.mr = must(reg_mr(e.pd, e.buf.data(), e.buf.size(), kAccessLocalWrite | kAccessRemoteWrite), "reg_mr");
      QpInitAttr ia;
      ia.send_cq = e.cq;
      ia.recv_cq = e.cq;
      ia.qp_type = QpType::kRc;
      ia.cap.max_send_wr = sq_depth;
      ia.cap.max_recv_wr = 16;
      ia.cap.max_send_sge = 1;
      ia.cap.max_recv_sge = 1;
      for (uint32_t q = 0; q < n_qps; ++q) {
        e.qps.push_back(must(e.group ? e.group->create_qp(e.pd, ia) : create_qp(e.pd, ia), "create_qp"));
      }
    }
    for (uint32_t q = 0; q < n_qps; ++q) connect(q);
  }
  void connect(uint32_t q) {
    End* ends[2] = {&a, &b};
    for (uint8_t i = 0; i < 2; ++i) {
      End& e = *ends[i];
      End& peer = *ends[1 - i];
      Qp* qp = e.qps[q];
      QpAttr at;
      at.qp_state = QpState::kInit;
      at.qp_access_flags = kAccessRemoteWrite;
      must(modify_qp(qp, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), "INIT");
      at.qp_state = QpState::kRtr;
      at.path_mtu = Mtu::k4096;
      at.dest_qp_num = peer.qps[q]->qp_num;
      at.rq_psn = 0x100;
      at.max_dest_rd_atomic = 1;
      at.min_rnr_timer = 1;
      at.ah_attr.dgid = peer.gid;
      at.ah_attr.dmac = peer.mac;
      must(modify_qp(qp, at,
                     kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer),
           "RTR");
      at.qp_state = QpState::kRts;
      at.sq_psn = 0x100;
      at.timeout = 14;
      at.retry_cnt = 7;
      at.rnr_retry = 7;
      at.max_rd_atomic = 1;
      must(modify_qp(qp, at, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic),
           "RTS");
    }
  }
  void step() {
    now += 100;
    for (End* e : {&a, &b}) {
      if (e->group) {
        e->group->poll(0, now);
      } else {
        poll(e->ctx, now);
      }
    }
  }
};

// WRITEs of `size` bytes, `depth` in flight on each of `n_qps` QPs; every
// WRITE signaled where depth < 16 (a QP's next WRITE waits for a completion),
// else every 16th.
void run_writes(benchmark::State& state, uint32_t size, uint32_t n_qps, uint32_t depth, uint32_t engines = 0) {
  const uint32_t signal_every = std::min<uint32_t>(16, depth);
  Rig rig(n_qps, depth, engines);
  Sge g{uint64_t(uintptr_t(rig.a.buf.data())), size, rig.a.mr->lkey};
  SendWr wr = write_wr(0, &g, uint64_t(uintptr_t(rig.b.buf.data())), rig.b.mr->rkey);
  // Per QP: WRITEs posted and completed. wr_id = QP << 32 | its WRITE number.
  std::vector<uint64_t> posted(n_qps, 0), completed(n_qps, 0);
  std::vector<uint32_t> refill;  // QPs with room, in the order they got it
  for (uint32_t q = 0; q < n_qps; ++q) refill.push_back(q);
  uint64_t done = 0;
  Wc wc[32];
  // One round: top up the QPs that have room, one engine round per side, reap.
  auto round = [&] {
    for (uint32_t q : refill) {
      while (posted[q] - completed[q] < depth) {
        wr.wr_id = uint64_t(q) << 32 | uint32_t(posted[q]);
        wr.send_flags = posted[q] % signal_every == signal_every - 1 ? kSendSignaled : 0u;
        if (!post_send(rig.a.qps[q], &wr, nullptr).ok()) break;
        ++posted[q];
      }
    }
    refill.clear();
    rig.step();
    for (int n; (n = poll_cq(rig.a.cq, 32, wc)) > 0;) {
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != WcStatus::kSuccess) return false;
        const uint32_t q = uint32_t(wc[i].wr_id >> 32);
        const uint64_t upto = (completed[q] & ~uint64_t(UINT32_MAX)) | uint32_t(wc[i].wr_id);
        done += upto + 1 - completed[q];
        completed[q] = upto + 1;
        refill.push_back(q);
      }
    }
    return true;
  };
  // Untimed: fill every QP's window and run until a window's worth of WRITEs
  // has completed, so the timed rounds see the steady state, not the first
  // post of n_qps x depth WRs (half a million with 16,000 QPs at depth 32).
  bool ok = true;
  while (ok && done < uint64_t(n_qps) * depth) ok = round();
  const uint64_t done0 = done;
  const uint64_t acks0 = query_counters(rig.b.ctx).get(Counter::ack_sent);
  for (auto _ : state) {
    if (ok) ok = round();
    if (!ok) {
      state.SkipWithError("a WRITE failed");
      g_failed = true;
      return;
    }
  }
  const uint64_t timed = done - done0;
  if (timed == 0 && state.iterations() >= 1000) {  // a WRITE completes within a few engine rounds
    state.SkipWithError("no WRITE completed");
    g_failed = true;
    return;
  }
  state.SetItemsProcessed(int64_t(timed));
  state.counters["ns_per_write"] =
      benchmark::Counter(double(timed) * 1e-9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  const uint64_t acks = query_counters(rig.b.ctx).get(Counter::ack_sent) - acks0;
  state.counters["ack_per_write"] = timed ? double(acks) / double(timed) : 0;
  // Let what is in flight finish so the pools are whole for the next case.
  const uint64_t all = std::accumulate(posted.begin(), posted.end(), uint64_t(0));
  for (int i = 0; i < 100'000 && done < all; ++i) {
    refill.clear();
    if (!round()) break;
  }
}

void bm_write(benchmark::State& state) { run_writes(state, uint32_t(state.range(0)), 1, uint32_t(state.range(1))); }
void bm_qps(benchmark::State& state) { run_writes(state, 64, uint32_t(state.range(0)), uint32_t(state.range(1))); }
void bm_group(benchmark::State& state) { run_writes(state, 64, 8, 32, uint32_t(state.range(0))); }

void bm_idle(benchmark::State& state) {
  Rig rig(1, 32);
  for (auto _ : state) {
    rig.now += 100;
    if (poll(rig.a.ctx, rig.now) != 0) {
      state.SkipWithError("an idle device received or sent a frame");
      g_failed = true;
      return;
    }
  }
}

}  // namespace

BENCHMARK(bm_write)->Name("engine/write")->Args({64, 32})->Args({64, 128})->Args({4096, 32})->Args({65536, 16})
    ->MeasureProcessCPUTime()->Unit(benchmark::kNanosecond);
BENCHMARK(bm_qps)->Name("engine/qps")->Args({1, 1})->Args({1000, 1})->Args({16000, 1})->Args({1000, 4})
    ->Args({1, 32})->Args({1000, 32})->Args({16000, 32})
    ->MeasureProcessCPUTime()->Unit(benchmark::kNanosecond);
BENCHMARK(bm_group)->Name("engine/group")->Arg(1)->Arg(2)->Arg(8)
    ->MeasureProcessCPUTime()->Unit(benchmark::kNanosecond);
BENCHMARK(bm_idle)->Name("engine/idle")->MeasureProcessCPUTime()->Unit(benchmark::kNanosecond);

int main(int argc, char** argv) {
  must(init_eal(), "init_eal");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return g_failed ? 1 : 0;
}
