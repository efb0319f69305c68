// TxBurst (see tx_burst.h): single-segment frames from the caller's pool.
#include "stack/net/tx_burst.h"

#include <rte_mbuf.h>

namespace uroce::net {

uint8_t* TxBurst::append(uint16_t len) {
  if (n_ >= capacity_) {
    error_ = Error::kFull;
    return nullptr;
  }
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (!m) {
    error_ = Error::kPoolEmpty;
    return nullptr;
  }
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, len));
  if (!p) {
    rte_pktmbuf_free(m);
    error_ = Error::kTooBig;
    return nullptr;
  }
  slots_[n_++] = m;
  error_ = Error::kNone;
  return p;
}

void TxBurst::drop_last() {
  if (n_ == 0) return;
  rte_pktmbuf_free(slots_[--n_]);
}

}  // namespace uroce::net
