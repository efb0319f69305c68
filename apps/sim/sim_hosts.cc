// `uroce sim`: the scenarios' hosts and RC QP pairs (sim_hosts.h). Control path.
#include "apps/sim/sim_hosts.h"

#include <algorithm>
#include <cstdio>

namespace uroce::apps::sim {

Status connect_rc(Qp* qp, const AhAttr& peer, uint32_t peer_qpn, const RcConnect& c) {
  QpAttr q;
  q.qp_state = QpState::kInit;
  q.port_num = 1;
  q.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
  if (Status st = modify_qp(qp, q, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags); !st.ok()) return st;
  q = {};
  q.qp_state = QpState::kRtr;
  q.path_mtu = c.mtu;
  q.dest_qp_num = peer_qpn;
  q.rq_psn = 0;
  q.ah_attr = peer;
  q.max_dest_rd_atomic = c.rd_atomic;
  q.min_rnr_timer = 1;
  q.ext = c.ext;
  const uint32_t rtr = kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
  if (Status st = modify_qp(qp, q, rtr | (c.use_ext ? uint32_t(kQpExt) : 0u)); !st.ok()) return st;
  q = {};
  q.qp_state = QpState::kRts;
  q.sq_psn = 0;
  q.timeout = c.timeout;
  q.retry_cnt = c.retry_cnt;
  q.rnr_retry = 7;
  q.max_rd_atomic = c.rd_atomic;
  return modify_qp(qp, q, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic);
}

Status open_host(loopback::Fabric& fabric, const loopback::PortConfig& pc, const DeviceConfig& dc, size_t mem_bytes,
                 uint8_t fill, SimHost& out) {
  auto fail = [](const char* what, const Status& s) {
    std::fprintf(stderr, "uroce sim: %s: %s\n", what, s.message());
    return s;
  };
  out.mac = dc.mac;
  out.gid = dc.gid;
  auto port = fabric.add_port(dc.mac, pc);
  if (!port.ok()) return fail("add_port", port.status());
  out.port = *port;
  auto ctx = open_device(*out.port, dc);
  if (!ctx.ok()) return fail("open_device", ctx.status());
  out.ctx = std::move(ctx).value();
  auto pd = alloc_pd(out.ctx.get());
  if (!pd.ok()) return fail("alloc_pd", pd.status());
  out.pd = *pd;
  out.mem = std::make_unique<uint8_t[]>(mem_bytes);
  std::fill_n(out.mem.get(), mem_bytes, fill);
  auto mr = reg_mr(out.pd, out.mem.get(), mem_bytes, kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
  if (!mr.ok()) return fail("reg_mr", mr.status());
  out.mr = *mr;
  return Status();
}

Status create_rc_pair(const SimHost& sender, const SimHost& receiver, uint32_t sq_depth, const RcConnect& c, RcPair& out) {
  auto scq = create_cq(sender.pd->context, sq_depth * 2 + 8);
  if (!scq.ok()) return scq.status();
  auto rcq = create_cq(receiver.pd->context, sq_depth * 2 + 8);
  if (!rcq.ok()) return rcq.status();
  out.scq = *scq;
  out.rcq = *rcq;
  QpInitAttr ia;
  ia.qp_type = QpType::kRc;
  ia.sq_sig_all = true;
  ia.cap.max_send_wr = sq_depth;
  ia.cap.max_recv_wr = 1;
  ia.send_cq = ia.recv_cq = out.scq;
  auto sqp = create_qp(sender.pd, ia);
  if (!sqp.ok()) return sqp.status();
  ia.send_cq = ia.recv_cq = out.rcq;
  auto rqp = create_qp(receiver.pd, ia);
  if (!rqp.ok()) return rqp.status();
  out.sqp = *sqp;
  out.rqp = *rqp;
  if (Status st = connect_rc(out.sqp, receiver.addr(), out.rqp->qp_num, c); !st.ok()) return st;
  return connect_rc(out.rqp, sender.addr(), out.sqp->qp_num, c);
}

}  // namespace uroce::apps::sim
