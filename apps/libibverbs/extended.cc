// The extended CQ and QP verbs of rdma-core 44: ibv_create_cq_ex with the
// ibv_cq_ex iterator (start_poll / next_poll / end_poll and the read_* ops,
// ibv_create_cq_ex(3)), and ibv_create_qp_ex with the ibv_wr_* post API of
// ibv_qp_ex (ibv_wr_post(3)). Both stand on the classic verbs of objects.cc:
// an extended CQ is a CqW like any other, so ibv_poll_cq, ibv_req_notify_cq,
// the completion channels and ibv_destroy_cq take it; an extended QP is made
// by ibv_create_qp, and the WRs its builders make are rdma-core ibv_send_wrs,
// posted at wr_complete through ibv_post_send's own translation.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <vector>

#include "apps/libibverbs/abi.h"
#include "apps/libibverbs/provider.h"

namespace uroce::ibv {

// ---------------------------------------------------------------- CQ

namespace {

/// The wc_flags a uroce completion can give: IBV_WC_STANDARD_FLAGS (SLID and
/// DLID path bits read 0: RoCE has no LIDs). Not the completion timestamps
/// (the stack's completions carry no time; rxe has none either), CVLAN, flow
/// tags or tag matching: a CQ asked for them is not made (EOPNOTSUPP).
constexpr uint64_t kWcFlagsKnown = IBV_WC_STANDARD_FLAGS;

CqW& cq_of(ibv_cq_ex* c) { return *wrap_of<CqW>(c); }
const ibv_wc& polled(ibv_cq_ex* c) { return cq_of(c).polled; }

/// Moves the iterator to the CQ's next completion: 0, or ENOENT when there is
/// none (the device lock held).
int poll_next(CqW& cq) {
  Wc wc;
  if (poll_cq(cq.obj, 1, &wc) == 0) return ENOENT;
  cq.polled = ibv_wc_of(wc);
  cq.ex.wr_id = cq.polled.wr_id;
  cq.ex.status = cq.polled.status;
  return 0;
}

int start_poll(ibv_cq_ex* c, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) return EINVAL;  // rdma-core 44 defines no poll attribute
  Provider& p = *Provider::get();
  // Held until end_poll, as a provider holds its CQ lock. No end_poll follows
  // an error (ibv_create_cq_ex(3)), so an empty CQ gives it back at once.
  p.lock().lock();
  p.step_inline();
  const int e = poll_next(cq_of(c));
  if (e) p.lock().unlock();
  return e;
}

int next_poll(ibv_cq_ex* c) { return poll_next(cq_of(c)); }

void end_poll(ibv_cq_ex*) { Provider::get()->lock().unlock(); }

ibv_wc_opcode read_opcode(ibv_cq_ex* c) { return polled(c).opcode; }
uint32_t read_vendor_err(ibv_cq_ex* c) { return polled(c).vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* c) { return polled(c).byte_len; }
__be32 read_imm_data(ibv_cq_ex* c) { return polled(c).imm_data; }  // or the invalidated R_Key, as in ibv_wc
uint32_t read_qp_num(ibv_cq_ex* c) { return polled(c).qp_num; }
uint32_t read_src_qp(ibv_cq_ex* c) { return polled(c).src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* c) { return polled(c).wc_flags; }
uint32_t read_slid(ibv_cq_ex* c) { return polled(c).slid; }
uint8_t read_sl(ibv_cq_ex* c) { return polled(c).sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* c) { return polled(c).dlid_path_bits; }

ibv_cq_ex* create_cq_ex_op(ibv_context* c, ibv_cq_init_attr_ex* a) {
  if (!a) return fail<ibv_cq_ex>(EINVAL);
  // IBV_CQ_INIT_ATTR_MASK_PD names a parent domain, which uroce has none of
  // (ibv_alloc_parent_domain); other bits are unknown to rdma-core 44.
  if (a->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS)) return fail<ibv_cq_ex>(EOPNOTSUPP);
  // SINGLE_THREADED is a hint, taken (the device lock stays). IGNORE_OVERRUN
  // cannot be kept: an overrun moves the CQ's QPs to ERR (IBA 11.4.2.1).
  if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (a->flags & ~uint32_t(IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
    return fail<ibv_cq_ex>(EOPNOTSUPP);
  }
  if (a->wc_flags & ~kWcFlagsKnown) return fail<ibv_cq_ex>(EOPNOTSUPP);
  if (a->cqe > INT_MAX || a->comp_vector > INT_MAX) return fail<ibv_cq_ex>(EINVAL);
  CqW* w = new_cq(c, int(a->cqe), a->cq_context, a->channel, int(a->comp_vector));
  if (!w) return nullptr;
  ibv_cq_ex& x = w->ex;
  const uint64_t f = a->wc_flags;
  x.comp_mask = 0;
  x.status = IBV_WC_SUCCESS;
  x.wr_id = 0;
  x.start_poll = start_poll;
  x.next_poll = next_poll;
  x.end_poll = end_poll;
  // Opcode, vendor error and flags are always there; the other fields where
  // wc_flags asks for them, as providers fill them (ibv_create_cq_ex(3):
  // only the fields asked for may be read).
  x.read_opcode = read_opcode;
  x.read_vendor_err = read_vendor_err;
  x.read_wc_flags = read_wc_flags;
  x.read_byte_len = (f & IBV_WC_EX_WITH_BYTE_LEN) ? read_byte_len : nullptr;
  x.read_imm_data = (f & IBV_WC_EX_WITH_IMM) ? read_imm_data : nullptr;
  x.read_qp_num = (f & IBV_WC_EX_WITH_QP_NUM) ? read_qp_num : nullptr;
  x.read_src_qp = (f & IBV_WC_EX_WITH_SRC_QP) ? read_src_qp : nullptr;
  x.read_slid = (f & IBV_WC_EX_WITH_SLID) ? read_slid : nullptr;
  x.read_sl = (f & IBV_WC_EX_WITH_SL) ? read_sl : nullptr;
  x.read_dlid_path_bits = (f & IBV_WC_EX_WITH_DLID_PATH_BITS) ? read_dlid_path_bits : nullptr;
  x.read_completion_ts = nullptr;
  x.read_cvlan = nullptr;
  x.read_flow_tag = nullptr;
  x.read_tm_info = nullptr;
  x.read_completion_wallclock_ns = nullptr;
  return &x;
}

}  // namespace

// ---------------------------------------------------------------- QP and the ibv_wr_* API

/// The WRs built since wr_start, in storage sized at creation from the QP's
/// allocated capabilities: a batch holds at most what the SQ holds, each WR
/// at most max_send_sge SGEs and max_inline_data inline bytes, so a builder
/// that goes beyond fails the batch and wr_complete posts none of it.
struct WrBatch {
  WrBatch(bool is_ud, const ibv_qp_cap& cap)
      : ud(is_ud),
        max_sge(cap.max_send_sge),
        max_inline(cap.max_inline_data),
        wrs(cap.max_send_wr),
        sges(size_t(cap.max_send_wr) * cap.max_send_sge),
        inline_data(size_t(cap.max_send_wr) * cap.max_inline_data) {}

  /// Keeps the first failure: wr_complete returns it.
  void fail(int e) {
    if (!err) err = e;
  }

  std::mutex lock;  // wr_start to wr_complete / wr_abort: ibv_wr_post(3)'s per-QP critical section
  const bool ud;
  const uint32_t max_sge;     // >= 1 (create_qp allocates one at least): the inline setters use SGE 0
  const uint32_t max_inline;
  std::vector<ibv_send_wr> wrs;
  std::vector<ibv_sge> sges;          // max_sge for each WR
  std::vector<uint8_t> inline_data;   // max_inline for each WR: the inline setters copy at once
  uint32_t n = 0;  // WRs built since wr_start
  int err = 0;     // the first failure since wr_start; 0: none
};

void WrBatchDeleter::operator()(WrBatch* b) const { delete b; }

namespace {

// The prefix ibv_create_qp reads (verbs.h's ibv_create_qp_ex inline casts it alike).
static_assert(offsetof(ibv_qp_init_attr_ex, cap) == offsetof(ibv_qp_init_attr, cap));
static_assert(offsetof(ibv_qp_init_attr_ex, qp_type) == offsetof(ibv_qp_init_attr, qp_type));
static_assert(offsetof(ibv_qp_init_attr_ex, sq_sig_all) == offsetof(ibv_qp_init_attr, sq_sig_all));

// The operations ibv_wr_post(3) may build, per QP type, as post_send takes
// them (stack/device/qp.cc check_send_wr): UC has no READ, atomics or SEND
// with Invalidate; UD has the SENDs only. Memory windows, TSO and atomic
// write are in none: uroce has no such operation.
constexpr uint64_t kUdOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
constexpr uint64_t kUcOps = kUdOps | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                            IBV_QP_EX_WITH_LOCAL_INV;
constexpr uint64_t kRcOps = kUcOps | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                            IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV;

uint64_t send_ops_of(ibv_qp_type t) {
  if (t == IBV_QPT_RC) return kRcOps;
  if (t == IBV_QPT_UC) return kUcOps;
  if (t == IBV_QPT_UD) return kUdOps;
  return 0;
}

WrBatch& batch_of(ibv_qp_ex* q) { return *wrap_of<QpW>(q)->batch; }

/// Begins the batch's next WR with the wr_id and wr_flags the program set in
/// qpx before the builder (ibv_wr_post(3)); null once the batch has failed.
ibv_send_wr* begin_wr(ibv_qp_ex* q, ibv_wr_opcode op) {
  WrBatch& b = batch_of(q);
  if (b.err) return nullptr;
  if (b.n == b.wrs.size()) {
    b.fail(ENOMEM);  // more WRs than the SQ holds: ibv_post_send's errno for a full SQ
    return nullptr;
  }
  ibv_send_wr& w = b.wrs[b.n];
  w = ibv_send_wr{};
  w.wr_id = q->wr_id;
  w.send_flags = q->wr_flags;
  w.opcode = op;
  w.sg_list = &b.sges[size_t(b.n) * b.max_sge];
  ++b.n;
  return &w;
}

/// The WR the setters fill: the last one begun; null once the batch has
/// failed, or (EINVAL) when no builder came first.
ibv_send_wr* last_wr(WrBatch& b) {
  if (!b.err && b.n == 0) b.fail(EINVAL);
  return b.err ? nullptr : &b.wrs[b.n - 1];
}

// Builders: each begins one WR.

void wr_send(ibv_qp_ex* q) { begin_wr(q, IBV_WR_SEND); }

void wr_send_imm(ibv_qp_ex* q, __be32 imm_data) {
  if (ibv_send_wr* w = begin_wr(q, IBV_WR_SEND_WITH_IMM)) w->imm_data = imm_data;
}

void wr_send_inv(ibv_qp_ex* q, uint32_t invalidate_rkey) {
  if (ibv_send_wr* w = begin_wr(q, IBV_WR_SEND_WITH_INV)) w->invalidate_rkey = invalidate_rkey;
}

void wr_local_inv(ibv_qp_ex* q, uint32_t invalidate_rkey) {
  if (ibv_send_wr* w = begin_wr(q, IBV_WR_LOCAL_INV)) w->invalidate_rkey = invalidate_rkey;
}

void wr_rdma_write(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr) {
  if (ibv_send_wr* w = begin_wr(q, IBV_WR_RDMA_WRITE)) w->wr.rdma = {remote_addr, rkey};
}

void wr_rdma_write_imm(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr, __be32 imm_data) {
  if (ibv_send_wr* w = begin_wr(q, IBV_WR_RDMA_WRITE_WITH_IMM)) {
    w->wr.rdma = {remote_addr, rkey};
    w->imm_data = imm_data;
  }
}

void wr_rdma_read(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr) {
  if (ibv_send_wr* w = begin_wr(q, IBV_WR_RDMA_READ)) w->wr.rdma = {remote_addr, rkey};
}

void wr_atomic_cmp_swp(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr, uint64_t compare, uint64_t swap) {
  if (ibv_send_wr* w = begin_wr(q, IBV_WR_ATOMIC_CMP_AND_SWP)) w->wr.atomic = {remote_addr, compare, swap, rkey};
}

void wr_atomic_fetch_add(ibv_qp_ex* q, uint32_t rkey, uint64_t remote_addr, uint64_t add) {
  if (ibv_send_wr* w = begin_wr(q, IBV_WR_ATOMIC_FETCH_AND_ADD)) w->wr.atomic = {remote_addr, add, 0, rkey};
}

/// A builder or setter the QP has not (not asked for in send_ops_flags, or
/// an operation uroce lacks): the batch fails, and wr_complete returns
/// EOPNOTSUPP and posts none of it.
template <class... A>
void refuse(ibv_qp_ex* q, A...) {
  batch_of(q).fail(EOPNOTSUPP);
}

/// Installs builder fn where send_ops_flags asked for it, else refuse.
template <class... A>
void pick(void (*&slot)(ibv_qp_ex*, A...), void (*fn)(ibv_qp_ex*, A...), bool asked) {
  slot = asked ? fn : refuse<A...>;
}

// Setters: each completes the last WR begun.

void wr_set_sge_list(ibv_qp_ex* q, size_t num_sge, const ibv_sge* sg_list) {
  WrBatch& b = batch_of(q);
  ibv_send_wr* w = last_wr(b);
  if (!w) return;
  if (num_sge > b.max_sge) return b.fail(EINVAL);  // ibv_post_send's errno for too many SGEs
  std::copy_n(sg_list, num_sge, w->sg_list);  // the program's list may go once the setter returns
  w->num_sge = int(num_sge);
}

void wr_set_sge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
  const ibv_sge sge{addr, length, lkey};
  wr_set_sge_list(q, 1, &sge);
}

void wr_set_inline_data_list(ibv_qp_ex* q, size_t num_buf, const ibv_data_buf* buf_list) {
  WrBatch& b = batch_of(q);
  ibv_send_wr* w = last_wr(b);
  if (!w) return;
  // Copied now: the program may reuse its buffers once the setter returns
  // (ibv_wr_post(3)). The WR then sends this copy inline, one SGE long.
  uint8_t* const data = b.inline_data.data() + size_t(w - b.wrs.data()) * b.max_inline;
  size_t len = 0;
  for (size_t i = 0; i < num_buf; ++i) {
    const size_t k = buf_list[i].length;
    if (k > b.max_inline - len) return b.fail(EINVAL);  // ibv_post_send's errno for inline data > max_inline_data
    if (k) std::memcpy(data + len, buf_list[i].addr, k);
    len += k;
  }
  w->sg_list[0] = ibv_sge{reinterpret_cast<uintptr_t>(data), uint32_t(len), 0};
  w->num_sge = len ? 1 : 0;
  w->send_flags |= IBV_SEND_INLINE;
}

void wr_set_inline_data(ibv_qp_ex* q, void* addr, size_t length) {
  const ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(q, 1, &buf);
}

void wr_set_ud_addr(ibv_qp_ex* q, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  WrBatch& b = batch_of(q);
  ibv_send_wr* w = last_wr(b);
  if (!w) return;
  if (!b.ud) return b.fail(EINVAL);  // a destination for a connected QP's WR
  w->wr.ud = {ah, remote_qpn, remote_qkey};
}

void wr_start(ibv_qp_ex* q) {
  WrBatch& b = batch_of(q);
  b.lock.lock();
  b.n = 0;
  b.err = 0;
}

/// Posts the batch as one ibv_post_send chain: 0, or the errno of the first
/// failure. A failure the builders found posts nothing; one that post_send
/// finds (the SQ's free room, the QP's state, an atomic's SGE) posts the WRs
/// before the failing one and none after it, as an ibv_post_send chain does.
int wr_complete(ibv_qp_ex* q) {
  WrBatch& b = batch_of(q);
  int e = b.err;
  if (!e && b.n) {
    for (uint32_t i = 0; i + 1 < b.n; ++i) b.wrs[i].next = &b.wrs[i + 1];
    ibv_send_wr* bad = nullptr;
    e = ibv_post_send(&q->qp_base, b.wrs.data(), &bad);
  }
  b.lock.unlock();
  return e;
}

void wr_abort(ibv_qp_ex* q) { batch_of(q).lock.unlock(); }  // the next wr_start forgets the WRs

/// Gives a QP made by ibv_create_qp the ibv_wr_* API: the builders of ops
/// (send_ops_flags, checked against send_ops_of), the setters, a batch.
void install_wr_api(QpW& w, uint64_t ops, bool ud, const ibv_qp_cap& cap) {
  w.batch.reset(new WrBatch(ud, cap));
  w.comp_mask |= kVerbsQpEx;
  ibv_qp_ex& x = w.qpx;
  pick(x.wr_send, wr_send, ops & IBV_QP_EX_WITH_SEND);
  pick(x.wr_send_imm, wr_send_imm, ops & IBV_QP_EX_WITH_SEND_WITH_IMM);
  pick(x.wr_send_inv, wr_send_inv, ops & IBV_QP_EX_WITH_SEND_WITH_INV);
  pick(x.wr_local_inv, wr_local_inv, ops & IBV_QP_EX_WITH_LOCAL_INV);
  pick(x.wr_rdma_write, wr_rdma_write, ops & IBV_QP_EX_WITH_RDMA_WRITE);
  pick(x.wr_rdma_write_imm, wr_rdma_write_imm, ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
  pick(x.wr_rdma_read, wr_rdma_read, ops & IBV_QP_EX_WITH_RDMA_READ);
  pick(x.wr_atomic_cmp_swp, wr_atomic_cmp_swp, ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP);
  pick(x.wr_atomic_fetch_add, wr_atomic_fetch_add, ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
  // Memory windows, TSO, XRC and atomic write: uroce has none of them.
  x.wr_bind_mw = refuse;
  x.wr_send_tso = refuse;
  x.wr_set_xrc_srqn = refuse;
  x.wr_atomic_write = refuse;
  x.wr_set_ud_addr = wr_set_ud_addr;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
}

ibv_qp* create_qp_ex_op(ibv_context* c, ibv_qp_init_attr_ex* a) {
  if (!c || !a) return fail<ibv_qp>(EINVAL);
  // XRC domains, TSO headers, RSS indirection tables and hashing: not in
  // uroce (rxe refuses them alike).
  constexpr uint32_t kMaskKnown =
      IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if (a->comp_mask & ~kMaskKnown) return fail<ibv_qp>(EOPNOTSUPP);
  // No creation flag has a meaning here: no multicast loopback, FCS, VLAN
  // stripping, source QPN or end padding.
  if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) return fail<ibv_qp>(EOPNOTSUPP);
  // Only an XRC target QP has no PD, and uroce has no XRC.
  if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != c) return fail<ibv_qp>(EINVAL);
  const bool wr_api = a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  // ibv_wr_post(3): a QP that cannot do every operation asked for is not made.
  if (wr_api && (a->send_ops_flags & ~send_ops_of(a->qp_type))) return fail<ibv_qp>(EOPNOTSUPP);
  ibv_qp* q = ibv_create_qp(a->pd, reinterpret_cast<ibv_qp_init_attr*>(a));  // a->cap: what was allocated
  if (q && wr_api) install_wr_api(*wrap_of<QpW>(q), a->send_ops_flags, a->qp_type == IBV_QPT_UD, a->cap);
  return q;
}

}  // namespace

void install_extended_ops(verbs_context& v) {
  v.create_cq_ex = create_cq_ex_op;
  v.create_qp_ex = create_qp_ex_op;
}

}  // namespace uroce::ibv

using namespace uroce::ibv;

extern "C" {

/// The ibv_wr_* API of a QP made with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS; NULL
/// for other QPs, as rdma-core gives it.
ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* q) {
  if (!q) return nullptr;
  QpW* w = wrap_of<QpW>(q);
  return (w->comp_mask & kVerbsQpEx) ? &w->qpx : nullptr;
}

}  // extern "C"
