// The target helper on uroce itself (`uroce conform --serve PORT`): an
// ordinary uroce endpoint that, for each case the tester sets up, makes a
// fresh RC QP connected to the tester's QPN, posts the receives the case
// asks for, and reports what the tester needs and, later, what the target
// saw (control.h). With --self-test-breaks it also runs the broken variant a
// case asks for (breaks.h); without it such a setup is refused.
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <uroce/cm.h>
#include <uroce/wr.h>

#include "apps/common/addr_text.h"
#include "apps/common/endpoint.h"
#include "apps/common/launch.h"
#include "apps/common/oob.h"
#include "apps/common/page_buffer.h"
#include "apps/conform/breaks.h"
#include "apps/conform/control.h"
#include "apps/conform/target.h"

namespace uroce::apps::conform {

namespace {

constexpr uint32_t kRegionBytes = 64 * 1024;  // the remote-access region; the receives use its second half
constexpr uint32_t kRecvBytes = 256;
constexpr uint32_t kMaxRecvs = 64;
constexpr uint8_t kMinRnrTimer = 5;  // 0.04 ms (IBA Table 45), distinct from the 0 a broken variant sends
constexpr uint32_t kFirstSqPsn = 0x3000;
constexpr uint16_t kCmPort = 7471;  // the rdma_cm listener's port
constexpr uint32_t kQkey = kConformQkey;  // the UD QPs' Q_Key (the broken variant rx_any_qkey writes it)

class Helper {
 public:
  Helper(Endpoint& ep, BreakIo* breaks, CcAlgorithm cc)
      : ep_(ep), breaks_(breaks), cc_(cc), buf_(page_buffer(kRegionBytes)) {}
  ~Helper() {
    for (CmId* id : requests_) (void)cm_destroy_id(id);
    if (listener_) (void)cm_destroy_id(listener_);
    drop_qp();
    if (mr_) (void)dereg_mr(mr_);
    if (ro_mr_) (void)dereg_mr(ro_mr_);
    if (pd2_mr_) (void)dereg_mr(pd2_mr_);
    if (pd2_) (void)dealloc_pd(pd2_);
    if (cq_) (void)destroy_cq(cq_);
  }

  bool open(std::string& err) {
    auto cq = create_cq(ep_.ctx(), 2 * kMaxRecvs);
    if (!cq.ok()) {
      err = std::string("create_cq: ") + cq.status().message();
      return false;
    }
    cq_ = *cq;
    auto mr = reg_mr(ep_.pd(), buf_.get(), kRegionBytes,
                     kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
    if (!mr.ok()) {
      err = std::string("reg_mr: ") + mr.status().message();
      return false;
    }
    mr_ = *mr;
    // The same memory again, remote read only; and in a second PD with every
    // right (the R_Key cases: missing access right, wrong PD).
    auto ro = reg_mr(ep_.pd(), buf_.get(), kRegionBytes, kAccessRemoteRead);
    auto pd2 = alloc_pd(ep_.ctx());
    if (!ro.ok() || !pd2.ok()) {
      err = "reg_mr / alloc_pd for the R_Key cases failed";
      return false;
    }
    ro_mr_ = *ro;
    pd2_ = *pd2;
    auto other = reg_mr(pd2_, buf_.get(), kRegionBytes,
                        kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
    if (!other.ok()) {
      err = std::string("reg_mr in a second PD: ") + other.status().message();
      return false;
    }
    pd2_mr_ = *other;
    // An rdma_cm listener (TCP port space) for the CM cases: the target's CM
    // answers REQs, DREQs and the like on QP1.
    auto id = cm_create_id(ep_.ctx(), nullptr, CmPortSpace::kTcp);
    if (!id.ok()) {
      err = std::string("cm_create_id: ") + id.status().message();
      return false;
    }
    listener_ = *id;
    if (Status st = cm_bind_addr(listener_, SockAddr{*ep_.gid(0), kCmPort}); !st.ok()) {
      err = std::string("cm_bind_addr: ") + st.message();
      return false;
    }
    if (Status st = cm_listen(listener_, 4); !st.ok()) {
      err = std::string("cm_listen: ") + st.message();
      return false;
    }
    return true;
  }

  /// The answer to one message.
  std::string handle(const Msg& m) {
    if (m.verb == "setup") return setup(m);
    if (m.verb == "state") return state();
    if (m.verb == "post") return post(m);
    return fail("unknown_verb_" + m.verb);
  }

 private:
  std::string refuse(std::string_view why) { return format_msg("refused", {{"reason", std::string(why)}}); }
  std::string fail(std::string_view why) { return format_msg("error", {{"reason", std::string(why)}}); }

  std::string setup(const Msg& m) {
    const auto mac = parse_mac(m.get("mac"));
    const auto gid = parse_ip_gid(m.get("ip"), false);
    const auto qpn = m.num("qpn"), psn = m.num("psn"), recvs = m.num("recvs");
    const auto brk = break_from_name(m.get("break").empty() ? "none" : m.get("break"));
    const auto timeout = num_or(m, "timeout", 14), retry_cnt = num_or(m, "retry_cnt", 7),
               rnr_retry = num_or(m, "rnr_retry", 7);
    const std::string_view type = m.get("type").empty() ? "rc" : m.get("type");
    if (!mac || !gid || !qpn || !psn || !recvs || !brk || !timeout || !retry_cnt || !rnr_retry ||
        (type != "rc" && type != "ud")) {
      return fail("bad_setup_message");
    }
    if (*recvs > kMaxRecvs) return refuse("more_than_64_receives");
    if (*brk != Break::kNone && !breaks_) return fail("broken_variants_need_--self-test-breaks");
    drop_qp();
    if (breaks_) breaks_->set(*brk);
    std::memset(buf_.get(), 0, kRegionBytes);
    QpInitAttr ia;
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.sq_sig_all = true;
    ia.cap.max_send_wr = 16;
    ia.cap.max_recv_wr = kMaxRecvs;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.qp_type = type == "ud" ? QpType::kUd : QpType::kRc;
    auto qp = create_qp(ep_.pd(), ia);
    if (!qp.ok()) return fail("create_qp_failed");
    qp_ = *qp;
    std::string err;
    if (!init_qp(qp_, kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic, kQkey, err)) {
      return fail("init_qp_failed");
    }
    for (uint32_t i = 0; i < *recvs; ++i) {
      Sge sge{.addr = uint64_t(uintptr_t(recv_area() + i * kRecvBytes)), .length = kRecvBytes, .lkey = mr_->lkey};
      RecvWr wr{.wr_id = i, .sg_list = &sge, .num_sge = 1};
      RecvWr* bad = nullptr;
      if (!post_recv(qp_, &wr, &bad).ok()) return fail("post_recv_failed");
    }
    QpConnect c;
    c.ah.dgid = *gid;
    c.ah.dmac = *mac;
    c.ah.sgid_index = 0;
    c.dest_qpn = uint32_t(*qpn);
    c.rq_psn = uint32_t(*psn);
    c.sq_psn = kFirstSqPsn;
    c.max_dest_rd_atomic = 4;
    c.max_rd_atomic = 4;
    c.min_rnr_timer = kMinRnrTimer;
    c.timeout = uint8_t(*timeout);
    c.retry_cnt = uint8_t(*retry_cnt);
    c.rnr_retry = uint8_t(*rnr_retry);
    if (ia.qp_type == QpType::kUd ? !ud_ready(err) : !connect_qp(qp_, c, err)) return fail("connect_qp_failed");
    completions_.clear();
    poll_cm();
    conn_requests_ = 0;
    const Gid& ours = *ep_.gid(0);
    return format_msg("ready", {{"mac", mac_str(ep_.mac())},
                                {"ip", ipv4_text(ours)},
                                {"qpn", std::to_string(qp_->qp_num)},
                                {"psn", std::to_string(kFirstSqPsn)},
                                {"rkey", std::to_string(mr_->rkey)},
                                {"va", std::to_string(uint64_t(uintptr_t(buf_.get())))},
                                {"len", std::to_string(kRegionBytes)},
                                {"recv_len", std::to_string(kRecvBytes)},
                                {"mtu", "1024"},
                                {"rnr_timer", std::to_string(kMinRnrTimer)},
                                {"qkey", std::to_string(kQkey)},
                                {"cm_port", std::to_string(kCmPort)},
                                {"ro_rkey", std::to_string(ro_mr_->rkey)},
                                {"pd2_rkey", std::to_string(pd2_mr_->rkey)},
                                {"cc", std::string(cc_algorithm_name(cc_))}});
  }

  /// Takes the CM's events: each connection request counts, and its id is
  /// kept unanswered (in REQ Rcvd) until the helper exits.
  void poll_cm() {
    CmEvent ev;
    while (cm_get_event(ep_.ctx(), &ev) == 1) {
      if (ev.event != CmEventType::kConnectRequest) continue;
      ++conn_requests_;
      requests_.push_back(ev.id);
    }
  }

  static std::optional<uint64_t> num_or(const Msg& m, std::string_view key, uint64_t def) {
    return m.get(key).empty() ? std::optional<uint64_t>(def) : m.num(key);
  }

  /// A UD QP from INIT to RTR and RTS (IBA 10.3.1: no path, no peer).
  bool ud_ready(std::string& err) {
    QpAttr a;
    a.qp_state = QpState::kRtr;
    if (Status st = modify_qp(qp_, a, kQpState); !st.ok()) {
      err = st.message();
      return false;
    }
    a.qp_state = QpState::kRts;
    a.sq_psn = kFirstSqPsn;
    if (Status st = modify_qp(qp_, a, kQpState | kQpSqPsn); !st.ok()) {
      err = st.message();
      return false;
    }
    return true;
  }

  /// post op=send|write|read len=N count=N [rkey=N va=N]: count signaled WRs
  /// of len bytes from (READ: into) the region; WRITEs and READs at va with
  /// rkey (the tester's).
  std::string post(const Msg& m) {
    if (!qp_) return fail("no_qp");
    // Completions are taken before each post, so that a case that posts
    // again and again (cc.cnp_slows_target) never overruns the CQ (and, on a
    // provider that frees a send queue slot when its completion is polled,
    // finds the slots of the WRs completed so far free).
    poll_completions();
    const std::string_view op = m.get("op");
    const auto len = m.num("len"), count = m.num("count"), rkey = num_or(m, "rkey", 0), va = num_or(m, "va", 0);
    if ((op != "send" && op != "write" && op != "read") || !len || !count || !rkey || !va || *len > kRegionBytes / 2 || *count > 16) {
      return fail("bad_post_message");
    }
    for (uint64_t i = 0; i < *count; ++i) {
      Sge sge{.addr = uint64_t(uintptr_t(buf_.get())), .length = uint32_t(*len), .lkey = mr_->lkey};
      SendWr wr = op == "send"    ? send_wr(i, &sge)
                  : op == "write" ? write_wr(i, &sge, *va, uint32_t(*rkey))
                                  : read_wr(i, &sge, *va, uint32_t(*rkey));
      SendWr* bad = nullptr;
      if (Status st = post_send(qp_, &wr, &bad); !st.ok()) return fail("post_send_failed");
    }
    return format_msg("posted", {{"count", std::to_string(*count)}});
  }

  std::string state() {
    if (!qp_) return fail("no_qp");
    poll_completions();
    poll_cm();
    QpAttr a;
    QpInitAttr ia;
    if (!query_qp(qp_, &a, &ia).ok()) return fail("query_qp_failed");
    std::string wcs;
    for (WcStatus s : completions_) wcs += (wcs.empty() ? "" : ",") + std::to_string(unsigned(s));
    return format_msg("state", {{"qp", qp_state_str(a.qp_state)}, {"wc", wcs}, {"creq", std::to_string(conn_requests_)}});
  }

  void poll_completions() {
    Wc wc[16];
    int n;
    while ((n = poll_cq(cq_, 16, wc)) > 0) {
      for (int i = 0; i < n; ++i) completions_.push_back(wc[i].status);
    }
  }

  void drop_qp() {
    if (!qp_) return;
    (void)destroy_qp(qp_);
    qp_ = nullptr;
    Wc wc[16];
    while (poll_cq(cq_, 16, wc) > 0) {
    }
  }

  uint8_t* recv_area() { return buf_.get() + kRegionBytes / 2; }

  Endpoint& ep_;
  BreakIo* breaks_;
  CcAlgorithm cc_;  // the device's, reported to the tester
  PageBuffer buf_;
  Cq* cq_ = nullptr;
  Mr* mr_ = nullptr;
  Mr* ro_mr_ = nullptr;   // the region again, remote read only
  Pd* pd2_ = nullptr;
  Mr* pd2_mr_ = nullptr;  // the region again, every right, in pd2_
  Qp* qp_ = nullptr;
  CmId* listener_ = nullptr;
  std::vector<CmId*> requests_;  // connection requests, left unanswered
  uint32_t conn_requests_ = 0;   // since the last setup
  std::vector<WcStatus> completions_;
};

}  // namespace

int serve(const ServeConfig& sc) {
  std::optional<BreakIo> breaks;
  EndpointConfig ec = sc.endpoint;
  if (sc.breaks) {
    ec.wrap_io = [&breaks](PacketIo& io) -> PacketIo& { return breaks.emplace(io); };
  }
  Endpoint ep;
  std::string err;
  if (!ep.open(ec, err)) {
    std::fprintf(stderr, "uroce conform: %s\n", err.c_str());
    return kExitFailure;
  }
  Helper h(ep, breaks ? &*breaks : nullptr, ec.cc);
  if (!h.open(err)) {
    std::fprintf(stderr, "uroce conform: %s\n", err.c_str());
    return kExitFailure;
  }
  std::printf("# uroce conform target helper: %s, control channel %s:%u%s\n", ep.port_info().name.c_str(),
              sc.host.c_str(), unsigned(sc.port), sc.breaks ? " (broken variants allowed)" : "");
  TcpChannel ch(&g_stop);
  if (!ch.accept_one(sc.host, sc.port, sc.timeout_s, [&] { ep.pump(); }, err)) {
    std::fprintf(stderr, "uroce conform: %s\n", err.c_str());
    return kExitFailure;
  }
  char in[kMsgBytes];
  while (!g_stop) {
    ep.pump();
    if (!ch.try_recv(in, sizeof in)) {
      if (ch.eof()) break;
      continue;
    }
    const Msg m = parse_msg(in);
    if (m.verb == "quit") break;
    const std::string reply = h.handle(m);
    char out[kMsgBytes] = {};
    std::memcpy(out, reply.data(), std::min(reply.size(), kMsgBytes - 1));
    if (!ch.send_bytes(out, sizeof out)) break;
  }
  ep.drain(10);
  return g_stop ? kExitFailure : kExitOk;
}

}  // namespace uroce::apps::conform
