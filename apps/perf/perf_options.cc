// uroce perf's options: the flags (perftest's names and defaults), the
// --help text, and reading them into a Config with perftest's rules
// (defaults that depend on the test, force_dependecies, the combinations
// refused). Control path.
#include "apps/perf/perf.h"

#include <algorithm>
#include <string>

#include "apps/common/addr_text.h"
#include "apps/perf/perf_exchange.h"
#include "apps/perf/perf_tcp.h"

namespace uroce::apps::perftest {
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
    UROCE_QP_TIMEOUT_OPTION,
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
    {.name = "sr", .help = "uroce's extension: selective repeat instead of go-back-N (docs/LOSS_RECOVERY.md); used only if the peer asks for it too (offered in the exchange's SRQN field; a stock perftest never asks)"},
    {.name = "paths", .kind = OptKind::kUint, .def = "1", .help = "uroce's extension: spray requests over N UDP source ports (ECMP paths); used only if the peer asks for spraying too", .min = 1, .max = 256},
    {.name = "path-mode", .kind = OptKind::kChoice, .def = "packet", .help = "--paths: change path every packet, or per flowlet (after an idle gap)", .choices = "packet|flowlet"},
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

}  // namespace

const CommandSpec kPerfCommand = {
    .name = "perf",
    .positional = "TEST [SERVER]",
    .summary = "perftest's ib_{send,write,read,atomic}_{bw,lat} on uroce, compatible on the wire and out of band",
    .options = kPerfOptions,
    .min_positional = 1,
    .max_positional = 2,
    .details = kPerfDetails,
};

std::optional<int> read_config(const Args& args, Config& cfg) {
  auto usage = [](const std::string& msg) { return usage_error(kPerfCommand, msg); };
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
  cfg.qp_timeout = read_qp_timeout(args);
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
  cfg.ext.selective_repeat = args.flag("sr");
  cfg.ext.paths = uint16_t(args.get_uint("paths"));
  cfg.ext.path_mode = args.get_str("path-mode") == "flowlet" ? PathMode::kFlowlet : PathMode::kPacket;
  if (ext_offer(cfg.ext) && cfg.rdma_cm) return usage("--sr and --paths are offered in the TCP exchange, not with -R");
  cfg.timeout_s = uint32_t(args.get_uint("timeout"));
  cfg.ep.timeout_s = cfg.timeout_s;
  cfg.counters = args.flag("counters");
  cfg.json = args.flag("json");
  cfg.ep.drop_rate = args.get_double("drop-rate");
  cfg.ep.drop_seed = args.get_uint("drop-seed");
  cfg.save_buffer = std::string(args.get_str("save-buffer"));

  return std::nullopt;
}

}  // namespace uroce::apps::perftest
