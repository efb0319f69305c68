// Asynchronous events (IBA 11.6.3; libibverbs' ibv_get_async_event(3)): the
// device's events, raised inside an engine step or a modify_qp, queue on the
// async_fd of the context that made their object (ReadyQueue, counted on
// that eventfd), so the program can poll() the fd and take them in order
// with ibv_get_async_event, as from a kernel device. Each event names the
// program's wrapper (element.cq, .qp, .srq); ibv_ack_async_event counts it
// on the object, and ibv_destroy_* waits until every event got was acked.
// Events not yet got go with their object.
#include <pthread.h>

#include <cerrno>

#include "apps/libibverbs/abi.h"
#include "apps/libibverbs/provider.h"

namespace uroce::ibv {

namespace {

// AsyncEventType's values are libibverbs' (verbs.h).
static_assert(int(AsyncEventType::kCqErr) == IBV_EVENT_CQ_ERR);
static_assert(int(AsyncEventType::kQpFatal) == IBV_EVENT_QP_FATAL);
static_assert(int(AsyncEventType::kQpReqErr) == IBV_EVENT_QP_REQ_ERR);
static_assert(int(AsyncEventType::kQpAccessErr) == IBV_EVENT_QP_ACCESS_ERR);
static_assert(int(AsyncEventType::kCommEst) == IBV_EVENT_COMM_EST);
static_assert(int(AsyncEventType::kSrqLimitReached) == IBV_EVENT_SRQ_LIMIT_REACHED);
static_assert(int(AsyncEventType::kQpLastWqeReached) == IBV_EVENT_QP_LAST_WQE_REACHED);

ContextW& context_of(ibv_context* c) { return *reinterpret_cast<ContextW*>(verbs_get_ctx(c)); }

void queue(ibv_context* c, ibv_event_type type, void* obj) {
  context_of(c).async.push(c->async_fd, AsyncItem{type, obj});
}

// set_async_event_handler's handler: inside an engine step or a verb, the
// lock held. Objects that libibverbs did not make (none have a wrapper)
// are skipped.
void on_async_event(const AsyncEvent& e, void*) {
  const auto type = ibv_event_type(e.type);
  if (e.cq) {
    if (auto* w = static_cast<CqW*>(e.cq->cq_context)) queue(w->ibv.context, type, w);
  } else if (e.qp) {
    if (auto* w = static_cast<QpW*>(e.qp->qp_context)) queue(w->qpx.qp_base.context, type, w);
  } else if (e.srq) {
    if (auto* w = static_cast<SrqW*>(e.srq->srq_context)) queue(w->ibv.context, type, w);
  }
}

enum class Element { kCq, kQp, kSrq, kPort };

Element element_of(ibv_event_type t) {
  switch (int(t)) {  // on int: the port events are many, and -Wswitch-enum wants each enumerator
    case IBV_EVENT_CQ_ERR:
      return Element::kCq;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      return Element::kQp;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      return Element::kSrq;
    default:
      return Element::kPort;
  }
}

// One more event handed out for the object of it (the lock held, in take).
void count_got(const AsyncItem& it) {
  switch (element_of(it.type)) {
    case Element::kCq: ++static_cast<CqW*>(it.obj)->async_events; break;
    case Element::kQp: ++static_cast<QpW*>(it.obj)->events; break;
    case Element::kSrq: ++static_cast<SrqW*>(it.obj)->events; break;
    case Element::kPort: break;
  }
}

template <class Obj>
void wait_acked(Obj& o, uint32_t got) {
  pthread_mutex_lock(&o.mutex);
  while (o.events_completed != got) pthread_cond_wait(&o.cond, &o.mutex);
  pthread_mutex_unlock(&o.mutex);
}

template <class Obj, class Field>
void ack(Obj* o, Field Obj::*completed) {
  pthread_mutex_lock(&o->mutex);
  ++(o->*completed);
  pthread_cond_signal(&o->cond);
  pthread_mutex_unlock(&o->mutex);
}

}  // namespace

void start_async_events(Provider& p) { set_async_event_handler(p.ctx(), on_async_event, nullptr); }

void wait_events_acked(QpW& qp) { wait_acked(qp.qpx.qp_base, qp.events); }
void wait_events_acked(SrqW& srq) { wait_acked(srq.ibv, srq.events); }

void drop_async_events(ibv_context* c, const void* obj) {
  context_of(c).async.erase_if(c->async_fd, [obj](const AsyncItem& it) { return it.obj == obj; });
}

}  // namespace uroce::ibv

using namespace uroce;
using namespace uroce::ibv;

extern "C" {

int ibv_get_async_event(ibv_context* c, ibv_async_event* event) {
  Provider* p = Provider::get();
  if (!c || !event || !p) {
    errno = EINVAL;
    return -1;
  }
  AsyncItem it{};
  if (context_of(c).async.take(*p, c->async_fd, it, count_got)) return -1;  // EAGAIN, EINTR
  event->event_type = it.type;
  switch (element_of(it.type)) {
    case Element::kCq: event->element.cq = &static_cast<CqW*>(it.obj)->ibv; break;
    case Element::kQp: event->element.qp = &static_cast<QpW*>(it.obj)->qpx.qp_base; break;
    case Element::kSrq: event->element.srq = &static_cast<SrqW*>(it.obj)->ibv; break;
    case Element::kPort: event->element.port_num = 1; break;
  }
  return 0;
}

void ibv_ack_async_event(ibv_async_event* event) {
  if (!event) return;
  switch (element_of(event->event_type)) {
    case Element::kCq: ack(event->element.cq, &ibv_cq::async_events_completed); break;
    case Element::kQp: ack(event->element.qp, &ibv_qp::events_completed); break;
    case Element::kSrq: ack(event->element.srq, &ibv_srq::events_completed); break;
    case Element::kPort: break;
  }
}

}  // extern "C"
