// `uroce compare`: the case for the stack in one command. It runs, interleaved
// in one run, the same workloads over
//   stack      uroce perf (RC) between two processes on a net_memif link, one
//              core each: write_lat, send_lat, write_bw
//   tcp-block  uroce perf --tcp block over kernel TCP on loopback, one core
//              each: write_lat, write_bw (the sockets' SEND and WRITE are one)
//   tcp-busy   the same with non-blocking sockets spinning on EAGAIN
//   floor      uroce floor --message on a net_memif link, one core each: a
//              ping-pong and a blast of messages of the size, each the
//              ceil(size / path MTU) frames the stack sends for it (path MTU
//              payload + 74 bytes: Ethernet, IPv4, UDP, BTH, RETH, ICRC), the
//              payload copied out of and into user buffers once a frame each
//              side, no protocol work: the stack's ratios are to this floor
//   floor-1frame  the floor before issue 20: one frame of min(size, path
//              MTU) + 74 bytes a message, bounced as it is, nothing copied
//              (its rate: frames a second over the frames a message needs)
//   verbs      perftest's ib_write_lat, ib_send_lat and ib_write_bw on the first
//              device libibverbs finds, when it finds one (loaded at run time;
//              without a device the column says why it was skipped)
//   uroce-run  (only when asked for) stock perftest's ib_write_lat and
//              ib_write_bw under `uroce run`, on uroce's libibverbs.so.1, on a
//              net_memif link like the stack's, not pinned (each end runs two
//              threads): the cost of the verbs ABI layer (docs/VERBS.md,
//              "Cost"), as ratios to the stack
// Every round runs every kind at every size, in a rotated order, and the
// table shows the median of the rounds and the ratios the targets are stated
// in (docs/PERFORMANCE.md). Latency is perftest's t_typical (the median
// post-to-post time, halved: half a round trip); bandwidth is the average
// payload MB/s (2^20 bytes); message rate is the requester's Mmsg/s (the
// floor's: frames received per second, divided by the frames a message needs).
// Bandwidth runs are timed from the first send to the last completion, with
// no clock read per message on any path (the stack and perftest run with -N).
// Runs are sized in bytes as well as in messages (--lat-bytes, --bw-bytes), so
// a 4 MB run takes about as long as a 64 KB one.
// --charts DIR writes compare.json there and runs the plotting script
// (bench/compare_plot.py, with /usr/bin/python3) for latency and bandwidth
// against size.
//
// This file reads the options and runs the rounds; the runs are in
// compare_runs.cc, the tables, ratios and JSON in compare_report.cc
// (compare.h).
//
// Usage: uroce compare [options]   (uroce compare --help)
// Exit: 0 every measurement ran, 1 one failed (the rest are still reported), 2 usage.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/commands.h"
#include "apps/common/args.h"
#include "apps/common/launch.h"
#include "apps/tools/compare.h"

#ifndef UROCE_SOURCE_ROOT
#define UROCE_SOURCE_ROOT "."
#endif

namespace uroce::apps {
namespace {

using compare::Config;
using compare::detect_verbs;
using compare::json_num;
using compare::kKinds;
using compare::on_path;
using compare::perftest_field;
using compare::print_json;
using compare::print_report;
using compare::Runner;
using compare::Samples;
using compare::Verbs;

constexpr OptSpec kOptions[] = {
    {.name = "rounds", .short_name = 'r', .kind = OptKind::kUint, .def = "5", .help = "interleaved rounds; the table shows their medians", .min = 1, .max = 100},
    {.name = "sizes", .kind = OptKind::kString, .def = "64,4096,65536", .help = "message sizes in bytes, comma-separated", .meta = "LIST"},
    {.name = "kinds", .kind = OptKind::kString, .def = "stack,tcp-block,tcp-busy,floor,floor-1frame,verbs", .help = "what to run, comma-separated", .meta = "LIST"},
    {.name = "lat-iters", .kind = OptKind::kUint, .def = "10000", .help = "most round trips per latency run", .min = 10, .max = 10'000'000},
    {.name = "lat-bytes", .kind = OptKind::kUint, .def = "1073741824", .help = "most bytes one way per latency run (round trips = min(lat-iters, max(100, this / size)))", .min = 1},
    {.name = "bw-msgs", .kind = OptKind::kUint, .def = "200000", .help = "most messages per bandwidth run", .min = 100, .max = 100'000'000},
    {.name = "bw-bytes", .kind = OptKind::kUint, .def = "268435456", .help = "most bytes per bandwidth run (messages = min(bw-msgs, this / size), at least 100)", .min = 1},
    {.name = "tx-depth", .short_name = 't', .kind = OptKind::kUint, .def = "128", .help = "WRITEs in flight in the stack's and perftest's bandwidth runs (perftest's default: 128)", .min = 1, .max = 15000},
    {.name = "floor-seconds", .kind = OptKind::kDouble, .def = "1", .help = "seconds per floor blast", .min = 0, .max = 60},
    {.name = "mtu", .short_name = 'm', .kind = OptKind::kUint, .def = "4096", .help = "path MTU of the stack's runs (the memif ports are opened with Ethernet MTU 4200)", .min = 256, .max = 4096},
    {.name = "memif-zc", .help = "open the client side's memif port of every kind on memif in zero-copy mode (zero-copy=yes, EAL --single-file-segments): the link copies a frame once, not twice"},
    {.name = "cpus", .kind = OptKind::kString, .def = "0,1", .help = "CPUs of the server and the client side", .meta = "A,B"},
    {.name = "quick", .help = "smoke run: 1 round, sizes 64 and 4096, 200 round trips, 2000 messages, 0.1 s blasts"},
    {.name = "charts", .kind = OptKind::kString, .def = "", .help = "write compare.json and lat.png / bw.png into DIR", .meta = "DIR"},
    {.name = "plot-script", .kind = OptKind::kString, .def = UROCE_SOURCE_ROOT "/bench/compare_plot.py", .help = "the plotting script --charts runs", .meta = "PATH"},
    {.name = "timeout", .kind = OptKind::kUint, .def = "120", .help = "seconds one measurement may take", .min = 5, .max = 3600},
    {.name = "keep", .help = "keep the temp dir with every child's output"},
    {.name = "json", .help = "write the results as JSON on stdout (progress goes to stderr)"},
};

constexpr CommandSpec kCommand = {
    .name = "compare",
    .positional = "",
    .summary = "our stack, kernel TCP, the raw memif floor (and verbs) side by side: medians, ratios, charts",
    .options = kOptions,
    .max_positional = 0,
    .details = "Kinds: stack, tcp-block, tcp-busy, floor, floor-1frame, verbs, uroce-run, demo. Each measurement is a\n"
               "fresh pair of processes (uroce perf, uroce perf --tcp, uroce floor, or perftest's ib_* tools),\n"
               "one pinned to each of --cpus. --json keys: rounds, sizes, mtu, memif_zc, machine, verbs{status,\n"
               "device}, median{metric: {size: value}}, runs{metric: {size: [values]}}, line_rtt_ns{metric:\n"
               "{size: [ns]}} (before each of runs' values, one cache line's round trip between the two\n"
               "--cpus: a virtual machine's host may move them between near and far cores), ratios{name:\n"
               "{size: value}}, failures[]. Metrics are named KIND.TEST: lat in usec, bw in MB/sec,\n"
               "rate in Mmsg/s. floor.* is the multi-frame floor (messages of ceil(size / mtu) frames,\n"
               "payload copied each side), which the ratios use; floor-1frame.* the single-frame floor\n"
               "(floor.* before issue 20).\n"
               "--memif-zc: the client side's port is memif's zero-copy mode (DPDK 22.11 rte_eth_memif.c,\n"
               "eth_memif_tx_zc / eth_memif_rx_zc: the server copies into and out of the client's own mbufs),\n"
               "for the stack, the floors, the demo and uroce-run alike; the JSON says memif_zc.\n"
               "Kind uroce-run, only when named in --kinds: perftest's ib_write_lat and ib_write_bw\n"
               "(found on PATH) under `uroce run` on a memif link, beside the stack's rows; its\n"
               "processes are not pinned (each runs the program and the library's engine thread).\n"
               "Kind demo, only when named in --kinds: `uroce demo`'s SEND, WRITE and READ pingpongs\n"
               "(demo.send_lat, demo.write_lat, demo.read_lat) on the stack's link and path MTU, as\n"
               "many round trips as the stack's, against uroce perf's (the stack kind then adds\n"
               "stack.read_lat): the README's demo must agree with perf within 15 %.\n",
};

}  // namespace

int cmd_compare(int argc, char** argv) {
  Args args;
  if (auto rc = parse_command_line(kCommand, argc, argv, args)) return *rc;
  auto usage = [](const std::string& msg) {
    std::fprintf(stderr, "uroce compare: %s (see uroce compare --help)\n", msg.c_str());
    return kExitUsage;
  };
  Config cfg;
  const bool quick = args.flag("quick");
  cfg.rounds = quick && !args.given("rounds") ? 1 : uint32_t(args.get_uint("rounds"));
  const std::string sizes = quick && !args.given("sizes") ? "64,4096" : std::string(args.get_str("sizes"));
  for (const auto& t : split_list(sizes)) {
    const auto v = parse_uint(t);
    if (!v || *v < 2 || *v > (1u << 23)) return usage("--sizes: '" + t + "' is not a size in 2..8388608");
    cfg.sizes.push_back(uint32_t(*v));
  }
  for (const auto& k : split_list(args.get_str("kinds"))) {
    if (std::find(kKinds.begin(), kKinds.end(), k) == kKinds.end()) {
      return usage("--kinds: '" + k + "' is not stack, tcp-block, tcp-busy, floor, floor-1frame, verbs, uroce-run or demo");
    }
    cfg.kinds.push_back(k);
  }
  if (cfg.sizes.empty() || cfg.kinds.empty()) return usage("nothing to run");
  cfg.lat_iters = quick && !args.given("lat-iters") ? 200 : uint32_t(args.get_uint("lat-iters"));
  cfg.bw_msgs = quick && !args.given("bw-msgs") ? 2000 : uint32_t(args.get_uint("bw-msgs"));
  cfg.lat_bytes = args.get_uint("lat-bytes");
  cfg.bw_bytes = args.get_uint("bw-bytes");
  cfg.tx_depth = uint32_t(args.get_uint("tx-depth"));
  cfg.floor_seconds = quick && !args.given("floor-seconds") ? 0.1 : args.get_double("floor-seconds");
  cfg.mtu = uint32_t(args.get_uint("mtu"));
  if (cfg.mtu & (cfg.mtu - 1)) return usage("--mtu must be 256, 512, 1024, 2048 or 4096");
  const auto cpus = split_list(args.get_str("cpus"));
  if (cpus.size() != 2 || !parse_uint(cpus[0]) || !parse_uint(cpus[1])) return usage("--cpus takes two CPUs, A,B");
  cfg.cpu[0] = int(*parse_uint(cpus[0]));
  cfg.cpu[1] = int(*parse_uint(cpus[1]));
  cfg.charts = std::string(args.get_str("charts"));
  cfg.plot_script = std::string(args.get_str("plot-script"));
  cfg.timeout_s = uint32_t(args.get_uint("timeout"));
  cfg.keep = args.flag("keep");
  cfg.json = args.flag("json");
  cfg.memif_zc = args.flag("memif-zc");

  const bool uroce_run = cfg.wants("uroce-run");
  const bool demo = cfg.wants("demo");
  for (const char* tool : {"ib_write_lat", "ib_write_bw"}) {
    if (uroce_run && !on_path(tool)) {
      std::fprintf(stderr, "uroce compare: --kinds uroce-run needs perftest's %s on PATH (Debian: apt install perftest)\n",
                   tool);
      return kExitFailure;
    }
  }

  std::FILE* info = cfg.json ? stderr : stdout;
  install_stop_handlers();
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string tmp_dir = make_temp_dir("compare");
  if (tmp_dir.empty()) return kExitFailure;
  const char* tmpl = tmp_dir.c_str();
  const Verbs verbs = cfg.wants("verbs") ? detect_verbs() : Verbs{false, "", "skipped: not in --kinds"};
  std::fprintf(info, "# uroce compare %s\n# %ld CPUs online; server side on CPU %d, client side on CPU %d; temp dir %s\n",
               args.config_line().c_str(), sysconf(_SC_NPROCESSORS_ONLN), cfg.cpu[0], cfg.cpu[1], tmpl);
  std::fprintf(info, "# verbs: %s\n", verbs.status.c_str());

  Runner run(cfg, tmpl, info);
  Samples s, line_rtt;
  auto add = [&](const std::string& metric, uint32_t size, std::optional<double> v) {
    if (v) {
      s[metric][size].push_back(*v);
      line_rtt[metric][size].push_back(run.line_rtt_ns());
      std::fprintf(info, "#   %-20s %8u B  %12.3f   (line round trip %.0f ns)\n", metric.c_str(), size, *v,
                   run.line_rtt_ns());
    }
  };
  // A perftest tool's rows of kind (verbs, uroce-run): KIND.write_lat /
  // KIND.send_lat (t_typical) for a latency tool, KIND.write_bw (BW average)
  // and KIND.write_rate (MsgRate) for ib_write_bw.
  auto add_perftest = [&](const std::string& kind, std::string_view tool, uint32_t size,
                          const std::optional<std::string>& out) {
    if (!out) return;
    const std::string test(tool.substr(3));  // "ib_write_lat" -> "write_lat"
    if (test.ends_with("_lat")) {
      add(kind + "." + test, size, perftest_field(*out, size, 4));
    } else {
      add(kind + ".write_bw", size, perftest_field(*out, size, 3));
      add(kind + ".write_rate", size, perftest_field(*out, size, 4));
    }
  };
  const std::vector<std::string> order(kKinds.begin(), kKinds.end());
  for (uint32_t round = 0; round < cfg.rounds && !g_stop; ++round) {
    std::fprintf(info, "# round %u/%u\n", round + 1, cfg.rounds);
    for (size_t k = 0; k < order.size() && !g_stop; ++k) {
      const std::string& kind = order[(k + round) % order.size()];  // rotate: no kind always first
      if (!cfg.wants(kind) || (kind == "verbs" && !verbs.available)) continue;
      for (uint32_t size : cfg.sizes) {
        if (g_stop) break;
        if (kind == "stack") {
          for (const char* test : {"write_lat", "send_lat", "read_lat"}) {
            if (std::string_view(test) == "read_lat" && !demo) continue;  // only beside the demo's READ
            if (auto j = run.stack(test, size)) add(std::string("stack.") + test, size, json_num(*j, "t_typical"));
          }
          if (auto j = run.stack("write_bw", size)) {
            add("stack.write_bw", size, json_num(*j, "bw_average"));
            add("stack.write_rate", size, json_num(*j, "msg_rate"));
          }
        } else if (kind == "tcp-block" || kind == "tcp-busy") {
          const std::string mode = kind == "tcp-block" ? "block" : "busy";
          if (auto j = run.tcp(mode, "write_lat", size)) add(kind + ".lat", size, json_num(*j, "t_typical"));
          if (auto j = run.tcp(mode, "write_bw", size)) {
            add(kind + ".bw", size, json_num(*j, "bw_average"));
            add(kind + ".rate", size, json_num(*j, "msg_rate"));
          }
        } else if (kind == "floor" || kind == "floor-1frame") {
          if (auto j = run.floor(kind, "pingpong", size)) add(kind + ".lat", size, json_num(*j, "t_typical"));
          if (auto j = run.floor(kind, "blast", size)) {
            // The single-frame floor counts frames: a message is the frames it needs, each min(size, MTU) bytes.
            const uint32_t frames_per_msg = kind == "floor" ? 1 : (size + cfg.mtu - 1) / cfg.mtu;
            const uint32_t msg_bytes = kind == "floor" ? size : std::min(size, cfg.mtu) * frames_per_msg;
            if (auto rate = json_num(*j, kind == "floor" ? "msg_rate" : "mpps")) {
              add(kind + ".rate", size, *rate / frames_per_msg);
              add(kind + ".bw", size, *rate / frames_per_msg * 1e6 * msg_bytes / double(1 << 20));
            }
          }
        } else if (kind == "verbs") {
          for (const char* tool : {"ib_write_lat", "ib_send_lat", "ib_write_bw"}) {
            add_perftest(kind, tool, size, run.verbs(tool, verbs.device, size));
          }
        } else if (kind == "uroce-run") {
          for (const char* tool : {"ib_write_lat", "ib_write_bw"}) add_perftest(kind, tool, size, run.uroce_run(tool, size));
        } else if (kind == "demo") {
          if (auto j = run.demo(size)) {
            for (const char* op : {"send", "write", "read"}) {  // each row: "op":"send", ..., "lat_median_us":...
              const size_t row = j->find(strf("\"op\":\"%s\"", op));
              if (row != std::string::npos) add(strf("demo.%s_lat", op), size, json_num(*j, "lat_median_us", row));
            }
          }
        }
      }
    }
  }

  print_report(info, cfg, s, line_rtt, verbs, run.failures().size());

  int rc = run.failures().empty() && !g_stop ? kExitOk : kExitFailure;
  if (cfg.json) print_json(cfg, s, line_rtt, verbs, run.failures(), stdout);
  if (!cfg.charts.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cfg.charts, ec);
    const std::string path = cfg.charts + "/compare.json";
    if (!write_text_file("compare", path, [&](std::FILE* f) { print_json(cfg, s, line_rtt, verbs, run.failures(), f); })) {
      rc = kExitFailure;
    } else {
      const std::string cmd = "/usr/bin/python3 '" + cfg.plot_script + "' '" + path + "' '" + cfg.charts + "'";
      std::fflush(nullptr);
      if (std::system(cmd.c_str()) != 0) {
        std::fprintf(stderr, "uroce compare: the plotting script failed: %s\n", cmd.c_str());
        rc = kExitFailure;
      }
    }
  }
  if (!cfg.keep) {
    std::error_code ec;
    std::filesystem::remove_all(tmpl, ec);
  }
  return rc;
}

}  // namespace uroce::apps
