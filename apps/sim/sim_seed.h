// One seed of `uroce sim` (see sim.cc for what the tool checks): the
// options it runs with (SimConfig), what it finds (SeedStats, Violation),
// the registered memory with its shadow (Region), the workload (Op, QpSide)
// and the run itself (SeedRun): sim_setup.cc builds the fabric, devices,
// QPs and the workload with its model; sim_run.cc posts, reaps and checks
// every completion and the final memory against the model.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <uroce/verbs.h>
#include <uroce/wr.h>

#include "apps/sim/sim_ext.h"
#include "drivers/loopback/fabric.h"
#include "stack/common/rng.h"

namespace uroce::apps::sim {

using loopback::Fabric;
using loopback::Port;
using loopback::FaultConfig;
using loopback::PortConfig;
using loopback::PortCounter;
using loopback::PortCounters;

struct SimConfig {
  uint64_t first_seed = 1;
  uint64_t count = 100;
  double loss = 0, reorder = 0, dup = 0, corrupt = 0, link_flap = 0;
  uint32_t qps = 3;
  uint32_t ops = 24;
  uint64_t time_limit_ns = 0;
  std::string pcap_dir;
  bool capture_all = false;
  bool verbose = false;
  uint32_t trace_qpn = 0;  // --trace-qp: the QPN whose state steps go to stderr, on both devices (0: none)
  ExtMode ext = ExtMode::kOff;  // --ext: the extension every RC QP pair asks for
  uint16_t paths = 8;           // --paths: source ports of a spraying QP
  int retry_cnt = -1;           // --retry-cnt: 0..7 on every RC QP; -1: the seed's mix
};

struct Violation {
  uint64_t seed = 0;
  std::string invariant;
  std::string detail;
  std::string pcap;
};

struct SeedStats {
  uint64_t wrs = 0, success = 0, error = 0, flushed = 0, recv_cqes = 0;
  uint64_t retransmits = 0, frames = 0, qps_failed = 0, virtual_ns = 0;
  uint64_t rc_qps = 0;    // RC QPs (each side of a pair counts)
  uint64_t bytes_ok = 0;  // bytes of the send WRs that completed successfully
  PortCounters fabric;
  std::vector<Violation> violations;
  bool setup_failed = false;

  void add(const SeedStats& o) {
    wrs += o.wrs;
    success += o.success;
    error += o.error;
    flushed += o.flushed;
    recv_cqes += o.recv_cqes;
    retransmits += o.retransmits;
    frames += o.frames;
    qps_failed += o.qps_failed;
    virtual_ns += o.virtual_ns;
    rc_qps += o.rc_qps;
    bytes_ok += o.bytes_ok;
    fabric += o.fabric;
  }
};

// ---------------------------------------------------------------- memory with a shadow

/// A registered buffer with guard bytes on both sides and a shadow that says,
/// per byte, what it must hold at the end: exactly `expect`, either `expect`
/// or `alt` (a WR that may or may not have executed), or anything.
class Region {
 public:
  static constexpr size_t kGuard = 64;
  enum Mode : uint8_t { kExact, kAlt, kAny };

  void init(size_t area, Rng& rng) {
    area_ = area;
    store_.assign((total() + 7) / 8, 0);
    for (auto& w : store_) w = rng.next();
    expect_.assign(base(), base() + total());
    alt_.assign(total(), 0);
    mode_.assign(total(), kExact);
  }
  uint8_t* base() { return reinterpret_cast<uint8_t*>(store_.data()); }
  uint8_t* mr() { return base() + kGuard; }
  const uint8_t* mr() const { return reinterpret_cast<const uint8_t*>(store_.data()) + kGuard; }
  size_t area() const { return area_; }
  size_t total() const { return area_ + 2 * kGuard; }
  /// Shadow bytes of the MR area from off.
  uint8_t* expect(size_t off) { return expect_.data() + kGuard + off; }
  const uint8_t* expect(size_t off) const { return expect_.data() + kGuard + off; }

  void set_exact(size_t off, std::span<const uint8_t> v) {
    if (v.empty()) return;
    std::memcpy(expect(off), v.data(), v.size());
    std::memset(mode_.data() + kGuard + off, kExact, v.size());
  }
  void set_alt(size_t off, std::span<const uint8_t> v) {
    if (v.empty()) return;
    std::memcpy(alt_.data() + kGuard + off, v.data(), v.size());
    std::memset(mode_.data() + kGuard + off, kAlt, v.size());
  }
  void set_any(size_t off, size_t len) { std::memset(mode_.data() + kGuard + off, kAny, len); }

  /// First byte (offset from the MR start; negative in the front guard) that
  /// breaks the shadow, or INT64_MAX if none.
  /// Plain pointers: the sanitized build runs this at -O0, over every byte of every seed.
  int64_t first_mismatch() {
    const uint8_t *b = base(), *expect = expect_.data(), *alt = alt_.data(), *mode = mode_.data();
    const size_t n = total();
    for (size_t i = 0; i < n; ++i) {
      if (b[i] == expect[i] || mode[i] == kAny || (mode[i] == kAlt && b[i] == alt[i])) continue;
      return int64_t(i) - int64_t(kGuard);
    }
    return INT64_MAX;
  }

 private:
  size_t area_ = 0;
  std::vector<uint64_t> store_;  // 8-byte aligned, for atomics
  std::vector<uint8_t> expect_, alt_, mode_;
};

// ---------------------------------------------------------------- the workload

struct Op {
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t len = 0;
  uint32_t local_off = 0;   // MR offset: source (SEND/WRITE) or landing (READ/atomic)
  uint32_t remote_off = 0;  // MR offset at the peer: WRITE/READ zone or atomic slot
  uint32_t imm = 0;
  uint32_t slot = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint64_t expect_orig = 0;
  int32_t recv_index = -1;  // RC: the receive WQE it consumes at the peer
  uint32_t send_flags = kSendSignaled;
  std::vector<uint8_t> expect_read;
  bool posted = false;
  bool completed = false;
  WcStatus status = WcStatus::kSuccess;
};

inline const char* op_name(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite: return "WRITE";
    case WrOpcode::kRdmaWriteWithImm: return "WRITE_IMM";
    case WrOpcode::kSend: return "SEND";
    case WrOpcode::kSendWithImm: return "SEND_IMM";
    case WrOpcode::kRdmaRead: return "READ";
    case WrOpcode::kAtomicCmpAndSwp: return "CAS";
    case WrOpcode::kAtomicFetchAndAdd: return "FAA";
    case WrOpcode::kLocalInv: return "LOCAL_INV";
    case WrOpcode::kSendWithInv: return "SEND_INV";
  }
  return "?";
}

inline WcOpcode expected_wc(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm: return WcOpcode::kRdmaWrite;
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
    case WrOpcode::kSendWithInv: return WcOpcode::kSend;
    case WrOpcode::kRdmaRead: return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpAndSwp: return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAndAdd: return WcOpcode::kFetchAdd;
    case WrOpcode::kLocalInv: return WcOpcode::kLocalInv;
  }
  return WcOpcode::kSend;
}

struct RecvBuf {
  uint32_t off = 0;  // MR offset
  uint32_t len = 0;
  bool completed = false;
  bool ok = false;
};

struct Dev {
  Port* port = nullptr;
  ContextPtr ctx;
  Pd* pd = nullptr;
  MacAddr mac;
  Gid gid;
};

inline constexpr uint32_t kSrcBytes = 3 * 4096 + 256;  // constant source pattern
inline constexpr uint32_t kAtomicSlots = 4;
inline constexpr uint32_t kUdGrh = 40;                  // IBA 11.4.1.2 GRH area of UD receives
inline constexpr uint32_t kMaxViolationsPerSeed = 4;

/// One side of a QP pair: the QP, its CQs, its memory and the WRs it posts.
/// Not the apps' Endpoint (apps/common/endpoint.h, a DPDK port with one
/// device and the waits around it): here many QP sides share one Dev on the
/// in-memory fabric at a virtual clock, and each carries the model of what
/// its WRs must do to the peer's memory.
struct QpSide {
  uint32_t id = 0;
  QpType type = QpType::kRc;
  Dev* dev = nullptr;
  QpSide* peer = nullptr;
  Qp* qp = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  Mr* mr = nullptr;
  Ah* ah = nullptr;  // UD: to the peer
  Region mem;
  // MR layout.
  uint32_t src_off = 0, land_off = 0, land_len = 0, tgt_off = 0, tgt_len = 0, atom_off = 0, recv_off = 0,
           recv_len = 0;
  uint64_t slot_init[kAtomicSlots] = {};
  // Per-slot history of the peer's atomics on our slots: op index at the peer and value after it
  // (filled by model(peer), which starts from our slot_init).
  std::vector<std::pair<uint32_t, uint64_t>> slot_hist[kAtomicSlots];
  uint32_t sq_depth = 16;
  uint8_t retry_cnt = 7;
  std::vector<Op> ops;
  std::vector<uint32_t> recv_ops;  // indexes into ops of those consuming a peer receive
  std::vector<RecvBuf> recvs;      // our posted receives
  size_t next_post = 0, outstanding = 0, next_comp = 0, next_recv_comp = 0;
  int64_t uc_last = -1;            // UC: index into peer.recv_ops of the last message delivered
  std::vector<bool> uc_delivered;  // UC: per peer.recv_ops entry
  uint32_t rq_psn = 0;             // chosen at RTR; the peer's first send PSN
  bool failed = false;             // a send completion was not successful
  bool recv_failed = false;
  bool abandoned = false;          // posting stopped (QP in error)
};

class SeedRun {
 public:
  SeedRun(uint64_t seed, const SimConfig& cfg, std::string pcap) : seed_(seed), cfg_(cfg), pcap_(std::move(pcap)), rng_(derive_seed(seed, 0)) {}
  SeedStats run();

 private:
  [[gnu::format(printf, 3, 4)]] void violation(const char* invariant, const char* fmt, ...);
  bool setup();
  void generate_ops(QpSide& e);
  void layout(QpSide& e);
  void model(QpSide& e);
  bool create_qp(QpSide& e);
  bool connect(QpSide& e);
  void post(QpSide& e);
  uint32_t reap(QpSide& e);
  void on_send_wc(QpSide& e, const Wc& wc);
  void on_recv_wc(QpSide& r, const Wc& wc);
  bool all_done() const;
  void final_checks(QpSide& e);
  void check_memory(QpSide& e);
  std::string label(const QpSide& e) const;
  uint32_t size_for(uint32_t max_len);

  uint64_t seed_;
  const SimConfig& cfg_;
  std::string pcap_;
  Rng rng_;
  SeedStats st_;
  uint32_t mtu_ = 1024;
  Mtu mtu_code_ = Mtu::k1024;
  uint8_t timeout_code_ = 8;
  bool faults_on_ = false;
  bool net_dup_or_reorder_ = false;  // the fabric may duplicate or reorder frames
  std::unique_ptr<Fabric> fabric_;  // destroyed last: devices hold its mbufs
  std::vector<std::unique_ptr<Dev>> devs_;
  std::vector<std::unique_ptr<QpSide>> eps_;
};

}  // namespace uroce::apps::sim
