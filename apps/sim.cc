// `uroce sim`: randomized workloads over the in-memory fabric, checked against
// a reference model. For each seed: two devices on a drivers/loopback fabric
// with seeded faults (loss, reordering, duplication, corruption, a link flap),
// RC QP pairs plus one UC and one UD pair, each side posting a random mix of
// SEND, SEND with immediate, RDMA WRITE (with immediate), RDMA READ and the two
// atomics over 0 .. 3 path MTUs, at a random path MTU (256 .. 4096) and random
// starting PSNs (often just before the 2^24 wrap). Virtual time drives
// everything: loop { fabric.advance(now); poll every device; now = next event }.
//
// The reference model is sequential per QP: the responder executes requests in
// PSN order (IBA 9.7.5: RC is reliable and ordered), so the expected content of
// every target byte, every READ result and every atomic's original value is
// known when the workload is generated. Invariants checked (a violation prints
// the seed, the invariant and writes a capture of the seed's run):
//   completion   every posted WR completes exactly once, in order, per QP (IBA 10.8.3)
//   status       no error except retry exhaustion and, after an error, only
//                kWrFlushErr (IBA 10.3.1.11: the QP is in Error, later WRs flushed)
//   data         a successful completion means its data is in place: target bytes,
//                receive buffers, READ results and atomic originals equal the model
//   delivery     RC: the receiver completes exactly the sends, in order; a send
//                completed successfully was received. UC: delivered messages are
//                intact and match a message sent; in order and never twice unless
//                the fabric duplicated or reordered frames in that seed (a UC
//                responder restarts at any FIRST/ONLY packet whatever its PSN, as
//                rxe and qib do; messages may be lost). UD: delivered datagrams
//                are intact and from the peer QP (loss, reordering and network
//                duplicates allowed: UD has no PSN check)
//   atomics      each slot's final value is the model's after a prefix of the
//                atomics that includes every one completed (executed exactly once)
//   memory       no byte outside what a WR may write changed: guard bytes around
//                every MR, untargeted bytes inside it
//   liveness     everything completes (success or error) within the time limit
// Exit: 0 no violation, 1 a violation (or a seed could not be set up), 2 usage.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <uroce/eal.h>
#include <uroce/verbs.h>

#include "apps/args.h"
#include "apps/commands.h"
#include "apps/sim_cc.h"
#include "drivers/loopback/fabric.h"
#include "stack/common/rng.h"

namespace uroce::apps {
namespace {

using loopback::Fabric;
using loopback::Port;
using loopback::FaultConfig;
using loopback::PortConfig;
using loopback::PortCounter;
using loopback::PortCounters;

constexpr OptSpec kSimOptions[] = {
    {.name = "seeds", .kind = OptKind::kString, .def = "", .help = "seed range A-B (inclusive); overrides --seed-start/--seed-count", .meta = "A-B"},
    {.name = "seed-start", .kind = OptKind::kUint, .def = "1", .help = "first seed"},
    {.name = "seed-count", .kind = OptKind::kUint, .def = "100", .help = "number of seeds", .min = 1},
    {.name = "loss", .kind = OptKind::kDouble, .def = "0.05", .help = "highest frame loss probability; each seed draws its own in [0, X]", .max = 1},
    {.name = "reorder", .kind = OptKind::kDouble, .def = "0.05", .help = "highest probability a frame is held back (reordered)", .max = 1},
    {.name = "dup", .kind = OptKind::kDouble, .def = "0.02", .help = "highest frame duplication probability", .max = 1},
    {.name = "corrupt", .kind = OptKind::kDouble, .def = "0.02", .help = "highest probability a frame gets one bit flipped", .max = 1},
    {.name = "link-flap", .kind = OptKind::kDouble, .def = "0.03", .help = "probability a seed takes a link down for 20 us .. 5 ms", .max = 1},
    {.name = "qps", .kind = OptKind::kUint, .def = "3", .help = "RC QP pairs per seed (plus one UC and one UD pair)", .min = 1, .max = 64},
    {.name = "ops", .kind = OptKind::kUint, .def = "24", .help = "work requests each side of each QP pair posts", .min = 1, .max = 4096},
    {.name = "time-limit-ms", .kind = OptKind::kUint, .def = "2000", .help = "virtual time limit per seed, ms", .min = 1},
    {.name = "pcap-dir", .kind = OptKind::kString, .def = ".", .help = "directory for captures (sim-seed-N.pcap)", .meta = "DIR"},
    {.name = "capture", .help = "capture every seed, not only those with a violation"},
    {.name = "json", .help = "write the summary as JSON (fields below) instead of text"},
    {.name = "quiet", .short_name = 'q', .help = "print only violations and the summary"},
    {.name = "verbose", .short_name = 'v', .help = "print one line per seed"},
    // Congestion-control scenarios (apps/sim_cc.cc).
    {.name = "scenario", .kind = OptKind::kChoice, .def = "faults", .help = "faults: the seeded fault runs above; or a congestion-control scenario on one bottleneck (see below)", .choices = "faults|incast|share|join-leave|mixed"},
    {.name = "cc", .kind = OptKind::kChoice, .def = "dcqcn", .help = "congestion control of every host", .choices = "none|dcqcn|timely"},
    {.name = "op", .kind = OptKind::kChoice, .def = "write", .help = "scenario: how data moves: host i WRITEs to host 0, or host 0 READs from host i (the READ responses are the congested data)", .choices = "write|read"},
    {.name = "flows", .kind = OptKind::kUint, .def = "8", .help = "incast: senders (N:1); mixed: hosts (2 long flows, the rest short flows)", .min = 2, .max = 128},
    {.name = "link-gbps", .kind = OptKind::kUint, .def = "100", .help = "rate of every link, Gb/s", .min = 1, .max = 400},
    {.name = "link-delay-ns", .kind = OptKind::kUint, .def = "1000", .help = "propagation delay host <-> switch, ns"},
    {.name = "buffer-kb", .kind = OptKind::kUint, .def = "1024", .help = "switch egress buffer per port, KiB (tail drop beyond)", .min = 8, .max = 65536},
    {.name = "red-kmin-kb", .kind = OptKind::kUint, .def = "5", .help = "RED/ECN Kmin, KiB (DCQCN paper: 5)"},
    {.name = "red-kmax-kb", .kind = OptKind::kUint, .def = "200", .help = "RED/ECN Kmax, KiB (DCQCN paper: 200)", .min = 1},
    {.name = "red-pmax", .kind = OptKind::kDouble, .def = "0.01", .help = "RED/ECN marking probability at Kmax (DCQCN paper: 0.01)", .max = 1},
    {.name = "pfc", .help = "PFC on the switch (lossless): pause a sender while the queue toward its destination is above --pfc-xoff-kb"},
    {.name = "pfc-xoff-kb", .kind = OptKind::kUint, .def = "2048", .help = "PFC: pause above this backlog, KiB", .min = 1},
    {.name = "pfc-xon-kb", .kind = OptKind::kUint, .def = "1024", .help = "PFC: resume when the backlog would have drained to this, KiB"},
    {.name = "nic-queue-kb", .kind = OptKind::kUint, .def = "256", .help = "host NIC transmit queue, KiB (frames beyond wait in the engine)", .min = 8},
    {.name = "msg-kb", .kind = OptKind::kUint, .def = "64", .help = "RDMA WRITE size, KiB (a multiple of the 4 KiB path MTU)", .min = 4, .max = 1024},
    {.name = "sq-depth", .kind = OptKind::kUint, .def = "16", .help = "WRITEs a flow keeps outstanding", .min = 1, .max = 1024},
    {.name = "duration-us", .kind = OptKind::kUint, .def = "20000", .help = "virtual time the scenario runs, us", .min = 100},
    {.name = "step-ns", .kind = OptKind::kUint, .def = "250", .help = "virtual time between engine polls, ns", .min = 10, .max = 100000},
    {.name = "sample-us", .kind = OptKind::kUint, .def = "100", .help = "time-series sample interval, us", .min = 1},
    {.name = "window-us", .kind = OptKind::kUint, .def = "1000", .help = "fairness window for the convergence test, us (a multiple of --sample-us)", .min = 1},
    {.name = "converge-jain", .kind = OptKind::kDouble, .def = "0.95", .help = "converged: every later window has Jain's index >= X", .max = 1},
    {.name = "converge-util", .kind = OptKind::kDouble, .def = "0.9", .help = "converged: every later window has bottleneck utilisation >= X", .max = 1},
    {.name = "qp-timeout", .kind = OptKind::kUint, .def = "10", .help = "RC local ACK timeout code (4.096 us * 2^N)", .min = 1, .max = 31},
    {.name = "pacer-burst", .kind = OptKind::kUint, .def = "16384", .help = "pacer burst tolerance, bytes"},
    {.name = "dcqcn-preset", .kind = OptKind::kChoice, .def = "connectx", .help = "DCQCN base parameters: ConnectX firmware defaults or Zhu et al. 2015; the rpg-/dce-/rate- flags override single ones", .choices = "connectx|paper"},
    {.name = "rpg-time-reset", .kind = OptKind::kUint, .def = "300", .help = "DCQCN rate-increase timer, us"},
    {.name = "rpg-byte-reset", .kind = OptKind::kUint, .def = "32767", .help = "DCQCN byte counter, bytes (0: off)"},
    {.name = "rpg-threshold", .kind = OptKind::kUint, .def = "1", .help = "DCQCN F: increase events in fast recovery"},
    {.name = "rpg-max-rate", .kind = OptKind::kUint, .def = "0", .help = "DCQCN maximum rate, Mb/s (0: line rate)"},
    {.name = "rpg-ai-rate", .kind = OptKind::kUint, .def = "5", .help = "DCQCN additive increase, Mb/s"},
    {.name = "rpg-hai-rate", .kind = OptKind::kUint, .def = "50", .help = "DCQCN hyper increase, Mb/s"},
    {.name = "rpg-gd", .kind = OptKind::kUint, .def = "11", .help = "DCQCN log2 Gd (cut = RC * alpha / 2^gd, alpha in 1/1024)", .max = 30},
    {.name = "rpg-min-dec-fac", .kind = OptKind::kUint, .def = "50", .help = "DCQCN smallest share of RC one cut leaves, %", .min = 1, .max = 100},
    {.name = "rpg-min-rate", .kind = OptKind::kUint, .def = "1", .help = "DCQCN minimum rate, Mb/s", .min = 1},
    {.name = "rate-to-set-on-first-cnp", .kind = OptKind::kUint, .def = "0", .help = "DCQCN rate on the first CNP, Mb/s (0: current)"},
    {.name = "dce-tcp-g", .kind = OptKind::kUint, .def = "1019", .help = "DCQCN alpha kept per update, 1/1024 (g = (1024 - x) / 1024)", .max = 1024},
    {.name = "dce-tcp-rtt", .kind = OptKind::kUint, .def = "1", .help = "DCQCN alpha timer, us", .min = 1},
    {.name = "rate-reduce-monitor-period", .kind = OptKind::kUint, .def = "4", .help = "DCQCN minimum time between cuts, us"},
    {.name = "initial-alpha-value", .kind = OptKind::kUint, .def = "1023", .help = "DCQCN alpha on the first CNP, 1/1024", .max = 1024},
    {.name = "clamp-tgt-rate", .kind = OptKind::kUint, .def = "0", .help = "DCQCN: RT = RC on every cut (1) or not (0)", .max = 1},
    {.name = "clamp-tgt-rate-after-time-inc", .kind = OptKind::kUint, .def = "1", .help = "DCQCN: RT = RC on a cut after a timer increase", .max = 1},
    {.name = "min-time-between-cnps", .kind = OptKind::kUint, .def = "4", .help = "DCQCN NP: at most one CNP per QP per this many us"},
    {.name = "timely-t-low-ns", .kind = OptKind::kUint, .def = "50000", .help = "TIMELY T_low, ns (paper: 50 us)"},
    {.name = "timely-t-high-ns", .kind = OptKind::kUint, .def = "500000", .help = "TIMELY T_high, ns (paper: 500 us)", .min = 1},
    {.name = "timely-min-rtt-ns", .kind = OptKind::kUint, .def = "20000", .help = "TIMELY minRTT (gradient normaliser), ns (paper: 20 us)", .min = 1},
    {.name = "timely-delta-mbps", .kind = OptKind::kUint, .def = "10", .help = "TIMELY additive step delta, Mb/s"},
    {.name = "timely-min-rate-mbps", .kind = OptKind::kUint, .def = "10", .help = "TIMELY rate floor, Mb/s (ours: the paper states none)", .min = 1},
    {.name = "timely-beta", .kind = OptKind::kDouble, .def = "0.8", .help = "TIMELY multiplicative decrease beta", .max = 1},
    {.name = "timely-alpha", .kind = OptKind::kDouble, .def = "0.875", .help = "TIMELY EWMA weight alpha", .max = 1},
    {.name = "timely-patched", .kind = OptKind::kUint, .def = "0", .help = "TIMELY: 1 = patched rules of Zhu et al. CoNEXT 2016 (fair fixed point)", .max = 1},
    {.name = "timely-scale-by-elapsed", .kind = OptKind::kUint, .def = "0", .help = "TIMELY: 1 = weigh each update by min(1, elapsed / minRTT)", .max = 1},
    {.name = "pcap", .kind = OptKind::kString, .def = "", .help = "scenario: capture every frame the switch sees to FILE", .meta = "FILE"},
    {.name = "csv-dir", .kind = OptKind::kString, .def = "", .help = "scenario: write LABEL.series.csv and LABEL.fct.csv to DIR", .meta = "DIR"},
    {.name = "expect-util", .kind = OptKind::kDouble, .def = "0", .help = "scenario: fail unless bottleneck utilisation after convergence >= X", .max = 1},
    {.name = "expect-jain", .kind = OptKind::kDouble, .def = "0", .help = "scenario: fail unless Jain's index after convergence >= X", .max = 1},
    {.name = "expect-jain-below", .kind = OptKind::kDouble, .def = "1", .help = "scenario: fail unless Jain's index < X (unfairness contrast)", .max = 1},
    {.name = "expect-p99-queue-kb", .kind = OptKind::kDouble, .def = "0", .help = "scenario: fail unless the p99 queue after convergence <= X KiB", .max = 1u << 30},
    {.name = "expect-converged", .help = "scenario: fail unless the flows converge (see --converge-jain)"},
    {.name = "expect-no-drops", .help = "scenario: fail on any buffer drop or retransmission"},
    {.name = "expect-drops", .help = "scenario: fail unless there are buffer drops and retransmissions"},
};

constexpr std::string_view kSimDetails =
    "Each seed reproduces its run exactly (workload, fabric faults, timing): rerun one\n"
    "with --seeds N-N. On a violation the seed's run is repeated with capture on and\n"
    "the frames the switch saw go to PCAP_DIR/sim-seed-N.pcap (virtual timestamps).\n"
    "Exit: 0 no violation, 1 violation or setup failure, 2 usage error.\n"
    "\n"
    "Summary fields (text columns and --json keys): seeds, wrs (posted),\n"
    "wrs_success, wrs_error (first error of a QP), wrs_flushed, recv_cqes,\n"
    "retransmits, frames (seen by the switch), faults {loss, reorder, duplicate,\n"
    "corrupt, link_down_drops, buffer_drops}, qps_failed, violations (count) and\n"
    "violation_list [{seed, invariant, detail, pcap}], virtual_ms, wall_s.\n"
    "\n"
    "Congestion-control scenarios (--scenario incast|share|join-leave|mixed): hosts\n"
    "1..N send to host 0 over one switch (RED/ECN on each egress queue); see\n"
    "apps/sim_cc.cc. One summary line (--json: util, jain, converged,\n"
    "convergence_ms, p99_queue_kb, max_queue_kb, drops, retransmits, timeouts,\n"
    "ecn_marked, cnp_sent, cnp_handled, fct_p50_us, fct_p99_us, ...); --csv-dir\n"
    "writes the time series (per-flow goodput and send rate, queue, utilisation)\n"
    "and flow completion times. tests/cc/report.sh turns them into docs/CC.md.\n";

constexpr CommandSpec kSimCommand = {
    .name = "sim",
    .positional = "",
    .summary = "randomized workloads over the fault-injecting fabric, checked against a model",
    .options = kSimOptions,
    .max_positional = 0,
    .details = kSimDetails,
};

std::atomic<bool> g_stop{false};
volatile uint64_t g_current_seed = 0;

// A crash inside the stack must still name its seed: print it (with
// async-signal-safe calls only) and die of the same signal.
void on_fatal_signal(int sig) {
  char buf[128];
  char num[24];
  int n = 0;
  uint64_t v = g_current_seed;
  do {
    num[n++] = char('0' + v % 10);
    v /= 10;
  } while (v != 0);
  size_t len = 0;
  auto put = [&](const char* t) {
    while (*t != 0 && len < sizeof(buf)) buf[len++] = *t++;
  };
  put("\nuroce sim: crashed in seed ");
  char seed[24];
  for (int i = 0; i < n; ++i) seed[i] = num[n - 1 - i];
  seed[n] = 0;
  put(seed);
  put(" (rerun: uroce sim --seeds ");
  put(seed);
  put("-");
  put(seed);
  put(")\n");
  (void)!write(STDERR_FILENO, buf, len);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

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
  int64_t first_mismatch() {
    const uint8_t* b = base();
    for (size_t i = 0; i < total(); ++i) {
      if (mode_[i] == kAny || b[i] == expect_[i] || (mode_[i] == kAlt && b[i] == alt_[i])) continue;
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

bool consumes_recv(WrOpcode op) {
  return op == WrOpcode::kSend || op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm;
}
bool has_imm(WrOpcode op) { return op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm; }
bool is_write(WrOpcode op) { return op == WrOpcode::kRdmaWrite || op == WrOpcode::kRdmaWriteWithImm; }
bool is_atomic(WrOpcode op) { return op == WrOpcode::kAtomicCmpAndSwp || op == WrOpcode::kAtomicFetchAndAdd; }

const char* op_name(WrOpcode op) {
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

WcOpcode expected_wc(WrOpcode op) {
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
struct Endpoint {
  uint32_t id = 0;
  QpType type = QpType::kRc;
  Dev* dev = nullptr;
  Endpoint* peer = nullptr;
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
  void generate_ops(Endpoint& e);
  void layout(Endpoint& e);
  void model(Endpoint& e);
  bool create_qp(Endpoint& e);
  bool connect(Endpoint& e);
  void post(Endpoint& e);
  uint32_t reap(Endpoint& e);
  void on_send_wc(Endpoint& e, const Wc& wc);
  void on_recv_wc(Endpoint& r, const Wc& wc);
  bool all_done() const;
  void final_checks(Endpoint& e);
  void check_memory(Endpoint& e);
  std::string label(const Endpoint& e) const;
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
  std::vector<std::unique_ptr<Endpoint>> eps_;
};

void SeedRun::violation(const char* invariant, const char* fmt, ...) {
  if (st_.violations.size() >= kMaxViolationsPerSeed) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  st_.violations.push_back({seed_, invariant, buf, {}});
}

uint32_t SeedRun::size_for(uint32_t max_len) {
  const uint32_t r = uint32_t(rng_.below(100));
  uint32_t len;
  if (r < 12) {
    len = 0;
  } else if (r < 45) {
    len = uint32_t(rng_.range(1, 64));
  } else if (r < 80) {
    len = uint32_t(rng_.range(65, mtu_));
  } else {
    len = uint32_t(rng_.range(mtu_ + 1, 3 * mtu_));
  }
  return std::min(len, max_len);
}

void SeedRun::generate_ops(Endpoint& e) {
  e.ops.resize(cfg_.ops);
  for (Op& op : e.ops) {
    const uint32_t r = uint32_t(rng_.below(100));
    switch (e.type) {
      case QpType::kRc:
        op.opcode = r < 20   ? WrOpcode::kSend
                    : r < 30 ? WrOpcode::kSendWithImm
                    : r < 50 ? WrOpcode::kRdmaWrite
                    : r < 60 ? WrOpcode::kRdmaWriteWithImm
                    : r < 80 ? WrOpcode::kRdmaRead
                    : r < 90 ? WrOpcode::kAtomicCmpAndSwp
                             : WrOpcode::kAtomicFetchAndAdd;
        break;
      case QpType::kUc:
        op.opcode = r < 35   ? WrOpcode::kSend
                    : r < 55 ? WrOpcode::kSendWithImm
                    : r < 85 ? WrOpcode::kRdmaWrite
                             : WrOpcode::kRdmaWriteWithImm;
        break;
      case QpType::kUd:
        op.opcode = r < 60 ? WrOpcode::kSend : WrOpcode::kSendWithImm;
        break;
    }
    op.len = is_atomic(op.opcode) ? 8 : size_for(e.type == QpType::kUd ? mtu_ : 3 * mtu_);
    op.imm = uint32_t(rng_.next());
    if ((op.opcode == WrOpcode::kRdmaRead || is_atomic(op.opcode)) && rng_.chance(0.1)) op.send_flags |= kSendFence;
  }
  for (uint32_t i = 0; i < e.ops.size(); ++i) {
    if (consumes_recv(e.ops[i].opcode)) e.recv_ops.push_back(i);
  }
}

// MR layout of e: [src | land | tgt | atomic slots | recv], each 64-byte aligned.
void SeedRun::layout(Endpoint& e) {
  auto up = [](uint32_t v) { return (v + 63) & ~63u; };
  const Endpoint& p = *e.peer;
  e.land_len = 0;
  for (const Op& op : e.ops) {
    if (op.opcode == WrOpcode::kRdmaRead || is_atomic(op.opcode)) e.land_len += (op.len + 7) & ~7u;
  }
  // Target area: [max_read bytes never written | the peer's WRITEs one after another].
  uint32_t max_read = 256;
  e.tgt_len = 0;
  for (const Op& op : p.ops) {
    if (is_write(op.opcode)) e.tgt_len += op.len;
    if (op.opcode == WrOpcode::kRdmaRead) max_read = std::max(max_read, op.len);
  }
  e.tgt_len += max_read;
  e.recv_len = 0;
  uint32_t uc_max = 0;
  for (const uint32_t i : p.recv_ops) uc_max = std::max(uc_max, p.ops[i].len);
  for (const uint32_t i : p.recv_ops) {
    const Op& op = p.ops[i];
    RecvBuf b;
    switch (e.type) {
      case QpType::kRc:
        b.len = op.opcode == WrOpcode::kRdmaWriteWithImm ? 16 : op.len + uint32_t(rng_.below(17));
        break;
      case QpType::kUc:
        b.len = uc_max;
        break;
      case QpType::kUd:
        b.len = kUdGrh + mtu_;
        break;
    }
    b.off = e.recv_len;  // relative for now
    e.recv_len += up(b.len);
    e.recvs.push_back(b);
  }
  if (e.type == QpType::kUd) {  // room for network duplicates
    const size_t n = e.recvs.size();
    for (size_t i = 0; i < n; ++i) {
      e.recvs.push_back({e.recv_len, kUdGrh + mtu_});
      e.recv_len += up(kUdGrh + mtu_);
    }
  }
  e.src_off = 0;
  e.land_off = up(kSrcBytes);
  e.tgt_off = e.land_off + up(e.land_len);
  e.atom_off = e.tgt_off + up(e.tgt_len);
  e.recv_off = e.atom_off + 64;
  for (auto& b : e.recvs) b.off += e.recv_off;
  e.mem.init(e.recv_off + e.recv_len + 64, rng_);
  for (uint32_t s = 0; s < kAtomicSlots; ++s) {
    e.slot_init[s] = rng_.chance(0.2) ? 0 : rng_.next();
    std::memcpy(e.mem.mr() + e.atom_off + 8 * s, &e.slot_init[s], 8);
    std::memcpy(e.mem.expect(e.atom_off + 8 * s), &e.slot_init[s], 8);
  }
}

// Assigns offsets and runs the sequential model of e's ops at the peer.
void SeedRun::model(Endpoint& e) {
  Endpoint& p = *e.peer;
  std::vector<uint8_t> tgt(p.mem.expect(p.tgt_off), p.mem.expect(p.tgt_off) + p.tgt_len);
  uint64_t slots[kAtomicSlots];
  std::memcpy(slots, p.slot_init, sizeof(slots));
  // WRITEs land one after another after a never-written head of max_read bytes
  // (tgt_len - sum of write lengths). A READ reads only the head and what
  // earlier WRITEs wrote: IBA 10.8.3.3 orders a READ after an earlier WRITE,
  // but a later WRITE may overtake an earlier READ unless it is fenced, so a
  // READ never reads bytes a later WRITE writes.
  uint32_t write_len = 0;
  for (const Op& op : e.ops) write_len += is_write(op.opcode) ? op.len : 0;
  const uint32_t head = p.tgt_len - write_len;
  uint32_t write_cursor = head, land_cursor = 0, recv_k = 0;
  for (uint32_t i = 0; i < e.ops.size(); ++i) {
    Op& op = e.ops[i];
    if (consumes_recv(op.opcode) && e.type == QpType::kRc) op.recv_index = int32_t(recv_k++);
    switch (op.opcode) {
      case WrOpcode::kSend:
      case WrOpcode::kSendWithImm:
      case WrOpcode::kSendWithInv:
        op.local_off = e.src_off + uint32_t(rng_.below(kSrcBytes - op.len + 1));
        break;
      case WrOpcode::kRdmaWrite:
      case WrOpcode::kRdmaWriteWithImm:
        op.local_off = e.src_off + uint32_t(rng_.below(kSrcBytes - op.len + 1));
        op.remote_off = p.tgt_off + write_cursor;
        std::memcpy(tgt.data() + write_cursor, e.mem.expect(op.local_off), op.len);
        write_cursor += op.len;
        break;
      case WrOpcode::kRdmaRead: {
        const uint32_t at = uint32_t(rng_.below(write_cursor - op.len + 1));
        op.remote_off = p.tgt_off + at;
        op.expect_read.assign(tgt.begin() + at, tgt.begin() + at + op.len);
        op.local_off = e.land_off + land_cursor;
        land_cursor += (op.len + 7) & ~7u;
        break;
      }
      case WrOpcode::kAtomicCmpAndSwp:
      case WrOpcode::kAtomicFetchAndAdd: {
        op.slot = uint32_t(rng_.below(kAtomicSlots));
        op.remote_off = p.atom_off + 8 * op.slot;
        op.local_off = e.land_off + land_cursor;
        land_cursor += 8;
        uint64_t& v = slots[op.slot];
        op.expect_orig = v;
        if (op.opcode == WrOpcode::kAtomicFetchAndAdd) {
          op.compare_add = rng_.chance(0.3) ? uint64_t(rng_.below(16)) : rng_.next();
          v += op.compare_add;
        } else {
          op.compare_add = rng_.chance(0.5) ? v : rng_.next();
          op.swap = rng_.next();
          if (v == op.compare_add) v = op.swap;
        }
        p.slot_hist[op.slot].push_back({i, v});
        break;
      }
      case WrOpcode::kLocalInv:
        break;
    }
  }
}

std::string SeedRun::label(const Endpoint& e) const {
  static constexpr const char* kType[] = {"", "", "RC", "UC", "UD"};
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s pair %u side %c (dev%u QP 0x%x)", kType[size_t(e.type)], e.id / 2,
                e.id % 2 ? 'B' : 'A', e.dev == devs_[0].get() ? 0u : 1u, e.qp != nullptr ? e.qp->qp_num : 0u);
  return buf;
}

bool SeedRun::create_qp(Endpoint& e) {
  Context* ctx = e.dev->ctx.get();
  auto scq = uroce::create_cq(ctx, e.sq_depth * 2 + 8);
  auto rcq = uroce::create_cq(ctx, uint32_t(e.recvs.size()) + 8);
  if (!scq.ok() || !rcq.ok()) return false;
  e.scq = *scq;
  e.rcq = *rcq;
  QpInitAttr ia;
  ia.send_cq = e.scq;
  ia.recv_cq = e.rcq;
  ia.cap.max_send_wr = e.sq_depth;
  ia.cap.max_recv_wr = std::max<uint32_t>(uint32_t(e.recvs.size()), 1);
  ia.qp_type = e.type;
  ia.sq_sig_all = true;
  auto qp = uroce::create_qp(e.dev->pd, ia);
  if (!qp.ok()) {
    violation("setup", "create_qp: %s", qp.status().message());
    return false;
  }
  e.qp = *qp;
  auto mr = reg_mr(e.dev->pd, e.mem.mr(), e.mem.area(),
                   kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
  if (!mr.ok()) {
    violation("setup", "reg_mr: %s", mr.status().message());
    return false;
  }
  e.mr = *mr;
  return true;
}

bool SeedRun::connect(Endpoint& e) {
  const Endpoint& p = *e.peer;
  AhAttr ah;
  ah.dgid = p.dev->gid;
  ah.dmac = p.dev->mac;
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qkey = 0x11111111;
  a.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  uint32_t mask = kQpState | kQpPkeyIndex | kQpPort;
  mask |= e.type == QpType::kUd ? uint32_t(kQpQkey) : uint32_t(kQpAccessFlags);
  if (e.type == QpType::kUc) a.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite;
  Status s = modify_qp(e.qp, a, mask);
  if (!s.ok()) {
    violation("setup", "modify_qp INIT (%s QP): %s", e.type == QpType::kUd ? "UD" : "RC/UC", s.message());
    return false;
  }
  // Starting PSNs: often just before the 24-bit wrap.
  const uint32_t rq_psn = rng_.chance(0.3) ? uint32_t(0xffffff - rng_.below(48)) : uint32_t(rng_.below(1u << 24));
  e.rq_psn = rq_psn;
  a = {};
  a.qp_state = QpState::kRtr;
  mask = kQpState;
  if (e.type != QpType::kUd) {
    a.path_mtu = mtu_code_;
    a.dest_qp_num = p.qp->qp_num;
    a.rq_psn = rq_psn;
    a.ah_attr = ah;
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (e.type == QpType::kRc) {
      a.max_dest_rd_atomic = 16;
      a.min_rnr_timer = 1;
      mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    }
  }
  s = modify_qp(e.qp, a, mask);
  if (!s.ok()) {
    violation("setup", "modify_qp RTR: %s", s.message());
    return false;
  }
  return true;
}

// Posts a random batch of e's remaining ops while its send queue has room.
void SeedRun::post(Endpoint& e) {
  if (e.abandoned) return;
  while (e.next_post < e.ops.size() && e.outstanding < e.sq_depth) {
    const size_t n = std::min({size_t(rng_.range(1, 8)), e.ops.size() - e.next_post, size_t(e.sq_depth) - e.outstanding});
    SendWr wrs[8];
    Sge sges[8];
    for (size_t k = 0; k < n; ++k) {
      const uint32_t i = uint32_t(e.next_post + k);
      const Op& op = e.ops[i];
      SendWr& w = wrs[k];
      w = {};
      w.wr_id = uint64_t(e.id) << 32 | i;
      w.next = k + 1 < n ? &wrs[k + 1] : nullptr;
      w.opcode = op.opcode;
      w.send_flags = op.send_flags;
      w.imm_data = op.imm;
      sges[k] = {uint64_t(uintptr_t(e.mem.mr() + op.local_off)), op.len, e.mr->lkey};
      w.sg_list = &sges[k];
      w.num_sge = op.len != 0 ? 1 : 0;
      const uint64_t remote = uint64_t(uintptr_t(e.peer->mem.mr() + op.remote_off));
      w.rdma.remote_addr = remote;
      w.rdma.rkey = e.peer->mr->rkey;
      w.atomic.remote_addr = remote;
      w.atomic.rkey = e.peer->mr->rkey;
      w.atomic.compare_add = op.compare_add;
      w.atomic.swap = op.swap;
      if (e.type == QpType::kUd) {
        w.ud.ah = e.ah;
        w.ud.remote_qpn = e.peer->qp->qp_num;
        w.ud.remote_qkey = 0x11111111;
      }
    }
    SendWr* bad = nullptr;
    const Status s = post_send(e.qp, wrs, &bad);
    const size_t ok = s.ok() ? n : bad != nullptr ? size_t(bad - wrs) : 0;
    for (size_t k = 0; k < ok; ++k) e.ops[e.next_post + k].posted = true;
    e.next_post += ok;
    e.outstanding += ok;
    st_.wrs += ok;
    if (!s.ok()) {
      if (!e.failed) {
        violation("status", "%s: post_send refused WR %zu (%s) before any error: %s", label(e).c_str(),
                  e.next_post, op_name(e.ops[e.next_post].opcode), s.message());
      }
      e.abandoned = true;
      return;
    }
  }
}

void SeedRun::on_send_wc(Endpoint& e, const Wc& wc) {
  const uint32_t i = uint32_t(wc.wr_id);
  if (wc.wr_id >> 32 != e.id || i >= e.ops.size() || !e.ops[i].posted) {
    violation("completion", "%s: completion for a WR never posted (wr_id 0x%llx)", label(e).c_str(),
              (unsigned long long)wc.wr_id);
    return;
  }
  Op& op = e.ops[i];
  if (op.completed) {
    violation("completion", "%s: WR %u (%s) completed twice", label(e).c_str(), i, op_name(op.opcode));
    return;
  }
  if (i != e.next_comp) {
    violation("completion", "%s: WR %u (%s) completed before WR %zu (out of order)", label(e).c_str(), i,
              op_name(op.opcode), e.next_comp);
  }
  op.completed = true;
  op.status = wc.status;
  e.next_comp = i + 1;
  --e.outstanding;
  if (wc.qp_num != e.qp->qp_num) {
    violation("completion", "%s: WR %u completion says qp_num 0x%x", label(e).c_str(), i, wc.qp_num);
  }
  if (wc.status == WcStatus::kSuccess) {
    ++st_.success;
    if (e.failed) {
      violation("status", "%s: WR %u (%s) succeeded after an earlier WR failed", label(e).c_str(), i,
                op_name(op.opcode));
    }
    if (wc.opcode != expected_wc(op.opcode)) {
      violation("completion", "%s: WR %u (%s) completed with opcode %u", label(e).c_str(), i,
                op_name(op.opcode), unsigned(wc.opcode));
    }
    // A successful READ or atomic has its result in place when it completes.
    if (op.opcode == WrOpcode::kRdmaRead && op.len != 0 &&
        std::memcmp(e.mem.mr() + op.local_off, op.expect_read.data(), op.len) != 0) {
      size_t d = 0;
      while (d < op.len && e.mem.mr()[op.local_off + d] == op.expect_read[d]) ++d;
      violation("data", "%s: READ WR %u (%u bytes, PSN order model) returned different data from byte %zu "
                "(got 0x%02x want 0x%02x; target now 0x%02x)", label(e).c_str(), i, op.len, d,
                e.mem.mr()[op.local_off + d], op.expect_read[d], e.peer->mem.mr()[op.remote_off + d]);
    }
    if (is_atomic(op.opcode)) {
      uint64_t got;
      std::memcpy(&got, e.mem.mr() + op.local_off, 8);
      if (got != op.expect_orig) {
        violation("atomics", "%s: %s WR %u on slot %u returned 0x%llx, sequential model says 0x%llx",
                  label(e).c_str(), op_name(op.opcode), i, op.slot, (unsigned long long)got,
                  (unsigned long long)op.expect_orig);
      }
    }
    return;
  }
  if (wc.status == WcStatus::kWrFlushErr) {
    ++st_.flushed;
  } else {
    ++st_.error;
    if (e.failed) {
      violation("status", "%s: WR %u (%s) failed with '%s' after the QP had failed (want flush)",
                label(e).c_str(), i, op_name(op.opcode), wc_status_str(wc.status));
    } else if (wc.status != WcStatus::kRetryExcErr || e.type != QpType::kRc) {
      violation("status", "%s: WR %u (%s, %u bytes) failed with '%s' (valid workload)", label(e).c_str(), i,
                op_name(op.opcode), op.len, wc_status_str(wc.status));
    } else if (!faults_on_ && fabric_->totals().get(PortCounter::drop_buffer) == 0 &&
               fabric_->totals().get(PortCounter::drop_rx_ring_full) == 0) {
      violation("status", "%s: WR %u (%s) retry exceeded on a fabric without faults", label(e).c_str(), i,
                op_name(op.opcode));
    }
  }
  if (!e.failed) ++st_.qps_failed;
  e.failed = true;
}

// Finds the peer op a UC/UD receive completion delivered; -1 if none fits.
// UC searches forward from the last delivered message (in order, no
// duplicates); UD searches every datagram.
int64_t match_message(const Endpoint& r, const Wc& wc, const uint8_t* data, uint32_t len, bool forward_only) {
  const Endpoint& s = *r.peer;
  const bool imm = wc.wc_flags & kWcWithImm;
  for (size_t k = forward_only ? size_t(r.uc_last + 1) : 0; k < s.recv_ops.size(); ++k) {
    if (!s.ops[s.recv_ops[k]].posted) break;
    const Op& op = s.ops[s.recv_ops[k]];
    if (has_imm(op.opcode) != imm || (imm && op.imm != wc.imm_data)) continue;
    if (op.opcode == WrOpcode::kRdmaWriteWithImm) {
      if (wc.opcode != WcOpcode::kRecvRdmaWithImm) continue;
      if (std::memcmp(r.mem.mr() + op.remote_off, s.mem.expect(op.local_off), op.len) != 0) continue;
      return int64_t(k);
    }
    if (wc.opcode != WcOpcode::kRecv || op.len != len) continue;
    if (std::memcmp(data, s.mem.expect(op.local_off), len) != 0) continue;
    return int64_t(k);
  }
  return -1;
}

void SeedRun::on_recv_wc(Endpoint& r, const Wc& wc) {
  const uint32_t k = uint32_t(wc.wr_id);
  ++st_.recv_cqes;
  if (wc.wr_id >> 32 != r.id || k >= r.recvs.size()) {
    violation("completion", "%s: receive completion for a WR never posted (wr_id 0x%llx)", label(r).c_str(),
              (unsigned long long)wc.wr_id);
    return;
  }
  RecvBuf& b = r.recvs[k];
  if (b.completed || k != r.next_recv_comp) {
    violation("completion", "%s: receive WR %u completed %s", label(r).c_str(), k,
              b.completed ? "twice" : "out of order");
    return;
  }
  b.completed = true;
  r.next_recv_comp = k + 1;
  if (wc.status != WcStatus::kSuccess) {
    if (wc.status != WcStatus::kWrFlushErr) {
      violation("status", "%s: receive WR %u failed with '%s'", label(r).c_str(), k, wc_status_str(wc.status));
    }
    r.recv_failed = true;
    return;
  }
  if (r.recv_failed) violation("status", "%s: receive WR %u succeeded after a flushed one", label(r).c_str(), k);
  b.ok = true;
  const Endpoint& s = *r.peer;
  const uint8_t* data = r.mem.mr() + b.off;
  switch (r.type) {
    case QpType::kRc: {
      if (k >= s.recv_ops.size()) {
        violation("delivery", "%s: receive %u completed but the peer sent only %zu messages", label(r).c_str(), k,
                  s.recv_ops.size());
        return;
      }
      const uint32_t i = s.recv_ops[k];
      const Op& op = s.ops[i];
      const bool imm = wc.wc_flags & kWcWithImm;
      if (has_imm(op.opcode) != imm || (imm && wc.imm_data != op.imm)) {
        violation("delivery", "%s: receive %u (peer WR %u %s): immediate flag/value wrong (got %s 0x%x)",
                  label(r).c_str(), k, i, op_name(op.opcode), imm ? "imm" : "no imm", wc.imm_data);
      }
      if (op.opcode == WrOpcode::kRdmaWriteWithImm) {
        if (wc.opcode != WcOpcode::kRecvRdmaWithImm) {
          violation("delivery", "%s: receive %u for peer WRITE_IMM WR %u has opcode %u", label(r).c_str(), k, i,
                    unsigned(wc.opcode));
        }
        if (std::memcmp(r.mem.mr() + op.remote_off, s.mem.expect(op.local_off), op.len) != 0) {
          violation("data", "%s: WRITE_IMM WR %u (%u bytes) completed at the receiver before its data landed",
                    label(s).c_str(), i, op.len);
        }
        return;
      }
      if (wc.opcode != WcOpcode::kRecv || wc.byte_len != op.len) {
        violation("delivery", "%s: receive %u for peer %s WR %u: opcode %u byte_len %u, want RECV %u",
                  label(r).c_str(), k, op_name(op.opcode), i, unsigned(wc.opcode), wc.byte_len, op.len);
      } else if (std::memcmp(data, s.mem.expect(op.local_off), op.len) != 0) {
        violation("data", "%s: receive %u: %u bytes of peer %s WR %u differ from what was sent", label(r).c_str(),
                  k, op.len, op_name(op.opcode), i);
      }
      return;
    }
    case QpType::kUc: {
      // IBA 9.7.7.? (as rxe and qib do): a UC responder that sees a PSN other than the
      // expected one drops the message in progress and starts a new one at any
      // FIRST or ONLY packet, whatever its PSN. A duplicated or delayed frame is
      // then delivered again or late: allowed only if the fabric duplicated or
      // reordered frames in this seed.
      int64_t m = match_message(r, wc, data, wc.byte_len, true);
      if (m < 0 && net_dup_or_reorder_) m = match_message(r, wc, data, wc.byte_len, false);
      if (m < 0) {
        violation("delivery", "%s: receive %u (%u bytes, %s) matches no message sent after the last delivered one "
                  "(duplicate, reordered or corrupt)",
                  label(r).c_str(), k, wc.byte_len, wc.opcode == WcOpcode::kRecvRdmaWithImm ? "WRITE_IMM" : "SEND");
      } else {
        r.uc_last = std::max(r.uc_last, m);
        r.uc_delivered[size_t(m)] = true;
      }
      return;
    }
    case QpType::kUd: {
      if (wc.src_qp != s.qp->qp_num) {
        violation("delivery", "%s: datagram from QP 0x%x, want 0x%x", label(r).c_str(), wc.src_qp, s.qp->qp_num);
      }
      if (wc.byte_len < kUdGrh ||
          match_message(r, wc, data + kUdGrh, wc.byte_len - kUdGrh, false) < 0) {
        violation("delivery", "%s: datagram %u (byte_len %u incl. 40-byte GRH) matches no datagram sent",
                  label(r).c_str(), k, wc.byte_len);
      }
      return;
    }
  }
}

uint32_t SeedRun::reap(Endpoint& e) {
  Wc wcs[16];
  uint32_t total = 0;
  for (int n; (n = poll_cq(e.scq, 16, wcs)) > 0;) {
    for (int j = 0; j < n; ++j) on_send_wc(e, wcs[j]);
    total += uint32_t(n);
  }
  for (int n; (n = poll_cq(e.rcq, 16, wcs)) > 0;) {
    for (int j = 0; j < n; ++j) on_recv_wc(e, wcs[j]);
    total += uint32_t(n);
  }
  return total;
}

bool SeedRun::all_done() const {
  for (const auto& e : eps_) {
    if (e->outstanding != 0) return false;
    if (!e->abandoned && e->next_post < e->ops.size()) return false;
  }
  return true;
}

// End-of-run expectations of e's ops at the peer and at e, then the memory check.
void SeedRun::final_checks(Endpoint& e) {
  Endpoint& p = *e.peer;
  for (uint32_t i = 0; i < e.ops.size(); ++i) {
    Op& op = e.ops[i];
    if (op.posted && !op.completed) {
      violation("liveness", "%s: WR %u (%s, %u bytes) never completed (%s)", label(e).c_str(), i,
                op_name(op.opcode), op.len, e.failed ? "QP failed" : "QP alive");
    }
    const bool ok = op.completed && op.status == WcStatus::kSuccess;
    const std::span<const uint8_t> src(e.mem.expect(op.local_off), op.len);
    if (is_write(op.opcode)) {
      if (ok && e.type == QpType::kRc) {
        p.mem.set_exact(op.remote_off, src);
      } else if (op.posted) {
        // UC may lose or cut a write; a failed RC write may have landed in part.
        bool delivered = false;
        if (e.type == QpType::kUc && op.opcode == WrOpcode::kRdmaWriteWithImm) {
          for (size_t k = 0; k < e.recv_ops.size(); ++k) delivered |= e.recv_ops[k] == i && p.uc_delivered[k];
        }
        if (delivered) {
          p.mem.set_exact(op.remote_off, src);
        } else {
          p.mem.set_alt(op.remote_off, src);
        }
      }
    } else if (op.opcode == WrOpcode::kRdmaRead) {
      if (ok) {
        e.mem.set_exact(op.local_off, op.expect_read);
      } else if (op.posted) {
        e.mem.set_alt(op.local_off, op.expect_read);
      }
    } else if (is_atomic(op.opcode)) {
      if (ok) {
        e.mem.set_exact(op.local_off, {reinterpret_cast<const uint8_t*>(&op.expect_orig), 8});
      } else if (op.posted) {
        e.mem.set_any(op.local_off, 8);
      }
    }
    if (e.type == QpType::kRc && op.recv_index >= 0) {
      const RecvBuf& b = p.recvs[size_t(op.recv_index)];
      if (ok && !b.ok) {
        violation("delivery", "%s: %s WR %u completed successfully but the receiver has no successful receive %d",
                  label(e).c_str(), op_name(op.opcode), i, op.recv_index);
      }
      if (op.opcode != WrOpcode::kRdmaWriteWithImm) {
        if (b.ok) {
          p.mem.set_exact(b.off, src);
        } else if (op.posted) {
          p.mem.set_alt(b.off, src);
        }
      }
    }
  }
  // UC and UD receive buffers may hold any message (or part of an abandoned one):
  // their content was checked at each completion.
  if (e.type != QpType::kRc) e.mem.set_any(e.recv_off, e.recv_len);

  // Atomics at e's slots (issued by the peer): the final value is the model's
  // after a prefix of the peer's atomics that covers every completed one.
  int64_t last_ok = -1;
  for (uint32_t i = 0; i < p.ops.size(); ++i) {
    if (p.ops[i].completed && p.ops[i].status == WcStatus::kSuccess) last_ok = i;
  }
  for (uint32_t s = 0; s < kAtomicSlots; ++s) {
    uint64_t got;
    std::memcpy(&got, e.mem.mr() + e.atom_off + 8 * s, 8);
    const auto& hist = e.slot_hist[s];  // the peer's atomics on our slot s
    size_t kmin = 0, kmax = 0;
    for (const auto& h : hist) {
      kmin += int64_t(h.first) <= last_ok;
      kmax += p.ops[h.first].posted;
    }
    auto state = [&](size_t k) { return k == 0 ? e.slot_init[s] : hist[k - 1].second; };
    bool fits = false;
    for (size_t k = kmin; k <= kmax; ++k) fits |= got == state(k);
    if (!fits) {
      violation("atomics", "%s: slot %u ends as 0x%llx; model after the %zu completed of %zu atomics on it: 0x%llx",
                label(e).c_str(), s, (unsigned long long)got, kmin, hist.size(), (unsigned long long)state(kmin));
    }
    e.mem.set_any(e.atom_off + 8 * s, 8);
  }

}

// After every endpoint's final_checks has set the shadow of the memory its WRs reach.
void SeedRun::check_memory(Endpoint& e) {
  const int64_t bad = e.mem.first_mismatch();
  if (bad != INT64_MAX) {
    const char* where = bad < 0                              ? "front guard"
                        : bad >= int64_t(e.mem.area())      ? "back guard"
                        : bad < int64_t(e.land_off)         ? "source area"
                        : bad < int64_t(e.tgt_off)          ? "READ/atomic landing area"
                        : bad < int64_t(e.atom_off)         ? "RDMA target area"
                        : bad < int64_t(e.recv_off)         ? "atomic slots"
                                                            : "receive buffers";
    violation("memory", "%s: MR byte %lld (%s) is 0x%02x, not what any WR may have written",
              label(e).c_str(), (long long)bad, where, e.mem.mr()[bad]);
  }
}

bool SeedRun::setup() {
  // Fabric: random link speeds and delays, seed-drawn fault rates.
  loopback::FabricConfig fc;
  fc.seed = seed_;
  fc.pcap_path = pcap_;
  fc.copy_pool_size = 512;
  auto fabric = Fabric::create(fc);
  if (!fabric.ok()) {
    violation("setup", "fabric: %s", fabric.status().message());
    return false;
  }
  fabric_ = std::move(fabric).value();
  FaultConfig faults;
  auto draw = [&](double max) { return rng_.chance(0.75) ? max * rng_.uniform01() : 0.0; };
  faults.loss = draw(cfg_.loss);
  faults.reorder = draw(cfg_.reorder);
  faults.reorder_delay_ns = rng_.range(500, 20'000);
  faults.duplicate = draw(cfg_.dup);
  faults.corrupt = draw(cfg_.corrupt);
  faults.jitter_ns = rng_.chance(0.3) ? rng_.range(1, 2000) : 0;
  static constexpr uint64_t kRates[] = {10'000'000'000, 25'000'000'000, 40'000'000'000, 100'000'000'000};
  mtu_code_ = Mtu(rng_.range(1, 5));
  mtu_ = mtu_bytes(mtu_code_);
  // Local ACK timeout 524 us .. 4.2 ms: above the worst queueing delay the
  // links below can build (NIC queue 256 KB + switch buffer <= 100 us of drain).
  timeout_code_ = uint8_t(rng_.range(7, 10));
  const bool ipv6 = rng_.chance(0.3);
  for (uint32_t d = 0; d < 2; ++d) {
    PortConfig pc;
    pc.link.rate_bps = kRates[rng_.below(4)];
    pc.link.prop_delay_ns = rng_.range(100, 2000);
    pc.link.buffer_bytes = uint32_t(rng_.range(32 * 1024, pc.link.rate_bps / 8 / 10'000));  // <= 100 us
    pc.faults = faults;
    pc.pool_size = 2048;
    auto dev = std::make_unique<Dev>();
    dev->mac = MacAddr{{0x02, 0x00, 0x00, 0x00, uint8_t(seed_), uint8_t(d + 1)}};
    const uint8_t v4[4] = {10, 0, uint8_t(seed_), uint8_t(d + 1)};
    dev->gid = Gid::from_ipv4(v4);
    if (ipv6) {
      dev->gid = Gid{};
      dev->gid.raw[0] = 0xfe;
      dev->gid.raw[1] = 0x80;
      dev->gid.raw[15] = uint8_t(d + 1);
    }
    auto port = fabric_->add_port(dev->mac, pc);
    if (!port.ok()) {
      violation("setup", "add_port: %s", port.status().message());
      return false;
    }
    dev->port = *port;
    DeviceConfig dc;
    dc.mac = dev->mac;
    dc.gid = dev->gid;
    dc.key_seed = derive_seed(seed_, 100 + d) | 1;
    auto ctx = open_device(*dev->port, dc);
    if (!ctx.ok()) {
      violation("setup", "open_device: %s", ctx.status().message());
      return false;
    }
    dev->ctx = std::move(ctx).value();
    auto pd = alloc_pd(dev->ctx.get());
    if (!pd.ok()) {
      violation("setup", "alloc_pd: %s", pd.status().message());
      return false;
    }
    dev->pd = *pd;
    devs_.push_back(std::move(dev));
  }
  faults_on_ = faults.loss > 0 || faults.corrupt > 0 || faults.reorder > 0 || faults.duplicate > 0;
  net_dup_or_reorder_ = faults.reorder > 0 || faults.duplicate > 0;
  if (rng_.chance(cfg_.link_flap)) {
    const uint64_t at = rng_.range(0, 200'000);
    const uint32_t port = uint32_t(rng_.below(2));
    fabric_->schedule_link(port, at, false);
    fabric_->schedule_link(port, at + rng_.range(20'000, 5'000'000), true);
    faults_on_ = true;
  }

  // QP pairs: RC x qps, one UC, one UD. Some RC pairs loop back on one device.
  const uint32_t pairs = cfg_.qps + 2;
  for (uint32_t q = 0; q < pairs; ++q) {
    const QpType type = q < cfg_.qps ? QpType::kRc : q == cfg_.qps ? QpType::kUc : QpType::kUd;
    const bool same_dev = type == QpType::kRc && rng_.chance(0.1);
    auto a = std::make_unique<Endpoint>();
    auto b = std::make_unique<Endpoint>();
    a->peer = b.get();
    b->peer = a.get();
    a->dev = devs_[0].get();
    b->dev = devs_[same_dev ? 0 : 1].get();
    for (Endpoint* e : {a.get(), b.get()}) {
      e->id = uint32_t(eps_.size() + (e == b.get()));
      e->type = type;
      e->sq_depth = uint32_t(rng_.range(2, 32));
      e->retry_cnt = rng_.chance(0.8) ? 7 : uint8_t(rng_.range(0, 3));
    }
    eps_.push_back(std::move(a));
    eps_.push_back(std::move(b));
  }
  for (auto& e : eps_) generate_ops(*e);
  for (auto& e : eps_) e->uc_delivered.assign(e->peer->recv_ops.size(), false);
  for (auto& e : eps_) layout(*e);
  for (auto& e : eps_) model(*e);
  for (auto& e : eps_) {
    if (!create_qp(*e)) return false;
  }
  for (auto& e : eps_) {
    if (e->type == QpType::kUd) {
      AhAttr ah;
      ah.dgid = e->peer->dev->gid;
      ah.dmac = e->peer->dev->mac;
      auto r = create_ah(e->dev->pd, ah);
      if (!r.ok()) {
        violation("setup", "create_ah: %s", r.status().message());
        return false;
      }
      e->ah = *r;
    }
    if (!connect(*e)) return false;
    // Every receive is posted up front: RNR is not part of this workload.
    std::vector<RecvWr> rwrs(e->recvs.size());
    std::vector<Sge> sges(e->recvs.size());
    for (size_t k = 0; k < e->recvs.size(); ++k) {
      sges[k] = {uint64_t(uintptr_t(e->mem.mr() + e->recvs[k].off)), e->recvs[k].len, e->mr->lkey};
      rwrs[k].wr_id = uint64_t(e->id) << 32 | k;
      rwrs[k].sg_list = &sges[k];
      rwrs[k].num_sge = 1;
      rwrs[k].next = k + 1 < rwrs.size() ? &rwrs[k + 1] : nullptr;
    }
    RecvWr* bad = nullptr;
    if (!rwrs.empty()) {
      if (Status s = post_recv(e->qp, rwrs.data(), &bad); !s.ok()) {
        violation("setup", "post_recv: %s", s.message());
        return false;
      }
    }
  }
  for (auto& e : eps_) {
    QpAttr a;
    a.qp_state = QpState::kRts;
    a.sq_psn = e->peer->rq_psn;  // UD: the peer does not check it
    uint32_t mask = kQpState | kQpSqPsn;
    if (e->type == QpType::kRc) {
      a.timeout = timeout_code_;
      a.retry_cnt = e->retry_cnt;
      a.rnr_retry = 7;
      a.max_rd_atomic = uint8_t(rng_.range(1, 16));
      mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
    }
    if (Status s = modify_qp(e->qp, a, mask); !s.ok()) {
      violation("setup", "modify_qp RTS: %s", s.message());
      return false;
    }
  }
  return true;
}

SeedStats SeedRun::run() {
  if (!setup()) {
    st_.setup_failed = true;
    return st_;
  }
  const uint64_t max_idle_step = (4096ull << timeout_code_) / 16;
  uint64_t now = 0, idle_step = 1000;
  int quiet = 0;
  for (;;) {
    fabric_->advance(now);
    for (auto& e : eps_) post(*e);
    uint32_t work = 0;
    for (auto& d : devs_) work += poll(d->ctx.get(), now);
    for (auto& e : eps_) work += reap(*e);
    if (all_done() && fabric_->next_event_ns() == Fabric::kNever && work == 0) {
      if (++quiet >= 3) break;
    } else {
      quiet = 0;
    }
    if (now >= cfg_.time_limit_ns) {
      size_t left = 0;
      for (auto& e : eps_) left += e->outstanding;
      if (left != 0) {
        violation("liveness", "%zu WRs still outstanding after %llu ms of virtual time", left,
                  (unsigned long long)(cfg_.time_limit_ns / 1'000'000));
      }
      break;
    }
    const uint64_t step = work != 0 ? 500 : idle_step;
    idle_step = work != 0 ? 1000 : std::min(idle_step * 2, max_idle_step);
    now = std::max(now + 1, std::min(fabric_->next_event_ns(), now + step));
  }
  st_.virtual_ns = now;
  for (auto& e : eps_) final_checks(*e);
  for (auto& e : eps_) check_memory(*e);
  for (auto& d : devs_) st_.retransmits += query_counters(d->ctx.get()).get(Counter::retransmits);
  st_.fabric = fabric_->totals();
  st_.frames = fabric_->frames_seen();
  if (Status s = fabric_->close_capture(); !s.ok()) violation("capture", "%s", s.message());
  // Devices before the fabric: they may hold its mbufs.
  for (auto& e : eps_) {
    if (e->qp != nullptr) (void)destroy_qp(e->qp);
  }
  eps_.clear();
  devs_.clear();
  fabric_.reset();
  return st_;
}

// ---------------------------------------------------------------- the command

std::string capture_path(const SimConfig& cfg, uint64_t seed) {
  return cfg.pcap_dir + "/sim-seed-" + std::to_string(seed) + ".pcap";
}

std::string json_escape(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (uint8_t(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\u%04x", unsigned(c));
      out += b;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

bool parse_seed_range(std::string_view text, uint64_t& first, uint64_t& count) {
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    const auto v = parse_uint(text);
    if (!v) return false;
    first = *v;
    count = 1;
    return true;
  }
  const auto a = parse_uint(text.substr(0, dash));
  const auto b = parse_uint(text.substr(dash + 1));
  if (!a || !b || *b < *a) return false;
  first = *a;
  count = *b - *a + 1;
  return true;
}

}  // namespace

int cmd_sim(int argc, char** argv) {
  Args args;
  if (auto rc = parse_command_line(kSimCommand, argc, argv, args)) return *rc;
  if (args.get_str("scenario") != "faults") return run_cc_scenario(args);
  SimConfig cfg;
  cfg.first_seed = args.get_uint("seed-start");
  cfg.count = args.get_uint("seed-count");
  if (args.given("seeds") && !parse_seed_range(args.get_str("seeds"), cfg.first_seed, cfg.count)) {
    std::fprintf(stderr, "uroce sim: --seeds wants A-B or N, got '%.*s' (see uroce sim --help)\n",
                 int(args.get_str("seeds").size()), args.get_str("seeds").data());
    return kExitUsage;
  }
  cfg.loss = args.get_double("loss");
  cfg.reorder = args.get_double("reorder");
  cfg.dup = args.get_double("dup");
  cfg.corrupt = args.get_double("corrupt");
  cfg.link_flap = args.get_double("link-flap");
  cfg.qps = uint32_t(args.get_uint("qps"));
  cfg.ops = uint32_t(args.get_uint("ops"));
  cfg.time_limit_ns = args.get_uint("time-limit-ms") * 1'000'000;
  cfg.pcap_dir = std::string(args.get_str("pcap-dir"));
  cfg.capture_all = args.flag("capture");
  cfg.verbose = args.flag("verbose");
  const bool json = args.flag("json");
  const bool quiet = args.flag("quiet");
  const uint64_t last_seed = cfg.first_seed + cfg.count - 1;

  if (Status s = init_eal(); !s.ok()) {
    std::fprintf(stderr, "uroce sim: %s\n", s.message());
    return kExitFailure;
  }
  if (!json && !quiet) {
    std::printf("# uroce sim %s\n", args.config_line().c_str());
    std::printf("# seeds %llu-%llu (%llu); per seed up to loss %.3g reorder %.3g dup %.3g corrupt %.3g, "
                "link flap p=%.3g; %u RC + 1 UC + 1 UD QP pairs x 2 sides x %u WRs\n",
                (unsigned long long)cfg.first_seed, (unsigned long long)last_seed, (unsigned long long)cfg.count,
                cfg.loss, cfg.reorder, cfg.dup, cfg.corrupt, cfg.link_flap, cfg.qps, cfg.ops);
  }
  std::signal(SIGINT, [](int) { g_stop = true; });
  for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, on_fatal_signal);

  const auto t0 = std::chrono::steady_clock::now();
  SeedStats total;
  std::vector<Violation> violations;
  uint64_t seeds_run = 0, setup_failures = 0;
  std::error_code ec;
  for (uint64_t seed = cfg.first_seed; seed <= last_seed && !g_stop; ++seed) {
    if (cfg.capture_all) std::filesystem::create_directories(cfg.pcap_dir, ec);
    const std::string pcap = cfg.capture_all ? capture_path(cfg, seed) : std::string();
    g_current_seed = seed;
    std::fflush(stdout);
    SeedStats st = SeedRun(seed, cfg, pcap).run();
    ++seeds_run;
    setup_failures += st.setup_failed;
    total.add(st);
    if (cfg.verbose && !json) {
      const auto& sf = st.fabric;
      std::printf("seed %llu: wrs %llu ok %llu err %llu flushed %llu retrans %llu frames %llu faults %llu/%llu/%llu/%llu "
                  "drops %llu/%llu virt %.3f ms%s\n",
                  (unsigned long long)seed, (unsigned long long)st.wrs, (unsigned long long)st.success,
                  (unsigned long long)st.error, (unsigned long long)st.flushed, (unsigned long long)st.retransmits,
                  (unsigned long long)st.frames, (unsigned long long)sf.get(PortCounter::fault_loss),
                  (unsigned long long)sf.get(PortCounter::fault_reorder),
                  (unsigned long long)sf.get(PortCounter::fault_duplicate),
                  (unsigned long long)sf.get(PortCounter::fault_corrupt),
                  (unsigned long long)sf.get(PortCounter::drop_buffer),
                  (unsigned long long)sf.get(PortCounter::drop_link_down), double(st.virtual_ns) / 1e6,
                  st.violations.empty() ? "" : "  VIOLATION");
    }
    if (st.violations.empty()) continue;
    std::string pcap_out = pcap;
    if (pcap_out.empty()) {  // the run is deterministic: repeat it with capture on
      pcap_out = capture_path(cfg, seed);
      std::filesystem::create_directories(cfg.pcap_dir, ec);
      (void)SeedRun(seed, cfg, pcap_out).run();
    }
    for (auto& v : st.violations) {
      v.pcap = pcap_out;
      std::fprintf(json ? stderr : stdout, "VIOLATION seed %llu [%s] %s (capture: %s; rerun: uroce sim --seeds %llu-%llu)\n",
                   (unsigned long long)seed, v.invariant.c_str(), v.detail.c_str(), pcap_out.c_str(),
                   (unsigned long long)seed, (unsigned long long)seed);
      violations.push_back(v);
    }
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& f = total.fabric;
  const uint64_t faults = f.get(PortCounter::fault_loss) + f.get(PortCounter::fault_reorder) +
                          f.get(PortCounter::fault_duplicate) + f.get(PortCounter::fault_corrupt);
  if (json) {
    std::printf("{\"seeds\":%llu,\"first_seed\":%llu,\"last_seed\":%llu,\"wrs\":%llu,\"wrs_success\":%llu,"
                "\"wrs_error\":%llu,\"wrs_flushed\":%llu,\"recv_cqes\":%llu,\"retransmits\":%llu,\"frames\":%llu,"
                "\"faults\":{\"loss\":%llu,\"reorder\":%llu,\"duplicate\":%llu,\"corrupt\":%llu,"
                "\"link_down_drops\":%llu,\"buffer_drops\":%llu},\"qps_failed\":%llu,\"violations\":%zu,"
                "\"violation_list\":[",
                (unsigned long long)seeds_run, (unsigned long long)cfg.first_seed, (unsigned long long)last_seed,
                (unsigned long long)total.wrs, (unsigned long long)total.success, (unsigned long long)total.error,
                (unsigned long long)total.flushed, (unsigned long long)total.recv_cqes,
                (unsigned long long)total.retransmits, (unsigned long long)total.frames,
                (unsigned long long)f.get(PortCounter::fault_loss), (unsigned long long)f.get(PortCounter::fault_reorder),
                (unsigned long long)f.get(PortCounter::fault_duplicate),
                (unsigned long long)f.get(PortCounter::fault_corrupt),
                (unsigned long long)f.get(PortCounter::drop_link_down),
                (unsigned long long)f.get(PortCounter::drop_buffer), (unsigned long long)total.qps_failed,
                violations.size());
    for (size_t i = 0; i < violations.size(); ++i) {
      const auto& v = violations[i];
      std::printf("%s{\"seed\":%llu,\"invariant\":%s,\"detail\":%s,\"pcap\":%s}", i ? "," : "",
                  (unsigned long long)v.seed, json_escape(v.invariant).c_str(), json_escape(v.detail).c_str(),
                  json_escape(v.pcap).c_str());
    }
    std::printf("],\"virtual_ms\":%.3f,\"wall_s\":%.3f}\n", double(total.virtual_ns) / 1e6, wall_s);
  } else {
    std::printf(" %-8s %-10s %-10s %-8s %-8s %-10s %-11s %-10s %-9s %-10s %-10s %-9s\n", "seeds", "wrs",
                "success", "errors", "flushed", "recv_cqes", "retransmits", "frames", "faults", "qps_failed",
                "violations", "wall_s");
    std::printf(" %-8llu %-10llu %-10llu %-8llu %-8llu %-10llu %-11llu %-10llu %-9llu %-10llu %-10zu %-9.2f\n",
                (unsigned long long)seeds_run, (unsigned long long)total.wrs, (unsigned long long)total.success,
                (unsigned long long)total.error, (unsigned long long)total.flushed,
                (unsigned long long)total.recv_cqes, (unsigned long long)total.retransmits,
                (unsigned long long)total.frames, (unsigned long long)faults, (unsigned long long)total.qps_failed,
                violations.size(), wall_s);
    if (!quiet) {
      std::printf("# faults: loss %llu reorder %llu duplicate %llu corrupt %llu; drops: link down %llu, buffer %llu; "
                  "virtual time %.3f ms%s\n",
                  (unsigned long long)f.get(PortCounter::fault_loss), (unsigned long long)f.get(PortCounter::fault_reorder),
                  (unsigned long long)f.get(PortCounter::fault_duplicate),
                  (unsigned long long)f.get(PortCounter::fault_corrupt),
                  (unsigned long long)f.get(PortCounter::drop_link_down),
                  (unsigned long long)f.get(PortCounter::drop_buffer), double(total.virtual_ns) / 1e6,
                  g_stop ? " (interrupted)" : "");
    }
  }
  return violations.empty() && setup_failures == 0 && !g_stop ? kExitOk : kExitFailure;
}

}  // namespace uroce::apps
