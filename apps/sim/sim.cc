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

#include "apps/commands.h"
#include "apps/common/args.h"
#include "apps/common/json_writer.h"
#include "apps/common/launch.h"
#include "apps/common/qp_trace.h"
#include "apps/sim/sim_cc.h"
#include "apps/sim/sim_paths.h"
#include "apps/sim/sim_seed.h"
#include "drivers/loopback/fabric.h"
#include "stack/common/rng.h"

namespace uroce::apps {
namespace {

using loopback::PortCounter;
using sim::SeedRun;
using sim::SeedStats;
using sim::SimConfig;
using sim::Violation;


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
    {.name = "ext", .kind = OptKind::kChoice, .def = "off", .help = "faults: the transport extension every RC QP pair asks for (issue 23): off (go-back-N, one UDP source port), spray (go-back-N over --paths ports), sr (selective repeat), sr-spray (both); the leaf/spine scenarios run their own set of these side by side", .choices = sim::kExtChoices},
    {.name = "paths", .kind = OptKind::kUint, .def = "8", .help = "UDP source ports a spraying QP uses (--ext spray|sr-spray; scenarios: per sprayed QP)", .min = 1, .max = 256},
    {.name = "retry-cnt", .kind = OptKind::kChoice, .def = "mix", .help = "faults: retry_cnt of every RC QP; mix: each seed's draw (7 for 80 % of QPs, else 0..3)", .choices = "mix|0|1|2|3|4|5|6|7"},
    {.name = "time-limit-ms", .kind = OptKind::kUint, .def = "2000", .help = "virtual time limit per seed, ms", .min = 1},
    {.name = "pcap-dir", .kind = OptKind::kString, .def = ".", .help = "directory for captures (sim-seed-N.pcap)", .meta = "DIR"},
    {.name = "capture", .help = "capture every seed, not only those with a violation"},
    {.name = "json", .help = "write the summary as JSON (fields below) instead of text"},
    {.name = "quiet", .short_name = 'q', .help = "print only violations and the summary"},
    {.name = "verbose", .short_name = 'v', .help = "print one line per seed"},
    UROCE_TRACE_QP_OPTION,
    // Congestion-control scenarios (apps/sim/sim_cc.cc) and loss recovery on leaf/spine (apps/sim/sim_paths.cc).
    {.name = "scenario", .kind = OptKind::kChoice, .def = "faults", .help = "faults: the seeded fault runs above; or a congestion-control scenario on one bottleneck, or a loss-recovery scenario on a leaf/spine fabric (see below)", .choices = "faults|incast|share|join-leave|mixed|loss|reorder|blackhole|balance"},
    {.name = "cc", .kind = OptKind::kChoice, .def = "dcqcn", .help = "congestion control of every host", .choices = "none|dcqcn|timely"},
    {.name = "op", .kind = OptKind::kChoice, .def = "write", .help = "scenario: how data moves: host i WRITEs to host 0, or host 0 READs from host i (the READ responses are the congested data)", .choices = "write|read"},
    {.name = "flows", .kind = OptKind::kUint, .def = "8", .help = "incast: senders (N:1); mixed: hosts (2 long flows, the rest short flows); balance: QPs", .min = 2, .max = 128},
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
    {.name = "spines", .kind = OptKind::kUint, .def = "0", .help = "loss|reorder|blackhole|balance: spines, so paths between the leaves (0: the scenario's: 1, 8, 8, 4)", .max = 256},
    {.name = "path-loss", .kind = OptKind::kDouble, .def = "0.01", .help = "loss: probability a frame is lost on the sender leaf's path, each way", .max = 1},
    {.name = "path-delay-ns", .kind = OptKind::kUint, .def = "1000", .help = "leaf/spine: propagation delay of path 0, leaf <-> spine, ns"},
    {.name = "path-delay-step-ns", .kind = OptKind::kUint, .def = "1000", .help = "leaf/spine: path s is this much slower than path s-1 each way, ns (unequal paths reorder a sprayed QP)"},
    {.name = "blackhole-at-us", .kind = OptKind::kUint, .def = "0", .help = "blackhole: when the QP's first path fails for good, us (0: half of --duration-us)"},
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
    {.name = "expect-ext-better", .help = "leaf/spine scenario: fail unless the extension beats go-back-N (goodput; blackhole: goodput after; balance: a lower most/least path ratio)"},
    {.name = "expect-keep", .kind = OptKind::kDouble, .def = "0.8", .help = "loss: fail unless sr keeps this share of its loss-free goodput (given only)", .max = 1},
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
    "(--json) ext, retry_cnt, rc_qps, qps_failed_pct (failed RC QPs, retry\n"
    "exhaustion, as a share of all), bytes_ok and goodput_gbps (successful send WRs'\n"
    "bytes over the seeds' virtual time; also on the text summary's last line),\n"
    "violation_list [{seed, invariant, detail, pcap}], virtual_ms, wall_s.\n"
    "\n"
    "Congestion-control scenarios (--scenario incast|share|join-leave|mixed): hosts\n"
    "1..N send to host 0 over one switch (RED/ECN on each egress queue); see\n"
    "apps/sim/sim_cc.cc. One summary line (--json: util, jain, converged,\n"
    "convergence_ms, p99_queue_kb, max_queue_kb, drops, retransmits, timeouts,\n"
    "ecn_marked, cnp_sent, cnp_handled, fct_p50_us, fct_p99_us, ...); --csv-dir\n"
    "writes the time series (per-flow goodput and send rate, queue, utilisation)\n"
    "and flow completion times. tests/cc/report.sh turns them into docs/CC.md.\n"
    "\n"
    "Loss-recovery scenarios (--scenario loss|reorder|blackhole|balance): a sender\n"
    "on leaf 0 and a receiver on leaf 1 of a leaf/spine fabric (--spines paths,\n"
    "ECMP on the UDP 5-tuple), RC QPs of --msg-kb WRITEs, go-back-N beside the\n"
    "extension (--ext variants off, spray, sr, sr-spray, run one after another; see\n"
    "apps/sim/sim_paths.cc). One row per variant (--json: variants [{label, ext,\n"
    "loss, goodput_gbps, retransmits, fabric_drops, spurious_retransmits, timeouts,\n"
    "qps_failed, paths_used, path_bytes, path_ratio, blackhole: before_gbps,\n"
    "recover_us, after_gbps}], ext_better, loss: ext_keeps, gbn_keeps); --csv-dir\n"
    "writes each variant's time series (goodput, retransmissions, per path).\n"
    "bench/loss_recovery.sh runs the experiments of docs/LOSS_RECOVERY.md.\n";

constexpr CommandSpec kSimCommand = {
    .name = "sim",
    .positional = "",
    .summary = "randomized workloads over the fault-injecting fabric, checked against a model",
    .options = kSimOptions,
    .max_positional = 0,
    .details = kSimDetails,
};

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

// ---------------------------------------------------------------- the command

std::string capture_path(const SimConfig& cfg, uint64_t seed) {
  return cfg.pcap_dir + "/sim-seed-" + std::to_string(seed) + ".pcap";
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
  const std::string_view scenario = args.get_str("scenario");
  if (scenario == "loss" || scenario == "reorder" || scenario == "blackhole" || scenario == "balance") {
    return run_path_scenario(args);
  }
  if (scenario != "faults") return run_cc_scenario(args);
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
  cfg.trace_qpn = uint32_t(args.get_uint("trace-qp"));
  cfg.ext = sim::ext_mode(args.get_str("ext"));
  cfg.paths = uint16_t(args.get_uint("paths"));
  if (args.get_str("retry-cnt") != "mix") cfg.retry_cnt = int(*parse_uint(args.get_str("retry-cnt")));
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
                "link flap p=%.3g; %u RC + 1 UC + 1 UD QP pairs x 2 sides x %u WRs; RC ext %s, retry_cnt %s\n",
                (unsigned long long)cfg.first_seed, (unsigned long long)last_seed, (unsigned long long)cfg.count,
                cfg.loss, cfg.reorder, cfg.dup, cfg.corrupt, cfg.link_flap, cfg.qps, cfg.ops,
                std::string(sim::ext_name(cfg.ext)).c_str(), std::string(args.get_str("retry-cnt")).c_str());
  }
  install_stop_handlers();  // SIGINT/SIGTERM: finish the seed under way, then report
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
  // QPs that failed (retry exhaustion) as a share of the RC QPs; goodput: the
  // bytes of successful send WRs over the virtual time of all seeds.
  const double failed_pct = total.rc_qps == 0 ? 0 : 100.0 * double(total.qps_failed) / double(total.rc_qps);
  const double goodput_gbps = total.virtual_ns == 0 ? 0 : double(total.bytes_ok) * 8 / double(total.virtual_ns);
  const uint64_t faults = f.get(PortCounter::fault_loss) + f.get(PortCounter::fault_reorder) +
                          f.get(PortCounter::fault_duplicate) + f.get(PortCounter::fault_corrupt);
  if (json) {
    JsonWriter w;
    w.begin_object().key("seeds").num(seeds_run).key("first_seed").num(cfg.first_seed).key("last_seed").num(last_seed);
    w.key("wrs").num(total.wrs).key("wrs_success").num(total.success).key("wrs_error").num(total.error);
    w.key("wrs_flushed").num(total.flushed).key("recv_cqes").num(total.recv_cqes);
    w.key("retransmits").num(total.retransmits).key("frames").num(total.frames);
    w.key("faults").begin_object().key("loss").num(f.get(PortCounter::fault_loss));
    w.key("reorder").num(f.get(PortCounter::fault_reorder)).key("duplicate").num(f.get(PortCounter::fault_duplicate));
    w.key("corrupt").num(f.get(PortCounter::fault_corrupt)).key("link_down_drops").num(f.get(PortCounter::drop_link_down));
    w.key("buffer_drops").num(f.get(PortCounter::drop_buffer)).end_object();
    w.key("ext").str(sim::ext_name(cfg.ext)).key("retry_cnt").str(args.get_str("retry-cnt"));
    w.key("rc_qps").num(total.rc_qps).key("qps_failed_pct").fixed(failed_pct, 3);
    w.key("bytes_ok").num(total.bytes_ok).key("goodput_gbps").fixed(goodput_gbps, 4);
    w.key("qps_failed").num(total.qps_failed).key("violations").num(violations.size()).key("violation_list").begin_array();
    for (const auto& v : violations) {
      w.begin_object().key("seed").num(v.seed).key("invariant").str(v.invariant).key("detail").str(v.detail);
      w.key("pcap").str(v.pcap).end_object();
    }
    w.end_array().key("virtual_ms").fixed(double(total.virtual_ns) / 1e6, 3).key("wall_s").fixed(wall_s, 3).end_object();
    std::printf("%s\n", w.text().c_str());
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
                  "virtual time %.3f ms%s\n"
                  "# RC QPs %llu, failed %llu (%.2f %%); goodput %.3f Gb/s (%llu bytes of successful send WRs in virtual time)\n",
                  (unsigned long long)f.get(PortCounter::fault_loss), (unsigned long long)f.get(PortCounter::fault_reorder),
                  (unsigned long long)f.get(PortCounter::fault_duplicate),
                  (unsigned long long)f.get(PortCounter::fault_corrupt),
                  (unsigned long long)f.get(PortCounter::drop_link_down),
                  (unsigned long long)f.get(PortCounter::drop_buffer), double(total.virtual_ns) / 1e6,
                  g_stop ? " (interrupted)" : "", (unsigned long long)total.rc_qps,
                  (unsigned long long)total.qps_failed, failed_pct, goodput_gbps, (unsigned long long)total.bytes_ok);
    }
  }
  return violations.empty() && setup_failures == 0 && !g_stop ? kExitOk : kExitFailure;
}

}  // namespace uroce::apps
