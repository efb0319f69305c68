// Where the addressing layer puts the frames it sends: the caller's transmit
// burst array plus the pool to allocate from (the engine passes its staged
// tx[] and tx_n, so replies leave in the same tx_burst as RoCE traffic).
// Nothing here sends; the caller bursts the array out and keeps ownership
// rules of PacketIo::tx_burst.
#pragma once

#include <cstdint>

struct rte_mbuf;
struct rte_mempool;

namespace uroce::net {

class TxBurst {
 public:
  enum class Error : uint8_t { kNone, kFull, kPoolEmpty, kTooBig };

  /// slots[0..n) are already staged; append fills slots[n..capacity) and advances n.
  TxBurst(rte_mempool* pool, rte_mbuf** slots, uint16_t capacity, uint16_t& n)
      : pool_(pool), slots_(slots), capacity_(capacity), n_(n) {}

  /// Allocates one single-segment mbuf of len bytes from the pool, stages it
  /// and returns its (uninitialised) data; nullptr if the burst is full, the
  /// pool is empty or len does not fit one mbuf (see error()).
  uint8_t* append(uint16_t len);
  /// Frees and unstages the frame append returned last (a build that failed).
  void drop_last();
  Error error() const { return error_; }
  uint16_t size() const { return n_; }
  bool full() const { return n_ >= capacity_; }

 private:
  rte_mempool* pool_;
  rte_mbuf** slots_;
  uint16_t capacity_;
  uint16_t& n_;
  Error error_ = Error::kNone;
};

}  // namespace uroce::net
