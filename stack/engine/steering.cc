// Receive steering between engines: DestQP peek and forwarding (data path).
#include "stack/engine/steering.h"

#include <rte_mbuf.h>

#include <optional>

#include "stack/transport/qp.h"
#include "stack/wire/headers.h"
#include "stack/wire/locate.h"

namespace uroce::engine {

uint32_t peek_dest_qpn(const uint8_t* frame, uint32_t len) {
  const std::optional<wire::FrameLayout> loc = wire::locate_headers({frame, len});
  if (!loc || !loc->has_l3) return kNoQpn;
  uint32_t off = loc->l4_off;  // RoCEv1: the BTH follows the GRH
  if (loc->l3 != wire::L3Kind::kGrh) {
    if (!loc->has_udp || loc->udp_dport != wire::kRoceV2Port) return kNoQpn;
    off += sizeof(wire::UdpHdr);
  }
  if (len < off + sizeof(wire::Bth)) return kNoQpn;
  return reinterpret_cast<const wire::Bth*>(frame + off)->qpn_word.get() & wire::kBthQpnMask;
}

uint32_t owner_of_qpn(uint32_t qpn, uint32_t n) {
  return qpn < transport::kFirstQpn ? 0 : (qpn - transport::kFirstQpn) % n;
}

uint16_t SteeringIo::rx_burst(rte_mbuf** out, uint16_t n) {
  const uint32_t engines = rings_.size();
  uint16_t k = 0;
  // Frames other engines received for us, at most half the burst so that our
  // own queue is never starved.
  const uint16_t fwd_max = engines > 1 ? uint16_t(n / 2) : 0;
  for (uint32_t from = 0; from < engines && k < fwd_max; ++from) {
    if (from != self_) k = uint16_t(k + rings_.ring(from, self_).pop(out + k, size_t(fwd_max - k)));
  }
  stats_.fwd_in += k;
  const uint16_t got = io_.rx_burst(out + k, uint16_t(n - k));
  if (engines == 1) return uint16_t(k + got);
  const uint16_t end = uint16_t(k + got);
  for (uint16_t i = k; i < end; ++i) {
    rte_mbuf* m = out[i];
    const uint32_t qpn = peek_dest_qpn(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
    const uint32_t owner = qpn == kNoQpn ? self_ : owner_of_qpn(qpn, engines);
    if (owner == self_) {
      out[k++] = m;
    } else if (rings_.ring(self_, owner).push(m)) {
      ++stats_.fwd_out;
    } else {
      ++stats_.fwd_drop;
      rte_pktmbuf_free(m);
    }
  }
  return k;
}

}  // namespace uroce::engine
