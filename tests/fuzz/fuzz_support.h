// What the libFuzzer targets share: the failing check (an invariant or oracle
// failure aborts, so libFuzzer saves the input), and the in-memory port of the
// targets that drive a whole Context (fuzz_rx, fuzz_cm_protocol).
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include <uroce/packet_io.h>

namespace uroce::fuzz {

/// Prints "<target> invariant failure: <what>" and aborts.
[[noreturn]] inline void fail(const char* target, const char* what) {
  std::fprintf(stderr, "%s invariant failure: %s\n", target, what);
  std::abort();
}

}  // namespace uroce::fuzz

/// Aborts with the failed condition's text; the target defines kFuzzTarget.
#define FUZZ_CHECK(cond)                                       \
  do {                                                         \
    if (!(cond)) ::uroce::fuzz::fail(kFuzzTarget, #cond);      \
  } while (0)

namespace uroce::fuzz {

/// An in-memory port. Frames the target injects come out of rx_burst, in
/// order; each frame the stack transmits goes to on_tx (the target's check)
/// and is freed.
class InboxPort : public PacketIo {
 public:
  InboxPort(rte_mempool* pool, MacAddr mac, uint16_t mtu) : pool_(pool), mac_(mac), mtu_(mtu) {}

  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override {
    uint16_t k = 0;
    while (k < n && head_ < tail_) out[k++] = inbox_[head_++];
    if (head_ == tail_) head_ = tail_ = 0;
    return k;
  }
  uint16_t tx_burst(rte_mbuf** in, uint16_t n) override {
    for (uint16_t i = 0; i < n; ++i) {
      on_tx(*in[i]);
      rte_pktmbuf_free(in[i]);
    }
    return n;
  }
  rte_mempool* tx_pool() override { return pool_; }
  IoCaps caps() const override { return IoCaps{mtu_, false}; }
  MacAddr mac() const override { return mac_; }

  /// Queues a copy of frame for rx_burst; false if the inbox or the pool is full.
  bool inject(std::span<const uint8_t> frame) {
    if (tail_ == inbox_.size()) return false;
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (!m) return false;
    auto* dst = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, uint16_t(frame.size())));
    if (!dst) {
      rte_pktmbuf_free(m);
      return false;
    }
    std::memcpy(dst, frame.data(), frame.size());
    inbox_[tail_++] = m;
    return true;
  }
  /// Frees what is still queued.
  void clear() {
    while (head_ < tail_) rte_pktmbuf_free(inbox_[head_++]);
    head_ = tail_ = 0;
  }
  bool idle() const { return head_ == tail_; }
  rte_mempool* pool() const { return pool_; }

 protected:
  /// One frame the stack sent (freed after the call).
  virtual void on_tx(const rte_mbuf& m) = 0;

 private:
  rte_mempool* pool_;
  MacAddr mac_;
  uint16_t mtu_;
  std::array<rte_mbuf*, 64> inbox_{};
  size_t head_ = 0, tail_ = 0;
};

}  // namespace uroce::fuzz
