// The transmit stage of one engine: the frames built this poll and not yet
// taken by the port, in the order they were built. Every writer stages its
// frames here (the transport roles, the addressing layer's ARP, ND and ICMP
// replies, the connection manager's MADs), so they all leave in one
// tx_burst; frames the port refuses stay staged, in order, for the next
// flush. Single-threaded: one engine owns its stage. Data path: append and
// push never allocate beyond the mbuf they take from the pool.
#pragma once

#include <array>
#include <cstdint>

#include <rte_mbuf.h>

#include <uroce/packet_io.h>

namespace uroce::net {

class TxStage {
 public:
  /// The most frames one stage holds: an engine's transmit burst. One poll
  /// receives as many frames as it may send (stack/engine/engine.cc).
  static constexpr uint16_t kMaxFrames = 64;

  enum class Error : uint8_t { kNone, kFull, kPoolEmpty, kTooBig };

  /// Frames come from pool; at most capacity (<= kMaxFrames) are staged at once.
  explicit TxStage(rte_mempool* pool = nullptr, uint16_t capacity = kMaxFrames);
  ~TxStage();  // frees the frames still staged
  TxStage(const TxStage&) = delete;
  TxStage& operator=(const TxStage&) = delete;

  /// Allocates one single-segment mbuf of len bytes, stages it and returns its
  /// (uninitialised) data, and the mbuf in *m if m is not null; nullptr if the
  /// stage is full, the pool is empty or len does not fit one mbuf (error()).
  /// Inline: every frame the engine sends passes here, and a call into
  /// another library per frame cost the requester 18 instructions a packet
  /// (callgrind, engine_bench engine/write/64/32; docs/PERFORMANCE.md).
  uint8_t* append(uint16_t len, rte_mbuf** m = nullptr) {
    if (n_ >= capacity_) [[unlikely]] {
      error_ = Error::kFull;
      return nullptr;
    }
    rte_mbuf* mb = rte_pktmbuf_alloc(pool_);
    if (!mb) [[unlikely]] {
      error_ = Error::kPoolEmpty;
      return nullptr;
    }
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(mb, len));
    if (!p) [[unlikely]] {
      rte_pktmbuf_free(mb);
      error_ = Error::kTooBig;
      return nullptr;
    }
    frames_[n_++] = mb;
    if (m) *m = mb;
    return p;
  }
  /// Stages a frame the caller built (a chain of segments from pool()). The
  /// stage must not be full.
  void push(rte_mbuf* m) { frames_[n_++] = m; }
  /// Hands the staged frames to io.tx_burst; what it refuses stays staged, in
  /// order. Returns the number it took.
  uint16_t flush(PacketIo& io);

  /// Why the last append that returned nullptr failed.
  Error error() const { return error_; }
  rte_mempool* pool() const { return pool_; }
  uint16_t size() const { return n_; }
  bool full() const { return n_ >= capacity_; }
  /// Staged frame i (0 is the oldest), for tests and captures.
  rte_mbuf* at(uint16_t i) const { return frames_[i]; }
  /// Unstages every frame without freeing it: the caller took ownership of
  /// them through at().
  void release_all() { n_ = 0; }

 private:
  rte_mempool* pool_;
  uint16_t capacity_;
  uint16_t n_ = 0;
  Error error_ = Error::kNone;
  std::array<rte_mbuf*, kMaxFrames> frames_{};
};

}  // namespace uroce::net
