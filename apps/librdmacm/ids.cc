// Event channels, ids and the connection calls of librdmacm (rdma_cma.h),
// each a translation to uroce's CM (include/uroce/cm.h) under the device
// lock; the CM's events reach the channels through pump().
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "apps/libibverbs/abi.h"
#include "apps/libibverbs/provider.h"
#include "apps/librdmacm/cma.h"

namespace uroce::rdmacm {

using ibv::Guard;
using ibv::Provider;

namespace {

ChannelW* make_channel() {
  const int fd = ibv::make_channel_fd();
  if (fd < 0) return nullptr;
  auto* ch = new ChannelW{};
  ch->ch.fd = fd;
  return ch;
}

void post(ChannelW& ch, EventW* e) { ch.ready.push(ch.ch.fd, e); }

// Frees ch's events and retires it (the lock held): its fd and memory go
// once nobody can be on the way into it (ibv::retire).
void destroy_channel(ChannelW* ch) {
  for (EventW* e : ch->ready.items()) delete e;
  ch->ready.items().clear();
  ch->ready.close();
  ibv::retire([ch] {
    close(ch->ch.fd);
    if (ch->ready.idle()) delete ch;  // else kept for the threads still waiting in it
  });
}

// A synchronous id's own channel goes with it.
void drop_own_channel(IdW& w) {
  if (w.own_channel) destroy_channel(w.own_channel.release());
}

// The addresses and path of a uroce id, as rdma_cm_id shows them.
void show_route(IdW& w) {
  to_sockaddr(w.obj->src, w.id.route.addr.src_storage);
  if (w.obj->dst.ip != Gid{}) to_sockaddr(w.obj->dst, w.id.route.addr.dst_storage);
  std::memcpy(w.id.route.addr.addr.ibaddr.sgid.raw, w.obj->src.ip.raw, 16);
  std::memcpy(w.id.route.addr.addr.ibaddr.dgid.raw, w.obj->route.dgid.raw, 16);
  w.id.route.addr.addr.ibaddr.pkey = htobe16(0xffff);
  if (w.id.qp && w.obj->qp) w.id.qp->state = ibv_qp_state(w.obj->qp->state);
}

// What a route record says on RoCE: the two GIDs, the default P_Key, one path.
void show_path(IdW& w) {
  ibv_sa_path_rec& p = w.path;
  p = ibv_sa_path_rec{};
  std::memcpy(p.sgid.raw, w.obj->src.ip.raw, 16);
  std::memcpy(p.dgid.raw, w.obj->route.dgid.raw, 16);
  p.hop_limit = w.obj->route.hop_limit;
  p.traffic_class = w.obj->route.traffic_class;
  p.pkey = htobe16(0xffff);
  p.reversible = 1;
  p.numb_path = 1;
  w.id.route.path_rec = &p;
  w.id.route.num_paths = 1;
}

// One CM event to the channel of its id; a connect request first gets the
// new id that stands for it (synchronous if its listener is).
void deliver(const CmEvent& raw) {
  IdW* target = static_cast<IdW*>(raw.id->user_context);
  IdW* const counted_on = target;
  ChannelW* ch = &wrap(target->id.channel);
  if (raw.event == CmEventType::kConnectRequest) {
    IdW& l = *target;
    target = new_id(raw.id, l.own_channel ? nullptr : l.id.channel, l.id.context, l.id.ps);
    if (!target) {
      (void)cm_destroy_id(raw.id);  // no memory: the REQ is rejected, as by a full backlog
      return;
    }
    show_path(*target);
  }
  show_route(*target);
  if (raw.event == CmEventType::kRouteResolved) show_path(*target);

  auto* e = new EventW{};
  e->raw = raw;
  e->counted_on = counted_on;
  rdma_cm_event& ev = e->ev;
  ev.id = &target->id;
  ev.listen_id = raw.listen_id ? &static_cast<IdW*>(raw.listen_id->user_context)->id : nullptr;
  ev.event = rdma_cm_event_type(raw.event);
  ev.status = raw.status;
  const void* pd = e->raw.private_data_len ? e->raw.private_data : nullptr;
  if (target->id.ps == RDMA_PS_UDP) {
    ev.param.ud.private_data = pd;
    ev.param.ud.private_data_len = e->raw.private_data_len;
    ibv::ibv_ah_of(raw.ud_ah, ev.param.ud.ah_attr);
    ev.param.ud.qp_num = raw.ud_qp_num;
    ev.param.ud.qkey = raw.ud_qkey;
  } else {
    ev.param.conn.private_data = pd;
    ev.param.conn.private_data_len = e->raw.private_data_len;
    ev.param.conn.responder_resources = raw.responder_resources;
    ev.param.conn.initiator_depth = raw.initiator_depth;
  }
  post(*ch, e);
}

// After each engine step (the lock held): the CM's new events to their channels.
void pump(void*) {
  CmEvent raw;
  while (cm_get_event(Provider::get()->ctx(), &raw) == 1) deliver(raw);
}

CmConnParam conn_param_of(const rdma_conn_param* p) {
  CmConnParam c;
  if (!p) return c;
  c.private_data = p->private_data;
  c.private_data_len = p->private_data_len;
  c.responder_resources = p->responder_resources;
  c.initiator_depth = p->initiator_depth;
  c.retry_count = p->retry_count;
  c.rnr_retry_count = p->rnr_retry_count;
  c.qp_num = p->qp_num;
  c.srq = p->srq != 0;
  return c;
}

bool is_sync(const IdW& w) { return w.own_channel != nullptr; }

// A synchronous id's last event, kept in id.event, acked.
void ack_kept(IdW& w) {
  if (!w.id.event) return;
  (void)rdma_ack_cm_event(w.id.event);
  w.id.event = nullptr;
}

// Waits until the program has acked `got` events of w (got read under the
// device lock once no more can be got).
void wait_acked(IdW& w, uint32_t got) {
  std::unique_lock l(w.ack_mutex);
  w.acked.wait(l, [&] { return w.events_acked == got; });
}

}  // namespace

ibv_context* device() {
  static ibv_context* const ctx = [] () -> ibv_context* {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ibv_context* c = list && n > 0 ? ibv_open_device(list[0]) : nullptr;
    if (list) ibv_free_device_list(list);
    if (c) {
      Guard g(Provider::get()->lock());
      Provider::get()->set_after_step(pump, nullptr);
    }
    return c;
  }();
  return ctx;
}

ibv_pd* default_pd() {
  static ibv_pd* const pd = device() ? ibv_alloc_pd(device()) : nullptr;
  return pd;
}

int fail(int e) {
  errno = e;
  return -1;
}

int result(const Status& s) { return s.ok() ? 0 : fail(ibv::errno_of(s)); }

bool to_sock(const sockaddr* sa, SockAddr& out) {
  if (!sa) return false;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    out.ip = Gid::from_ipv4(reinterpret_cast<const uint8_t*>(&in->sin_addr));
    if (in->sin_addr.s_addr == INADDR_ANY) out.ip = Gid{};
    out.port = be16toh(in->sin_port);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    std::memcpy(out.ip.raw, &in6->sin6_addr, 16);
    out.port = be16toh(in6->sin6_port);
    return true;
  }
  return false;
}

void to_sockaddr(const SockAddr& a, sockaddr_storage& out) {
  std::memset(&out, 0, sizeof out);
  if (a.ip.is_ipv4_mapped() || a.ip == Gid{}) {
    auto& in = reinterpret_cast<sockaddr_in&>(out);
    in.sin_family = AF_INET;
    in.sin_port = htobe16(a.port);
    std::memcpy(&in.sin_addr, a.ip.raw + 12, 4);
    return;
  }
  auto& in6 = reinterpret_cast<sockaddr_in6&>(out);
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htobe16(a.port);
  std::memcpy(&in6.sin6_addr, a.ip.raw, 16);
}

IdW* new_id(CmId* obj, rdma_event_channel* channel, void* context, rdma_port_space ps) {
  auto* w = new IdW{};
  if (!channel) {
    w->own_channel.reset(make_channel());
    if (!w->own_channel) {
      delete w;
      return nullptr;
    }
    channel = &w->own_channel->ch;
  }
  w->obj = obj;
  obj->user_context = w;
  w->id.verbs = device();
  w->id.channel = channel;
  w->id.context = context;
  w->id.ps = ps;
  w->id.port_num = 1;
  w->id.qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  return w;
}

int wait_sync(IdW& w, rdma_cm_event_type want) {
  ack_kept(w);
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(w.id.channel, &e)) return -1;
  w.id.event = e;
  if (e->status) return fail(e->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED : std::abs(e->status));
  if (e->event != want) return fail(e->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED : EPROTO);
  return 0;
}

}  // namespace uroce::rdmacm

using namespace uroce;
using namespace uroce::rdmacm;

extern "C" {

// ---------------------------------------------------------------- event channels

rdma_event_channel* rdma_create_event_channel(void) {
  if (!device()) {
    errno = ENODEV;
    return nullptr;
  }
  ChannelW* ch = make_channel();
  return ch ? &ch->ch : nullptr;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (!channel) return;
  Guard g(Provider::get()->lock());
  destroy_channel(&wrap(channel));
}

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (!channel || !event) return fail(EINVAL);
  EventW* e = nullptr;
  if (wrap(channel).ready.take(*Provider::get(), channel->fd, e, [](EventW* t) { ++t->counted_on->events_got; })) {
    return -1;
  }
  *event = &e->ev;
  return 0;
}

int rdma_ack_cm_event(rdma_cm_event* event) {
  if (!event) return fail(EINVAL);
  auto* e = reinterpret_cast<EventW*>(event);
  IdW& on = *e->counted_on;
  delete e;
  std::lock_guard l(on.ack_mutex);  // notified under the mutex: a waiter may free `on` once it is released
  ++on.events_acked;
  on.acked.notify_all();
  return 0;
}

const char* rdma_event_str(rdma_cm_event_type event) {
  return event > RDMA_CM_EVENT_TIMEWAIT_EXIT ? "UNKNOWN EVENT" : cm_event_str(CmEventType(event));
}

int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  if (!id) return fail(EINVAL);
  IdW& w = wrap(id);
  std::unique_ptr<ChannelW> own(channel ? nullptr : make_channel());
  if (!channel && !own) return -1;
  if (is_sync(w)) ack_kept(w);
  uint32_t got;
  {
    Guard g(Provider::get()->lock());
    ChannelW& from = wrap(id->channel);
    ChannelW& to = own ? *own : wrap(channel);
    // Events of this id not taken yet follow it (a listener's connect requests too).
    from.ready.erase_if(id->channel->fd, [&](EventW* e) {
      if (e->counted_on != &w) return false;
      post(to, e);
      return true;
    });
    id->channel = &to.ch;
    drop_own_channel(w);
    w.own_channel = std::move(own);
    got = w.events_got;
  }
  // None got on the old channel is still being handled when this returns.
  wait_acked(w, got);
  return 0;
}

// ---------------------------------------------------------------- ids

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps) {
  if (!id) return fail(EINVAL);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB) return fail(EPROTONOSUPPORT);  // IPoIB: no IB here
  if (!device()) return fail(ENODEV);
  Guard g(Provider::get()->lock());
  auto obj = cm_create_id(Provider::get()->ctx(), nullptr, CmPortSpace(ps));
  if (!obj.ok()) return result(obj.status());
  IdW* w = new_id(*obj, channel, context, ps);
  if (!w) {
    (void)cm_destroy_id(*obj);
    return fail(ENOMEM);
  }
  *id = &w->id;
  return 0;
}

int rdma_destroy_id(rdma_cm_id* id) {
  if (!id) return fail(EINVAL);
  IdW* w = &wrap(id);
  std::vector<IdW*> requests;  // connect requests to this listener nobody took
  uint32_t got;
  {
    Guard g(Provider::get()->lock());
    if (Status s = cm_destroy_id(w->obj); !s.ok()) return result(s);
    // Its events nobody took go, and with them the requests it listened to;
    // the count of those got is then final.
    wrap(id->channel).ready.erase_if(id->channel->fd, [&](EventW* e) {
      if (e->counted_on != w) return false;
      if (e->ev.id != id) requests.push_back(&wrap(e->ev.id));
      delete e;
      return true;
    });
    drop_own_channel(*w);
    got = w->events_got;
  }
  for (IdW* r : requests) (void)rdma_destroy_id(&r->id);  // each REJected, as by Linux ucma
  ack_kept(*w);
  wait_acked(*w, got);  // as librdmacm: an event got stays readable until it is acked
  // The CQs rdma_create_qp made are the ones with a channel of its making.
  for (auto [cq, ch] : {std::pair{id->send_cq, id->send_cq_channel}, std::pair{id->recv_cq, id->recv_cq_channel}}) {
    if (!ch) continue;
    if (cq) (void)ibv_destroy_cq(cq);
    (void)ibv_destroy_comp_channel(ch);
  }
  delete w;
  return 0;
}

int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  SockAddr a;
  if (!id) return fail(EINVAL);
  if (!to_sock(addr, a)) return fail(EAFNOSUPPORT);
  IdW& w = wrap(id);
  Guard g(Provider::get()->lock());
  Status s = cm_bind_addr(w.obj, a);
  if (s.code() == StatusCode::kNotFound) return fail(EADDRNOTAVAIL);  // not one of the device's addresses
  if (s.ok()) show_route(w);
  return result(s);
}

int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
  SockAddr src, dst;
  if (!id) return fail(EINVAL);
  if (!to_sock(dst_addr, dst) || (src_addr && !to_sock(src_addr, src))) return fail(EAFNOSUPPORT);
  IdW& w = wrap(id);
  {
    Guard g(Provider::get()->lock());
    Status s = cm_resolve_addr(w.obj, src_addr ? &src : nullptr, dst, timeout_ms);
    if (s.code() == StatusCode::kNotFound) return fail(EADDRNOTAVAIL);
    if (!s.ok()) return result(s);
    show_route(w);
  }
  return is_sync(w) ? wait_sync(w, RDMA_CM_EVENT_ADDR_RESOLVED) : 0;
}

int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  if (!id) return fail(EINVAL);
  IdW& w = wrap(id);
  {
    Guard g(Provider::get()->lock());
    if (Status s = cm_resolve_route(w.obj, timeout_ms); !s.ok()) return result(s);
  }
  return is_sync(w) ? wait_sync(w, RDMA_CM_EVENT_ROUTE_RESOLVED) : 0;
}

int rdma_listen(rdma_cm_id* id, int backlog) {
  if (!id) return fail(EINVAL);
  Guard g(Provider::get()->lock());
  Status s = cm_listen(wrap(id).obj, backlog);
  if (s.code() == StatusCode::kBusy) return fail(EADDRINUSE);  // another id listens on the port
  return result(s);
}

int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (!id) return fail(EINVAL);
  IdW& w = wrap(id);
  {
    Guard g(Provider::get()->lock());
    if (Status s = cm_connect(w.obj, conn_param_of(conn_param)); !s.ok()) return result(s);
  }
  // A connected id without a QP of its own ends at the REP: the program
  // moves its QP, then rdma_establish.
  const bool own_qp = id->qp || id->ps == RDMA_PS_UDP;
  return is_sync(w) ? wait_sync(w, own_qp ? RDMA_CM_EVENT_ESTABLISHED : RDMA_CM_EVENT_CONNECT_RESPONSE) : 0;
}

int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (!id) return fail(EINVAL);
  IdW& w = wrap(id);
  {
    Guard g(Provider::get()->lock());
    if (Status s = cm_accept(w.obj, conn_param_of(conn_param)); !s.ok()) return result(s);
  }
  if (!is_sync(w)) return 0;
  if (id->ps == RDMA_PS_UDP) {  // the SIDR REP: nothing follows it
    ack_kept(w);
    return 0;
  }
  return wait_sync(w, RDMA_CM_EVENT_ESTABLISHED);
}

int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  if (!id) return fail(EINVAL);
  Guard g(Provider::get()->lock());
  return result(cm_reject(wrap(id).obj, private_data, private_data_len));
}

int rdma_disconnect(rdma_cm_id* id) {
  if (!id) return fail(EINVAL);
  Guard g(Provider::get()->lock());
  Status s = cm_disconnect(wrap(id).obj);
  show_route(wrap(id));  // the QP is in ERR now
  return result(s);
}

uint16_t rdma_get_src_port(rdma_cm_id* id) {
  return id ? id->route.addr.src_sin.sin_port : 0;  // network order; sin6_port sits at the same offset
}

uint16_t rdma_get_dst_port(rdma_cm_id* id) { return id ? id->route.addr.dst_sin.sin_port : 0; }

}  // extern "C"
