// TxStage (see tx_stage.h): the control of the stage and the flush that keeps
// what the port refused.
#include "stack/net/tx_stage.h"

namespace uroce::net {

TxStage::TxStage(rte_mempool* pool, uint16_t capacity, PacketIo* port)
    : pool_(pool), capacity_(capacity < kMaxFrames ? capacity : kMaxFrames), port_(port) {}

TxStage::~TxStage() {
  for (uint16_t i = 0; i < n_; ++i) rte_pktmbuf_free(frames_[i]);
}

uint16_t TxStage::hand_over(PacketIo& io) {
  if (n_ == 0) return 0;
  const uint16_t sent = io.tx_burst(frames_.data(), n_);
  for (uint16_t i = 0; i < sent; ++i) bytes_ -= frames_[i]->pkt_len;
  for (uint16_t i = sent; i < n_; ++i) frames_[i - sent] = frames_[i];
  n_ = uint16_t(n_ - sent);
  return sent;
}

void TxStage::ring_early() {
  const uint16_t staged = n_;
  const uint16_t sent = hand_over(*port_);
  rung_early_ = uint16_t(rung_early_ + sent);
  early_refused_ = sent < staged;
}

}  // namespace uroce::net
