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
// Usage: uroce compare [options]   (uroce compare --help)
// Exit: 0 every measurement ran, 1 one failed (the rest are still reported), 2 usage.
#include <dlfcn.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <uroce/eal.h>

#include "apps/commands.h"
#include "apps/common/args.h"
#include "apps/common/json_writer.h"
#include "apps/common/launch.h"

#ifndef UROCE_SOURCE_ROOT
#define UROCE_SOURCE_ROOT "."
#endif

namespace uroce::apps {
namespace {

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
               "device}, median{metric: {size: value}}, runs{metric: {size: [values]}}, ratios{name:\n"
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

inline constexpr std::array<std::string_view, 8> kKinds = {"stack", "tcp-block", "tcp-busy", "floor",
                                                           "floor-1frame", "verbs", "uroce-run", "demo"};
inline constexpr int kAttempts = 3;  // runs of one measurement before it counts as failed
// Ethernet MTU of both memif ports: room for path MTU 4096. DPDK 22.11's
// memif reports 1500 but carries a frame as large as its ring slot, whose
// size both sides set with bsize (drivers/dpdk/dpdk_io.cc says why a frame
// must not span slots).
inline constexpr uint32_t kPortMtu = 4200;
inline constexpr uint32_t kMemifSlotBytes = 4352;
inline constexpr uint32_t kChildTimeoutS = 20;  // a child's --timeout: link up, the peer, progress

// Bytes a WRITE frame adds to its payload: Ethernet 14, IPv4 20, UDP 8, BTH 12, RETH 16, ICRC 4.
inline constexpr uint32_t kWriteFrameOverhead = 74;
// Frames the floor's ping-pong builds before each tx_burst: of 1, 2, 4, 6, 8
// and 32, 2 and 4 gave the lowest 64 KB and 1 MB half round trips (32 was
// 1.6x slower at 64 KB: the receiver waits while the sender builds), and the
// stack's transmit stage rings its port every 16 KiB, 4 frames of MTU 4096
// (docs/PERFORMANCE.md, "The multi-frame floor"). Blasts keep 32.
inline constexpr uint32_t kFloorPingpongBurst = 4;

struct Config {
  uint32_t rounds = 5;
  std::vector<uint32_t> sizes;
  std::vector<std::string> kinds;
  uint32_t lat_iters = 0, bw_msgs = 0;
  uint64_t lat_bytes = 0, bw_bytes = 0;
  uint32_t tx_depth = 128;
  double floor_seconds = 1;
  uint32_t mtu = 4096;
  int cpu[2] = {0, 1};
  std::string charts, plot_script;
  uint32_t timeout_s = 120;
  bool keep = false, json = false;
  bool memif_zc = false;  ///< --memif-zc
};

/// The number after "key": in a JSON text (its first occurrence at or after
/// from), if any.
std::optional<double> json_num(const std::string& j, std::string_view key, size_t from = 0) {
  const std::string k = "\"" + std::string(key) + "\":";
  const size_t at = j.find(k, from);
  if (at == std::string::npos) return std::nullopt;
  const char* p = j.c_str() + at + k.size();
  char* end = nullptr;
  const double v = std::strtod(p, &end);
  if (end == p) return std::nullopt;
  return v;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string last_lines(const std::string& text, int n) {
  size_t at = text.size();
  for (int i = 0; i <= n && at != std::string::npos && at > 0; ++i) at = text.rfind('\n', at - 1);
  return at == std::string::npos ? text : text.substr(at + 1);
}

// ---------------------------------------------------------------- verbs

struct Verbs {
  bool available = false;
  std::string device;
  std::string status;  ///< "ran on DEV" or "skipped: why"
};

/// True if an executable named tool is in one of PATH's folders (split at
/// ':'; an empty entry is the current folder, as for execvp).
bool on_path(const char* tool) {
  std::istringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
  for (std::string dir; std::getline(path, dir, ':');) {
    if (access(((dir.empty() ? "." : dir) + "/" + tool).c_str(), X_OK) == 0) return true;
  }
  return false;
}

/// libibverbs is loaded at run time (it is not a build dependency): the first
/// RDMA device it lists, and perftest's tools on PATH.
Verbs detect_verbs() {
  Verbs v;
  void* h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    v.status = "skipped: libibverbs.so.1 is not installed (" + std::string(dlerror()) + ")";
    return v;
  }
  using GetList = void** (*)(int*);
  using FreeList = void (*)(void**);
  using GetName = const char* (*)(void*);
  auto get_list = reinterpret_cast<GetList>(dlsym(h, "ibv_get_device_list"));
  auto free_list = reinterpret_cast<FreeList>(dlsym(h, "ibv_free_device_list"));
  auto get_name = reinterpret_cast<GetName>(dlsym(h, "ibv_get_device_name"));
  if (!get_list || !free_list || !get_name) {
    v.status = "skipped: libibverbs.so.1 lacks ibv_get_device_list";
  } else {
    int n = 0;
    void** list = get_list(&n);
    if (list == nullptr || n == 0) {
      v.status = "skipped: libibverbs finds no RDMA device (no rxe/siw link, no RDMA NIC)";
    } else {
      v.device = get_name(list[0]);
      v.available = true;
    }
    if (list) free_list(list);
  }
  dlclose(h);
  if (!v.available) return v;
  for (const char* tool : {"ib_write_lat", "ib_send_lat", "ib_write_bw"}) {
    if (!on_path(tool)) {
      v.available = false;
      v.status = "skipped: device " + v.device + " found, but perftest's " + tool + " is not on PATH";
      return v;
    }
  }
  v.status = "ran on " + v.device;
  return v;
}

/// A perftest result row "SIZE ITERS f2 f3 ..." in out; field idx as a number.
std::optional<double> perftest_field(const std::string& out, uint32_t size, int idx) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    for (std::string w; ls >> w;) f.push_back(w);
    if (f.size() > size_t(idx) && f[0] == std::to_string(size) && std::all_of(f[1].begin(), f[1].end(), ::isdigit)) {
      return std::strtod(f[size_t(idx)].c_str(), nullptr);
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- the runs

class Runner {
 public:
  Runner(const Config& cfg, std::string dir, std::FILE* info) : cfg_(cfg), dir_(std::move(dir)), info_(info) {}

  /// One pair of processes; the output of the side `want` (0 server, 1 client), or nullopt.
  /// Each is pinned to its CPU of --cpus, or with pin false keeps compare's affinity.
  std::optional<std::string> pair(const std::string& label, std::vector<std::string> server,
                                  std::vector<std::string> client, const std::string& sock, int want,
                                  const std::string& exe = "", bool pin = true) {
    PairLaunch p{.tool = "compare", .sock = sock, .grace_s = 10, .deadline_s = int(cfg_.timeout_s)};
    p.argv[0] = std::move(server);
    p.argv[1] = std::move(client);
    p.exe = exe;
    const std::string base = dir_ + "/" + std::to_string(++n_) + "-" + label;
    for (int i = 0; i < 2; ++i) {
      p.output[i] = base + (i == 0 ? ".server" : ".client");
      p.cpu[i] = pin ? cfg_.cpu[i] : -1;
    }
    // A memif client that connects in the instant between the server's bind()
    // and listen() never retries (DPDK 22.11); on a loaded machine that window
    // is wide. A failed pair is run again, twice at most, and says so.
    for (int attempt = 1;; ++attempt) {
      std::error_code ec;
      std::filesystem::remove(sock, ec);
      if (run_pair(p) == kExitOk) return read_text(p.output[want]);
      std::fprintf(info_, "# %s failed (attempt %d of %d); server:\n%s# client:\n%s", label.c_str(), attempt,
                   kAttempts, last_lines(read_text(p.output[0]), 3).c_str(), last_lines(read_text(p.output[1]), 3).c_str());
      if (attempt == kAttempts || g_stop) break;
    }
    failures_.push_back(label);
    return std::nullopt;
  }

  std::vector<std::string> eal(int side) const {
    std::vector<std::string> v = default_eal_args();
    v.push_back("-l");
    v.push_back(std::to_string(side));  // lcore id; the CPU comes from the pinning
    v.push_back("--log-level=pmd.net.memif:critical");
    for (auto& e : zc_eal(side)) v.push_back(e);
    v.push_back("--");
    return v;
  }
  /// The EAL argument memif's zero-copy mode needs on side (the client), if
  /// --memif-zc: the PMD shares EAL's memory with its peer as one file per
  /// memseg list and refuses otherwise ("Zero-copy doesn't support multi-file
  /// segments", rte_eth_memif.c memif_set_zc); --no-huge memory is a memfd
  /// then, so it works without hugepages.
  std::vector<std::string> zc_eal(int side) const {
    if (cfg_.memif_zc && side == 1) return {"--single-file-segments"};
    return {};
  }
  std::string memif(int side) const {
    return strf("net_memif0,role=%s,socket=%s,socket-abstract=no,bsize=%u%s", side == 0 ? "server" : "client",
                sock().c_str(), kMemifSlotBytes, cfg_.memif_zc && side == 1 ? ",zero-copy=yes" : "");
  }
  std::string sock() const { return dir_ + "/memif.sock"; }

  uint32_t bw_iters(uint32_t size) const {
    return uint32_t(std::clamp<uint64_t>(cfg_.bw_bytes / size, 100, cfg_.bw_msgs));
  }
  uint32_t lat_iters(uint32_t size) const {
    return uint32_t(std::clamp<uint64_t>(cfg_.lat_bytes / size, std::min(100u, cfg_.lat_iters), cfg_.lat_iters));
  }
  uint32_t iters(const std::string& test, uint32_t size) const {
    return test.ends_with("_bw") ? bw_iters(size) : lat_iters(size);
  }

  /// uroce perf TEST at size over memif: its JSON result (client side).
  std::optional<std::string> stack(const std::string& test, uint32_t size) {
    const uint16_t port = free_tcp_port("127.0.0.1");
    const bool bw = test.ends_with("_bw");
    const uint32_t iters = this->iters(test, size);
    std::vector<std::string> av[2];
    for (int i = 0; i < 2; ++i) {
      av[i] = {"perf"};
      for (auto& e : eal(i)) av[i].push_back(e);
      for (auto& a : {test, std::string("-s"), std::to_string(size), std::string("-n"), std::to_string(iters),
                      std::string("--mtu"), std::to_string(cfg_.mtu), std::string("--port-mtu"), std::to_string(kPortMtu),
                      std::string("-p"), std::to_string(port),
                      std::string("--ip"), std::string(i == 0 ? "10.0.0.1" : "10.0.0.2"), std::string("--mac"),
                      strf("02:00:00:00:00:0%d", i + 1), std::string("--dev"), memif(i), std::string("--timeout"),
                      std::to_string(kChildTimeoutS), std::string("--json")}) {
        av[i].push_back(a);
      }
    }
    if (bw) {
      for (auto& v : av) {
        for (auto& f : bw_flags()) v.push_back(f);
      }
    }
    av[1].push_back("127.0.0.1");
    return pair(strf("stack-%s-%u", test.c_str(), size), av[0], av[1], sock(), 1);
  }

  /// uroce demo's SEND, WRITE and READ pingpongs at size over memif, no
  /// streaming phase: its JSON result (client side).
  std::optional<std::string> demo(uint32_t size) {
    const uint16_t port = free_tcp_port("127.0.0.1");
    std::vector<std::string> av[2];
    for (int i = 0; i < 2; ++i) {
      av[i] = {"demo"};
      for (auto& e : eal(i)) av[i].push_back(e);
      for (auto& a : {std::string("--role"), std::string(i == 0 ? "server" : "client"), std::string("--dev"), memif(i),
                      std::string("--mac"), strf("02:00:00:00:00:0%d", i + 1), std::string("--mtu"), std::to_string(cfg_.mtu),
                      std::string("--oob-port"), std::to_string(port), std::string("--ops"), std::string("send,write,read"),
                      std::string("--sizes"), std::to_string(size), std::string("--iters"), std::to_string(lat_iters(size)),
                      std::string("--stream-msgs"), std::string("0"), std::string("--timeout"),
                      std::to_string(kChildTimeoutS), std::string("--json")}) {
        av[i].push_back(a);
      }
    }
    return pair(strf("demo-%u", size), av[0], av[1], sock(), 1);
  }

  std::optional<std::string> tcp(const std::string& mode, const std::string& test, uint32_t size) {
    const uint16_t port = free_tcp_port("127.0.0.1");
    const uint32_t iters = this->iters(test, size);
    std::vector<std::string> av[2];
    for (int i = 0; i < 2; ++i) {
      av[i] = {"perf", test, "-s", std::to_string(size), "-n", std::to_string(iters), "--tcp", mode,
               "-p", std::to_string(port), "--listen", "127.0.0.1", "--timeout", std::to_string(kChildTimeoutS), "--json"};
    }
    av[1].push_back("127.0.0.1");
    return pair(strf("tcp-%s-%s-%u", mode.c_str(), test.c_str(), size), av[0], av[1], "", 1);
  }

  /// uroce floor MODE for messages of size: the multi-frame floor (kind
  /// floor) or one frame a message (floor-1frame). The client's JSON
  /// (pingpong) or the server's (blast).
  std::optional<std::string> floor(const std::string& kind, const std::string& mode, uint32_t size) {
    std::vector<std::string> shape =
        kind == "floor" ? std::vector<std::string>{"--message", std::to_string(size), "--mtu", std::to_string(cfg_.mtu),
                                                   "--overhead", std::to_string(kWriteFrameOverhead)}
                        : std::vector<std::string>{"--size", std::to_string(std::min(size, cfg_.mtu) + kWriteFrameOverhead)};
    if (mode == "pingpong") {
      shape.push_back("--burst");
      shape.push_back(std::to_string(kFloorPingpongBurst));
    }
    std::vector<std::string> av[2];
    for (int i = 0; i < 2; ++i) {
      av[i] = {"floor"};
      for (auto& e : eal(i)) av[i].push_back(e);
      for (auto& a : {mode, std::string("--role"), std::string(i == 0 ? "server" : "client"), std::string("--dev"),
                      memif(i), std::string("--port-mtu"), std::to_string(kPortMtu), std::string("-n"),
                      std::to_string(lat_iters(size)), std::string("--seconds"), strf("%g", cfg_.floor_seconds),
                      std::string("--timeout"), std::to_string(kChildTimeoutS), std::string("--json")}) {
        av[i].push_back(a);
      }
      av[i].insert(av[i].end(), shape.begin(), shape.end());
    }
    return pair(strf("%s-%s-%u", kind.c_str(), mode.c_str(), size), av[0], av[1], sock(), mode == "blast" ? 0 : 1);
  }

  /// perftest's TOOL on the verbs device; its text output (client side).
  std::optional<std::string> verbs(const std::string& tool, const std::string& device, uint32_t size) {
    std::vector<std::string> av[2] = {{"-d", device}, {"-d", device}};
    return perftest(strf("verbs-%s-%u", tool.c_str(), size), tool, size, av, "", tool);
  }

  /// perftest's TOOL under `uroce run` (this executable) on uroce's
  /// libibverbs.so.1, on the stack's memif link; its text output (client side).
  std::optional<std::string> uroce_run(const std::string& tool, uint32_t size) {
    std::vector<std::string> av[2];
    for (int i = 0; i < 2; ++i) {
      // The port options of `uroce run`, then COMMAND on GID index 3 (RoCEv2, IPv4).
      av[i] = {"run"};
      if (!zc_eal(i).empty()) {  // uroce's default EAL args, and memif's zero-copy one
        for (auto& e : default_eal_args()) av[i].push_back(e);
        for (auto& e : zc_eal(i)) av[i].push_back(e);
      }
      for (auto& a : {std::string("--"), std::string("--dev"), memif(i), std::string("--port-mtu"),
                      std::to_string(kPortMtu), std::string("--ip"), std::string(i == 0 ? "10.0.0.1" : "10.0.0.2"),
                      std::string("--mac"), strf("02:00:00:00:00:0%d", i + 1), tool, std::string("-x"),
                      std::string("3")}) {
        av[i].push_back(a);
      }
    }
    // Not pinned: each end is two busy threads (the program, which spins on
    // memory in these tests, and the library's background engine thread);
    // pinned to one CPU the engine runs only when the scheduler preempts the
    // spinning program (t_typical 377 us instead of 140 us in one run on the
    // 2-vCPU host). bench/verbs_cost.sh leaves them unpinned too.
    return perftest(strf("uroce-run-%s-%u", tool.c_str(), size), tool, size, av, sock(), "", false);
  }

  const std::vector<std::string>& failures() const { return failures_; }

 private:
  /// perftest's TOOL at size, each end's argv after av[i] (the device, or the
  /// `uroce run` in front of the tool); the client's text output.
  std::optional<std::string> perftest(const std::string& label, const std::string& tool, uint32_t size,
                                      std::vector<std::string> (&av)[2], const std::string& sock, const std::string& exe,
                                      bool pin = true) {
    const uint16_t port = free_tcp_port("127.0.0.1");
    const uint32_t iters = this->iters(tool, size);
    for (int i = 0; i < 2; ++i) {
      for (auto& a : {std::string("-s"), std::to_string(size), std::string("-n"), std::to_string(iters),
                      std::string("-p"), std::to_string(port)}) {
        av[i].push_back(a);
      }
      if (tool.ends_with("_bw")) {
        for (auto& f : bw_flags()) av[i].push_back(f);
      }
    }
    av[1].push_back("127.0.0.1");
    return pair(label, av[0], av[1], sock, 1, exe, pin);
  }

  /// The flags of every bandwidth run, the stack's and perftest's alike: the
  /// window, and the run timed as a whole, not every post (perftest's -N), as
  /// the TCP path and the floor time theirs.
  std::vector<std::string> bw_flags() const { return {"-N", "-t", std::to_string(cfg_.tx_depth)}; }

  const Config& cfg_;
  std::string dir_;
  std::FILE* info_;
  int n_ = 0;
  std::vector<std::string> failures_;
};

// ---------------------------------------------------------------- results

/// metric name -> size -> one value per round.
using Samples = std::map<std::string, std::map<uint32_t, std::vector<double>>>;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::optional<double> med(const Samples& s, const std::string& metric, uint32_t size) {
  auto m = s.find(metric);
  if (m == s.end()) return std::nullopt;
  auto v = m->second.find(size);
  if (v == m->second.end() || v->second.empty()) return std::nullopt;
  return median(v->second);
}

struct Ratio {
  std::string name;  ///< "stack.write_lat / floor.lat"
  std::string num, den;
  std::string target;  ///< what docs/PERFORMANCE.md asks of it, or empty
};

// The floor of the ratios is the multi-frame one (kind floor): a message of
// the size in the frames the stack sends, its payload copied each side.
const Ratio kRatios[] = {
    {"stack write_lat / floor lat", "stack.write_lat", "floor.lat", "<= 5 at 64 B, <= 2.5 at every size"},
    {"stack send_lat / floor lat", "stack.send_lat", "floor.lat", "<= 5 at 64 B, <= 2.5 at every size"},
    {"tcp-block lat / stack write_lat", "tcp-block.lat", "stack.write_lat", ">= 10 at 64 B"},
    {"tcp-busy lat / stack write_lat", "tcp-busy.lat", "stack.write_lat", ">= 10 at 64 B, >= 1.5 at 64 KB and 1 MB"},
    {"tcp-block lat / stack send_lat", "tcp-block.lat", "stack.send_lat", ">= 10 at 64 B"},
    {"tcp-busy lat / stack send_lat", "tcp-busy.lat", "stack.send_lat", ">= 10 at 64 B, >= 1.5 at 64 KB and 1 MB"},
    {"stack write rate / floor frame rate", "stack.write_rate", "floor.rate", ">= 0.4 at 64 B"},
    {"stack write bw / tcp-block bw", "stack.write_bw", "tcp-block.bw", ">= 3 at 64 KB and 1 MB"},
    {"stack write bw / tcp-busy bw", "stack.write_bw", "tcp-busy.bw", ">= 3 at 64 KB"},
    {"verbs write_lat / stack write_lat", "verbs.write_lat", "stack.write_lat", ""},
    {"uroce-run write_lat / stack write_lat", "uroce-run.write_lat", "stack.write_lat", "<= 1.1 at 64 B"},
    {"uroce-run rate / stack write rate", "uroce-run.write_rate", "stack.write_rate", ">= 0.9 at 64 B"},
    {"demo send_lat / stack send_lat", "demo.send_lat", "stack.send_lat", "<= 1.15 at every size"},
    {"demo write_lat / stack write_lat", "demo.write_lat", "stack.write_lat", "<= 1.15 at every size"},
    {"demo read_lat / stack read_lat", "demo.read_lat", "stack.read_lat", "<= 1.15 at every size"},
};

struct Column {
  std::string metric, title;
};

void print_table(std::FILE* out, const char* title, const std::vector<Column>& cols, const Samples& s,
                 const std::vector<uint32_t>& sizes) {
  std::fprintf(out, "%s\n %-8s", title, "bytes");
  for (const auto& c : cols) std::fprintf(out, " %14s", c.title.c_str());
  std::fprintf(out, "\n");
  for (uint32_t size : sizes) {
    std::fprintf(out, " %-8u", size);
    for (const auto& c : cols) {
      if (auto v = med(s, c.metric, size)) {
        std::fprintf(out, " %14.3f", *v);
      } else {
        std::fprintf(out, " %14s", "-");
      }
    }
    std::fprintf(out, "\n");
  }
}

void print_json(const Config& cfg, const Samples& s, const Verbs& verbs, const std::vector<std::string>& failures,
                std::FILE* out) {
  struct sysinfo si {};
  sysinfo(&si);
  JsonWriter w;
  w.begin_object().key("command").str("compare").key("rounds").num(cfg.rounds).key("mtu").num(cfg.mtu);
  w.key("tx_depth").num(cfg.tx_depth).key("memif_zc").boolean(cfg.memif_zc).key("sizes").begin_array();
  for (uint32_t size : cfg.sizes) w.num(size);
  w.end_array();
  w.key("machine").begin_object().key("cpus_online").num(sysconf(_SC_NPROCESSORS_ONLN));
  w.key("load1").fixed(double(si.loads[0]) / double(1 << SI_LOAD_SHIFT), 2).end_object();
  w.key("verbs").begin_object().key("status").str(verbs.status).key("device").str(verbs.device).end_object();
  for (const bool medians : {true, false}) {
    w.key(medians ? "median" : "runs").begin_object();
    for (const auto& [metric, by_size] : s) {
      w.key(metric).begin_object();
      for (const auto& [size, v] : by_size) {
        w.key(std::to_string(size));
        if (medians) {
          w.general(median(v), 6);
        } else {
          w.begin_array();
          for (double x : v) w.general(x, 6);
          w.end_array();
        }
      }
      w.end_object();
    }
    w.end_object();
  }
  w.key("ratios").begin_object();
  for (const Ratio& r : kRatios) {
    JsonWriter body;
    body.begin_object();
    bool any = false;
    for (uint32_t size : cfg.sizes) {
      auto a = med(s, r.num, size), b = med(s, r.den, size);
      if (a && b && *b > 0) {
        body.key(std::to_string(size)).general(*a / *b, 4);
        any = true;
      }
    }
    if (any) w.key(r.name).raw(body.end_object().text());
  }
  w.end_object().key("failures").begin_array();
  for (const std::string& f : failures) w.str(f);
  w.end_array().end_object();
  std::fprintf(out, "%s\n", w.text().c_str());
}

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

  auto want = [&](std::string_view k) { return std::find(cfg.kinds.begin(), cfg.kinds.end(), k) != cfg.kinds.end(); };
  const bool uroce_run = want("uroce-run");
  const bool demo = want("demo");
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
  const Verbs verbs = want("verbs") ? detect_verbs() : Verbs{false, "", "skipped: not in --kinds"};
  std::fprintf(info, "# uroce compare %s\n# %ld CPUs online; server side on CPU %d, client side on CPU %d; temp dir %s\n",
               args.config_line().c_str(), sysconf(_SC_NPROCESSORS_ONLN), cfg.cpu[0], cfg.cpu[1], tmpl);
  std::fprintf(info, "# verbs: %s\n", verbs.status.c_str());

  Runner run(cfg, tmpl, info);
  Samples s;
  auto add = [&](const std::string& metric, uint32_t size, std::optional<double> v) {
    if (v) {
      s[metric][size].push_back(*v);
      std::fprintf(info, "#   %-20s %8u B  %12.3f\n", metric.c_str(), size, *v);
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
      if (!want(kind) || (kind == "verbs" && !verbs.available)) continue;
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

  std::fprintf(info, "\n# medians of %u interleaved round%s; stack path MTU %u, %u WRITEs in flight; verbs %s\n",
               cfg.rounds, cfg.rounds == 1 ? "" : "s", cfg.mtu, cfg.tx_depth, verbs.status.c_str());
  // The uroce-run columns only when asked for: the default tables stay as they were.
  auto with_run = [&](std::vector<Column> cols, const char* metric) {
    if (uroce_run) cols.push_back({metric, "run WRITE"});
    return cols;
  };
  print_table(info, "# latency, half round trip, t_typical [usec]",
              with_run({{"stack.write_lat", "stack WRITE"}, {"stack.send_lat", "stack SEND"}, {"tcp-block.lat", "tcp block"},
                        {"tcp-busy.lat", "tcp busy"}, {"floor.lat", "floor"}, {"floor-1frame.lat", "floor 1frame"},
                        {"verbs.write_lat", "verbs WRITE"},
                        {"verbs.send_lat", "verbs SEND"}},
                       "uroce-run.write_lat"),
              s, cfg.sizes);
  print_table(info, "# bandwidth, average [MB/sec]",
              with_run({{"stack.write_bw", "stack WRITE"}, {"tcp-block.bw", "tcp block"}, {"tcp-busy.bw", "tcp busy"},
                        {"floor.bw", "floor"}, {"floor-1frame.bw", "floor 1frame"}, {"verbs.write_bw", "verbs WRITE"}},
                       "uroce-run.write_bw"),
              s, cfg.sizes);
  print_table(info, "# message rate [Mmsg/s]",
              with_run({{"stack.write_rate", "stack WRITE"}, {"tcp-block.rate", "tcp block"}, {"tcp-busy.rate", "tcp busy"},
                        {"floor.rate", "floor"}, {"floor-1frame.rate", "floor 1frame"}, {"verbs.write_rate", "verbs WRITE"}},
                       "uroce-run.write_rate"),
              s, cfg.sizes);
  if (demo) {
    print_table(info, "# uroce demo against uroce perf: SEND and WRITE half a round trip, READ a whole one [usec]",
                {{"demo.send_lat", "demo SEND"}, {"stack.send_lat", "perf SEND"}, {"demo.write_lat", "demo WRITE"},
                 {"stack.write_lat", "perf WRITE"}, {"demo.read_lat", "demo READ"}, {"stack.read_lat", "perf READ"}},
                s, cfg.sizes);
  }
  std::fprintf(info, "# ratios (of the medians)\n %-38s", "ratio");
  for (uint32_t size : cfg.sizes) std::fprintf(info, " %10u", size);
  std::fprintf(info, "   target\n");
  for (const Ratio& r : kRatios) {
    std::string row;
    bool any = false;
    for (uint32_t size : cfg.sizes) {
      auto a = med(s, r.num, size), b = med(s, r.den, size);
      any = any || (a && b && *b > 0);
      row += a && b && *b > 0 ? strf(" %10.2f", *a / *b) : strf(" %10s", "-");
    }
    if (any) std::fprintf(info, " %-38s%s   %s\n", r.name.c_str(), row.c_str(), r.target.c_str());
  }
  if (!run.failures().empty()) std::fprintf(info, "# %zu measurement(s) failed\n", run.failures().size());

  int rc = run.failures().empty() && !g_stop ? kExitOk : kExitFailure;
  if (cfg.json) print_json(cfg, s, verbs, run.failures(), stdout);
  if (!cfg.charts.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cfg.charts, ec);
    const std::string path = cfg.charts + "/compare.json";
    if (!write_text_file("compare", path, [&](std::FILE* f) { print_json(cfg, s, verbs, run.failures(), f); })) {
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
