// The IBA communication manager state machine (IBA 12.9, Figure 145 for
// connections, 12.11 for SIDR), one handler per received message kind and one
// timer handler, mapped onto QP state changes as rdma_cm does them:
//
//   active:  REQ ->            REP: QP RTR, RTS; RTU ->         kEstablished
//   passive:        REQ: kConnectRequest; accept: QP RTR, RTS; REP ->  RTU: kEstablished
//   either:  disconnect: QP ERR; DREQ ->   DREP: kDisconnected (time wait)
//
// Timeouts and retries (IBA 12.4, 12.9.2): a REQ, REP or DREQ is sent again
// after its CM response timeout (4.096 us * 2^t plus two packet lifetimes, t
// from the REQ) up to MaxCMRetries times; then the sender gives up (REJ
// timeout for REQ/REP). An MRA replaces the wait by its ServiceTimeout.
// Duplicates (IBA 12.9.8.x): a REQ again -> MRA or REP sent again; a REP again
// -> RTU sent again; a DREQ again -> DREP sent again. A REQ from a QP that is
// still connected here -> REJ stale connection and DREQ for the old one.
// Anything else unexpected is dropped and counted, never asserted on.
//
// PSNs follow Linux ib_cm, which rxe peers run: the StartingPSN a REQ or REP
// carries is the PSN its sender's receive queue expects, so the receiver sets
// its send queue from it (tests/data/rxe-rping-rdmacm.pcap: the passive side's
// first request carries the REQ's PSN). docs/CM.md compares this to the spec.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "stack/cm/agent.h"
#include "stack/cm/ip_cm.h"
#include "stack/device/context.h"
#include "stack/transport/qp.h"
#include "stack/wire/psn.h"

namespace uroce::cm {

namespace {

constexpr uint64_t kPacketLifeNs = cm_timeout_ns(kCmPacketLifeTime);
constexpr uint8_t kTargetAckDelay = 15;   // what rxe's REP carries

template <typename D>
CmMad make(const CmIdImpl& id, const D& body) {
  CmMad m;
  m.hdr.tid = id.tid;
  m.hdr.attr_id = uint16_t(D::kAttr);
  m.body = body;
  return m;
}

template <size_t N>
void put_private(std::array<uint8_t, N>& dst, std::span<const uint8_t> src, size_t off = 0) {
  if (!src.empty()) std::memcpy(dst.data() + off, src.data(), std::min(src.size(), N - off));
}

// Private data into an event (none: an empty span, whose data() may be null).
void event_private(CmEvent& ev, std::span<const uint8_t> pd) {
  ev.private_data_len = uint8_t(std::min(pd.size(), kCmMaxPrivateData));
  if (ev.private_data_len) std::memcpy(ev.private_data, pd.data(), ev.private_data_len);
}

uint32_t random_psn(Agent& a) {
  // 24 bits that differ per connection (IBA 9.7.1 leaves the choice to the CA).
  std::mt19937 g(uint32_t(a.next_tid * 2654435761u) ^ uint32_t(a.now_ns()));
  return g() & wire::kPsnMask;
}

void arm(Agent& a, CmIdImpl& id, uint64_t ns) { a.timers.arm(id.index, a.now_ns() + ns); }

Status qp_to_err(CmIdImpl& id) {
  if (!id.qp || id.qp->state == QpState::kErr || id.qp->state == QpState::kReset) return {};
  QpAttr at;
  at.qp_state = QpState::kErr;
  return modify_qp(id.qp, at, kQpState);
}

// The connection failed or was refused: QP to ERR, the id done (IBA 12.9.6:
// back to Idle; rdma_cm keeps the id until the consumer destroys it).
void fail(Agent& a, CmIdImpl& id, CmEventType e, int status, std::span<const uint8_t> private_data = {}) {
  (void)qp_to_err(id);
  a.timers.cancel(id.index);
  id.state = CmState::kError;
  a.push_event(id, e, status);
  event_private(a.events.back(), private_data);
}

// RTR then RTS with what the CM exchanged (IBA 12.7.x; Linux ib_cm_init_qp_attr).
Status qp_connect(Agent& a, CmIdImpl& id) {
  if (!id.qp) return Status(StatusCode::kInvalidArgument, "cm id has no qp");
  for (const QpState s : {QpState::kRtr, QpState::kRts}) {
    QpAttr at;
    uint32_t mask = 0;
    Status st = qp_attr_for(a, id, id.qp->qp_type, s, at, mask);
    if (st.ok()) st = modify_qp(id.qp, at, mask);
    if (!st.ok()) return st;
  }
  return {};
}

// A REJ to a REQ that got no id of ours (no listener, stale, no resources):
// sent straight back on the path the REQ came from.
void reject_req(Agent& a, const CmMad& m, const ReqDesc& r, const AhAttr& from, uint16_t reason) {
  RejDesc j;
  j.remote_comm_id = r.local_comm_id;
  j.message_rejected = kCmMsgReq;
  j.reason = reason;
  CmMad out;
  out.hdr.tid = m.hdr.tid;
  out.hdr.attr_id = uint16_t(CmAttr::kRej);
  out.body = j;
  std::array<uint8_t, kMadBytes> buf{};
  if (encode(out, buf) != CmError::kOk) return;
  a.send(from, buf);
  a.counters.inc(CmCounter::rej_sent);
}

void resend_last(Agent& a, CmIdImpl& id) {
  if (id.has_last) a.send(id.route, id.last_mad);
}

void to_time_wait(Agent& a, CmIdImpl& id, int status) {
  // Time wait outlasts the peer's DREQ retry interval, so that a DREQ resent
  // after a lost DREP still finds the connection (IBA 12.9.6 TimeWait).
  id.state = CmState::kTimeWait;
  arm(a, id, std::max(kCmTimeWaitNs, id.retry_ns + kPacketLifeNs));
  a.counters.inc(CmCounter::disconnected);
  a.push_event(id, CmEventType::kDisconnected, status);
}

void send_drep(Agent& a, CmIdImpl& id) {
  DrepDesc d;
  d.local_comm_id = id.local_comm_id;
  d.remote_comm_id = id.remote_comm_id;
  a.send_to(id, make(id, d), true);
}

// The IP addresses rdma_cm put in the REQ's private data (Annex A11).
bool cma_addrs(std::span<const uint8_t> pd, SockAddr& src, SockAddr& dst) {
  CmaHdrDesc h;
  if (decode_cma_hdr(pd, h) != CmError::kOk) return false;
  auto gid_of = [&](const std::array<uint8_t, 16>& a) {
    if (h.ip_version == 6) {
      Gid g;
      std::memcpy(g.raw, a.data(), 16);
      return g;
    }
    return Gid::from_ipv4(a.data() + kCmaIpv4AddrOffset);
  };
  src = SockAddr{gid_of(h.src_addr), h.src_port};
  dst = SockAddr{gid_of(h.dst_addr), 0};
  return true;
}

// A new passive id for a REQ or SIDR REQ that a listener takes.
CmIdImpl* new_passive_id(Agent& a, CmIdImpl& l, const AhAttr& from, uint64_t tid) {
  uint32_t index = 0;
  CmIdImpl* id = a.ids.add(&index);
  if (!id) return nullptr;
  id->index = index;
  id->context = &a.ctx;
  id->user_context = l.user_context;
  id->ps = l.ps;
  id->qp = nullptr;
  id->src = l.src;
  id->dst = SockAddr{from.dgid, 0};
  id->route = from;
  id->sgid_index = from.sgid_index;
  id->listener = &l;
  id->passive = true;
  id->tid = tid;
  id->local_comm_id = a.new_comm_id(*id);
  return id;
}

void connect_request_event(Agent& a, CmIdImpl& id, std::span<const uint8_t> consumer_pd) {
  a.push_event(id, CmEventType::kConnectRequest);
  CmEvent& ev = a.events.back();
  ev.listen_id = id.listener;
  ev.responder_resources = id.req.responder_resources;
  ev.initiator_depth = id.req.initiator_depth;
  event_private(ev, consumer_pd);
}

// ---------------------------------------------------------------- handlers

/// A REQ no one listens for: held for a listener that may come (Agent::held_reqs), or rejected.
void hold_req(Agent& a, const CmMad& m, const ReqDesc& r, const AhAttr& from) {
  for (const Agent::HeldReq& h : a.held_reqs) {
    const ReqDesc& held = std::get<ReqDesc>(h.mad.body);
    if (held.local_comm_id == r.local_comm_id && h.from.dgid == from.dgid) {
      return a.counters.inc(CmCounter::dup_req);  // a resend of one held
    }
  }
  if (a.held_reqs.size() >= kMaxHeldReqs) return reject_req(a, m, r, from, kRejInvalidServiceId);
  a.held_reqs.push_back({m, from, a.now_ns() + kListenGraceNs});
}

void on_req(Agent& a, const CmMad& m, const ReqDesc& r, const AhAttr& from) {
  // Duplicate (IBA 12.9.8.1): the same REQ again, matched by the sender's
  // comm ID and CA GUID. Stale (12.9.8.3.1): a new REQ from a QP that is
  // still connected here.
  for (uint32_t i = 0; i < a.ids.capacity(); ++i) {
    CmIdImpl* id = a.ids.at(i);
    if (!id || id->remote_ca_guid != r.local_ca_guid) continue;
    if (id->remote_comm_id == r.local_comm_id && id->passive) {
      a.counters.inc(CmCounter::dup_req);
      switch (id->state) {
        case CmState::kReqRcvd: {  // the consumer has not answered yet: ask for time (MRA)
          MraDesc mra;
          mra.local_comm_id = id->local_comm_id;
          mra.remote_comm_id = id->remote_comm_id;
          mra.message_mraed = kCmMsgReq;
          mra.service_timeout = kCmMraServiceTimeout;
          id->state = CmState::kMraReqSent;
          a.send_to(*id, make(*id, mra), true);
          a.counters.inc(CmCounter::mra_sent);
          return;
        }
        case CmState::kMraReqSent:  // MRA again
        case CmState::kRepSent:     // REP again
          return resend_last(a, *id);
        case CmState::kTimeWait:
          return reject_req(a, m, r, from, kRejStaleConn);
        case CmState::kIdle:
        case CmState::kAddrQuery:
        case CmState::kAddrResolved:
        case CmState::kRouteResolved:
        case CmState::kListen:
        case CmState::kReqSent:
        case CmState::kMraReqRcvd:
        case CmState::kRepRcvd:
        case CmState::kEstablished:
        case CmState::kDreqSent:
        case CmState::kSidrReqSent:
        case CmState::kSidrReqRcvd:
        case CmState::kError:
          return;  // established or gone: the REQ is old news
      }
    }
    if (id->remote_qpn == r.local_qpn &&
        (id->state == CmState::kEstablished || id->state == CmState::kRepSent)) {
      a.counters.inc(CmCounter::stale_conn);
      reject_req(a, m, r, from, kRejStaleConn);
      (void)send_disconnect(a, *id);  // Linux ib_cm does the same: the old connection is dead
      return;
    }
  }
  CmIdImpl* l = a.listener_for(r.service_id);
  if (!l) return hold_req(a, m, r, from);
  if (r.transport_service_type > 1) return reject_req(a, m, r, from, kRejInvalidTransportType);  // RC, UC only
  SockAddr src{}, dst{};
  std::span<const uint8_t> consumer(r.private_data);
  if (is_ip_cm_service_id(r.service_id)) {
    if (!cma_addrs(r.private_data, src, dst)) return reject_req(a, m, r, from, kRejConsumer);
    // A listener bound to one address takes only REQs to it (as rdma_cm
    // matches the header's destination against the bound address).
    if (l->src.ip != Gid{} && l->src.ip != dst.ip) return reject_req(a, m, r, from, kRejInvalidServiceId);
    consumer = consumer.subspan(sizeof(CmaHdr));
  }
  uint32_t pending = 0;
  for (uint32_t i = 0; i < a.ids.capacity(); ++i) {
    const CmIdImpl* id = a.ids.at(i);
    pending += id && id->listener == l && (id->state == CmState::kReqRcvd || id->state == CmState::kMraReqSent);
  }
  if (l->backlog > 0 && pending >= uint32_t(l->backlog)) return reject_req(a, m, r, from, kRejNoResources);
  CmIdImpl* id = new_passive_id(a, *l, from, m.hdr.tid);
  if (!id) return reject_req(a, m, r, from, kRejNoResources);
  if (is_ip_cm_service_id(r.service_id)) {
    id->dst = src;  // the peer
    id->src.ip = dst.ip;
  }
  id->src.port = service_id_port(r.service_id);
  id->route.hop_limit = r.primary.hop_limit ? r.primary.hop_limit : id->route.hop_limit;
  id->state = CmState::kReqRcvd;
  id->remote_comm_id = r.local_comm_id;
  id->remote_ca_guid = r.local_ca_guid;
  id->remote_qpn = r.local_qpn;
  id->req = r;
  // What the QP gets unless the accept grants less (IBA 12.7.29-30): a
  // consumer that moves its own QP reads these before it accepts.
  id->responder_resources = std::min(r.initiator_depth, transport::kMaxRdAtomic);
  id->initiator_depth = std::min(r.responder_resources, transport::kMaxRdAtomic);
  id->sq_psn = r.starting_psn;
  id->rq_psn = random_psn(a);
  id->rnr_retry = r.rnr_retry_count;
  connect_request_event(a, *id, consumer);
}

void on_rep(Agent& a, const RepDesc& r) {
  CmIdImpl* id = a.by_comm_id(r.remote_comm_id);
  if (!id) return a.counters.inc(CmCounter::mad_drop_unknown_id);
  if (id->state == CmState::kEstablished && id->remote_comm_id == r.local_comm_id) {
    a.counters.inc(CmCounter::dup_rep);  // our RTU was lost (IBA 12.9.8.2): send it again
    return resend_last(a, *id);
  }
  if (id->state == CmState::kRepRcvd && id->remote_comm_id == r.local_comm_id) {
    return a.counters.inc(CmCounter::dup_rep);  // the consumer has it: the RTU comes at cm_establish
  }
  if (id->state != CmState::kReqSent && id->state != CmState::kMraReqRcvd) {
    return a.counters.inc(CmCounter::mad_drop_state);
  }
  a.timers.cancel(id->index);
  id->remote_comm_id = r.local_comm_id;
  id->remote_ca_guid = r.local_ca_guid;
  id->remote_qpn = r.local_qpn;
  // What the passive side grants (IBA 12.7.29-30): it reads as many as we may issue.
  id->initiator_depth = std::min<uint8_t>(r.responder_resources, transport::kMaxRdAtomic);
  id->responder_resources = std::min<uint8_t>(r.initiator_depth, transport::kMaxRdAtomic);
  id->sq_psn = r.starting_psn;
  id->rnr_retry = r.rnr_retry_count;
  id->state = CmState::kRepRcvd;
  if (!id->qp) {  // the consumer moves its QP (cm_init_qp_attr), then cm_establish sends the RTU
    a.push_event(*id, CmEventType::kConnectResponse);
    return event_private(a.events.back(), r.private_data);
  }
  if (!qp_connect(a, *id).ok()) {  // rdma_cm: CONNECT_ERROR and REJ consumer-defined
    RejDesc j;
    j.local_comm_id = id->local_comm_id;
    j.remote_comm_id = id->remote_comm_id;
    j.message_rejected = kCmMsgRep;
    j.reason = kRejConsumer;
    a.send_to(*id, make(*id, j), false);
    a.counters.inc(CmCounter::rej_sent);
    return fail(a, *id, CmEventType::kConnectError, -EINVAL);
  }
  (void)send_rtu(a, *id);
  a.push_event(*id, CmEventType::kEstablished);
  event_private(a.events.back(), r.private_data);
}

void on_rtu(Agent& a, const RtuDesc& r) {
  CmIdImpl* id = a.by_comm_id(r.remote_comm_id);
  if (!id || id->remote_comm_id != r.local_comm_id) return a.counters.inc(CmCounter::mad_drop_unknown_id);
  if (id->state == CmState::kEstablished) return;  // a duplicate RTU changes nothing
  if (id->state != CmState::kRepSent) return a.counters.inc(CmCounter::mad_drop_state);
  a.timers.cancel(id->index);
  id->state = CmState::kEstablished;
  a.counters.inc(CmCounter::established);
  a.push_event(*id, CmEventType::kEstablished);
}

void on_mra(Agent& a, const MraDesc& r) {
  CmIdImpl* id = a.by_comm_id(r.remote_comm_id);
  if (!id) return a.counters.inc(CmCounter::mad_drop_unknown_id);
  a.counters.inc(CmCounter::mra_rcvd);
  // IBA 12.6.6: the sender of the MRAed message waits ServiceTimeout (plus
  // the packet's round trip) instead of retrying.
  const uint64_t wait = cm_timeout_ns(r.service_timeout) + 2 * kPacketLifeNs;
  if (r.message_mraed == kCmMsgReq && (id->state == CmState::kReqSent || id->state == CmState::kMraReqRcvd)) {
    id->state = CmState::kMraReqRcvd;
    return arm(a, *id, wait);
  }
  if (r.message_mraed == kCmMsgRep && id->state == CmState::kRepSent) return arm(a, *id, wait);
  a.counters.inc(CmCounter::mad_drop_state);
}

void on_rej(Agent& a, const RejDesc& r) {
  CmIdImpl* id = a.by_comm_id(r.remote_comm_id);
  if (!id) return a.counters.inc(CmCounter::mad_drop_unknown_id);
  a.counters.inc(CmCounter::rej_rcvd);
  switch (id->state) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
    case CmState::kRepRcvd:  // the passive side gave up waiting for our RTU
    case CmState::kRepSent:
    case CmState::kMraReqSent:
    case CmState::kReqRcvd:  // the active side gave up (REJ timeout) before we answered
      return fail(a, *id, CmEventType::kRejected, r.reason, r.private_data);
    case CmState::kEstablished:
      if (r.reason == kRejStaleConn) return fail(a, *id, CmEventType::kDisconnected, -ECONNRESET);
      return a.counters.inc(CmCounter::mad_drop_state);
    case CmState::kIdle:
    case CmState::kAddrQuery:
    case CmState::kAddrResolved:
    case CmState::kRouteResolved:
    case CmState::kListen:
    case CmState::kDreqSent:
    case CmState::kTimeWait:
    case CmState::kSidrReqSent:
    case CmState::kSidrReqRcvd:
    case CmState::kError:
      return a.counters.inc(CmCounter::mad_drop_state);
  }
}

void on_dreq(Agent& a, const CmMad& m, const DreqDesc& r, const AhAttr& from) {
  CmIdImpl* id = a.by_comm_id(r.remote_comm_id);
  if (!id || id->remote_comm_id != r.local_comm_id) {
    // IBA 12.9.8.5 (and Linux ib_cm): a DREQ for no connection of ours still
    // gets a DREP, so that the peer's disconnect completes.
    a.counters.inc(CmCounter::mad_drop_unknown_id);
    DrepDesc d;
    d.local_comm_id = r.remote_comm_id;
    d.remote_comm_id = r.local_comm_id;
    CmMad out;
    out.hdr.tid = m.hdr.tid;
    out.hdr.attr_id = uint16_t(CmAttr::kDrep);
    out.body = d;
    std::array<uint8_t, kMadBytes> buf{};
    if (encode(out, buf) == CmError::kOk) a.send(from, buf);
    return;
  }
  switch (id->state) {
    case CmState::kEstablished:
    case CmState::kRepSent:  // RTU lost, the peer is already done
    case CmState::kDreqSent:  // both disconnected at once
      (void)qp_to_err(*id);
      a.timers.cancel(id->index);
      send_drep(a, *id);
      return to_time_wait(a, *id, 0);
    case CmState::kTimeWait:
      a.counters.inc(CmCounter::dup_dreq);
      return resend_last(a, *id);
    case CmState::kIdle:
    case CmState::kAddrQuery:
    case CmState::kAddrResolved:
    case CmState::kRouteResolved:
    case CmState::kListen:
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
    case CmState::kRepRcvd:
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
    case CmState::kSidrReqSent:
    case CmState::kSidrReqRcvd:
    case CmState::kError:
      return a.counters.inc(CmCounter::mad_drop_state);
  }
}

void on_drep(Agent& a, const DrepDesc& r) {
  CmIdImpl* id = a.by_comm_id(r.remote_comm_id);
  if (!id || id->remote_comm_id != r.local_comm_id) return a.counters.inc(CmCounter::mad_drop_unknown_id);
  if (id->state != CmState::kDreqSent) return a.counters.inc(CmCounter::mad_drop_state);
  a.timers.cancel(id->index);
  to_time_wait(a, *id, 0);
}

void send_sidr_rep(Agent& a, CmIdImpl& id, uint8_t status, uint32_t qpn, uint32_t qkey,
                   std::span<const uint8_t> private_data) {
  SidrRepDesc s;
  s.request_id = id.remote_comm_id;
  s.status = status;
  s.qpn = qpn;
  s.qkey = qkey;
  s.service_id = id.req.service_id;
  put_private(s.private_data, private_data);
  a.send_to(id, make(id, s), true);
}

void on_sidr_req(Agent& a, const CmMad& m, const SidrReqDesc& r, const AhAttr& from) {
  for (uint32_t i = 0; i < a.ids.capacity(); ++i) {  // a duplicate: answer as before
    CmIdImpl* id = a.ids.at(i);
    if (id && id->passive && id->remote_comm_id == r.request_id && id->route.dgid == from.dgid &&
        (id->state == CmState::kSidrReqRcvd || id->state == CmState::kEstablished)) {
      a.counters.inc(CmCounter::dup_req);
      if (id->state == CmState::kEstablished) resend_last(a, *id);
      return;
    }
  }
  CmIdImpl* l = a.listener_for(r.service_id);
  SockAddr src{}, dst{};
  const bool ip = is_ip_cm_service_id(r.service_id);
  if (!l || (ip && !cma_addrs(r.private_data, src, dst)) || (ip && l->src.ip != Gid{} && l->src.ip != dst.ip)) {
    SidrRepDesc s;
    s.request_id = r.request_id;
    s.status = kSidrNoService;
    s.service_id = r.service_id;
    CmMad out;
    out.hdr.tid = m.hdr.tid;
    out.hdr.attr_id = uint16_t(CmAttr::kSidrRep);
    out.body = s;
    std::array<uint8_t, kMadBytes> buf{};
    if (encode(out, buf) == CmError::kOk) a.send(from, buf);
    a.counters.inc(CmCounter::rej_sent);
    return;
  }
  CmIdImpl* id = new_passive_id(a, *l, from, m.hdr.tid);
  if (!id) return a.counters.inc(CmCounter::mad_drop_tx_full);  // no id: the peer retries
  if (ip) {
    id->dst = src;
    id->src.ip = dst.ip;
  }
  id->src.port = service_id_port(r.service_id);
  id->state = CmState::kSidrReqRcvd;
  id->remote_comm_id = r.request_id;
  id->req.service_id = r.service_id;
  std::span<const uint8_t> consumer(r.private_data);
  if (ip) consumer = consumer.subspan(sizeof(CmaHdr));
  connect_request_event(a, *id, consumer);
}

void on_sidr_rep(Agent& a, const SidrRepDesc& r) {
  CmIdImpl* id = a.by_comm_id(r.request_id);
  if (!id) return a.counters.inc(CmCounter::mad_drop_unknown_id);
  if (id->state != CmState::kSidrReqSent) return a.counters.inc(CmCounter::mad_drop_state);
  a.timers.cancel(id->index);
  if (r.status != kSidrValid) return fail(a, *id, CmEventType::kUnreachable, r.status, r.private_data);
  id->state = CmState::kEstablished;
  id->remote_qpn = r.qpn;
  a.counters.inc(CmCounter::established);
  a.push_event(*id, CmEventType::kEstablished);
  CmEvent& ev = a.events.back();
  ev.ud_qp_num = r.qpn;
  ev.ud_qkey = r.qkey;
  ev.ud_ah = id->route;
  event_private(ev, r.private_data);
}

// rdma_cm's IP header for our REQ / SIDR REQ (A11).
void put_cma_hdr(const CmIdImpl& id, std::span<uint8_t> out) {
  CmaHdrDesc h;
  h.ip_version = id.src.ip.is_ipv4_mapped() ? 4 : 6;
  h.src_port = id.src.port;
  if (h.ip_version == 4) {
    std::memcpy(h.src_addr.data() + kCmaIpv4AddrOffset, id.src.ip.raw + 12, 4);
    std::memcpy(h.dst_addr.data() + kCmaIpv4AddrOffset, id.dst.ip.raw + 12, 4);
  } else {
    std::memcpy(h.src_addr.data(), id.src.ip.raw, 16);
    std::memcpy(h.dst_addr.data(), id.dst.ip.raw, 16);
  }
  (void)encode_cma_hdr(h, out);
}

std::span<const uint8_t> consumer_pd(const CmConnParam& p) {
  return {static_cast<const uint8_t*>(p.private_data), p.private_data ? p.private_data_len : size_t(0)};
}

}  // namespace

void on_mad(Agent& a, const CmMad& m, const AhAttr& from, uint32_t src_qp) {
  (void)src_qp;  // replies go to QP1 whatever the sender's SrcQP (IBA 13.5.1: GSI redirection unsupported)
  std::visit(
      [&](const auto& b) {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, ReqDesc>) on_req(a, m, b, from);
        else if constexpr (std::is_same_v<T, RepDesc>) on_rep(a, b);
        else if constexpr (std::is_same_v<T, RtuDesc>) on_rtu(a, b);
        else if constexpr (std::is_same_v<T, MraDesc>) on_mra(a, b);
        else if constexpr (std::is_same_v<T, RejDesc>) on_rej(a, b);
        else if constexpr (std::is_same_v<T, DreqDesc>) on_dreq(a, m, b, from);
        else if constexpr (std::is_same_v<T, DrepDesc>) on_drep(a, b);
        else if constexpr (std::is_same_v<T, SidrReqDesc>) on_sidr_req(a, m, b, from);
        else if constexpr (std::is_same_v<T, SidrRepDesc>) on_sidr_rep(a, b);
      },
      m.body);
}

void replay_held_reqs(Agent& a) {
  // Only the REQs a listener now takes leave the list: the others keep their
  // deadline (a replay through on_req would hold them anew, for a full grace).
  std::vector<Agent::HeldReq> taken;
  std::erase_if(a.held_reqs, [&a, &taken](const Agent::HeldReq& h) {
    if (!a.listener_for(std::get<ReqDesc>(h.mad.body).service_id)) return false;
    taken.push_back(h);
    return true;
  });
  for (const Agent::HeldReq& h : taken) on_req(a, h.mad, std::get<ReqDesc>(h.mad.body), h.from);
}

void expire_held_reqs(Agent& a, uint64_t now_ns) {
  std::erase_if(a.held_reqs, [&a, now_ns](const Agent::HeldReq& h) {
    if (now_ns < h.until_ns) return false;
    reject_req(a, h.mad, std::get<ReqDesc>(h.mad.body), h.from, kRejInvalidServiceId);
    return true;
  });
}

void on_timer(Agent& a, CmIdImpl& id) {
  const bool retry = id.retries_left > 0;
  switch (id.state) {
    case CmState::kAddrQuery:
      return addr_query(a, id);
    case CmState::kReqSent:
    case CmState::kRepSent:
    case CmState::kDreqSent:
    case CmState::kSidrReqSent:
      if (retry) {  // IBA 12.9.2: send it again after the CM response timeout
        --id.retries_left;
        a.counters.inc(CmCounter::mad_retries);
        resend_last(a, id);
        return arm(a, id, id.retry_ns);
      }
      break;
    case CmState::kMraReqRcvd:  // the MRA's service timeout passed without a REP
      break;
    case CmState::kTimeWait:  // time wait over: forget the comm ID (IBA 12.9.6)
      id.state = CmState::kIdle;
      id.local_comm_id = 0;
      return;
    case CmState::kIdle:
    case CmState::kAddrResolved:
    case CmState::kRouteResolved:
    case CmState::kListen:
    case CmState::kRepRcvd:  // the passive side's REP retries keep it alive until cm_establish
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
    case CmState::kEstablished:
    case CmState::kSidrReqRcvd:
    case CmState::kError:
      return;
  }
  // Retries exhausted.
  a.counters.inc(CmCounter::cm_timeouts);
  if (id.state == CmState::kDreqSent) return to_time_wait(a, id, -ETIMEDOUT);  // rdma_cm: DISCONNECTED
  if (id.state != CmState::kSidrReqSent) {  // REQ / REP: tell the peer we gave up (REJ timeout)
    RejDesc j;
    j.local_comm_id = id.local_comm_id;
    j.remote_comm_id = id.remote_comm_id;
    j.message_rejected = id.state == CmState::kRepSent ? kCmMsgRep : kCmMsgReq;
    j.reason = kRejTimeout;
    a.send_to(id, make(id, j), false);
    a.counters.inc(CmCounter::rej_sent);
  }
  fail(a, id, CmEventType::kUnreachable, -ETIMEDOUT);
}

Status send_req(Agent& a, CmIdImpl& id, const CmConnParam& p) {
  if (id.state != CmState::kRouteResolved) return Status(StatusCode::kInvalidArgument, "route not resolved");
  if (!id.qp && !p.qp_num && id.ps != CmPortSpace::kUdp) {
    return Status(StatusCode::kInvalidArgument, "cm id has no qp (cm_create_qp) and the parameters name none");
  }
  if (p.private_data_len > (id.ps == CmPortSpace::kUdp ? kSidrReqPrivateDataBytes : kReqPrivateDataBytes) -
                               sizeof(CmaHdr)) {
    return Status(StatusCode::kInvalidArgument, "private data too long");
  }
  id.local_comm_id = a.new_comm_id(id);
  id.tid = a.next_tid++;
  id.retries_left = kCmMaxCmRetries;
  id.retry_ns = cm_timeout_ns(kCmResponseTimeout) + 2 * kPacketLifeNs;
  const uint64_t sid = rdma_cm_service_id(PortSpace(id.ps), id.dst.port);
  if (id.ps == CmPortSpace::kUdp) {  // IBA 12.11: SIDR for UD services
    if (id.qp && id.qp->qp_type != QpType::kUd) return Status(StatusCode::kInvalidArgument, "UDP port space needs a UD qp");
    SidrReqDesc s;
    s.request_id = id.local_comm_id;
    s.pkey = kDefaultPkeyFull;
    s.service_id = sid;
    put_cma_hdr(id, s.private_data);
    put_private(s.private_data, consumer_pd(p), sizeof(CmaHdr));
    id.req.service_id = sid;
    id.state = CmState::kSidrReqSent;
    a.send_to(id, make(id, s), true);
    arm(a, id, id.retry_ns);
    return {};
  }
  if (id.qp && id.qp->qp_type == QpType::kUd) {
    return Status(StatusCode::kInvalidArgument, "TCP/IB port space needs an RC or UC qp");
  }
  ReqDesc r;
  r.local_comm_id = id.local_comm_id;
  r.service_id = sid;
  r.local_ca_guid = a.ca_guid;
  r.local_qpn = id.qp ? id.qp->qp_num : p.qp_num;
  r.responder_resources = std::min<uint8_t>(p.responder_resources, transport::kMaxRdAtomic);
  r.initiator_depth = std::min<uint8_t>(p.initiator_depth, transport::kMaxRdAtomic);
  r.remote_cm_response_timeout = kCmResponseTimeout;
  r.local_cm_response_timeout = kCmResponseTimeout;
  r.transport_service_type = id.qp && id.qp->qp_type == QpType::kUc ? 1 : 0;  // the consumer's own QP: RC
  id.rq_psn = random_psn(a);
  r.starting_psn = id.rq_psn;  // what our receive queue expects (Linux ib_cm; see the file comment)
  r.retry_count = p.retry_count & 7;
  r.rnr_retry_count = p.rnr_retry_count & 7;
  r.pkey = kDefaultPkeyFull;
  r.path_mtu = uint8_t(a.ctx.max_mtu);
  r.max_cm_retries = kCmMaxCmRetries;
  r.srq = id.qp ? id.qp->srq != nullptr : p.srq;
  // RoCE has no LIDs: rxe sends the permissive LID 0xffff in both.
  r.primary.local_lid = 0xffff;
  r.primary.remote_lid = 0xffff;
  r.primary.local_gid = id.src.ip;
  r.primary.remote_gid = id.dst.ip;
  // PacketRate stays 0, as rxe sends it (Wireshark 4.0 misreads that word: tests/unit/cm/mad_test.cc).
  r.primary.traffic_class = id.route.traffic_class;
  r.primary.hop_limit = id.route.hop_limit;
  r.primary.local_ack_timeout = kCmLocalAckTimeout;
  put_cma_hdr(id, r.private_data);
  put_private(r.private_data, consumer_pd(p), sizeof(CmaHdr));
  id.req = r;
  id.state = CmState::kReqSent;
  a.send_to(id, make(id, r), true);
  arm(a, id, id.retry_ns);
  return {};
}

Status send_rep(Agent& a, CmIdImpl& id, const CmConnParam& p) {
  if (id.state == CmState::kSidrReqRcvd) {
    if (!id.qp && !p.qp_num) return Status(StatusCode::kInvalidArgument, "cm id has no qp");
    id.state = CmState::kEstablished;
    send_sidr_rep(a, id, kSidrValid, p.qp_num ? p.qp_num : id.qp->qp_num, p.qkey ? p.qkey : kRdmaUdpQkey,
                  consumer_pd(p));
    return {};
  }
  if (id.state != CmState::kReqRcvd && id.state != CmState::kMraReqSent) {
    return Status(StatusCode::kInvalidArgument, "no connection request to accept");
  }
  if (p.private_data_len > kRepPrivateDataBytes) return Status(StatusCode::kInvalidArgument, "private data too long");
  const ReqDesc& r = id.req;
  if (id.qp ? (r.transport_service_type == 1) != (id.qp->qp_type == QpType::kUc) : !p.qp_num) {
    return Status(StatusCode::kInvalidArgument, "cm id needs a qp of the REQ's transport (cm_create_qp) or a qp_num");
  }
  // IBA 12.7.29-30: grant no more than the active side can use.
  id.responder_resources = std::min({p.responder_resources, r.initiator_depth, transport::kMaxRdAtomic});
  id.initiator_depth = std::min({p.initiator_depth, r.responder_resources, transport::kMaxRdAtomic});
  if (id.qp) {
    if (Status st = qp_connect(a, id); !st.ok()) return st;
  }
  RepDesc rep;
  rep.local_comm_id = id.local_comm_id;
  rep.remote_comm_id = id.remote_comm_id;
  rep.local_qpn = id.qp ? id.qp->qp_num : p.qp_num;
  rep.starting_psn = id.rq_psn;
  rep.responder_resources = id.responder_resources;
  rep.initiator_depth = id.initiator_depth;
  rep.target_ack_delay = kTargetAckDelay;
  rep.rnr_retry_count = p.rnr_retry_count & 7;
  rep.srq = id.qp ? id.qp->srq != nullptr : p.srq;
  rep.local_ca_guid = a.ca_guid;
  put_private(rep.private_data, consumer_pd(p));
  id.state = CmState::kRepSent;
  id.retries_left = r.max_cm_retries;
  // The active side answers a REP within its LocalCMResponseTimeout (IBA 12.6.5).
  id.retry_ns = cm_timeout_ns(r.local_cm_response_timeout) + 2 * kPacketLifeNs;
  a.send_to(id, make(id, rep), true);
  arm(a, id, id.retry_ns);
  return {};
}

Status send_reject(Agent& a, CmIdImpl& id, std::span<const uint8_t> private_data) {
  if (id.state == CmState::kSidrReqRcvd) {
    id.state = CmState::kError;
    send_sidr_rep(a, id, kSidrReject, 0, 0, private_data);
    return {};
  }
  if (id.state != CmState::kReqRcvd && id.state != CmState::kMraReqSent && id.state != CmState::kRepRcvd) {
    return Status(StatusCode::kInvalidArgument, "no connection request or reply to reject");
  }
  if (private_data.size() > kRejPrivateDataBytes) return Status(StatusCode::kInvalidArgument, "private data too long");
  RejDesc j;
  j.local_comm_id = id.local_comm_id;
  j.remote_comm_id = id.remote_comm_id;
  j.message_rejected = id.state == CmState::kRepRcvd ? kCmMsgRep : kCmMsgReq;
  j.reason = kRejConsumer;
  put_private(j.private_data, private_data);
  a.send_to(id, make(id, j), false);
  a.counters.inc(CmCounter::rej_sent);
  a.timers.cancel(id.index);
  id.state = CmState::kError;
  (void)qp_to_err(id);
  return {};
}

Status send_rtu(Agent& a, CmIdImpl& id) {
  if (id.state != CmState::kRepRcvd) return Status(StatusCode::kInvalidArgument, "no connect response to establish");
  RtuDesc u;
  u.local_comm_id = id.local_comm_id;
  u.remote_comm_id = id.remote_comm_id;
  a.send_to(id, make(id, u), true);
  id.state = CmState::kEstablished;
  a.counters.inc(CmCounter::established);
  return {};
}

Status send_disconnect(Agent& a, CmIdImpl& id) {
  switch (id.state) {
    case CmState::kEstablished:
    case CmState::kRepSent: {
      if (id.ps == CmPortSpace::kUdp) return {};  // SIDR has no connection to tear down
      (void)qp_to_err(id);
      DreqDesc d;
      d.local_comm_id = id.local_comm_id;
      d.remote_comm_id = id.remote_comm_id;
      d.remote_qpn = id.remote_qpn;
      id.state = CmState::kDreqSent;
      id.retries_left = kCmMaxCmRetries;
      a.send_to(id, make(id, d), true);
      arm(a, id, id.retry_ns);
      return {};
    }
    case CmState::kTimeWait:  // the peer's DREQ came first: DREP was sent
    case CmState::kDreqSent:
      (void)qp_to_err(id);
      return {};
    case CmState::kIdle:
    case CmState::kAddrQuery:
    case CmState::kAddrResolved:
    case CmState::kRouteResolved:
    case CmState::kListen:
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
    case CmState::kRepRcvd:
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
    case CmState::kSidrReqSent:
    case CmState::kSidrReqRcvd:
    case CmState::kError:
      break;
  }
  return Status(StatusCode::kInvalidArgument, "cm id is not connected");
}

}  // namespace uroce::cm
