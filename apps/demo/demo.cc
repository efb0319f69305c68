// `uroce demo`: two RoCEv2 endpoints in two processes on a real DPDK port,
// perftest-style. By default the command is a launcher: it makes a temp dir,
// starts itself twice (`--role server` pinned to EAL lcore 0, `--role client`
// on lcore 1), each process with its own EAL (--no-huge --no-pci --no-shconf)
// and one end of a net_memif link whose socket lies in the temp dir, waits for
// both and removes the dir. With --role server|client and --dev SPEC the
// process is one endpoint on any rte_ethdev port (tests/dpdk_e2e runs the two
// ends on a veth pair with net_af_packet this way). With --driver loopback
// the launcher instead runs both endpoints as two threads of its own process,
// each on a port of one in-memory fabric (drivers/loopback/realtime_port.h)
// with --fabric's link delay, rate and seeded faults, and --pcap captures the
// fabric's switch.
//
// The endpoints exchange QPN, PSN, rkey, buffer address, MAC and GID over a
// TCP socket (perftest's out-of-band channel; the server listens, the client
// connects), then the client drives and the server is the target:
//   workload perf    RC SEND, RDMA WRITE, RDMA READ, CAS and FAA at --sizes:
//                    a pingpong phase (--iters round trips; latency = half the
//                    round trip, TSC-timed) and a streaming phase (--stream-bytes
//                    of messages, --tx-depth in flight; Gb/s and Mmsg/s)
//   workload matrix  every RC opcode (SEND, SEND imm, WRITE, WRITE imm, READ,
//                    CAS, FAA), UC SEND/WRITE and UD SEND at 0 .. 3 path MTUs,
//                    --matrix-count messages each (the transport's end-to-end
//                    test over a real port)
// Every byte is checked: message k of a case carries a pattern derived from
// the case's seed and k; the target checks what it received (SEND: each
// receive buffer as it completes; WRITE: each target slot), the requester what
// it read (READ) and what each atomic returned, and the target the atomic
// word's final value, each side computing the expected data on its own.
//
// Run-to-completion (DESIGN "Shared-nothing engines"): the process's one lcore
// calls uroce::poll(ctx, now_ns) in every wait loop; time is the TSC in ns
// (drivers/dpdk/tsc_clock.h). --drop-every N loses every Nth transmitted frame
// in each process (drivers/dpdk/fault_io.h) to show retransmission working.
//
// Usage: uroce demo [EAL args --] [options]   (uroce demo --help)
// Exit: 0 everything verified, 1 a failure (or SIGINT/SIGTERM), 2 usage.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include <uroce/counters.h>
#include <uroce/eal.h>
#include <uroce/verbs.h>

#include "apps/commands.h"
#include "apps/common/addr_text.h"
#include "apps/common/args.h"
#include "apps/common/endpoint.h"
#include "apps/common/json_writer.h"
#include "apps/common/launch.h"
#include "apps/common/oob.h"
#include "apps/demo/demo.h"
#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/eal_args.h"
#include "drivers/dpdk/fault_io.h"
#include "drivers/dpdk/tsc_clock.h"
#include "drivers/loopback/realtime_port.h"

namespace uroce::apps {
namespace demo {
namespace {

// ---------------------------------------------------------------- options

constexpr OptSpec kDemoOptions[] = {
    {.name = "role", .kind = OptKind::kChoice, .def = "launch", .help = "launch: start a server and a client on a memif link; or be one endpoint", .choices = "launch|server|client"},
    {.name = "dev", .kind = OptKind::kString, .def = "", .help = "with --role: the port, an EAL device spec (net_memif0,role=server,socket=..., net_af_packet0,iface=veth0, ...)", .meta = "SPEC"},
    {.name = "driver", .kind = OptKind::kChoice, .def = "dpdk", .help = "launch: dpdk, two processes on a memif link; loopback, both endpoints as threads of this process on the in-memory fabric", .choices = "dpdk|loopback"},
    {.name = "fabric", .kind = OptKind::kString, .def = "", .help = "--driver loopback: both ports' link and faults, rate_gbps=R,delay_us=D,loss=P,duplicate=P,corrupt=P,reorder=P,jitter_us=J", .meta = "KEY=VALUE,..."},
    {.name = "workload", .kind = OptKind::kChoice, .def = "perf", .help = "perf: latency and bandwidth table; matrix: every opcode x QP type x size, verified", .choices = "perf|matrix"},
    {.name = "ops", .kind = OptKind::kString, .def = "send,write,read,cas,faa", .help = "perf: operations, comma-separated", .meta = "LIST"},
    {.name = "sizes", .kind = OptKind::kString, .def = "64,4096,65536", .help = "perf: message sizes in bytes, comma-separated (atomics are 8 bytes)", .meta = "LIST"},
    {.name = "iters", .short_name = 'n', .kind = OptKind::kUint, .def = "1000", .help = "perf: pingpong round trips per op and size", .min = 1, .max = 10'000'000},
    {.name = "stream-bytes", .kind = OptKind::kUint, .def = "33554432", .help = "perf: bytes streamed per op and size (messages = this / size, at most --stream-msgs)", .max = 1ull << 30},
    {.name = "stream-msgs", .kind = OptKind::kUint, .def = "100000", .help = "perf: most messages streamed per op and size (0: no streaming phase)", .max = 10'000'000},
    {.name = "tx-depth", .short_name = 't', .kind = OptKind::kUint, .def = "128", .help = "perf: work requests in flight while streaming", .min = 1, .max = 1024},
    {.name = "matrix-count", .kind = OptKind::kUint, .def = "3", .help = "matrix: messages per case", .min = 1, .max = 64},
    {.name = "matrix-types", .kind = OptKind::kString, .def = "rc,uc,ud", .help = "matrix: QP types to run", .meta = "LIST"},
    {.name = "mtu", .short_name = 'm', .kind = OptKind::kUint, .def = "0", .help = "path MTU in bytes, 256..4096 (0: the largest the port carries)", .max = 4096},
    {.name = "seed", .kind = OptKind::kUint, .def = "1", .help = "seed of every data pattern, PSN and key"},
    {.name = "oob-host", .kind = OptKind::kString, .def = "127.0.0.1", .help = "out-of-band TCP address (server binds it, client connects)", .meta = "ADDR"},
    {.name = "oob-port", .short_name = 'p', .kind = OptKind::kUint, .def = "0", .help = "out-of-band TCP port (0: launch picks a free one; 18515 with --role)", .max = 65535},
    {.name = "ip", .kind = OptKind::kString, .def = "", .help = "this endpoint's IPv4 address, its GID (default 10.0.0.1 server, 10.0.0.2 client)", .meta = "A.B.C.D"},
    {.name = "mac", .kind = OptKind::kString, .def = "", .help = "MAC to set where the PMD allows (default: launch sets 02:00:00:00:00:01/02 on memif, else the port's)", .meta = "MAC"},
    {.name = "lcores", .kind = OptKind::kString, .def = "0,1", .help = "launch: EAL lcores of the server and the client (unless EAL args give -l/-c)", .meta = "A,B"},
    UROCE_QP_TIMEOUT_OPTION,
    {.name = "drop-every", .kind = OptKind::kUint, .def = "0", .help = "test hook: lose every Nth frame each process transmits (0: none)"},
    {.name = "timeout", .kind = OptKind::kUint, .def = "30", .help = "seconds any one phase may take before it fails", .min = 1, .max = 3600},
    {.name = "pcap", .kind = OptKind::kString, .def = "", .help = "capture every frame of the client's port to FILE (launch), or of this port", .meta = "FILE"},
    {.name = "counters", .help = "print port, device and per-QP counters at the end (key=value lines)"},
    {.name = "json", .help = "write the results as JSON on stdout (the config echo goes to stderr)"},
};

constexpr std::string_view kDemoDetails =
    "EAL arguments go before a '--' (uroce demo -l 2-3 --no-huge -- --iters 100); without\n"
    "one EAL gets --no-huge --no-pci --no-shconf -m 512. The launcher gives each endpoint\n"
    "its own lcore (--lcores) and, with EAL arguments that name no --file-prefix, a\n"
    "unique one, uroce-demo-PID-server and -client (uroce stat --file-prefix reads an\n"
    "end while it runs), whose runtime folders go once both ends are done.\n"
    "\n"
    "Columns (and --json keys per row): op, bytes, iters (pingpong round trips),\n"
    "t_med/t_p99 (lat_median_us, lat_p99_us, in us, as perftest counts them: half the\n"
    "round trip of a SEND or WRITE, which the server echoes (send_lat, write_lat), and\n"
    "the whole round trip of a READ or atomic (read_lat, atomic_lat)), msgs\n"
    "(stream_msgs), BW (bw_gbps, payload bits per second),\n"
    "Mmsg/s (mmsg_per_s) and verified (every byte of every message checked).\n"
    "Matrix rows: type, op, bytes, msgs, verified. Exit: 0 everything verified, 1 a\n"
    "failure or interrupted, 2 usage error.\n";

constexpr CommandSpec kDemoCommand = {
    .name = "demo",
    .positional = "",
    .summary = "two endpoints in two processes on a DPDK memif link (or two threads on the in-memory fabric): RC pingpong and streaming, verified",
    .options = kDemoOptions,
    .max_positional = 0,
    .details = kDemoDetails,
};

// ---------------------------------------------------------------- output

void print_table_header(bool matrix) {
  if (matrix) {
    std::printf(" %-4s %-10s %8s %6s  %s\n", "type", "op", "bytes", "msgs", "verified");
  } else {
    std::printf(" %-6s %8s %8s %10s %10s %9s %10s %10s  %s\n", "op", "bytes", "iters", "t_med[us]", "t_p99[us]",
                "msgs", "BW[Gb/s]", "Mmsg/s", "verified");
  }
  std::fflush(stdout);
}

void print_row(const Row& r, bool matrix) {
  if (matrix) {
    std::printf(" %-4s %-10s %8u %6llu  %s%s%s\n", type_name(r.type).data(), op_name(r.op).data(), r.size,
                (unsigned long long)r.msgs, r.verified ? "yes" : "NO", r.error.empty() ? "" : "  # ", r.error.c_str());
  } else {
    std::printf(" %-6s %8u %8llu %10.2f %10.2f %9llu %10.3f %10.3f  %s%s%s\n", op_name(r.op).data(), r.size,
                (unsigned long long)r.iters, r.lat_med_us, r.lat_p99_us, (unsigned long long)r.msgs, r.bw_gbps, r.mmsg,
                r.verified ? "yes" : "NO", r.error.empty() ? "" : "  # ", r.error.c_str());
  }
  std::fflush(stdout);
}

void write_row_json(JsonWriter& w, const Row& r) {
  w.begin_object().key("type").str(type_name(r.type)).key("op").str(op_name(r.op)).key("bytes").num(r.size);
  w.key("iters").num(r.iters).key("lat_median_us").fixed(r.lat_med_us, 3).key("lat_p99_us").fixed(r.lat_p99_us, 3);
  w.key("stream_msgs").num(r.msgs).key("bw_gbps").fixed(r.bw_gbps, 4).key("mmsg_per_s").fixed(r.mmsg, 4);
  w.key("verified").boolean(r.verified).key("error").str(r.error).end_object();
}

/// Port, device and per-QP counters (non-zero ones; the port's all), by name.
struct CounterReport {
  using List = std::vector<std::pair<std::string_view, uint64_t>>;
  struct QpPart {
    QpType type;
    uint32_t qpn;
    List counters;
  };
  List port, dev;
  std::vector<QpPart> qps;
};

CounterReport counter_report(DemoPeer& ep) {
  CounterReport rep;
  if (ep.endpoint_.ctx()) {
    if (auto st = ep.endpoint_.port().stats(); st.ok()) {
      const auto& s = st.value();
      rep.port = {{"rx_packets", s.rx_packets}, {"tx_packets", s.tx_packets}, {"rx_bytes", s.rx_bytes},
                  {"tx_bytes", s.tx_bytes},     {"rx_missed", s.rx_missed},   {"rx_errors", s.rx_errors},
                  {"tx_errors", s.tx_errors},   {"rx_nombuf", s.rx_nombuf}};
    }
    rep.port.emplace_back("hook_dropped", ep.endpoint_.drop_every_dropped());
  }
  auto non_zero = [](const Counters& c) {
    CounterReport::List out;
    for (size_t i = 0; i < size_t(Counter::kCount); ++i) {
      if (c.v[i]) out.emplace_back(kCounterNames[i], c.v[i]);
    }
    return out;
  };
  if (ep.endpoint_.ctx()) rep.dev = non_zero(query_counters(ep.endpoint_.ctx()));
  for (Qp* q : {ep.rc_, ep.uc_, ep.ud_}) {
    if (q) rep.qps.push_back({q->qp_type, q->qp_num, non_zero(query_qp_counters(q))});
  }
  return rep;
}

/// Text lines "port role=R k=v ...", "device role=R ...", "qp role=R type=T qpn=0xN ...".
std::string counters_text(const CounterReport& rep, const char* role) {
  auto kv = [](const CounterReport::List& l) {
    std::string out;
    for (const auto& [k, v] : l) out += strf(" %.*s=%llu", int(k.size()), k.data(), (unsigned long long)v);
    return out;
  };
  std::string out = strf("port role=%s%s\n", role, kv(rep.port).c_str()) + strf("device role=%s%s\n", role, kv(rep.dev).c_str());
  for (const auto& q : rep.qps) {
    out += strf("qp role=%s type=%s qpn=0x%x%s\n", role, type_name(q.type).data(), q.qpn, kv(q.counters).c_str());
  }
  return out;
}

/// {"port":{..},"device":{..},"qps":[{"type":T,"qpn":N,"counters":{..}},..]} as w's next value.
void write_counters_json(JsonWriter& w, const CounterReport& rep) {
  auto obj = [&w](const CounterReport::List& l) {
    w.begin_object();
    for (const auto& [k, v] : l) w.key(k).num(v);
    w.end_object();
  };
  w.begin_object().key("port");
  obj(rep.port);
  w.key("device");
  obj(rep.dev);
  w.key("qps").begin_array();
  for (const auto& q : rep.qps) {
    w.begin_object().key("type").str(type_name(q.type)).key("qpn").num(q.qpn).key("counters");
    obj(q.counters);
    w.end_object();
  }
  w.end_array().end_object();
}

// ---------------------------------------------------------------- one endpoint

// Once the process has started (start_endpoint_process): the launcher's
// threads run it side by side on the loopback driver.
int run_endpoint(const Config& cfg, const Args& args) {
  const char* role = cfg.server ? "server" : "client";
  std::FILE* info = cfg.json ? stderr : stdout;
  std::fprintf(info, "# uroce demo %s\n", args.config_line().c_str());
  DemoPeer ep(cfg);
  std::string err;
  int rc = kExitFailure;
  std::vector<Row> rows;
  bool interrupted = false;
  if (!ep.open(err)) {
    std::fprintf(stderr, "uroce demo (%s): %s\n", role, err.c_str());
    return kExitFailure;
  }
  const auto& pi = ep.endpoint_.port_info();
  char gid[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, cfg.gid.raw, gid, sizeof(gid));
  const std::string lcore = rte_lcore_id() == LCORE_ID_ANY ? "none" : std::to_string(rte_lcore_id());
  std::fprintf(info, "# %s: port %s (%s) mtu %u mac %s gid %s lcore %s tsc %.3f GHz%s%s\n", role, pi.name.c_str(),
               pi.driver.c_str(), pi.mtu, mac_str(pi.mac).c_str(), gid, lcore.c_str(), double(ep.endpoint_.clock().hz()) / 1e9,
               cfg.pcap.empty() ? "" : " capture ", cfg.pcap.c_str());
  {
    Oob oob(&g_stop);
    const bool up = cfg.server ? oob.accept_one(cfg.oob_host, cfg.oob_port, cfg.timeout_s, [&ep] { ep.pump(); }, err)
                               : oob.connect_to(cfg.oob_host, cfg.oob_port, cfg.timeout_s, err);
    if (up && ep.connect(oob, err)) {
      std::fprintf(info, "# %s: connected: QPN RC 0x%x UC 0x%x UD 0x%x, peer RC 0x%x UC 0x%x UD 0x%x, path MTU %u\n", role,
                   ep.rc_->qp_num, ep.uc_->qp_num, ep.ud_->qp_num, ep.peer_.qpn[0], ep.peer_.qpn[1], ep.peer_.qpn[2],
                   ep.path_mtu_);
      if (cfg.server) {
        Target t(ep, oob);
        rc = t.run(err);
        std::fprintf(info, "# server: %llu cases, %llu failed%s%s\n", (unsigned long long)t.cases(),
                     (unsigned long long)t.failed(), err.empty() ? "" : "; ", err.c_str());
      } else {
        Driver d(ep, oob);
        if (!cfg.json) print_table_header(cfg.matrix);
        auto add = [&](Row r) {
          if (!cfg.json) print_row(r, cfg.matrix);
          rows.push_back(std::move(r));
        };
        std::vector<Row> tmp;
        if (cfg.matrix) {
          const uint32_t m = ep.path_mtu_;
          const std::vector<uint32_t> sizes = {0, 1, 63, m - 1, m, m + 1, 2 * m, 3 * m - 1, 3 * m};
          for (QpType t : cfg.matrix_types) {
            for (const auto& o : kOps) {
              const bool allowed = t == QpType::kRc || (t == QpType::kUc && !is_atomic(o.op) && o.op != WrOpcode::kRdmaRead) ||
                                   (t == QpType::kUd && (o.op == WrOpcode::kSend || o.op == WrOpcode::kSendWithImm));
              if (!allowed) continue;
              for (uint32_t sz : is_atomic(o.op) ? std::vector<uint32_t>{8} : sizes) {
                if (t == QpType::kUd && sz > m) continue;
                if (d.broken() || g_stop) break;
                tmp.clear();
                d.matrix_case(t, o.op, sz, tmp);
                add(tmp[0]);
              }
            }
          }
        } else {
          for (WrOpcode op : cfg.ops) {
            for (uint32_t sz : is_atomic(op) ? std::vector<uint32_t>{8} : cfg.sizes) {
              if (d.broken() || g_stop) break;
              tmp.clear();
              d.perf(op, sz, tmp);
              add(tmp[0]);
            }
          }
        }
        d.bye();
        const bool all = !rows.empty() && std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.verified; });
        rc = all && !g_stop ? kExitOk : kExitFailure;
      }
    } else {
      std::fprintf(stderr, "uroce demo (%s): %s\n", role, err.c_str());
    }
  }
  interrupted = g_stop != 0;
  // A capture the disk could not hold fails the run (the rows may still be verified).
  if (const Status s = ep.endpoint_.port().stop_capture(); !s.ok()) {
    std::fprintf(stderr, "uroce demo (%s): %s\n", role, s.message());
    rc = kExitFailure;
  }
  const bool all = rc == kExitOk;
  if (!cfg.server && cfg.json) {
    JsonWriter w;
    w.begin_object().key("command").str("demo").key("workload").str(cfg.matrix ? "matrix" : "perf");
    w.key("path_mtu").num(ep.path_mtu_).key("rows").begin_array();
    for (const Row& r : rows) write_row_json(w, r);
    w.end_array().key("verified").boolean(all).key("interrupted").boolean(interrupted);
    if (cfg.counters) write_counters_json(w.key("counters"), counter_report(ep));
    w.end_object();
    std::printf("%s\n", w.text().c_str());
  } else if (!cfg.server) {
    size_t bad = 0;
    for (const auto& r : rows) bad += !r.verified;
    std::printf("# %s: %zu rows, %zu not verified%s\n", all ? "PASS" : "FAIL", rows.size(), bad,
                interrupted ? " (interrupted)" : "");
  }
  if (cfg.counters && !(cfg.json && !cfg.server)) std::fprintf(info, "%s", counters_text(counter_report(ep), role).c_str());
  return rc;
}

// ---------------------------------------------------------------- the launcher

/// True if v holds the option name, alone ("--file-prefix", its value next) or as "name=value".
bool has_arg(const std::vector<std::string>& v, std::string_view name) {
  return std::any_of(v.begin(), v.end(), [name](std::string_view a) {
    return a == name || (a.starts_with(name) && a.size() > name.size() && a[name.size()] == '=');
  });
}

int launch(const Args& args, const dpdk::SplitArgs& split, const Config& cfg) {
  std::FILE* info = cfg.json ? stderr : stdout;
  const std::string dir = make_temp_dir("demo");
  if (dir.empty()) return kExitFailure;
  const std::string sock = dir + "/memif.sock";
  const uint16_t port = cfg.oob_port ? cfg.oob_port : free_tcp_port(cfg.oob_host);
  const auto lcores = split_list(args.get_str("lcores"));
  std::fprintf(info, "# uroce demo %s\n", args.config_line().c_str());
  std::fprintf(info, "# launching server (lcore %s) and client (lcore %s) on net_memif, socket %s, out-of-band %s:%u\n",
               lcores[0].c_str(), lcores[1].c_str(), sock.c_str(), cfg.oob_host.c_str(), port);
  std::fflush(info);

  // Options both endpoints get as given; role, dev, oob-port, lcores and pcap are per endpoint.
  const std::vector<std::string> common =
      given_options(args, kDemoOptions, {"role", "dev", "oob-port", "lcores", "pcap"});
  PairLaunch pair{.tool = "demo", .sock = sock, .grace_s = int(cfg.timeout_s), .remove_dir = dir};
  for (int i = 0; i < 2; ++i) {
    const bool server = i == 0;
    std::vector<std::string>& av = pair.argv[i];
    av = {"demo"};
    std::vector<std::string> eal = split.eal;
    if (eal.empty()) {
      eal = default_eal_args();
      // memif's "no multi-process channel" notice under --no-shconf is expected here.
      eal.push_back("--log-level=pmd.net.memif:critical");
    }
    if (!eal_has_lcores(eal)) {
      eal.push_back("-l");
      eal.push_back(lcores[i]);
    }
    if (!has_arg(eal, "--file-prefix")) {
      pair.file_prefix[i] = strf("uroce-demo-%d-%s", int(getpid()), server ? "server" : "client");
      eal.push_back("--file-prefix=" + pair.file_prefix[i]);
    }
    av.insert(av.end(), eal.begin(), eal.end());
    av.push_back("--");
    av.push_back(server ? "--role=server" : "--role=client");
    av.push_back(strf("--dev=net_memif0,role=%s,socket=%s,socket-abstract=no,mac=02:00:00:00:00:0%d",
                      server ? "server" : "client", sock.c_str(), i + 1));
    av.push_back(strf("--oob-port=%u", port));
    if (!server && args.given("pcap")) av.push_back("--pcap=" + std::string(args.get_str("pcap")));
    av.insert(av.end(), common.begin(), common.end());
  }
  return run_pair(pair);
}

/// --driver loopback: the server and the client as two threads of this
/// process, each with its port on one in-memory fabric ("demo", its capture
/// --pcap), both ports with --fabric's link and faults. Each thread runs on
/// a CPU of its own where the process has two, as the two processes of the
/// memif launcher do (rte_eal_init pins this thread to the main lcore, and a
/// thread started from it would inherit that one CPU).
int launch_in_process(const Args& args, const dpdk::SplitArgs& split, Config cfg) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (pthread_getaffinity_np(pthread_self(), sizeof cpus, &cpus) != 0) CPU_SET(0, &cpus);
  std::vector<int> cpu_list;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &cpus)) cpu_list.push_back(c);
  }
  if (!start_endpoint_process("demo", split)) return kExitFailure;
  std::FILE* info = cfg.json ? stderr : stdout;
  if (cfg.oob_port == 0) cfg.oob_port = free_tcp_port(cfg.oob_host);
  auto fabric = loopback::create_fabric("demo", loopback::FabricConfig{.seed = cfg.seed, .pcap_path = cfg.pcap});
  if (!fabric.ok()) {
    std::fprintf(stderr, "uroce demo: loopback fabric: %s\n", fabric.status().message());
    return kExitFailure;
  }
  std::fprintf(info, "# uroce demo %s\n", args.config_line().c_str());
  std::fprintf(info, "# server and client as threads on the loopback fabric%s%s, out-of-band %s:%u\n",
               cfg.dev.empty() ? "" : " ", cfg.dev.c_str(), cfg.oob_host.c_str(), cfg.oob_port);
  std::fflush(info);
  int rc[2] = {kExitFailure, kExitFailure};
  std::vector<std::thread> sides;
  for (int i = 0; i < 2; ++i) {
    Config side = cfg;
    side.server = i == 0;
    side.dev = "demo" + std::string(cfg.dev.empty() ? "" : ",") + cfg.dev;
    side.pcap.clear();  // the fabric captures
    const uint8_t ip[4] = {10, 0, 0, uint8_t(i + 1)};  // as the processes' defaults
    side.gid = Gid::from_ipv4(ip);
    side.mac = MacAddr{{0x02, 0, 0, 0, 0, uint8_t(i + 1)}};
    sides.emplace_back([side, &args, &rc, &cpus, &cpu_list, i] {
      cpu_set_t mine = cpus;
      if (cpu_list.size() >= 2) {
        CPU_ZERO(&mine);
        CPU_SET(cpu_list[size_t(i)], &mine);
      }
      pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
      rc[i] = run_endpoint(side, args);
    });
  }
  for (auto& t : sides) t.join();
  if (const Status s = loopback::close_capture(**fabric); !s.ok()) {
    std::fprintf(stderr, "uroce demo: %s: %s\n", cfg.pcap.c_str(), s.message());
    return kExitFailure;
  }
  return rc[0] == kExitOk && rc[1] == kExitOk ? kExitOk : kExitFailure;
}

}  // namespace

/// The command, in the demo's namespace (cmd_demo below is its name outside).
int run(int argc, char** argv) {
  dpdk::SplitArgs split;
  Args args;
  if (auto rc = parse_endpoint_command(kDemoCommand, argc, argv, split, args)) return *rc;
  auto usage = [](const std::string& msg) { return usage_error(kDemoCommand, msg); };

  Config cfg;
  const std::string_view role = args.get_str("role");
  cfg.server = role == "server";
  cfg.dev = std::string(args.get_str("dev"));
  cfg.matrix = args.get_str("workload") == "matrix";
  for (const auto& name : split_list(args.get_str("ops"))) {
    const auto* o = std::find_if(std::begin(kOps), std::end(kOps), [&](const OpDesc& d) { return d.name == name; });
    if (o == std::end(kOps)) return usage("unknown op '" + name + "' in --ops (send, send_imm, write, write_imm, read, cas, faa)");
    cfg.ops.push_back(o->op);
  }
  for (const auto& s : split_list(args.get_str("sizes"))) {
    const auto v = parse_uint(s);
    if (!v || *v == 0 || *v > (1u << 24)) return usage("--sizes: '" + s + "' is not a size in 1..16777216");
    cfg.sizes.push_back(uint32_t(*v));
  }
  for (const auto& s : split_list(args.get_str("matrix-types"))) {
    if (s == "rc") cfg.matrix_types.push_back(QpType::kRc);
    else if (s == "uc") cfg.matrix_types.push_back(QpType::kUc);
    else if (s == "ud") cfg.matrix_types.push_back(QpType::kUd);
    else return usage("--matrix-types: '" + s + "' is not rc, uc or ud");
  }
  if ((!cfg.matrix && (cfg.ops.empty() || cfg.sizes.empty())) || (cfg.matrix && cfg.matrix_types.empty())) {
    return usage("nothing to run");
  }
  cfg.iters = args.get_uint("iters");
  cfg.stream_bytes = args.get_uint("stream-bytes");
  cfg.stream_msgs = args.get_uint("stream-msgs");
  cfg.tx_depth = uint32_t(args.get_uint("tx-depth"));
  cfg.matrix_count = uint32_t(args.get_uint("matrix-count"));
  cfg.mtu = uint32_t(args.get_uint("mtu"));
  if (cfg.mtu && (cfg.mtu < 256 || (cfg.mtu & (cfg.mtu - 1)))) return usage("--mtu must be 0 or 256, 512, 1024, 2048, 4096");
  cfg.seed = args.get_uint("seed");
  cfg.oob_host = std::string(args.get_str("oob-host"));
  cfg.oob_port = uint16_t(args.get_uint("oob-port"));
  if (role != "launch" && cfg.oob_port == 0) cfg.oob_port = 18515;
  std::string ip = std::string(args.get_str("ip"));
  if (ip.empty()) ip = cfg.server ? "10.0.0.1" : "10.0.0.2";
  uint8_t v4[4];
  if (inet_pton(AF_INET, ip.c_str(), v4) != 1) return usage("--ip '" + ip + "' is not an IPv4 address");
  cfg.gid = Gid::from_ipv4(v4);
  if (args.given("mac")) {
    cfg.mac = parse_mac(args.get_str("mac"));
    if (!cfg.mac) return usage("--mac is not aa:bb:cc:dd:ee:ff");
  }
  cfg.qp_timeout = read_qp_timeout(args);
  cfg.drop_every = uint32_t(args.get_uint("drop-every"));
  if (cfg.drop_every == 1) return usage("--drop-every 1 would drop everything");
  cfg.timeout_s = uint32_t(args.get_uint("timeout"));
  cfg.pcap = std::string(args.get_str("pcap"));
  cfg.counters = args.flag("counters");
  cfg.json = args.flag("json");
  if (cfg.matrix && cfg.drop_every && std::any_of(cfg.matrix_types.begin(), cfg.matrix_types.end(),
                                                  [](QpType t) { return t != QpType::kRc; })) {
    return usage("--drop-every with UC or UD in --matrix-types: those lose messages by design (use --matrix-types rc)");
  }
  cfg.driver = std::string(args.get_str("driver"));
  if (cfg.driver == "loopback") {
    if (role != "launch") return usage("--driver loopback runs both endpoints in this process: it takes no --role");
    if (args.given("dev") || args.given("ip") || args.given("mac") || args.given("lcores")) {
      return usage("--driver loopback sets each endpoint's port, addresses and thread itself (no --dev, --ip, --mac, --lcores)");
    }
    cfg.dev = std::string(args.get_str("fabric"));
    return launch_in_process(args, split, cfg);
  }
  if (args.given("fabric")) return usage("--fabric is for --driver loopback");
  if (role == "launch") {
    if (!cfg.dev.empty()) return usage("--dev needs --role server|client (the launcher uses net_memif)");
    if (split_list(args.get_str("lcores")).size() != 2) return usage("--lcores takes two lcores, A,B");
    return launch(args, split, cfg);
  }
  if (cfg.dev.empty()) return usage("--role " + std::string(role) + " needs --dev SPEC");
  if (!start_endpoint_process(strf("demo (%s)", cfg.server ? "server" : "client"), split)) return kExitFailure;
  return run_endpoint(cfg, args);
}

}  // namespace demo

int cmd_demo(int argc, char** argv) { return demo::run(argc, argv); }

}  // namespace uroce::apps
