// The `uroce` command-line front end: dispatches to a subcommand.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "apps/commands.h"
#include "apps/common/args.h"

namespace {

struct Command {
  std::string_view name;
  int (*run)(int, char**);
  std::string_view summary;
};

constexpr Command kCommands[] = {
    {"bench-mc", uroce::apps::cmd_bench_mc, "multi-core engines: N engine lcores per side on memif, message rate or verified RC ops"},
    {"compare", uroce::apps::cmd_compare, "our stack, kernel TCP, the raw memif floor (and verbs) side by side: medians, ratios, charts"},
    {"conform", uroce::apps::cmd_conform, "conformance cases: uroce as a deviant peer, a RoCE target's answers checked against the IBA rules"},
    {"demo", uroce::apps::cmd_demo, "two endpoints in two processes on a DPDK memif link: RC pingpong and streaming, verified"},
    {"dump", uroce::apps::cmd_dump, "decode RoCE frames in a pcap file, check every ICRC"},
    {"floor", uroce::apps::cmd_floor, "the raw frame floor: bare frames bounced or blasted between two processes, no protocol"},
    {"perf", uroce::apps::cmd_perf, "perftest's ib_{send,write,read,atomic}_{bw,lat} on uroce, interoperable with the stock tools"},
    {"pingpong", uroce::apps::cmd_pingpong, "rdma-core's ibv_{rc,uc,ud,srq}_pingpong on uroce (--transport), interoperable with the stock tools"},
    {"qperf", uroce::apps::cmd_qperf, "qperf's rc_lat and rc_bw on uroce (RDMA CM, -cm1): server for the stock client or client of the stock server"},
    {"rping", uroce::apps::cmd_rping, "librdmacm's rping on uroce: RDMA CM over QP1, SEND/READ/WRITE pings, interoperable with the stock tool"},
    {"run", uroce::apps::cmd_run, "runs an unmodified verbs program (perftest, ibv_*_pingpong) on uroce's libibverbs.so.1"},
    {"sim", uroce::apps::cmd_sim, "randomized workloads over the fault-injecting fabric, checked against a model"},
    {"stat", uroce::apps::cmd_stat, "ports, QPs, counters and congestion control of a running uroce process (DPDK telemetry)"},
    {"ucmatose", uroce::apps::cmd_ucmatose, "librdmacm's ucmatose on uroce: RC connections by RDMA CM, SENDs both ways"},
    {"udaddy", uroce::apps::cmd_udaddy, "librdmacm's udaddy on uroce: UD peers found by SIDR, datagrams both ways"},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: uroce <command> [options]   (uroce <command> --help for its options)\n\ncommands:\n");
  for (const auto& c : kCommands) {
    std::fprintf(out, "  %-10.*s %.*s\n", int(c.name.size()), c.name.data(), int(c.summary.size()),
                 c.summary.data());
  }
}

// What a command printed to stdout is its result: output that a full disk cut
// short fails the command, as coreutils' close_stdout does.
int checked_stdout(const char* what, int rc) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "uroce %s: writing the output failed: %s\n", what, std::strerror(errno));
    if (rc == 0) rc = uroce::apps::kExitFailure;
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string_view cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(stdout);
    return checked_stdout("--help", 0);
  }
  for (const auto& c : kCommands) {
    if (c.name == cmd) return checked_stdout(argv[1], c.run(argc - 1, argv + 1));
  }
  std::fprintf(stderr, "uroce: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
