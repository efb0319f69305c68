// include/uroce/cm.h: rdma_cm ids over the CM agent. Addressing as rdma_cm
// does it on RoCE: the local GID is the address (IPv4-mapped or IPv6), the
// route is the peer's MAC from the engine's ARP / neighbour discovery, the
// service ID is port space << 16 | port (Annex A11, stack/cm/ip_cm.h).
#include <cerrno>
#include <cstring>
#include <vector>

#include "stack/cm/agent.h"
#include "stack/cm/ip_cm.h"
#include "stack/device/context.h"

namespace uroce {

using cm::Agent;
using cm::CmIdImpl;
using cm::CmState;

const char* cm_event_str(CmEventType e) {
  static constexpr const char* kNames[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",    "RDMA_CM_EVENT_ADDR_ERROR",       "RDMA_CM_EVENT_ROUTE_RESOLVED",
      "RDMA_CM_EVENT_ROUTE_ERROR",      "RDMA_CM_EVENT_CONNECT_REQUEST",  "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",    "RDMA_CM_EVENT_UNREACHABLE",      "RDMA_CM_EVENT_REJECTED",
      "RDMA_CM_EVENT_ESTABLISHED",      "RDMA_CM_EVENT_DISCONNECTED",     "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",   "RDMA_CM_EVENT_MULTICAST_ERROR",  "RDMA_CM_EVENT_ADDR_CHANGE",
      "RDMA_CM_EVENT_TIMEWAIT_EXIT",
  };
  return size_t(e) < std::size(kNames) ? kNames[size_t(e)] : "RDMA_CM_EVENT_UNKNOWN";
}

namespace {

CmIdImpl& impl(CmId* id) { return *static_cast<CmIdImpl*>(id); }
Agent& agent_of(CmId* id) { return *cm::find_agent(*id->context); }

constexpr uint64_t kAddrRetryNs = 1'000'000;  // ask the neighbour table again every 1 ms

// An ephemeral port (rdma_cm binds one from the IANA range when none is given).
uint16_t ephemeral_port(Agent& a, const CmIdImpl& id) {
  return uint16_t(49152 + ((a.comm_salt * 31 + id.index * 7919 + a.ids.generation(id.index)) % 16384));
}

// The first RoCEv2 GID of an address family: the source rdma_cm takes when
// it is given none (or the wildcard) for a destination of that family.
std::optional<uint8_t> first_gid_of_family(const net::GidTable& gids, bool ipv4) {
  for (uint32_t i = 0; i < 256; ++i) {
    const net::GidEntry* e = gids.at(uint8_t(i));
    if (e && e->type == net::GidType::kRoceV2 && e->gid.is_ipv4_mapped() == ipv4) return uint8_t(i);
  }
  return std::nullopt;
}

// 127.0.0.0/8 or ::1. Linux binds a loopback address to the loopback netdev,
// and a connection to it stays in the host. A uroce process has no netdev but
// its device, so a bind to loopback binds the device's own address of that
// family: what libfabric's verbs provider binds when given no address (it
// asks rdma_getaddrinfo for "localhost": vrb_get_rdmacm_rai), which
// `fi_info -p 'verbs;ofi_rxm'` and fi_pingpong need.
bool is_loopback(const Gid& g) {
  static constexpr Gid kIpv6Loopback{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
  return g.is_ipv4_mapped() ? g.raw[12] == 127 : g == kIpv6Loopback;
}

}  // namespace

Result<CmId*> cm_create_id(Context* ctx, void* user_context, CmPortSpace ps) {
  if (!ctx) return Status(StatusCode::kInvalidArgument, "null context");
  if (ps != CmPortSpace::kTcp && ps != CmPortSpace::kUdp && ps != CmPortSpace::kIb) {
    return Status(StatusCode::kInvalidArgument, "unknown port space");
  }
  Agent& a = cm::agent(*ctx);
  uint32_t index = 0;
  CmIdImpl* id = a.ids.add(&index);
  if (!id) return Status(StatusCode::kResourceExhausted, "cm id table full");
  id->index = index;
  id->context = ctx;
  id->user_context = user_context;
  id->ps = ps;
  id->qp = nullptr;
  return static_cast<CmId*>(id);
}

Status cm_destroy_id(CmId* id) {
  if (!id || !cm::find_agent(*id->context)) return Status(StatusCode::kInvalidArgument, "null cm id");
  Agent& a = agent_of(id);
  CmIdImpl& d = impl(id);
  if (a.ids.at(d.index) != &d) return Status(StatusCode::kNotFound, "unknown cm id");
  // A request the consumer neither accepted nor rejected is rejected now
  // (REJ "consumer defined"; SIDR: status "rejected"), so that the active
  // side stops retrying, as Linux ib_cm does when an id in REQ_RCVD goes;
  // so is a REP the consumer did not establish (REP_RCVD).
  if (d.state == CmState::kReqRcvd || d.state == CmState::kMraReqSent || d.state == CmState::kSidrReqRcvd ||
      d.state == CmState::kRepRcvd) {
    (void)cm::send_reject(a, d, {});
  }
  // A connection still up gets one DREQ (not retried: the id is gone), as
  // Linux ib_cm sends when a connected id is destroyed, so the peer sees
  // kDisconnected now rather than after its own DREQ's retries run out.
  if (d.state == CmState::kEstablished && d.ps != CmPortSpace::kUdp) (void)cm::send_disconnect(a, d);
  a.timers.cancel(d.index);
  if (d.own_qp && d.qp) {
    const Status st = destroy_qp(d.qp);
    if (!st.ok()) return st;
  }
  // Requests a listener took whose kConnectRequest the consumer has not
  // picked up yet have no owner once the listener goes: they are rejected
  // and destroyed with it (Linux ucma frees such pending ids with their
  // listener). Children already delivered stay the consumer's, orphaned.
  std::vector<CmId*> undelivered;
  for (const CmEvent& e : a.events) {
    if (e.listen_id == id && e.event == CmEventType::kConnectRequest && e.id && e.id != id) undelivered.push_back(e.id);
  }
  for (uint32_t i = 0; i < a.ids.capacity(); ++i) {
    if (CmIdImpl* c = a.ids.at(i); c && c->listener == &d) c->listener = nullptr;
  }
  std::erase_if(a.events, [&](const CmEvent& e) { return e.id == id || e.listen_id == id; });
  a.ids.remove(&d);
  for (CmId* c : undelivered) (void)cm_destroy_id(c);
  return {};
}

Status cm_bind_addr(CmId* id, const SockAddr& addr) {
  if (!id) return Status(StatusCode::kInvalidArgument, "null cm id");
  CmIdImpl& d = impl(id);
  if (d.state != CmState::kIdle) return Status(StatusCode::kInvalidArgument, "cm id already in use");
  const net::GidTable& gids = id->context->net->gids();
  SockAddr src = addr;
  if (is_loopback(addr.ip)) {
    const std::optional<uint8_t> own = first_gid_of_family(gids, addr.ip.is_ipv4_mapped());
    if (!own) return Status(StatusCode::kNotFound, "no address of the loopback's family on this device");
    src.ip = gids.at(*own)->gid;
  } else if (addr.ip != Gid{} && !gids.find(addr.ip, net::kNoVlan)) {
    return Status(StatusCode::kNotFound, "address is not one of this device's GIDs");
  }
  // Port 0: an ephemeral port now, as Linux rdma_bind_addr picks one, so
  // that the id can listen and rdma_get_src_port tells it (qperf -cm1's
  // server, libfabric's passive endpoints).
  if (src.port == 0) src.port = ephemeral_port(agent_of(id), d);
  d.src = src;
  d.bound = true;
  return {};
}

Status cm_listen(CmId* id, int backlog) {
  if (!id) return Status(StatusCode::kInvalidArgument, "null cm id");
  CmIdImpl& d = impl(id);
  Agent& a = agent_of(id);
  if (d.state != CmState::kIdle || !d.bound || d.src.port == 0) {
    return Status(StatusCode::kInvalidArgument, "listen needs an id bound to a port");
  }
  if (a.listener_for(cm::rdma_cm_service_id(cm::PortSpace(d.ps), d.src.port))) {
    return Status(StatusCode::kBusy, "port already has a listener");
  }
  d.backlog = backlog;
  d.state = CmState::kListen;
  replay_held_reqs(a);
  return {};
}

Status cm_resolve_addr(CmId* id, const SockAddr* src, const SockAddr& dst, int timeout_ms) {
  if (!id) return Status(StatusCode::kInvalidArgument, "null cm id");
  CmIdImpl& d = impl(id);
  Agent& a = agent_of(id);
  if (d.state != CmState::kIdle) return Status(StatusCode::kInvalidArgument, "cm id already in use");
  if (dst.port == 0) return Status(StatusCode::kInvalidArgument, "destination port 0");
  const net::GidTable& gids = id->context->net->gids();
  const SockAddr want = src ? *src : d.src;
  // A bound source address has a RoCEv1 and a RoCEv2 entry: rdma_cm takes
  // the port's default RoCE mode, RoCEv2 (Linux's default_roce_mode), where
  // the first entry would send RoCEv1 frames, which rxe drops (libfabric's
  // verbs client binds its address before it resolves the server's).
  std::optional<uint8_t> sgid = want.ip == Gid{} ? first_gid_of_family(gids, dst.ip.is_ipv4_mapped())
                                                 : gids.find(want.ip, net::kNoVlan, net::GidType::kRoceV2);
  if (!sgid && want.ip != Gid{}) sgid = gids.find(want.ip, net::kNoVlan);
  if (!sgid) return Status(StatusCode::kNotFound, "no local GID for that address family");
  d.sgid_index = *sgid;
  d.src.ip = gids.at(*sgid)->gid;
  if (want.port) d.src.port = want.port;
  if (!d.src.port) d.src.port = ephemeral_port(a, d);
  d.dst = dst;
  d.route = AhAttr{};
  d.route.dgid = dst.ip;
  d.route.sgid_index = *sgid;
  d.state = CmState::kAddrQuery;
  d.addr_deadline_ns = a.now_ns() + uint64_t(timeout_ms > 0 ? timeout_ms : 2000) * 1'000'000;
  a.timers.arm(d.index, a.now_ns());  // the next poll asks the neighbour table
  return {};
}

Status cm_resolve_route(CmId* id, int /*timeout_ms*/) {
  if (!id) return Status(StatusCode::kInvalidArgument, "null cm id");
  CmIdImpl& d = impl(id);
  if (d.state != CmState::kAddrResolved) return Status(StatusCode::kInvalidArgument, "address not resolved");
  d.state = CmState::kRouteResolved;  // RoCE: the path is the resolved address (no SA query)
  agent_of(id).push_event(d, CmEventType::kRouteResolved);
  return {};
}

namespace {

// Moves qp to INIT as librdmacm does for an id's QP (ucma_init_conn_qp), a
// UD QP on to RTS with rdma_cm's Q_Key (ucma_init_ud_qp), and gives it to id.
Status give_qp(CmIdImpl& d, Qp* qp, bool own) {
  if (d.qp) return Status(StatusCode::kInvalidArgument, "cm id already has a qp");
  if ((d.ps == CmPortSpace::kUdp) != (qp->qp_type == QpType::kUd)) {
    return Status(StatusCode::kInvalidArgument, "UDP port space takes UD qps, TCP/IB take RC/UC");
  }
  // A UD QP needs no peer, and SIDR only tells the other side where it is.
  const QpState last = qp->qp_type == QpType::kUd ? QpState::kRts : QpState::kInit;
  for (const QpState s : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
    if (s > last) break;
    QpAttr at;
    uint32_t mask = 0;
    Status st = cm::qp_attr_for(agent_of(&d), d, qp->qp_type, s, at, mask);
    if (st.ok()) st = modify_qp(qp, at, mask);
    if (!st.ok()) return st;
  }
  d.qp = qp;
  d.own_qp = own;
  return {};
}

}  // namespace

Status cm_create_qp(CmId* id, Pd* pd, QpInitAttr attr) {
  if (!id || !pd) return Status(StatusCode::kInvalidArgument, "null cm id or pd");
  if (id->qp) return Status(StatusCode::kInvalidArgument, "cm id already has a qp");
  auto qp = create_qp(pd, attr);
  if (!qp.ok()) return qp.status();
  Status st = give_qp(impl(id), *qp, true);
  if (!st.ok()) (void)destroy_qp(*qp);
  return st;
}

Status cm_attach_qp(CmId* id, Qp* qp) {
  if (!id || !qp || qp->state != QpState::kReset) return Status(StatusCode::kInvalidArgument, "null id, or qp not in RESET");
  return give_qp(impl(id), qp, false);
}

Status cm_detach_qp(CmId* id) {
  if (!id) return Status(StatusCode::kInvalidArgument, "null cm id");
  CmIdImpl& d = impl(id);
  if (d.own_qp) return Status(StatusCode::kInvalidArgument, "the id's qp is its own: cm_destroy_id frees it");
  d.qp = nullptr;
  return {};
}

Status cm_connect(CmId* id, const CmConnParam& param) {
  if (!id) return Status(StatusCode::kInvalidArgument, "null cm id");
  return cm::send_req(agent_of(id), impl(id), param);
}

Status cm_establish(CmId* id) {
  if (!id) return Status(StatusCode::kInvalidArgument, "null cm id");
  if (id->qp) return Status(StatusCode::kInvalidArgument, "the cm id's own qp is established by the cm");
  return cm::send_rtu(agent_of(id), impl(id));
}

Status cm_init_qp_attr(CmId* id, QpAttr& attr, uint32_t& attr_mask) {
  if (!id) return Status(StatusCode::kInvalidArgument, "null cm id");
  const CmIdImpl& d = impl(id);
  return cm::qp_attr_for(agent_of(id), d, cm::conn_qp_type(d), attr.qp_state, attr, attr_mask);
}

Status cm_accept(CmId* id, const CmConnParam& param) {
  if (!id) return Status(StatusCode::kInvalidArgument, "null cm id");
  return cm::send_rep(agent_of(id), impl(id), param);
}

Status cm_reject(CmId* id, const void* private_data, uint8_t private_data_len) {
  if (!id) return Status(StatusCode::kInvalidArgument, "null cm id");
  return cm::send_reject(agent_of(id), impl(id),
                         {static_cast<const uint8_t*>(private_data), private_data ? private_data_len : size_t(0)});
}

Status cm_disconnect(CmId* id) {
  if (!id) return Status(StatusCode::kInvalidArgument, "null cm id");
  return cm::send_disconnect(agent_of(id), impl(id));
}

int cm_get_event(Context* ctx, CmEvent* ev) {
  Agent* a = ctx ? cm::find_agent(*ctx) : nullptr;
  if (!a || a->events.empty()) return 0;
  *ev = a->events.front();
  a->events.pop_front();
  return 1;
}

CmCounters query_cm_counters(const Context* ctx) {
  const Agent* a = cm::find_agent(*ctx);
  return a ? a->counters : CmCounters{};
}

uint32_t cm_id_count(const Context* ctx) {
  const Agent* a = cm::find_agent(*ctx);
  if (!a) return 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i < a->ids.capacity(); ++i) n += a->ids.at(i) != nullptr;
  return n;
}

namespace cm {

void addr_query(Agent& a, CmIdImpl& id) {
  const net::Resolution r = a.ctx.net->resolve(id.dst.ip, id.sgid_index, a.now_ns());
  switch (r.status) {
    case net::ResolveStatus::kResolved:
      id.route.dmac = r.mac;
      id.state = CmState::kAddrResolved;
      return a.push_event(id, CmEventType::kAddrResolved);
    case net::ResolveStatus::kPending:
      if (a.now_ns() < id.addr_deadline_ns) return a.timers.arm(id.index, a.now_ns() + kAddrRetryNs);
      id.state = CmState::kIdle;
      return a.push_event(id, CmEventType::kAddrError, -ETIMEDOUT);
    case net::ResolveStatus::kFailed:
      id.state = CmState::kIdle;
      return a.push_event(id, CmEventType::kAddrError, -EHOSTUNREACH);
  }
}

}  // namespace cm

}  // namespace uroce
