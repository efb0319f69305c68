// Two devices joined back to back by TestPort, each with one PD, send and
// receive CQs, a 1 MiB registered buffer and one QP, connected to RTS; and a
// virtual clock that polls both engines in 1 us steps. No sleeps: timeouts are
// virtual time.
#pragma once

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include <gtest/gtest.h>
#include <uroce/eal.h>
#include <uroce/verbs.h>
#include <uroce/wr.h>

#include "stack/wire/aeth.h"
#include "stack/wire/opcodes.h"
#include "tests/unit/transport/test_port.h"

namespace uroce::test {

struct Side;

struct PairOptions {
  QpType type = QpType::kRc;
  Mtu mtu = Mtu::k1024;
  uint32_t a_sq_psn = 0x100;  // a -> b request PSNs start here
  uint32_t b_sq_psn = 0x200;
  uint8_t timeout = 10;       // 4.2 ms
  uint8_t retry_cnt = 3;
  uint8_t rnr_retry = 3;
  uint8_t min_rnr_timer = 1;  // 10 us
  uint8_t max_rd_atomic = 4;
  uint8_t max_dest_rd_atomic = 4;
  uint32_t access = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  uint32_t max_send_wr = 64;
  uint32_t max_recv_wr = 64;
  uint32_t max_inline = 256;
  uint32_t cqe = 256;
  uint32_t qkey = 0x11111111;
  bool sq_sig_all = true;
  bool b_srq = false;  // b's QP takes receive WQEs from an SRQ
  bool b_stops_in_rtr = false;  // b's QP is left in RTR (it receives, does not send)
  /// Edits each side's DeviceConfig before open_device (QoS, zero-copy, ...).
  std::function<void(DeviceConfig&)> device;
  /// Adds GID table entries to a side after open_device (index 0 is its IPv4 GID).
  std::function<void(Side&)> gids;
  /// The QPs' AV uses this GID index on both sides: each sends from its own
  /// entry there, to the peer's entry there (its GID and source MAC).
  uint8_t sgid_index = 0;
  /// uroce's extension, set at INIT -> RTR on both QPs (kQpExt) where set_ext.
  bool set_ext = false;
  QpExt ext;
  /// TestPort::multiseg of both ports (IoCaps::tx_multiseg at open_device).
  bool port_multiseg = true;
};

struct Side {
  explicit Side(uint8_t id);
  uint64_t count(Counter c) const { return query_counters(ctx.get()).get(c); }
  /// An SGE over buf[off, off+len) in mr.
  Sge sge(size_t off, uint32_t len) const { return Sge{uint64_t(uintptr_t(buf.data() + off)), len, mr->lkey}; }
  uint64_t addr(size_t off) const { return uint64_t(uintptr_t(buf.data() + off)); }
  Status post_recv(uint64_t wr_id, size_t off, uint32_t len);

  MacAddr mac;
  Gid gid;
  TestPort port;
  ContextPtr ctx;
  Pd* pd = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  Srq* srq = nullptr;
  Qp* qp = nullptr;
  std::vector<uint8_t> buf;
  Mr* mr = nullptr;
};

class Pair : public ::testing::Test {
 protected:
  /// Opens both sides and brings a.qp and b.qp to RTS, connected to each other.
  void open(const PairOptions& o = {});
  /// What open() starts with: each side's device, PD, CQs and MR, no QP
  /// (the CM tests let the CM make them).
  void open_sides(const PairOptions& o = {});
  /// Creates and connects a QP on each side in pd (a's and b's own by default).
  void make_qps(const PairOptions& o, Pd* pda, Pd* pdb, Qp** qa, Qp** qb);

  /// Polls both sides for ns of virtual time in 1 us steps.
  void run_for(uint64_t ns);
  /// Polls until pred() holds; false if max_ns passed first.
  bool run_until(const std::function<bool()>& pred, uint64_t max_ns = 200'000'000);
  /// Runs until cq yields a completion and returns it (fails the test on timeout).
  Wc wait_wc(Cq* cq, uint64_t max_ns = 200'000'000);
  /// Runs for ns and returns everything cq holds.
  std::vector<Wc> drain(Cq* cq, uint64_t ns = 1'000'000);

  /// Posts one WR on a.qp; the SGE covers a.buf[local_off, +len).
  Status post(WrOpcode op, uint64_t wr_id, size_t local_off, uint32_t len, size_t remote_off = 0,
              uint32_t flags = kSendSignaled, Qp* qp = nullptr);

  PairOptions opt;
  std::unique_ptr<Side> a, b;
  uint64_t now = 1'000'000;
};

/// The value of an OK result; fails the test (and returns T{}) otherwise.
template <typename T>
T must(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : T{};
}

/// True if qp is in the ERR state (query_qp).
inline bool is_err(Qp* qp) {
  QpAttr at;
  EXPECT_TRUE(query_qp(qp, &at, nullptr).ok());
  return at.qp_state == QpState::kErr;
}

/// Fills buf[off, off+len) with a pattern derived from seed.
void fill(std::vector<uint8_t>& buf, size_t off, size_t len, uint8_t seed);

/// One device on a test port with one PD, keys from seed: the verbs-object
/// tests (tests/unit/device) that need no peer.
class OneDevice : public ::testing::Test {
 protected:
  void open(uint64_t seed) {
    port = std::make_unique<TestPort>(MacAddr{{2, 0, 0, 0, 0, 9}}, 9000);
    DeviceConfig cfg;
    cfg.key_seed = seed;
    cfg.max_mr = 16;
    ctx = must(open_device(*port, cfg));
    pd = must(alloc_pd(ctx.get()));
  }
  std::unique_ptr<TestPort> port;
  ContextPtr ctx;
  Pd* pd = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(4096);
};

}  // namespace uroce::test
