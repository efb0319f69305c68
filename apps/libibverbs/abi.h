// The objects libibverbs hands to programs, each wrapping the uroce object it
// stands for. The program sees the rdma-core 44 structs at the front of each
// (verbs.h); the uroce pointer follows. Layouts that rdma-core's providers
// reach into (verbs_device, verbs_qp) are kept as its driver.h has them.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>

#include <infiniband/verbs.h>

#include <uroce/verbs.h>

#include "apps/libibverbs/ready_queue.h"

namespace uroce::ibv {

/// struct verbs_device: the device, then the provider's ops. libmlx5 and
/// libefa compare ops with their own (mlx5dv_is_supported), so it must be
/// there and be ours.
struct Device {
  ibv_device dev;
  const void* ops;
};

/// An asynchronous event waiting on a context's async_fd: its type and the
/// wrapper it is about (CqW, QpW or SrqW; none for a port event).
struct AsyncItem {
  ibv_event_type type;
  void* obj;
};

struct ContextW {
  verbs_context vctx;  // ends with the ibv_context the program holds
  ReadyQueue<AsyncItem> async;  // its asynchronous events (async.cc)
};

struct PdW {
  ibv_pd ibv;
  Pd* obj;
};

struct MrW {
  ibv_mr ibv;
  Mr* obj;
};

/// struct verbs_cq: one wrapper for the CQs of ibv_create_cq and of
/// ibv_create_cq_ex. An ibv_cq_ex starts with the fields of an ibv_cq
/// (ibv_cq_ex_to_cq is a cast), so every verb that takes an ibv_cq takes both.
struct CqW {
  union {
    ibv_cq ibv;    // what ibv_create_cq and ibv_cq_ex_to_cq hand out
    ibv_cq_ex ex;  // ibv_create_cq_ex's: the same fields, then the iterator (extended.cc)
  };
  Cq* obj;
  uint32_t events = 0;        // completion events handed out by ibv_get_cq_event
  uint32_t async_events = 0;  // asynchronous events about it handed out (async.cc)
  ibv_wc polled;        // the completion an ibv_cq_ex iterator is at (start_poll, next_poll)
};
#define UROCE_SAME_CQ_FIELD(f) static_assert(offsetof(ibv_cq, f) == offsetof(ibv_cq_ex, f));
UROCE_SAME_CQ_FIELD(context)
UROCE_SAME_CQ_FIELD(channel)
UROCE_SAME_CQ_FIELD(cq_context)
UROCE_SAME_CQ_FIELD(handle)
UROCE_SAME_CQ_FIELD(cqe)
UROCE_SAME_CQ_FIELD(mutex)
UROCE_SAME_CQ_FIELD(cond)
UROCE_SAME_CQ_FIELD(comp_events_completed)
UROCE_SAME_CQ_FIELD(async_events_completed)
#undef UROCE_SAME_CQ_FIELD

/// A completion channel: CQs whose events are ready, in the order they came,
/// and an eventfd (ibv_comp_channel::fd) that counts them.
struct ChannelW {
  ibv_comp_channel ibv;
  ReadyQueue<CqW*> ready;
};

struct SrqW {
  ibv_srq ibv;
  Srq* obj;
  uint32_t events = 0;  // asynchronous events about it handed out (async.cc)
};

/// The ibv_wr_* WRs an extended QP builds between wr_start and wr_complete
/// (extended.cc).
struct WrBatch;
struct WrBatchDeleter {
  void operator()(WrBatch* b) const;
};

/// verbs_qp's comp_mask bit (driver.h's VERBS_QP_EX): qpx has the ibv_wr_* API.
inline constexpr uint32_t kVerbsQpEx = 1u << 1;

/// struct verbs_qp: the QP (or extended QP), comp_mask, xrcd.
struct QpW {
  ibv_qp_ex qpx;
  uint32_t comp_mask;
  void* xrcd;
  Qp* obj;
  std::unique_ptr<WrBatch, WrBatchDeleter> batch;  // with kVerbsQpEx only
  uint32_t events = 0;  // asynchronous events about it handed out (async.cc)
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

/// A uroce address vector as verbs.h's (the GRH always: RoCE addresses by GID).
void ibv_ah_of(const AhAttr& a, ibv_ah_attr& out);
/// uroce QP attributes as verbs.h's (every field written).
void ibv_qp_attr_of(const QpAttr& q, ibv_qp_attr& out);

/// Asynchronous events (async.cc): the device's go to the async_fd of their
/// object's context from now on (the lock held).
void start_async_events(Provider& p);
/// Once a QP or SRQ is destroyed, before its wrapper is freed: waits until
/// every asynchronous event about it that the program got was acked (the
/// lock not held).
void wait_events_acked(QpW& qp);
void wait_events_acked(SrqW& srq);
/// Once obj is destroyed: drops the events about it nobody got (the lock held).
void drop_async_events(ibv_context* c, const void* obj);
/// Fills the extended verbs of a new context: create_cq_ex, create_qp_ex (extended.cc).
void install_extended_ops(verbs_context& v);

/// A new CQ, its channel attached (the device lock taken inside); nullptr
/// with errno set on failure. ibv_create_cq and ibv_create_cq_ex share it.
CqW* new_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector);
/// A uroce completion as rdma-core's ibv_wc (ibv_poll_cq and the ibv_cq_ex iterator).
ibv_wc ibv_wc_of(const Wc& w);

/// Completion events of cq go to channel from now on (the device lock held).
void attach_channel(CqW& cq, ibv_comp_channel* channel);
/// Once cq is destroyed, before its wrapper is freed: waits until the
/// program has acked every event about it that it got (ibv_get_cq_event,
/// ibv_get_async_event; the device lock not held), as rdma-core does.
void wait_events_acked(CqW& cq);
/// Once cq is destroyed: drops the events nobody got yet (the lock held).
void detach_channel(CqW& cq);
}  // namespace uroce::ibv
