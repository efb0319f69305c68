// TxStage (see tx_stage.h): single-segment frames from the stage's pool, and
// the flush that keeps what the port refused.
#include "stack/net/tx_stage.h"

#include <rte_mbuf.h>

namespace uroce::net {

TxStage::TxStage(rte_mempool* pool, uint16_t capacity)
    : pool_(pool), capacity_(capacity < kMaxFrames ? capacity : kMaxFrames) {}

TxStage::~TxStage() {
  for (uint16_t i = 0; i < n_; ++i) rte_pktmbuf_free(frames_[i]);
}

uint8_t* TxStage::append(uint16_t len, rte_mbuf** out) {
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
  frames_[n_++] = m;
  error_ = Error::kNone;
  if (out) *out = m;
  return p;
}

void TxStage::drop_last() {
  if (n_ == 0) return;
  rte_pktmbuf_free(frames_[--n_]);
}

uint16_t TxStage::flush(PacketIo& io) {
  if (n_ == 0) return 0;
  const uint16_t sent = io.tx_burst(frames_.data(), n_);
  for (uint16_t i = sent; i < n_; ++i) frames_[i - sent] = frames_[i];
  n_ = uint16_t(n_ - sent);
  return sent;
}

}  // namespace uroce::net
