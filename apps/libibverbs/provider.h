// The uroce device behind libibverbs.so.1: one per process, opened on the
// first ibv_get_device_list from the UROCE_* environment (docs/VERBS.md),
// which `uroce run` sets. It owns the DPDK port, the uroce Context on it and
// the engine's progress.
//
// Threads: every verbs entry point takes the device lock (Guard) for the whole
// call, so calls from any threads are safe. The lock (BiasedLock) costs no
// atomic instruction to the thread that takes it most. It is recursive: an
// ibv_cq_ex iterator holds it from start_poll to end_poll, as a provider holds
// its CQ lock, and the thread may post in between (ibv_rc_pingpong -t reposts
// its receives there), as a provider's separate QP locks allow. Progress is
// run-to-completion by default: ibv_poll_cq and every wait run one engine step
// (uroce::poll) under the lock before they look, and a post rings its doorbell
// (doorbell()). While the program is away (blocked in a socket, computing, or
// watching memory as ib_write_bw's passive side does), a background thread
// steps the engine once no call has for kIdleStepNs, or for kHotNapNs while
// its own steps find traffic, so the device still answers ARP, ACKs and RDMA
// requests as a kernel device would, and steps without a pause while a call
// blocks (ibv_get_cq_event).
// UROCE_PROGRESS chooses: auto (the default) is run-to-completion while the
// data path (posts and polls) runs on one thread, and gives the engine a
// thread of its own, for good, the first time a second thread posts or polls
// (rping's CQ thread, a program with a thread per QP): run-to-completion then
// makes each thread step for the others. inline keeps run-to-completion;
// thread gives the engine its thread from the start.
//
// Exit: the device is never freed. close(), at exit, lets the last frames
// leave, writes the counters and the capture and takes the port's link
// down; a thread the program leaves running (rping's CM thread, still in
// rdma_get_cm_event while main returns) or a later atexit handler may still
// call in, and finds a whole device whose frames no longer move.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <infiniband/verbs.h>

#include <uroce/verbs.h>

#include "apps/libibverbs/biased_lock.h"
#include "drivers/dpdk/fault_io.h"
#include "drivers/dpdk/self_loop_io.h"
#include "drivers/dpdk/tsc_clock.h"
#include "drivers/io_port.h"

namespace uroce::ibv {

/// The time from `then`, a time another thread stored, to `now`, this
/// thread's: 0 where that thread read its clock after this one did. The
/// plain difference wrapped to 2^64 - a few ns, a long silence: about 30 %
/// of the engine thread's 1 ms streaming naps (stock ib_write_bw's client)
/// went on to step, now and then taking the lock's bias from the program
/// thread, which then took the mutex until 4,096 calls in a row earned it
/// back (docs/VERBS.md, "a wrapped time difference"). The doorbell's
/// reads, both under the lock, use it too.
inline uint64_t elapsed_ns(uint64_t now, uint64_t then) { return now > then ? now - then : 0; }

/// What the UROCE_* variables say (read_provider_config).
struct ProviderConfig {
  std::string eal;          ///< UROCE_EAL: EAL arguments, split at spaces
  std::string dev = "0";    ///< UROCE_DEV: the port, as `uroce perf --dev`
  std::optional<Gid> ip4;   ///< UROCE_IP
  std::optional<Gid> ip6;   ///< UROCE_IP6
  std::optional<MacAddr> mac;  ///< UROCE_MAC (the port's if unset)
  uint16_t port_mtu = 1500;    ///< UROCE_PORT_MTU
  std::string pcap;            ///< UROCE_PCAP
  double drop_rate = 0;        ///< UROCE_DROP_RATE
  uint64_t drop_seed = 1;      ///< UROCE_DROP_SEED
  std::string counters;        ///< UROCE_COUNTERS: "stderr" or a file, written at exit
  enum class Progress : uint8_t { kAuto, kInline, kThread };
  Progress progress = Progress::kAuto;  ///< UROCE_PROGRESS: auto, inline or thread
  uint32_t max_qp = 256;       ///< UROCE_MAX_QP
  CcAlgorithm cc = CcAlgorithm::kNone;  ///< UROCE_CC: none, dcqcn or timely (DeviceConfig::cc)
};

/// Reads the UROCE_* variables; "" or the error naming the bad one.
std::string read_provider_config(ProviderConfig& cfg);

class Provider {
 public:
  /// The process's device, opened on first use; nullptr (with the reason
  /// printed once to stderr) when the environment names no working port.
  static Provider* get();

  Context* ctx() const { return ctx_.get(); }
  const ProviderConfig& config() const { return cfg_; }
  const drivers::IoPortInfo& port_info() const { return port_->info(); }
  MacAddr mac() const { return cfg_.mac ? *cfg_.mac : port_->info().mac; }
  BiasedLock& lock() { return lock_; }

  /// One engine step (the lock held). In thread mode the engine thread does
  /// these, and step() only runs when called from a wait. None once the
  /// port is shut (close).
  uint32_t step() { return step(clock_->now_ns()); }
  /// The same, with the time just read.
  uint32_t step(uint64_t now) {
    if (closed_) [[unlikely]] return 0;
    last_step_ns_.store(now, std::memory_order_relaxed);
    posts_at_step_ = posts_.load(std::memory_order_relaxed);
    const uint32_t n = poll(ctx_.get(), now);
    note_paced();
    if (after_step_) after_step_(after_step_arg_);
    return n;
  }
  /// fn(arg) runs after every engine step, the lock held: uroce's
  /// librdmacm.so.1 moves the CM's events to its channels there.
  void set_after_step(void (*fn)(void*), void* arg) {
    after_step_ = fn;
    after_step_arg_ = arg;
  }
  /// The data path's step (the posts, the polls; the lock held): a step
  /// unless the engine thread makes progress. Under auto, a data-path call
  /// from a second thread hands progress to the engine thread instead.
  void step_inline() {
    const uint64_t now = clock_->now_ns();
    data_path_ns_.store(now, std::memory_order_relaxed);
    if (engine_thread_.load(std::memory_order_relaxed)) return;
    if (cfg_.progress == ProviderConfig::Progress::kAuto && !on_data_path_thread()) {
      engine_thread_.store(true, std::memory_order_relaxed);
      return;
    }
    (void)step(now);
  }
  /// The engine has a thread of its own (thread, or auto after a second data-path thread).
  bool engine_thread() const { return engine_thread_.load(std::memory_order_relaxed); }
  uint64_t now_ns() const { return clock_->now_ns(); }
  /// A post's doorbell (the lock held): step_inline, unless a step ran less
  /// than kDoorbellNs ago, or, while the program streams, fewer than
  /// kStreamDoorbellPosts posts ago. The posts of a burst (ib_write_bw's 128
  /// in flight) then share a step, whose transmit burst sends them together,
  /// rather than a step, a lock round and a one-frame burst each; the next
  /// poll or post, or the background thread, rings it.
  void doorbell() {
    const uint64_t posts = posts_.load(std::memory_order_relaxed) + 1;
    posts_.store(posts, std::memory_order_relaxed);  // only lock holders write it
    if (streaming_.load(std::memory_order_relaxed)) {
      if (posts - posts_at_step_ >= kStreamDoorbellPosts) step_inline();
      return;
    }
    const uint64_t now = clock_->now_ns();
    if (elapsed_ns(now, last_step_ns_.load(std::memory_order_relaxed)) >= kDoorbellNs) return step_inline();
    data_path_ns_.store(now, std::memory_order_relaxed);
  }

  /// A blocking call (ibv_get_cq_event) waits without the lock: while one
  /// does, the background thread steps without a pause, so what it waits for
  /// comes as soon as the frames do.
  struct Waiting {
    explicit Waiting(Provider& p) : p_(p) { p_.waiters_.fetch_add(1, std::memory_order_relaxed); }
    ~Waiting() { p_.waiters_.fetch_sub(1, std::memory_order_relaxed); }
    Provider& p_;
  };

  /// Resolves ip's MAC from GID index sgid_index, stepping the engine until
  /// the answer comes or timeout_ms pass (the lock held). Link-local GIDs
  /// give their MAC without asking. False: no answer.
  bool resolve(const Gid& ip, uint8_t sgid_index, MacAddr& mac, uint32_t timeout_ms);

  /// fork() in a program that has the device (qperf's server forks a
  /// process per test): the lock is held across the fork, so that nothing
  /// it guards is half changed in the child, which takes a fresh lock and
  /// starts an engine thread of its own (the parent's is not in it).
  void fork_prepare() { lock_.lock(); }
  void fork_parent() { lock_.unlock(); }
  void fork_child();

  /// At exit (std::atexit): stops the engine thread, lets the last frames
  /// leave, writes UROCE_COUNTERS and the capture, and shuts the port's link
  /// (IoPort::shut_down) under the lock. Everything else stays, for calls
  /// that come later.
  void close();
  ~Provider() = delete;  // see "Exit" above

 private:
  Provider() = default;
  std::string open();
  void write_counters() const;
  void run_engine_thread();
  /// The engine thread, every signal blocked in it (SignalsBlocked).
  std::thread start_engine_thread();
  /// True if the calling thread is the first that reached the data path (the lock held).
  bool on_data_path_thread() {
    const std::thread::id me = std::this_thread::get_id();
    if (data_path_thread_ == std::thread::id()) data_path_thread_ = me;
    return me == data_path_thread_;
  }
  /// Inline progress, cold: the background thread steps once no step ran
  /// for kIdleStepNs, and then until kQuietSteps in a row move no frame. It
  /// naps until that is due, and once nothing has moved for a while (no
  /// frame, no post or poll) longer: 1/kColdBackoff of that time, from
  /// kColdNapNs up to kColdNapMaxNs. An idle program's device then costs
  /// about 1 % of a CPU, and the first frame after a quiet spell waits no
  /// longer than it did with fixed naps (a step due every kIdleStepNs)
  /// unless the spell lasted over 13 ms. Before, it napped kColdNapNs
  /// whatever the time and stepped 4,096 quiet steps (about 100 us) a
  /// session: a stock server waiting for its client took half a CPU, and
  /// a program polling its CQ lost its CPU to the thread 20,000 times a
  /// second.
  static constexpr uint64_t kColdNapNs = 50'000;
  static constexpr uint64_t kColdNapMaxNs = 1'000'000;
  static constexpr uint64_t kColdBackoff = 64;
  static constexpr uint64_t kIdleStepNs = 200'000;
  static constexpr uint32_t kQuietSteps = 64;
  /// Sets paced_ after a step (the lock held).
  void note_paced();
  /// The cold nap at now (see kColdNapNs).
  uint64_t cold_nap_ns(uint64_t now, uint64_t moved_ns) const;
  /// Hot, for kHotNs after its own steps last moved frames (the program is
  /// away while traffic flows: ib_write_lat and ib_write_bw's passive side
  /// watch memory and call no verb): it naps kHotNapNs, steps once no step
  /// ran for as long, and then until kHotQuietSteps in a row move none. On
  /// 2 CPUs shared by 2 programs that spin and their 2 engine threads,
  /// shorter naps made it a running thread, which waits for the scheduler's
  /// tick (ib_write_lat 1 to 4 ms); 20 us gave 21 us. On the 2-vCPU guests
  /// measured, a nap of a few us hardly sleeps: a 2 us one takes 26 us of
  /// CPU, and any nap 12 us or more (bench/nap_bench).
  /// A program that has called no verb for kHotNs while frames flow (the
  /// passive side of ib_write_bw and ib_read_bw, waiting in a socket)
  /// leaves the device to this thread: it steps until kHotNapNs pass
  /// without a frame, as long as a nap would delay the next one, and only
  /// then naps (spin, then block). Stopping after kHotQuietSteps (about
  /// 3 us) it napped between the client's bursts of posts: with a stock
  /// server, ib_write_bw from `uroce perf` reached 1.9-3.6 Mpps, 3.6-4.2
  /// with the spin (Zen 5, each end on its own CPU).
  static constexpr uint64_t kHotNs = 2'000'000;
  static constexpr uint64_t kHotNapNs = 20'000;
  static constexpr uint32_t kHotQuietSteps = 32;
  /// A program that rang kStreamingPosts doorbells or more during one nap
  /// (ib_write_bw's client posts bursts of 100) steps the engine itself in
  /// its calls: the thread naps kStreamingNapNs instead, until a nap sees
  /// fewer. Each wakeup takes the program's CPU for 12 us or more on the
  /// 2-vCPU guests measured (bench/nap_bench): 20 us naps woke it 22,000
  /// times a second; 200 us naps 4,500, and ib_write_bw 64 B reached a
  /// median 3.45 Mpps; 1 ms naps 3.98 (6 interleaved pairs, Zen 5), 4 ms
  /// no more. A program that stops posting to watch memory waits up to
  /// kStreamingNapNs once; ib_write_lat posts once a round trip, and stays
  /// hot. Not while the pacer holds a QP back (cc dcqcn; paced_): its
  /// frames are due in a moment, so the thread naps kHotNapNs and steps
  /// them out once no step ran for as long. Before, a program under
  /// `--cc dcqcn` that posted 16 WRITEs and then waited in a socket had
  /// its paced frames wait the whole 1 ms, while the rate-increase timer
  /// lifted their rate and the CNPs that came meanwhile waited to be read
  /// at one instant (conform's cc.cnp_slows_target against the rdma-core
  /// helper: a target lapse of 1.1-1.2 ms in every such deviation).
  static constexpr uint64_t kStreamingPosts = 16;
  static constexpr uint64_t kStreamingNapNs = 1'000'000;
  /// doorbell(): posts this soon after a step share the next one.
  static constexpr uint64_t kDoorbellNs = 1'000;
  /// ... and while the program streams, since it calls again soon: bigger
  /// transmit bursts, counted in posts, for a TSC read costs 8 to 11 ns
  /// here, 5 % of a 64 B post (ib_write_bw's client under perf). A window
  /// of 16 us instead (as many posts, at 230 ns a post) gave ib_write_bw
  /// 64 B medians of 3.48 Mpps against 2.48 with kDoorbellNs (4 interleaved
  /// runs, Zen 5). The last posts of a stream wait for the program's next
  /// call, or for this thread's next step (kStreamingNapNs at most).
  static constexpr uint64_t kStreamDoorbellPosts = 64;
  /// At exit, the engine steps this long so that queued frames leave; then
  /// close() waits as long again for the lock to shut the port under it.
  static constexpr uint64_t kExitDrainNs = 2'000'000;

  ProviderConfig cfg_;
  std::unique_ptr<drivers::IoPort> port_;
  std::optional<dpdk::RandomDropIo> fault_;
  std::optional<dpdk::SelfLoopIo> self_loop_;
  std::optional<dpdk::TscClock> clock_;  // after EAL is up
  ContextPtr ctx_;
  BiasedLock lock_;
  bool closed_ = false;  // the port is shut (close); the lock held
  std::thread engine_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> last_step_ns_{0};
  std::atomic<uint64_t> data_path_ns_{0};  // the program's last poll or clocked post: it is back (a streaming post reads no clock)
  std::atomic<uint64_t> posts_{0};  // doorbells rung, for kStreamingPosts
  uint64_t posts_at_step_ = 0;  // posts_ at the last step (the lock held), for kStreamDoorbellPosts
  std::atomic<bool> streaming_{false};  // the engine thread's last nap saw kStreamingPosts or more
  std::atomic<bool> paced_{false};  // the last step left the pacer a QP to release (a pace timer armed)
  std::atomic<int> waiters_{0};
  std::atomic<bool> engine_thread_{false};
  std::thread::id data_path_thread_;  // the lock held
  void (*after_step_)(void*) = nullptr;
  void* after_step_arg_ = nullptr;
};

/// Holds the device lock for one verbs call.
using Guard = std::lock_guard<BiasedLock>;

/// errno-style code for a uroce Status (0 for ok): EINVAL, ENOMEM, EBUSY, ...
int errno_of(const Status& s);

}  // namespace uroce::ibv
