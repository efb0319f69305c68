// Queue pair state (IBA 10.3, 11.2.5) shared by the three roles of the RC/UC/UD
// engine (STYLE rule 1): requester.cc turns send WQEs into packets,
// responder.cc handles inbound requests, completer.cc handles ACKs and
// responses. Everything here is preallocated at create_qp; the per-QP state
// excluding the user-sized rings is kept small (see the static_assert below).
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include <uroce/trace.h>
#include <uroce/verbs.h>

#include "stack/common/ring.h"
#include "stack/common/state_memory.h"
#include "stack/net/gid_table.h"
#include "stack/transport/env.h"
#include "stack/transport/qp_cc.h"
#include "stack/transport/recv_queue.h"
#include "stack/transport/selective.h"
#include "stack/transport/states.h"
#include "stack/wire/opcodes.h"
#include "stack/wire/packet.h"

namespace uroce::transport {

inline constexpr uint32_t kFirstQpn = 0x11;        // QPN of QP slot 0 (as rxe: QP0/QP1 are special)
inline constexpr uint8_t kMaxRdAtomic = 16;         // device max_qp_rd_atom / max_qp_init_rd_atom
inline constexpr uint32_t kMaxWr = 16384;           // per queue
inline constexpr uint32_t kMaxSge = 32;
inline constexpr uint32_t kMaxInlineData = 1024;
inline constexpr uint32_t kMaxMsgBytes = 1u << 31;  // IBA 9.4.1: message length is at most 2^31
inline constexpr uint16_t kDefaultPkey = 0xffff;    // P_Key table entry 0, full membership
inline constexpr uint32_t kUdGrhBytes = 40;         // IBA 11.4.1.2: GRH area of a UD receive buffer
inline constexpr uint32_t kAckReqEveryPkts = 64;    // AckReq inside long messages (as rxe)
inline constexpr uint32_t kMaxUnackedPsns = 1024;   // requester window, well inside 2^23 (IBA 9.7.1)

// ---------------------------------------------------------------- WR opcodes

/// How a verbs opcode goes on the wire: RC opcodes by packet position (UC adds
/// 0x20, UD has Send Only forms only), the completion opcode, and the wire::OpFlags
/// class (kSend, kWrite, kRead, kAtomic, kImm, kInv; 0 for local operations).
struct WrOpInfo {
  uint8_t first, middle, last, only;
  uint8_t ud;  // 0: not valid on UD
  WcOpcode wc;
  uint32_t flags;
  bool valid;
};

inline constexpr std::array<WrOpInfo, 10> kWrOps = {{
    /* kRdmaWrite */ {wire::kRcWriteFirst, wire::kRcWriteMiddle, wire::kRcWriteLast, wire::kRcWriteOnly, 0, WcOpcode::kRdmaWrite, wire::kWrite, true},
    /* kRdmaWriteWithImm */ {wire::kRcWriteFirst, wire::kRcWriteMiddle, wire::kRcWriteLastImm, wire::kRcWriteOnlyImm, 0, WcOpcode::kRdmaWrite, wire::kWrite | wire::kImm, true},
    /* kSend */ {wire::kRcSendFirst, wire::kRcSendMiddle, wire::kRcSendLast, wire::kRcSendOnly, wire::kUdSendOnly, WcOpcode::kSend, wire::kSend, true},
    /* kSendWithImm */ {wire::kRcSendFirst, wire::kRcSendMiddle, wire::kRcSendLastImm, wire::kRcSendOnlyImm, wire::kUdSendOnlyImm, WcOpcode::kSend, wire::kSend | wire::kImm, true},
    /* kRdmaRead */ {wire::kRcReadRequest, wire::kRcReadRequest, wire::kRcReadRequest, wire::kRcReadRequest, 0, WcOpcode::kRdmaRead, wire::kRead, true},
    /* kAtomicCmpAndSwp */ {wire::kRcCompareSwap, wire::kRcCompareSwap, wire::kRcCompareSwap, wire::kRcCompareSwap, 0, WcOpcode::kCompSwap, wire::kAtomic, true},
    /* kAtomicFetchAndAdd */ {wire::kRcFetchAdd, wire::kRcFetchAdd, wire::kRcFetchAdd, wire::kRcFetchAdd, 0, WcOpcode::kFetchAdd, wire::kAtomic, true},
    /* kLocalInv */ {0, 0, 0, 0, 0, WcOpcode::kLocalInv, 0, true},
    /* 8: unused */ {0, 0, 0, 0, 0, WcOpcode::kSend, 0, false},
    /* kSendWithInv */ {wire::kRcSendFirst, wire::kRcSendMiddle, wire::kRcSendLastInv, wire::kRcSendOnlyInv, 0, WcOpcode::kSend, wire::kSend | wire::kInv, true},
}};

inline const WrOpInfo& wr_op(WrOpcode op) { return kWrOps[size_t(op)]; }

/// The WrOpInfo of op, or null where op is no opcode post_send accepts (for
/// values from outside the stack: the public predicates of <uroce/wr.h>).
inline const WrOpInfo* find_wr_op(WrOpcode op) {
  return size_t(op) < kWrOps.size() && kWrOps[size_t(op)].valid ? &kWrOps[size_t(op)] : nullptr;
}

/// RDMA READ and the atomics: at most max_rd_atomic of them outstanding
/// (IBA 9.7.5.1.4), each completed by its response, not by an ACK.
inline bool is_rd_atomic_op(WrOpcode op) { return wr_op(op).flags & (wire::kRead | wire::kAtomic); }

/// Local ACK timeout (IBA 9.7.6.1.3): 4.096 us * 2^timeout; timeout 0 means infinite.
inline constexpr uint64_t local_ack_timeout_ns(uint8_t timeout) { return 4096ull << timeout; }

/// PSNs a message of len bytes takes at path MTU mtu (a zero-length message takes one).
inline uint32_t pkts_for(uint32_t len, uint32_t mtu) { return len ? (len + mtu - 1) / mtu : 1; }

// ---------------------------------------------------------------- send queue

enum class WqeState : uint8_t {
  kPosted,   // no PSNs yet
  kStarted,  // PSNs [first_psn, last_psn] assigned, some packets sent
  kDone,     // acknowledged (RC), sent (UC/UD), executed (local) or failed: awaits in-order retirement
};

struct SendWqe {
  uint64_t wr_id;
  uint64_t remote_addr;  // RDMA or atomic target
  uint64_t compare_add;
  uint64_t swap;
  Ah* ah;                // UD
  uint32_t rkey;
  uint32_t imm_data;     // host order
  uint32_t invalidate_rkey;
  uint32_t remote_qpn;   // UD
  uint32_t remote_qkey;  // UD, after the high-bit rule
  uint32_t length;       // message bytes
  uint32_t first_psn;
  uint32_t last_psn;
  uint32_t recv_seq;     // ext with selective repeat: the receive WQE a SEND / WRITE with immediate takes
  uint32_t send_flags;
  uint16_t num_sge;      // 0 for inline data (bytes in the inline area)
  WrOpcode opcode;
  WqeState state;
  WcStatus status;
};

inline bool is_rd_atomic(const SendWqe& w) { return is_rd_atomic_op(w.opcode); }

// ---------------------------------------------------------------- per-role state

struct RequesterState {
  uint32_t sq_psn = 0;   // next PSN to assign to a new WQE
  uint32_t req_idx = 0;  // SQ index of the WQE being sent
  uint32_t req_psn = 0;  // next PSN to send (inside req_idx's WQE once started)
  uint32_t psn_hwm = 0;  // one past the highest PSN ever sent: below it a send is a retransmit
  uint8_t rd_atomic_inflight = 0;  // started READ/atomic WQEs not yet retired (max_rd_atomic)
  bool rnr_wait = false;           // IBA 9.7.5.2.8: waiting out an RNR NAK timer
};

struct CompleterState {
  uint32_t comp_psn = 0;  // oldest PSN not yet acknowledged
  uint8_t retry_left = 0;
  uint8_t rnr_left = 0;
  bool started_retry = false;  // a go-back-N retry is under way: later gaps are not retried again
};

/// Responder resource for one RDMA READ or atomic (IBA 9.7.5.1 responder
/// resources, max_dest_rd_atomic of them): enough to regenerate the response
/// of a duplicate request without executing it again. 32 bytes, as there are
/// kMaxRdAtomic of them in every QP (the 2 KiB per-QP state budget, docs/PERFORMANCE.md
/// "Per-QP state"): a READ's last
/// PSN follows from its length (resp_last_psn in responder.cc), and a READ
/// needs its address where an atomic needs the value it returned.
struct RespRes {
  uint64_t word = 0;      // READ: the address read from; atomic: the original value it returned
                          // (an atomic executes once; duplicates get this value)
  uint32_t rkey = 0;      // READ
  uint32_t length = 0;    // READ: bytes; atomic: 8
  uint32_t first_psn = 0;
  uint32_t cur_psn = 0;   // next response PSN to send
  uint32_t msn = 0;
  uint16_t kind = 0;      // wire::kRead or wire::kAtomic; 0 unused
  bool pending = false;   // responses still to send
  bool replay = false;    // they answer a duplicate request (the original's went out)
};
static_assert(sizeof(RespRes) == 32);

struct ResponderState {
  uint32_t epsn = 0;  // expected PSN
  uint32_t msn = 0;   // IBA 9.7.6.1.1: messages completed
  uint32_t msg_kind = 0;   // wire::kSend or kWrite while inside a multi-packet message
  bool nak_sent = false;   // C9-111: a PSN-sequence or RNR NAK is out until the gap is repaired
  bool uc_drop = false;    // UC: dropping the rest of a message after a PSN gap
  bool has_rwqe = false;   // rwqe holds the receive WQE of the message in progress
  bool comm_est = false;   // IBA 11.6.3.1: Communication Established raised (RTR's first request)
  RecvWqe rwqe;            // its scatter list is QpImpl::rwqe_sges
  uint32_t rwqe_off = 0;   // bytes placed so far
  // The ACK/NAK to send at the next transmit turn; later ones coalesce into it.
  // (The fields are ordered to leave no padding: QpImpl::ext fits the budget.)
  uint32_t ack_psn = 0;
  uint64_t write_va = 0;   // next byte an RDMA WRITE in progress writes
  uint32_t write_left = 0;
  uint32_t write_len = 0;
  uint32_t ack_msn = 0;
  bool ack_pending = false;
  uint8_t ack_syndrome = 0;
  uint8_t res_head = 0;    // next resource slot (the oldest)
  std::array<RespRes, kMaxRdAtomic> res{};
};

// ---------------------------------------------------------------- the QP

struct QpImpl : Qp {
  QpAttr attr;            // the current attributes (cap holds the sizes allocated)
  QpInitAttr init_attr;
  uint32_t index = 0;     // slot in the device's QP table and timer wheel
  uint16_t udp_sport = 0; // RC/UC: set at RTR from both QPNs
  TraceSink* trace = nullptr;  // set_qp_trace: the sink of each role's state steps, or null (untraced)
  net::GidEntry sgid;     // RC/UC: the GID table entry the path sends from (pinned by modify_qp)
  wire::PathTemplate path_template;  // RC/UC: headers below the BTH to the peer (fill_qp_path); len 0 after modify_qp
  uint32_t path_template_qos = 0;    // the device's QoS generation path_template was made under
  QpCc cc;               // congestion control, pacer, CNP notification point, RTT sampler

  Ring<SendWqe> sq;
  StateArray<Sge> sq_sges;         // max_send_sge per SQ slot
  StateArray<uint8_t> sq_inline;   // max_inline_data per SQ slot
  RecvQueue rq;                           // unused with an SRQ
  StateArray<Sge> rwqe_sges;       // scatter list of ResponderState::rwqe

  RequesterState req;
  CompleterState comp;
  ResponderState resp;
  StateBox<QpExtState> ext;  // uroce's extension (QpAttr::ext), only where it is on (selective.h)

  uint32_t mtu() const { return mtu_bytes(attr.path_mtu); }
  Sge* sges_of(uint32_t i) { return &sq_sges[sq.slot(i) * attr.cap.max_send_sge]; }
  uint8_t* inline_of(uint32_t i) { return &sq_inline[size_t(sq.slot(i)) * attr.cap.max_inline_data]; }
};

inline QpImpl& impl(Qp* qp) { return *static_cast<QpImpl*>(qp); }

/// True if qp uses selective repeat (QpExt::selective_repeat, selective.h).
inline bool sr_on(const QpImpl& qp) { return qp.ext && qp.ext->cfg.selective_repeat; }

/// Data bytes per packet of a message of the wire::OpFlags class op_flags:
/// the path MTU, less the placement header on the SEND/WRITE packets of a
/// selective-repeat QP. Both ends segment by it.
inline uint32_t seg_bytes(const QpImpl& qp, uint32_t op_flags) {
  const bool placed = sr_on(qp) && (op_flags & (wire::kSend | wire::kWrite));
  return qp.mtu() - (placed ? wire::kPlaceHdrBytes : 0u);
}

/// Per-QP protocol state, the part that does not grow with the queue sizes.
inline constexpr size_t kQpStateBytes = sizeof(QpImpl);

// ---------------------------------------------------------------- entry points of the roles

/// Responder: one request packet (kReq in kOpcodes) for qp. frame is the whole frame.
void responder_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame);
/// Responder: the go-back-N state machine for one request packet (what
/// responder_rx runs for a QP without ext; ext_responder_rx runs it for READ,
/// atomics and duplicates). frame null: a READ or atomic request selective
/// repeat held (it has no payload).
void responder_run(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame);
/// Responder: the error state err (one of the kErr* states) for pkt, mapped to
/// its IBA error class as the state machine maps it (it reads pkt's opcode and
/// PSN, not its payload).
void responder_error(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, RespState err);
/// Responder: the receive completion of the message whose Last is pkt (its
/// opcode, PSN, SE, ImmDt, IETH), taken from ResponderState::rwqe with
/// rwqe_off / write_len bytes, as the state machine completes it. False if
/// that failed (CQ overflow) and the QP is in error.
bool responder_complete(Env& env, QpImpl& qp, const wire::PacketDesc& pkt);
/// Responder: sets the coalesced ACK/NAK (syndrome, psn) to send at the QP's next transmit turn.
void responder_set_ack(Env& env, QpImpl& qp, uint8_t syndrome, uint32_t psn);
enum class RespSend : uint8_t { kSent, kNoRoom, kGone };
/// Responder: the READ response (or the atomic ACK) of res at psn, on UDP
/// source port sport (0: the QP's own). kGone: the region was deregistered
/// meanwhile (nothing sent; the requester times out); kNoRoom: no transmit room.
RespSend responder_send_response(Env& env, QpImpl& qp, const RespRes& res, uint32_t psn, uint16_t sport);
/// Responder: the PSN of a responder resource's last response.
uint32_t resp_last_psn(const QpImpl& qp, const RespRes& res);
/// Responder: sends pending READ responses, atomic ACKs and the coalesced ACK/NAK.
/// Returns true if it stopped for lack of transmit room.
bool responder_tx(Env& env, QpImpl& qp);
/// Completer: one response packet (kResp) for qp.
void completer_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame);
/// Completer: the go-back-N state machine for one response packet (what
/// completer_rx runs for a QP without ext). frame null: a READ response or
/// atomic ACK whose data selective repeat placed already (ext_completer_rx
/// holds them until they are in order); pkt then describes it, and nothing
/// is copied again.
void completer_run(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame);
/// Completer: true if pkt, a READ response or atomic ACK, answers w where its
/// PSN lies (IBA 9.7.5.1: the opcode sits where the PSN sits in the READ, an
/// ACK-type AETH, one PMTU of data but the last; an atomic ACK answers an
/// atomic). A response that does not is a bad response.
bool response_fits(const QpImpl& qp, const SendWqe& w, const wire::PacketDesc& pkt);
/// Completer: writes the original value an atomic ACK returns into the first
/// SGE of the atomic WQE at SQ index wqe_idx.
void place_atomic_result(QpImpl& qp, uint32_t wqe_idx, const wire::PacketDesc& pkt);
/// Completer: the QP's timer fired (local ACK timeout or end of an RNR wait).
void completer_timer(Env& env, QpImpl& qp);
/// Completer: retires finished WQEs from the head of the SQ in order, writing
/// CQEs for signaled or failed ones.
void retire_done(Env& env, QpImpl& qp);
/// Congestion control (qp_cc.h): true if the QP's pacer lets its next packet
/// (requests and READ responses alike: all of the QP's data toward its peer)
/// leave now; if not, counts cc_tx_paced and arms the QP's pacing timer, which
/// puts it back on the transmit schedule when the pacer lets it go.
bool pacer_allows(Env& env, QpImpl& qp);
/// The engine's look-ahead (poll): with thousands of QPs a QP's state and its
/// SQ have left the cache by its next turn or its next packet. prefetch_qp
/// asks for the lines of qp that a transmit turn or a received packet reads
/// first (the receive loop calls it a frame ahead, the transmit schedule a
/// turn ahead); prefetch_next_wqe, a turn later when those lines have
/// arrived, reads them and asks for the next WQE and its scatter list.
void prefetch_qp(const QpImpl& qp);
void prefetch_next_wqe(QpImpl& qp);
/// Requester: sends up to budget packets. Returns true if it has more to send now.
bool requester_tx(Env& env, QpImpl& qp, uint32_t budget);
/// Moves the requester's send point to psn: back for go-back-N (IBA
/// 9.7.5.1.1, resend from psn), or forward when acknowledgements of earlier
/// transmissions overtake a rewind (nothing acknowledged is sent again).
void requester_rewind(QpImpl& qp, uint32_t psn);

/// Ends a WQE with status (it is retired in order by retire_done).
void complete_wqe(SendWqe& wqe, WcStatus status);
/// Moves qp to ERR (IBA 10.3.1.11): stops its timer and flushes every
/// outstanding and later WQE, send and receive, with kWrFlushErr. A QP on an
/// SRQ then raises Last WQE Reached (IBA 10.2.9.5): it takes no more WQEs
/// from the SRQ. A no-op in ERR.
void qp_to_error(Env& env, QpImpl& qp);
/// An error no completion of this QP reports (IBA 11.6.3.1, affiliated
/// errors): raises event (kQpFatal, kQpReqErr, kQpAccessErr) for qp and
/// moves it to ERR. A no-op in ERR (the first error is the one reported).
void qp_fail(Env& env, QpImpl& qp, AsyncEventType event);
/// UC/UD send-side local error: to SQE, flushing the send queue (IBA 10.3.1.10).
void qp_to_sqe(Env& env, QpImpl& qp);
/// Flushes the send queue (in ERR and SQE) or the receive queue (in ERR) with kWrFlushErr.
void flush_sq(Env& env, QpImpl& qp);
void flush_rq(Env& env, QpImpl& qp);
/// Puts qp on the transmit schedule (no-op if it is already there).
inline void mark_ready(Env& env, const QpImpl& qp) { env.ready.mark(qp.index); }

}  // namespace uroce::transport
