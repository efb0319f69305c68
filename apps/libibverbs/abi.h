// The objects libibverbs hands to programs, each wrapping the uroce object it
// stands for. The program sees the rdma-core 44 structs at the front of each
// (verbs.h); the uroce pointer follows. Layouts that rdma-core's providers
// reach into (verbs_device, verbs_qp) are kept as its driver.h has them.
#pragma once

#include <deque>

#include <infiniband/verbs.h>

#include <uroce/verbs.h>

namespace uroce::ibv {

/// struct verbs_device: the device, then the provider's ops. libmlx5 and
/// libefa compare ops with their own (mlx5dv_is_supported), so it must be
/// there and be ours.
struct Device {
  ibv_device dev;
  const void* ops;
};

struct ContextW {
  verbs_context vctx;  // ends with the ibv_context the program holds
};

struct PdW {
  ibv_pd ibv;
  Pd* obj;
};

struct MrW {
  ibv_mr ibv;
  Mr* obj;
};

struct CqW {
  ibv_cq ibv;
  Cq* obj;
  uint32_t events = 0;  // completion events handed out by ibv_get_cq_event
};

/// A completion channel: CQs whose events are ready, in the order they came,
/// and an eventfd (ibv_comp_channel::fd) that counts them.
struct ChannelW {
  ibv_comp_channel ibv;
  std::deque<CqW*> ready;
};

struct SrqW {
  ibv_srq ibv;
  Srq* obj;
};

/// struct verbs_qp: the QP (or extended QP), comp_mask, xrcd.
struct QpW {
  ibv_qp_ex qpx;
  uint32_t comp_mask;
  void* xrcd;
  Qp* obj;
};

struct AhW {
  ibv_ah ibv;
  Ah* obj;
};

template <class W, class T>
W* wrap_of(T* p) {
  return reinterpret_cast<W*>(p);
}

/// The uroce::Context behind an ibv_context.
uroce::Context* device_of(ibv_context* c);

/// Sets errno to e and returns nullptr (the pointer-returning verbs' failure).
template <class T = void>
T* fail(int e) {
  errno = e;
  return nullptr;
}

}  // namespace uroce::ibv

namespace uroce::ibv {
/// Fills the data-path operations (poll_cq, post_send, ...) of a new context.
void install_ops(verbs_context& v);

/// Completion events of cq go to channel from now on (the device lock held).
void attach_channel(CqW& cq, ibv_comp_channel* channel);
/// Before cq is destroyed: waits until the program has acked every event it
/// got from ibv_get_cq_event (the device lock not held), as rdma-core does.
void wait_events_acked(CqW& cq);
/// Once cq is destroyed: drops the events nobody got yet (the lock held).
void detach_channel(CqW& cq);
}  // namespace uroce::ibv
