// A PacketIo wrapper that loses frames on transmit: every Nth frame handed to
// tx_burst is freed instead of sent (and reported as sent, as a wire loss
// would be). The test hook that shows retransmission working over a real
// port (tests/dpdk_e2e, `uroce demo --drop-every N`); with n == 0 it passes
// every burst straight through. Data path: no allocation; the wrapped port's
// burst is called once per run of kept frames.
#pragma once

#include <cstdint>

#include <rte_mbuf.h>

#include <uroce/packet_io.h>

namespace uroce::dpdk {

class DropEveryNthIo final : public PacketIo {
 public:
  /// Wraps io (which must outlive this); drops frames n, 2n, 3n, ... (1-based).
  DropEveryNthIo(PacketIo& io, uint32_t n) : io_(io), n_(n) {}

  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override { return io_.rx_burst(out, n); }

  uint16_t tx_burst(rte_mbuf** in, uint16_t n) override {
    if (n_ == 0) return io_.tx_burst(in, n);
    uint16_t done = 0;
    while (done < n) {
      if ((seq_ + 1) % n_ == 0) {  // this one is lost
        rte_pktmbuf_free(in[done++]);
        ++seq_;
        ++dropped_;
        continue;
      }
      uint16_t run = 0;  // kept frames up to the next loss
      while (done + run < n && (seq_ + run + 1) % n_ != 0) ++run;
      const uint16_t sent = io_.tx_burst(in + done, run);
      seq_ += sent;
      done = uint16_t(done + sent);
      if (sent < run) break;  // ring full: the rest stays with the caller
    }
    return done;
  }

  rte_mempool* tx_pool() override { return io_.tx_pool(); }
  IoCaps caps() const override { return io_.caps(); }
  MacAddr mac() const override { return io_.mac(); }

  /// Frames dropped so far.
  uint64_t dropped() const { return dropped_; }

 private:
  PacketIo& io_;
  uint64_t n_;
  uint64_t seq_ = 0;  // frames consumed (sent or dropped)
  uint64_t dropped_ = 0;
};

}  // namespace uroce::dpdk
