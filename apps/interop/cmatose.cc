// `uroce ucmatose` and `uroce udaddy`: librdmacm's cmatose (RC, rdma_cm TCP
// port space) and udaddy (UD, UDP port space, SIDR) examples on the uroce
// stack, through the CM over QP1 (include/uroce/cm.h), compatible with the
// stock tools (rdma-core v44, read for the facts only; docs/CM.md):
//
//   ucmatose (port 7471): -c connections, each an RC QP with -C receives of
//     -S bytes posted before connecting / accepting. Once all are
//     established the server SENDs -C messages of -S bytes on each and waits
//     for their completions, then for -C messages from each client; the
//     client first receives -C, then SENDs its -C replies. The server then
//     disconnects (DREQ) and the client answers the disconnect.
//   udaddy (port 7174): the client's SIDR REQ is answered with the server's
//     QPN and rdma_cm's Q_Key 0x01234567; the client SENDs -C datagrams with
//     immediate data = its own QPN; the server answers each connection with
//     -C datagrams to the QPN the immediate named, on the path the request
//     came from. Receive buffers hold 40 bytes of GRH + -S.
//
// -s ADDR makes a client of the server at ADDR, -b ADDR binds a server (ours,
// or 0.0.0.0); port and EAL options as `uroce rping`.
// Exit: 0 ok, 1 failure, 2 usage error.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <uroce/cm.h>
#include <uroce/verbs.h>
#include <uroce/wr.h>

#include "apps/commands.h"
#include "apps/common/addr_text.h"
#include "apps/common/args.h"
#include "apps/common/endpoint.h"
#include "apps/common/launch.h"
#include "drivers/dpdk/eal_args.h"

namespace uroce::apps {
namespace {

constexpr uint32_t kGrhBytes = 40;  // UD receive buffers start with the GRH area (IBA 11.4.1.2)

#define UROCE_CMATOSE_OPTIONS(PORT)                                                                              \
  {.name = "server-addr", .short_name = 's', .kind = OptKind::kString, .def = "", .help = "be the client of the server at ADDR", .meta = "ADDR"}, \
  {.name = "bind-addr", .short_name = 'b', .kind = OptKind::kString, .def = "", .help = "be the server, bound to ADDR (ours, or 0.0.0.0 / ::)", .meta = "ADDR"}, \
  {.name = "port", .short_name = 'p', .kind = OptKind::kUint, .def = PORT, .help = "rdma_cm port", .min = 1, .max = 65535}, \
  {.name = "connections", .short_name = 'c', .kind = OptKind::kUint, .def = "1", .help = "connections", .min = 1, .max = 64}, \
  {.name = "message-count", .short_name = 'C', .kind = OptKind::kUint, .def = "10", .help = "messages each way per connection", .max = 4096}, \
  {.name = "message-size", .short_name = 'S', .kind = OptKind::kUint, .def = "100", .help = "message bytes", .min = 1, .max = 1u << 20}, \
  UROCE_ENDPOINT_OPTIONS, \
  {.name = "timeout", .kind = OptKind::kUint, .def = "60", .help = "seconds to wait for the peer and for each step", .min = 1, .max = 3600}, \
  {.name = "counters", .help = "print the CM counters that are not zero at the end"},

constexpr OptSpec kUcmatoseOptions[] = {UROCE_CMATOSE_OPTIONS("7471")};
constexpr OptSpec kUdaddyOptions[] = {UROCE_CMATOSE_OPTIONS("7174")};
#undef UROCE_CMATOSE_OPTIONS

constexpr std::string_view kDetails =
    "EAL arguments go before a '--', as for uroce rping. Exit: 0 ok, 1 failure, 2 usage error.\n";

constexpr CommandSpec kUcmatoseCommand = {
    .name = "ucmatose",
    .positional = "",
    .summary = "librdmacm's ucmatose on uroce: RC connections by RDMA CM, SENDs both ways",
    .options = kUcmatoseOptions,
    .max_positional = 0,
    .details = kDetails,
};
constexpr CommandSpec kUdaddyCommand = {
    .name = "udaddy",
    .positional = "",
    .summary = "librdmacm's udaddy on uroce: UD peers found by SIDR, datagrams both ways",
    .options = kUdaddyOptions,
    .max_positional = 0,
    .details = kDetails,
};

struct Config {
  bool ud = false;
  bool server = false;
  SockAddr addr;
  uint32_t connections = 1, count = 10, size = 100;
  EndpointConfig ep;  // --dev, --ip, --ip6, --mac, --port-mtu, --pcap
  uint32_t timeout_s = 60;
  bool counters = false;
};

struct Node {
  CmId* id = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  Mr* mr = nullptr;
  Ah* ah = nullptr;
  std::vector<uint8_t> mem;
  uint32_t remote_qpn = 0, remote_qkey = 0;
  bool connected = false;
};

class Cmatose {
 public:
  explicit Cmatose(const Config& cfg) : cfg_(cfg), tool_(cfg.ud ? "udaddy" : "cmatose") {}
  ~Cmatose();
  bool open(std::string& err);
  bool run(std::string& err) { return cfg_.server ? run_server(err) : run_client(err); }
  void print_counters() const { ep_.print_cm_counters(stdout); }
  bool close_capture(std::string& err) { return ep_.close_capture(err); }

 private:
  void pump() { ep_.pump(); }
  bool run_server(std::string& err);
  bool run_client(std::string& err);
  /// Handles CM events until `until` holds.
  template <typename P>
  bool cm_events(P&& until, std::string& err, const char* what);
  bool handle(const CmEvent& ev, std::string& err);
  bool init_node(Node& n, CmId* id, std::string& err);
  bool post_recvs(Node& n);
  bool post_sends(Node& n, bool signaled);
  /// Polls cq of each connected node (send or receive) for -C completions.
  bool poll_cqs(bool send, std::string& err);
  /// post_sends on every node; false with err = "failed to post sends".
  bool post_sends_all(bool signaled, std::string& err);
  /// The answering side of a data round: every node's messages in, then one reply each, signaled.
  bool receive_then_reply(std::string& err);
  Node* node_of(CmId* id);

  const Config& cfg_;
  const char* tool_;
  Endpoint ep_;  // first: it outlives the objects below
  CmId* listen_id_ = nullptr;
  std::vector<Node> nodes_;
  uint32_t connects_left_ = 0, disconnects_left_ = 0;
};

Cmatose::~Cmatose() {
  for (Node& n : nodes_) {
    if (n.ah) (void)destroy_ah(n.ah);
    if (n.id) (void)cm_destroy_id(n.id);
    if (n.mr) (void)dereg_mr(n.mr);
    for (Cq* c : {n.scq, n.rcq}) {
      if (c) (void)destroy_cq(c);
    }
  }
  if (listen_id_) (void)cm_destroy_id(listen_id_);
}

bool Cmatose::open(std::string& err) {
  if (!ep_.open(cfg_.ep, err)) return false;
  if (cfg_.ud && cfg_.size > mtu_bytes(ep_.max_mtu())) {
    err = "message_size " + std::to_string(cfg_.size) + " is larger than active mtu " +
          std::to_string(mtu_bytes(ep_.max_mtu()));
    return false;
  }
  nodes_.resize(cfg_.connections);
  return true;
}

Node* Cmatose::node_of(CmId* id) {
  for (Node& n : nodes_) {
    if (n.id == id) return &n;
  }
  return nullptr;
}

bool Cmatose::init_node(Node& n, CmId* id, std::string& err) {
  n.id = id;
  const uint32_t cqe = cfg_.count ? cfg_.count * 2 : 2;
  auto scq = create_cq(ep_.ctx(), cqe);
  auto rcq = create_cq(ep_.ctx(), cqe);
  if (!scq.ok() || !rcq.ok()) {
    err = std::string(tool_) + ": unable to create CQ";
    return false;
  }
  n.scq = *scq;
  n.rcq = *rcq;
  QpInitAttr ia;
  ia.send_cq = n.scq;
  ia.recv_cq = n.rcq;
  ia.qp_type = cfg_.ud ? QpType::kUd : QpType::kRc;
  ia.sq_sig_all = !cfg_.ud;  // cmatose signals every send; udaddy chooses per post
  ia.cap.max_send_wr = cfg_.count ? cfg_.count : 1;
  ia.cap.max_recv_wr = cfg_.count ? cfg_.count : 1;
  if (Status s = cm_create_qp(id, ep_.pd(), ia); !s.ok()) {
    err = std::string(tool_) + ": unable to create QP: " + s.message();
    return false;
  }
  ep_.trace_if_asked(id->qp);
  n.mem.assign(cfg_.size + (cfg_.ud ? kGrhBytes : 0), 0);
  auto mr = reg_mr(ep_.pd(), n.mem.data(), n.mem.size(), kAccessLocalWrite);
  if (!mr.ok()) {
    err = std::string("reg_mr: ") + mr.status().message();
    return false;
  }
  n.mr = *mr;
  if (!post_recvs(n)) {
    err = "failed to post receives";
    return false;
  }
  return true;
}

bool Cmatose::post_recvs(Node& n) {
  Sge sge{uint64_t(uintptr_t(n.mem.data())), uint32_t(n.mem.size()), n.mr->lkey};
  RecvWr wr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  for (uint32_t i = 0; i < cfg_.count; ++i) {
    if (!post_recv(n.id->qp, &wr, nullptr).ok()) return false;
  }
  return true;
}

bool Cmatose::post_sends_all(bool signaled, std::string& err) {
  for (Node& n : nodes_) {
    if (!post_sends(n, signaled)) return err = "failed to post sends", false;
  }
  return true;
}

bool Cmatose::receive_then_reply(std::string& err) {
  std::printf("receiving data transfers\n");
  if (!poll_cqs(false, err)) return false;
  std::printf("sending replies\n");
  return post_sends_all(true, err) && poll_cqs(true, err);
}

bool Cmatose::post_sends(Node& n, bool signaled) {
  if (!n.connected) return true;
  Sge sge{uint64_t(uintptr_t(n.mem.data())), cfg_.size, n.mr->lkey};
  SendWr wr = send_wr(0, &sge);
  if (cfg_.ud) {  // udaddy: SEND with Immediate of the sender's QPN, so that the server can answer
    wr = ud_send_wr(0, &sge, n.ah, n.remote_qpn, n.remote_qkey);
    wr.opcode = WrOpcode::kSendWithImm;
    wr.imm_data = n.id->qp->qp_num;
  }
  if (signaled) wr.signaled();
  const Deadline end(cfg_.timeout_s);
  for (uint32_t i = 0; i < cfg_.count;) {
    const Status s = post_send(n.id->qp, &wr, nullptr);
    if (s.ok()) {
      ++i;
    } else if (s.code() == StatusCode::kResourceExhausted) {  // send queue full: let it drain
      pump();
      Wc wc;
      while (!signaled && poll_cq(n.scq, 1, &wc) == 1) {
      }
      std::string err;
      if (end.expired("send queue space", err)) return false;
    } else {
      return false;
    }
  }
  return true;
}

bool Cmatose::poll_cqs(bool send, std::string& err) {
  for (Node& n : nodes_) {
    if (!n.connected) continue;
    const Deadline end(cfg_.timeout_s);
    for (uint32_t done = 0; done < cfg_.count;) {
      Wc wc;
      if (!ep_.wait_wc(send ? n.scq : n.rcq, wc, end, send ? "send completions" : "messages", err)) return false;
      if (wc.status != WcStatus::kSuccess) {
        err = std::string(tool_) + ": completion error: " + wc_status_str(wc.status);
        return false;
      }
      if (cfg_.ud && !send && !n.ah) {
        // udaddy's create_reply_ah: answer the QPN the immediate data names,
        // on the path the SIDR REQ came from (the same one the GRH describes).
        if (!(wc.wc_flags & kWcWithImm)) {
          err = "udaddy: datagram without immediate data";
          return false;
        }
        auto ah = create_ah(ep_.pd(), n.id->route);
        if (!ah.ok()) {
          err = std::string("udaddy: failed to create reply AH: ") + ah.status().message();
          return false;
        }
        n.ah = *ah;
        n.remote_qpn = wc.imm_data;
        n.remote_qkey = kRdmaUdpQkey;
      }
      ++done;
    }
  }
  return true;
}

bool Cmatose::handle(const CmEvent& ev, std::string& err) {
  switch (ev.event) {
    case CmEventType::kAddrResolved:
      if (Status s = cm_resolve_route(ev.id, 2000); !s.ok()) {
        err = std::string("rdma_resolve_route: ") + s.message();
        return false;
      }
      return true;
    case CmEventType::kRouteResolved: {
      Node* n = node_of(ev.id);
      if (!n || !init_node(*n, ev.id, err)) return false;
      if (Status s = cm_connect(ev.id, CmConnParam{}); !s.ok()) {
        err = std::string("rdma_connect: ") + s.message();
        return false;
      }
      return true;
    }
    case CmEventType::kConnectRequest: {
      Node* n = node_of(nullptr);
      if (!n) {
        (void)cm_reject(ev.id, nullptr, 0);
        std::printf("%s: failing connection request\n", tool_);
        return true;
      }
      if (!init_node(*n, ev.id, err)) return false;
      CmConnParam p;
      p.qp_num = ev.id->qp->qp_num;
      if (Status s = cm_accept(ev.id, p); !s.ok()) {
        err = std::string(tool_) + ": failure accepting: " + s.message();
        return false;
      }
      if (cfg_.ud) {  // SIDR: the server is done once it has answered
        n->connected = true;
        --connects_left_;
      }
      return true;
    }
    case CmEventType::kEstablished: {
      Node* n = node_of(ev.id);
      if (!n) return true;
      if (cfg_.ud) {
        auto ah = create_ah(ep_.pd(), ev.ud_ah);
        if (!ah.ok()) {
          err = std::string("udaddy: failure creating address handle: ") + ah.status().message();
          return false;
        }
        n->ah = *ah;
        n->remote_qpn = ev.ud_qp_num;
        n->remote_qkey = ev.ud_qkey;
      }
      n->connected = true;
      --connects_left_;
      ++disconnects_left_;
      return true;
    }
    case CmEventType::kDisconnected:
      (void)cm_disconnect(ev.id);
      --disconnects_left_;
      return true;
    case CmEventType::kAddrError:
    case CmEventType::kRouteError:
    case CmEventType::kConnectError:
    case CmEventType::kUnreachable:
    case CmEventType::kRejected:
      std::printf("%s: event: %s, error: %d\n", tool_, cm_event_str(ev.event), ev.status);
      err = std::string(cm_event_str(ev.event));
      return false;
    case CmEventType::kConnectResponse:
    case CmEventType::kDeviceRemoval:
    case CmEventType::kMulticastJoin:
    case CmEventType::kMulticastError:
    case CmEventType::kAddrChange:
    case CmEventType::kTimewaitExit:
      return true;
  }
  return true;
}

template <typename P>
bool Cmatose::cm_events(P&& until, std::string& err, const char* what) {
  const Deadline end(cfg_.timeout_s);
  while (!until()) {
    CmEvent ev;
    if (!ep_.wait_cm_event(nullptr, ev, end, what, err) || !handle(ev, err)) return false;
  }
  return true;
}

bool Cmatose::run_server(std::string& err) {
  std::printf("%s: starting server\n", tool_);
  auto l = cm_create_id(ep_.ctx(), nullptr, cfg_.ud ? CmPortSpace::kUdp : CmPortSpace::kTcp);
  if (!l.ok()) {
    err = std::string("listen request failed: ") + l.status().message();
    return false;
  }
  listen_id_ = *l;
  if (Status s = cm_bind_addr(listen_id_, cfg_.addr); !s.ok()) {
    err = std::string("bind address failed: ") + s.message();
    return false;
  }
  if (Status s = cm_listen(listen_id_, 0); !s.ok()) {
    err = std::string("failure trying to listen: ") + s.message();
    return false;
  }
  connects_left_ = cfg_.connections;
  if (!cm_events([&] { return connects_left_ == 0; }, err, "connections")) return false;
  if (cfg_.count) {
    if (cfg_.ud) {
      if (!receive_then_reply(err)) return false;
    } else {
      std::printf("initiating data transfers\n");
      if (!post_sends_all(true, err)) return false;
      std::printf("completing sends\n");
      if (!poll_cqs(true, err)) return false;
      std::printf("receiving data transfers\n");
      if (!poll_cqs(false, err)) return false;
    }
    std::printf("data transfers complete\n");
  }
  if (cfg_.ud) return true;
  std::printf("cmatose: disconnecting\n");
  for (Node& n : nodes_) {
    if (!n.connected) continue;
    n.connected = false;
    (void)cm_disconnect(n.id);
  }
  if (!cm_events([&] { return disconnects_left_ == 0; }, err, "disconnects")) return false;
  std::printf("disconnected\n");
  return true;
}

bool Cmatose::run_client(std::string& err) {
  std::printf("%s: starting client\n", tool_);
  std::printf("%s: connecting\n", tool_);
  connects_left_ = cfg_.connections;
  for (Node& n : nodes_) {
    auto id = cm_create_id(ep_.ctx(), nullptr, cfg_.ud ? CmPortSpace::kUdp : CmPortSpace::kTcp);
    if (!id.ok()) {
      err = std::string("rdma_create_id: ") + id.status().message();
      return false;
    }
    n.id = *id;
    if (Status s = cm_resolve_addr(n.id, nullptr, cfg_.addr, 2000); !s.ok()) {
      err = std::string("failure getting addr: ") + s.message();
      return false;
    }
  }
  if (!cm_events([&] { return connects_left_ == 0; }, err, "connections")) return false;
  if (cfg_.count) {
    if (cfg_.ud) {
      std::printf("initiating data transfers\n");
      if (!post_sends_all(false, err)) return false;
      std::printf("receiving data transfers\n");
      if (!poll_cqs(false, err)) return false;
    } else {
      if (!receive_then_reply(err)) return false;
    }
    std::printf("data transfers complete\n");
  }
  if (cfg_.ud) return true;
  // cmatose's client waits for the server's disconnect and answers it.
  return cm_events([&] { return disconnects_left_ == 0; }, err, "the server's disconnect");
}

int run_cmatose(bool ud, int argc, char** argv) {
  const CommandSpec& spec = ud ? kUdaddyCommand : kUcmatoseCommand;
  const char* name = ud ? "udaddy" : "ucmatose";
  dpdk::SplitArgs split;
  Args args;
  if (auto rc = parse_endpoint_command(spec, argc, argv, split, args)) return *rc;
  auto usage = [&](const std::string& msg) { return usage_error(spec, msg); };
  Config cfg;
  cfg.ud = ud;
  if (args.given("server-addr") == args.given("bind-addr")) return usage("give -s SERVER (client) or -b ADDR (server)");
  cfg.server = args.given("bind-addr");
  const std::string_view a = args.get_str(cfg.server ? "bind-addr" : "server-addr");
  std::optional<Gid> g = parse_ip_gid(a, false);
  if (!g) g = parse_ip_gid(a, true);
  if (!g) return usage("the address is not IPv4 or IPv6");
  const bool any = *g == *parse_ip_gid("0.0.0.0", false) || *g == Gid{};
  cfg.addr = SockAddr{any ? Gid{} : *g, uint16_t(args.get_uint("port"))};
  cfg.connections = uint32_t(args.get_uint("connections"));
  cfg.count = uint32_t(args.get_uint("message-count"));
  cfg.size = uint32_t(args.get_uint("message-size"));
  if (const std::string e = read_endpoint_options(args, 0, "", cfg.ep); !e.empty()) return usage(e);
  cfg.timeout_s = uint32_t(args.get_uint("timeout"));
  cfg.ep.timeout_s = cfg.timeout_s;
  cfg.ep.max_qp = cfg.connections + 4;
  cfg.counters = args.flag("counters");

  if (!start_endpoint_process(name, split)) return kExitFailure;
  std::printf("# uroce %s %s\n", name, args.config_line().c_str());
  std::string err;
  Cmatose t(cfg);
  bool ok = t.open(err);
  if (ok) ok = t.run(err);
  if (!t.close_capture(err)) ok = false;
  if (cfg.counters && ok) t.print_counters();
  if (!ok) {
    std::fprintf(stderr, "uroce %s (%s): %s\n", name, cfg.server ? "server" : "client", err.c_str());
    return kExitFailure;
  }
  std::printf("test complete\n");
  return kExitOk;
}

}  // namespace

int cmd_ucmatose(int argc, char** argv) { return run_cmatose(false, argc, argv); }
int cmd_udaddy(int argc, char** argv) { return run_cmatose(true, argc, argv); }

}  // namespace uroce::apps
