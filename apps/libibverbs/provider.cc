#include "apps/libibverbs/provider.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <uroce/eal.h>

#include "apps/common/addr_text.h"
#include "apps/common/args.h"
#include "apps/libibverbs/gid_layout.h"
#include "drivers/registry.h"
#include "stack/device/context.h"

namespace uroce::ibv {

namespace {

// Every signal blocked in the calling thread while it lives, so that the
// threads started meanwhile (EAL's, the ports', the engine's) inherit the
// mask: a program's handler (qperf's SIGURG handler calls exit()) runs on
// the program's own threads, never in the middle of ours.
class SignalsBlocked {
 public:
  SignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old_);
  }
  ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

bool read_uint(const char* name, uint64_t lo, uint64_t hi, uint64_t& out, std::string& err) {
  const char* v = env(name);
  if (!v) return true;
  const std::optional<uint64_t> x = apps::parse_uint(v);
  if (!x || *x < lo || *x > hi) {
    err = std::string(name) + "='" + v + "': not a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    return false;
  }
  out = *x;
  return true;
}

std::vector<std::string> split_spaces(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A memif client's port, opened until its link comes up. DPDK 22.11's
// net_memif client connects once, when its port starts: if the server's
// socket is not there yet the port does not start, and if the server has
// probed but not yet started its port it answers the client's INIT with
// "ID not found" (drivers/net/memif/memif_socket.c, memif_msg_receive_init)
// and the client never connects again. Programs that open both ends at the
// same moment (ucx_perftest after its TCP handshake, MPI ranks) meet either
// at random, so a client opens its port again, waiting for the link each
// time, for kMemifClientRetryMs; then it opens it as any other port (the
// last try: a device without a peer, as before).
constexpr uint32_t kMemifClientLinkWaitMs = 1000;
constexpr uint32_t kMemifClientRetryMs = 15000;

Result<std::unique_ptr<drivers::IoPort>> open_port(drivers::IoConfig pc) {
  const bool memif_client = pc.device.find("net_memif") != std::string::npos &&
                            (pc.device.find("role=client") != std::string::npos ||
                             pc.device.find("role=slave") != std::string::npos);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(kMemifClientRetryMs);
  while (memif_client && std::chrono::steady_clock::now() < end) {
    drivers::IoConfig attempt = pc;
    attempt.link_timeout_ms = kMemifClientLinkWaitMs;
    auto port = drivers::make_packet_io("dpdk", attempt);
    // kUnavailable: the port did not start or its link stayed down; any
    // other error (a bad device spec) will not go away by waiting.
    if (port.ok() || port.status().code() != StatusCode::kUnavailable) return port;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a port that did not start returns at once
  }
  return drivers::make_packet_io("dpdk", pc);
}

}  // namespace

std::string read_provider_config(ProviderConfig& cfg) {
  std::string err;
  if (const char* v = env("UROCE_EAL")) cfg.eal = v;
  if (const char* v = env("UROCE_DEV")) cfg.dev = v;
  if (const char* v = env("UROCE_IP")) {
    cfg.ip4 = apps::parse_ip_gid(v, false);
    if (!cfg.ip4) return std::string("UROCE_IP='") + v + "': not an IPv4 address";
  }
  if (const char* v = env("UROCE_IP6")) {
    cfg.ip6 = apps::parse_ip_gid(v, true);
    if (!cfg.ip6) return std::string("UROCE_IP6='") + v + "': not an IPv6 address";
  }
  if (const char* v = env("UROCE_MAC")) {
    cfg.mac = apps::parse_mac(v);
    if (!cfg.mac) return std::string("UROCE_MAC='") + v + "': not a MAC address";
  }
  if (const char* v = env("UROCE_PCAP")) cfg.pcap = v;
  if (const char* v = env("UROCE_COUNTERS")) cfg.counters = v;
  uint64_t x = cfg.port_mtu;
  if (!read_uint("UROCE_PORT_MTU", 576, 9600, x, err)) return err;
  cfg.port_mtu = uint16_t(x);
  x = cfg.max_qp;
  if (!read_uint("UROCE_MAX_QP", 1, 65536, x, err)) return err;
  cfg.max_qp = uint32_t(x);
  if (!read_uint("UROCE_DROP_SEED", 0, UINT64_MAX, cfg.drop_seed, err)) return err;
  if (const char* v = env("UROCE_DROP_RATE")) {
    cfg.drop_rate = apps::parse_double(v).value_or(-1);
    if (!(cfg.drop_rate >= 0 && cfg.drop_rate <= 1)) {
      return std::string("UROCE_DROP_RATE='") + v + "': not a fraction in [0, 1]";
    }
  }
  if (const char* v = env("UROCE_CC")) {
    const std::string c = v;
    size_t i = 0;
    while (i < std::size(kCcAlgorithmNames) && kCcAlgorithmNames[i] != c) ++i;
    if (i == std::size(kCcAlgorithmNames)) return "UROCE_CC='" + c + "': none, dcqcn or timely";
    cfg.cc = CcAlgorithm(i);
  }
  if (const char* v = env("UROCE_PROGRESS")) {
    const std::string p = v;
    if (p != "auto" && p != "inline" && p != "thread") return "UROCE_PROGRESS='" + p + "': auto, inline or thread";
    cfg.progress = p == "thread"   ? ProviderConfig::Progress::kThread
                   : p == "inline" ? ProviderConfig::Progress::kInline
                                   : ProviderConfig::Progress::kAuto;
  }
  if (!cfg.ip4 && !cfg.ip6) return "neither UROCE_IP nor UROCE_IP6 is set: the device has no address";
  return "";
}

int errno_of(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument: return EINVAL;
    case StatusCode::kInvalidQpState: return EINVAL;
    case StatusCode::kResourceExhausted: return ENOMEM;
    case StatusCode::kNotFound: return ENOENT;
    case StatusCode::kBusy: return EBUSY;
    case StatusCode::kPermissionDenied: return EACCES;
    case StatusCode::kUnavailable: return ENODEV;
    case StatusCode::kDataLoss: return EIO;
    case StatusCode::kInternal: return EIO;
  }
  return EIO;
}

Provider* Provider::get() {
  static Provider* const p = [] {
    auto* q = new Provider;
    if (const std::string err = q->open(); !err.empty()) {
      std::fprintf(stderr, "uroce libibverbs: %s (docs/VERBS.md)\n", err.c_str());
      return static_cast<Provider*>(nullptr);
    }
    // Counters at exit, after the program is done with the device.
    std::atexit([] { Provider::get()->close(); });
    return q;
  }();
  return p;
}

std::string Provider::open() {
  const SignalsBlocked quiet;  // for the threads open() starts
  if (std::string err = read_provider_config(cfg_); !err.empty()) return err;
  const std::vector<std::string> eal = cfg_.eal.empty() ? default_eal_args() : split_spaces(cfg_.eal);
  const Status st = init_eal_unpinned(eal);  // the program's thread keeps the CPUs it had
  if (!st.ok()) return std::string("UROCE_EAL: ") + st.message();
  clock_.emplace();

  drivers::IoConfig pc;
  pc.device = cfg_.dev;
  pc.mtu = cfg_.port_mtu;
  pc.mac = cfg_.mac;  // the port keeps its own and runs promiscuous: the stack answers for UROCE_MAC in software
  pc.pcap_path = cfg_.pcap;
  pc.link_timeout_ms = 0;  // as a kernel device opens (a memif server waits for its peer otherwise); the engine thread warms it up
  auto port = open_port(pc);
  if (!port.ok()) return "UROCE_DEV '" + cfg_.dev + "': " + port.status().message();
  port_ = std::move(port).value();

  DeviceConfig dc;
  dc.mac = mac();
  dc.gid = net::link_local_gid(dc.mac);
  dc.max_qp = cfg_.max_qp;
  dc.cc.algorithm = cfg_.cc;
  dc.clock = dpdk::TscClock::read;
  dc.clock_ctx = &*clock_;
  PacketIo* io = &port_->io();
  if (cfg_.drop_rate > 0) io = &fault_.emplace(*io, cfg_.drop_rate, cfg_.drop_seed);
  io = &self_loop_.emplace(*io, dc.mac);  // QPs of this device may connect to each other
  auto ctx = open_device(*io, dc);
  if (!ctx.ok()) return std::string("open_device: ") + ctx.status().message();
  ctx_ = std::move(ctx).value();

  // The GID table as Linux fills a RoCE device's (gid_layout.h). open_device
  // put the link-local RoCEv2 entry at 0.
  net::GidTable& gids = ctx_->net->gids();
  (void)gids.remove(0);
  std::vector<Gid> addrs{dc.gid};
  if (cfg_.ip4) addrs.push_back(*cfg_.ip4);
  if (cfg_.ip6) addrs.push_back(*cfg_.ip6);
  uint8_t index = 0;
  for (const Gid& g : addrs) {
    for (net::GidType t : kGidTypesPerAddress) {
      if (Status s = gids.set(index++, net::GidEntry{g, t, net::kNoVlan, dc.mac}); !s.ok()) {
        return "GID " + apps::gid_str(g) + ": " + s.message();
      }
    }
  }
  (void)step();
  engine_thread_.store(cfg_.progress == ProviderConfig::Progress::kThread, std::memory_order_relaxed);
  engine_ = start_engine_thread();
  static Provider* self = this;  // for the fork handlers (the device is one per process)
  pthread_atfork([] { self->fork_prepare(); }, [] { self->fork_parent(); }, [] { self->fork_child(); });
  return "";
}

std::thread Provider::start_engine_thread() {
  const SignalsBlocked quiet;
  return std::thread([this] { run_engine_thread(); });
}

void Provider::fork_child() {
  engine_.detach();  // the parent's thread: a std::thread that names no thread here
  // A fresh lock (the state it guards is whole, fork_prepare held it): the
  // copy may be held in its mutex under the parent's thread ID, which this
  // process's thread cannot unlock, and membarrier registers per process.
  std::destroy_at(&lock_);
  std::construct_at(&lock_);
  engine_ = start_engine_thread();
}

void Provider::run_engine_thread() {
  // The hot naps are short: the default timer slack (50 us) would more than double them.
  prctl(PR_SET_TIMERSLACK, 1000UL);
  const ThreadLcore lcore;  // a mempool cache for the frames it moves
  uint64_t moved_ns = 0;  // when this thread's steps last moved frames
  while (!stop_.load(std::memory_order_relaxed)) {
    // The port was opened without waiting for its link: what the open would
    // have done once it came up, here, before the program's first frames.
    port_->warm_up();
    if (engine_thread() || waiters_.load(std::memory_order_relaxed) > 0) {
      // try_lock, not lock, so that stop_ is seen while a thread that holds
      // the lock exits: with every signal now on the program's threads, a
      // handler that calls exit() may interrupt a verbs call (qperf's
      // SIGALRM). middleware_libfabric_qperf had processes hang at exit in
      // 2 of 7 runs with lock here, none in 4 with try_lock.
      if (lock_.try_lock()) {
        (void)step();
        lock_.unlock();
      }
      // No naps here to measure it: the first nap after this measures it afresh.
      if (streaming_.load(std::memory_order_relaxed)) streaming_.store(false, std::memory_order_relaxed);
      sched_yield();  // lets a waiting verbs call take the lock
      continue;
    }
    const bool paced = paced_.load(std::memory_order_relaxed);
    const bool streaming = !paced && streaming_.load(std::memory_order_relaxed);
    const bool hot = paced || (!streaming && clock_->now_ns() - moved_ns < kHotNs);
    const uint64_t posts = posts_.load(std::memory_order_relaxed);
    const uint64_t nap = streaming ? kStreamingNapNs : hot ? kHotNapNs : cold_nap_ns(clock_->now_ns(), moved_ns);
    std::this_thread::sleep_for(std::chrono::nanoseconds(nap));
    streaming_.store(posts_.load(std::memory_order_relaxed) - posts >= kStreamingPosts, std::memory_order_relaxed);
    if (elapsed_ns(clock_->now_ns(), last_step_ns_.load(std::memory_order_relaxed)) < (hot ? kHotNapNs : kIdleStepNs)) {
      continue;
    }
    // The program is away: step while there is traffic, until it is back.
    const uint64_t away = clock_->now_ns();
    const bool passive = hot && elapsed_ns(away, data_path_ns_.load(std::memory_order_relaxed)) >= kHotNs;
    const uint32_t quiet_steps = hot ? kHotQuietSteps : kQuietSteps;
    uint64_t busy_ns = away;  // the last step that moved frames or had some to send
    for (uint32_t quiet = 0; !stop_.load(std::memory_order_relaxed);) {
      if (data_path_ns_.load(std::memory_order_relaxed) > away || !lock_.try_lock()) break;  // the program is back
      const uint32_t n = step();
      // A QP the pacer holds back (cc dcqcn) has frames to send in a
      // moment: not quiet, or the hot naps would pace it instead.
      const bool waits_to_send = ctx_->ready.size() != 0 || ctx_->pace_timers.armed_count() != 0;
      lock_.unlock();
      const uint64_t now = clock_->now_ns();
      if (n) moved_ns = now;
      if (n || waits_to_send) {
        busy_ns = now;
        quiet = 0;
      } else if (passive ? now - busy_ns >= kHotNapNs : ++quiet >= quiet_steps) {
        break;
      }
    }
  }
}

void Provider::note_paced() {
  const bool paced = ctx_->pace_timers.armed_count() != 0;
  if (paced != paced_.load(std::memory_order_relaxed)) paced_.store(paced, std::memory_order_relaxed);
}

uint64_t Provider::cold_nap_ns(uint64_t now, uint64_t moved_ns) const {
  const uint64_t since_step = elapsed_ns(now, last_step_ns_.load(std::memory_order_relaxed));
  const uint64_t still = elapsed_ns(now, std::max(moved_ns, data_path_ns_.load(std::memory_order_relaxed)));
  return std::max(since_step < kIdleStepNs ? kIdleStepNs - since_step : 0,
                  std::clamp(still / kColdBackoff, kColdNapNs, kColdNapMaxNs));
}

bool Provider::resolve(const Gid& ip, uint8_t sgid_index, MacAddr& mac, uint32_t timeout_ms) {
  const uint8_t* g = ip.raw;
  if (g[0] == 0xfe && (g[1] & 0xc0) == 0x80 && g[11] == 0xff && g[12] == 0xfe) {  // fe80::EUI-64 (RFC 4291 App. A)
    mac = MacAddr{{uint8_t(g[8] ^ 2), g[9], g[10], g[13], g[14], g[15]}};
    return true;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const net::Resolution r = ctx_->net->resolve(ip, sgid_index, now_ns());
    if (r.status == net::ResolveStatus::kResolved) {
      mac = r.mac;
      return true;
    }
    if (r.status == net::ResolveStatus::kFailed || std::chrono::steady_clock::now() >= end) return false;
    step();
  }
}

void Provider::write_counters() const {
  if (cfg_.counters.empty()) return;
  FILE* f = cfg_.counters == "stderr" ? stderr : std::fopen(cfg_.counters.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "uroce libibverbs: UROCE_COUNTERS '%s': cannot write\n", cfg_.counters.c_str());
    return;
  }
  const Counters& c = query_counters(ctx_.get());
  for (size_t i = 0; i < kCounterNames.size(); ++i) {
    if (c.v[i]) std::fprintf(f, "%.*s %llu\n", int(kCounterNames[i].size()), kCounterNames[i].data(),
                             static_cast<unsigned long long>(c.v[i]));
  }
  if (fault_) {  // what UROCE_DROP_RATE lost, as `uroce perf --counters` prints it
    std::fprintf(f, "hook_rx_dropped %llu\nhook_tx_dropped %llu\n",
                 static_cast<unsigned long long>(fault_->rx_dropped()),
                 static_cast<unsigned long long>(fault_->tx_dropped()));
  }
  // The progress in effect at exit: 1 once the engine had a thread of its own (UROCE_PROGRESS).
  std::fprintf(f, "engine_thread %d\n", engine_thread() ? 1 : 0);
  if (f != stderr) std::fclose(f);
}

void Provider::close() {
  stop_ = true;
  if (engine_.joinable()) engine_.join();
  // The frames the program's last calls queued (a DREP, the DREQ of an id
  // it destroyed, the last ACKs) still go out before the port closes.
  // librdmacm's channels may be gone by now: no more CM events to them.
  after_step_ = nullptr;
  // try_lock, not lock: a handler that calls exit() (libinfinipath's
  // SIGTERM handler, which libfabric loads) may have interrupted a thread
  // inside the lock's own calls (between taking its word and naming itself
  // the owner, say), which then leave it held for good: the last frames
  // stay queued instead (fi_pingpong's server hung here, its memif socket
  // left; tests/verbs/fork_exit.cc).
  for (const uint64_t end = now_ns() + kExitDrainNs; now_ns() < end;) {
    if (!lock_.try_lock()) continue;
    (void)step();
    lock_.unlock();
  }
  write_counters();
  (void)port_->stop_capture();
  // The link goes down under the lock, so that no call is in the engine
  // meanwhile; a lock that a signal left held for good (the drain's note
  // above) leaves the port as it is, to the process's end.
  for (const uint64_t end = now_ns() + kExitDrainNs; now_ns() < end;) {
    if (!lock_.try_lock()) continue;
    closed_ = true;
    port_->shut_down();
    lock_.unlock();
    return;
  }
}

}  // namespace uroce::ibv
