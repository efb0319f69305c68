// What the `uroce demo` files share (demo.cc describes the tool): the data
// patterns every byte is checked against (demo_pattern.cc), the operations,
// the out-of-band messages, the options (Config), one result row, and the
// three roles: DemoPeer (port, device, QPs, memory: demo_peer.cc), Target
// (the server: demo_target.cc) and Driver (the client: demo_driver.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <uroce/verbs.h>
#include <uroce/wr.h>

#include "apps/common/endpoint.h"
#include "apps/common/launch.h"
#include "apps/common/oob.h"
#include "apps/common/page_buffer.h"
#include "stack/common/rng.h"
#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/fault_io.h"
#include "drivers/dpdk/tsc_clock.h"

namespace uroce::apps::demo {

using dpdk::DpdkPort;
using dpdk::DpdkPortConfig;
using dpdk::TscClock;

// ---------------------------------------------------------------- data patterns

/// Key of message k of a case: every byte of the message derives from it.
inline uint64_t msg_key(uint64_t case_seed, uint64_t k) { return splitmix64_of(case_seed ^ splitmix64_of(k)); }
/// Last byte of message k: odd, so never the poison 0, and different from message k-1's.
inline uint8_t msg_tag(uint64_t k) { return uint8_t(2 * k + 1); }
inline uint32_t msg_imm(uint64_t case_seed, uint64_t k) { return uint32_t(msg_key(case_seed, k) >> 32); }

// Atomics: the CAS chain v0 -> v1 -> ... and the FAA addends, from the seed.
inline uint64_t atomic_initial(uint64_t seed) { return msg_key(seed, ~0ull); }
inline uint64_t cas_value(uint64_t seed, uint64_t k) { return k == 0 ? atomic_initial(seed) : msg_key(seed, k) | 1; }
inline uint64_t faa_add(uint64_t seed, uint64_t k) { return (msg_key(seed, k) & 0xffff) + 1; }

/// Message bytes from key with the last byte = tag; check: -1 if p holds
/// them, else the offset of the first wrong byte; mismatch: that as text;
/// atomic_final: the atomic word after count CAS / FAA of a case.
void fill(uint8_t* p, uint32_t len, uint64_t key, uint8_t tag);
int64_t check(const uint8_t* p, uint32_t len, uint64_t key, uint8_t tag);
std::string mismatch(const uint8_t* p, uint32_t len, uint64_t seed, uint64_t k, int64_t off);
uint64_t atomic_final(uint64_t seed, WrOpcode op, uint64_t count);

// ---------------------------------------------------------------- operations

struct OpDesc {
  std::string_view name;
  WrOpcode op;
};
inline constexpr OpDesc kOps[] = {
    {"send", WrOpcode::kSend},          {"send_imm", WrOpcode::kSendWithImm},
    {"write", WrOpcode::kRdmaWrite},    {"write_imm", WrOpcode::kRdmaWriteWithImm},
    {"read", WrOpcode::kRdmaRead},      {"cas", WrOpcode::kAtomicCmpAndSwp},
    {"faa", WrOpcode::kAtomicFetchAndAdd},
};
inline std::string_view op_name(WrOpcode op) {
  for (const auto& o : kOps) {
    if (o.op == op) return o.name;
  }
  return "?";
}
inline std::string_view type_name(QpType t) { return t == QpType::kRc ? "RC" : t == QpType::kUc ? "UC" : "UD"; }

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

// The TCP channel itself is shared with `uroce pingpong` (apps/common/oob.h).
using Oob = TcpChannel;

// ---------------------------------------------------------------- the endpoint

struct Config {
  bool server = false;
  std::string driver = "dpdk";  ///< the packet driver (drivers/registry.h)
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
  uint8_t qp_timeout = 0;
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
inline uint32_t largest_path_mtu(uint32_t eth_mtu) {
  uint32_t best = 256;
  for (uint32_t m = 512; m <= 4096; m *= 2) {
    if (m + 84 <= eth_mtu) best = m;
  }
  return best;
}

/// One demo process: the apps' Endpoint (port, device, PD, clock; the port
/// takes --mac, --drop-every loses frames, keys from --seed), one RC, one UC
/// and one UD QP on shared CQs, and the memory the peer targets.
class DemoPeer {
 public:
  explicit DemoPeer(const Config& cfg) : cfg_(cfg) {}

  bool open(std::string& err);
  uint32_t pump() { return endpoint_.pump(); }
  bool connect(Oob& oob, std::string& err);

  Qp* qp(QpType t) { return t == QpType::kRc ? rc_ : t == QpType::kUc ? uc_ : ud_; }
  uint32_t stride(uint32_t size, QpType t) const {
    return std::max(64u, (size + (t == QpType::kUd ? 40u : 0u) + 63u) & ~63u);
  }
  uint32_t slots(uint32_t size, QpType t) const { return uint32_t(area_bytes_ / stride(size, t)); }
  /// The slots a case cycles through, both ends alike. A pingpong takes two,
  /// each message checked before its slot comes round again: its buffers stay
  /// in cache, as perftest's one buffer does (cycling the whole 32 MB area
  /// made a 64 KB SEND's half round trip 1.5x uroce perf's), and a receive is
  /// always posted for the next message. A stream fills the area.
  uint64_t case_slots(uint32_t size, QpType t, Mode m) const {
    const uint64_t all = std::max<uint64_t>(1, slots(size, t));
    return m == Mode::kPingpong ? std::min<uint64_t>(all, 2) : all;
  }
  uint8_t* area() { return mem_.get() + kAtomicArea; }                  // the peer's target
  uint8_t* local() { return mem_.get() + kAtomicArea + area_bytes_; }   // our sources and READ results
  uint64_t* atomic_word() { return reinterpret_cast<uint64_t*>(mem_.get()); }
  uint64_t addr_of(const void* p) const { return uint64_t(uintptr_t(p)); }
  uint32_t lkey() const { return mr_->lkey; }

  const Config& cfg_;
  Endpoint endpoint_;  // first: it outlives the objects below
  Pd* pd_ = nullptr;
  Cq* scq_ = nullptr;
  Cq* rcq_ = nullptr;
  Qp* rc_ = nullptr;
  Qp* uc_ = nullptr;
  Qp* ud_ = nullptr;
  Ah* ah_ = nullptr;
  Mr* mr_ = nullptr;
  PageBuffer mem_;  // page-aligned
  uint64_t area_bytes_ = 0;
  Info me_, peer_;
  uint32_t path_mtu_ = 0;
};

// ---------------------------------------------------------------- server: the target

class Target {
 public:
  Target(DemoPeer& ep, Oob& oob) : ep_(ep), oob_(oob) {}
  /// Serves cases until the client says bye. Returns the exit code.
  int run(std::string& err);
  uint64_t cases() const { return cases_; }
  uint64_t failed() const { return failed_; }

 private:
  void step();
  void prepare();
  void on_recv(const Wc& wc);
  void echo(uint64_t k, uint8_t* data, WrOpcode op);
  void check_echoed();
  void post_recvs();
  void finish(Msg& reply);
  void fail(std::string e) {
    if (error_.empty()) error_ = std::move(e);
  }
  uint8_t* slot(uint64_t k) { return ep_.area() + (k % k_) * stride_; }

  DemoPeer& ep_;
  Oob& oob_;
  Msg cur_{};
  bool active_ = false;
  uint32_t stride_ = 64;
  uint64_t k_ = 1;  // slots of this case's size in the area
  uint64_t expected_recvs_ = 0, recvs_posted_ = 0, recvs_done_ = 0;
  uint64_t echo_next_ = 0;  // WRITE pingpong: the message to echo next
  // A pingpong message echoed but not yet checked: checked when the engine
  // goes idle (the echo is on the wire) or, at the latest, before the next
  // message is taken, so the check is never in the client's round trip.
  std::optional<uint64_t> unchecked_;
  std::string error_;
  uint64_t cases_ = 0, failed_ = 0;
};

// ---------------------------------------------------------------- client: the driver

class Driver {
 public:
  Driver(DemoPeer& ep, Oob& oob) : ep_(ep), oob_(oob) {}
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
  /// The end of a case begun with m: Done, and the server's Result (its error into err if err is empty).
  bool finish(Msg m, std::string& err);
  bool pingpong(Row& row, uint64_t seed, std::string& err);
  bool stream(Row& row, uint64_t count, uint32_t depth, uint64_t seed, bool timed, std::string& err);
  bool expired() const { return g_stop || std::chrono::steady_clock::now() > deadline_; }
  void arm() { deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(ep_.cfg_.timeout_s); }
  SendWr make_wr(const Row& row, uint64_t k, uint64_t seed, uint64_t slot_k, Sge& sge);
  uint64_t next_seed() { return splitmix64_of(ep_.cfg_.seed * 1000003 + ++cases_); }

  DemoPeer& ep_;
  Oob& oob_;
  bool broken_ = false;  // a QP failed or the peer went away: nothing more can run
  uint64_t cases_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  Msg last_{};
};

}  // namespace uroce::apps::demo
