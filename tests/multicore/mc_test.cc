// tests/multicore: the engine group in one process (include/uroce/engine_group.h).
//
// A net_ring port whose queue i loops back to itself carries 2 engines, one
// per queue pair, on 2 EAL worker lcores (EngineLauncher). 8 RC QP pairs
// connect QP A_j (engine j % 2) to QP B_j (engine (j + 1) % 2) of the same
// device, so every frame comes back on its sender's queue and must be handed
// to the other engine by dispatch-by-QPN. net_ring has no RSS (and net_null,
// which emulates RSS, delivers no frames), so steering here is all software.
//   RunToCompletion  each engine lcore drives its own QPs (WRITE, READ back,
//                    FAA, CAS, SEND with imm), checks READ data and atomic
//                    results, and checks the SENDs that land on its QPs.
//   AppThread        a plain std::thread posts the same work and reaps the
//                    completions through one EngineChannel per engine while the
//                    engine lcores only poll.
// Exit 0 pass, 77 when not root (EAL), 1 fail.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rte_lcore.h>

#include <uroce/eal.h>
#include <uroce/engine_group.h>
#include <uroce/verbs.h>
#include <uroce/wr.h>

#include "apps/common/page_buffer.h"
#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/engine_launcher.h"
#include "stack/common/rng.h"

namespace uroce {
namespace {

constexpr uint32_t kEngines = 2;
constexpr uint32_t kPairs = 8;
constexpr uint32_t kRounds = 40;
constexpr uint32_t kLen = 2500;  // three packets at path MTU 1024
constexpr uint32_t kRecvs = 8;
constexpr uint64_t kSlot = 2 * 4096;

uint64_t splitmix(uint64_t x) { return splitmix64_of(x); }
uint64_t key_of(uint32_t j, uint64_t r, uint64_t kind) { return splitmix((uint64_t(j) << 40) ^ (r << 4) ^ kind); }
void fill(uint8_t* p, uint32_t len, uint64_t key) {
  for (uint32_t i = 0; i < len; ++i) p[i] = uint8_t(splitmix(key + i / 8) >> (8 * (i % 8)));
}
bool same(const uint8_t* p, uint32_t len, uint64_t key) {
  for (uint32_t i = 0; i < len; ++i) {
    if (p[i] != uint8_t(splitmix(key + i / 8) >> (8 * (i % 8)))) return false;
  }
  return true;
}

// How a driver posts and reaps: directly on the engine lcore, or through a channel.
struct Ops {
  virtual ~Ops() = default;
  virtual bool post_send(uint32_t engine, Qp* qp, SendWr* wrs, int n) = 0;
  virtual bool post_recv(uint32_t engine, Qp* qp, const RecvWr& wr) = 0;
  /// Completions of engine e's send and receive CQs; *recv tells which.
  virtual int poll(uint32_t engine, Wc* wc, bool* recv, int n) = 0;
};

struct Rig {
  std::unique_ptr<dpdk::DpdkPort> port;
  std::unique_ptr<EngineGroup> group;
  Pd* pd[kEngines] = {};
  Cq* scq[kEngines] = {};
  Cq* rcq[kEngines] = {};
  Mr* mr[kEngines] = {};
  uint32_t key = 0;
  apps::PageBuffer mem;  // page-aligned
  Qp* a[kPairs] = {};
  Qp* b[kPairs] = {};

  // Per pair j: [A's local: WRITE src | READ dst | SEND src | atomics] [B's target slot] [B's receive buffers]
  uint8_t* local(uint32_t j) { return mem.get() + j * 4 * kSlot; }
  uint8_t* target(uint32_t j) { return local(j) + kSlot; }
  uint8_t* recvbuf(uint32_t j, uint32_t r) { return local(j) + 2 * kSlot + r * (kSlot / kRecvs); }
  uint64_t* results(uint32_t j) { return reinterpret_cast<uint64_t*>(local(j) + kSlot - 64); }
  uint64_t* word(uint32_t j) { return reinterpret_cast<uint64_t*>(target(j) + kSlot - 64); }

  static uint32_t engine_a(uint32_t j) { return j % kEngines; }
  static uint32_t engine_b(uint32_t j) { return (j + 1) % kEngines; }

  void open(const char* dev) {
    dpdk::DpdkPortConfig pc;
    pc.device = dev;
    pc.n_queues = kEngines;
    pc.mtu = 1500;
    auto p = dpdk::DpdkPort::open(pc);
    ASSERT_TRUE(p.ok()) << p.status().message();
    port = std::move(p).value();
    std::vector<PacketIo*> qs;
    for (uint16_t q = 0; q < kEngines; ++q) qs.push_back(&port->queue(q));
    DeviceConfig dc;
    dc.mac = MacAddr{{0x02, 0, 0, 0, 0x09, 0x01}};  // net_ring's own MAC is not a unicast address
    const uint8_t ip[4] = {10, 9, 0, 1};
    dc.gid = Gid::from_ipv4(ip);
    dc.max_qp = 32;
    auto g = EngineGroup::open(qs, dc);
    ASSERT_TRUE(g.ok()) << g.status().message();
    group = std::move(g).value();
    const size_t total = kPairs * 4 * kSlot;
    mem = apps::page_buffer(total);
    std::memset(mem.get(), 0, total);
    for (uint32_t e = 0; e < kEngines; ++e) {
      auto new_pd = alloc_pd(group->engine(e));
      auto new_scq = create_cq(group->engine(e), 4096);
      auto new_rcq = create_cq(group->engine(e), 4096);
      ASSERT_TRUE(new_pd.ok() && new_scq.ok() && new_rcq.ok());
      pd[e] = *new_pd;
      scq[e] = *new_scq;
      rcq[e] = *new_rcq;
    }
    auto k = group->reg_mr_all(pd, mem.get(), total,
                               kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic, mr);
    ASSERT_TRUE(k.ok()) << k.status().message();
    key = *k;
    for (uint32_t j = 0; j < kPairs; ++j) {
      for (int side = 0; side < 2; ++side) {
        const uint32_t e = side == 0 ? engine_a(j) : engine_b(j);
        QpInitAttr ia;
        ia.send_cq = scq[e];
        ia.recv_cq = rcq[e];
        ia.cap.max_send_wr = 64;
        ia.cap.max_recv_wr = kRecvs;
        auto q = group->create_qp(pd[e], ia);
        ASSERT_TRUE(q.ok()) << q.status().message();
        ASSERT_EQ(group->engine_of((*q)->qp_num), e);
        (side == 0 ? a[j] : b[j]) = *q;
      }
    }
    AhAttr ah;
    ah.dgid = dc.gid;
    ah.dmac = dc.mac;
    for (uint32_t j = 0; j < kPairs; ++j) {
      connect(a[j], b[j]->qp_num, ah);
      connect(b[j], a[j]->qp_num, ah);
    }
  }

  void connect(Qp* q, uint32_t dest, const AhAttr& ah) {
    QpAttr x;
    x.qp_state = QpState::kInit;
    x.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    ASSERT_TRUE(modify_qp(q, x, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags).ok());
    x = {};
    x.qp_state = QpState::kRtr;
    x.path_mtu = Mtu::k1024;
    x.dest_qp_num = dest;
    x.rq_psn = dest * 7 & 0xffffff;
    x.ah_attr = ah;
    x.max_dest_rd_atomic = 16;
    x.min_rnr_timer = 1;
    ASSERT_TRUE(modify_qp(q, x, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer).ok());
    x = {};
    x.qp_state = QpState::kRts;
    x.sq_psn = q->qp_num * 7 & 0xffffff;
    x.timeout = 14;
    x.retry_cnt = 7;
    x.rnr_retry = 7;
    x.max_rd_atomic = 16;
    ASSERT_TRUE(modify_qp(q, x, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic).ok());
  }
};

// The workload of the QP pairs one actor drives (the A sides it posts on and
// the B sides whose receives it reaps). step() does one round of posting and
// reaping; done() when every round of its A QPs and every SEND to its B QPs
// has been verified.
class Driver {
 public:
  Driver(Rig& rig, Ops& ops, std::vector<uint32_t> engines) : rig_(rig), ops_(ops), engines_(std::move(engines)) {
    for (uint32_t j = 0; j < kPairs; ++j) {
      if (mine(Rig::engine_a(j))) as_.push_back(j);
      if (mine(Rig::engine_b(j))) bs_.push_back(j);
    }
  }
  bool mine(uint32_t e) const { return std::find(engines_.begin(), engines_.end(), e) != engines_.end(); }

  bool start() {
    for (uint32_t j : bs_) {
      for (uint32_t r = 0; r < kRecvs; ++r) {
        if (!repost(j, r)) return false;
      }
    }
    return true;
  }

  void step() {
    for (uint32_t j : as_) {
      if (outstanding_[j] == 0 && round_[j] < kRounds) post_round(j);
    }
    for (uint32_t e : engines_) {
      Wc wc[32];
      bool recv[32];
      const int n = ops_.poll(e, wc, recv, 32);
      for (int i = 0; i < n; ++i) recv[i] ? on_recv(wc[i]) : on_send(wc[i]);
    }
  }

  bool done() const {
    for (uint32_t j : as_) {
      if (round_[j] < kRounds) return false;
    }
    for (uint32_t j : bs_) {
      if (recvd_[j] < kRounds) return false;
    }
    return true;
  }
  const std::string& error() const { return error_; }

 private:
  bool repost(uint32_t j, uint32_t r) {
    Sge sge{uint64_t(uintptr_t(rig_.recvbuf(j, r))), kLen, rig_.key};
    RecvWr wr;
    wr.wr_id = (uint64_t(j) << 8) | r;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ops_.post_recv(Rig::engine_b(j), rig_.b[j], wr);
  }

  void post_round(uint32_t j) {
    const uint64_t r = round_[j];
    uint8_t* src = rig_.local(j);
    fill(src, kLen, key_of(j, r, 1));
    std::memset(src + kLen, 0, kLen);
    uint8_t* ssrc = src + 2 * kLen;
    fill(ssrc, kLen, key_of(j, r, 2));
    uint64_t* res = rig_.results(j);
    res[0] = res[1] = ~0ull;
    const uint64_t remote = uint64_t(uintptr_t(rig_.target(j)));
    const uint64_t word = uint64_t(uintptr_t(rig_.word(j)));
    const uint64_t add = key_of(j, r, 3) & 0xffff;
    cas_expect_[j] = faa_expect_[j] + add;
    Sge sg[5] = {{uint64_t(uintptr_t(src)), kLen, rig_.key},
                 {uint64_t(uintptr_t(src + kLen)), kLen, rig_.key},
                 {uint64_t(uintptr_t(&res[0])), 8, rig_.key},
                 {uint64_t(uintptr_t(&res[1])), 8, rig_.key},
                 {uint64_t(uintptr_t(ssrc)), kLen, rig_.key}};
    const uint64_t id = uint64_t(j) << 8;
    SendWr w[5] = {write_wr(id | 0, &sg[0], remote, rig_.key).signaled(),
                   read_wr(id | 1, &sg[1], remote, rig_.key).signaled(),
                   fetch_add_wr(id | 2, &sg[2], word, rig_.key, add).signaled(),
                   cmp_swap_wr(id | 3, &sg[3], word, rig_.key, cas_expect_[j], key_of(j, r, 4)).signaled(),
                   send_imm_wr(id | 4, &sg[4], uint32_t((j << 16) | r)).signaled()};
    if (ops_.post_send(Rig::engine_a(j), rig_.a[j], w, 5)) outstanding_[j] = 5;
    else fail("post_send failed", j);
  }

  void on_send(const Wc& wc) {
    const uint32_t j = uint32_t(wc.wr_id >> 8);
    if (wc.status != WcStatus::kSuccess) return fail(wc_status_str(wc.status), j);
    if (--outstanding_[j]) return;
    const uint64_t r = round_[j];
    if (!same(rig_.local(j) + kLen, kLen, key_of(j, r, 1))) return fail("READ data differs", j);
    if (rig_.results(j)[0] != faa_expect_[j]) return fail("FAA result", j);
    if (rig_.results(j)[1] != cas_expect_[j]) return fail("CAS result", j);
    faa_expect_[j] = key_of(j, r, 4);
    ++round_[j];
  }

  void on_recv(const Wc& wc) {
    const uint32_t j = uint32_t(wc.wr_id >> 8), slot = uint32_t(wc.wr_id & 0xff);
    if (wc.status != WcStatus::kSuccess || !(wc.wc_flags & kWcWithImm) || wc.byte_len != kLen) {
      return fail("bad receive", j);
    }
    if (wc.imm_data != ((j << 16) | recvd_[j]) || !same(rig_.recvbuf(j, slot), kLen, key_of(j, recvd_[j], 2))) {
      return fail("SEND data or imm differs", j);
    }
    ++recvd_[j];
    if (!repost(j, slot)) fail("post_recv failed", j);
  }

  void fail(const char* what, uint32_t j) {
    if (error_.empty()) error_ = std::string(what) + " on pair " + std::to_string(j);
  }

  Rig& rig_;
  Ops& ops_;
  std::vector<uint32_t> engines_;
  std::vector<uint32_t> as_, bs_;
  uint32_t outstanding_[kPairs] = {};
  uint64_t round_[kPairs] = {};
  uint64_t recvd_[kPairs] = {};
  uint64_t faa_expect_[kPairs] = {};
  uint64_t cas_expect_[kPairs] = {};
  std::string error_;
};

// ---------------------------------------------------------------- run-to-completion on engine lcores

struct DirectOps final : Ops {
  explicit DirectOps(Rig& r) : rig(r) {}
  bool post_send(uint32_t, Qp* qp, SendWr* wrs, int n) override {
    for (int i = 0; i + 1 < n; ++i) wrs[i].next = &wrs[i + 1];
    SendWr* bad = nullptr;
    return uroce::post_send(qp, wrs, &bad).ok();
  }
  bool post_recv(uint32_t, Qp* qp, const RecvWr& wr) override {
    RecvWr w = wr;
    RecvWr* bad = nullptr;
    return uroce::post_recv(qp, &w, &bad).ok();
  }
  int poll(uint32_t e, Wc* wc, bool* recv, int n) override {
    int k = poll_cq(rig.scq[e], n, wc);
    for (int i = 0; i < k; ++i) recv[i] = false;
    const int m = poll_cq(rig.rcq[e], n - k, wc + k);
    for (int i = k; i < k + m; ++i) recv[i] = true;
    return k + m;
  }
  Rig& rig;
};

void expect_both_engines_carried_traffic(Rig& rig) {
  for (uint32_t e = 0; e < kEngines; ++e) {
    const Counters& c = query_counters(rig.group->engine(e));
    const EngineStats& s = rig.group->stats(e);
    std::printf("engine e=%u rx_pkts=%llu sent_pkts=%llu fwd_out=%llu fwd_in=%llu fwd_drop=%llu chan_posts=%llu chan_cqes=%llu\n",
                e, (unsigned long long)c.get(Counter::rcvd_pkts), (unsigned long long)c.get(Counter::sent_pkts),
                (unsigned long long)s.fwd_out, (unsigned long long)s.fwd_in, (unsigned long long)s.fwd_drop,
                (unsigned long long)s.chan_posts, (unsigned long long)s.chan_cqes);
    EXPECT_GT(c.get(Counter::sent_pkts), 0u) << "engine " << e;
    EXPECT_GT(s.fwd_out, 0u) << "engine " << e;  // every frame comes back on the sender's queue
    EXPECT_GT(s.fwd_in, 0u) << "engine " << e;
  }
}

TEST(Multicore, RunToCompletionTwoEnginesDispatchByQpn) {
  Rig rig;
  ASSERT_NO_FATAL_FAILURE(rig.open("net_ring_mc0"));
  DirectOps ops(rig);
  std::vector<std::unique_ptr<Driver>> drivers;
  for (uint32_t e = 0; e < kEngines; ++e) drivers.push_back(std::make_unique<Driver>(rig, ops, std::vector<uint32_t>{e}));
  std::atomic<uint32_t> finished{0};
  dpdk::EngineLauncher launcher(*rig.group);
  const auto lcores = dpdk::EngineLauncher::worker_lcores(kEngines);
  ASSERT_EQ(lcores.size(), kEngines);
  ASSERT_TRUE(launcher
                  .start(lcores,
                         [&](uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop) {
                           Driver& d = *drivers[e];
                           if (!d.start()) return 1;
                           while (!stop.load(std::memory_order_relaxed) && !d.done() && d.error().empty()) {
                             rig.group->poll(e, clock.now_ns());
                             d.step();
                           }
                           finished.fetch_add(1);
                           // Keep serving the peer engine's QPs (ACKs, READ responses).
                           while (!stop.load(std::memory_order_relaxed)) rig.group->poll(e, clock.now_ns());
                           return 0;
                         })
                  .ok());
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finished.load() < kEngines && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(launcher.stop().ok());
  for (auto& d : drivers) {
    EXPECT_TRUE(d->error().empty()) << d->error();
    EXPECT_TRUE(d->done());
  }
  expect_both_engines_carried_traffic(rig);
}

// ---------------------------------------------------------------- application thread through channels

struct ChannelOps final : Ops {
  explicit ChannelOps(Rig& r) : rig(r) {}
  bool post_send(uint32_t e, Qp* qp, SendWr* wrs, int n) override {
    for (int i = 0; i < n; ++i) {
      Status s;
      while ((s = ch[e]->post_send(qp, wrs[i])).code() == StatusCode::kResourceExhausted) std::this_thread::yield();
      if (!s.ok()) return false;
    }
    return true;
  }
  bool post_recv(uint32_t e, Qp* qp, const RecvWr& wr) override {
    Status s;
    while ((s = ch[e]->post_recv(qp, wr)).code() == StatusCode::kResourceExhausted) std::this_thread::yield();
    return s.ok();
  }
  int poll(uint32_t e, Wc* wc, bool* recv, int n) override {
    ChannelWc out[32];
    const int k = ch[e]->poll_cq(out, std::min(n, 32));
    for (int i = 0; i < k; ++i) {
      wc[i] = out[i].wc;
      recv[i] = out[i].cq == rig.rcq[e];
    }
    return k;
  }
  Rig& rig;
  std::unique_ptr<EngineChannel> ch[kEngines];
};

TEST(Multicore, AppThreadThroughSpscChannels) {
  Rig rig;
  ASSERT_NO_FATAL_FAILURE(rig.open("net_ring_mc1"));
  ChannelOps ops(rig);
  for (uint32_t e = 0; e < kEngines; ++e) {
    ops.ch[e] = std::make_unique<EngineChannel>();
    ops.ch[e]->watch_cq(rig.scq[e]);
    ops.ch[e]->watch_cq(rig.rcq[e]);
    rig.group->attach(e, *ops.ch[e]);
  }
  dpdk::EngineLauncher launcher(*rig.group);
  ASSERT_TRUE(launcher.start(dpdk::EngineLauncher::worker_lcores(kEngines)).ok());  // engines only poll
  std::string error;
  bool done = false;
  std::thread app([&] {  // not an EAL lcore: touches only the channels
    Driver d(rig, ops, {0, 1});
    if (!d.start()) {
      error = "post_recv through the channel failed";
      return;
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!d.done() && d.error().empty() && std::chrono::steady_clock::now() < end) d.step();
    error = d.error();
    done = d.done();
  });
  app.join();
  ASSERT_TRUE(launcher.stop().ok());
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_TRUE(done);
  expect_both_engines_carried_traffic(rig);
  for (uint32_t e = 0; e < kEngines; ++e) {
    EXPECT_GT(rig.group->stats(e).chan_posts, 0u);
    EXPECT_GT(rig.group->stats(e).chan_cqes, 0u);
  }
}

TEST(Multicore, ChannelRejectsBadWorkRequestAsCompletion) {
  // A WR the engine's post_send refuses (bad opcode) comes back as a
  // kLocQpOpErr completion, not silently lost. Driven on this thread: the
  // engine step is EngineGroup::poll, called here (run-to-completion).
  Rig rig;
  ASSERT_NO_FATAL_FAILURE(rig.open("net_ring_mc2"));
  auto ch = std::make_unique<EngineChannel>();
  ch->watch_cq(rig.scq[0]);
  rig.group->attach(0, *ch);
  SendWr wr;
  wr.wr_id = 42;
  wr.opcode = WrOpcode(8);  // unused opcode value
  ASSERT_TRUE(ch->post_send(rig.a[0], wr).ok());
  rig.group->poll(0, 0);
  ChannelWc out[4];
  ASSERT_EQ(ch->poll_cq(out, 4), 1);
  EXPECT_EQ(out[0].wc.wr_id, 42u);
  EXPECT_EQ(out[0].wc.status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(out[0].wc.vendor_err, uint32_t(StatusCode::kInvalidArgument));
  Sge sges[EngineChannel::kMaxSge + 1] = {};
  wr.sg_list = sges;
  wr.num_sge = EngineChannel::kMaxSge + 1;
  EXPECT_EQ(ch->post_send(rig.a[0], wr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace uroce

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (geteuid() != 0) {
    std::printf("SKIP: EAL needs root here\n");
    return 77;
  }
  // Main lcore + 2 engine lcores floating over whatever CPUs there are.
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  const std::string lcores = "--lcores=(0-2)@(0-" + std::to_string(cpus - 1) + ")";
  if (!uroce::init_eal({"--no-huge", "--no-pci", "--no-shconf", "-m", "512", "--log-level=lib.*:error", lcores}).ok()) {
    return 1;
  }
  return RUN_ALL_TESTS();
}
