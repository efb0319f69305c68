// The rdma_cm-style connection manager API (librdmacm names: rdma_create_id ->
// uroce::cm_create_id, rdma_listen -> cm_listen, RDMA_CM_EVENT_ESTABLISHED ->
// CmEventType::kEstablished; enumerator values equal librdmacm's).
//
// Connections are set up by the IBA communication manager (IBA 12: REQ, MRA,
// REJ, REP, RTU, DREQ, DREP on QP1, the GSI) with rdma_cm's IP addressing
// (IBA Annex A11: service ID = port space << 16 | port, and the IP header at
// the start of the REQ's private data), so the peer may be stock librdmacm on
// Linux (rping, ucmatose, qperf -cm1, perftest -R). docs/CM.md has the state
// machine and the message flow.
//
// Threading and time: a CmId belongs to its Context and to the thread that
// polls it. The protocol runs inside uroce::poll() (the engine hands QP1
// frames to it and fires its timers at the injected now_ns); the API calls
// below only queue work for the next poll. Events are delivered through an
// event queue polled like a CQ: cm_get_event() returns the next one, if any.
//
// Errors: every call returns a Status; protocol failures (peer rejects,
// timeouts) arrive as events with a status.
#pragma once

#include <cstddef>
#include <cstdint>

#include <uroce/addr.h>
#include <uroce/counters.h>
#include <uroce/status.h>
#include <uroce/verbs.h>

namespace uroce {

/// rdma_cm port spaces (enum rdma_port_space); the service ID is ps << 16 | port.
enum class CmPortSpace : uint16_t { kTcp = 0x0106, kUdp = 0x0111, kIb = 0x013f };

/// RDMA_CM_EVENT_* (librdmacm's values).
enum class CmEventType : uint8_t {
  kAddrResolved = 0,
  kAddrError = 1,
  kRouteResolved = 2,
  kRouteError = 3,
  kConnectRequest = 4,
  kConnectResponse = 5,
  kConnectError = 6,
  kUnreachable = 7,
  kRejected = 8,
  kEstablished = 9,
  kDisconnected = 10,
  kDeviceRemoval = 11,
  kMulticastJoin = 12,
  kMulticastError = 13,
  kAddrChange = 14,
  kTimewaitExit = 15,
};
/// "RDMA_CM_EVENT_ESTABLISHED", as rdma_event_str() spells it.
const char* cm_event_str(CmEventType e);

/// An IP endpoint: ip is an IPv4-mapped (::ffff:a.b.c.d) or IPv6 GID.
struct SockAddr {
  Gid ip{};
  uint16_t port = 0;
  friend bool operator==(const SockAddr&, const SockAddr&) = default;
};

inline constexpr size_t kCmMaxPrivateData = 196;  ///< the REP's; REQ carries 56 after rdma_cm's header

/// struct rdma_conn_param.
struct CmConnParam {
  const void* private_data = nullptr;
  uint8_t private_data_len = 0;
  uint8_t responder_resources = 1;  ///< RDMA READ/atomic we accept at once as responder
  uint8_t initiator_depth = 1;      ///< RDMA READ/atomic we issue at once
  uint8_t retry_count = 7;          ///< transport retries (3 bits)
  uint8_t rnr_retry_count = 7;      ///< RNR retries (3 bits, 7 = infinite)
  /// UD (SIDR REP): the QPN to report; 0 = the id's QP. RC, UC: the QPN the
  /// REQ or REP names when the id has no QP: the consumer moves that QP itself
  /// with cm_init_qp_attr, and the CM moves none.
  uint32_t qp_num = 0;
  bool srq = false;                 ///< with qp_num, no QP on the id: that QP receives from an SRQ
  uint32_t qkey = 0;                ///< UD (SIDR REP): 0 = rdma_cm's default, 0x01234567
};

struct CmId;

/// struct rdma_cm_event. Private data is copied into the event.
struct CmEvent {
  CmEventType event = CmEventType::kAddrError;
  CmId* id = nullptr;         ///< the id the event is about (a new id for kConnectRequest)
  CmId* listen_id = nullptr;  ///< kConnectRequest: the listening id
  int status = 0;             ///< REJ reason for kRejected, SIDR status, or a negative errno
  uint8_t private_data[kCmMaxPrivateData] = {};
  uint8_t private_data_len = 0;
  uint8_t responder_resources = 0;  ///< kConnectRequest: what the peer offers
  uint8_t initiator_depth = 0;
  // UD services (SIDR): where to send, with which Q_Key.
  uint32_t ud_qp_num = 0;
  uint32_t ud_qkey = 0;
  AhAttr ud_ah{};
};

/// struct rdma_cm_id: the public part of a connection identifier.
struct CmId {
  Context* context;
  void* user_context;
  CmPortSpace ps;
  Qp* qp;          ///< set by cm_create_qp
  SockAddr src;    ///< bound / resolved local address
  SockAddr dst;    ///< peer address (after resolve_addr, or from the REQ)
  AhAttr route;    ///< the path to the peer (dgid, dmac, sgid_index) after resolve_route / a REQ
};

/// rdma_cm's default Q_Key for UD ids (RDMA_UDP_QKEY).
inline constexpr uint32_t kRdmaUdpQkey = 0x01234567;

Result<CmId*> cm_create_id(Context* ctx, void* user_context, CmPortSpace ps);
/// Frees the id (and the QP cm_create_qp made for it). A connected id sends
/// one DREQ first, not retried, as Linux ib_cm does when a connected id goes;
/// a request not accepted yet is rejected.
Status cm_destroy_id(CmId* id);

/// Binds the id to a local address (ip may be zero: any of ours) and port.
Status cm_bind_addr(CmId* id, const SockAddr& addr);
/// Listens for REQs (SIDR REQs for kUdp) to the bound port.
Status cm_listen(CmId* id, int backlog);

/// Picks the local GID (src, or the first of dst's family) and resolves the
/// peer's MAC; kAddrResolved or kAddrError (after timeout_ms) follows.
Status cm_resolve_addr(CmId* id, const SockAddr* src, const SockAddr& dst, int timeout_ms);
/// RoCE: the route is the resolved address; kRouteResolved follows.
Status cm_resolve_route(CmId* id, int timeout_ms);

/// Creates the id's QP in pd and moves it to INIT, a UD QP on to RTS with
/// Q_Key kRdmaUdpQkey (rdma_create_qp).
Status cm_create_qp(CmId* id, Pd* pd, QpInitAttr attr);
/// Gives the id a QP the caller made (in RESET) and keeps: moved as by
/// cm_create_qp, connected by the id, but not destroyed with it.
Status cm_attach_qp(CmId* id, Qp* qp);
/// Takes an attached QP away from the id (before the caller destroys it).
Status cm_detach_qp(CmId* id);

/// Active side: sends the REQ (kTcp, kIb) or SIDR REQ (kUdp). kEstablished
/// (QP moved to RTS, RTU sent), kRejected, kUnreachable or kConnectError follow;
/// for kUdp kEstablished carries the peer's QPN and Q_Key (rdma_cm's UD flow).
/// An id without a QP connects param.qp_num's instead: kConnectResponse
/// follows the REP, and the consumer moves its QP (cm_init_qp_attr) and calls
/// cm_establish.
Status cm_connect(CmId* id, const CmConnParam& param);
/// Active side, an id without a QP after kConnectResponse: sends the RTU
/// (IBA 12.9.6, REP Rcvd -> Established). No event follows, as in librdmacm.
Status cm_establish(CmId* id);
/// Passive side, on a kConnectRequest id: moves its QP to RTR and RTS and
/// sends the REP (kEstablished follows the RTU), or for kUdp the SIDR REP.
/// An id without a QP names param.qp_num's in the REP and moves none.
Status cm_accept(CmId* id, const CmConnParam& param);
/// Sends REJ with reason 28, consumer-defined: the passive side to a REQ (for
/// kUdp a SIDR REP with status "rejected"), the active side to a REP it got
/// as kConnectResponse.
Status cm_reject(CmId* id, const void* private_data, uint8_t private_data_len);
/// The attributes that move a QP of this id to attr.qp_state, with the
/// modify_qp mask (rdma_init_qp_attr, Linux ib_cm_init_qp_attr): kInit the
/// port, P_Key index and remote access (RC: write, read, atomic; UC: write) or
/// the UD Q_Key; kRtr the path, MTU, peer QPN and receive PSN (RC: responder
/// resources, RNR timer); kRts the send PSN (RC: ACK timeout, retries,
/// initiator depth). RC and UC need the peer for kRtr and kRts: a REQ
/// received, or a REP. kInvalidArgument for another state or before that.
Status cm_init_qp_attr(CmId* id, QpAttr& attr, uint32_t& attr_mask);
/// Moves the QP to ERR and sends DREQ (or DREP, if the peer's DREQ came first);
/// kDisconnected follows.
Status cm_disconnect(CmId* id);

/// The next event of ctx's connection manager, if any (non-blocking; run
/// uroce::poll to make progress). Returns 1 with *ev filled, or 0.
int cm_get_event(Context* ctx, CmEvent* ev);

/// Counters of the connection manager: every MAD received, sent, retried,
/// dropped (per reason) and every REJ (per reason class).
#define UROCE_CM_COUNTERS(X)                                                                  \
  X(mad_rcvd)               /* MADs taken from QP1 */                                         \
  X(mad_sent)               /* MADs handed to the engine */                                   \
  X(mad_retries)            /* REQ / REP / DREQ sent again after a CM timeout */               \
  X(mad_drop_framing)       /* not a UD SEND Only of 256 bytes with Q_Key 0x80010000 */       \
  X(mad_drop_malformed)     /* a CM MAD that does not decode (version, attribute, lengths) */ \
  X(mad_drop_unsupported)   /* LAP, APR, ClassPortInfo: not implemented */                    \
  X(mad_drop_unknown_id)    /* REP, RTU, MRA, REJ, DREP, SIDR REP for no id of ours */        \
  X(mad_drop_state)         /* a message the id's state does not expect */                    \
  X(mad_drop_tx_full)       /* outbox full: MAD not sent (the peer retries) */                \
  X(dup_req)                /* duplicate REQ: REP or MRA sent again, or ignored */            \
  X(dup_rep)                /* duplicate REP: RTU sent again */                               \
  X(dup_dreq)               /* duplicate DREQ: DREP sent again */                             \
  X(stale_conn)             /* REQ for a QP already connected: REJ stale connection */        \
  X(rej_sent)                                                                                 \
  X(rej_rcvd)                                                                                 \
  X(mra_sent)                                                                                 \
  X(mra_rcvd)                                                                                 \
  X(cm_timeouts)            /* retries exhausted: REQ, REP or DREQ gave up */                 \
  X(established)                                                                              \
  X(disconnected)

enum class CmCounter : uint16_t {
#define UROCE_CM_COUNTER_ENUM(name) name,
  UROCE_CM_COUNTERS(UROCE_CM_COUNTER_ENUM)
#undef UROCE_CM_COUNTER_ENUM
      kCount
};

inline constexpr const char* kCmCounterNames[] = {
#define UROCE_CM_COUNTER_NAME(name) #name,
    UROCE_CM_COUNTERS(UROCE_CM_COUNTER_NAME)
#undef UROCE_CM_COUNTER_NAME
};

struct CmCounters {
  uint64_t v[size_t(CmCounter::kCount)] = {};
  void inc(CmCounter c) { ++v[size_t(c)]; }
  uint64_t get(CmCounter c) const { return v[size_t(c)]; }
};

/// The connection manager's counters (all zero before the first cm_create_id).
CmCounters query_cm_counters(const Context* ctx);
/// Ids alive (created and not destroyed), for leak checks.
uint32_t cm_id_count(const Context* ctx);

}  // namespace uroce
