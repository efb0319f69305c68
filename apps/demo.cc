// `uroce demo`: two RoCEv2 endpoints in two processes on a real DPDK port,
// perftest-style. By default the command is a launcher: it makes a temp dir,
// starts itself twice (`--role server` pinned to EAL lcore 0, `--role client`
// on lcore 1), each process with its own EAL (--no-huge --no-pci --no-shconf)
// and one end of a net_memif link whose socket lies in the temp dir, waits for
// both and removes the dir. With --role server|client and --dev SPEC the
// process is one endpoint on any rte_ethdev port (tests/dpdk_e2e runs the two
// ends on a veth pair with net_af_packet this way).
//
// The endpoints exchange QPN, PSN, rkey, buffer address, MAC and GID over a
// TCP socket (perftest's out-of-band channel; the server listens, the client
// connects), then the client drives and the server is the target:
//   workload perf    RC SEND, RDMA WRITE, RDMA READ, CAS and FAA at --sizes:
//                    a pingpong phase (--iters round trips; latency = half the
//                    round trip, TSC-timed) and a streaming phase (--stream-bytes
//                    of messages, --tx-depth in flight; Gb/s and Mmsg/s)
//   workload matrix  every RC opcode (SEND, SEND imm, WRITE, WRITE imm, READ,
//                    CAS, FAA), UC SEND/WRITE and UD SEND at 0 .. 3 path MTUs,
//                    --matrix-count messages each (the transport's end-to-end
//                    test over a real port)
// Every byte is checked: message k of a case carries a pattern derived from
// the case's seed and k; the target checks what it received (SEND: each
// receive buffer as it completes; WRITE: each target slot), the requester what
// it read (READ) and what each atomic returned, and the target the atomic
// word's final value, each side computing the expected data on its own.
//
// Run-to-completion (DESIGN "Shared-nothing engines"): the process's one lcore
// calls uroce::poll(ctx, now_ns) in every wait loop; time is the TSC in ns
// (drivers/dpdk/tsc_clock.h). --drop-every N loses every Nth transmitted frame
// in each process (drivers/dpdk/fault_io.h) to show retransmission working.
//
// Usage: uroce demo [EAL args --] [options]   (uroce demo --help)
// Exit: 0 everything verified, 1 a failure (or SIGINT/SIGTERM), 2 usage.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include <uroce/counters.h>
#include <uroce/eal.h>
#include <uroce/verbs.h>

#include "apps/addr_text.h"
#include "apps/args.h"
#include "apps/commands.h"
#include "apps/endpoint.h"
#include "apps/launch.h"
#include "apps/oob.h"
#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/eal_args.h"
#include "drivers/dpdk/fault_io.h"
#include "drivers/dpdk/tsc_clock.h"

namespace uroce::apps {
namespace {

using dpdk::DpdkPort;
using dpdk::DpdkPortConfig;
using dpdk::TscClock;

// ---------------------------------------------------------------- options

constexpr OptSpec kDemoOptions[] = {
    {.name = "role", .kind = OptKind::kChoice, .def = "launch", .help = "launch: start a server and a client on a memif link; or be one endpoint", .choices = "launch|server|client"},
    {.name = "dev", .kind = OptKind::kString, .def = "", .help = "with --role: the port, an EAL device spec (net_memif0,role=server,socket=..., net_af_packet0,iface=veth0, ...)", .meta = "SPEC"},
    {.name = "workload", .kind = OptKind::kChoice, .def = "perf", .help = "perf: latency and bandwidth table; matrix: every opcode x QP type x size, verified", .choices = "perf|matrix"},
    {.name = "ops", .kind = OptKind::kString, .def = "send,write,read,cas,faa", .help = "perf: operations, comma-separated", .meta = "LIST"},
    {.name = "sizes", .kind = OptKind::kString, .def = "64,4096,65536", .help = "perf: message sizes in bytes, comma-separated (atomics are 8 bytes)", .meta = "LIST"},
    {.name = "iters", .short_name = 'n', .kind = OptKind::kUint, .def = "1000", .help = "perf: pingpong round trips per op and size", .min = 1, .max = 10'000'000},
    {.name = "stream-bytes", .kind = OptKind::kUint, .def = "33554432", .help = "perf: bytes streamed per op and size (messages = this / size, at most --stream-msgs)", .max = 1ull << 30},
    {.name = "stream-msgs", .kind = OptKind::kUint, .def = "100000", .help = "perf: most messages streamed per op and size (0: no streaming phase)", .max = 10'000'000},
    {.name = "tx-depth", .short_name = 't', .kind = OptKind::kUint, .def = "128", .help = "perf: work requests in flight while streaming", .min = 1, .max = 1024},
    {.name = "matrix-count", .kind = OptKind::kUint, .def = "3", .help = "matrix: messages per case", .min = 1, .max = 64},
    {.name = "matrix-types", .kind = OptKind::kString, .def = "rc,uc,ud", .help = "matrix: QP types to run", .meta = "LIST"},
    {.name = "mtu", .short_name = 'm', .kind = OptKind::kUint, .def = "0", .help = "path MTU in bytes, 256..4096 (0: the largest the port carries)", .max = 4096},
    {.name = "seed", .kind = OptKind::kUint, .def = "1", .help = "seed of every data pattern, PSN and key"},
    {.name = "oob-host", .kind = OptKind::kString, .def = "127.0.0.1", .help = "out-of-band TCP address (server binds it, client connects)", .meta = "ADDR"},
    {.name = "oob-port", .short_name = 'p', .kind = OptKind::kUint, .def = "0", .help = "out-of-band TCP port (0: launch picks a free one; 18515 with --role)", .max = 65535},
    {.name = "ip", .kind = OptKind::kString, .def = "", .help = "this endpoint's IPv4 address, its GID (default 10.0.0.1 server, 10.0.0.2 client)", .meta = "A.B.C.D"},
    {.name = "mac", .kind = OptKind::kString, .def = "", .help = "MAC to set where the PMD allows (default: launch sets 02:00:00:00:00:01/02 on memif, else the port's)", .meta = "MAC"},
    {.name = "lcores", .kind = OptKind::kString, .def = "0,1", .help = "launch: EAL lcores of the server and the client (unless EAL args give -l/-c)", .meta = "A,B"},
    {.name = "ack-timeout", .kind = OptKind::kUint, .def = "14", .help = "RC local ACK timeout code: 4.096 us * 2^N", .min = 1, .max = 31},
    {.name = "drop-every", .kind = OptKind::kUint, .def = "0", .help = "test hook: lose every Nth frame each process transmits (0: none)"},
    {.name = "timeout", .kind = OptKind::kUint, .def = "30", .help = "seconds any one phase may take before it fails", .min = 1, .max = 3600},
    {.name = "pcap", .kind = OptKind::kString, .def = "", .help = "capture every frame of the client's port to FILE (launch), or of this port", .meta = "FILE"},
    {.name = "counters", .help = "print port, device and per-QP counters at the end (key=value lines)"},
    {.name = "json", .help = "write the results as JSON on stdout (the config echo goes to stderr)"},
};

constexpr std::string_view kDemoDetails =
    "EAL arguments go before a '--' (uroce demo -l 2-3 --no-huge -- --iters 100); without\n"
    "one EAL gets --no-huge --no-pci --no-shconf -m 512. The launcher gives each endpoint\n"
    "its own lcore (--lcores) and, with EAL arguments that name no --file-prefix, a\n"
    "unique one.\n"
    "\n"
    "Columns (and --json keys per row): op, bytes, iters (pingpong round trips),\n"
    "t_med/t_p99 (lat_median_us, lat_p99_us: half a round trip in us: SEND and WRITE\n"
    "are echoed by the server, READ and atomics complete at the requester after one\n"
    "round trip), msgs (stream_msgs), BW (bw_gbps, payload bits per second),\n"
    "Mmsg/s (mmsg_per_s) and verified (every byte of every message checked).\n"
    "Matrix rows: type, op, bytes, msgs, verified. Exit: 0 everything verified, 1 a\n"
    "failure or interrupted, 2 usage error.\n";

constexpr CommandSpec kDemoCommand = {
    .name = "demo",
    .positional = "",
    .summary = "two endpoints in two processes on a DPDK memif link: RC pingpong and streaming, verified",
    .options = kDemoOptions,
    .max_positional = 0,
    .details = kDemoDetails,
};


// ---------------------------------------------------------------- data patterns

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

uint64_t splitmix(uint64_t x) {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Key of message k of a case: every byte of the message derives from it.
uint64_t msg_key(uint64_t case_seed, uint64_t k) { return splitmix(case_seed ^ splitmix(k)); }
/// Last byte of message k: odd, so never the poison 0, and different from message k-1's.
uint8_t msg_tag(uint64_t k) { return uint8_t(2 * k + 1); }
uint32_t msg_imm(uint64_t case_seed, uint64_t k) { return uint32_t(msg_key(case_seed, k) >> 32); }

// Message bytes: 64-bit words key, key + G, key + 2G, ... (little-endian), the
// last byte replaced by the tag. Cheap to make and to check (the compiler
// vectorises both loops), and any misplaced, stale or foreign byte shows.
void fill(uint8_t* p, uint32_t len, uint64_t key, uint8_t tag) {
  uint64_t w = key;
  uint32_t i = 0;
  for (; i + 8 <= len; i += 8, w += kGolden) std::memcpy(p + i, &w, 8);
  for (uint32_t b = 0; i < len; ++i, ++b) p[i] = uint8_t(w >> (8 * b));
  if (len) p[len - 1] = tag;
}

/// Offset of the first byte that differs from fill(len, key, tag), or -1.
int64_t check(const uint8_t* p, uint32_t len, uint64_t key, uint8_t tag) {
  if (len == 0) return -1;
  uint64_t w = key;
  uint32_t i = 0;
  const uint32_t body = len - 1;  // the last byte is the tag
  for (; i + 8 <= body; i += 8, w += kGolden) {
    uint64_t got;
    std::memcpy(&got, p + i, 8);
    if (got != w) {
      for (uint32_t b = 0; b < 8; ++b) {
        if (p[i + b] != uint8_t(w >> (8 * b))) return i + b;
      }
    }
  }
  for (uint32_t b = 0; i < body; ++i, ++b) {
    if (p[i] != uint8_t(w >> (8 * b))) return i;
  }
  return p[len - 1] == tag ? -1 : int64_t(len - 1);
}

/// "byte OFF of LEN differs" for a failed check of message k, with what the
/// bytes are instead: another message's (which one), zeros, or unknown. A
/// stale, misplaced or duplicated message then names itself in the report.
std::string mismatch(const uint8_t* p, uint32_t len, uint64_t seed, uint64_t k, int64_t off) {
  std::string what = "bytes of no message within 4096 of it";
  if (std::all_of(p, p + len, [](uint8_t b) { return b == 0; })) {
    what = "all zero";
  } else {
    const uint64_t lo = k > 4096 ? k - 4096 : 0;
    for (uint64_t j = lo; j < k + 4096; ++j) {
      if (j != k && check(p, len, msg_key(seed, j), msg_tag(j)) < 0) {
        what = strf("message %llu's bytes", (unsigned long long)j);
        break;
      }
    }
  }
  const uint8_t want = off == int64_t(len) - 1 ? msg_tag(k) : uint8_t((msg_key(seed, k) + kGolden * uint64_t(off / 8)) >> (8 * (off % 8)));
  return strf("byte %lld of %u differs: 0x%02x, want 0x%02x; it holds %s", (long long)off, len, p[off], want, what.c_str());
}

// Atomics: the CAS chain v0 -> v1 -> ... and the FAA addends, from the seed.
uint64_t atomic_initial(uint64_t seed) { return msg_key(seed, ~0ull); }
uint64_t cas_value(uint64_t seed, uint64_t k) { return k == 0 ? atomic_initial(seed) : msg_key(seed, k) | 1; }
uint64_t faa_add(uint64_t seed, uint64_t k) { return (msg_key(seed, k) & 0xffff) + 1; }
uint64_t atomic_final(uint64_t seed, WrOpcode op, uint64_t count) {
  if (op == WrOpcode::kAtomicCmpAndSwp) return cas_value(seed, count);
  uint64_t v = atomic_initial(seed);
  for (uint64_t k = 0; k < count; ++k) v += faa_add(seed, k);
  return v;
}

// ---------------------------------------------------------------- operations

struct OpDesc {
  std::string_view name;
  WrOpcode op;
};
constexpr OpDesc kOps[] = {
    {"send", WrOpcode::kSend},          {"send_imm", WrOpcode::kSendWithImm},
    {"write", WrOpcode::kRdmaWrite},    {"write_imm", WrOpcode::kRdmaWriteWithImm},
    {"read", WrOpcode::kRdmaRead},      {"cas", WrOpcode::kAtomicCmpAndSwp},
    {"faa", WrOpcode::kAtomicFetchAndAdd},
};
std::string_view op_name(WrOpcode op) {
  for (const auto& o : kOps) {
    if (o.op == op) return o.name;
  }
  return "?";
}
bool is_atomic(WrOpcode op) { return op == WrOpcode::kAtomicCmpAndSwp || op == WrOpcode::kAtomicFetchAndAdd; }
/// Operations whose message consumes a receive WQE at the target.
bool consumes_recv(WrOpcode op) {
  return op == WrOpcode::kSend || op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm;
}
bool has_imm(WrOpcode op) { return op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm; }
std::string_view type_name(QpType t) { return t == QpType::kRc ? "RC" : t == QpType::kUc ? "UC" : "UD"; }

// ---------------------------------------------------------------- out-of-band channel

// The TCP messages. Both ends are this program on one host (or two namespaces
// of one host), so the structs travel as they are.
inline constexpr uint32_t kMagic = 0x55524f44;  // "UROD"

struct Info {  // exchanged once: everything the peer needs to reach our QPs and memory
  uint32_t magic = kMagic;
  uint32_t qpn[3] = {};  // RC, UC, UD
  uint32_t psn[3] = {};  // our starting send PSNs (the peer's rq_psn)
  uint32_t rkey = 0;
  uint32_t path_mtu = 0;  // bytes this side can carry
  uint64_t area_addr = 0;  // base of the area the peer writes, reads and sends into
  uint64_t area_bytes = 0;
  uint64_t atomic_addr = 0;
  uint8_t mac[6] = {};
  uint8_t gid[16] = {};
};

enum class MsgType : uint32_t { kPrepare = 1, kReady, kDone, kResult, kBye };
enum class Mode : uint32_t { kPingpong = 1, kStream };

struct Msg {
  MsgType type{};
  QpType qp_type = QpType::kRc;
  WrOpcode op = WrOpcode::kSend;
  Mode mode = Mode::kStream;
  uint32_t size = 0;
  uint32_t count = 0;
  uint64_t seed = 0;
  uint32_t ok = 0;
  char text[160] = {};
};

// The TCP channel itself is shared with `uroce pingpong` (apps/oob.h).
using Oob = TcpChannel;

// ---------------------------------------------------------------- the endpoint

struct Config {
  bool server = false;
  std::string dev;
  bool matrix = false;
  std::vector<WrOpcode> ops;
  std::vector<uint32_t> sizes;
  std::vector<QpType> matrix_types;
  uint64_t iters = 0;
  uint64_t stream_bytes = 0;
  uint64_t stream_msgs = 0;
  uint32_t tx_depth = 0;
  uint32_t matrix_count = 0;
  uint32_t mtu = 0;
  uint64_t seed = 0;
  std::string oob_host;
  uint16_t oob_port = 0;
  Gid gid;
  std::optional<MacAddr> mac;
  uint8_t ack_timeout = 0;
  uint32_t drop_every = 0;
  uint32_t timeout_s = 0;
  std::string pcap;
  bool counters = false;
  bool json = false;
};

inline constexpr uint32_t kSqDepth = 1024;
inline constexpr uint32_t kRqDepth = 1024;
inline constexpr uint32_t kCqDepth = 8192;
inline constexpr uint32_t kQkey = 0x11111111;
inline constexpr size_t kAtomicArea = 4096;  // atomic word at the start, page-aligned

struct Row {
  QpType type = QpType::kRc;
  WrOpcode op = WrOpcode::kSend;
  uint32_t size = 0;
  uint64_t iters = 0;  // pingpong round trips done
  double lat_med_us = 0, lat_p99_us = 0;
  uint64_t msgs = 0;   // streamed (perf) or sent (matrix)
  double bw_gbps = 0, mmsg = 0;
  bool verified = false;
  std::string error;
};

/// Largest path MTU whose packets fit an Ethernet MTU with the worst-case
/// headers (IPv6 40 + UDP 8 + BTH 12 + RETH 16 + ImmDt 4 + ICRC 4), as the engine computes it.
uint32_t largest_path_mtu(uint32_t eth_mtu) {
  uint32_t best = 256;
  for (uint32_t m = 512; m <= 4096; m *= 2) {
    if (m + 84 <= eth_mtu) best = m;
  }
  return best;
}

class Endpoint {
 public:
  explicit Endpoint(const Config& cfg) : cfg_(cfg) {}

  bool open(std::string& err);
  void pump() { uroce::poll(ctx_.get(), clock_->now_ns()); }
  bool connect(Oob& oob, std::string& err);

  Qp* qp(QpType t) { return t == QpType::kRc ? rc_ : t == QpType::kUc ? uc_ : ud_; }
  uint32_t stride(uint32_t size, QpType t) const {
    return std::max(64u, (size + (t == QpType::kUd ? 40u : 0u) + 63u) & ~63u);
  }
  uint32_t slots(uint32_t size, QpType t) const { return uint32_t(area_bytes_ / stride(size, t)); }
  uint8_t* area() { return mem_.get() + kAtomicArea; }                  // the peer's target
  uint8_t* local() { return mem_.get() + kAtomicArea + area_bytes_; }   // our sources and READ results
  uint64_t* atomic_word() { return reinterpret_cast<uint64_t*>(mem_.get()); }
  uint64_t addr_of(const void* p) const { return uint64_t(uintptr_t(p)); }
  uint32_t lkey() const { return mr_->lkey; }

  const Config& cfg_;
  std::unique_ptr<DpdkPort> port_;
  std::unique_ptr<dpdk::DropEveryNthIo> fault_;
  std::optional<TscClock> clock_;
  ContextPtr ctx_;
  Pd* pd_ = nullptr;
  Cq* scq_ = nullptr;
  Cq* rcq_ = nullptr;
  Qp* rc_ = nullptr;
  Qp* uc_ = nullptr;
  Qp* ud_ = nullptr;
  Ah* ah_ = nullptr;
  Mr* mr_ = nullptr;
  std::unique_ptr<uint8_t[]> mem_;
  uint64_t area_bytes_ = 0;
  Info me_, peer_;
  uint32_t path_mtu_ = 0;
};

bool Endpoint::open(std::string& err) {
  DpdkPortConfig pc;
  pc.device = cfg_.dev;
  pc.mtu = dpdk::kRoceJumboMtu;
  pc.mac = cfg_.mac;
  pc.link_timeout_ms = cfg_.timeout_s * 1000;
  pc.pcap_path = cfg_.pcap;
  auto port = DpdkPort::open(pc);
  if (!port.ok()) {
    err = strf("port '%s': %s", cfg_.dev.c_str(), port.status().message());
    return false;
  }
  port_ = std::move(port).value();
  PacketIo* io = &port_->queue(0);
  if (cfg_.drop_every) {
    fault_ = std::make_unique<dpdk::DropEveryNthIo>(*io, cfg_.drop_every);
    io = fault_.get();
  }
  clock_.emplace();
  DeviceConfig dc;
  dc.mac = port_->info().mac;
  dc.gid = cfg_.gid;
  dc.max_qp = 16;
  dc.key_seed = splitmix(cfg_.seed + (cfg_.server ? 1 : 2)) | 1;
  auto ctx = open_device(*io, dc);
  if (!ctx.ok()) {
    err = strf("open_device: %s", ctx.status().message());
    return false;
  }
  ctx_ = std::move(ctx).value();
  pump();

  // Memory: [atomic word page][area the peer targets][local sources/results].
  const uint64_t biggest = cfg_.sizes.empty() ? 0 : *std::max_element(cfg_.sizes.begin(), cfg_.sizes.end());
  area_bytes_ = std::max<uint64_t>({cfg_.stream_bytes, biggest * 4, 1u << 20});
  area_bytes_ = (area_bytes_ + 4095) & ~uint64_t(4095);
  const size_t total = kAtomicArea + 2 * area_bytes_;
  mem_.reset(new (std::align_val_t(4096)) uint8_t[total]);
  std::memset(mem_.get(), 0, total);  // touch every page before anything is timed

  auto pd = alloc_pd(ctx_.get());
  auto scq = create_cq(ctx_.get(), kCqDepth);
  auto rcq = create_cq(ctx_.get(), kCqDepth);
  if (!pd.ok() || !scq.ok() || !rcq.ok()) {
    err = "alloc_pd/create_cq failed";
    return false;
  }
  pd_ = *pd;
  scq_ = *scq;
  rcq_ = *rcq;
  auto mr = reg_mr(pd_, mem_.get(), total,
                   kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
  if (!mr.ok()) {
    err = strf("reg_mr: %s", mr.status().message());
    return false;
  }
  mr_ = *mr;
  for (QpType t : {QpType::kRc, QpType::kUc, QpType::kUd}) {
    QpInitAttr ia;
    ia.send_cq = scq_;
    ia.recv_cq = rcq_;
    ia.cap.max_send_wr = kSqDepth;
    ia.cap.max_recv_wr = kRqDepth;
    ia.qp_type = t;
    auto q = create_qp(pd_, ia);
    if (!q.ok()) {
      err = strf("create_qp %s: %s", type_name(t).data(), q.status().message());
      return false;
    }
    (t == QpType::kRc ? rc_ : t == QpType::kUc ? uc_ : ud_) = *q;
  }
  path_mtu_ = largest_path_mtu(port_->info().mtu);
  if (cfg_.mtu) path_mtu_ = std::min(path_mtu_, cfg_.mtu);
  me_.qpn[0] = rc_->qp_num;
  me_.qpn[1] = uc_->qp_num;
  me_.qpn[2] = ud_->qp_num;
  for (int i = 0; i < 3; ++i) me_.psn[i] = uint32_t(splitmix(cfg_.seed * 7 + uint64_t(i) + (cfg_.server ? 100 : 200))) & 0xffffff;
  me_.rkey = mr_->rkey;
  me_.path_mtu = path_mtu_;
  me_.area_addr = addr_of(area());
  me_.area_bytes = area_bytes_;
  me_.atomic_addr = addr_of(atomic_word());
  std::memcpy(me_.mac, dc.mac.b, 6);
  std::memcpy(me_.gid, cfg_.gid.raw, 16);
  return true;
}

bool Endpoint::connect(Oob& oob, std::string& err) {
  if (!oob.send_bytes(&me_, sizeof(me_))) {
    err = "out-of-band send failed";
    return false;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(cfg_.timeout_s);
  while (!oob.try_recv(&peer_, sizeof(peer_))) {
    if (oob.eof() || g_stop || std::chrono::steady_clock::now() > end) {
      err = g_stop ? "interrupted" : "no endpoint info from the peer";
      return false;
    }
    pump();
  }
  if (peer_.magic != kMagic) {
    err = "the peer is not a uroce demo of this version";
    return false;
  }
  path_mtu_ = std::min(path_mtu_, peer_.path_mtu);
  Mtu mtu = Mtu::k256;
  for (Mtu m : {Mtu::k256, Mtu::k512, Mtu::k1024, Mtu::k2048, Mtu::k4096}) {
    if (mtu_bytes(m) <= path_mtu_) mtu = m;
  }
  path_mtu_ = mtu_bytes(mtu);
  AhAttr ah;
  std::memcpy(ah.dgid.raw, peer_.gid, 16);
  std::memcpy(ah.dmac.b, peer_.mac, 6);
  constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  for (int i = 0; i < 3; ++i) {
    Qp* q = i == 0 ? rc_ : i == 1 ? uc_ : ud_;
    const QpType t = q->qp_type;
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qkey = kQkey;
    a.qp_access_flags = t == QpType::kUc ? uint32_t(kAccessLocalWrite | kAccessRemoteWrite) : kAll;
    uint32_t mask = kQpState | kQpPkeyIndex | kQpPort | (t == QpType::kUd ? uint32_t(kQpQkey) : uint32_t(kQpAccessFlags));
    Status s = modify_qp(q, a, mask);
    if (s.ok()) {
      a = {};
      a.qp_state = QpState::kRtr;
      mask = kQpState;
      if (t != QpType::kUd) {
        a.path_mtu = mtu;
        a.dest_qp_num = peer_.qpn[i];
        a.rq_psn = peer_.psn[i];
        a.ah_attr = ah;
        mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
        if (t == QpType::kRc) {
          a.max_dest_rd_atomic = 16;
          a.min_rnr_timer = 1;
          mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
        }
      }
      s = modify_qp(q, a, mask);
    }
    if (s.ok()) {
      a = {};
      a.qp_state = QpState::kRts;
      a.sq_psn = me_.psn[i];
      mask = kQpState | kQpSqPsn;
      if (t == QpType::kRc) {
        a.timeout = cfg_.ack_timeout;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 16;
        mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
      }
      s = modify_qp(q, a, mask);
    }
    if (!s.ok()) {
      err = strf("modify_qp %s: %s", type_name(t).data(), s.message());
      return false;
    }
  }
  auto r = create_ah(pd_, ah);
  if (!r.ok()) {
    err = strf("create_ah: %s", r.status().message());
    return false;
  }
  ah_ = *r;
  return true;
}

// ---------------------------------------------------------------- server: the target

class Target {
 public:
  Target(Endpoint& ep, Oob& oob) : ep_(ep), oob_(oob) {}
  /// Serves cases until the client says bye. Returns the exit code.
  int run(std::string& err);
  uint64_t cases() const { return cases_; }
  uint64_t failed() const { return failed_; }

 private:
  void step();
  void prepare();
  void on_recv(const Wc& wc);
  void post_recvs();
  void finish(Msg& reply);
  void fail(std::string e) {
    if (error_.empty()) error_ = std::move(e);
  }
  uint8_t* slot(uint64_t k) { return ep_.area() + (k % k_) * stride_; }

  Endpoint& ep_;
  Oob& oob_;
  Msg cur_{};
  bool active_ = false;
  uint32_t stride_ = 64;
  uint64_t k_ = 1;  // slots of this case's size in the area
  uint64_t expected_recvs_ = 0, recvs_posted_ = 0, recvs_done_ = 0;
  uint64_t echo_next_ = 0;  // WRITE pingpong: the message to echo next
  std::string error_;
  uint64_t cases_ = 0, failed_ = 0;
};

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
  k_ = std::max<uint64_t>(1, ep_.slots(cur_.size, cur_.qp_type));
  recvs_posted_ = recvs_done_ = echo_next_ = 0;
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
  const uint64_t k = recvs_done_++;
  if (!active_ || k >= expected_recvs_) return fail(strf("unexpected receive completion %llu", (unsigned long long)k));
  if (wc.status != WcStatus::kSuccess) return fail(strf("receive %llu: %s", (unsigned long long)k, wc_status_str(wc.status)));
  if (wc.wr_id != k) return fail(strf("receive %llu completed as WR %llu (out of order)", (unsigned long long)k, (unsigned long long)wc.wr_id));
  const bool ud = cur_.qp_type == QpType::kUd;
  uint8_t* data = slot(k) + (ud ? 40 : 0);
  if (cur_.mode == Mode::kPingpong && cur_.op == WrOpcode::kSend) {
    // Echo it back first (the client times the round trip), check it after.
    Sge sge{ep_.addr_of(data), cur_.size, ep_.lkey()};
    SendWr wr;
    wr.wr_id = k;
    wr.sg_list = &sge;
    wr.num_sge = cur_.size ? 1 : 0;
    wr.opcode = WrOpcode::kSend;
    wr.send_flags = kSendSignaled;
    SendWr* bad = nullptr;
    if (Status s = post_send(ep_.rc_, &wr, &bad); !s.ok()) fail(strf("echo post_send: %s", s.message()));
  }
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
  if (int64_t off = check(data, cur_.size, msg_key(cur_.seed, k), msg_tag(k)); off >= 0) {
    return fail(strf("message %llu: %s", (unsigned long long)k, mismatch(data, cur_.size, cur_.seed, k, off).c_str()));
  }
  post_recvs();
}

void Target::step() {
  ep_.pump();
  Wc wc[32];
  for (int n = poll_cq(ep_.rcq_, 32, wc), i = 0; i < n; ++i) on_recv(wc[i]);
  for (int n = poll_cq(ep_.scq_, 32, wc), i = 0; i < n; ++i) {
    if (wc[i].status != WcStatus::kSuccess) fail(strf("echo %llu: %s", (unsigned long long)wc[i].wr_id, wc_status_str(wc[i].status)));
  }
  // WRITE pingpong: the last byte of slot 0 turns to message k's tag when
  // message k has been placed (RC places in PSN order): echo it, then check it.
  if (active_ && cur_.mode == Mode::kPingpong && cur_.op == WrOpcode::kRdmaWrite && echo_next_ < cur_.count &&
      cur_.size != 0 && ep_.area()[cur_.size - 1] == msg_tag(echo_next_)) {
    const uint64_t k = echo_next_++;
    Sge sge{ep_.addr_of(ep_.area()), cur_.size, ep_.lkey()};
    SendWr wr;
    wr.wr_id = k;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.send_flags = kSendSignaled;
    wr.rdma.remote_addr = ep_.peer_.area_addr;
    wr.rdma.rkey = ep_.peer_.rkey;
    SendWr* bad = nullptr;
    if (Status s = post_send(ep_.rc_, &wr, &bad); !s.ok()) fail(strf("echo post_send: %s", s.message()));
    ep_.pump();
    if (int64_t off = check(ep_.area(), cur_.size, msg_key(cur_.seed, k), msg_tag(k)); off >= 0) {
      fail(strf("message %llu: %s", (unsigned long long)k, mismatch(ep_.area(), cur_.size, cur_.seed, k, off).c_str()));
    }
  }
}

void Target::finish(Msg& reply) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(ep_.cfg_.timeout_s);
  const bool echo_writes = cur_.mode == Mode::kPingpong && cur_.op == WrOpcode::kRdmaWrite;
  while ((recvs_done_ < expected_recvs_ || (echo_writes && echo_next_ < cur_.count)) && !g_stop &&
         std::chrono::steady_clock::now() < end) {
    step();
  }
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
  for (;;) {
    step();
    Msg m;
    if (oob_.try_recv(&m, sizeof(m))) {
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

// ---------------------------------------------------------------- client: the driver

class Driver {
 public:
  Driver(Endpoint& ep, Oob& oob) : ep_(ep), oob_(oob) {}
  /// Perf: one row per op and size, pingpong then stream.
  void perf(WrOpcode op, uint32_t size, std::vector<Row>& rows);
  /// Matrix: one row per case.
  void matrix_case(QpType t, WrOpcode op, uint32_t size, std::vector<Row>& rows);
  bool broken() const { return broken_; }
  void bye() {
    Msg m;
    m.type = MsgType::kBye;
    (void)oob_.send_bytes(&m, sizeof(m));
  }

 private:
  bool exchange(Msg m, std::string& err);          // Prepare -> Ready or Done -> Result
  bool pingpong(Row& row, uint64_t seed, std::string& err);
  bool stream(Row& row, uint64_t count, uint32_t depth, uint64_t seed, bool timed, std::string& err);
  bool expired() const { return g_stop || std::chrono::steady_clock::now() > deadline_; }
  void arm() { deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(ep_.cfg_.timeout_s); }
  SendWr make_wr(const Row& row, uint64_t k, uint64_t seed, uint64_t slot_k, Sge& sge);
  uint64_t next_seed() { return splitmix(ep_.cfg_.seed * 1000003 + ++cases_); }

  Endpoint& ep_;
  Oob& oob_;
  bool broken_ = false;  // a QP failed or the peer went away: nothing more can run
  uint64_t cases_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  Msg last_{};
};

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

bool Driver::pingpong(Row& row, uint64_t seed, std::string& err) {
  const uint64_t n = row.iters;
  const uint32_t stride = ep_.stride(row.size, row.type);
  const uint64_t k_slots = std::max<uint64_t>(1, ep_.slots(row.size, row.type));
  Msg m;
  m.type = MsgType::kPrepare;
  m.qp_type = row.type;
  m.op = row.op;
  m.mode = Mode::kPingpong;
  m.size = row.size;
  m.count = uint32_t(n);
  m.seed = seed;
  if (!exchange(m, err)) return false;
  std::vector<uint64_t> lat;
  lat.reserve(n);
  uint64_t wrs_posted = 0, wrs_reaped = 0;  // send-side completions, all drained before the next phase
  const TscClock& clk = *ep_.clock_;
  Qp* qp = ep_.qp(row.type);
  std::memset(ep_.area(), 0, stride);
  uint64_t faa_sum = atomic_initial(seed);
  Wc wc[32];
  for (uint64_t i = 0; i < n && err.empty(); ++i) {
    const uint64_t s = i % k_slots;
    uint8_t* src = ep_.local() + s * stride;
    uint8_t* echo = ep_.area() + (row.op == WrOpcode::kSend ? s * stride : 0);
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
    SendWr wr = make_wr(row, i, seed, row.op == WrOpcode::kRdmaWrite ? 0 : s, sge);
    if (row.op == WrOpcode::kRdmaWrite) sge.addr = ep_.addr_of(src);
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
          err = strf("message %llu: %s", (unsigned long long)wc[j].wr_id, wc_status_str(wc[j].status));
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
          if (wc[0].status != WcStatus::kSuccess || wc[0].byte_len != row.size) {
            err = strf("echo %llu: %s, %u bytes", (unsigned long long)i, wc_status_str(wc[0].status), wc[0].byte_len);
          }
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
    if (!done) break;
    lat.push_back(clk.to_ns(t1 - t0) / 2);
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
  m.type = MsgType::kDone;
  std::string server_err;
  const bool ok = exchange(m, server_err);
  if (err.empty() && !ok) err = server_err;
  return err.empty();
}

bool Driver::stream(Row& row, uint64_t count, uint32_t depth, uint64_t seed, bool timed, std::string& err) {
  const uint32_t stride = ep_.stride(row.size, row.type);
  Msg m;
  m.type = MsgType::kPrepare;
  m.qp_type = row.type;
  m.op = row.op;
  m.mode = Mode::kStream;
  m.size = row.size;
  m.count = uint32_t(count);
  m.seed = seed;
  // Sources (or poisoned READ destinations) for every message, before the clock starts.
  for (uint64_t k = 0; k < count; ++k) {
    uint8_t* p = ep_.local() + k * stride;
    if (row.op == WrOpcode::kRdmaRead) std::memset(p, 0, row.size);
    else if (!is_atomic(row.op)) fill(p, row.size, msg_key(seed, k), msg_tag(k));
  }
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
    const double s = double(ep_.clock_->to_ns(t1 - t0)) / 1e9;
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
  m.type = MsgType::kDone;
  std::string server_err;
  const bool ok = exchange(m, server_err);
  if (err.empty() && !ok) err = server_err;
  return err.empty();
}

void Driver::perf(WrOpcode op, uint32_t size, std::vector<Row>& rows) {
  Row row;
  row.op = op;
  row.size = is_atomic(op) ? 8 : size;
  row.iters = ep_.cfg_.iters;
  std::string err;
  bool ok = pingpong(row, next_seed(), err);
  const uint64_t k_slots = ep_.slots(row.size, row.type);
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

// ---------------------------------------------------------------- output

std::string json_str(std::string_view s) {
  std::string o = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (uint8_t(c) < 0x20) {
      o += strf("\\u%04x", c);
      continue;
    }
    o += c;
  }
  return o + "\"";
}

void print_table_header(bool matrix) {
  if (matrix) {
    std::printf(" %-4s %-10s %8s %6s  %s\n", "type", "op", "bytes", "msgs", "verified");
  } else {
    std::printf(" %-6s %8s %8s %10s %10s %9s %10s %10s  %s\n", "op", "bytes", "iters", "t_med[us]", "t_p99[us]",
                "msgs", "BW[Gb/s]", "Mmsg/s", "verified");
  }
  std::fflush(stdout);
}

void print_row(const Row& r, bool matrix) {
  if (matrix) {
    std::printf(" %-4s %-10s %8u %6llu  %s%s%s\n", type_name(r.type).data(), op_name(r.op).data(), r.size,
                (unsigned long long)r.msgs, r.verified ? "yes" : "NO", r.error.empty() ? "" : "  # ", r.error.c_str());
  } else {
    std::printf(" %-6s %8u %8llu %10.2f %10.2f %9llu %10.3f %10.3f  %s%s%s\n", op_name(r.op).data(), r.size,
                (unsigned long long)r.iters, r.lat_med_us, r.lat_p99_us, (unsigned long long)r.msgs, r.bw_gbps, r.mmsg,
                r.verified ? "yes" : "NO", r.error.empty() ? "" : "  # ", r.error.c_str());
  }
  std::fflush(stdout);
}

std::string row_json(const Row& r) {
  return strf("{\"type\":\"%s\",\"op\":\"%s\",\"bytes\":%u,\"iters\":%llu,\"lat_median_us\":%.3f,\"lat_p99_us\":%.3f,"
             "\"stream_msgs\":%llu,\"bw_gbps\":%.4f,\"mmsg_per_s\":%.4f,\"verified\":%s,\"error\":",
             type_name(r.type).data(), op_name(r.op).data(), r.size, (unsigned long long)r.iters, r.lat_med_us,
             r.lat_p99_us, (unsigned long long)r.msgs, r.bw_gbps, r.mmsg, r.verified ? "true" : "false") +
         json_str(r.error) + "}";
}

/// Port, device and per-QP counters: text lines "port role=R k=v ...", or a JSON object.
std::string counters_report(Endpoint& ep, const char* role, bool json) {
  std::string port, dev, qps;
  auto add = [json](std::string& out, std::string_view k, uint64_t v) {
    if (json) out += strf("%s\"%.*s\":%llu", out.empty() ? "" : ",", int(k.size()), k.data(), (unsigned long long)v);
    else out += strf(" %.*s=%llu", int(k.size()), k.data(), (unsigned long long)v);
  };
  if (ep.port_) {
    if (auto st = ep.port_->stats(); st.ok()) {
      const auto& s = st.value();
      add(port, "rx_packets", s.rx_packets);
      add(port, "tx_packets", s.tx_packets);
      add(port, "rx_bytes", s.rx_bytes);
      add(port, "tx_bytes", s.tx_bytes);
      add(port, "rx_missed", s.rx_missed);
      add(port, "rx_errors", s.rx_errors);
      add(port, "tx_errors", s.tx_errors);
      add(port, "rx_nombuf", s.rx_nombuf);
    }
    add(port, "hook_dropped", ep.fault_ ? ep.fault_->dropped() : 0);
  }
  auto counters = [&](std::string& out, const Counters& c) {
    for (size_t i = 0; i < size_t(Counter::kCount); ++i) {
      if (c.v[i]) add(out, kCounterNames[i], c.v[i]);
    }
  };
  if (ep.ctx_) counters(dev, query_counters(ep.ctx_.get()));
  for (Qp* q : {ep.rc_, ep.uc_, ep.ud_}) {
    if (!q) continue;
    std::string one;
    counters(one, query_qp_counters(q));
    if (json) {
      qps += strf("%s{\"type\":\"%s\",\"qpn\":%u,\"counters\":{%s}}", qps.empty() ? "" : ",", type_name(q->qp_type).data(),
                 q->qp_num, one.c_str());
    } else {
      qps += strf("qp role=%s type=%s qpn=0x%x%s\n", role, type_name(q->qp_type).data(), q->qp_num, one.c_str());
    }
  }
  if (json) return strf("{\"port\":{%s},\"device\":{%s},\"qps\":[%s]}", port.c_str(), dev.c_str(), qps.c_str());
  return strf("port role=%s%s\n", role, port.c_str()) + strf("device role=%s%s\n", role, dev.c_str()) + qps;
}

// ---------------------------------------------------------------- one endpoint

int run_endpoint(const Config& cfg, const Args& args, const dpdk::SplitArgs& split) {
  const char* role = cfg.server ? "server" : "client";
  std::FILE* info = cfg.json ? stderr : stdout;
  if (!start_endpoint_process(strf("demo (%s)", role), split)) return kExitFailure;
  std::fprintf(info, "# uroce demo %s\n", args.config_line().c_str());
  Endpoint ep(cfg);
  std::string err;
  int rc = kExitFailure;
  std::vector<Row> rows;
  bool interrupted = false;
  if (!ep.open(err)) {
    std::fprintf(stderr, "uroce demo (%s): %s\n", role, err.c_str());
    return kExitFailure;
  }
  const auto& pi = ep.port_->info();
  char gid[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, cfg.gid.raw, gid, sizeof(gid));
  std::fprintf(info, "# %s: port %s (%s) mtu %u mac %s gid %s lcore %u tsc %.3f GHz%s%s\n", role, pi.name.c_str(),
               pi.driver.c_str(), pi.mtu, mac_str(pi.mac).c_str(), gid, rte_lcore_id(), double(ep.clock_->hz()) / 1e9,
               cfg.pcap.empty() ? "" : " capture ", cfg.pcap.c_str());
  {
    Oob oob(&g_stop);
    const bool up = cfg.server ? oob.accept_one(cfg.oob_host, cfg.oob_port, cfg.timeout_s, [&ep] { ep.pump(); }, err)
                               : oob.connect_to(cfg.oob_host, cfg.oob_port, cfg.timeout_s, err);
    if (up && ep.connect(oob, err)) {
      std::fprintf(info, "# %s: connected: QPN RC 0x%x UC 0x%x UD 0x%x, peer RC 0x%x UC 0x%x UD 0x%x, path MTU %u\n", role,
                   ep.rc_->qp_num, ep.uc_->qp_num, ep.ud_->qp_num, ep.peer_.qpn[0], ep.peer_.qpn[1], ep.peer_.qpn[2],
                   ep.path_mtu_);
      if (cfg.server) {
        Target t(ep, oob);
        rc = t.run(err);
        std::fprintf(info, "# server: %llu cases, %llu failed%s%s\n", (unsigned long long)t.cases(),
                     (unsigned long long)t.failed(), err.empty() ? "" : "; ", err.c_str());
      } else {
        Driver d(ep, oob);
        if (!cfg.json) print_table_header(cfg.matrix);
        auto add = [&](Row r) {
          if (!cfg.json) print_row(r, cfg.matrix);
          rows.push_back(std::move(r));
        };
        std::vector<Row> tmp;
        if (cfg.matrix) {
          const uint32_t m = ep.path_mtu_;
          const std::vector<uint32_t> sizes = {0, 1, 63, m - 1, m, m + 1, 2 * m, 3 * m - 1, 3 * m};
          for (QpType t : cfg.matrix_types) {
            for (const auto& o : kOps) {
              const bool allowed = t == QpType::kRc || (t == QpType::kUc && !is_atomic(o.op) && o.op != WrOpcode::kRdmaRead) ||
                                   (t == QpType::kUd && (o.op == WrOpcode::kSend || o.op == WrOpcode::kSendWithImm));
              if (!allowed) continue;
              for (uint32_t sz : is_atomic(o.op) ? std::vector<uint32_t>{8} : sizes) {
                if (t == QpType::kUd && sz > m) continue;
                if (d.broken() || g_stop) break;
                tmp.clear();
                d.matrix_case(t, o.op, sz, tmp);
                add(tmp[0]);
              }
            }
          }
        } else {
          for (WrOpcode op : cfg.ops) {
            for (uint32_t sz : is_atomic(op) ? std::vector<uint32_t>{8} : cfg.sizes) {
              if (d.broken() || g_stop) break;
              tmp.clear();
              d.perf(op, sz, tmp);
              add(tmp[0]);
            }
          }
        }
        d.bye();
        const bool all = !rows.empty() && std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.verified; });
        rc = all && !g_stop ? kExitOk : kExitFailure;
      }
    } else {
      std::fprintf(stderr, "uroce demo (%s): %s\n", role, err.c_str());
    }
  }
  interrupted = g_stop != 0;
  // A capture the disk could not hold fails the run (the rows may still be verified).
  if (const Status s = ep.port_->stop_capture(); !s.ok()) {
    std::fprintf(stderr, "uroce demo (%s): %s\n", role, s.message());
    rc = kExitFailure;
  }
  const bool all = rc == kExitOk;
  if (!cfg.server && cfg.json) {
    std::string out = strf("{\"command\":\"demo\",\"workload\":\"%s\",\"path_mtu\":%u,\"rows\":[", cfg.matrix ? "matrix" : "perf",
                          ep.path_mtu_);
    for (size_t i = 0; i < rows.size(); ++i) out += (i ? "," : "") + row_json(rows[i]);
    out += strf("],\"verified\":%s,\"interrupted\":%s", all ? "true" : "false", interrupted ? "true" : "false");
    if (cfg.counters) out += ",\"counters\":" + counters_report(ep, role, true);
    std::printf("%s}\n", out.c_str());
  } else if (!cfg.server) {
    size_t bad = 0;
    for (const auto& r : rows) bad += !r.verified;
    std::printf("# %s: %zu rows, %zu not verified%s\n", all ? "PASS" : "FAIL", rows.size(), bad,
                interrupted ? " (interrupted)" : "");
  }
  if (cfg.counters && !(cfg.json && !cfg.server)) std::fprintf(info, "%s", counters_report(ep, role, false).c_str());
  return rc;
}

// ---------------------------------------------------------------- the launcher

bool has_arg(const std::vector<std::string>& v, std::initializer_list<std::string_view> names) {
  for (const auto& a : v) {
    for (std::string_view n : names) {
      if (a == n || (a.size() > n.size() && a.compare(0, n.size(), n) == 0 && a[n.size()] == '=')) return true;
    }
  }
  return false;
}

int launch(const Args& args, const dpdk::SplitArgs& split, const Config& cfg) {
  std::FILE* info = cfg.json ? stderr : stdout;
  const std::string dir = make_temp_dir("demo");
  if (dir.empty()) return kExitFailure;
  const std::string sock = dir + "/memif.sock";
  const uint16_t port = cfg.oob_port ? cfg.oob_port : free_tcp_port(cfg.oob_host);
  const auto lcores = split_list(args.get_str("lcores"));
  std::fprintf(info, "# uroce demo %s\n", args.config_line().c_str());
  std::fprintf(info, "# launching server (lcore %s) and client (lcore %s) on net_memif, socket %s, out-of-band %s:%u\n",
               lcores[0].c_str(), lcores[1].c_str(), sock.c_str(), cfg.oob_host.c_str(), port);
  std::fflush(info);

  // Options both endpoints get as given; role, dev, oob-port, lcores and pcap are per endpoint.
  const std::vector<std::string> common =
      given_options(args, kDemoOptions, {"role", "dev", "oob-port", "lcores", "pcap"});
  PairLaunch pair{.tool = "demo", .sock = sock, .grace_s = int(cfg.timeout_s), .remove_dir = dir};
  for (int i = 0; i < 2; ++i) {
    const bool server = i == 0;
    std::vector<std::string>& av = pair.argv[i];
    av = {"demo"};
    std::vector<std::string> eal = split.eal;
    if (eal.empty()) {
      eal = default_eal_args();
      // memif's "no multi-process channel" notice under --no-shconf is expected here.
      eal.push_back("--log-level=pmd.net.memif:critical");
    }
    if (!has_arg(eal, {"-l", "-c", "--lcores"}) && !std::any_of(eal.begin(), eal.end(), [](const std::string& a) {
          return a.size() > 2 && (a.compare(0, 2, "-l") == 0 || a.compare(0, 2, "-c") == 0);
        })) {
      eal.push_back("-l");
      eal.push_back(lcores[i]);
    }
    if (!has_arg(eal, {"--file-prefix", "--no-shconf"})) {
      eal.push_back(strf("--file-prefix=uroce-demo-%d-%s", int(getpid()), server ? "server" : "client"));
    }
    av.insert(av.end(), eal.begin(), eal.end());
    av.push_back("--");
    av.push_back(server ? "--role=server" : "--role=client");
    av.push_back(strf("--dev=net_memif0,role=%s,socket=%s,socket-abstract=no,mac=02:00:00:00:00:0%d",
                      server ? "server" : "client", sock.c_str(), i + 1));
    av.push_back(strf("--oob-port=%u", port));
    if (!server && args.given("pcap")) av.push_back("--pcap=" + std::string(args.get_str("pcap")));
    av.insert(av.end(), common.begin(), common.end());
  }
  return run_pair(pair);
}

}  // namespace

int cmd_demo(int argc, char** argv) {
  dpdk::SplitArgs split;
  Args args;
  if (auto rc = parse_endpoint_command(kDemoCommand, argc, argv, split, args)) return *rc;
  auto usage = [](const std::string& msg) { return usage_error(kDemoCommand, msg); };

  Config cfg;
  const std::string_view role = args.get_str("role");
  cfg.server = role == "server";
  cfg.dev = std::string(args.get_str("dev"));
  cfg.matrix = args.get_str("workload") == "matrix";
  for (const auto& name : split_list(args.get_str("ops"))) {
    const auto* o = std::find_if(std::begin(kOps), std::end(kOps), [&](const OpDesc& d) { return d.name == name; });
    if (o == std::end(kOps)) return usage("unknown op '" + name + "' in --ops (send, send_imm, write, write_imm, read, cas, faa)");
    cfg.ops.push_back(o->op);
  }
  for (const auto& s : split_list(args.get_str("sizes"))) {
    const auto v = parse_uint(s);
    if (!v || *v == 0 || *v > (1u << 24)) return usage("--sizes: '" + s + "' is not a size in 1..16777216");
    cfg.sizes.push_back(uint32_t(*v));
  }
  for (const auto& s : split_list(args.get_str("matrix-types"))) {
    if (s == "rc") cfg.matrix_types.push_back(QpType::kRc);
    else if (s == "uc") cfg.matrix_types.push_back(QpType::kUc);
    else if (s == "ud") cfg.matrix_types.push_back(QpType::kUd);
    else return usage("--matrix-types: '" + s + "' is not rc, uc or ud");
  }
  if ((!cfg.matrix && (cfg.ops.empty() || cfg.sizes.empty())) || (cfg.matrix && cfg.matrix_types.empty())) {
    return usage("nothing to run");
  }
  cfg.iters = args.get_uint("iters");
  cfg.stream_bytes = args.get_uint("stream-bytes");
  cfg.stream_msgs = args.get_uint("stream-msgs");
  cfg.tx_depth = uint32_t(args.get_uint("tx-depth"));
  cfg.matrix_count = uint32_t(args.get_uint("matrix-count"));
  cfg.mtu = uint32_t(args.get_uint("mtu"));
  if (cfg.mtu && (cfg.mtu < 256 || (cfg.mtu & (cfg.mtu - 1)))) return usage("--mtu must be 0 or 256, 512, 1024, 2048, 4096");
  cfg.seed = args.get_uint("seed");
  cfg.oob_host = std::string(args.get_str("oob-host"));
  cfg.oob_port = uint16_t(args.get_uint("oob-port"));
  if (role != "launch" && cfg.oob_port == 0) cfg.oob_port = 18515;
  std::string ip = std::string(args.get_str("ip"));
  if (ip.empty()) ip = cfg.server ? "10.0.0.1" : "10.0.0.2";
  uint8_t v4[4];
  if (inet_pton(AF_INET, ip.c_str(), v4) != 1) return usage("--ip '" + ip + "' is not an IPv4 address");
  cfg.gid = Gid::from_ipv4(v4);
  if (args.given("mac")) {
    cfg.mac = parse_mac(args.get_str("mac"));
    if (!cfg.mac) return usage("--mac is not aa:bb:cc:dd:ee:ff");
  }
  cfg.ack_timeout = uint8_t(args.get_uint("ack-timeout"));
  cfg.drop_every = uint32_t(args.get_uint("drop-every"));
  if (cfg.drop_every == 1) return usage("--drop-every 1 would drop everything");
  cfg.timeout_s = uint32_t(args.get_uint("timeout"));
  cfg.pcap = std::string(args.get_str("pcap"));
  cfg.counters = args.flag("counters");
  cfg.json = args.flag("json");
  if (cfg.matrix && cfg.drop_every && std::any_of(cfg.matrix_types.begin(), cfg.matrix_types.end(),
                                                  [](QpType t) { return t != QpType::kRc; })) {
    return usage("--drop-every with UC or UD in --matrix-types: those lose messages by design (use --matrix-types rc)");
  }
  if (role == "launch") {
    if (!cfg.dev.empty()) return usage("--dev needs --role server|client (the launcher uses net_memif)");
    if (split_list(args.get_str("lcores")).size() != 2) return usage("--lcores takes two lcores, A,B");
    return launch(args, split, cfg);
  }
  if (cfg.dev.empty()) return usage("--role " + std::string(role) + " needs --dev SPEC");
  return run_endpoint(cfg, args, split);
}

}  // namespace uroce::apps
