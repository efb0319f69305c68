// `uroce perf`: perftest's ib_{send,write,read,atomic}_{bw,lat} on the uroce
// stack, compatible on the wire and out of band with perftest 4.5 (tag
// v4.5-0.17, read for the facts only; docs/INTEROP.md has the byte-exact
// exchange and the interop matrix):
//
//   uroce perf [EAL args --] TEST [options] [SERVER]
//   TEST = send_bw | send_lat | write_bw | write_lat | read_bw | read_lat | atomic_bw | atomic_lat
//
// Out of band (TCP, port -p 18515, AF_INET; with -R an rdma_cm connection to
// that port instead, see below): every exchange is
// symmetric, the client (the side given SERVER) writes then reads, the server
// reads then writes, one write() per message. In order: the 16-byte version
// string ("6.06", peers older than 5.70 refused), cycle buffer and cache line
// (4-byte big-endian ints, each side takes the larger), the active MTU as the
// decimal IBV_MTU code in 2 bytes (each side takes the smaller), then 108-byte
// QP-info handshakes "%04x:%04x:%06x:%06x:%08x:%016llx:" LID, OUT_READS, QPN,
// PSN, RKEY, VADDR + 16 x "%02x:" GID + "%08x:" SRQN + NUL, in the per-test
// order below, bandwidth reports (5 x 8 bytes big-endian: size, iters,
// BW peak, BW average, message rate) where perftest exchanges them, and
// "done\0" at the close. Per test (hs = one handshake of QP 0, hs* = one per QP):
//   write/read/atomic_bw  hs*, connect, hs*, hs, test, hs, reports, hs+done
//                         (non-duplex server: no test; it prints the client's report;
//                          -b: hs before the run [and after it with -a], reports per size)
//   send_bw               hs*, connect, hs, hs*, per size {post recvs, hs, test,
//                         [-b: reports], [-a: hs]}, hs+done
//   send_lat              hs*, connect, hs, hs*, per size {post recvs, hs, test}, hs+done
//   write_lat             hs, hs*, connect, hs*, hs, per size {test}        (no close)
//   read_lat/atomic_lat   hs, hs*, connect, hs*, hs, [client: tests], hs+done
//
// Per-test semantics as perftest's: QP i advertises vaddr = buf + (q + i) *
// BUFF where BUFF = max(size, cycle buffer); bw requesters walk the remote
// (and local) address by size rounded up to the cache line, wrapping within the
// cycle buffer; -t WRs in flight per QP, every -Q'th signaled (and the last);
// send_bw's server posts -r receives per QP and reposts one per completion until
// -n are posted (its credits); -b runs both directions (send: the server
// sends once the first message arrived); write_lat has no completions at the
// responder: each side polls the last byte of its receive slot for the
// iteration count the peer wrote (the server writes first), send_lat is a
// SEND ping-pong (the client first), read/atomic_lat time one operation at a
// time at the client. -o sets OUT_READS (default: our device maximum, 16):
// ours becomes the QP's max_dest_rd_atomic, the peer's our max_rd_atomic
// (clamped to 16). FETCH_AND_ADD adds 1, CMP_AND_SWAP compares 0, swaps 0.
// Bandwidth in MB/sec = 2^20 bytes/s (Gb/sec = 1e9 bit/s with --report_gbits);
// peak, average and message rate and the latency statistics (t_min, t_max,
// median, average, stdev, 99 and 99.9 percentiles of the post-to-post time,
// halved for ping-pongs, with perftest's two-sample tail cut) as perftest
// computes them, from the TSC.
//
// -R (perftest's rdma_cm mode, IPv4, one QP): the same messages as RC SENDs on
// a QP that rdma_cm connects (apps/oob.h CmChannel), the QP info as the binary
// 56-byte big-endian struct pingpong_dest, no "done"; the test QP is connected
// by a second rdma_cm connection to the same port, between two handshakes of
// all-zero QP info, in place of ctx_connect (docs/INTEROP.md "perftest with -R").
//
// The port is any rte_ethdev port (EAL args before "--"); our addresses --ip
// (GID index 0) / --ip6 (GID index 1), MAC --mac; the peer's MAC comes from the
// engine's ARP / neighbour discovery. Run-to-completion: every wait loop,
// the out-of-band waits included, calls uroce::poll(ctx, now_ns), so the stack
// keeps answering READ/atomic requests and ACKing while the app waits on TCP.
//
// Output: perftest's banner, address lines and result table (--json: one JSON
// object on stdout, the rest on stderr). SIGINT/SIGTERM stop the run; what was
// measured is still printed. Exit: 0 ok, 1 failure or interrupted, 2 usage.
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

#include "apps/addr_text.h"
#include "apps/args.h"
#include "apps/commands.h"
#include "apps/endpoint.h"
#include "apps/launch.h"
#include "apps/oob.h"
#include "apps/perf_report.h"
#include "apps/watchdog.h"
#include "apps/perf_tcp.h"
#include "drivers/dpdk/eal_args.h"

namespace uroce::apps {
namespace {

// ---------------------------------------------------------------- options

constexpr OptSpec kPerfOptions[] = {
    {.name = "size", .short_name = 's', .kind = OptKind::kUint, .def = "0", .help = "message size in bytes (0: perftest's default: bw 65536, lat 2, atomic 8)", .max = 8388608},
    {.name = "iters", .short_name = 'n', .kind = OptKind::kUint, .def = "0", .help = "iterations per QP (0: perftest's default: write_bw 5000, others 1000)", .max = 100000000},
    {.name = "all", .short_name = 'a', .help = "run sizes 2 .. 2^23 (atomic: 8 only)"},
    {.name = "mtu", .short_name = 'm', .kind = OptKind::kUint, .def = "0", .help = "path MTU 256..4096 (0: the port's active MTU); the smaller side wins", .max = 4096},
    {.name = "qp", .short_name = 'q', .kind = OptKind::kUint, .def = "1", .help = "number of QPs (bw tests)", .min = 1, .max = 64},
    {.name = "gid-index", .short_name = 'x', .kind = OptKind::kUint, .def = "0", .help = "our GID index: 0 = --ip (::ffff:a.b.c.d), 1 = --ip6", .max = 1},
    {.name = "CPU-freq", .short_name = 'F', .help = "perftest: do not fail on CPU frequency warnings; accepted (uroce times with the TSC)"},
    {.name = "duration", .short_name = 'D', .kind = OptKind::kUint, .def = "0", .help = "bw tests: run for this many seconds instead of -n (0: off)", .max = 3600},
    {.name = "bidirectional", .short_name = 'b', .help = "bw tests: traffic in both directions"},
    {.name = "atomic_type", .short_name = 'A', .kind = OptKind::kChoice, .def = "FETCH_AND_ADD", .help = "atomic tests: the operation", .choices = "FETCH_AND_ADD|CMP_AND_SWAP"},
    {.name = "outs", .short_name = 'o', .kind = OptKind::kUint, .def = "0", .help = "read/atomic: outstanding requests we accept (0: the device maximum, 16)", .max = 65535},
    {.name = "tx-depth", .short_name = 't', .kind = OptKind::kUint, .def = "0", .help = "WRs in flight per QP (0: perftest's default: bw 128, lat 1)", .max = 15000},
    {.name = "rx-depth", .short_name = 'r', .kind = OptKind::kUint, .def = "512", .help = "send tests: receives posted per QP (capped at -n)", .min = 1, .max = 16384},
    {.name = "cq-mod", .short_name = 'Q', .kind = OptKind::kUint, .def = "0", .help = "bw: signal every Nth WR (0: perftest's 100, or 1 above 8 KiB)", .max = 1024},
    {.name = "port", .short_name = 'p', .kind = OptKind::kUint, .def = "18515", .help = "out-of-band TCP port (-R: the rdma_cm port)", .max = 65535},
    {.name = "rdma_cm", .short_name = 'R', .help = "connect the QPs with rdma_cm and exchange the out-of-band data over an rdma_cm connection, no TCP (IPv4)"},
    {.name = "ib-dev", .short_name = 'd', .kind = OptKind::kString, .def = "", .help = "perftest's device name: accepted and ignored (the port is --dev)", .meta = "DEV"},
    {.name = "ib-port", .short_name = 'i', .kind = OptKind::kUint, .def = "1", .help = "port of the device (uroce devices have port 1 only)", .min = 1, .max = 1},
    {.name = "sl", .short_name = 'S', .kind = OptKind::kUint, .def = "0", .help = "service level (carried in the AH; RoCE sends no SL on the wire)", .max = 15},
    {.name = "qp-timeout", .short_name = 'u', .kind = OptKind::kUint, .def = "14", .help = "local ACK timeout code: 4.096 us * 2^N", .max = 31},
    {.name = "inline_size", .short_name = 'I', .kind = OptKind::kUint, .def = "0", .help = "perftest: max inline data; accepted (inline does not change the wire)", .max = 912},
    {.name = "connection", .short_name = 'c', .kind = OptKind::kChoice, .def = "RC", .help = "transport (perftest also has UC/UD/XRC/DC; uroce perf does RC)", .choices = "RC"},
    {.name = "events", .short_name = 'e', .help = "perftest: sleep on CQ events; accepted, uroce always polls"},
    {.name = "noPeak", .short_name = 'N', .help = "bw tests, not with -b: no peak bandwidth, so no clock read per post (always so with -D)"},
    {.name = "perform_warm_up", .help = "write/read/atomic bw: before each size, tx-depth untimed WRs on each QP, all reaped (perftest's warm-up)"},
    {.name = "report_gbits", .help = "report bandwidth in Gb/sec instead of MB/sec"},
    UROCE_ENDPOINT_OPTIONS,
    {.name = "listen", .kind = OptKind::kString, .def = "0.0.0.0", .help = "server: out-of-band listen address", .meta = "A.B.C.D"},
    {.name = "timeout", .kind = OptKind::kUint, .def = "60", .help = "seconds to wait for the peer (TCP, ARP) and for progress of a run", .min = 1, .max = 3600},
    {.name = "counters", .help = "print the device counters that are not zero at the end"},
    {.name = "json", .help = "write the results as JSON on stdout (everything else goes to stderr)"},
    {.name = "drop-rate", .kind = OptKind::kDouble, .def = "0", .help = "test hook: lose this fraction of the frames received and sent, at random (drivers/dpdk/fault_io.h)", .min = 0, .max = 1},
    {.name = "drop-seed", .kind = OptKind::kUint, .def = "1", .help = "seed of --drop-rate's losses"},
    {.name = "save-buffer", .kind = OptKind::kString, .def = "", .help = "at the end, write the registered buffer (send areas, then the areas the peer targets) to FILE", .meta = "FILE"},
    {.name = "tcp", .kind = OptKind::kChoice, .def = "off", .help = "run the test over kernel TCP instead (send/write bw and lat): block = blocking calls, busy = non-blocking + spin", .choices = "off|block|busy"},
    {.name = "busy-poll", .kind = OptKind::kUint, .def = "0", .help = "--tcp: SO_BUSY_POLL microseconds (0: not set)", .max = 1000000},
};

constexpr std::string_view kPerfDetails =
    "TEST: send_bw send_lat write_bw write_lat read_bw read_lat atomic_bw atomic_lat.\n"
    "Server: no SERVER argument (listens on --listen:-p). Client: SERVER is the server's IPv4 address.\n"
    "EAL arguments go before a '--' (uroce perf --no-huge --no-pci --no-shconf\n"
    "--vdev=net_af_packet0,iface=tap0 -- write_bw --ip 10.70.0.3 10.70.0.1); without one EAL gets\n"
    "--no-huge --no-pci --no-shconf -m 512 and a port must be given as --dev SPEC.\n"
    "Run the stock tool with -x GID_INDEX (its RoCE v2 GID of our family), or both with -R.\n"
    "Not supported: UC/UD/XRC/DC, post lists, -D on latency and -b send tests with -D.\n"
    "--tcp block|busy runs send/write bw and lat over kernel TCP (no EAL, no --ip), same columns.\n"
    "Output: perftest's table; --json keys: test, role, size, results[] (bw: bytes, iterations,\n"
    "bw_peak, bw_average, msg_rate, unit; lat: bytes, iterations, t_min, t_max, t_typical,\n"
    "t_avg, t_stdev, p99, p99_9 in usec), ok, error. Exit: 0 ok, 1 failure or interrupted, 2 usage.\n";

constexpr CommandSpec kPerfCommand = {
    .name = "perf",
    .positional = "TEST [SERVER]",
    .summary = "perftest's ib_{send,write,read,atomic}_{bw,lat} on uroce, compatible on the wire and out of band",
    .options = kPerfOptions,
    .min_positional = 1,
    .max_positional = 2,
    .details = kPerfDetails,
};


// ---------------------------------------------------------------- perftest's constants

enum class Verb : uint8_t { kSend, kWrite, kRead, kAtomic };  // perftest's VerbType order
enum class Tst : uint8_t { kBw, kLat };

inline constexpr char kVersion[16] = "6.06";         // perftest 4.5+0.17 (configure's AC_INIT)
inline constexpr double kMinPeerVersion = 5.70;       // check_version_compatibility
inline constexpr size_t kKeyMsgBytes = 108;           // KEY_MSG_SIZE_GID
inline constexpr char kDone[] = "done";               // written with its NUL
inline constexpr uint32_t kMaxSize = 8388608;         // MAX_SIZE: -a runs 2 .. 2^23
inline constexpr int kAllMaxPow = 24;
inline constexpr uint32_t kMinIters = 5;              // MIN_ITER
inline constexpr uint32_t kDefCqMod = 100;            // DEF_CQ_MOD
inline constexpr uint32_t kCqModSizeLimit = 8192;     // MSG_SIZE_CQ_MOD_LIMIT
inline constexpr uint32_t kMinRnrTimer = 12;          // MIN_RNR_TIMER
inline constexpr uint64_t kAtomicAdd = 1;             // ATOMIC_ADD_VALUE
inline constexpr uint64_t kAtomicSwap = 0;            // ATOMIC_SWAP_VALUE
inline constexpr uint32_t kAtomicBytes = 8;
inline constexpr double kMbFactor = 0x100000;         // MB/sec: 2^20 bytes
inline constexpr double kGbFactor = 125000000;        // Gb/sec: 1e9 bits
inline constexpr uint32_t kDefaultPageBytes = 4096;   // cycle buffer when sysconf fails
inline constexpr uint32_t kCacheLineBytes = 64;       // DEF_CACHE_LINE_SIZE
inline constexpr int kPumpsPerOobPoll = 256;          // engine polls per look at the out-of-band socket

const char* verb_name(Verb v) {  // testsStr
  switch (v) {
    case Verb::kSend: return "Send";
    case Verb::kWrite: return "RDMA_Write";
    case Verb::kRead: return "RDMA_Read";
    case Verb::kAtomic: return "Atomic";
  }
  return "?";
}

struct TestKind {
  std::string_view name;
  Verb verb;
  Tst tst;
};
constexpr TestKind kTests[] = {
    {"send_bw", Verb::kSend, Tst::kBw},     {"send_lat", Verb::kSend, Tst::kLat},
    {"write_bw", Verb::kWrite, Tst::kBw},   {"write_lat", Verb::kWrite, Tst::kLat},
    {"read_bw", Verb::kRead, Tst::kBw},     {"read_lat", Verb::kRead, Tst::kLat},
    {"atomic_bw", Verb::kAtomic, Tst::kBw}, {"atomic_lat", Verb::kAtomic, Tst::kLat},
};

struct Config {
  TestKind test{};
  bool server = true;
  std::string host;
  uint16_t port = 0;
  uint32_t size = 0;
  uint32_t iters = 0;
  bool all = false;
  uint32_t mtu_bytes = 0;
  uint32_t num_qp = 1;
  uint8_t gid_idx = 0;
  uint32_t duration_s = 0;
  bool duplex = false;
  bool perform_warm_up = false;
  bool no_peak = false;  // -N, or -D: the run timed as a whole
  bool cas = false;
  uint32_t outs = 0;
  uint32_t tx_depth = 0;
  uint32_t rx_depth = 0;
  uint32_t cq_mod = 0;
  bool req_cq_mod = false;
  uint8_t sl = 0;
  uint8_t qp_timeout = 14;
  bool gbits = false;
  EndpointConfig ep;  // --dev, --ip, --ip6, --mac, --port-mtu, --pcap, --drop-rate, --drop-seed
  std::string listen;
  bool rdma_cm = false;  // -R
  uint32_t timeout_s = 0;
  bool counters = false;
  bool json = false;
  std::string save_buffer;
};

/// INC(): an address step, the size rounded up to the cache line.
uint64_t addr_step(uint64_t size, uint64_t cache_line) {
  return size > cache_line ? (size + cache_line - 1) / cache_line * cache_line : cache_line;
}
/// BUFF_SIZE(): one QP's slot.
uint64_t slot_bytes(uint64_t size, uint64_t cycle) { return size < cycle ? cycle : size; }

/// perftest's increase_*_addr for one message size: post k of a QP lands at
/// offset(k). Computed once per size, so a post pays no division where the
/// slot count is a power of two (three 64-bit divisions per post were about
/// 15 % of a 64 B write_bw requester's CPU).
class AddrWalk {
 public:
  AddrWalk() = default;
  AddrWalk(bool walk, uint64_t size, uint64_t cycle, uint64_t cache_line)
      : size_(size), step_(addr_step(size, cache_line)), slots_(walk ? cycle / step_ : 1) {}
  uint64_t size() const { return size_; }
  uint64_t offset(uint64_t k) const {
    return (std::has_single_bit(slots_) ? k & (slots_ - 1) : k % slots_) * step_;
  }

 private:
  uint64_t size_ = UINT64_MAX, step_ = 1, slots_ = 1;  // no size yet
};


// ---------------------------------------------------------------- QP info message

struct Dest {
  uint32_t lid = 0;
  uint32_t out_reads = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t rkey = 0;
  uint64_t vaddr = 0;
  Gid gid;
  uint32_t srqn = 0;
};

void format_dest(const Dest& d, char (&msg)[kKeyMsgBytes]) {
  std::memset(msg, 0, sizeof(msg));
  int n = std::snprintf(msg, sizeof(msg), "%04x:%04x:%06x:%06x:%08x:%016llx:", d.lid & 0xffff, d.out_reads & 0xffff,
                        d.qpn & 0xffffff, d.psn & 0xffffff, d.rkey, (unsigned long long)d.vaddr);
  for (int i = 0; i < 16; ++i) n += std::snprintf(msg + n, sizeof(msg) - size_t(n), "%02x:", d.gid.raw[i]);
  std::snprintf(msg + n, sizeof(msg) - size_t(n), "%08x:", d.srqn);
}

/// Splits on ':' as perftest's reader does (23 hex fields); false if malformed.
bool parse_dest(const char (&msg)[kKeyMsgBytes], Dest& d) {
  std::string text(msg, strnlen(msg, kKeyMsgBytes));
  std::vector<uint64_t> f;
  size_t pos = 0;
  while (pos < text.size() && f.size() < 23) {
    const size_t colon = text.find(':', pos);
    const std::string tok = text.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    if (tok.empty()) return false;
    char* end = nullptr;
    f.push_back(std::strtoull(tok.c_str(), &end, 16));
    if (*end != '\0') return false;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  if (f.size() != 23) return false;
  d.lid = uint32_t(f[0]);
  d.out_reads = uint32_t(f[1]);
  d.qpn = uint32_t(f[2]);
  d.psn = uint32_t(f[3]);
  d.rkey = uint32_t(f[4]);
  d.vaddr = f[5];
  for (int i = 0; i < 16; ++i) d.gid.raw[i] = uint8_t(f[size_t(6 + i)]);
  d.srqn = uint32_t(f[22]);
  return true;
}

/// -R: struct pingpong_dest as perftest sends it over the rdma_cm channel
/// (rdma_write_keys, HAVE_ENDIAN): lid, out_reads, qpn, psn, rkey (u32), 4
/// bytes of padding, vaddr (u64), gid[16], srqn, gid_index (u32), all
/// big-endian; 56 bytes. The reader (rdma_read_keys) takes lid .. gid only.
inline constexpr size_t kBinDestBytes = 56;
void format_dest_bin(const Dest& d, uint32_t gid_index, uint8_t (&msg)[kBinDestBytes]) {
  std::memset(msg, 0, sizeof(msg));
  const uint32_t w[5] = {d.lid, d.out_reads, d.qpn, d.psn, d.rkey};
  for (int i = 0; i < 5; ++i) {
    const uint32_t be = __builtin_bswap32(w[i]);
    std::memcpy(msg + 4 * i, &be, 4);
  }
  const uint64_t va = __builtin_bswap64(d.vaddr);
  std::memcpy(msg + 24, &va, 8);
  std::memcpy(msg + 32, d.gid.raw, 16);
  const uint32_t tail[2] = {__builtin_bswap32(d.srqn), __builtin_bswap32(gid_index)};
  std::memcpy(msg + 48, tail, 8);
}
void parse_dest_bin(const uint8_t (&msg)[kBinDestBytes], Dest& d) {
  uint32_t w[5];
  std::memcpy(w, msg, sizeof(w));
  d.lid = __builtin_bswap32(w[0]);
  d.out_reads = __builtin_bswap32(w[1]);
  d.qpn = __builtin_bswap32(w[2]);
  d.psn = __builtin_bswap32(w[3]);
  d.rkey = __builtin_bswap32(w[4]);
  uint64_t va;
  std::memcpy(&va, msg + 24, 8);
  d.vaddr = __builtin_bswap64(va);
  std::memcpy(d.gid.raw, msg + 32, 16);
}

// ---------------------------------------------------------------- reports (wire form)

uint64_t be64_bits(uint64_t v) { return __builtin_bswap64(v); }
uint64_t double_bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof(u));
  return u;
}
double bits_double(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof(d));
  return d;
}

// ---------------------------------------------------------------- the endpoint

class Perf {
 public:
  explicit Perf(const Config& cfg) : cfg_(cfg) {}
  ~Perf();

  bool open(std::string& err);
  /// Buffers, MR, CQ, QPs (INIT) and our QP-info messages, for the exchanged
  /// cycle buffer / cache line / MTU.
  /// With cm (-R), rdma_cm creates and connects each QP (perftest's
  /// create_rdma_cm_connection) instead of create_qp + connect_qps.
  bool setup(std::string& err, const CmPeer* cm = nullptr);
  bool connect_qps(std::string& err);
  /// -R, at the end: rdma_disconnect of the QPs' connections, then up to ms
  /// for their DISCONNECTED events.
  void disconnect_cm(uint32_t ms) { ep_.cm_disconnect_all(cm_ids_, ms); }
  Endpoint& endpoint() { return ep_; }
  const dpdk::PortInfo& port_info() const { return ep_.port_info(); }

  void pump() { ep_.pump(); }
  void drain(uint32_t ms) { ep_.drain(ms); }

  // The runs (perftest's run_iter_*). Each returns false with err set.
  bool run_bw(uint32_t size, BwReport& rep, std::string& err);          // requesters; -b write/read/atomic too
  bool warm_up(uint32_t size, std::string& err);                         // perform_warm_up, before run_bw
  bool post_recvs_all(uint32_t size, std::string& err);                  // ctx_set_recv_wqes
  bool run_bw_send_server(uint32_t size, BwReport& rep, std::string& err);
  bool run_bi_send(uint32_t size, BwReport& rep, std::string& err);
  bool run_lat(uint32_t size, LatReport& rep, std::string& err);

  std::vector<Dest>& me() { return me_; }
  std::vector<Dest>& rem() { return rem_; }
  const Gid& gid() const { return gid_; }
  Mtu curr_mtu() const { return curr_mtu_; }
  void set_curr_mtu(Mtu m) { curr_mtu_ = m; }
  Mtu port_mtu() const { return ep_.max_mtu(); }
  uint32_t cycle_buffer = kDefaultPageBytes;
  uint32_t cache_line = kCacheLineBytes;
  uint32_t out_reads() const { return out_reads_; }
  void print_counters(std::FILE* out) const { ep_.print_counters(out, false); }
  std::string counters_json() const { return ep_.counters_json(); }
  bool save_buffer(const std::string& path, std::string& err) const;

 private:
  bool connect_cm(const CmPeer& peer, const QpInitAttr& ia, std::string& err);
  uint64_t slot() const { return slot_bytes(max_size_, cycle_buffer); }
  uint8_t* send_area(uint32_t qi) { return buf_ + uint64_t(qi) * slot(); }
  uint8_t* recv_area(uint32_t qi) { return buf_ + uint64_t(cfg_.num_qp + qi) * slot(); }
  bool post_one(uint32_t qi, uint32_t size, uint64_t k, bool signaled);
  /// The address walk of size (bw only, and only when size <= cycle/2), cached.
  const AddrWalk& walk(uint32_t size) {
    if (walk_.size() != size) {
      walk_ = AddrWalk(cfg_.test.tst == Tst::kBw && size <= cycle_buffer / 2, size, cycle_buffer, cache_line);
    }
    return walk_;
  }
  bool post_recv_one(uint32_t qi, uint32_t size, uint64_t k);
  double mhz() const { return double(rte_get_tsc_hz()) / 1e6; }
  void fill_bw(uint32_t size, uint64_t tot, bool no_peak, uint32_t cq_mod, BwReport& rep) const;
  bool wc_ok(const Wc& wc, const char* what, std::string& err) const;

  const Config& cfg_;
  Endpoint ep_;  // first: it outlives the objects below
  Gid gid_;
  Mr* mr_ = nullptr;
  Cq* cq_ = nullptr;   // send completions
  Cq* rcq_ = nullptr;  // receive completions (perftest's recv_cq; the send CQ unless a send test)
  std::vector<Qp*> qps_;
  std::vector<CmId*> cm_ids_;  // -R: the ids that own qps_
  std::vector<Dest> me_, rem_;
  std::unique_ptr<uint8_t[]> mem_;
  uint8_t* buf_ = nullptr;
  uint64_t buf_bytes_ = 0;
  uint32_t max_size_ = 0;
  AddrWalk walk_;
  uint32_t out_reads_ = 1;
  Mtu curr_mtu_ = Mtu::k1024;
  // perftest's tposted / tcompleted, in TSC cycles
  std::vector<uint64_t> tposted_, tcompleted_;
};

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
  mem_.reset(new (std::align_val_t(4096)) uint8_t[buf_bytes_]);
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
                      .max_rd_atomic = uint8_t(std::clamp<uint32_t>(rem_[i].out_reads, 1, 16))};
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

// ---------------------------------------------------------------- the out-of-band protocol

/// Where -R's rdma_cm connections go: the server binds --listen, the client
/// dials SERVER, both on -p (perftest 4.5: IPv4, port space TCP).
CmPeer cm_peer(const Config& cfg) {
  const std::optional<Gid> ip = parse_ip_gid(cfg.server ? cfg.listen : cfg.host, false);
  const bool any = cfg.server && cfg.listen == "0.0.0.0";
  return CmPeer{.server = cfg.server, .addr = SockAddr{any || !ip ? Gid{} : *ip, cfg.port}, .timeout_s = cfg.timeout_s};
}

/// perftest's out-of-band exchange: the client writes then reads, the server
/// reads then writes; every wait pumps the engine. The channel is TCP, or with
/// -R an rdma_cm connection (CmChannel); the messages are the same except the
/// QP info (text over TCP, binary over rdma_cm) and the close ("done" over TCP only).
class Oob {
 public:
  Oob(Perf& perf, const Config& cfg) : perf_(perf), cfg_(cfg) {
    if (cfg.rdma_cm) {
      cm_.emplace(perf.endpoint());
    } else {
      tcp_.emplace(&g_stop);
    }
  }

  bool open(std::string& err) {
    auto idle = [this] { perf_.pump(); };
    if (cm_) {
      if (cm_->open(cm_peer(cfg_), err)) return true;
      err = "Unable to init the rdma_cm connection to " + (cfg_.server ? cfg_.listen : cfg_.host) + ":" +
            std::to_string(cfg_.port) + ": " + err;
      return false;
    }
    if (cfg_.server) return tcp_->accept_one(cfg_.listen, cfg_.port, cfg_.timeout_s, idle, err);
    if (!tcp_->connect_to(cfg_.host, cfg_.port, cfg_.timeout_s, idle, err)) {
      err = "Couldn't connect to " + cfg_.host + ":" + std::to_string(cfg_.port) + ": " + err;
      return false;
    }
    return true;
  }

  bool xchg(const void* mine, void* theirs, size_t n, const char* what, std::string& err) {
    // The responder of a bw test does all its work in here: poll the engine a
    // burst of times per look at the socket (one recv() syscall and a clock
    // read per look took half the responder's core and capped the rate).
    auto idle = [this] {
      for (int i = 0; i < kPumpsPerOobPoll; ++i) perf_.pump();
    };
    auto send = [&] {
      if (cm_ ? cm_->send_wait(mine, n, cfg_.timeout_s, err) : tcp_->send_bytes(mine, n)) return true;
      err = std::string("Couldn't send ") + what + (cm_ ? ": " + err : "");
      return false;
    };
    auto recv = [&] {
      if (cm_ ? cm_->recv_wait(theirs, n, cfg_.timeout_s, err) : tcp_->recv_wait(theirs, n, cfg_.timeout_s, idle, err)) {
        return true;
      }
      err = std::string("Couldn't read ") + what + ": " + err;
      return false;
    };
    return cfg_.server ? recv() && send() : send() && recv();
  }

  /// ctx_hand_shake for QP qi: 108-byte QP info each way (-R: 56 bytes, binary).
  bool hs(uint32_t qi, std::string& err) { return hs_dest(perf_.me()[qi], perf_.rem()[qi], err); }
  bool hs_all(std::string& err) {
    for (uint32_t i = 0; i < cfg_.num_qp; ++i) {
      if (!hs(i, err)) return false;
    }
    return true;
  }
  /// -R: the handshakes before and after the QPs' rdma_cm connections
  /// (create_rdma_cm_connection), made with the still all-zero QP info.
  bool hs_zero(std::string& err) {
    Dest zero, ignored;
    return hs_dest(zero, ignored, err);
  }
  /// ctx_close_connection: one more handshake, then over TCP "done\0" (never read back).
  bool close(std::string& err) {
    if (!hs(0, err)) return false;
    if (tcp_ && !tcp_->send_bytes(kDone, sizeof(kDone))) {
      err = "Couldn't write \"done\"";
      return false;
    }
    return true;
  }
  /// -R: rdma_disconnect of the channel's connection (the peer destroys its id).
  void disconnect() {
    if (cm_) cm_->disconnect(1000);
  }
  /// xchg_bw_reports: size, iters (u64 since the peer is >= 5.33), peak, average,
  /// message rate, each 8 bytes big-endian, each its own exchange.
  bool reports(const BwReport& mine, BwReport& theirs, std::string& err) {
    const uint64_t out[5] = {be64_bits(mine.size), be64_bits(mine.iters), be64_bits(double_bits(mine.bw_peak)),
                             be64_bits(double_bits(mine.bw_avg)), be64_bits(double_bits(mine.msg_rate))};
    uint64_t in[5] = {};
    for (int i = 0; i < 5; ++i) {
      if (!xchg(&out[i], &in[i], 8, "the bw reports", err)) return false;
    }
    theirs.size = be64_bits(in[0]);
    theirs.iters = be64_bits(in[1]);
    theirs.bw_peak = bits_double(be64_bits(in[2]));
    theirs.bw_avg = bits_double(be64_bits(in[3]));
    theirs.msg_rate = bits_double(be64_bits(in[4]));
    return true;
  }
  uint32_t handshakes() const { return handshakes_; }

 private:
  bool hs_dest(const Dest& me, Dest& rem, std::string& err) {
    if (cm_) {
      uint8_t mine[kBinDestBytes], theirs[kBinDestBytes];
      format_dest_bin(me, cfg_.gid_idx, mine);
      if (!xchg(mine, theirs, sizeof(mine), "the QP info", err)) return false;
      ++handshakes_;
      parse_dest_bin(theirs, rem);
      return true;
    }
    char mine[kKeyMsgBytes], theirs[kKeyMsgBytes];
    format_dest(me, mine);
    if (!xchg(mine, theirs, sizeof(mine), "the QP info", err)) return false;
    ++handshakes_;
    if (!parse_dest(theirs, rem)) {
      err = "Couldn't parse line <" + std::string(theirs, strnlen(theirs, sizeof(theirs))) + ">";
      return false;
    }
    return true;
  }

  Perf& perf_;
  const Config& cfg_;
  std::optional<TcpChannel> tcp_;
  std::optional<CmChannel> cm_;
  uint32_t handshakes_ = 0;
};

// ---------------------------------------------------------------- output

void print_dest(std::FILE* out, const char* side, const Dest& d, Verb verb) {  // ctx_print_pingpong_data
  std::fprintf(out, " %s address: LID %#04x QPN %#06x PSN %#06x", side, d.lid, d.qpn, d.psn);
  if (verb == Verb::kRead) std::fprintf(out, " OUT %#04x", d.out_reads);
  if (verb == Verb::kRead || verb == Verb::kWrite) {
    std::fprintf(out, " RKey %#08x VAddr %#016llx", d.rkey, (unsigned long long)d.vaddr);
  }
  std::fprintf(out, "\n GID: ");
  for (int i = 0; i < 16; ++i) std::fprintf(out, "%02d%s", d.gid.raw[i], i < 15 ? ":" : "\n");
}

void print_test_info(std::FILE* out, const Config& cfg, const Perf& perf) {  // ctx_print_test_info
  std::fprintf(out, "%s                    %s ", kResultLine, verb_name(cfg.test.verb));
  if (cfg.test.verb == Verb::kAtomic) std::fprintf(out, "%s ", cfg.cas ? "CMP_AND_SWAP" : "FETCH_AND_ADD");
  if (cfg.test.tst == Tst::kBw) {
    std::fprintf(out, "%sBW Test\n", cfg.duplex ? "Bidirectional " : "");
  } else {
    std::fprintf(out, "Latency Test\n");
  }
  std::fprintf(out, " Dual-port       : OFF\t\tDevice         : %s\n", perf.port_info().name.c_str());
  std::fprintf(out, " Number of qps   : %u\t\tTransport type : IB\n", cfg.num_qp);
  std::fprintf(out, " Connection type : RC\t\tUsing SRQ      : OFF\n");
  std::fprintf(out, " PCIe relax order: Unsupported\n ibv_wr* API     : OFF\n");
  if (!cfg.server || cfg.duplex) std::fprintf(out, " TX depth        : %u\n", cfg.tx_depth);
  if (cfg.test.verb == Verb::kSend && (cfg.server || cfg.duplex || cfg.test.tst == Tst::kLat)) {
    std::fprintf(out, " RX depth        : %u\n", cfg.rx_depth);
  }
  if (cfg.test.tst == Tst::kBw) std::fprintf(out, " CQ Moderation   : %u\n", cfg.cq_mod);
  std::fprintf(out, " Mtu             : %u[B]\n Link type       : Ethernet\n GID index       : %u\n", mtu_bytes(perf.curr_mtu()),
               cfg.gid_idx);
  if (cfg.test.verb == Verb::kRead || cfg.test.verb == Verb::kAtomic) {
    std::fprintf(out, " Outstand reads  : %u\n", perf.out_reads());
  } else {
    std::fprintf(out, " Max inline data : 0[B]\n");
  }
  std::fprintf(out, cfg.rdma_cm ? " rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n%s" : " rdma_cm QPs\t : OFF\n Data ex. method : Ethernet\n%s",
               kResultLine);
}

// ---------------------------------------------------------------- the test sequences

std::vector<uint32_t> sizes_of(const Config& cfg) {
  std::vector<uint32_t> v;
  if (cfg.all && cfg.test.verb != Verb::kAtomic) {
    for (int i = 1; i < kAllMaxPow; ++i) v.push_back(1u << i);
  } else {
    v.push_back(cfg.size);
  }
  return v;
}

/// A bw result line: ours, or with -b ours plus the peer's (each side's
/// report exchanged, as perftest's xchg_bw_reports, then summed).
bool bw_line(Oob& oob, const Config& cfg, const BwReport& r, Output& out, std::string& err) {
  if (!cfg.duplex) {
    out.bw_line(r);
    return true;
  }
  BwReport theirs;
  if (!oob.reports(r, theirs, err)) return false;
  BwReport sum = r;
  sum.bw_peak += theirs.bw_peak;
  sum.bw_avg += theirs.bw_avg;
  sum.msg_rate += theirs.msg_rate;
  out.bw_line(sum);
  return true;
}

/// Everything after the TCP connection: versions, system data, MTU, resources,
/// the per-test handshakes and runs. False with err set.
bool run_test(Perf& perf, Oob& oob, const Config& cfg, Output& out, std::string& err) {
  const Verb verb = cfg.test.verb;
  // exchange_versions / check_version_compatibility
  char rem_version[16] = {};
  if (!oob.xchg(kVersion, rem_version, sizeof(kVersion), "the version", err)) return false;
  rem_version[15] = 0;
  if (std::atof(rem_version) < kMinPeerVersion) {
    err = "Current implementation is not compatible with versions older than 5.70 (the peer sent \"" +
          std::string(rem_version) + "\")";
    return false;
  }
  // check_sys_data: cycle buffer (page size) and cache line, big-endian; the larger wins
  const long page = sysconf(_SC_PAGESIZE);
  const uint32_t my_cycle = page > 0 ? uint32_t(page) : kDefaultPageBytes;
  uint32_t out_be = __builtin_bswap32(my_cycle), in_be = 0;
  if (!oob.xchg(&out_be, &in_be, 4, "the page size", err)) return false;
  perf.cycle_buffer = std::max(my_cycle, __builtin_bswap32(in_be));
  out_be = __builtin_bswap32(kCacheLineBytes);
  if (!oob.xchg(&out_be, &in_be, 4, "the cache line size", err)) return false;
  perf.cache_line = std::max(kCacheLineBytes, __builtin_bswap32(in_be));
  // check_mtu: the IBV_MTU code as decimal text in 2 bytes; the smaller wins
  Mtu mine = perf.port_mtu();
  if (cfg.mtu_bytes) mine = Mtu(std::countr_zero(cfg.mtu_bytes) - 7);
  char cur[2] = {char('0' + uint8_t(mine)), 0}, rem[2] = {};
  if (!oob.xchg(cur, rem, 2, "the MTU", err)) return false;
  const int rem_mtu = rem[0] - '0';
  perf.set_curr_mtu(rem_mtu >= 1 && rem_mtu <= 5 && rem_mtu < int(mine) ? Mtu(rem_mtu) : mine);

  if (cfg.rdma_cm) {  // create_rdma_cm_connection: hs, the QPs' rdma_cm connections, hs
    const CmPeer peer = cm_peer(cfg);
    if (!oob.hs_zero(err) || !perf.setup(err, &peer) || !oob.hs_zero(err)) return false;
  } else if (!perf.setup(err)) {
    return false;
  }
  // -R: rdma_cm has connected the QPs already (perftest skips ctx_connect)
  auto connect = [&] { return cfg.rdma_cm || perf.connect_qps(err); };
  print_test_info(out.info, cfg, perf);
  auto print_local = [&] {
    for (const Dest& d : perf.me()) print_dest(out.info, "local", d, verb);
  };
  auto print_remote = [&] {
    for (const Dest& d : perf.rem()) print_dest(out.info, "remote", d, verb);
  };
  const std::vector<uint32_t> sizes = sizes_of(cfg);

  if (cfg.test.tst == Tst::kBw && verb != Verb::kSend) {  // write_bw, read_bw, atomic_bw
    if (!oob.hs_all(err) || !connect()) return false;
    print_local();
    if (!oob.hs_all(err)) return false;
    print_remote();
    if (!oob.hs(0, err)) return false;  // after RTR
    out.bw_header();
    if (cfg.server && !cfg.duplex) {  // the target: waits for the client to finish, prints its report
      BwReport zero, theirs;
      if (!oob.hs(0, err) || !oob.reports(zero, theirs, err)) return false;
      out.bw_line(theirs);
      if (!oob.close(err)) return false;
      std::fprintf(out.info, "%s", kResultLine);
      return true;
    }
    BwReport last;
    for (uint32_t s : sizes) {
      if (cfg.duplex && !oob.hs(0, err)) return false;
      BwReport r;
      if (cfg.perform_warm_up && !perf.warm_up(s, err)) return false;
      if (!perf.run_bw(s, r, err)) {
        if (r.iters) out.bw_line(r);
        return false;
      }
      if (cfg.duplex && cfg.all && !oob.hs(0, err)) return false;  // perftest >= 4.6, -a -b
      if (!bw_line(oob, cfg, r, out, err)) return false;
      last = r;
    }
    std::fprintf(out.info, "%s", kResultLine);
    if (!cfg.server && !cfg.duplex) {
      BwReport theirs;
      if (!oob.hs(0, err) || !oob.reports(last, theirs, err)) return false;
    }
    return oob.close(err);
  }

  if (cfg.test.tst == Tst::kBw) {  // send_bw
    if (!oob.hs_all(err) || !connect() || !oob.hs(0, err)) return false;
    print_local();
    if (!oob.hs_all(err)) return false;
    print_remote();
    out.bw_header();
    for (uint32_t s : sizes) {
      if ((cfg.server || cfg.duplex) && !perf.post_recvs_all(s, err)) return false;
      if (!oob.hs(0, err)) return false;
      BwReport r;
      const bool ok = cfg.duplex ? perf.run_bi_send(s, r, err)
                      : cfg.server ? perf.run_bw_send_server(s, r, err)
                                   : perf.run_bw(s, r, err);
      if (!ok) {
        if (r.iters) out.bw_line(r);
        return false;
      }
      if (!bw_line(oob, cfg, r, out, err)) return false;
      if (cfg.all && !oob.hs(0, err)) return false;
    }
    std::fprintf(out.info, "%s", kResultLine);
    return oob.close(err);
  }

  if (verb == Verb::kSend) {  // send_lat
    if (!oob.hs_all(err) || !connect() || !oob.hs(0, err)) return false;
    print_local();
    if (!oob.hs_all(err)) return false;
    print_remote();
    out.lat_header();
    for (uint32_t s : sizes) {
      if (!perf.post_recvs_all(s, err) || !oob.hs(0, err)) return false;
      LatReport r;
      if (!perf.run_lat(s, r, err)) return false;
      out.lat_line(r);
    }
    std::fprintf(out.info, "%s", kResultLine);
    return oob.close(err);
  }

  // write_lat, read_lat, atomic_lat
  if (!oob.hs(0, err) || !oob.hs_all(err) || !connect()) return false;
  print_local();
  if (!oob.hs_all(err)) return false;
  print_remote();
  if (!oob.hs(0, err)) return false;  // after RTR
  if (verb != Verb::kWrite && cfg.server) {  // only the client reads
    if (!oob.close(err)) return false;
    std::fprintf(out.info, "%s", kResultLine);
    return true;
  }
  out.lat_header();
  for (uint32_t s : sizes) {
    LatReport r;
    if (!perf.run_lat(s, r, err)) return false;
    out.lat_line(r);
  }
  if (verb != Verb::kWrite && !oob.close(err)) return false;  // write_lat has no close
  std::fprintf(out.info, "%s", kResultLine);
  return true;
}

void print_json(const Config& cfg, const Output& out, bool ok, const std::string& error, const std::string& counters) {
  std::printf("{\"command\":\"perf\",\"test\":\"%.*s\",\"role\":\"%s\",\"size\":%u,\"iters\":%u,\"num_qp\":%u,"
              "\"bidirectional\":%s,\"all\":%s,\"results\":",
              int(cfg.test.name.size()), cfg.test.name.data(), cfg.server ? "server" : "client", cfg.size, cfg.iters,
              cfg.num_qp, cfg.duplex ? "true" : "false", cfg.all ? "true" : "false");
  out.print_json_results();
  std::printf(",\"counters\":%s,\"ok\":%s,\"interrupted\":%s,\"error\":\"%s\"}\n", counters.c_str(),
              ok ? "true" : "false", g_stop ? "true" : "false", json_escape(error).c_str());
}

}  // namespace

int cmd_perf(int argc, char** argv) {
  dpdk::SplitArgs split;
  Args args;
  if (auto rc = parse_endpoint_command(kPerfCommand, argc, argv, split, args)) return *rc;
  auto usage = [](const std::string& msg) { return usage_error(kPerfCommand, msg); };
  Config cfg;
  const std::string_view test = args.positional()[0];
  const TestKind* kind = nullptr;
  for (const TestKind& t : kTests) {
    if (t.name == test) kind = &t;
  }
  if (!kind) return usage("unknown test '" + std::string(test) + "'");
  cfg.test = *kind;
  const bool bw = kind->tst == Tst::kBw;
  cfg.server = args.positional().size() < 2;
  if (!cfg.server) cfg.host = std::string(args.positional()[1]);
  cfg.port = uint16_t(args.get_uint("port"));
  cfg.all = args.flag("all");
  cfg.size = uint32_t(args.get_uint("size"));
  if (kind->verb == Verb::kAtomic) {
    if (cfg.size != 0 && cfg.size != kAtomicBytes) return usage("Message size cannot be changed for Atomic tests");
    cfg.size = kAtomicBytes;
  } else if (cfg.size == 0) {
    cfg.size = bw ? 65536 : 2;
  }
  cfg.iters = uint32_t(args.get_uint("iters"));
  if (cfg.iters == 0) cfg.iters = kind->verb == Verb::kWrite && bw ? 5000 : 1000;
  if (cfg.iters < kMinIters) return usage("-n must be at least 5 (perftest's MIN_ITER)");
  const uint64_t mtu = args.get_uint("mtu");
  if (mtu != 0 && (mtu < 256 || (mtu & (mtu - 1)))) return usage("--mtu must be 256, 512, 1024, 2048 or 4096");
  cfg.mtu_bytes = uint32_t(mtu);
  cfg.num_qp = uint32_t(args.get_uint("qp"));
  if (!bw && cfg.num_qp != 1) return usage("-q is for the bw tests");
  cfg.gid_idx = uint8_t(args.get_uint("gid-index"));
  cfg.duration_s = uint32_t(args.get_uint("duration"));
  cfg.duplex = args.flag("bidirectional");
  if (cfg.duplex && !bw) return usage("-b is for the bw tests");
  if (cfg.duration_s && (!bw || cfg.all || (cfg.duplex && kind->verb == Verb::kSend))) {
    return usage("-D is supported for the bw tests without -a (send_bw: not with -b)");
  }
  if (cfg.duration_s && cfg.duplex) return usage("-D with -b is not supported");
  cfg.cas = args.get_str("atomic_type") == "CMP_AND_SWAP";
  if (args.given("atomic_type") && kind->verb != Verb::kAtomic) return usage("-A is for the atomic tests");
  cfg.perform_warm_up = args.flag("perform_warm_up");
  if (cfg.perform_warm_up && !(bw && kind->verb != Verb::kSend)) {
    return usage("--perform_warm_up is for the write, read and atomic bw tests (as perftest)");
  }
  cfg.no_peak = args.flag("noPeak");
  if (cfg.no_peak && (!bw || cfg.duplex)) return usage("-N is for the bw tests without -b");
  if (cfg.duration_s) cfg.no_peak = true;  // -D runs are timed as a whole (checked above: bw, not -b)
  cfg.outs = uint32_t(args.get_uint("outs"));
  cfg.tx_depth = uint32_t(args.get_uint("tx-depth"));
  if (cfg.tx_depth == 0) cfg.tx_depth = bw ? 128 : 1;
  if (!cfg.duration_s) cfg.tx_depth = std::min(cfg.tx_depth, cfg.iters);  // force_dependecies
  cfg.rx_depth = uint32_t(args.get_uint("rx-depth"));
  if (kind->verb == Verb::kSend && !cfg.duration_s) cfg.rx_depth = std::min(cfg.rx_depth, cfg.iters);
  cfg.req_cq_mod = args.given("cq-mod") && args.get_uint("cq-mod") != 0;
  cfg.cq_mod = cfg.req_cq_mod ? uint32_t(args.get_uint("cq-mod")) : kDefCqMod;
  if (cfg.size > kCqModSizeLimit && !cfg.all && !cfg.req_cq_mod) cfg.cq_mod = 1;
  cfg.cq_mod = std::min(cfg.cq_mod, cfg.tx_depth);
  cfg.sl = uint8_t(args.get_uint("sl"));
  cfg.qp_timeout = uint8_t(args.get_uint("qp-timeout"));
  cfg.gbits = args.flag("report_gbits");
  if (args.get_str("tcp") != "off") {  // the kernel-TCP comparison path: perf_tcp.cc
    if (kind->verb == Verb::kRead || kind->verb == Verb::kAtomic || cfg.num_qp != 1 || cfg.duplex || cfg.duration_s ||
        cfg.perform_warm_up) {
      return usage("--tcp runs send/write bw and lat on one connection, without -b, -D and --perform_warm_up");
    }
    return run_perf_tcp({.test = test, .bw = bw, .server = cfg.server, .host = cfg.host,
                         .listen = std::string(args.get_str("listen")), .port = cfg.port, .sizes = sizes_of(cfg),
                         .iters = cfg.iters, .busy = args.get_str("tcp") == "busy",
                         .busy_poll_us = uint32_t(args.get_uint("busy-poll")), .gbits = cfg.gbits,
                         .json = args.flag("json"), .timeout_s = uint32_t(args.get_uint("timeout")),
                         .config_line = args.config_line()});
  }
  if (const std::string e = read_endpoint_options(args, cfg.gid_idx, "-x", cfg.ep); !e.empty()) return usage(e);
  cfg.ep.max_qp = cfg.num_qp + 4;
  cfg.listen = std::string(args.get_str("listen"));
  cfg.rdma_cm = args.flag("rdma_cm");
  if (cfg.rdma_cm && (cfg.gid_idx != 0 || cfg.num_qp != 1)) {
    return usage("-R is for IPv4 (-x 0) and one QP, as perftest 4.5's rdma_cm path");
  }
  if (cfg.rdma_cm && !parse_ip_gid(cfg.server ? cfg.listen : cfg.host, false)) {
    return usage("-R needs an IPv4 SERVER / --listen");
  }
  cfg.timeout_s = uint32_t(args.get_uint("timeout"));
  cfg.ep.timeout_s = cfg.timeout_s;
  cfg.counters = args.flag("counters");
  cfg.json = args.flag("json");
  cfg.ep.drop_rate = args.get_double("drop-rate");
  cfg.ep.drop_seed = args.get_uint("drop-seed");
  cfg.save_buffer = std::string(args.get_str("save-buffer"));

  Output out;
  out.info = cfg.json ? stderr : stdout;
  out.gbits = cfg.gbits;
  const char* role = cfg.server ? "server" : "client";
  for (const char* name : {"CPU-freq", "events", "inline_size", "ib-dev"}) {
    if (args.given(name)) std::fprintf(out.info, "# note: --%s is accepted for perftest compatibility and has no effect here\n", name);
  }
  if (!start_endpoint_process("perf", split)) return kExitFailure;
  std::fprintf(out.info, "# uroce perf %.*s %s\n", int(test.size()), test.data(), args.config_line().c_str());
  std::string err;
  Perf perf(cfg);
  if (!perf.open(err)) {
    std::fprintf(stderr, "uroce perf (%s): %s\n", role, err.c_str());
    return kExitFailure;
  }
  const auto& pi = perf.port_info();
  std::fprintf(out.info, "# %.*s %s: port %s (%s) mtu %u, mac %s, gid %s, lcore %u%s%s\n", int(test.size()), test.data(), role,
               pi.name.c_str(), pi.driver.c_str(), pi.mtu, mac_str(perf.endpoint().mac()).c_str(),
               gid_str(perf.gid()).c_str(), rte_lcore_id(), cfg.ep.pcap.empty() ? "" : ", capture ", cfg.ep.pcap.c_str());
  if (cfg.server) {
    std::fprintf(out.info, "\n************************************\n* Waiting for client to connect... *\n************************************\n");
  }
  bool ok = false;
  {
    Oob oob(perf, cfg);
    ok = oob.open(err) && run_test(perf, oob, cfg, out, err);
    if (cfg.rdma_cm) {  // perftest's destroy_ctx: the QPs' connections, then the channel's
      perf.disconnect_cm(1000);
      oob.disconnect();
    }
    // Let the last ACKs and READ/atomic responses leave before the port closes.
    perf.drain(200);
  }
  if (!perf.endpoint().close_capture(err)) ok = false;
  if (ok && !cfg.save_buffer.empty()) ok = perf.save_buffer(cfg.save_buffer, err);
  if (cfg.json) print_json(cfg, out, ok, err, perf.counters_json());
  if (cfg.counters) perf.print_counters(out.info);
  if (!ok) {
    std::fprintf(stderr, "uroce perf (%.*s %s): %s\n", int(test.size()), test.data(), role, err.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace uroce::apps
