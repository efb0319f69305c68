// The connection manager of one engine: the CM ids (rdma_cm ids and their IBA
// CM connection state, IBA 12.9), the QP1 outbox, the CM timers on a timer
// wheel of their own (time injected: the engine's now_ns), the event queue and
// the counters. stack/cm/protocol.cc runs the IBA CM state machine on it,
// stack/cm/rdma_cm.cc implements include/uroce/cm.h over it, stack/cm/gsi.cc
// frames MADs on QP1. Control path: CM traffic is rare, so this allocates
// (events, outbox) but never blocks.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string_view>
#include <vector>

#include <uroce/cm.h>

#include "stack/cm/mad.h"
#include "stack/device/context.h"
#include "stack/common/enum_name.h"
#include "stack/common/object_table.h"
#include "stack/common/timer_wheel.h"
#include "stack/wire/packet.h"


namespace uroce::cm {

/// One state per id, the rdma_cm address states followed by the IBA CM
/// connection states of IBA 12.9.6 (Figure 145, names as there).
#define UROCE_CM_STATES(X)                                                              \
  X(kIdle)            /* created, or bound */                                           \
  X(kAddrQuery)       /* resolve_addr: neighbour resolution in progress */              \
  X(kAddrResolved)                                                                      \
  X(kRouteResolved)                                                                     \
  X(kListen)                                                                            \
  X(kReqSent)         /* active: REQ sent, waiting for REP / MRA / REJ */               \
  X(kMraReqRcvd)      /* active: the passive side MRAed our REQ: REP comes later */     \
  X(kRepRcvd)         /* active, no QP on the id: REP delivered, RTU at establish */    \
  X(kReqRcvd)         /* passive: kConnectRequest delivered, waiting for accept */     \
  X(kMraReqSent)      /* passive: a duplicate REQ came before accept: MRA sent */       \
  X(kRepSent)         /* passive: REP sent (QP in RTS), waiting for RTU */              \
  X(kEstablished)                                                                       \
  X(kDreqSent)        /* DREQ sent, waiting for DREP */                                 \
  X(kTimeWait)        /* disconnected; answers a duplicate DREQ with DREP */            \
  X(kSidrReqSent)     /* active UD: SIDR REQ sent, waiting for SIDR REP */              \
  X(kSidrReqRcvd)     /* passive UD: kConnectRequest delivered, waiting for accept */  \
  X(kError)           /* rejected, unreachable or timed out: only destroy remains */

enum class CmState : uint8_t { UROCE_CM_STATES(UROCE_ENUMERATOR) };
inline constexpr auto kCmStateNames = UROCE_ENUM_NAMES(UROCE_CM_STATES);
/// The state's name, spelt as the transport states' (stack/transport/states.h): "addr_query", "req_sent".
constexpr std::string_view cm_state_name(CmState s) { return kCmStateNames[size_t(s)]; }
static_assert(cm_state_name(CmState::kMraReqRcvd) == "mra_req_rcvd");

// Timing (IBA 12.4: a CM response timeout is 4.096 us * 2^value).
inline constexpr uint64_t cm_timeout_ns(uint8_t value) { return 4096ull << (value > 31 ? 31 : value); }
inline constexpr uint8_t kCmResponseTimeout = 20;   // 4.3 s, rdma_cm's CMA_CM_RESPONSE_TIMEOUT
inline constexpr uint8_t kCmMaxCmRetries = 15;      // rdma_cm's CMA_MAX_CM_RETRIES
inline constexpr uint8_t kCmPacketLifeTime = 16;    // RoCE: 268 ms each way (rdma_cm's CMA_IBOE_PACKET_LIFETIME)
inline constexpr uint8_t kCmLocalAckTimeout = 19;   // packet life time + 1 doubled: what rxe's REQ carries
inline constexpr uint8_t kCmMraServiceTimeout = 24; // our MRA: "give us up to 68 s to accept"
inline constexpr uint64_t kCmTimeWaitNs = 2 * cm_timeout_ns(kCmPacketLifeTime);

// REJ reasons (IBA 12.6.7.2 Table 109; Linux enum ib_cm_rej_reason).
inline constexpr uint16_t kRejNoQp = 1;
inline constexpr uint16_t kRejNoResources = 3;
inline constexpr uint16_t kRejTimeout = 4;
inline constexpr uint16_t kRejInvalidCommId = 6;
inline constexpr uint16_t kRejInvalidServiceId = 8;
inline constexpr uint64_t kListenGraceNs = 100'000'000;  // Agent::held_reqs
inline constexpr size_t kMaxHeldReqs = 16;
inline constexpr uint16_t kRejInvalidTransportType = 9;
inline constexpr uint16_t kRejStaleConn = 10;
inline constexpr uint16_t kRejInvalidGid = 12;
inline constexpr uint16_t kRejConsumer = 28;
// SIDR REP status (Table 121).
inline constexpr uint8_t kSidrValid = 0;
inline constexpr uint8_t kSidrNoService = 1;
inline constexpr uint8_t kSidrReject = 2;  // rdma_cm's IB_SIDR_REJECT

inline constexpr uint32_t kCmIdIndexBits = 10;  // low bits of a local comm ID: the id's slot
inline constexpr uint32_t kCmMaxIds = 1u << kCmIdIndexBits;

struct CmIdImpl : CmId {
  uint32_t index = 0;
  CmState state = CmState::kIdle;
  bool bound = false;
  bool own_qp = false;           // cm_create_qp made qp: destroy it with the id
  int backlog = 0;
  CmIdImpl* listener = nullptr;  // a passive id: the id that listened (null once it is destroyed)
  bool passive = false;          // made by a REQ or SIDR REQ
  uint8_t sgid_index = 0;        // our GID: route.sgid_index
  uint64_t addr_deadline_ns = 0;

  // The IBA CM connection (12.9).
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint64_t remote_ca_guid = 0;
  uint32_t remote_qpn = 0;
  uint64_t tid = 0;
  uint8_t retries_left = 0;
  uint64_t retry_ns = 0;           // the CM response timeout of the message we wait on
  std::array<uint8_t, kMadBytes> last_mad{};  // sent again on timeout or duplicate
  bool has_last = false;
  ReqDesc req{};                   // the REQ sent (active) or received (passive)
  uint8_t responder_resources = 0; // negotiated: our max_dest_rd_atomic
  uint8_t initiator_depth = 0;     // negotiated: our max_rd_atomic
  uint32_t sq_psn = 0;
  uint32_t rq_psn = 0;
  uint8_t rnr_retry = 7;
};

class Agent final : public Qp1Handler {
 public:
  explicit Agent(Context& ctx);

  Context& ctx;
  ObjectTable<CmIdImpl> ids;
  TimerWheel timers;  // one per id slot: CM response timeout, time wait, address query
  std::deque<CmEvent> events;
  struct OutMad {
    AhAttr av;
    std::array<uint8_t, kMadBytes> mad;
  };
  std::deque<OutMad> outbox;
  /// REQs that found no listener, held up to kListenGraceNs before their
  /// REJ (reason 8): a program that listens again between two connections
  /// (perftest -R listens for its test connection only after the handshake
  /// on the first) can be milliseconds late for a fast peer's REQ. A
  /// listener that comes in time takes the REQ (replay_held_reqs).
  struct HeldReq {
    CmMad mad;
    AhAttr from;
    uint64_t until_ns;
  };
  std::vector<HeldReq> held_reqs;  // at most kMaxHeldReqs
  uint32_t gsi_psn = 0;       // BTH PSN of the next MAD QP1 sends (rxe counts them too)
  uint32_t comm_salt = 0;     // high bits of local comm IDs, random per agent
  uint64_t ca_guid = 0;       // our CA GUID: EUI-64 of the device MAC
  uint64_t next_tid = 0;
  CmCounters counters;

  CmIdImpl* by_comm_id(uint32_t local_comm_id) const;
  CmIdImpl* listener_for(uint64_t service_id) const;
  void push_event(CmIdImpl& id, CmEventType e, int status = 0);
  /// Queues mad to the path av for the next flush.
  void send(const AhAttr& av, std::span<const uint8_t> mad);
  /// Encodes m to id's peer, remembering it for resends if keep.
  void send_to(CmIdImpl& id, const CmMad& m, bool keep);
  uint32_t new_comm_id(const CmIdImpl& id) const;
  uint64_t now_ns() const;

  /// A frame whose BTH DestQP is 1 (the GSI, IBA 13.5): checks the framing
  /// (UD SEND Only, P_Key, Q_Key 0x80010000, 256 bytes), decodes the MAD and
  /// runs the CM state machine. Drops are counted.
  void rx(const wire::PacketDesc& d, const uint8_t* frame) override;
  /// The CM's share of an engine poll: timers due at now_ns and the outbox
  /// onto the transmit stage. Cheap when there is nothing to do.
  void poll(uint64_t now_ns) override;
  /// A QP lent to an id (cm_attach_qp) destroyed without cm_detach_qp, as
  /// rping does with ibv_destroy_qp: the id forgets it.
  void qp_destroyed(const Qp* qp) override;
};

/// The context's agent, created and registered as its QP1 handler on first
/// use. Control path.
Agent& agent(Context& ctx);
/// The context's agent, or nullptr if no CM id was ever made on it. The
/// device's QP1 handler is always an Agent: only agent() registers one.
inline Agent* find_agent(const Context& ctx) { return static_cast<Agent*>(ctx.qp1.get()); }

// ---------------------------------------------------------------- protocol (protocol.cc)

/// Runs the state machine on one decoded CM MAD that came from the path av.
void on_mad(Agent& a, const CmMad& m, const AhAttr& from, uint32_t src_qp);
/// A CM timer of id fired.
void on_timer(Agent& a, CmIdImpl& id);
/// A listener came: the held REQs it takes run the state machine again.
void replay_held_reqs(Agent& a);
/// The held REQs whose grace ended by now_ns get their REJ.
void expire_held_reqs(Agent& a, uint64_t now_ns);
/// Active side: REQ (RC) or SIDR REQ (UD) from a route-resolved id with a QP.
Status send_req(Agent& a, CmIdImpl& id, const CmConnParam& p);
/// Passive side: accept (REP, or SIDR REP). Passive side, or active in
/// kRepRcvd: reject (REJ, or SIDR REP status 2).
Status send_rep(Agent& a, CmIdImpl& id, const CmConnParam& p);
Status send_reject(Agent& a, CmIdImpl& id, std::span<const uint8_t> private_data);
/// Active side, kRepRcvd: the RTU, and the id is established.
Status send_rtu(Agent& a, CmIdImpl& id);
/// The QP type the id connects: its QP's, else UD for kUdp, else the REQ's transport.
QpType conn_qp_type(const CmIdImpl& id);
/// The attributes and mask that move a QP of type `type` on id to `state`
/// (include/uroce/cm.h cm_init_qp_attr; Linux ib_cm_init_qp_attr).
Status qp_attr_for(const Agent& a, const CmIdImpl& id, QpType type, QpState state, QpAttr& at, uint32_t& mask);
/// DREQ, or DREP if the peer's DREQ came first.
Status send_disconnect(Agent& a, CmIdImpl& id);

// ---------------------------------------------------------------- addressing (rdma_cm.cc)

/// One step of resolve_addr: the peer's MAC is known (kAddrResolved), still
/// pending (timer re-armed) or failed / timed out (kAddrError).
void addr_query(Agent& a, CmIdImpl& id);

}  // namespace uroce::cm
