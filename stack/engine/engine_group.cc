// EngineGroup (N shared-nothing engines over N port queues) and EngineChannel
// (application thread <-> engine lcore over spsc rings). The design and its
// reasons are in include/uroce/engine_group.h.
#include <uroce/engine_group.h>

#include <algorithm>

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include "stack/device/context.h"
#include "stack/engine/steering.h"

namespace uroce {

struct alignas(64) EngineGroup::PerEngine {
  EngineStats stats;
  std::vector<EngineChannel*> channels;
};

Result<std::unique_ptr<EngineGroup>> EngineGroup::open(std::span<PacketIo* const> queues, const DeviceConfig& cfg) {
  const auto n = uint32_t(queues.size());
  if (n == 0) return Status(StatusCode::kInvalidArgument, "an engine group needs at least one queue");
  if (uint64_t(cfg.max_qp) * n + transport::kFirstQpn > wire::kBthQpnMask) {
    return Status(StatusCode::kInvalidArgument, "max_qp * engines exceeds the 24-bit QPN space");
  }
  std::unique_ptr<EngineGroup> g(new EngineGroup());
  DeviceConfig dc = cfg;
  if (dc.key_seed == 0) dc.key_seed = rte_rdtsc() | 1;  // one seed: the same MR keys on every engine
  g->rings_ = std::make_unique<engine::FwdRings>(n);
  for (uint32_t e = 0; e < n; ++e) {
    if (!queues[e]) return Status(StatusCode::kInvalidArgument, "null queue");
    g->per_.push_back(std::make_unique<PerEngine>());
    g->ios_.push_back(std::make_unique<engine::SteeringIo>(*queues[e], *g->rings_, e, g->per_[e]->stats));
    auto ctx = open_device(*g->ios_[e], dc);
    if (!ctx.ok()) return ctx.status();
    ContextPtr c = std::move(ctx).value();
    c->engine_id = e;
    c->n_engines = n;
    g->engines_.push_back(std::move(c));
  }
  return g;
}

EngineGroup::~EngineGroup() {
  engines_.clear();  // contexts first: they transmit through ios_
  if (!rings_) return;
  for (uint32_t f = 0; f < rings_->size(); ++f) {
    for (uint32_t t = 0; t < rings_->size(); ++t) {
      if (f == t) continue;
      rte_mbuf* m = nullptr;
      while (rings_->ring(f, t).pop(m)) rte_pktmbuf_free(m);
    }
  }
}

uint32_t EngineGroup::engine_of(uint32_t qpn) const { return engine::owner_of_qpn(qpn, size()); }

Result<Qp*> EngineGroup::create_qp(Pd* pd, const QpInitAttr& attr) {
  if (!pd) return Status(StatusCode::kInvalidArgument, "null pd");
  Context* ctx = pd->context;
  if (std::none_of(engines_.begin(), engines_.end(), [ctx](const ContextPtr& c) { return c.get() == ctx; })) {
    return Status(StatusCode::kInvalidArgument, "pd of another device");
  }
  return uroce::create_qp(pd, attr);
}

Result<uint32_t> EngineGroup::reg_mr_all(std::span<Pd* const> pds, void* addr, size_t length, uint32_t access,
                                         std::span<Mr*> mrs_out) {
  if (pds.size() != size() || mrs_out.size() != size()) {
    return Status(StatusCode::kInvalidArgument, "one pd and one mr slot per engine");
  }
  for (uint32_t e = 0; e < size(); ++e) {
    if (!pds[e] || pds[e]->context != engines_[e].get()) {
      return Status(StatusCode::kInvalidArgument, "pds[e] must be engine e's");
    }
  }
  for (uint32_t e = 0; e < size(); ++e) {
    auto mr = reg_mr(pds[e], addr, length, access);
    if (!mr.ok() || (e > 0 && (*mr)->lkey != mrs_out[0]->lkey)) {
      if (mr.ok()) (void)dereg_mr(*mr);
      for (uint32_t d = 0; d < e; ++d) (void)dereg_mr(mrs_out[d]);
      return mr.ok() ? Status(StatusCode::kInvalidArgument, "engines' memory keys diverged (MRs registered on one engine only)")
                     : mr.status();
    }
    mrs_out[e] = *mr;
  }
  return mrs_out[0]->lkey;
}

void EngineGroup::attach(uint32_t e, EngineChannel& ch) { per_[e]->channels.push_back(&ch); }

uint32_t EngineGroup::poll(uint32_t e, uint64_t now_ns) {
  PerEngine& p = *per_[e];
  for (EngineChannel* ch : p.channels) p.stats.chan_posts += ch->engine_post();
  const uint32_t work = uroce::poll(engines_[e].get(), now_ns);
  for (EngineChannel* ch : p.channels) p.stats.chan_cqes += ch->engine_complete();
  ++p.stats.polls;
  p.stats.work += work;
  return work;
}

const EngineStats& EngineGroup::stats(uint32_t e) const { return per_[e]->stats; }

// ---------------------------------------------------------------- EngineChannel

Status EngineChannel::post_send(Qp* qp, const SendWr& wr) {
  if (wr.num_sge < 0 || uint32_t(wr.num_sge) > kMaxSge) return Status(StatusCode::kInvalidArgument, "num_sge > kMaxSge");
  Cmd c{};
  c.qp = qp;
  c.is_send = true;
  c.swr = wr;
  c.swr.next = nullptr;
  c.swr.sg_list = nullptr;  // points at the ring slot's copy when the engine posts it
  std::copy_n(wr.sg_list, wr.num_sge, c.sges);
  if (!cmds_.push(c)) return Status(StatusCode::kResourceExhausted, "channel full");
  return {};
}

Status EngineChannel::post_recv(Qp* qp, const RecvWr& wr) {
  if (wr.num_sge < 0 || uint32_t(wr.num_sge) > kMaxSge) return Status(StatusCode::kInvalidArgument, "num_sge > kMaxSge");
  Cmd c{};
  c.qp = qp;
  c.is_send = false;
  c.rwr = wr;
  c.rwr.next = nullptr;
  c.rwr.sg_list = nullptr;
  std::copy_n(wr.sg_list, wr.num_sge, c.sges);
  if (!cmds_.push(c)) return Status(StatusCode::kResourceExhausted, "channel full");
  return {};
}

void EngineChannel::reject(const Cmd& c, StatusCode code) {
  ChannelWc out{};
  out.cq = c.is_send ? c.qp->send_cq : c.qp->recv_cq;
  out.wc.wr_id = c.is_send ? c.swr.wr_id : c.rwr.wr_id;
  out.wc.status = WcStatus::kLocQpOpErr;
  out.wc.opcode = c.is_send ? WcOpcode::kSend : WcOpcode::kRecv;
  out.wc.vendor_err = uint32_t(code);
  out.wc.qp_num = c.qp->qp_num;
  done_.push(out);
}

uint32_t EngineChannel::engine_post() {
  uint32_t n = 0;
  while (cmds_.read_available() > 0 && done_.write_available() > 0) {
    Cmd& c = cmds_.front();
    Status s;
    if (c.is_send) {
      c.swr.sg_list = c.sges;
      SendWr* bad = nullptr;
      s = uroce::post_send(c.qp, &c.swr, &bad);
    } else {
      c.rwr.sg_list = c.sges;
      RecvWr* bad = nullptr;
      s = uroce::post_recv(c.qp, &c.rwr, &bad);
    }
    if (s.code() == StatusCode::kResourceExhausted) break;  // queue full: retry at the next poll, in order
    if (!s.ok()) reject(c, s.code());
    cmds_.pop();
    ++n;
  }
  return n;
}

uint32_t EngineChannel::engine_complete() {
  constexpr int kBatch = 32;
  uint32_t moved = 0;
  for (Cq* cq : cqs_) {
    for (;;) {
      const size_t room = std::min<size_t>(done_.write_available(), kBatch);
      if (room == 0) return moved;
      Wc wc[kBatch];
      const int got = uroce::poll_cq(cq, int(room), wc);
      for (int i = 0; i < got; ++i) done_.push(ChannelWc{cq, wc[i]});
      moved += uint32_t(got);
      if (size_t(got) < room) break;
    }
  }
  return moved;
}

}  // namespace uroce
