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
// a QP that rdma_cm connects (apps/common/oob.h CmChannel), the QP info as the binary
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
//
// This header holds what the perf files share: perftest's constants, the
// parsed options (Config), the QP info (Dest) and the RDMA side (Perf).
// The files: perf_options.cc (flags, --help, Config), perf_rdma.cc (Perf:
// buffers, QPs and the measured runs), perf_exchange.{h,cc} (the
// out-of-band protocol), perf.cc (the per-test sequences, output and the
// command), perf_tcp.{h,cc} (the same tests over kernel TCP).
#pragma once

#include <bit>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rte_cycles.h>

#include <uroce/verbs.h>

#include "apps/common/args.h"
#include "apps/common/endpoint.h"
#include "apps/common/page_buffer.h"
#include "apps/common/perf_report.h"

namespace uroce::apps::perftest {

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

inline const char* verb_name(Verb v) {  // testsStr
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
inline constexpr TestKind kTests[] = {
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
  QpExt ext;             // --sr, --paths, --path-mode: what we offer (used if the peer offers too)
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
inline uint64_t addr_step(uint64_t size, uint64_t cache_line) {
  return size > cache_line ? (size + cache_line - 1) / cache_line * cache_line : cache_line;
}
/// BUFF_SIZE(): one QP's slot.
inline uint64_t slot_bytes(uint64_t size, uint64_t cycle) { return size < cycle ? cycle : size; }

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

/// uroce perf's flags, --help text and usage.
extern const CommandSpec kPerfCommand;
/// Reads args (parsed against kPerfCommand) into cfg. Returns the exit code to
/// return at once (a usage error, or a --tcp run's result), or nullopt to run.
std::optional<int> read_config(const Args& args, Config& cfg);
/// The message sizes to run: -a's 2 .. 2^23, else -s.
std::vector<uint32_t> sizes_of(const Config& cfg);

// ---------------------------------------------------------------- QP info

struct Dest {
  uint32_t lid = 0;
  uint32_t out_reads = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t rkey = 0;
  uint64_t vaddr = 0;
  Gid gid;
  uint32_t srqn = 0;  // XRC only in perftest; uroce perf's extension offer otherwise (ext_offer)
};

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
  const drivers::IoPortInfo& port_info() const { return ep_.port_info(); }

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
  PageBuffer mem_;  // page-aligned, as the stock tool aligns it
  uint8_t* buf_ = nullptr;
  uint64_t buf_bytes_ = 0;
  uint32_t max_size_ = 0;
  AddrWalk walk_;
  uint32_t out_reads_ = 1;
  Mtu curr_mtu_ = Mtu::k1024;
  // perftest's tposted / tcompleted, in TSC cycles
  std::vector<uint64_t> tposted_, tcompleted_;
};

}  // namespace uroce::apps::perftest
