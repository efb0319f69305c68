// Selective repeat on RC (QpExt::selective_repeat, docs/LOSS_RECOVERY.md):
// the state an extended QP keeps beside the plain one, allocated from
// state_memory() at INIT -> RTR only for a QP whose ext asks for it
// (QpImpl::ext), and the entry points the three roles branch into once, where
// they differ from go-back-N.
//
// Responder: a request SEND/WRITE packet up to kSrWindowPsns past epsn is
// checked and placed at once, by its placement header (wire/ext_headers.h);
// its PSN is held in a bitmap and epsn moves over every contiguous held PSN,
// completing messages in order as it passes their Last. READ and atomics run
// only at epsn (the go-back-N machine; ahead of it they are dropped and the
// gap NAKed), duplicates are answered with the current ACK, and every ACK
// carries a SACK block of the held PSNs.
// Requester: per PSN of the window it knows whether it was sent, SACKed or
// found lost, on which path and with which transmit sequence number; a PSN is
// lost once a later transmission on its path was delivered (paths are FIFO),
// or a later one on any path and it has been out longer than the slowest
// round trip seen (a PSN sequence error NAK is such a delivery for the PSN it
// names); only lost PSNs are sent again, ahead of new ones, with the READs and
// atomics the responder dropped behind them. The newest request, unanswered
// for two slowest round trips, is probed (sent again) before the local ACK
// timeout, or the rest of a READ whose last responses stopped.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

#include <uroce/verbs.h>

#include "stack/transport/env.h"
#include "stack/transport/paths.h"
#include "stack/wire/ext_headers.h"
#include "stack/wire/packet.h"

namespace uroce::transport {

struct QpImpl;
struct SendWqe;

/// PSNs a selective-repeat responder holds past epsn, and the requester's
/// window (kMaxUnackedPsns): the same, so nothing the requester sends is
/// beyond what the responder can place.
inline constexpr uint32_t kSrWindowPsns = 1024;
/// One path (or flowlets): a PSN is lost when this many later transmissions
/// on its path were delivered (reordering inside a path is tolerated up to it).
inline constexpr uint32_t kReorderThreshPkts = 3;
/// Added to the slowest round trip seen before a PSN is taken for lost on
/// the evidence of a later delivery on another path.
inline constexpr uint64_t kReorderMinNs = 20'000;

/// A bitmap over the PSN window, indexed by PSN modulo its size.
class PsnBits {
 public:
  bool test(uint32_t psn) const { return w_[word(psn)] >> (psn % 64) & 1; }
  void set(uint32_t psn) { w_[word(psn)] |= uint64_t(1) << (psn % 64); }
  void clear(uint32_t psn) { w_[word(psn)] &= ~(uint64_t(1) << (psn % 64)); }
  void reset() { w_ = {}; }

 private:
  static uint32_t word(uint32_t psn) { return (psn % kSrWindowPsns) / 64; }
  std::array<uint64_t, kSrWindowPsns / 64> w_{};
};

/// What completing a message takes, kept from its Last packet until epsn passes it.
struct SrLast {
  uint32_t msg_len = 0;
  uint32_t imm_or_rkey = 0;  // ImmDt or IETH R_Key
  uint8_t opcode = 0;        // 0: the PSN is no message's Last
  bool se = false;
};

struct SrResponder {
  PsnBits held;                               // placed PSNs past epsn
  std::array<SrLast, kSrWindowPsns> last{};
  uint32_t recv_done = 0;                     // receive WQEs consumed: the sequence number of the next
  uint16_t ack_sport = 0;                     // where the request that asked for the pending ACK came from
};

struct SrRequester {
  PsnBits sent;    // a request packet carries this PSN (a READ's first; not its response PSNs)
  PsnBits sacked;  // the responder holds it
  PsnBits lost;    // to send again
  PsnBits resent;  // sent more than once: no RTT sample (Karn)
  PsnBits rd_atomic;  // a READ or atomic request (run in order only: dropped behind a lost PSN)
  PsnBits nakd;       // a PSN sequence error NAK named it: a later request overtook its transmission
  std::array<uint64_t, kSrWindowPsns> sent_ns{};
  std::array<uint32_t, kSrWindowPsns> tx_seq{};
  std::array<uint8_t, kSrWindowPsns> path{};
  uint32_t next_tx_seq = 1;
  uint32_t delivered_seq = 0;  // newest transmit sequence number delivered on any path
  uint64_t rtt_max_ns = 0;     // slowest round trip of a PSN sent once
  // The reordering timer: the QP's timer fires early, when a PSN overtaken on
  // another path has been out for the reordering window, then goes back to
  // the local ACK timeout it was set to.
  bool reo_timer = false;
  uint64_t reo_deadline_ns = 0;  // when it was set to fire
  bool probed = false;           // a tail-loss probe left since the last delivery (one at most: the
                                 // ACK it draws restarts the ACK timer, so more would hold the timeout off)
  uint64_t ack_deadline_ns = 0;  // the local ACK timeout it displaced
  uint64_t progress_ns = 0;      // when the cumulative point last moved (a READ's responses move it)
  uint32_t recv_seq = 0;       // sequence number of the next message that consumes a receive WQE
};

struct QpExtState {
  QpExt cfg;
  SrResponder resp;
  SrRequester req;
  Paths paths;
};

/// INIT -> RTR: gives qp its extension state if qp.attr.ext asks for one, else none.
void ext_attach(QpImpl& qp);

/// Responder: a request packet of a QP with ext.
void ext_responder_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame);
/// Responder: the pending ACK/NAK of a QP with ext: on the port of the request
/// that asked for it, with the cumulative PSN and a SACK block of what is held
/// (selective repeat). False if there is no transmit room.
bool ext_send_ack(Env& env, QpImpl& qp);

/// Requester: at the first packet of w (its PSNs assigned).
void ext_start_wqe(QpImpl& qp, SendWqe& w);
enum class ExtSend : uint8_t { kSent, kSkip, kNoRoom };
/// Requester: builds the request packet d (payload_len counting the placement
/// header) of the WQE at SQ index idx, data from byte off of the message, on
/// its path. kSkip: a PSN sent before that is neither lost nor to be resent
/// (the send point has moved on to the next one that is); kNoRoom: no transmit room.
ExtSend ext_send_request(Env& env, QpImpl& qp, uint32_t idx, wire::PacketDesc& d, uint32_t off);
/// Requester: moves the send point to where a go-back-N retry from psn would
/// begin, marking every unacknowledged PSN sent from there lost (timeout,
/// RNR NAK, a READ response gap, an implied NAK).
void resend_from(QpImpl& qp, uint32_t psn);
/// Completer: the QP's timer fired. True if it was the reordering timer (PSNs
/// are checked for loss and the local ACK timer set again), false if it is
/// the local ACK timeout.
bool ext_on_timer(Env& env, QpImpl& qp);
/// Completer: a response packet of a QP with ext, or an ACK with a SACK block.
void ext_completer_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame);

}  // namespace uroce::transport
