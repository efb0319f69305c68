// The transmit stage of one engine: the frames built this poll and not yet
// taken by the port, in the order they were built. Every writer stages its
// frames here (the transport roles, the addressing layer's ARP, ND and ICMP
// replies, the connection manager's MADs), so they all leave in one
// tx_burst; frames the port refuses stay staged, in order, for the next
// flush. Single-threaded: one engine owns its stage. Data path: append and
// push never allocate beyond the mbuf they take from the pool.
//
// Early doorbell: a stage given its port hands what it holds to the port as
// soon as kDoorbellBytes are staged, before it stages the next frame, so
// the first frames of a multi-packet message are on the wire while the rest
// are being built (and the receiver works on them meanwhile) instead of
// leaving all at the end of the poll. Small frames never reach the
// threshold within a burst, so they keep leaving in one tx_burst a poll
// (each tx_burst is a doorbell on a NIC). Every writer finishes a frame
// before it stages the next, so every frame handed over is complete. A port
// that refuses frames rung early is not rung early again until the next
// flush(): the stage fills and waits for the poll's flush, as without the
// early doorbell, instead of knocking once a frame.
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
  /// Staged bytes at which a stage with a port rings it early: four frames of
  /// a 4096-byte path MTU, sixteen of 1024; 64 B frames never reach it in a
  /// burst. Measured, not tuned: docs/PERFORMANCE.md, "Pipelined
  /// multi-packet messages".
  static constexpr uint32_t kDoorbellBytes = 16 * 1024;

  enum class Error : uint8_t { kNone, kFull, kPoolEmpty, kTooBig };

  /// Frames come from pool; at most capacity (<= kMaxFrames) are staged at
  /// once. With port, the stage rings it early (above); without, frames
  /// leave only at flush().
  explicit TxStage(rte_mempool* pool = nullptr, uint16_t capacity = kMaxFrames, PacketIo* port = nullptr);
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
    if (early_due()) ring_early();
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
    bytes_ += len;
    ++appended_;
    if (m) *m = mb;
    return p;
  }
  /// Stages a frame the caller built (a chain of segments from pool()). The
  /// stage must not be full.
  void push(rte_mbuf* m) {
    if (early_due()) ring_early();
    frames_[n_++] = m;
    bytes_ += m->pkt_len;
    ++appended_;
  }
  /// Hands the staged frames to io.tx_burst; what it refuses stays staged, in
  /// order. Returns the number it took. Ends the poll's early doorbells'
  /// pause after a refusal.
  uint16_t flush(PacketIo& io) {
    early_refused_ = false;
    return hand_over(io);
  }
  /// Frames early doorbells handed to the port since the last call; resets.
  uint16_t take_rung_early() {
    const uint16_t n = rung_early_;
    rung_early_ = 0;
    return n;
  }
  /// Frames staged since the stage was made (wraps): what a writer staged
  /// is the difference across its turn, whatever left in between.
  uint16_t appended() const { return appended_; }

  /// Why the last append that returned nullptr failed.
  Error error() const { return error_; }
  rte_mempool* pool() const { return pool_; }
  uint16_t size() const { return n_; }
  bool full() const { return n_ >= capacity_; }
  /// Staged frame i (0 is the oldest), for tests and captures.
  rte_mbuf* at(uint16_t i) const { return frames_[i]; }
  /// Unstages every frame without freeing it: the caller took ownership of
  /// them through at().
  void release_all() {
    n_ = 0;
    bytes_ = 0;
  }

 private:
  bool early_due() const { return bytes_ >= kDoorbellBytes && port_ && !early_refused_; }
  /// The early doorbell: hand over to port_, counted in rung_early_.
  [[gnu::noinline]] void ring_early();
  /// io.tx_burst of the staged frames; what it refuses stays staged, in order.
  uint16_t hand_over(PacketIo& io);

  rte_mempool* pool_;
  uint16_t capacity_;
  PacketIo* port_;
  uint16_t n_ = 0;
  uint16_t appended_ = 0;
  uint16_t rung_early_ = 0;
  bool early_refused_ = false;  // the port refused some of an early doorbell's frames
  uint32_t bytes_ = 0;  // staged
  Error error_ = Error::kNone;
  std::array<rte_mbuf*, kMaxFrames> frames_{};
};

}  // namespace uroce::net
