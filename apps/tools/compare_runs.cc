// `uroce compare`'s runs (compare.h): each measurement one fresh pair of
// processes pinned to --cpus (uroce perf over memif or kernel TCP, uroce
// floor, uroce demo, perftest on a verbs device or under `uroce run`), run
// again when it fails, and the readers of what the children print.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <uroce/eal.h>

#include "apps/common/args.h"
#include "apps/common/launch.h"
#include "apps/tools/compare.h"

namespace uroce::apps::compare {

namespace {

constexpr int kAttempts = 3;  // runs of one measurement before it counts as failed
// Ethernet MTU of both memif ports: room for path MTU 4096. DPDK 22.11's
// memif reports 1500 but carries a frame as large as its ring slot, whose
// size both sides set with bsize (drivers/dpdk/dpdk_io.cc says why a frame
// must not span slots).
constexpr uint32_t kPortMtu = 4200;
constexpr uint32_t kMemifSlotBytes = 4352;
constexpr uint32_t kChildTimeoutS = 20;  // a child's --timeout: link up, the peer, progress

// Bytes a WRITE frame adds to its payload: Ethernet 14, IPv4 20, UDP 8, BTH 12, RETH 16, ICRC 4.
constexpr uint32_t kWriteFrameOverhead = 74;
// Frames the floor's ping-pong builds before each tx_burst: of 1, 2, 4, 6, 8
// and 32, 2 and 4 gave the lowest 64 KB and 1 MB half round trips (32 was
// 1.6x slower at 64 KB: the receiver waits while the sender builds), and the
// stack's transmit stage rings its port every 16 KiB, 4 frames of MTU 4096
// (docs/PERFORMANCE.md, "The multi-frame floor"). Blasts keep 32.
constexpr uint32_t kFloorPingpongBurst = 4;

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

// One cache line's round trip between CPUs a and b: a thread pinned to each
// bounces a counter for about 20 ms; the mean, in ns. Neither is the
// calling thread, whose affinity (the unpinned children's) stays as it is.
// 0 if a thread cannot be pinned or its partner never answers (a CPU taken
// for good by something else).
double line_round_trip_ns(int cpu_a, int cpu_b) {
  using Clock = std::chrono::steady_clock;
  struct alignas(64) Line {
    std::atomic<uint64_t> v{0};
  };
  Line ping, pong;
  std::atomic<bool> stop{false};
  std::atomic<int> pinned{0};
  auto pin = [&pinned](int cpu) {
    if (pin_to_cpu(cpu)) pinned.fetch_add(1);
  };
  std::thread echo([&] {
    pin(cpu_a);
    for (uint64_t seen = 0; !stop.load(std::memory_order_relaxed);) {
      const uint64_t v = ping.v.load(std::memory_order_acquire);
      if (v != seen) pong.v.store(seen = v, std::memory_order_release);
    }
  });
  double ns = 0;
  std::thread bounce([&] {
    pin(cpu_b);
    const auto start = Clock::now();
    const auto give_up = start + std::chrono::milliseconds(500);
    uint64_t n = 0;
    for (auto now = start; now - start < std::chrono::milliseconds(20); now = Clock::now()) {
      for (int i = 0; i < 256; ++i) {
        ping.v.store(++n, std::memory_order_release);
        for (uint32_t spins = 1; pong.v.load(std::memory_order_acquire) != n; ++spins) {
          if (spins % 65536 == 0 && Clock::now() > give_up) return;
        }
      }
    }
    ns = double(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count()) / double(n);
  });
  bounce.join();
  stop.store(true, std::memory_order_relaxed);
  echo.join();
  return pinned.load() == 2 ? ns : 0;
}

}  // namespace

std::optional<double> json_num(const std::string& j, std::string_view key, size_t from) {
  const std::string k = "\"" + std::string(key) + "\":";
  const size_t at = j.find(k, from);
  if (at == std::string::npos) return std::nullopt;
  const char* p = j.c_str() + at + k.size();
  char* end = nullptr;
  const double v = std::strtod(p, &end);
  if (end == p) return std::nullopt;
  return v;
}

bool on_path(const char* tool) {
  std::istringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
  for (std::string dir; std::getline(path, dir, ':');) {
    if (access(((dir.empty() ? "." : dir) + "/" + tool).c_str(), X_OK) == 0) return true;
  }
  return false;
}

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

std::optional<std::string> Runner::pair(const std::string& label, std::vector<std::string> server,
                                        std::vector<std::string> client, const std::string& sock, int want,
                                        const std::string& exe, bool pin) {
  PairLaunch p{.tool = "compare", .sock = sock, .grace_s = 10, .deadline_s = int(cfg_.timeout_s)};
  p.argv[0] = std::move(server);
  p.argv[1] = std::move(client);
  p.exe = exe;
  const std::string base = dir_ + "/" + std::to_string(++n_) + "-" + label;
  for (int i = 0; i < 2; ++i) {
    p.output[i] = base + (i == 0 ? ".server" : ".client");
    p.cpu[i] = pin ? cfg_.cpu[i] : -1;
  }
  line_rtt_ns_ = line_round_trip_ns(cfg_.cpu[0], cfg_.cpu[1]);
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

std::vector<std::string> Runner::eal(int side) const {
  std::vector<std::string> v = default_eal_args();
  v.push_back("-l");
  v.push_back(std::to_string(side));  // lcore id; the CPU comes from the pinning
  v.push_back("--log-level=pmd.net.memif:critical");
  for (auto& e : zc_eal(side)) v.push_back(e);
  v.push_back("--");
  return v;
}

std::vector<std::string> Runner::zc_eal(int side) const {
  if (cfg_.memif_zc && side == 1) return {"--single-file-segments"};
  return {};
}

std::string Runner::memif(int side) const {
  return strf("net_memif0,role=%s,socket=%s,socket-abstract=no,bsize=%u%s", side == 0 ? "server" : "client",
              sock().c_str(), kMemifSlotBytes, cfg_.memif_zc && side == 1 ? ",zero-copy=yes" : "");
}

std::string Runner::sock() const {
  return dir_ + "/memif.sock";
}

uint32_t Runner::bw_iters(uint32_t size) const {
  return uint32_t(std::clamp<uint64_t>(cfg_.bw_bytes / size, 100, cfg_.bw_msgs));
}

uint32_t Runner::lat_iters(uint32_t size) const {
  return uint32_t(std::clamp<uint64_t>(cfg_.lat_bytes / size, std::min(100u, cfg_.lat_iters), cfg_.lat_iters));
}

uint32_t Runner::iters(const std::string& test, uint32_t size) const {
  return test.ends_with("_bw") ? bw_iters(size) : lat_iters(size);
}

std::optional<std::string> Runner::stack(const std::string& test, uint32_t size) {
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

std::optional<std::string> Runner::demo(uint32_t size) {
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

std::optional<std::string> Runner::tcp(const std::string& mode, const std::string& test, uint32_t size) {
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

std::optional<std::string> Runner::floor(const std::string& kind, const std::string& mode, uint32_t size) {
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

std::optional<std::string> Runner::verbs(const std::string& tool, const std::string& device, uint32_t size) {
  std::vector<std::string> av[2] = {{"-d", device}, {"-d", device}};
  return perftest(strf("verbs-%s-%u", tool.c_str(), size), tool, size, av, "", tool);
}

std::optional<std::string> Runner::uroce_run(const std::string& tool, uint32_t size) {
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

std::optional<std::string> Runner::perftest(const std::string& label, const std::string& tool, uint32_t size,
                                            std::vector<std::string> (&av)[2], const std::string& sock, const std::string& exe,
                                            bool pin) {
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

std::vector<std::string> Runner::bw_flags() const {
  return {"-N", "-t", std::to_string(cfg_.tx_depth)};
}

}  // namespace uroce::apps::compare
