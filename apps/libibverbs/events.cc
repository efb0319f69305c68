// Completion channels (IBA 11.4.2.2, verbs.h's ibv_comp_channel): an armed
// CQ's event, raised inside an engine step, queues the CQ on its channel
// (ReadyQueue, counted on the channel's eventfd), so the program can poll()
// the fd and then take the event with ibv_get_cq_event, as from a kernel
// device.
#include <unistd.h>

#include <cerrno>

#include "apps/libibverbs/abi.h"
#include "apps/libibverbs/provider.h"

namespace uroce::ibv {

namespace {

ChannelW& channel_of(ibv_comp_channel* c) { return *wrap_of<ChannelW>(c); }

// set_cq_event_handler's handler: inside an engine step, the lock held.
void on_cq_event(Cq*, void* arg) {
  auto* cq = static_cast<CqW*>(arg);
  ChannelW& ch = channel_of(cq->ibv.channel);
  ch.ready.push(ch.ibv.fd, cq);
}

}  // namespace

void attach_channel(CqW& cq, ibv_comp_channel* channel) {
  cq.ibv.channel = channel;
  if (!channel) return;
  ++channel->refcnt;
  set_cq_event_handler(cq.obj, on_cq_event, &cq);
}

void wait_events_acked(CqW& cq) {
  pthread_mutex_lock(&cq.ibv.mutex);
  while (cq.ibv.comp_events_completed != cq.events || cq.ibv.async_events_completed != cq.async_events) {
    pthread_cond_wait(&cq.ibv.cond, &cq.ibv.mutex);
  }
  pthread_mutex_unlock(&cq.ibv.mutex);
}

void detach_channel(CqW& cq) {
  if (!cq.ibv.channel) return;
  ChannelW& ch = channel_of(cq.ibv.channel);
  ch.ready.erase_if(ch.ibv.fd, [&cq](const CqW* c) { return c == &cq; });
  --cq.ibv.channel->refcnt;
}

}  // namespace uroce::ibv

using namespace uroce;
using namespace uroce::ibv;

extern "C" {

ibv_comp_channel* ibv_create_comp_channel(ibv_context* c) {
  if (!c) return fail<ibv_comp_channel>(EINVAL);
  const int fd = make_channel_fd();
  if (fd < 0) return nullptr;  // errno from eventfd
  auto* ch = new ChannelW{};
  ch->ibv.context = c;
  ch->ibv.fd = fd;
  ch->ibv.refcnt = 0;
  return &ch->ibv;
}

int ibv_destroy_comp_channel(ibv_comp_channel* c) {
  if (!c || !Provider::get()) return EINVAL;
  Guard g(Provider::get()->lock());
  if (c->refcnt) return EBUSY;  // CQs still deliver to it
  ChannelW* ch = &channel_of(c);
  ch->ready.close();
  retire([ch] {
    close(ch->ibv.fd);
    if (ch->ready.idle()) delete ch;  // else kept for the threads still waiting in it
  });
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* c, ibv_cq** cq, void** cq_context) {
  Provider* p = Provider::get();
  if (!c || !cq || !cq_context || !p) {
    errno = EINVAL;
    return -1;
  }
  CqW* w = nullptr;
  if (channel_of(c).ready.take(*p, c->fd, w, [](CqW* got) { ++got->events; })) return -1;
  *cq = &w->ibv;
  *cq_context = w->ibv.cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (!cq) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // extern "C"
