// `uroce sim`, one seed's setup: the fabric with its seeded faults, the
// devices and QP pairs, the random workload of each side, its memory
// layout and the model of what each WR must leave in the peer's memory.
// Control path (everything runs at the fabric's virtual clock).
#include "apps/common/qp_trace.h"
#include "apps/sim/sim_seed.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <uroce/eal.h>
#include <uroce/verbs.h>

namespace uroce::apps::sim {

void SeedRun::violation(const char* invariant, const char* fmt, ...) {
  if (st_.violations.size() >= kMaxViolationsPerSeed) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  st_.violations.push_back({seed_, invariant, buf, {}});
}

uint32_t SeedRun::size_for(uint32_t max_len) {
  const uint32_t r = uint32_t(rng_.below(100));
  uint32_t len;
  if (r < 12) {
    len = 0;
  } else if (r < 45) {
    len = uint32_t(rng_.range(1, 64));
  } else if (r < 80) {
    len = uint32_t(rng_.range(65, mtu_));
  } else {
    len = uint32_t(rng_.range(mtu_ + 1, 3 * mtu_));
  }
  return std::min(len, max_len);
}

void SeedRun::generate_ops(QpSide& e) {
  e.ops.resize(cfg_.ops);
  for (Op& op : e.ops) {
    const uint32_t r = uint32_t(rng_.below(100));
    switch (e.type) {
      case QpType::kRc:
        op.opcode = r < 20   ? WrOpcode::kSend
                    : r < 30 ? WrOpcode::kSendWithImm
                    : r < 50 ? WrOpcode::kRdmaWrite
                    : r < 60 ? WrOpcode::kRdmaWriteWithImm
                    : r < 80 ? WrOpcode::kRdmaRead
                    : r < 90 ? WrOpcode::kAtomicCmpAndSwp
                             : WrOpcode::kAtomicFetchAndAdd;
        break;
      case QpType::kUc:
        op.opcode = r < 35   ? WrOpcode::kSend
                    : r < 55 ? WrOpcode::kSendWithImm
                    : r < 85 ? WrOpcode::kRdmaWrite
                             : WrOpcode::kRdmaWriteWithImm;
        break;
      case QpType::kUd:
        op.opcode = r < 60 ? WrOpcode::kSend : WrOpcode::kSendWithImm;
        break;
    }
    op.len = is_atomic(op.opcode) ? 8 : size_for(e.type == QpType::kUd ? mtu_ : 3 * mtu_);
    op.imm = uint32_t(rng_.next());
    if ((op.opcode == WrOpcode::kRdmaRead || is_atomic(op.opcode)) && rng_.chance(0.1)) op.send_flags |= kSendFence;
  }
  for (uint32_t i = 0; i < e.ops.size(); ++i) {
    if (consumes_recv(e.ops[i].opcode)) e.recv_ops.push_back(i);
  }
}

// MR layout of e: [src | land | tgt | atomic slots | recv], each 64-byte aligned.
void SeedRun::layout(QpSide& e) {
  auto up = [](uint32_t v) { return (v + 63) & ~63u; };
  const QpSide& p = *e.peer;
  e.land_len = 0;
  for (const Op& op : e.ops) {
    if (op.opcode == WrOpcode::kRdmaRead || is_atomic(op.opcode)) e.land_len += (op.len + 7) & ~7u;
  }
  // Target area: [max_read bytes never written | the peer's WRITEs one after another].
  uint32_t max_read = 256;
  e.tgt_len = 0;
  for (const Op& op : p.ops) {
    if (is_rdma_write(op.opcode)) e.tgt_len += op.len;
    if (op.opcode == WrOpcode::kRdmaRead) max_read = std::max(max_read, op.len);
  }
  e.tgt_len += max_read;
  e.recv_len = 0;
  uint32_t uc_max = 0;
  for (const uint32_t i : p.recv_ops) uc_max = std::max(uc_max, p.ops[i].len);
  for (const uint32_t i : p.recv_ops) {
    const Op& op = p.ops[i];
    RecvBuf b;
    switch (e.type) {
      case QpType::kRc:
        b.len = op.opcode == WrOpcode::kRdmaWriteWithImm ? 16 : op.len + uint32_t(rng_.below(17));
        break;
      case QpType::kUc:
        b.len = uc_max;
        break;
      case QpType::kUd:
        b.len = kUdGrh + mtu_;
        break;
    }
    b.off = e.recv_len;  // relative for now
    e.recv_len += up(b.len);
    e.recvs.push_back(b);
  }
  if (e.type == QpType::kUd) {  // room for network duplicates
    const size_t n = e.recvs.size();
    for (size_t i = 0; i < n; ++i) {
      e.recvs.push_back({e.recv_len, kUdGrh + mtu_});
      e.recv_len += up(kUdGrh + mtu_);
    }
  }
  e.src_off = 0;
  e.land_off = up(kSrcBytes);
  e.tgt_off = e.land_off + up(e.land_len);
  e.atom_off = e.tgt_off + up(e.tgt_len);
  e.recv_off = e.atom_off + 64;
  for (auto& b : e.recvs) b.off += e.recv_off;
  e.mem.init(e.recv_off + e.recv_len + 64, rng_);
  for (uint32_t s = 0; s < kAtomicSlots; ++s) {
    e.slot_init[s] = rng_.chance(0.2) ? 0 : rng_.next();
    std::memcpy(e.mem.mr() + e.atom_off + 8 * s, &e.slot_init[s], 8);
    std::memcpy(e.mem.expect(e.atom_off + 8 * s), &e.slot_init[s], 8);
  }
}

// Assigns offsets and runs the sequential model of e's ops at the peer.
void SeedRun::model(QpSide& e) {
  QpSide& p = *e.peer;
  std::vector<uint8_t> tgt(p.mem.expect(p.tgt_off), p.mem.expect(p.tgt_off) + p.tgt_len);
  uint64_t slots[kAtomicSlots];
  std::memcpy(slots, p.slot_init, sizeof(slots));
  // WRITEs land one after another after a never-written head of max_read bytes
  // (tgt_len - sum of write lengths). A READ reads only the head and what
  // earlier WRITEs wrote: IBA 10.8.3.3 orders a READ after an earlier WRITE,
  // but a later WRITE may overtake an earlier READ unless it is fenced, so a
  // READ never reads bytes a later WRITE writes.
  uint32_t write_len = 0;
  for (const Op& op : e.ops) write_len += is_rdma_write(op.opcode) ? op.len : 0;
  const uint32_t head = p.tgt_len - write_len;
  uint32_t write_cursor = head, land_cursor = 0, recv_k = 0;
  for (uint32_t i = 0; i < e.ops.size(); ++i) {
    Op& op = e.ops[i];
    if (consumes_recv(op.opcode) && e.type == QpType::kRc) op.recv_index = int32_t(recv_k++);
    switch (op.opcode) {
      case WrOpcode::kSend:
      case WrOpcode::kSendWithImm:
      case WrOpcode::kSendWithInv:
        op.local_off = e.src_off + uint32_t(rng_.below(kSrcBytes - op.len + 1));
        break;
      case WrOpcode::kRdmaWrite:
      case WrOpcode::kRdmaWriteWithImm:
        op.local_off = e.src_off + uint32_t(rng_.below(kSrcBytes - op.len + 1));
        op.remote_off = p.tgt_off + write_cursor;
        std::memcpy(tgt.data() + write_cursor, e.mem.expect(op.local_off), op.len);
        write_cursor += op.len;
        break;
      case WrOpcode::kRdmaRead: {
        const uint32_t at = uint32_t(rng_.below(write_cursor - op.len + 1));
        op.remote_off = p.tgt_off + at;
        op.expect_read.assign(tgt.begin() + at, tgt.begin() + at + op.len);
        op.local_off = e.land_off + land_cursor;
        land_cursor += (op.len + 7) & ~7u;
        break;
      }
      case WrOpcode::kAtomicCmpAndSwp:
      case WrOpcode::kAtomicFetchAndAdd: {
        op.slot = uint32_t(rng_.below(kAtomicSlots));
        op.remote_off = p.atom_off + 8 * op.slot;
        op.local_off = e.land_off + land_cursor;
        land_cursor += 8;
        uint64_t& v = slots[op.slot];
        op.expect_orig = v;
        if (op.opcode == WrOpcode::kAtomicFetchAndAdd) {
          op.compare_add = rng_.chance(0.3) ? uint64_t(rng_.below(16)) : rng_.next();
          v += op.compare_add;
        } else {
          op.compare_add = rng_.chance(0.5) ? v : rng_.next();
          op.swap = rng_.next();
          if (v == op.compare_add) v = op.swap;
        }
        p.slot_hist[op.slot].push_back({i, v});
        break;
      }
      case WrOpcode::kLocalInv:
        break;
    }
  }
}

std::string SeedRun::label(const QpSide& e) const {
  static constexpr const char* kType[] = {"", "", "RC", "UC", "UD"};
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s pair %u side %c (dev%u QP 0x%x)", kType[size_t(e.type)], e.id / 2,
                e.id % 2 ? 'B' : 'A', e.dev == devs_[0].get() ? 0u : 1u, e.qp != nullptr ? e.qp->qp_num : 0u);
  return buf;
}

bool SeedRun::create_qp(QpSide& e) {
  Context* ctx = e.dev->ctx.get();
  auto scq = uroce::create_cq(ctx, e.sq_depth * 2 + 8);
  auto rcq = uroce::create_cq(ctx, uint32_t(e.recvs.size()) + 8);
  if (!scq.ok() || !rcq.ok()) return false;
  e.scq = *scq;
  e.rcq = *rcq;
  QpInitAttr ia;
  ia.send_cq = e.scq;
  ia.recv_cq = e.rcq;
  ia.cap.max_send_wr = e.sq_depth;
  ia.cap.max_recv_wr = std::max<uint32_t>(uint32_t(e.recvs.size()), 1);
  ia.qp_type = e.type;
  ia.sq_sig_all = true;
  auto qp = uroce::create_qp(e.dev->pd, ia);
  if (!qp.ok()) {
    violation("setup", "create_qp: %s", qp.status().message());
    return false;
  }
  e.qp = *qp;
  trace_qp_if(e.qp, cfg_.trace_qpn);
  auto mr = reg_mr(e.dev->pd, e.mem.mr(), e.mem.area(),
                   kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
  if (!mr.ok()) {
    violation("setup", "reg_mr: %s", mr.status().message());
    return false;
  }
  e.mr = *mr;
  return true;
}

bool SeedRun::connect(QpSide& e) {
  const QpSide& p = *e.peer;
  AhAttr ah;
  ah.dgid = p.dev->gid;
  ah.dmac = p.dev->mac;
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qkey = 0x11111111;
  a.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  uint32_t mask = kQpState | kQpPkeyIndex | kQpPort;
  mask |= e.type == QpType::kUd ? uint32_t(kQpQkey) : uint32_t(kQpAccessFlags);
  if (e.type == QpType::kUc) a.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite;
  Status s = modify_qp(e.qp, a, mask);
  if (!s.ok()) {
    violation("setup", "modify_qp INIT (%s QP): %s", e.type == QpType::kUd ? "UD" : "RC/UC", s.message());
    return false;
  }
  // Starting PSNs: often just before the 24-bit wrap.
  const uint32_t rq_psn = rng_.chance(0.3) ? uint32_t(0xffffff - rng_.below(48)) : uint32_t(rng_.below(1u << 24));
  e.rq_psn = rq_psn;
  a = {};
  a.qp_state = QpState::kRtr;
  mask = kQpState;
  if (e.type != QpType::kUd) {
    a.path_mtu = mtu_code_;
    a.dest_qp_num = p.qp->qp_num;
    a.rq_psn = rq_psn;
    a.ah_attr = ah;
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (e.type == QpType::kRc) {
      a.max_dest_rd_atomic = 16;
      a.min_rnr_timer = 1;
      mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
      if (cfg_.ext != ExtMode::kOff) {  // both sides of the pair ask for the same
        a.ext = qp_ext(cfg_.ext, cfg_.paths);
        mask |= kQpExt;
      }
    }
  }
  s = modify_qp(e.qp, a, mask);
  if (!s.ok()) {
    violation("setup", "modify_qp RTR: %s", s.message());
    return false;
  }
  return true;
}

// Posts a random batch of e's remaining ops while its send queue has room.

bool SeedRun::setup() {
  // Fabric: random link speeds and delays, seed-drawn fault rates.
  loopback::FabricConfig fc;
  fc.seed = seed_;
  fc.pcap_path = pcap_;
  fc.copy_pool_size = 512;
  auto fabric = Fabric::create(fc);
  if (!fabric.ok()) {
    violation("setup", "fabric: %s", fabric.status().message());
    return false;
  }
  fabric_ = std::move(fabric).value();
  FaultConfig faults;
  auto draw = [&](double max) { return rng_.chance(0.75) ? max * rng_.uniform01() : 0.0; };
  faults.loss = draw(cfg_.loss);
  faults.reorder = draw(cfg_.reorder);
  faults.reorder_delay_ns = rng_.range(500, 20'000);
  faults.duplicate = draw(cfg_.dup);
  faults.corrupt = draw(cfg_.corrupt);
  faults.jitter_ns = rng_.chance(0.3) ? rng_.range(1, 2000) : 0;
  static constexpr uint64_t kRates[] = {10'000'000'000, 25'000'000'000, 40'000'000'000, 100'000'000'000};
  mtu_code_ = Mtu(rng_.range(1, 5));
  mtu_ = mtu_bytes(mtu_code_);
  // Local ACK timeout 524 us .. 4.2 ms: above the worst queueing delay the
  // links below can build (NIC queue 256 KB + switch buffer <= 100 us of drain).
  timeout_code_ = uint8_t(rng_.range(7, 10));
  const bool ipv6 = rng_.chance(0.3);
  for (uint32_t d = 0; d < 2; ++d) {
    PortConfig pc;
    pc.link.rate_bps = kRates[rng_.below(4)];
    pc.link.prop_delay_ns = rng_.range(100, 2000);
    pc.link.buffer_bytes = uint32_t(rng_.range(32 * 1024, pc.link.rate_bps / 8 / 10'000));  // <= 100 us
    pc.faults = faults;
    pc.pool_size = 2048;
    auto dev = std::make_unique<Dev>();
    dev->mac = MacAddr{{0x02, 0x00, 0x00, 0x00, uint8_t(seed_), uint8_t(d + 1)}};
    const uint8_t v4[4] = {10, 0, uint8_t(seed_), uint8_t(d + 1)};
    dev->gid = Gid::from_ipv4(v4);
    if (ipv6) {
      dev->gid = Gid{};
      dev->gid.raw[0] = 0xfe;
      dev->gid.raw[1] = 0x80;
      dev->gid.raw[15] = uint8_t(d + 1);
    }
    auto port = fabric_->add_port(dev->mac, pc);
    if (!port.ok()) {
      violation("setup", "add_port: %s", port.status().message());
      return false;
    }
    dev->port = *port;
    DeviceConfig dc;
    dc.mac = dev->mac;
    dc.gid = dev->gid;
    dc.key_seed = derive_seed(seed_, 100 + d) | 1;
    auto ctx = open_device(*dev->port, dc);
    if (!ctx.ok()) {
      violation("setup", "open_device: %s", ctx.status().message());
      return false;
    }
    dev->ctx = std::move(ctx).value();
    auto pd = alloc_pd(dev->ctx.get());
    if (!pd.ok()) {
      violation("setup", "alloc_pd: %s", pd.status().message());
      return false;
    }
    dev->pd = *pd;
    devs_.push_back(std::move(dev));
  }
  faults_on_ = faults.loss > 0 || faults.corrupt > 0 || faults.reorder > 0 || faults.duplicate > 0;
  net_dup_or_reorder_ = faults.reorder > 0 || faults.duplicate > 0;
  if (rng_.chance(cfg_.link_flap)) {
    const uint64_t at = rng_.range(0, 200'000);
    const uint32_t port = uint32_t(rng_.below(2));
    fabric_->schedule_link(port, at, false);
    fabric_->schedule_link(port, at + rng_.range(20'000, 5'000'000), true);
    faults_on_ = true;
  }

  // QP pairs: RC x qps, one UC, one UD. Some RC pairs loop back on one device.
  const uint32_t pairs = cfg_.qps + 2;
  for (uint32_t q = 0; q < pairs; ++q) {
    const QpType type = q < cfg_.qps ? QpType::kRc : q == cfg_.qps ? QpType::kUc : QpType::kUd;
    const bool same_dev = type == QpType::kRc && rng_.chance(0.1);
    auto a = std::make_unique<QpSide>();
    auto b = std::make_unique<QpSide>();
    a->peer = b.get();
    b->peer = a.get();
    a->dev = devs_[0].get();
    b->dev = devs_[same_dev ? 0 : 1].get();
    for (QpSide* e : {a.get(), b.get()}) {
      e->id = uint32_t(eps_.size() + (e == b.get()));
      e->type = type;
      e->sq_depth = uint32_t(rng_.range(2, 32));
      e->retry_cnt = rng_.chance(0.8) ? 7 : uint8_t(rng_.range(0, 3));  // drawn either way: same seed, same run
      if (cfg_.retry_cnt >= 0) e->retry_cnt = uint8_t(cfg_.retry_cnt);
      if (type == QpType::kRc) ++st_.rc_qps;
    }
    eps_.push_back(std::move(a));
    eps_.push_back(std::move(b));
  }
  for (auto& e : eps_) generate_ops(*e);
  for (auto& e : eps_) e->uc_delivered.assign(e->peer->recv_ops.size(), false);
  for (auto& e : eps_) layout(*e);
  for (auto& e : eps_) model(*e);
  for (auto& e : eps_) {
    if (!create_qp(*e)) return false;
  }
  for (auto& e : eps_) {
    if (e->type == QpType::kUd) {
      AhAttr ah;
      ah.dgid = e->peer->dev->gid;
      ah.dmac = e->peer->dev->mac;
      auto r = create_ah(e->dev->pd, ah);
      if (!r.ok()) {
        violation("setup", "create_ah: %s", r.status().message());
        return false;
      }
      e->ah = *r;
    }
    if (!connect(*e)) return false;
    // Every receive is posted up front: RNR is not part of this workload.
    std::vector<RecvWr> rwrs(e->recvs.size());
    std::vector<Sge> sges(e->recvs.size());
    for (size_t k = 0; k < e->recvs.size(); ++k) {
      sges[k] = {uint64_t(uintptr_t(e->mem.mr() + e->recvs[k].off)), e->recvs[k].len, e->mr->lkey};
      rwrs[k].wr_id = uint64_t(e->id) << 32 | k;
      rwrs[k].sg_list = &sges[k];
      rwrs[k].num_sge = 1;
      rwrs[k].next = k + 1 < rwrs.size() ? &rwrs[k + 1] : nullptr;
    }
    RecvWr* bad = nullptr;
    if (!rwrs.empty()) {
      if (Status s = post_recv(e->qp, rwrs.data(), &bad); !s.ok()) {
        violation("setup", "post_recv: %s", s.message());
        return false;
      }
    }
  }
  for (auto& e : eps_) {
    QpAttr a;
    a.qp_state = QpState::kRts;
    a.sq_psn = e->peer->rq_psn;  // UD: the peer does not check it
    uint32_t mask = kQpState | kQpSqPsn;
    if (e->type == QpType::kRc) {
      a.timeout = timeout_code_;
      a.retry_cnt = e->retry_cnt;
      a.rnr_retry = 7;
      a.max_rd_atomic = uint8_t(rng_.range(1, 16));
      mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
    }
    if (Status s = modify_qp(e->qp, a, mask); !s.ok()) {
      violation("setup", "modify_qp RTS: %s", s.message());
      return false;
    }
  }
  return true;
}

}  // namespace uroce::apps::sim
