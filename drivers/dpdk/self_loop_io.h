// A PacketIo wrapper that delivers the frames a device sends to its own MAC
// back to it instead of to the port, as a RoCE NIC (and rxe) loops back
// traffic between QPs of the same device: an application or a test suite
// can run both ends of a connection in one process. Frames to other MACs,
// broadcast and multicast go to the port unchanged and in order. A looped
// frame never reaches the port, so it is in no capture of the port and no
// fault injection below this wrapper sees it. Data path: no allocation; the
// wrapped port's burst is called once per run of frames that leave.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include <rte_ether.h>
#include <rte_mbuf.h>

#include <uroce/packet_io.h>

namespace uroce::dpdk {

class SelfLoopIo final : public PacketIoWrapper {
 public:
  /// Wraps io (which must outlive this); frames to self go back to the stack.
  SelfLoopIo(PacketIo& io, const MacAddr& self) : PacketIoWrapper(io), self_(self) {}
  ~SelfLoopIo() override {
    for (; head_ != tail_; ++head_) rte_pktmbuf_free(ring_[head_ % kRing]);
  }
  SelfLoopIo(const SelfLoopIo&) = delete;
  SelfLoopIo& operator=(const SelfLoopIo&) = delete;

  /// The looped frames first (they were sent before this call), then the port's.
  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override {
    uint16_t got = 0;
    for (; got < n && head_ != tail_; ++got, ++head_) out[got] = ring_[head_ % kRing];
    return got < n ? uint16_t(got + io_.rx_burst(out + got, uint16_t(n - got))) : got;
  }

  uint16_t tx_burst(rte_mbuf** in, uint16_t n) override {
    uint16_t done = 0;
    while (done < n) {
      if (to_self(in[done])) {
        if (tail_ - head_ == kRing) break;  // the loop is full until the stack receives: the rest waits, in order
        ring_[tail_++ % kRing] = in[done++];
        ++looped_;
        continue;
      }
      uint16_t run = 1;  // frames that leave, up to the next one to self
      while (done + run < n && !to_self(in[done + run])) ++run;
      const uint16_t sent = io_.tx_burst(in + done, run);
      done = uint16_t(done + sent);
      if (sent < run) break;  // ring full: the rest stays with the caller
    }
    return done;
  }

  /// Frames delivered back to the device so far.
  uint64_t looped() const { return looped_; }

 private:
  static constexpr uint32_t kRing = 256;  // a few engine bursts

  bool to_self(const rte_mbuf* m) const {
    return std::memcmp(rte_pktmbuf_mtod(m, const uint8_t*), self_.b, RTE_ETHER_ADDR_LEN) == 0;
  }

  MacAddr self_;
  std::array<rte_mbuf*, kRing> ring_{};
  uint32_t head_ = 0;  // next to receive
  uint32_t tail_ = 0;  // next free
  uint64_t looped_ = 0;
};

}  // namespace uroce::dpdk
