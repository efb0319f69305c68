// Completion channels (IBA 11.4.2.2, verbs.h's ibv_comp_channel): an armed
// CQ's event, raised inside an engine step, queues the CQ on its channel and
// counts one on the channel's eventfd, so the program can poll() the fd and
// then take the event with ibv_get_cq_event, as from a kernel device.
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
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
  ch.ready.push_back(cq);
  const uint64_t one = 1;
  if (write(ch.ibv.fd, &one, sizeof one) != sizeof one) std::abort();  // an eventfd counts to 2^64-2
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
  while (cq.ibv.comp_events_completed != cq.events) pthread_cond_wait(&cq.ibv.cond, &cq.ibv.mutex);
  pthread_mutex_unlock(&cq.ibv.mutex);
}

void detach_channel(CqW& cq) {
  if (!cq.ibv.channel) return;
  std::deque<CqW*>& ready = channel_of(cq.ibv.channel).ready;
  ready.erase(std::remove(ready.begin(), ready.end(), &cq), ready.end());
  --cq.ibv.channel->refcnt;
}

}  // namespace uroce::ibv

using namespace uroce;
using namespace uroce::ibv;

extern "C" {

ibv_comp_channel* ibv_create_comp_channel(ibv_context* c) {
  if (!c) return fail<ibv_comp_channel>(EINVAL);
  // Blocking, as a kernel channel's fd; a program may set O_NONBLOCK on it.
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return nullptr;  // errno from eventfd
  auto* ch = new ChannelW{};
  ch->ibv.context = c;
  ch->ibv.fd = fd;
  ch->ibv.refcnt = 0;
  return &ch->ibv;
}

int ibv_destroy_comp_channel(ibv_comp_channel* c) {
  if (!c || !Provider::get()) return EINVAL;
  {
    Guard g(Provider::get()->lock());
    if (c->refcnt) return EBUSY;  // CQs still deliver to it
  }
  close(c->fd);
  delete &channel_of(c);
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* c, ibv_cq** cq, void** cq_context) {
  Provider* p = Provider::get();
  if (!c || !cq || !cq_context || !p) {
    errno = EINVAL;
    return -1;
  }
  ChannelW& ch = channel_of(c);
  for (;;) {
    uint64_t one;
    ssize_t n;
    {
      Provider::Waiting w(*p);
      n = read(c->fd, &one, sizeof one);  // one event (EFD_SEMAPHORE)
    }
    if (n != sizeof one) return -1;  // errno from read: EAGAIN (O_NONBLOCK), EINTR
    Guard g(p->lock());
    if (ch.ready.empty()) continue;  // its CQ was destroyed before the event was taken
    CqW* w = ch.ready.front();
    ch.ready.pop_front();
    ++w->events;
    *cq = &w->ibv;
    *cq_context = w->ibv.cq_context;
    return 0;
  }
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (!cq) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // extern "C"
