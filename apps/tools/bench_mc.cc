// `uroce bench-mc`: the multi-core engine (include/uroce/engine_group.h) end
// to end, two processes on a net_memif link with --engines queue pairs, one
// engine lcore per queue on each side (EngineLauncher), --qps RC QPs spread
// over the engines.
//
// By default the command is a launcher: it makes a temp dir, starts itself
// twice (--role server, then --role client once the memif socket exists), each
// with its own EAL: lcores 0..N, lcore 0 the main lcore (control, reports),
// 1..N the engines; pinned to distinct CPUs when the machine has 2N of them,
// else all floating over every CPU (correct, but the rate then measures the
// scheduler). The endpoints swap QPNs, PSNs, keys and addresses through
// files in the temp dir (written whole, then renamed).
//
//   workload rate    the client's engines keep --depth 64 B (--size) RDMA
//                    WRITEs in flight on each of their QPs, run-to-completion
//                    on the engine lcores; after --warmup s the aggregate
//                    completion rate over --seconds s is the message rate.
//   workload verify  each client QP runs --rounds rounds of WRITE, READ back,
//                    SEND with imm, WRITE with imm, FAA and CAS (--size bytes,
//                    multi-packet above the path MTU); the client checks READ
//                    data and atomic results, the server each received SEND and
//                    WRITE-imm payload and immediate. Exit 0 only if all verify.
//                    With --duration S the rounds run for S seconds instead
//                    (the soak, docs/ROBUSTNESS.md), and both sides end by
//                    checking that every mbuf is back in its pool, every QP
//                    is in RTS with nothing outstanding and the RSS did not
//                    grow after the first minute. --drop-every N loses every
//                    Nth frame each queue transmits (drivers/dpdk/fault_io.h).
// --placement aligned puts QP j on engine j % N at both ends (memif queue i
// meets the peer's queue i: no frame changes engine); cross puts the client's
// QP j on engine (j + j / N) % N, so frames of half the QPs arrive on another
// engine's queue at both ends and go through dispatch-by-QPN.
//
// Output: the config echo, one line per engine per side ("engine side=S e=E
// polls= rx_pkts= sent_pkts= fwd_out= fwd_in= fwd_drop= msgs="), then the
// perftest-style result row. Exit: 0 pass, 1 failure, 2 usage.
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

#include "apps/commands.h"
#include "apps/common/args.h"
#include "apps/common/endpoint.h"
#include "apps/common/launch.h"
#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/eal_args.h"
#include "drivers/dpdk/engine_launcher.h"
#include "drivers/dpdk/fault_io.h"

namespace uroce::apps {
namespace {

constexpr OptSpec kOptions[] = {
    {.name = "role", .kind = OptKind::kChoice, .def = "launch", .help = "launch: start a server and a client on a memif link; or be one endpoint", .choices = "launch|server|client"},
    {.name = "dir", .kind = OptKind::kString, .def = "", .help = "with --role: the directory of the memif socket and the exchange files", .meta = "DIR"},
    {.name = "engines", .short_name = 'n', .kind = OptKind::kUint, .def = "1", .help = "engine lcores (= memif queue pairs) per side", .min = 1, .max = 64},
    {.name = "qps", .short_name = 'q', .kind = OptKind::kUint, .def = "8", .help = "RC QPs per side", .min = 1, .max = 16384},
    {.name = "workload", .kind = OptKind::kChoice, .def = "rate", .help = "rate: 64 B WRITE message rate; verify: every RC op, checked", .choices = "rate|verify"},
    {.name = "placement", .kind = OptKind::kChoice, .def = "aligned", .help = "aligned: QP j on engine j%N both sides; cross: client QPs shifted (dispatch by QPN)", .choices = "aligned|cross"},
    {.name = "size", .short_name = 's', .kind = OptKind::kUint, .def = "64", .help = "message bytes (rate: WRITE size; verify: every op's size)", .min = 1, .max = 1u << 20},
    {.name = "depth", .short_name = 'd', .kind = OptKind::kUint, .def = "32", .help = "rate: WRITEs in flight per QP", .min = 1, .max = 512},
    {.name = "seconds", .kind = OptKind::kDouble, .def = "3", .help = "rate: measured interval, s", .min = 0, .max = 3600},
    {.name = "warmup", .kind = OptKind::kDouble, .def = "1", .help = "rate: unmeasured start, s", .min = 0, .max = 3600},
    {.name = "rounds", .kind = OptKind::kUint, .def = "50", .help = "verify: rounds of the six ops per QP", .min = 1, .max = 1u << 20},
    {.name = "duration", .kind = OptKind::kDouble, .def = "0", .help = "verify: run rounds for this many seconds instead of --rounds, then check mbufs, QP states and RSS (the soak; 0: --rounds)", .min = 0, .max = 86400},
    {.name = "drop-every", .kind = OptKind::kUint, .def = "0", .help = "test hook: lose every Nth frame each engine queue transmits (0: none)", .max = 1u << 30},
    {.name = "timeout", .kind = OptKind::kUint, .def = "60", .help = "give up after this many seconds of no progress", .min = 1, .max = 3600},
    {.name = "lcore-map", .kind = OptKind::kChoice, .def = "auto", .help = "launch: pin engine lcores to CPUs, float them over all CPUs, or auto (pin if 2N CPUs)", .choices = "auto|pin|float"},
};

constexpr CommandSpec kCommand = {
    .name = "bench-mc",
    .positional = "",
    .summary = "multi-core engines: N engine lcores per side on memif, message rate or verified RC ops",
    .options = kOptions,
    .max_positional = 0,
    .details = "EAL arguments may precede '--'; the launcher then passes them to both endpoints\n"
               "instead of its defaults (--no-huge --no-pci --no-shconf -m 1024), and the lcore map\n"
               "(lcores 0..N, see --lcore-map) unless they give -l, -c or --lcores.\n",
};


// ---------------------------------------------------------------- config, patterns

struct Config {
  bool server = false;
  std::string dir;
  uint32_t engines = 1;
  uint32_t qps = 8;
  bool verify = false;
  bool cross = false;
  uint32_t size = 64;
  uint32_t depth = 32;
  double seconds = 3;
  double warmup = 1;
  uint32_t rounds = 50;
  double duration_s = 0;    // verify: > 0 runs rounds for this long (soak) instead of `rounds`
  uint32_t drop_every = 0;  // DropEveryNthIo on every queue
  uint32_t timeout_s = 60;
};

// Resident set size of this process in KiB (/proc/self/statm), 0 if unreadable.
uint64_t rss_kib() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return f ? resident * uint64_t(sysconf(_SC_PAGESIZE)) / 1024 : 0;
}

// Soak: RSS samples of one process, every 10 s of its main thread's waiting.
struct RssLog {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), next = start;
  uint64_t first = 0, at_1min = 0, last = 0, max = 0;
  int samples = 0;
  void sample() {
    const auto t = std::chrono::steady_clock::now();
    if (t < next) return;
    next = t + std::chrono::seconds(10);
    last = rss_kib();
    if (!samples++) first = last;
    if (!at_1min && t - start >= std::chrono::seconds(60)) at_1min = last;
    max = std::max(max, last);
  }
};

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
enum Kind : uint64_t { kWriteData = 1, kSendData = 2, kWriteImmData = 3, kFaa = 4, kCas = 5 };
uint64_t key_of(uint32_t qp, uint64_t round, Kind k) { return splitmix((uint64_t(qp) << 40) ^ (round << 4) ^ k); }
void fill(uint8_t* p, uint32_t len, uint64_t key) {
  for (uint32_t i = 0; i < len; ++i) p[i] = uint8_t(splitmix(key + i / 8) >> (8 * (i % 8)));
}
bool same(const uint8_t* p, uint32_t len, uint64_t key) {
  for (uint32_t i = 0; i < len; ++i) {
    if (p[i] != uint8_t(splitmix(key + i / 8) >> (8 * (i % 8)))) return false;
  }
  return true;
}
/// Immediate of a SEND (bit 31 clear) or WRITE with imm (bit 31 set) of round r on QP j.
uint32_t imm_of(uint32_t j, uint64_t r, bool write) { return (write ? 0x80000000u : 0) | (j << 20) | uint32_t(r & 0xfffff); }

// ---------------------------------------------------------------- exchange files

constexpr uint32_t kMagic = 0x55524d43;  // "URMC"
constexpr uint32_t kMaxQps = 16384;
struct Info {
  uint32_t magic = kMagic;
  uint32_t engines = 0;
  uint32_t qps = 0;
  uint32_t rkey = 0;
  uint64_t area_addr = 0;  // per QP j: a 2*size slot at area_addr + j * slot_bytes
  uint64_t slot_bytes = 0;
  uint64_t atomic_addr = 0;  // per QP j: a word at atomic_addr + 8 j
  uint8_t mac[6] = {};
  uint8_t gid[16] = {};
  uint32_t qpn[kMaxQps] = {};
  uint32_t psn[kMaxQps] = {};
};

bool write_file(const std::string& path, const void* p, size_t n) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(static_cast<const char*>(p), std::streamsize(n));
    f.close();  // a full disk may show only when the buffer is flushed
    if (!f) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}
bool read_file(const std::string& path, void* p, size_t n) {
  std::ifstream f(path, std::ios::binary);
  f.read(static_cast<char*>(p), std::streamsize(n));
  return bool(f);
}

// ---------------------------------------------------------------- one endpoint

constexpr uint32_t kRecvPerQp = 16;

struct QpSlot {
  Qp* qp = nullptr;
  uint32_t engine = 0;
  uint32_t index = 0;    // j
  // client verify state
  uint64_t round = 0;
  uint32_t outstanding = 0;
  uint64_t faa_expect = 0;  // value the next FAA returns
  uint64_t cas_expect = 0;
  bool done = false;
};

struct alignas(64) EngineRun {
  std::atomic<uint64_t> msgs{0};   // completions (rate) or verified round ops
  std::atomic<uint64_t> bad{0};
  std::atomic<bool> finished{false};
  std::string error;              // written by the engine lcore before finished
};

/// One side of the bench: a memif port with one queue per engine, an
/// EngineGroup whose engines run on their own lcores, a PD, CQs and QPs per
/// engine. Not the apps' Endpoint (apps/common/endpoint.h), which is one
/// device on one queue that the app thread itself polls (run-to-completion);
/// the two share no setup code beyond what the stack's API already is.
class EngineGroupSide {
 public:
  explicit EngineGroupSide(const Config& c) : cfg_(c) {}
  bool open(std::string& err);
  bool connect(std::string& err);
  int run();

 private:
  int engine_body(uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop);
  void server_loop(uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop);
  void rate_loop(uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop);
  void verify_loop(uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop);
  void post_round(QpSlot& s);
  bool check_round(QpSlot& s, std::string& why);
  uint8_t* slot_area(uint32_t j) { return area_ + uint64_t(j) * slot_bytes_; }
  uint8_t* local(uint32_t j) { return local_ + uint64_t(j) * slot_bytes_; }
  uint64_t* atomic_word(uint32_t j) { return reinterpret_cast<uint64_t*>(atomics_) + j; }
  uint64_t* atomic_result(uint32_t j) { return reinterpret_cast<uint64_t*>(atomics_) + kMaxQps + 2 * j; }
  std::string path(const char* name) const { return cfg_.dir + "/" + name; }
  void report(const char* side);

  const Config& cfg_;
  bool soak_checks(const char* side, RssLog& rss, std::string& err);

  std::unique_ptr<dpdk::DpdkPort> port_;
  std::vector<std::unique_ptr<dpdk::DropEveryNthIo>> lossy_;
  std::unique_ptr<EngineGroup> group_;
  std::vector<Pd*> pds_;
  std::vector<Cq*> scqs_, rcqs_;
  std::vector<Mr*> mrs_;
  uint32_t key_ = 0;
  std::unique_ptr<uint8_t[]> mem_;
  uint8_t* atomics_ = nullptr;
  uint8_t* area_ = nullptr;
  uint8_t* local_ = nullptr;
  uint8_t* recv_bufs_ = nullptr;
  uint64_t slot_bytes_ = 0;
  std::vector<QpSlot> slots_;
  std::unique_ptr<EngineRun[]> runs_;
  Info me_, peer_;
  Mtu mtu_ = Mtu::k1024;
};

bool EngineGroupSide::open(std::string& err) {
  dpdk::DpdkPortConfig pc;
  pc.device = strf("net_memif0,role=%s,socket=%s/memif.sock,socket-abstract=no,mac=02:00:00:00:01:0%d",
                  cfg_.server ? "server" : "client", cfg_.dir.c_str(), cfg_.server ? 1 : 2);
  pc.n_queues = uint16_t(cfg_.engines);
  pc.link_timeout_ms = cfg_.timeout_s * 1000;
  auto port = dpdk::DpdkPort::open(pc);
  if (!port.ok()) {
    err = strf("port: %s", port.status().message());
    return false;
  }
  port_ = std::move(port).value();
  std::vector<PacketIo*> queues;
  for (uint16_t q = 0; q < port_->n_queues(); ++q) {
    if (cfg_.drop_every) {
      lossy_.push_back(std::make_unique<dpdk::DropEveryNthIo>(port_->queue(q), cfg_.drop_every));
      queues.push_back(lossy_.back().get());
    } else {
      queues.push_back(&port_->queue(q));
    }
  }
  DeviceConfig dc;
  dc.mac = port_->info().mac;
  const uint8_t ip[4] = {10, 0, 1, uint8_t(cfg_.server ? 1 : 2)};
  dc.gid = Gid::from_ipv4(ip);
  dc.max_qp = std::max<uint32_t>(16, cfg_.qps);
  dc.key_seed = cfg_.server ? 0x5e5e : 0xc1c1;
  auto g = EngineGroup::open(queues, dc);
  if (!g.ok()) {
    err = strf("engine group: %s", g.status().message());
    return false;
  }
  group_ = std::move(g).value();
  runs_ = std::make_unique<EngineRun[]>(cfg_.engines);

  // Memory: [atomic words | atomic results][area the peer targets][local sources/READ results][receive buffers].
  slot_bytes_ = (2 * uint64_t(cfg_.size) + 63) & ~uint64_t(63);
  const uint64_t atomics = 3 * 8 * uint64_t(kMaxQps);
  const uint64_t recv = uint64_t(cfg_.qps) * kRecvPerQp * slot_bytes_;
  const uint64_t total = atomics + 2 * slot_bytes_ * cfg_.qps + recv;
  mem_.reset(new (std::align_val_t(4096)) uint8_t[total]);
  std::memset(mem_.get(), 0, total);
  atomics_ = mem_.get();
  area_ = atomics_ + atomics;
  local_ = area_ + slot_bytes_ * cfg_.qps;
  recv_bufs_ = local_ + slot_bytes_ * cfg_.qps;

  for (uint32_t e = 0; e < cfg_.engines; ++e) {
    auto pd = alloc_pd(group_->engine(e));
    // rate: every WRITE is signaled, so a CQ holds all an engine's QPs x --depth.
    const uint32_t per_engine = (cfg_.qps + cfg_.engines - 1) / cfg_.engines;
    auto scq = create_cq(group_->engine(e), std::max<uint32_t>(8192, std::bit_ceil(per_engine * cfg_.depth)));
    auto rcq = create_cq(group_->engine(e), 8192);
    if (!pd.ok() || !scq.ok() || !rcq.ok()) {
      err = "alloc_pd/create_cq failed";
      return false;
    }
    pds_.push_back(*pd);
    scqs_.push_back(*scq);
    rcqs_.push_back(*rcq);
  }
  mrs_.resize(cfg_.engines);
  auto key = group_->reg_mr_all(pds_, mem_.get(), total,
                                kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic, mrs_);
  if (!key.ok()) {
    err = strf("reg_mr_all: %s", key.status().message());
    return false;
  }
  key_ = *key;
  for (uint32_t j = 0; j < cfg_.qps; ++j) {
    QpSlot s;
    s.index = j;
    s.engine = cfg_.server || !cfg_.cross ? j % cfg_.engines : (j + j / cfg_.engines) % cfg_.engines;
    QpInitAttr ia;
    ia.send_cq = scqs_[s.engine];
    ia.recv_cq = rcqs_[s.engine];
    ia.cap.max_send_wr = cfg_.verify ? 1024 : std::bit_ceil(cfg_.depth);  // rate: --depth in flight, 16k QPs fit
    ia.cap.max_recv_wr = kRecvPerQp;
    auto q = group_->create_qp(pds_[s.engine], ia);
    if (!q.ok()) {
      err = strf("create_qp: %s", q.status().message());
      return false;
    }
    s.qp = *q;
    slots_.push_back(s);
    me_.qpn[j] = s.qp->qp_num;
    me_.psn[j] = uint32_t(splitmix(j * 2 + (cfg_.server ? 1 : 0))) & 0xffffff;
  }
  me_.engines = cfg_.engines;
  me_.qps = cfg_.qps;
  me_.rkey = key_;
  me_.area_addr = uint64_t(uintptr_t(area_));
  me_.slot_bytes = slot_bytes_;
  me_.atomic_addr = uint64_t(uintptr_t(atomics_));
  std::memcpy(me_.mac, dc.mac.b, 6);
  std::memcpy(me_.gid, dc.gid.raw, 16);
  return true;
}

bool EngineGroupSide::connect(std::string& err) {
  if (!write_file(path(cfg_.server ? "server.info" : "client.info"), &me_, sizeof(me_))) {
    err = "cannot write the info file";
    return false;
  }
  const std::string peer_path = path(cfg_.server ? "client.info" : "server.info");
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(cfg_.timeout_s);
  while (!std::filesystem::exists(peer_path)) {
    if (g_stop || std::chrono::steady_clock::now() > end) {
      err = g_stop ? "interrupted" : "no info file from the peer";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!read_file(peer_path, &peer_, sizeof(peer_)) || peer_.magic != kMagic || peer_.qps != cfg_.qps) {
    err = "the peer's info file does not match (--qps must agree)";
    return false;
  }
  // Path MTU: memif's 1500 B carries 1024.
  mtu_ = Mtu::k1024;
  AhAttr ah;
  std::memcpy(ah.dgid.raw, peer_.gid, 16);
  std::memcpy(ah.dmac.b, peer_.mac, 6);
  for (auto& s : slots_) {
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    Status st = modify_qp(s.qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags);
    if (st.ok()) {
      a = {};
      a.qp_state = QpState::kRtr;
      a.path_mtu = mtu_;
      a.dest_qp_num = peer_.qpn[s.index];
      a.rq_psn = peer_.psn[s.index];
      a.ah_attr = ah;
      a.max_dest_rd_atomic = 16;
      a.min_rnr_timer = 1;
      st = modify_qp(s.qp, a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer);
    }
    if (st.ok()) {
      a = {};
      a.qp_state = QpState::kRts;
      a.sq_psn = me_.psn[s.index];
      a.timeout = 14;  // 67 ms: oversubscribed CPUs stall engines for whole scheduler slices
      a.retry_cnt = 7;
      a.rnr_retry = 7;
      a.max_rd_atomic = 16;
      st = modify_qp(s.qp, a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic);
    }
    if (!st.ok()) {
      err = strf("modify_qp: %s", st.message());
      return false;
    }
    if (cfg_.server) {
      for (uint32_t r = 0; r < kRecvPerQp; ++r) {
        Sge sge{uint64_t(uintptr_t(recv_bufs_ + (uint64_t(s.index) * kRecvPerQp + r) * slot_bytes_)), cfg_.size, key_};
        RecvWr wr;
        wr.wr_id = uint64_t(s.index) * kRecvPerQp + r;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        RecvWr* bad = nullptr;
        if (Status rs = post_recv(s.qp, &wr, &bad); !rs.ok()) {
          err = strf("post_recv: %s", rs.message());
          return false;
        }
      }
    }
  }
  return true;
}

// The server's engines: poll, check each SEND / WRITE-imm as it lands, repost the buffer.
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
    for (uint32_t e = 0; e < cfg_.engines; ++e) {
      good += runs_[e].msgs.load();
      bad += runs_[e].bad.load();
      if (err.empty()) err = runs_[e].error;
    }
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
    for (uint32_t e = 0; e < cfg_.engines; ++e) {
      good += runs_[e].msgs.load();
      bad += runs_[e].bad.load();
      if (err.empty()) err = runs_[e].error;
    }
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
bool EngineGroupSide::soak_checks(const char* side, RssLog& rss, std::string& err) {
  rss.next = {};
  rss.sample();
  uint64_t in_use = 0, pool_size = 0;
  for (uint16_t q = 0; q < port_->n_queues(); ++q) {
    rte_mempool* p = port_->queue(q).tx_pool();
    in_use += rte_mempool_in_use_count(p);
    pool_size += p->size;
  }
  uint32_t stuck = 0;
  for (const QpSlot& s : slots_) {
    QpAttr a;
    QpInitAttr ia;
    if (!query_qp(s.qp, &a, &ia).ok() || a.qp_state != QpState::kRts || s.outstanding) ++stuck;
  }
  uint64_t dropped = 0;
  for (const auto& l : lossy_) dropped += l->dropped();
  const uint64_t base = rss.at_1min ? rss.at_1min : rss.first;
  const int64_t growth = int64_t(rss.last) - int64_t(base);
  std::printf("# soak %s: frames_dropped=%llu mbufs_in_use=%llu/%llu qps_stuck=%u rss_kib first=%llu at_1min=%llu "
              "last=%llu max=%llu growth_since_1min=%lld samples=%d\n",
              side, (unsigned long long)dropped, (unsigned long long)in_use, (unsigned long long)pool_size, stuck,
              (unsigned long long)rss.first, (unsigned long long)rss.at_1min, (unsigned long long)rss.last,
              (unsigned long long)rss.max, (long long)growth, rss.samples);
  if (in_use) err += strf("%s%llu mbufs not returned to their pool", err.empty() ? "" : "; ", (unsigned long long)in_use);
  if (stuck) err += strf("%s%u QPs stuck", err.empty() ? "" : "; ", stuck);
  if (growth > 4096) err += strf("%sRSS grew %lld KiB after the first minute", err.empty() ? "" : "; ", (long long)growth);
  if (!in_use && !stuck && growth <= 4096) return true;
  std::printf("# soak %s: FAILED: %s\n", side, err.c_str());
  return false;
}

int run_endpoint(const Config& cfg, const Args& args, const dpdk::SplitArgs& split) {
  const char* side = cfg.server ? "server" : "client";
  if (!start_endpoint_process(strf("bench-mc (%s)", side), split)) return kExitFailure;
  std::printf("# uroce bench-mc %s (%s, %u lcores)\n", args.config_line().c_str(), side, rte_lcore_count());
  int rc = kExitFailure;
  {
    EngineGroupSide ep(cfg);
    std::string err;
    if (ep.open(err) && ep.connect(err)) {
      rc = ep.run();
    } else {
      std::fprintf(stderr, "uroce bench-mc (%s): %s\n", side, err.c_str());
    }
  }
  return rc;
}

// ---------------------------------------------------------------- the launcher

std::string lcore_map(uint32_t n, bool server, const std::string& mode) {
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  // Pinned: engine lcore i (1..N) on CPU i-1 (server) or N+i-1 (client); the
  // main lcores, which sleep between 10 ms checks, share CPU 0.
  const bool pin = mode == "pin" || (mode == "auto" && cpus >= 2 * n);
  if (!pin) return strf("--lcores=(0-%u)@(0-%u)", n, cpus - 1);
  std::string m = "--lcores=0@0";
  for (uint32_t i = 1; i <= n; ++i) m += strf(",%u@%u", i, ((server ? 0 : n) + i - 1) % cpus);
  return m;
}

int launch(const Args& args, const dpdk::SplitArgs& split, const Config& cfg) {
  const std::string dir = make_temp_dir("bench-mc");
  if (dir.empty()) return kExitFailure;
  std::printf("# uroce bench-mc %s\n", args.config_line().c_str());
  std::fflush(stdout);
  const std::vector<std::string> common = given_options(args, kOptions, {"role", "dir", "lcore-map"});
  // The client finishes on its own; the server then has 10 s (client.done).
  PairLaunch pair{.tool = "bench-mc",
                  .sock = dir + "/memif.sock",
                  .grace_s = 10,
                  .deadline_s = int(4 * cfg.timeout_s + cfg.warmup + cfg.seconds + cfg.duration_s),
                  .remove_dir = dir};
  for (int i = 0; i < 2; ++i) {
    const bool server = i == 0;
    std::vector<std::string>& av = pair.argv[i];
    av = {"bench-mc"};
    std::vector<std::string> eal = split.eal;
    if (eal.empty()) {
      eal = {"--no-huge", "--no-pci", "--no-shconf", "-m", "1024", "--log-level=lib.*:error",
             "--log-level=pmd.net.memif:critical"};
    }
    // Given EAL args without an lcore list (e.g. only -d PMD_DIR on a machine
    // without DPDK installed) still get each side its own engine CPUs.
    if (std::none_of(eal.begin(), eal.end(), [](const std::string& a) {
          return a.starts_with("-l") || a.starts_with("-c") || a.starts_with("--lcores");
        })) {
      eal.push_back(lcore_map(cfg.engines, server, std::string(args.get_str("lcore-map"))));
    }
    av.insert(av.end(), eal.begin(), eal.end());
    av.push_back("--");
    av.push_back(server ? "--role=server" : "--role=client");
    av.push_back("--dir=" + dir);
    av.insert(av.end(), common.begin(), common.end());
  }
  return run_pair(pair);
}

}  // namespace

int cmd_bench_mc(int argc, char** argv) {
  dpdk::SplitArgs split;
  Args args;
  if (auto rc = parse_endpoint_command(kCommand, argc, argv, split, args)) return *rc;
  Config cfg;
  const std::string_view role = args.get_str("role");
  cfg.server = role == "server";
  cfg.dir = std::string(args.get_str("dir"));
  cfg.engines = uint32_t(args.get_uint("engines"));
  cfg.qps = uint32_t(args.get_uint("qps"));
  cfg.verify = args.get_str("workload") == "verify";
  cfg.cross = args.get_str("placement") == "cross";
  cfg.size = uint32_t(args.get_uint("size"));
  cfg.depth = uint32_t(args.get_uint("depth"));
  cfg.seconds = args.get_double("seconds");
  cfg.warmup = args.get_double("warmup");
  cfg.rounds = uint32_t(args.get_uint("rounds"));
  cfg.duration_s = args.get_double("duration");
  cfg.drop_every = uint32_t(args.get_uint("drop-every"));
  if (cfg.drop_every == 1) {
    return usage_error(kCommand, "--drop-every 1 would drop everything");
  }
  if (cfg.duration_s > 0 && !cfg.verify) {
    return usage_error(kCommand, "--duration needs --workload verify");
  }
  cfg.timeout_s = uint32_t(args.get_uint("timeout"));
  if (cfg.qps < cfg.engines) {
    return usage_error(kCommand, "--qps must be at least --engines");
  }
  if (role == "launch") return launch(args, split, cfg);
  if (cfg.dir.empty()) {
    return usage_error(kCommand, strf("--role %s needs --dir", std::string(role).c_str()));
  }
  return run_endpoint(cfg, args, split);
}

}  // namespace uroce::apps
