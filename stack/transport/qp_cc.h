// Per-QP congestion control as the engine drives it: the QP's
// algorithm (stack/cc/cc.h: none, DCQCN, TIMELY), the pacer the requester
// obeys, the DCQCN notification point for packets this QP receives, and the
// RTT sampler that feeds TIMELY from the engine's own timestamps.
//
// Who calls what (time is injected, STYLE 16):
//   requester  may_send(now, bytes) before each packet; when it says no the
//              packet is held (never dropped) and the engine's pacing timer
//              puts the QP back on the schedule at next_send_ns(bytes).
//              on_sent(now, wire_bytes, psn, ack_req, retransmit) after it.
//   completer  on_acked(now, comp_psn, bytes) when an ACK or response moves
//              the oldest unacknowledged PSN forward: one RTT sample per ACK.
//   engine     on_cnp(now) for a CNP addressed to this QP (DCQCN reaction
//              point); on_ce_marked(now) for a CE-marked request this QP
//              received (notification point), which says whether to send a
//              CNP now (at most one per min_time_between_cnps).
//
// RTT samples follow Karn's rule: the send times of packets that carry
// AckReq are remembered (a small ring; later ones are not timed while it is
// full), an ACK covering them gives now - the newest covered send time, and a
// retransmission forgets them all, since an ACK can then not say which copy
// it answers. A QP sprayed over several paths (uroce's extension) gives each
// timed packet its path, and TIMELY takes the gradient of a sample against
// the previous sample of the same path (on_acked's path_prev_rtt_ns), so
// that paths of different delays do not read as a gradient. An RTT is measured from the requester's transmit turn to the
// completer's receive poll, so it includes the local transmit queue: that is
// the delay TIMELY means to control.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include <uroce/cc.h>
#include <uroce/verbs.h>

#include "stack/cc/cc.h"
#include "stack/cc/cnp.h"
#include "stack/cc/pacer.h"
#include "stack/wire/psn.h"

namespace uroce::transport {

/// Per-frame Ethernet cost beyond the frame bytes: preamble and SFD 8, FCS 4,
/// inter-frame gap 12. The pacer counts wire time, so a QP paced at the line
/// rate fills the link exactly.
inline constexpr uint32_t kWireOverheadBytes = 24;

class QpCc {
 public:
  QpCc() = default;

  /// Sets up the algorithm cfg names for a QP of type t (UD QPs are not rate
  /// controlled: their packets go to many peers). cfg was checked by
  /// open_device. Control path (create_qp, and RESET, which forgets all state).
  void init(const CcConfig& cfg, QpType t);

  /// True if a frame of bytes may leave at now_ns. Runs the algorithm's
  /// timers that fell due and moves the pacer to the current rate first.
  bool may_send(uint64_t now_ns, uint32_t bytes) {
    if (!paced_) return true;  // no CC: the port's transmit queue is the only limit
    settle(now_ns);
    return pacer_.may_send(bytes, now_ns);
  }
  /// When to ask may_send again for a held frame of bytes: when the pacer
  /// lets it go at the current rate, or earlier when the algorithm's next
  /// timer may raise the rate (a DCQCN flow cut to a few Mb/s must not sleep
  /// through the rate-increase timer that would wake it up).
  uint64_t next_send_ns(uint32_t bytes) const {
    return std::min(pacer_.next_send_ns(bytes), cc_.next_timer_ns());
  }

  /// A frame of wire_bytes (kWireOverheadBytes included) with PSN psn left
  /// at now_ns, on path path (uroce's extension; 0 without it).
  void on_sent(uint64_t now_ns, uint32_t wire_bytes, uint32_t psn, bool ack_req, bool retransmit,
               uint8_t path = 0) {
    if (paced_) {
      pacer_.on_sent(wire_bytes, now_ns);
      cc_.on_bytes_sent(wire_bytes, now_ns);
      pacer_.set_rate_bps(cc_.rate_bps(), now_ns);
    }
    if (retransmit) {
      rtt_head_ = rtt_tail_;  // Karn: no sample across a retransmission
    } else if (ack_req && rtt_tail_ - rtt_head_ < kRttSlots) {
      rtt_[rtt_tail_++ % kRttSlots] = {psn, path, now_ns};
    }
  }

  /// Every PSN before comp_psn is acknowledged at now_ns (bytes newly
  /// acknowledged). Feeds the algorithm one RTT sample if a timed packet is
  /// among them, else an ACK without a sample. Returns whether it sampled.
  /// path_prev_rtt_ns (a QP sprayed over several paths; null otherwise): the
  /// previous sample of each path, which the sample's gradient is taken
  /// against (TIMELY) and which it replaces.
  bool on_acked(uint64_t now_ns, uint32_t comp_psn, uint64_t bytes, uint64_t* path_prev_rtt_ns = nullptr) {
    uint64_t rtt = 0;
    uint8_t path = 0;
    while (rtt_head_ != rtt_tail_ && wire::psn_cmp(rtt_[rtt_head_ % kRttSlots].psn, comp_psn) < 0) {
      rtt = now_ns - rtt_[rtt_head_ % kRttSlots].sent_ns;
      path = rtt_[rtt_head_ % kRttSlots].path;
      ++rtt_head_;
    }
    if (rtt != 0) {
      ++rtt_samples_;
      last_rtt_ns_ = rtt;
    }
    if (path_prev_rtt_ns) cc_.on_path_ack(bytes, rtt, now_ns, path_prev_rtt_ns[path]);
    else cc_.on_ack(bytes, rtt, now_ns);
    pacer_.set_rate_bps(cc_.rate_bps(), now_ns);
    return rtt != 0;
  }

  /// A CNP for this QP arrived (DCQCN reaction point). Returns false if the
  /// QP's algorithm does not take CNPs (the CNP is then only counted).
  bool on_cnp(uint64_t now_ns) {
    if (cc_.algorithm() != CcAlgorithm::kDcqcn) return false;
    cc_.on_cnp(now_ns);
    pacer_.set_rate_bps(cc_.rate_bps(), now_ns);
    return true;
  }

  /// A CE-marked packet for this QP arrived: true if a CNP must go out now.
  bool on_ce_marked(uint64_t now_ns) { return np_.on_ce_marked(now_ns); }

  uint64_t rate_bps() const { return cc_.rate_bps(); }
  const cc::CongestionControl& algorithm() const { return cc_; }
  uint64_t rtt_samples() const { return rtt_samples_; }
  uint64_t last_rtt_ns() const { return last_rtt_ns_; }

 private:
  static constexpr uint32_t kRttSlots = 16;
  struct Timed {
    uint32_t psn;
    uint8_t path;  // in what was padding: the ring stays 16 bytes a slot
    uint64_t sent_ns;
  };
  static_assert(sizeof(Timed) == 16);

  void settle(uint64_t now_ns) {
    if (cc_.next_timer_ns() <= now_ns) {
      cc_.on_timer(now_ns);
      pacer_.set_rate_bps(cc_.rate_bps(), now_ns);
    }
  }

  cc::CongestionControl cc_{cc::gbps_to_bps(100)};
  cc::Pacer pacer_{cc::gbps_to_bps(100), 16 * 1024};
  cc::CnpGenerator np_;
  bool paced_ = false;  // an algorithm runs (not CcAlgorithm::kNone)
  std::array<Timed, kRttSlots> rtt_{};
  uint32_t rtt_head_ = 0;
  uint32_t rtt_tail_ = 0;
  uint64_t rtt_samples_ = 0;
  uint64_t last_rtt_ns_ = 0;
};

/// Checks cfg for a device (open_device). Control path.
Status validate(const CcConfig& cfg);

}  // namespace uroce::transport
