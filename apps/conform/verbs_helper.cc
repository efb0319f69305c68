// uroce-conform-helper: the target helper of `uroce conform` on any
// libibverbs provider (rxe, a NIC's, or uroce's own under `uroce run`). It
// speaks the control protocol of control.h on TCP and does for each message
// what target.cc does on the uroce API: a fresh QP per case connected to the
// tester, receives posted, completions and QP state reported, WRs posted,
// plus the read-only region, the region in a second PD and an rdma_cm
// listener. Built against rdma-core's headers and libraries only (no uroce
// code but the message text and the option parser), so that it runs where
// the target's libibverbs is.
//
// Usage: uroce-conform-helper --port N [--host A.B.C.D] [--gid-index N] [--mac MAC]   (--help)
// Exit: 0 after the tester's quit, 1 on a failure, 2 on a usage error.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/args.h"
#include "apps/conform/control.h"

namespace {

using uroce::apps::Args;
using uroce::apps::CommandSpec;
using uroce::apps::OptKind;
using uroce::apps::OptSpec;
using namespace uroce::apps::conform;

constexpr OptSpec kOptions[] = {
    {.name = "port", .kind = OptKind::kUint, .def = "0", .help = "TCP port of the control channel (required)", .max = 65535},
    {.name = "host", .kind = OptKind::kString, .def = "0.0.0.0", .help = "address the control channel listens on", .meta = "A.B.C.D"},
    {.name = "device", .kind = OptKind::kString, .def = "", .help = "the verbs device (the first if empty)", .meta = "NAME"},
    {.name = "ib-port", .kind = OptKind::kUint, .def = "1", .help = "the device's port", .min = 1, .max = 255},
    {.name = "gid-index", .kind = OptKind::kUint, .def = "0", .help = "the RoCE v2 IPv4 GID the QPs send from", .max = 255},
    {.name = "mac", .kind = OptKind::kString, .def = "", .help = "the port's MAC (read from sysfs if empty)", .meta = "MAC"},
    {.name = "cm-port", .kind = OptKind::kUint, .def = "7471", .help = "TCP port of the rdma_cm listener (0: none)", .max = 65535},
    {.name = "cc", .kind = OptKind::kChoice, .def = "unknown", .help = "the provider's congestion control as its operator knows it, told to the tester (none: a CNP case whose rate does not fall is not applicable)", .choices = "unknown|none|dcqcn|timely"},
};
constexpr CommandSpec kCommand = {
    .name = "conform-helper",
    .summary = "the target helper of `uroce conform` on a libibverbs provider",
    .options = kOptions,
    .max_positional = 0,
};

constexpr uint32_t kRegionBytes = 64 * 1024;
constexpr uint32_t kRecvBytes = 256;
constexpr uint32_t kMaxRecvs = 64;
constexpr uint8_t kMinRnrTimer = 5;
constexpr uint32_t kFirstSqPsn = 0x3000;
constexpr uint32_t kQkey = 0x11111111;
constexpr int kAllAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

volatile std::sig_atomic_t g_stop = 0;

std::string fail(std::string_view why) { return format_msg("error", {{"reason", std::string(why)}}); }

const char* state_name(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    case IBV_QPS_UNKNOWN: return "UNKNOWN";
  }
  return "?";
}

struct Helper {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_pd* pd2 = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  ibv_mr* ro_mr = nullptr;
  ibv_mr* pd2_mr = nullptr;
  ibv_qp* qp = nullptr;
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* listener = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kRegionBytes);
  uint8_t ib_port = 1;
  uint8_t gid_index = 0;
  ibv_gid gid{};
  std::string mac;
  uint16_t cm_port = 0;
  std::string cc;
  std::vector<int> completions;
  std::vector<rdma_cm_id*> requests;  // connection requests, left unanswered (REQ Rcvd)
  int conn_requests = 0;              // since the last setup

  ~Helper() {
    for (rdma_cm_id* id : requests) rdma_destroy_id(id);
    if (listener) rdma_destroy_id(listener);
    if (ch) rdma_destroy_event_channel(ch);
    if (qp) ibv_destroy_qp(qp);
    for (ibv_mr* m : {mr, ro_mr, pd2_mr}) {
      if (m) ibv_dereg_mr(m);
    }
    if (cq) ibv_destroy_cq(cq);
    for (ibv_pd* p : {pd, pd2}) {
      if (p) ibv_dealloc_pd(p);
    }
    if (ctx) ibv_close_device(ctx);
  }

  std::string open(const Args& args) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list || n == 0) return "no verbs device";
    const std::string want(args.get_str("device"));
    for (int i = 0; i < n && !ctx; ++i) {
      if (want.empty() || want == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
    }
    const std::string name = ctx ? ibv_get_device_name(ctx->device) : "";
    ibv_free_device_list(list);
    if (!ctx) return "cannot open the verbs device '" + want + "'";
    ib_port = uint8_t(args.get_uint("ib-port"));
    gid_index = uint8_t(args.get_uint("gid-index"));
    if (ibv_query_gid(ctx, ib_port, gid_index, &gid) != 0) return "ibv_query_gid failed";
    mac = args.get_str("mac");
    if (mac.empty()) {  // the netdev behind the GID, as the kernel shows it
      std::ifstream nd("/sys/class/infiniband/" + name + "/ports/" + std::to_string(ib_port) +
                       "/gid_attrs/ndevs/" + std::to_string(gid_index));
      std::string ndev;
      if (nd >> ndev) std::ifstream("/sys/class/net/" + ndev + "/address") >> mac;
      if (mac.empty()) return "no MAC for the GID's port (give --mac)";
    }
    pd = ibv_alloc_pd(ctx);
    pd2 = ibv_alloc_pd(ctx);
    cq = pd ? ibv_create_cq(ctx, 2 * kMaxRecvs, nullptr, nullptr, 0) : nullptr;
    if (!pd || !pd2 || !cq) return "ibv_alloc_pd / ibv_create_cq failed";
    mr = ibv_reg_mr(pd, buf.data(), kRegionBytes, kAllAccess);
    ro_mr = ibv_reg_mr(pd, buf.data(), kRegionBytes, IBV_ACCESS_REMOTE_READ);
    pd2_mr = ibv_reg_mr(pd2, buf.data(), kRegionBytes, kAllAccess);
    if (!mr || !ro_mr || !pd2_mr) return "ibv_reg_mr failed";
    cm_port = uint16_t(args.get_uint("cm-port"));
    if (cm_port) {
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(cm_port);
      std::memcpy(&sa.sin_addr, gid.raw + 12, 4);
      ch = rdma_create_event_channel();
      if (!ch || rdma_create_id(ch, &listener, nullptr, RDMA_PS_TCP) != 0 ||
          rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&sa)) != 0 || rdma_listen(listener, 4) != 0) {
        return "the rdma_cm listener failed: " + std::string(std::strerror(errno));
      }
      // Polled by state(): its events must not block.
      if (fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) != 0) return "fcntl on the rdma_cm channel failed";
    }
    cc = args.get_str("cc");
    return "";
  }

  std::string ip() const {
    char t[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, gid.raw + 12, t, sizeof t);
    return t;
  }

  void drop_qp() {
    if (qp) ibv_destroy_qp(qp);
    qp = nullptr;
    ibv_wc wc[16];
    while (ibv_poll_cq(cq, 16, wc) > 0) {
    }
  }

  static std::optional<uint64_t> num_or(const Msg& m, std::string_view key, uint64_t def) {
    return m.get(key).empty() ? std::optional<uint64_t>(def) : m.num(key);
  }

  std::string setup(const Msg& m) {
    in_addr peer{};
    const std::string peer_ip(m.get("ip"));
    const auto qpn = m.num("qpn"), psn = m.num("psn"), recvs = m.num("recvs");
    const auto timeout = num_or(m, "timeout", 14), retry = num_or(m, "retry_cnt", 7), rnr = num_or(m, "rnr_retry", 7);
    const std::string_view type = m.get("type").empty() ? "rc" : m.get("type");
    if (inet_pton(AF_INET, peer_ip.c_str(), &peer) != 1 || !qpn || !psn || !recvs || !timeout || !retry || !rnr ||
        (type != "rc" && type != "ud")) {
      return fail("bad_setup_message");
    }
    if (!m.get("break").empty() && m.get("break") != "none") {
      return format_msg("refused", {{"reason", "no_broken_variants_here"}});
    }
    if (*recvs > kMaxRecvs) return format_msg("refused", {{"reason", "more_than_64_receives"}});
    drop_qp();
    std::memset(buf.data(), 0, kRegionBytes);
    ibv_qp_init_attr ia{};
    ia.send_cq = cq;
    ia.recv_cq = cq;
    ia.sq_sig_all = 1;
    ia.cap.max_send_wr = 16;
    ia.cap.max_recv_wr = kMaxRecvs;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.qp_type = type == "ud" ? IBV_QPT_UD : IBV_QPT_RC;
    qp = ibv_create_qp(pd, &ia);
    if (!qp) return fail("ibv_create_qp_failed");
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = ib_port;
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (ia.qp_type == IBV_QPT_UD) {
      a.qkey = kQkey;
      mask |= IBV_QP_QKEY;
    } else {
      a.qp_access_flags = kAllAccess;
      mask |= IBV_QP_ACCESS_FLAGS;
    }
    if (ibv_modify_qp(qp, &a, mask) != 0) return fail("init_failed");
    for (uint32_t i = 0; i < *recvs; ++i) {
      ibv_sge sge{uint64_t(uintptr_t(buf.data() + kRegionBytes / 2 + i * kRecvBytes)), kRecvBytes, mr->lkey};
      ibv_recv_wr wr{};
      wr.wr_id = i;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      if (ibv_post_recv(qp, &wr, &bad) != 0) return fail("post_recv_failed");
    }
    a = {};
    a.qp_state = IBV_QPS_RTR;
    mask = IBV_QP_STATE;
    if (ia.qp_type == IBV_QPT_RC) {
      a.path_mtu = IBV_MTU_1024;
      a.dest_qp_num = uint32_t(*qpn);
      a.rq_psn = uint32_t(*psn);
      a.max_dest_rd_atomic = 4;
      a.min_rnr_timer = kMinRnrTimer;
      a.ah_attr.is_global = 1;
      a.ah_attr.port_num = ib_port;
      a.ah_attr.grh.sgid_index = gid_index;
      a.ah_attr.grh.hop_limit = 64;
      a.ah_attr.grh.dgid.raw[10] = 0xff;
      a.ah_attr.grh.dgid.raw[11] = 0xff;
      std::memcpy(a.ah_attr.grh.dgid.raw + 12, &peer, 4);
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
              IBV_QP_MIN_RNR_TIMER;
    }
    if (ibv_modify_qp(qp, &a, mask) != 0) return fail("rtr_failed");
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = kFirstSqPsn;
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (ia.qp_type == IBV_QPT_RC) {
      a.timeout = uint8_t(*timeout);
      a.retry_cnt = uint8_t(*retry);
      a.rnr_retry = uint8_t(*rnr);
      a.max_rd_atomic = 4;
      mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    if (ibv_modify_qp(qp, &a, mask) != 0) return fail("rts_failed");
    completions.clear();
    poll_cm();
    conn_requests = 0;
    return format_msg("ready", {{"mac", mac},
                                {"ip", ip()},
                                {"qpn", std::to_string(qp->qp_num)},
                                {"psn", std::to_string(kFirstSqPsn)},
                                {"rkey", std::to_string(mr->rkey)},
                                {"va", std::to_string(uint64_t(uintptr_t(buf.data())))},
                                {"len", std::to_string(kRegionBytes)},
                                {"recv_len", std::to_string(kRecvBytes)},
                                {"mtu", "1024"},
                                {"rnr_timer", std::to_string(kMinRnrTimer)},
                                {"qkey", std::to_string(kQkey)},
                                {"cm_port", std::to_string(cm_port)},
                                {"ro_rkey", std::to_string(ro_mr->rkey)},
                                {"pd2_rkey", std::to_string(pd2_mr->rkey)},
                                {"cc", cc}});
  }

  /// Takes rdma_cm's events: each connection request counts, and its id is
  /// kept unanswered until the helper exits.
  void poll_cm() {
    rdma_cm_event* ev = nullptr;
    while (ch && rdma_get_cm_event(ch, &ev) == 0) {
      if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        ++conn_requests;
        requests.push_back(ev->id);
      }
      rdma_ack_cm_event(ev);
    }
  }

  void poll_completions() {
    ibv_wc wc[16];
    int n;
    while ((n = ibv_poll_cq(cq, 16, wc)) > 0) {
      for (int i = 0; i < n; ++i) completions.push_back(int(wc[i].status));
    }
  }

  std::string state() {
    if (!qp) return fail("no_qp");
    poll_completions();
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) != 0) return fail("query_qp_failed");
    std::string wcs;
    for (int s : completions) wcs += (wcs.empty() ? "" : ",") + std::to_string(s);
    poll_cm();
    return format_msg("state", {{"qp", state_name(a.qp_state)}, {"wc", wcs}, {"creq", std::to_string(conn_requests)}});
  }

  std::string post(const Msg& m) {
    if (!qp) return fail("no_qp");
    // Completions are taken before each post, so that a case that posts
    // again and again (cc.cnp_slows_target) never overruns the CQ (and, on a
    // provider that frees a send queue slot when its completion is polled,
    // finds the slots of the WRs completed so far free).
    poll_completions();
    const std::string_view op = m.get("op");
    const auto len = m.num("len"), count = m.num("count"), rkey = num_or(m, "rkey", 0), va = num_or(m, "va", 0);
    if ((op != "send" && op != "write" && op != "read") || !len || !count || !rkey || !va || *len > kRegionBytes / 2 ||
        *count > 16) {
      return fail("bad_post_message");
    }
    for (uint64_t i = 0; i < *count; ++i) {
      ibv_sge sge{uint64_t(uintptr_t(buf.data())), uint32_t(*len), mr->lkey};
      ibv_send_wr wr{};
      wr.wr_id = i;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = op == "send" ? IBV_WR_SEND : op == "write" ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
      wr.wr.rdma.remote_addr = *va;
      wr.wr.rdma.rkey = uint32_t(*rkey);
      ibv_send_wr* bad = nullptr;
      if (ibv_post_send(qp, &wr, &bad) != 0) return fail("post_send_failed");
    }
    return format_msg("posted", {{"count", std::to_string(*count)}});
  }

  std::string handle(const Msg& m) {
    if (m.verb == "setup") return setup(m);
    if (m.verb == "state") return state();
    if (m.verb == "post") return post(m);
    return fail("unknown_verb_" + m.verb);
  }
};

/// Listens on host:port and accepts one tester; -1 after printing why.
int accept_tester(const std::string& host, uint16_t port) {
  const int ls = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1 || bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      listen(ls, 1) != 0) {
    std::fprintf(stderr, "uroce-conform-helper: listen on %s:%u: %s\n", host.c_str(), port, std::strerror(errno));
    close(ls);
    return -1;
  }
  std::printf("# uroce-conform-helper: control channel %s:%u\n", host.c_str(), port);
  std::fflush(stdout);
  const int fd = accept(ls, nullptr, nullptr);
  close(ls);
  if (fd < 0) std::fprintf(stderr, "uroce-conform-helper: accept: %s\n", std::strerror(errno));
  return fd;
}

/// Reads exactly n bytes; false on EOF or an error.
bool read_all(int fd, char* p, size_t n) {
  while (n) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (auto rc = uroce::apps::parse_command_line(kCommand, argc, argv, args)) return *rc;
  if (args.get_uint("port") == 0) {
    std::fprintf(stderr, "uroce conform-helper: --port is required (see --help)\n");
    return uroce::apps::kExitUsage;
  }
  std::signal(SIGINT, [](int) { g_stop = 1; });
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  Helper h;
  if (std::string err = h.open(args); !err.empty()) {
    std::fprintf(stderr, "uroce-conform-helper: %s\n", err.c_str());
    return 1;
  }
  const int fd = accept_tester(std::string(args.get_str("host")), uint16_t(args.get_uint("port")));
  if (fd < 0) return 1;
  char in[kMsgBytes];
  int rc = 1;
  while (!g_stop) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 1) <= 0) continue;
    if (!read_all(fd, in, sizeof in)) break;
    const Msg m = parse_msg(in);
    if (m.verb == "quit") {
      rc = 0;
      break;
    }
    const std::string reply = h.handle(m);
    char out[kMsgBytes] = {};
    std::memcpy(out, reply.data(), std::min(reply.size(), kMsgBytes - 1));
    if (write(fd, out, sizeof out) != ssize_t(sizeof out)) break;
  }
  close(fd);
  return rc;
}
