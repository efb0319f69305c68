// PacketIo wrappers that lose frames: the test hooks that show retransmission
// working over a real port. DropEveryNthIo loses every Nth transmitted frame
// (tests/dpdk_e2e, `uroce demo --drop-every N`); RandomDropIo loses a seeded
// random fraction of the frames in both directions (the interop loss cells,
// `uroce perf --drop-rate`). Data path: no allocation; the wrapped port's
// burst is called once per run of kept frames.
//
// DropEveryNthIo: every Nth frame handed to tx_burst is freed instead of sent
// (and reported as sent, as a wire loss would be); with n == 0 it passes every
// burst straight through.
#pragma once

#include <cstdint>

#include <rte_mbuf.h>

#include <uroce/packet_io.h>

#include "stack/common/rng.h"

namespace uroce::dpdk {

class DropEveryNthIo final : public PacketIoWrapper {
 public:
  /// Wraps io (which must outlive this); drops frames n, 2n, 3n, ... (1-based).
  DropEveryNthIo(PacketIo& io, uint32_t n) : PacketIoWrapper(io), n_(n) {}

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

  /// Frames dropped so far.
  uint64_t dropped() const { return dropped_; }

 private:
  uint64_t n_;
  uint64_t seq_ = 0;  // frames consumed (sent or dropped)
  uint64_t dropped_ = 0;
};

/// Random loss in both directions: each frame received from or handed to the
/// wrapped port is lost with probability `rate`, independently, from a seeded
/// generator (splitmix64), so a run's losses are reproducible. A frame lost on
/// receive is freed before the stack sees it (after the port's capture, as a
/// frame lost between the wire and the host would be); a frame lost on
/// transmit is freed and reported as sent (it never reaches the port or its
/// capture). The interop loss cells (`uroce perf/pingpong --drop-rate`) use it
/// to make rxe and the stack retransmit to each other. With rate 0 both bursts
/// pass straight through. Data path: no allocation, one call of the wrapped
/// burst per run of kept frames.
class RandomDropIo final : public PacketIoWrapper {
 public:
  /// Wraps io (which must outlive this). rate in [0, 1].
  RandomDropIo(PacketIo& io, double rate, uint64_t seed)
      : PacketIoWrapper(io),
        threshold_(rate <= 0 ? 0 : rate >= 1 ? UINT64_MAX : uint64_t(rate * 18446744073709551616.0)),
        state_(seed) {}

  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override {
    const uint16_t got = io_.rx_burst(out, n);
    if (threshold_ == 0) return got;
    uint16_t kept = 0;
    for (uint16_t i = 0; i < got; ++i) {
      if (lose()) {
        rte_pktmbuf_free(out[i]);
        ++rx_dropped_;
      } else {
        out[kept++] = out[i];
      }
    }
    return kept;
  }

  uint16_t tx_burst(rte_mbuf** in, uint16_t n) override {
    if (threshold_ == 0) return io_.tx_burst(in, n);
    uint16_t done = 0;
    while (done < n) {
      if (lose()) {
        rte_pktmbuf_free(in[done++]);
        ++tx_dropped_;
        continue;
      }
      // Kept frames up to the next loss; a frame after a run the port refuses
      // stays with the caller and is drawn again when it is offered again.
      uint16_t run = 1;
      bool next_lost = false;
      while (done + run < n && !(next_lost = lose())) ++run;
      const uint16_t sent = io_.tx_burst(in + done, run);
      done = uint16_t(done + sent);
      if (sent < run) break;  // ring full: the rest stays with the caller
      if (next_lost) {
        rte_pktmbuf_free(in[done++]);
        ++tx_dropped_;
      }
    }
    return done;
  }

  uint64_t rx_dropped() const { return rx_dropped_; }
  uint64_t tx_dropped() const { return tx_dropped_; }

 private:
  bool lose() { return next() < threshold_; }
  uint64_t next() { return splitmix64(state_); }

  uint64_t threshold_;  // a frame is lost when a draw falls below it: rate * 2^64
  uint64_t state_;
  uint64_t rx_dropped_ = 0;
  uint64_t tx_dropped_ = 0;
};

}  // namespace uroce::dpdk
