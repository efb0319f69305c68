// TxStage (see tx_stage.h): the control of the stage and the flush that keeps
// what the port refused.
#include "stack/net/tx_stage.h"

namespace uroce::net {

TxStage::TxStage(rte_mempool* pool, uint16_t capacity)
    : pool_(pool), capacity_(capacity < kMaxFrames ? capacity : kMaxFrames) {}

TxStage::~TxStage() {
  for (uint16_t i = 0; i < n_; ++i) rte_pktmbuf_free(frames_[i]);
}

uint16_t TxStage::flush(PacketIo& io) {
  if (n_ == 0) return 0;
  const uint16_t sent = io.tx_burst(frames_.data(), n_);
  for (uint16_t i = sent; i < n_; ++i) frames_[i - sent] = frames_[i];
  n_ = uint16_t(n_ - sent);
  return sent;
}

}  // namespace uroce::net
