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

#include "apps/bench_mc/bench_mc.h"
#include "apps/commands.h"
#include "apps/common/args.h"
#include "apps/common/endpoint.h"
#include "apps/common/launch.h"
#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/eal_args.h"
#include "drivers/dpdk/engine_launcher.h"
#include "drivers/dpdk/fault_io.h"

namespace uroce::apps {
namespace bench_mc {
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
    if (!eal_has_lcores(eal)) {
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

/// The command, in bench-mc's namespace (cmd_bench_mc below is its name outside).
int run(int argc, char** argv) {
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

}  // namespace bench_mc

int cmd_bench_mc(int argc, char** argv) { return bench_mc::run(argc, argv); }

}  // namespace uroce::apps
