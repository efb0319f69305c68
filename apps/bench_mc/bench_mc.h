// What the `uroce bench-mc` files share (bench_mc.cc describes the tool):
// its Config, the RSS log of the soak, the data patterns of the verify
// workload, the Info each side writes for the other, and one side of the
// bench (EngineGroupSide): bench_mc_side.cc sets it up, connects it and runs
// the soak's end checks; bench_mc_run.cc has the engine loops and the run.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <uroce/engine_group.h>
#include <uroce/verbs.h>

#include "apps/common/page_buffer.h"
#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/fault_io.h"
#include "drivers/dpdk/tsc_clock.h"
#include "stack/common/rng.h"

namespace uroce::apps::bench_mc {

// ---------------------------------------------------------------- config, patterns

struct Config {
  bool server = false;
  std::string dir;
  uint32_t engines = 1;
  uint32_t qps = 8;
  bool verify = false;
  bool cross = false;
  uint32_t size = 64;
  uint32_t depth = 32;
  double seconds = 3;
  double warmup = 1;
  uint32_t rounds = 50;
  double duration_s = 0;    // verify: > 0 runs rounds for this long (soak) instead of `rounds`
  uint32_t drop_every = 0;  // DropEveryNthIo on every queue
  uint32_t timeout_s = 60;
};

// Resident set size of this process in KiB (/proc/self/statm), 0 if unreadable.
inline uint64_t rss_kib() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return f ? resident * uint64_t(sysconf(_SC_PAGESIZE)) / 1024 : 0;
}

// Soak: RSS samples of one process, every 10 s of its main thread's waiting.
struct RssLog {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), next = start;
  uint64_t first = 0, at_1min = 0, last = 0, max = 0;
  int samples = 0;
  void sample() {
    const auto t = std::chrono::steady_clock::now();
    if (t < next) return;
    next = t + std::chrono::seconds(10);
    last = rss_kib();
    if (!samples++) first = last;
    if (!at_1min && t - start >= std::chrono::seconds(60)) at_1min = last;
    max = std::max(max, last);
  }
};

enum Kind : uint64_t { kWriteData = 1, kSendData = 2, kWriteImmData = 3, kFaa = 4, kCas = 5 };
inline uint64_t key_of(uint32_t qp, uint64_t round, Kind k) { return splitmix64_of((uint64_t(qp) << 40) ^ (round << 4) ^ k); }
inline void fill(uint8_t* p, uint32_t len, uint64_t key) {
  for (uint32_t i = 0; i < len; ++i) p[i] = uint8_t(splitmix64_of(key + i / 8) >> (8 * (i % 8)));
}
inline bool same(const uint8_t* p, uint32_t len, uint64_t key) {
  for (uint32_t i = 0; i < len; ++i) {
    if (p[i] != uint8_t(splitmix64_of(key + i / 8) >> (8 * (i % 8)))) return false;
  }
  return true;
}
/// Immediate of a SEND (bit 31 clear) or WRITE with imm (bit 31 set) of round r on QP j.
inline uint32_t imm_of(uint32_t j, uint64_t r, bool write) { return (write ? 0x80000000u : 0) | (j << 20) | uint32_t(r & 0xfffff); }

// ---------------------------------------------------------------- exchange files

inline constexpr uint32_t kMagic = 0x55524d43;  // "URMC"
inline constexpr uint32_t kMaxQps = 16384;
struct Info {
  uint32_t magic = kMagic;
  uint32_t engines = 0;
  uint32_t qps = 0;
  uint32_t rkey = 0;
  uint64_t area_addr = 0;  // per QP j: a 2*size slot at area_addr + j * slot_bytes
  uint64_t slot_bytes = 0;
  uint64_t atomic_addr = 0;  // per QP j: a word at atomic_addr + 8 j
  uint8_t mac[6] = {};
  uint8_t gid[16] = {};
  uint32_t qpn[kMaxQps] = {};
  uint32_t psn[kMaxQps] = {};
};

/// Writes n bytes of p to path whole (to path.tmp, then renamed): the peer
/// never sees half a file. False on any error.
bool write_file(const std::string& path, const void* p, size_t n);
/// Reads n bytes of path into p; false if it holds fewer.
bool read_file(const std::string& path, void* p, size_t n);

// ---------------------------------------------------------------- one endpoint

inline constexpr uint32_t kRecvPerQp = 16;

struct QpSlot {
  Qp* qp = nullptr;
  uint32_t engine = 0;
  uint32_t index = 0;    // j
  // client verify state
  uint64_t round = 0;
  uint32_t outstanding = 0;
  uint64_t faa_expect = 0;  // value the next FAA returns
  uint64_t cas_expect = 0;
  bool done = false;
};

struct alignas(64) EngineRun {
  std::atomic<uint64_t> msgs{0};   // completions (rate) or verified round ops
  std::atomic<uint64_t> bad{0};
  std::atomic<bool> finished{false};
  std::string error;              // written by the engine lcore before finished
};

/// One side of the bench: a memif port with one queue per engine, an
/// EngineGroup whose engines run on their own lcores, a PD, CQs and QPs per
/// engine. Not the apps' Endpoint (apps/common/endpoint.h), which is one
/// device on one queue that the app thread itself polls (run-to-completion);
/// the two share no setup code beyond what the stack's API already is.
class EngineGroupSide {
 public:
  explicit EngineGroupSide(const Config& c) : cfg_(c) {}
  bool open(std::string& err);
  bool connect(std::string& err);
  int run();

 private:
  int engine_body(uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop);
  void server_loop(uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop);
  void rate_loop(uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop);
  void verify_loop(uint32_t e, const dpdk::TscClock& clock, const std::atomic<bool>& stop);
  void post_round(QpSlot& s);
  bool check_round(QpSlot& s, std::string& why);
  uint8_t* slot_area(uint32_t j) { return area_ + uint64_t(j) * slot_bytes_; }
  uint8_t* local(uint32_t j) { return local_ + uint64_t(j) * slot_bytes_; }
  uint64_t* atomic_word(uint32_t j) { return reinterpret_cast<uint64_t*>(atomics_) + j; }
  uint64_t* atomic_result(uint32_t j) { return reinterpret_cast<uint64_t*>(atomics_) + kMaxQps + 2 * j; }
  std::string path(const char* name) const { return cfg_.dir + "/" + name; }
  void report(const char* side);
  /// Once the engines have stopped: their messages (good), bad ones, and the first engine's error if err is empty.
  void engine_totals(uint64_t& good, uint64_t& bad, std::string& err) const;

  const Config& cfg_;
  bool soak_checks(const char* side, RssLog& rss, std::string& err);

  std::unique_ptr<dpdk::DpdkPort> port_;
  std::vector<std::unique_ptr<dpdk::DropEveryNthIo>> lossy_;
  std::unique_ptr<EngineGroup> group_;
  std::vector<Pd*> pds_;
  std::vector<Cq*> scqs_, rcqs_;
  std::vector<Mr*> mrs_;
  uint32_t key_ = 0;
  PageBuffer mem_;  // page-aligned
  uint8_t* atomics_ = nullptr;
  uint8_t* area_ = nullptr;
  uint8_t* local_ = nullptr;
  uint8_t* recv_bufs_ = nullptr;
  uint64_t slot_bytes_ = 0;
  std::vector<QpSlot> slots_;
  std::unique_ptr<EngineRun[]> runs_;
  Info me_, peer_;
  Mtu mtu_ = Mtu::k1024;
};

}  // namespace uroce::apps::bench_mc
