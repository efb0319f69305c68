// `uroce demo`, one process's side: the port (with --drop-every's fault
// hook), the device, the RC, UC and UD QPs and the memory the peer targets
// (DemoPeer::open), and the exchange of Info over the out-of-band channel
// that takes the QPs to RTS (DemoPeer::connect). Control path.
#include "apps/demo/demo.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_cycles.h>

#include <uroce/verbs.h>

#include "apps/common/endpoint.h"

namespace uroce::apps::demo {

bool DemoPeer::open(std::string& err) {
  EndpointConfig ec;
  ec.driver = cfg_.driver;
  ec.dev = cfg_.dev;
  ec.addrs.gid4 = cfg_.gid;
  ec.addrs.mac = cfg_.mac;
  ec.set_port_mac = true;
  ec.port_mtu = kRoceJumboMtu;
  ec.timeout_s = cfg_.timeout_s;
  ec.pcap = cfg_.pcap;
  ec.max_qp = 16;
  ec.drop_every = cfg_.drop_every;
  ec.key_seed = splitmix64_of(cfg_.seed + (cfg_.server ? 1 : 2)) | 1;
  if (!endpoint_.open(ec, err)) return false;  // the port, the device (polled once) and the PD
  pd_ = endpoint_.pd();

  // Memory: [atomic word page][area the peer targets][local sources/results].
  const uint64_t biggest = cfg_.sizes.empty() ? 0 : *std::max_element(cfg_.sizes.begin(), cfg_.sizes.end());
  area_bytes_ = std::max<uint64_t>({cfg_.stream_bytes, biggest * 4, 1u << 20});
  area_bytes_ = (area_bytes_ + 4095) & ~uint64_t(4095);
  const size_t total = kAtomicArea + 2 * area_bytes_;
  mem_ = page_buffer(total);
  std::memset(mem_.get(), 0, total);  // touch every page before anything is timed

  auto scq = create_cq(endpoint_.ctx(), kCqDepth);
  auto rcq = create_cq(endpoint_.ctx(), kCqDepth);
  if (!scq.ok() || !rcq.ok()) {
    err = "alloc_pd/create_cq failed";
    return false;
  }
  scq_ = *scq;
  rcq_ = *rcq;
  auto mr = reg_mr(pd_, mem_.get(), total,
                   kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
  if (!mr.ok()) {
    err = strf("reg_mr: %s", mr.status().message());
    return false;
  }
  mr_ = *mr;
  for (QpType t : {QpType::kRc, QpType::kUc, QpType::kUd}) {
    QpInitAttr ia;
    ia.send_cq = scq_;
    ia.recv_cq = rcq_;
    ia.cap.max_send_wr = kSqDepth;
    ia.cap.max_recv_wr = kRqDepth;
    ia.qp_type = t;
    auto q = create_qp(pd_, ia);
    if (!q.ok()) {
      err = strf("create_qp %s: %s", type_name(t).data(), q.status().message());
      return false;
    }
    (t == QpType::kRc ? rc_ : t == QpType::kUc ? uc_ : ud_) = *q;
  }
  path_mtu_ = largest_path_mtu(endpoint_.port_info().mtu);
  if (cfg_.mtu) path_mtu_ = std::min(path_mtu_, cfg_.mtu);
  me_.qpn[0] = rc_->qp_num;
  me_.qpn[1] = uc_->qp_num;
  me_.qpn[2] = ud_->qp_num;
  for (int i = 0; i < 3; ++i) me_.psn[i] = uint32_t(splitmix64_of(cfg_.seed * 7 + uint64_t(i) + (cfg_.server ? 100 : 200))) & 0xffffff;
  me_.rkey = mr_->rkey;
  me_.path_mtu = path_mtu_;
  me_.area_addr = addr_of(area());
  me_.area_bytes = area_bytes_;
  me_.atomic_addr = addr_of(atomic_word());
  std::memcpy(me_.mac, endpoint_.mac().b, 6);
  std::memcpy(me_.gid, cfg_.gid.raw, 16);
  return true;
}

bool DemoPeer::connect(Oob& oob, std::string& err) {
  if (!oob.send_bytes(&me_, sizeof(me_))) {
    err = "out-of-band send failed";
    return false;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(cfg_.timeout_s);
  while (!oob.try_recv(&peer_, sizeof(peer_))) {
    if (oob.eof() || g_stop || std::chrono::steady_clock::now() > end) {
      err = g_stop ? "interrupted" : "no endpoint info from the peer";
      return false;
    }
    pump();
  }
  if (peer_.magic != kMagic) {
    err = "the peer is not a uroce demo of this version";
    return false;
  }
  path_mtu_ = std::min(path_mtu_, peer_.path_mtu);
  Mtu mtu = Mtu::k256;
  for (Mtu m : {Mtu::k256, Mtu::k512, Mtu::k1024, Mtu::k2048, Mtu::k4096}) {
    if (mtu_bytes(m) <= path_mtu_) mtu = m;
  }
  path_mtu_ = mtu_bytes(mtu);
  AhAttr ah;
  std::memcpy(ah.dgid.raw, peer_.gid, 16);
  std::memcpy(ah.dmac.b, peer_.mac, 6);
  constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  for (int i = 0; i < 3; ++i) {
    Qp* q = i == 0 ? rc_ : i == 1 ? uc_ : ud_;
    const QpType t = q->qp_type;
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qkey = kQkey;
    a.qp_access_flags = t == QpType::kUc ? uint32_t(kAccessLocalWrite | kAccessRemoteWrite) : kAll;
    uint32_t mask = kQpState | kQpPkeyIndex | kQpPort | (t == QpType::kUd ? uint32_t(kQpQkey) : uint32_t(kQpAccessFlags));
    Status s = modify_qp(q, a, mask);
    if (s.ok()) {
      a = {};
      a.qp_state = QpState::kRtr;
      mask = kQpState;
      if (t != QpType::kUd) {
        a.path_mtu = mtu;
        a.dest_qp_num = peer_.qpn[i];
        a.rq_psn = peer_.psn[i];
        a.ah_attr = ah;
        mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
        if (t == QpType::kRc) {
          a.max_dest_rd_atomic = 16;
          a.min_rnr_timer = 1;
          mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
        }
      }
      s = modify_qp(q, a, mask);
    }
    if (s.ok()) {
      a = {};
      a.qp_state = QpState::kRts;
      a.sq_psn = me_.psn[i];
      mask = kQpState | kQpSqPsn;
      if (t == QpType::kRc) {
        a.timeout = cfg_.qp_timeout;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 16;
        mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
      }
      s = modify_qp(q, a, mask);
    }
    if (!s.ok()) {
      err = strf("modify_qp %s: %s", type_name(t).data(), s.message());
      return false;
    }
  }
  auto r = create_ah(pd_, ah);
  if (!r.ok()) {
    err = strf("create_ah: %s", r.status().message());
    return false;
  }
  ah_ = *r;
  return true;
}

}  // namespace uroce::apps::demo
