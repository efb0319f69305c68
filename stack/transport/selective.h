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
// only at epsn (the go-back-N machine): one that comes ahead is held (and
// SACKed) until epsn reaches it (with the hold full, dropped and the gap
// NAKed). Duplicates are answered with the current ACK, and every ACK
// carries a SACK block of the held PSNs.
// The responder sprays READ responses over the paths from the request's
// (Paths::response_path) and answers a READ asked for again from a middle
// PSN with just the run of responses it names.
// Requester: per PSN of the window it knows whether it was sent, SACKed or
// found lost, on which path and with which transmit sequence number; a PSN is
// lost once a later transmission on its path was delivered (paths are FIFO),
// or a later one on any path and it has been out longer than the slowest
// round trip seen (a PSN sequence error NAK is such a delivery for the PSN it
// names); only lost PSNs are sent again, ahead of new ones. The newest
// request, unanswered for two slowest round trips, is probed (sent again)
// before the local ACK timeout, or the rest of a READ whose last responses
// stopped. READ responses (and atomic ACKs) are placed as they come and held
// until they are in order; a missing one is lost by the same two rules (a
// later response of the same request on its path, or any later response a
// round trip ago), and each run of lost responses is asked for again by a
// READ of just that run.
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
struct RespRes;

/// PSNs a selective-repeat responder holds past epsn, and the requester's
/// window (kMaxUnackedPsns): the same, so nothing the requester sends is
/// beyond what the responder can place.
inline constexpr uint32_t kSrWindowPsns = 1024;
/// A PSN's slot in the window's per-PSN arrays and bitmaps.
inline constexpr uint32_t sr_slot(uint32_t psn) { return psn % kSrWindowPsns; }
/// One path (or flowlets): a PSN is lost when this many later transmissions
/// on its path were delivered (reordering inside a path is tolerated up to it).
inline constexpr uint32_t kReorderThreshPkts = 3;
/// Added to the slowest round trip seen before a PSN is taken for lost on
/// the evidence of a later delivery on another path.
inline constexpr uint64_t kReorderMinNs = 20'000;
/// Responder resources (kMaxRdAtomic, qp.h) and runs of READ responses asked
/// for again that a responder queues.
inline constexpr uint32_t kSrResources = 16;
inline constexpr uint32_t kSrRuns = 32;

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

/// A run of a READ's responses asked for again: PSNs cur..end of the READ
/// whose first PSN is read_first, in responder resource res, sprayed from
/// path on the run's first PSN first.
struct SrRun {
  uint32_t read_first = 0;
  uint32_t first = 0;
  uint32_t cur = 0;
  uint32_t end = 0;
  uint16_t path = 0;
  uint8_t res = 0;
};

struct SrResponder {
  PsnBits held;                               // placed PSNs past epsn
  std::array<SrLast, kSrWindowPsns> last{};
  uint32_t recv_done = 0;                     // receive WQEs consumed: the sequence number of the next
  uint16_t ack_sport = 0;                     // where the request that asked for the pending ACK came from
  std::array<uint16_t, kSrResources> res_path{};  // the path each resource's request came on
  // READ and atomic requests that came ahead of epsn: held (and SACKed)
  // until epsn reaches them, then run.
  std::array<wire::PacketDesc, kSrResources> rd_held{};
  uint8_t rd_count = 0;
  std::array<SrRun, kSrRuns> runs{};          // a ring, oldest first
  uint8_t run_head = 0;
  uint8_t run_count = 0;
};

struct SrRequester {
  PsnBits sent;    // a request packet carries this PSN (a READ's first; not its response PSNs)
  PsnBits sacked;  // the responder holds it
  PsnBits lost;    // to send again
  PsnBits resent;  // sent more than once: no RTT sample (Karn)
  PsnBits rd_atomic;  // a READ or atomic request (run in order only)
  PsnBits rd_heard;   // ... that the responder ran (a response of it, or an ACK past it, came)
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
  // READ responses and atomic ACKs (a response PSN of a READ is no request's).
  PsnBits rsp_got;   // placed ahead of comp_psn, held until completion reaches it
  PsnBits rsp_rr;    // asked for again: rsp_seq holds the re-request's transmit sequence number
  PsnBits rsp_late;  // missing, and a response sent after it was delivered at rsp_late_ns
  std::array<uint32_t, kSrWindowPsns> rsp_seq{};  // a response PSN asked for again: the re-request's
  std::array<uint64_t, kSrWindowPsns> rsp_late_ns{};
  // The responses delivered that were sent last (RACK's most recent
  // delivery), of two kinds: the first answers to READs, which the responder
  // sends in PSN order (it runs READs in order), and the answers to READs
  // asked for again, which it sends in the order they were asked for (the
  // re-request's transmit sequence number, then the PSN).
  bool rack_orig = false;
  uint32_t rack_orig_psn = 0;
  bool rack_rr = false;
  uint32_t rack_rr_seq = 0;
  uint32_t rack_rr_psn = 0;
  // An ACK acknowledged requests past a READ or atomic whose responses are
  // not all in: completion reaches acked_to (one past its PSN) once they are.
  bool acked_ahead = false;
  uint32_t acked_to = 0;
  bool rd_held = false;  // a READ or atomic request was SACKed (held at the responder) ...
  uint32_t rd_held_seq = 0;  // ... the newest such, by transmit sequence number
};

struct QpExtState {
  QpExt cfg;
  SrResponder resp;
  SrRequester req;
  Paths paths;
  std::array<uint64_t, kMaxPaths> prev_rtt_ns{};  // TIMELY: each path's previous RTT sample (QpCc::on_acked)
};

/// INIT -> RTR: gives qp its extension state if qp.attr.ext asks for one, else none.
void ext_attach(QpImpl& qp);

/// Responder: a request packet of a QP with ext.
void ext_responder_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame);
/// Responder: the pending ACK/NAK of a QP with ext: on the port of the request
/// that asked for it, with the cumulative PSN and a SACK block of what is held
/// (selective repeat). False if there is no transmit room.
bool ext_send_ack(Env& env, QpImpl& qp);

/// Responder: a duplicate READ request on a selective-repeat QP, which asks
/// for the run of res's responses from its PSN, its RETH cut to the run
/// (IBA 9.7.5.1.4): queued, sent beside what res still sends.
void ext_read_rerequest(Env& env, QpImpl& qp, const RespRes& res, const wire::PacketDesc& pkt);
/// Responder: the UDP source port of res's response psn (0: the QP's own).
uint16_t ext_response_sport(const QpImpl& qp, const RespRes& res, uint32_t psn);
enum class RunsTx : uint8_t { kDone, kNoRoom, kPaced };
/// Responder: sends the queued runs of READ responses.
RunsTx ext_send_runs(Env& env, QpImpl& qp);

/// Requester: at the first packet of w (its PSNs assigned).
void ext_start_wqe(QpImpl& qp, SendWqe& w);
enum class ExtSend : uint8_t { kSent, kSkip, kNoRoom };
/// Requester: builds the request packet d (payload_len counting the placement
/// header) of the WQE at SQ index idx, data from byte off of the message, on
/// its path; a READ asked for again is cut to the run of its lost responses
/// (d.reth_len). kSkip: a PSN sent before that is neither lost nor to be resent
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
/// Completer: a response packet of a QP with ext, or an ACK with a SACK
/// block. On a selective-repeat QP a READ response or atomic ACK ahead of
/// comp_psn is placed and held; held ones complete in order as comp_psn
/// reaches them.
void ext_completer_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame);

}  // namespace uroce::transport
