// The object verbs (PD, MR, CQ, SRQ, QP, AH) and the data path the inline
// calls of verbs.h reach through the context's ops (post_send, post_recv,
// post_srq_recv, poll_cq). Each translates the rdma-core struct to uroce's,
// calls the uroce verb under the device lock and gives back its errno.
#include <endian.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "apps/libibverbs/abi.h"
#include "apps/libibverbs/provider.h"
#include "stack/device/context.h"
#include "stack/wire/headers.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace uroce::ibv {

namespace {

// The layouts verbs.h and uroce share: the S/G list goes through as it is.
static_assert(sizeof(ibv_sge) == sizeof(Sge) && offsetof(ibv_sge, lkey) == offsetof(Sge, lkey));

constexpr uint32_t kAccessBits =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
constexpr uint32_t kQpMaskKnown = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
                                  IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT |
                                  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_RQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC |
                                  IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_CAP |
                                  IBV_QP_DEST_QPN;
constexpr uint32_t kResolveTimeoutMs = 3000;  // ARP/ND for a path, as the kernel's rdma_resolve_ip waits

Provider& dev() { return *Provider::get(); }

QpCap qp_cap(const ibv_qp_cap& c) {
  return QpCap{c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge, c.max_inline_data};
}
ibv_qp_cap ibv_cap(const QpCap& c) {
  return ibv_qp_cap{c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge, c.max_inline_data};
}

/// An address vector: RoCE needs the GRH (the GID is the address); the
/// destination MAC comes from ARP/ND, as the kernel resolves it.
int ah_attr(const ibv_ah_attr& in, AhAttr& out) {
  if (!(in.is_global) || in.port_num > 1) return EINVAL;
  out.port_num = 1;
  std::memcpy(out.dgid.raw, in.grh.dgid.raw, 16);
  out.sgid_index = in.grh.sgid_index;
  out.hop_limit = in.grh.hop_limit;
  out.traffic_class = in.grh.traffic_class;
  // The flow label is 20 bits (IBA 8.3.1); as the kernel and ConnectX take
  // the low 20 of the u32, so do we: UCX passes ~0 for path 0
  // (uct_ib_iface_fill_ah_attr_from_gid_lid), which the stack would refuse.
  out.flow_label = in.grh.flow_label & wire::kFlowLabelMask;
  out.sl = in.sl;
  if (!dev().resolve(out.dgid, out.sgid_index, out.dmac, kResolveTimeoutMs)) return EHOSTUNREACH;
  return 0;
}


// ---------------------------------------------------------------- data path

int post_send_op(ibv_qp* ibq, ibv_send_wr* wr, ibv_send_wr** bad) {
  Qp* qp = wrap_of<QpW>(ibq)->obj;
  Provider& p = dev();
  Guard g(p.lock());
  int err = 0;
  for (; wr; wr = wr->next) {
    SendWr w;
    w.wr_id = wr->wr_id;
    w.sg_list = reinterpret_cast<Sge*>(wr->sg_list);
    w.num_sge = wr->num_sge;
    w.opcode = WrOpcode(wr->opcode);
    w.send_flags = wr->send_flags;
    w.imm_data = be32toh(wr->imm_data);
    if (wr->opcode == IBV_WR_SEND_WITH_INV || wr->opcode == IBV_WR_LOCAL_INV) w.invalidate_rkey = wr->invalidate_rkey;
    if (wr->send_flags & ~uint32_t(IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE)) {
      err = EINVAL;  // IP_CSUM: no TSO/checksum offload here
      break;
    }
    // The opcodes uroce lacks (bind MW, TSO, atomic write) are refused by
    // post_send's opcode check: WrOpcode has no such value.
    if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      w.atomic = {wr->wr.atomic.remote_addr, wr->wr.atomic.compare_add, wr->wr.atomic.swap, wr->wr.atomic.rkey};
    } else {
      w.rdma = {wr->wr.rdma.remote_addr, wr->wr.rdma.rkey};
    }
    if (qp->qp_type == QpType::kUd) {
      if (!wr->wr.ud.ah) {
        err = EINVAL;
        break;
      }
      w.ud = {wrap_of<AhW>(wr->wr.ud.ah)->obj, wr->wr.ud.remote_qpn, wr->wr.ud.remote_qkey};
    }
    SendWr* bad_one = nullptr;
    if (Status s = post_send(qp, &w, &bad_one); !s.ok()) {
      err = errno_of(s);
      break;
    }
  }
  if (err) *bad = wr;
  p.doorbell();
  return err;
}

template <class Post, class Target>
int post_recv_chain(Target* t, ibv_recv_wr* wr, ibv_recv_wr** bad, Post post) {
  Guard g(dev().lock());
  for (; wr; wr = wr->next) {
    RecvWr w;
    w.wr_id = wr->wr_id;
    w.sg_list = reinterpret_cast<Sge*>(wr->sg_list);
    w.num_sge = wr->num_sge;
    RecvWr* bad_one = nullptr;
    if (Status s = post(t, &w, &bad_one); !s.ok()) {
      *bad = wr;
      return errno_of(s);
    }
  }
  return 0;
}

int post_recv_op(ibv_qp* q, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return post_recv_chain(wrap_of<QpW>(q)->obj, wr, bad, post_recv);
}

int post_srq_recv_op(ibv_srq* s, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return post_recv_chain(wrap_of<SrqW>(s)->obj, wr, bad, post_srq_recv);
}

int poll_cq_op(ibv_cq* ibcq, int n, ibv_wc* out) {
  if (n < 0) return -1;
  Cq* cq = wrap_of<CqW>(ibcq)->obj;
  Provider& p = dev();
  Guard g(p.lock());
  p.step_inline();
  constexpr int kChunk = 32;
  Wc wc[kChunk];
  int got = 0;
  while (got < n) {
    const int k = poll_cq(cq, std::min(kChunk, n - got), wc);
    for (int i = 0; i < k; ++i) out[got + i] = ibv_wc_of(wc[i]);
    got += k;
    if (k < kChunk) break;
  }
  return got;
}

int req_notify_cq_op(ibv_cq* c, int solicited_only) {
  Guard g(dev().lock());
  return errno_of(req_notify_cq(wrap_of<CqW>(c)->obj, solicited_only != 0));
}

/// Destroys the uroce object behind an rdma-core one, then its wrapper:
/// 0, or the errno of the uroce verb (the object then stays). A CQ, QP or
/// SRQ goes as a kernel one does: `destroy` drops its events nobody has got
/// yet, under the lock with the object, so the count got is final; then,
/// the lock released, the verb waits until each event got was acked before
/// the wrapper those events name is freed. (Waiting first and destroying
/// after let a thread get an event between the two: UCX's async thread then
/// handled a QP's Last WQE Reached while UCX tore its device down.)
template <class W, class T, class Destroy>
int release(T* p, Destroy destroy) {
  if (!p) return EINVAL;
  W* w = wrap_of<W>(p);
  {
    Guard g(dev().lock());
    if (Status s = destroy(w->obj); !s.ok()) return errno_of(s);
  }
  if constexpr (requires { p->cond; }) {
    wait_events_acked(*w);
    pthread_mutex_destroy(&p->mutex);
    pthread_cond_destroy(&p->cond);
  }
  delete w;
  return 0;
}

}  // namespace

void ibv_ah_of(const AhAttr& a, ibv_ah_attr& out) {
  std::memset(&out, 0, sizeof out);
  out.is_global = 1;
  std::memcpy(out.grh.dgid.raw, a.dgid.raw, 16);
  out.grh.sgid_index = a.sgid_index;
  out.grh.hop_limit = a.hop_limit;
  out.grh.traffic_class = a.traffic_class;
  out.grh.flow_label = a.flow_label;
  out.sl = a.sl;
  out.port_num = a.port_num;
}

void ibv_qp_attr_of(const QpAttr& q, ibv_qp_attr& out) {
  std::memset(&out, 0, sizeof out);
  out.qp_state = ibv_qp_state(q.qp_state);
  out.cur_qp_state = ibv_qp_state(q.cur_qp_state);
  out.path_mtu = ibv_mtu(q.path_mtu);
  out.qkey = q.qkey;
  out.rq_psn = q.rq_psn;
  out.sq_psn = q.sq_psn;
  out.dest_qp_num = q.dest_qp_num;
  out.qp_access_flags = int(q.qp_access_flags);
  out.cap = ibv_cap(q.cap);
  ibv_ah_of(q.ah_attr, out.ah_attr);
  out.pkey_index = q.pkey_index;
  out.max_rd_atomic = q.max_rd_atomic;
  out.max_dest_rd_atomic = q.max_dest_rd_atomic;
  out.min_rnr_timer = q.min_rnr_timer;
  out.port_num = q.port_num;
  out.timeout = q.timeout;
  out.retry_cnt = q.retry_cnt;
  out.rnr_retry = q.rnr_retry;
}

ibv_wc ibv_wc_of(const Wc& w) {
  ibv_wc o{};
  o.wr_id = w.wr_id;
  o.status = ibv_wc_status(w.status);
  o.opcode = ibv_wc_opcode(w.opcode);
  o.vendor_err = w.vendor_err;
  o.byte_len = w.byte_len;
  o.imm_data = (w.wc_flags & kWcWithInv) ? w.invalidated_rkey : htobe32(w.imm_data);
  o.qp_num = w.qp_num;
  o.src_qp = w.src_qp;
  o.wc_flags = w.wc_flags;
  o.pkey_index = w.pkey_index;
  o.slid = 0;  // RoCE has no LIDs
  o.sl = w.sl;
  o.dlid_path_bits = 0;
  return o;
}

CqW* new_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector) {
  if (!c || cqe <= 0 || comp_vector < 0 || comp_vector >= c->num_comp_vectors) return fail<CqW>(EINVAL);
  Guard g(dev().lock());
  auto* w = new CqW{};
  auto cq = create_cq(device_of(c), uint32_t(cqe), w);  // cq_context: the wrapper (async.cc)
  if (!cq.ok()) {
    delete w;
    return fail<CqW>(errno_of(cq.status()));
  }
  w->ibv.context = c;
  w->ibv.cq_context = cq_context;
  w->ibv.cqe = int((*cq)->cqe);
  pthread_mutex_init(&w->ibv.mutex, nullptr);
  pthread_cond_init(&w->ibv.cond, nullptr);
  w->obj = *cq;
  attach_channel(*w, channel);
  return w;
}

void install_ops(verbs_context& v) {
  v.context.ops.post_send = post_send_op;
  v.context.ops.post_recv = post_recv_op;
  v.context.ops.post_srq_recv = post_srq_recv_op;
  v.context.ops.poll_cq = poll_cq_op;
  v.context.ops.req_notify_cq = req_notify_cq_op;
  install_extended_ops(v);
}

}  // namespace uroce::ibv

using namespace uroce;
using namespace uroce::ibv;

extern "C" {

// ---------------------------------------------------------------- PD, MR

ibv_pd* ibv_alloc_pd(ibv_context* c) {
  if (!c || !Provider::get()) return fail<ibv_pd>(EINVAL);
  Guard g(dev().lock());
  auto pd = alloc_pd(device_of(c));
  if (!pd.ok()) return fail<ibv_pd>(errno_of(pd.status()));
  auto* w = new PdW{};
  w->ibv.context = c;
  w->ibv.handle = (*pd)->handle;
  w->obj = *pd;
  return &w->ibv;
}

int ibv_dealloc_pd(ibv_pd* p) { return release<PdW>(p, dealloc_pd); }

ibv_mr* ibv_reg_mr_iova2(ibv_pd* p, void* addr, size_t length, uint64_t iova, unsigned int access) {
  if (!p) return fail<ibv_mr>(EINVAL);
  if (iova != reinterpret_cast<uintptr_t>(addr)) return fail<ibv_mr>(EOPNOTSUPP);  // keys name virtual addresses
  access &= ~uint32_t(IBV_ACCESS_OPTIONAL_RANGE);  // optional hints (relaxed ordering): ignored, as allowed
  if (access & ~kAccessBits) return fail<ibv_mr>(EOPNOTSUPP);  // MW bind, zero-based, ODP, huge pages
  Guard g(dev().lock());
  auto mr = reg_mr(wrap_of<PdW>(p)->obj, addr, length, access);
  if (!mr.ok()) return fail<ibv_mr>(errno_of(mr.status()));
  auto* w = new MrW{};
  w->ibv = ibv_mr{p->context, p, addr, length, (*mr)->lkey, (*mr)->lkey, (*mr)->rkey};
  w->obj = *mr;
  return &w->ibv;
}

ibv_mr* ibv_reg_mr(ibv_pd* p, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(p, addr, length, reinterpret_cast<uintptr_t>(addr), unsigned(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* p, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(p, addr, length, iova, unsigned(access));
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return fail<ibv_mr>(EOPNOTSUPP);  // no device memory: a software device reads host memory only
}

int ibv_dereg_mr(ibv_mr* m) { return release<MrW>(m, dereg_mr); }

// ---------------------------------------------------------------- CQ

ibv_cq* ibv_create_cq(ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector) {
  CqW* w = new_cq(c, cqe, cq_context, channel, comp_vector);
  return w ? &w->ibv : nullptr;
}

int ibv_destroy_cq(ibv_cq* c) {
  if (!c) return EINVAL;
  CqW& w = *wrap_of<CqW>(c);
  return release<CqW>(c, [&w](Cq* cq) {
    Status s = destroy_cq(cq);
    if (s.ok()) {
      detach_channel(w);
      drop_async_events(w.ibv.context, &w);
    }
    return s;
  });
}

// ---------------------------------------------------------------- SRQ

ibv_srq* ibv_create_srq(ibv_pd* p, ibv_srq_init_attr* a) {
  if (!p || !a) return fail<ibv_srq>(EINVAL);
  Guard g(dev().lock());
  auto* w = new SrqW{};
  // srq_context: the wrapper (async.cc); srq_limit is ignored here, as
  // ibv_create_srq(3) says: ibv_modify_srq arms it.
  SrqInitAttr sa{w, a->attr.max_wr, a->attr.max_sge, 0};
  auto srq = create_srq(wrap_of<PdW>(p)->obj, sa);
  if (!srq.ok()) {
    delete w;
    return fail<ibv_srq>(errno_of(srq.status()));
  }
  w->ibv.context = p->context;
  w->ibv.srq_context = a->srq_context;
  w->ibv.pd = p;
  pthread_mutex_init(&w->ibv.mutex, nullptr);
  pthread_cond_init(&w->ibv.cond, nullptr);
  w->obj = *srq;
  return &w->ibv;
}

int ibv_destroy_srq(ibv_srq* s) {
  if (!s) return EINVAL;
  SrqW& w = *wrap_of<SrqW>(s);
  return release<SrqW>(s, [&w](Srq* srq) {
    Status st = destroy_srq(srq);
    if (st.ok()) drop_async_events(w.ibv.context, &w);
    return st;
  });
}

int ibv_modify_srq(ibv_srq* s, ibv_srq_attr* a, int mask) {
  if (!s || !a || (mask & ~int(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))) return EINVAL;
  if (mask & IBV_SRQ_MAX_WR) return EOPNOTSUPP;  // no resize: the ring is allocated at create
  if (!(mask & IBV_SRQ_LIMIT)) return 0;
  Guard g(dev().lock());
  return errno_of(modify_srq(wrap_of<SrqW>(s)->obj, a->srq_limit));
}

int ibv_query_srq(ibv_srq* s, ibv_srq_attr* a) {
  if (!s || !a) return EINVAL;
  Guard g(dev().lock());
  SrqInitAttr q;
  if (Status st = query_srq(wrap_of<SrqW>(s)->obj, &q); !st.ok()) return errno_of(st);
  *a = ibv_srq_attr{q.max_wr, q.max_sge, q.srq_limit};
  return 0;
}

// ---------------------------------------------------------------- QP

ibv_qp* ibv_create_qp(ibv_pd* p, ibv_qp_init_attr* a) {
  if (!p || !a || !a->send_cq || !a->recv_cq) return fail<ibv_qp>(EINVAL);
  if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD) return fail<ibv_qp>(EOPNOTSUPP);
  Guard g(dev().lock());
  auto* w = new QpW{};
  QpInitAttr qa;
  qa.qp_context = w;  // the wrapper (async.cc)
  qa.send_cq = wrap_of<CqW>(a->send_cq)->obj;
  qa.recv_cq = wrap_of<CqW>(a->recv_cq)->obj;
  qa.srq = a->srq ? wrap_of<SrqW>(a->srq)->obj : nullptr;
  qa.cap = qp_cap(a->cap);
  qa.qp_type = QpType(a->qp_type);
  qa.sq_sig_all = a->sq_sig_all != 0;
  auto qp = create_qp(wrap_of<PdW>(p)->obj, qa);
  if (!qp.ok()) {
    delete w;
    return fail<ibv_qp>(errno_of(qp.status()));
  }
  QpInitAttr got;
  (void)query_qp(*qp, nullptr, &got);
  a->cap = ibv_cap(got.cap);  // what was allocated, as providers report it
  ibv_qp& q = w->qpx.qp_base;
  q.context = p->context;
  q.qp_context = a->qp_context;
  q.pd = p;
  q.send_cq = a->send_cq;
  q.recv_cq = a->recv_cq;
  q.srq = a->srq;
  q.qp_num = (*qp)->qp_num;
  q.state = IBV_QPS_RESET;
  q.qp_type = a->qp_type;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  w->obj = *qp;
  return &q;
}

int ibv_modify_qp(ibv_qp* ibq, ibv_qp_attr* a, int mask) {
  if (!ibq || !a) return EINVAL;
  const uint32_t m = uint32_t(mask);
  if (m & ~kQpMaskKnown) return EINVAL;  // alternate paths, SQD notify, rate limit: not in uroce
  Qp* qp = wrap_of<QpW>(ibq)->obj;
  Guard g(dev().lock());
  QpAttr q;
  q.qp_state = QpState(a->qp_state);
  q.cur_qp_state = QpState(a->cur_qp_state);
  q.path_mtu = Mtu(a->path_mtu);
  q.qkey = a->qkey;
  q.rq_psn = a->rq_psn;
  q.sq_psn = a->sq_psn;
  q.dest_qp_num = a->dest_qp_num;
  q.qp_access_flags = uint32_t(a->qp_access_flags);
  q.cap = qp_cap(a->cap);
  if (m & IBV_QP_AV) {
    if (int e = ah_attr(a->ah_attr, q.ah_attr)) return e;
  }
  q.pkey_index = a->pkey_index;
  q.max_rd_atomic = a->max_rd_atomic;
  q.max_dest_rd_atomic = a->max_dest_rd_atomic;
  q.min_rnr_timer = a->min_rnr_timer;
  q.port_num = a->port_num;
  q.timeout = a->timeout;
  q.retry_cnt = a->retry_cnt;
  q.rnr_retry = a->rnr_retry;
  if (Status s = modify_qp(qp, q, m); !s.ok()) return errno_of(s);
  ibq->state = ibv_qp_state(qp->state);
  return 0;
}

int ibv_query_qp(ibv_qp* ibq, ibv_qp_attr* a, int, ibv_qp_init_attr* init) {
  if (!ibq || !a) return EINVAL;
  Guard g(dev().lock());
  QpAttr q;
  QpInitAttr qi;
  if (Status s = query_qp(wrap_of<QpW>(ibq)->obj, &q, &qi); !s.ok()) return errno_of(s);
  ibv_qp_attr_of(q, *a);
  if (init) {
    std::memset(init, 0, sizeof *init);
    init->qp_context = ibq->qp_context;
    init->send_cq = ibq->send_cq;
    init->recv_cq = ibq->recv_cq;
    init->srq = ibq->srq;
    init->cap = ibv_cap(qi.cap);
    init->qp_type = ibq->qp_type;
    init->sq_sig_all = qi.sq_sig_all;
  }
  return 0;
}

int ibv_destroy_qp(ibv_qp* ibq) {
  if (!ibq) return EINVAL;
  QpW& w = *wrap_of<QpW>(ibq);
  return release<QpW>(ibq, [&w](Qp* qp) {
    Status s = destroy_qp(qp);
    if (s.ok()) drop_async_events(w.qpx.qp_base.context, &w);
    return s;
  });
}

// ---------------------------------------------------------------- AH

ibv_ah* ibv_create_ah(ibv_pd* p, ibv_ah_attr* a) {
  if (!p || !a) return fail<ibv_ah>(EINVAL);
  Guard g(dev().lock());
  AhAttr aa;
  if (int e = ah_attr(*a, aa)) return fail<ibv_ah>(e);
  auto ah = create_ah(wrap_of<PdW>(p)->obj, aa);
  if (!ah.ok()) return fail<ibv_ah>(errno_of(ah.status()));
  auto* w = new AhW{};
  w->ibv.context = p->context;
  w->ibv.pd = p;
  w->obj = *ah;
  return &w->ibv;
}

int ibv_destroy_ah(ibv_ah* a) { return release<AhW>(a, destroy_ah); }

}  // extern "C"
