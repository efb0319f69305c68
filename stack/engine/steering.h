// Receive steering between the engines of an EngineGroup (include/uroce/
// engine_group.h): the DestQP peek and the PacketIo wrapper that hands each
// frame to the engine owning its QP through single-producer/single-consumer
// rings. Data path: no lock, syscall or allocation per frame.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <boost/lockfree/spsc_queue.hpp>

#include <uroce/engine_group.h>
#include <uroce/packet_io.h>

namespace uroce::engine {

/// No RoCE DestQP in the frame (not RoCEv1/v2, or too short to tell).
inline constexpr uint32_t kNoQpn = UINT32_MAX;

/// The BTH DestQP of a RoCEv2 (Ethernet [+ VLAN] + IPv4/IPv6 + UDP 4791) or
/// RoCEv1 (Ethernet [+ VLAN] + GRH) frame, or kNoQpn. Reads only the headers
/// on the way; checks lengths, not checksums (the owner's parse does that).
uint32_t peek_dest_qpn(const uint8_t* frame, uint32_t len);

/// The owner of a QPN among n engines: (qpn - kFirstQpn) % n (Context::qpn_of_slot).
uint32_t owner_of_qpn(uint32_t qpn, uint32_t n);

using FwdRing = boost::lockfree::spsc_queue<rte_mbuf*, boost::lockfree::capacity<EngineGroup::kFwdRingSize>>;

/// The n*(n-1) rings of a group: ring(from, to) carries frames engine
/// `from` received for engine `to`.
class FwdRings {
 public:
  explicit FwdRings(uint32_t n) : n_(n), rings_(size_t(n) * n) {
    for (uint32_t f = 0; f < n; ++f) {
      for (uint32_t t = 0; t < n; ++t) {
        if (f != t) rings_[size_t(f) * n + t] = std::make_unique<FwdRing>();
      }
    }
  }
  FwdRing& ring(uint32_t from, uint32_t to) { return *rings_[size_t(from) * n_ + to]; }
  uint32_t size() const { return n_; }

 private:
  uint32_t n_;
  std::vector<std::unique_ptr<FwdRing>> rings_;
};

/// Engine `self`'s view of its port queue: rx_burst returns the frames other
/// engines forwarded to it, then those of its own queue that it owns (or that
/// are not RoCE), handing the rest to their owners; tx_burst is the queue's.
class SteeringIo final : public PacketIoWrapper {
 public:
  SteeringIo(PacketIo& queue, FwdRings& rings, uint32_t self, EngineStats& stats)
      : PacketIoWrapper(queue), rings_(rings), self_(self), stats_(stats) {}

  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override;

 private:
  FwdRings& rings_;
  uint32_t self_;
  EngineStats& stats_;
};

}  // namespace uroce::engine
