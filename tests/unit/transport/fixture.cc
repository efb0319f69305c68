// Test fixture: two connected devices on a virtual clock.
#include "tests/unit/transport/fixture.h"

#include "stack/device/context.h"
#include "tests/unit/eal_env.h"

namespace uroce::test {

namespace {

constexpr uint32_t kAllAccess = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

}  // namespace

Side::Side(uint8_t id) : mac{{0x02, 0, 0, 0, 0, id}}, port(mac, 9000), buf(1 << 20) {
  const uint8_t v4[4] = {10, 0, 0, id};
  gid = Gid::from_ipv4(v4);
}

Status Side::post_recv(uint64_t wr_id, size_t off, uint32_t len) {
  Sge g = sge(off, len);
  RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = &g;
  wr.num_sge = 1;
  return srq ? post_srq_recv(srq, &wr, nullptr) : uroce::post_recv(qp, &wr, nullptr);
}

void fill(std::vector<uint8_t>& buf, size_t off, size_t len, uint8_t seed) {
  for (size_t i = 0; i < len; ++i) buf[off + i] = uint8_t(seed + i * 7 + (i >> 8));
}

void Pair::open(const PairOptions& o) {
  open_sides(o);
  if (HasFatalFailure()) return;
  if (o.b_srq) {
    SrqInitAttr sa;
    sa.max_wr = o.max_recv_wr;
    b->srq = must(create_srq(b->pd, sa));
  }
  make_qps(o, a->pd, b->pd, &a->qp, &b->qp);
}

void Pair::open_sides(const PairOptions& o) {
  opt = o;
  a = std::make_unique<Side>(1);
  b = std::make_unique<Side>(2);
  TestPort::connect(a->port, b->port);
  for (Side* s : {a.get(), b.get()}) {
    DeviceConfig cfg;
    cfg.gid = s->gid;
    cfg.max_qp = 64;
    cfg.key_seed = 0x5eed0000u + s->mac.b[5];
    if (o.device) o.device(cfg);
    s->port.multiseg = o.port_multiseg;
    auto ctx = open_device(s->port, cfg);
    ASSERT_TRUE(ctx.ok()) << ctx.status().message();
    s->ctx = std::move(*ctx);
    if (o.gids) o.gids(*s);
    s->pd = must(alloc_pd(s->ctx.get()));
    s->scq = must(create_cq(s->ctx.get(), o.cqe));
    s->rcq = must(create_cq(s->ctx.get(), o.cqe));
    auto mr = reg_mr(s->pd, s->buf.data(), s->buf.size(), kAllAccess);
    ASSERT_TRUE(mr.ok());
    s->mr = *mr;
  }
}

void Pair::make_qps(const PairOptions& o, Pd* pda, Pd* pdb, Qp** qa, Qp** qb) {
  Side* sides[2] = {a.get(), b.get()};
  Qp* qps[2] = {};
  Pd* pds[2] = {pda, pdb};
  for (int i = 0; i < 2; ++i) {
    QpInitAttr ia;
    ia.send_cq = sides[i]->scq;
    ia.recv_cq = sides[i]->rcq;
    ia.srq = i == 1 && o.b_srq ? b->srq : nullptr;
    ia.qp_type = o.type;
    ia.sq_sig_all = o.sq_sig_all;
    ia.cap.max_send_wr = o.max_send_wr;
    ia.cap.max_recv_wr = o.max_recv_wr;
    ia.cap.max_send_sge = 4;
    ia.cap.max_recv_sge = 4;
    ia.cap.max_inline_data = o.max_inline;
    auto qp = create_qp(pds[i], ia);
    ASSERT_TRUE(qp.ok()) << qp.status().message();
    qps[i] = *qp;
  }
  for (int i = 0; i < 2; ++i) {
    Side& peer = *sides[1 - i];
    const bool ud = o.type == QpType::kUd;
    QpAttr at;
    at.qp_state = QpState::kInit;
    at.qp_access_flags = o.access;
    at.qkey = o.qkey;
    ASSERT_TRUE(modify_qp(qps[i], at, kQpState | kQpPkeyIndex | kQpPort | (ud ? kQpQkey : kQpAccessFlags)).ok());
    at.qp_state = QpState::kRtr;
    at.path_mtu = o.mtu;
    at.dest_qp_num = qps[1 - i]->qp_num;
    at.rq_psn = i == 0 ? o.b_sq_psn : o.a_sq_psn;
    at.max_dest_rd_atomic = o.max_dest_rd_atomic;
    at.min_rnr_timer = o.min_rnr_timer;
    const net::GidEntry* dst = peer.ctx->net->gids().at(o.sgid_index);
    ASSERT_NE(dst, nullptr) << "the peer has no GID at index " << int(o.sgid_index);
    at.ah_attr.dgid = dst->gid;
    at.ah_attr.dmac = dst->mac;
    at.ah_attr.sgid_index = o.sgid_index;
    const uint32_t rtr = o.type == QpType::kRc ? kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                                     kQpMaxDestRdAtomic | kQpMinRnrTimer
                         : o.type == QpType::kUc ? kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn
                                                 : 0u;
    at.ext = o.ext;
    ASSERT_TRUE(modify_qp(qps[i], at, kQpState | rtr | (o.set_ext ? kQpExt : 0u)).ok());
    if (i == 1 && o.b_stops_in_rtr) continue;
    at.qp_state = QpState::kRts;
    at.sq_psn = i == 0 ? o.a_sq_psn : o.b_sq_psn;
    at.timeout = o.timeout;
    at.retry_cnt = o.retry_cnt;
    at.rnr_retry = o.rnr_retry;
    at.max_rd_atomic = o.max_rd_atomic;
    const uint32_t rts = o.type == QpType::kRc
                             ? kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic
                             : kQpSqPsn;
    ASSERT_TRUE(modify_qp(qps[i], at, kQpState | rts).ok());
  }
  *qa = qps[0];
  *qb = qps[1];
}

void Pair::run_for(uint64_t ns) {
  for (uint64_t end = now + ns; now < end; now += 1000) {
    poll(a->ctx.get(), now);
    poll(b->ctx.get(), now);
  }
}

bool Pair::run_until(const std::function<bool()>& pred, uint64_t max_ns) {
  for (uint64_t end = now + max_ns; now < end; now += 1000) {
    if (pred()) return true;
    poll(a->ctx.get(), now);
    poll(b->ctx.get(), now);
  }
  return pred();
}

Wc Pair::wait_wc(Cq* cq, uint64_t max_ns) {
  Wc wc{};
  const bool got = run_until([&] { return poll_cq(cq, 1, &wc) == 1; }, max_ns);
  EXPECT_TRUE(got) << "no completion within " << max_ns << " ns";
  if (!got) wc.status = WcStatus::kGeneralErr;
  return wc;
}

std::vector<Wc> Pair::drain(Cq* cq, uint64_t ns) {
  run_for(ns);
  std::vector<Wc> out;
  Wc wc{};
  while (poll_cq(cq, 1, &wc) == 1) out.push_back(wc);
  return out;
}

Status Pair::post(WrOpcode op, uint64_t wr_id, size_t local_off, uint32_t len, size_t remote_off, uint32_t flags,
                  Qp* qp) {
  Sge g = a->sge(local_off, len);
  SendWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = &g;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.rdma.remote_addr = b->addr(remote_off);
  wr.rdma.rkey = b->mr->rkey;
  wr.atomic.remote_addr = b->addr(remote_off);
  wr.atomic.rkey = b->mr->rkey;
  return post_send(qp ? qp : a->qp, &wr, nullptr);
}

}  // namespace uroce::test
