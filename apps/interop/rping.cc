// `uroce rping`: librdmacm's rping example on the uroce stack, connecting
// through the CM over QP1 (include/uroce/cm.h), wire-compatible with the stock
// tool (rdma-core v44, read for the facts only; docs/CM.md):
//
//   rdma_cm TCP port space, port -p (default 7174): service ID 0x10600001c06.
//   REQ/REP with responder resources 1 and initiator depth 1.
//   Buffers of -S bytes (default 64): the client's start buffer (the server
//   READs it) and its rdma buffer (the server WRITEs it); the control
//   messages are 16 bytes, struct rping_rdma_info { be64 buf; be32 rkey;
//   be32 size; }.
//   Per ping: the client fills the start buffer with "rdma-ping-%d: " and then
//   letters cycling 'A'..'z' from a start letter that advances each ping, last
//   byte NUL; SENDs its address; the server READs it, SENDs "go on"; the
//   client SENDs the rdma buffer's address; the server WRITEs the data back
//   (strlen + 1 bytes) and SENDs "done". -V: the client compares the buffers;
//   -v: "ping data: ..." (client) / "server ping data: ..." (server).
//   -C: pings (client; 0 = forever). The client then disconnects (DREQ); the
//   server ends when the connection does.
//
// The port and addresses are as for `uroce pingpong`: EAL arguments before
// "--", --ip / --ip6 our addresses (GID 0 / 1), --mac; -a is the server's
// address (server: ours or 0.0.0.0, client: the peer's), IPv4 or IPv6.
// Exit: 0 ok, 1 failure, 2 usage error.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <rte_byteorder.h>

#include <uroce/cm.h>
#include <uroce/counters.h>
#include <uroce/verbs.h>
#include <uroce/wr.h>

#include "apps/commands.h"
#include "apps/common/addr_text.h"
#include "apps/common/args.h"
#include "apps/common/endpoint.h"
#include "apps/common/json_writer.h"
#include "apps/common/launch.h"
#include "drivers/dpdk/eal_args.h"

namespace uroce::apps {
namespace {

constexpr OptSpec kRpingOptions[] = {
    {.name = "server", .short_name = 's', .help = "be the server (listen on -a:-p)"},
    {.name = "client", .short_name = 'c', .help = "be the client (connect to -a:-p)"},
    {.name = "addr", .short_name = 'a', .kind = OptKind::kString, .def = "", .help = "server: address to bind (ours, or 0.0.0.0 / ::); client: the server's address", .meta = "ADDR"},
    {.name = "port", .short_name = 'p', .kind = OptKind::kUint, .def = "7174", .help = "rdma_cm TCP port", .min = 1, .max = 65535},
    {.name = "count", .short_name = 'C', .kind = OptKind::kUint, .def = "0", .help = "client: pings to run (0: until interrupted)", .max = 1u << 30},
    {.name = "size", .short_name = 'S', .kind = OptKind::kUint, .def = "64", .help = "ping buffer bytes (rping's minimum is 26)", .min = 26, .max = 1u << 20},
    {.name = "verbose", .short_name = 'v', .help = "print the ping data"},
    {.name = "validate", .short_name = 'V', .help = "client: check that the data came back unchanged"},
    {.name = "debug", .short_name = 'd', .help = "print the CM events"},
    UROCE_ENDPOINT_OPTIONS,
    {.name = "timeout", .kind = OptKind::kUint, .def = "60", .help = "seconds to wait for the peer and for each step", .min = 1, .max = 3600},
    {.name = "counters", .help = "print the device and CM counters that are not zero at the end"},
    {.name = "json", .help = "write the result as JSON on stdout (everything else goes to stderr)"},
};

constexpr std::string_view kRpingDetails =
    "EAL arguments go before a '--' (uroce rping --no-huge --no-pci --no-shconf\n"
    "--vdev=net_af_packet0,iface=tap0 -- --ip 10.70.0.2 -s -a 10.70.0.2 -v).\n"
    "--json keys: role, pings, size, seconds, ok, error. Exit: 0 ok, 1 failure, 2 usage error.\n";

constexpr CommandSpec kRpingCommand = {
    .name = "rping",
    .positional = "",
    .summary = "librdmacm's rping on uroce: RDMA CM connection, SEND / READ / WRITE ping loop",
    .options = kRpingOptions,
    .max_positional = 0,
    .details = kRpingDetails,
};

constexpr char kMsgFmt[] = "rdma-ping-%d: ";
constexpr uint32_t kInfoBytes = 16;  // struct rping_rdma_info
constexpr uint64_t kWridSend = 1, kWridRecv = 2, kWridRdma = 3;

struct Config {
  bool server = false;
  SockAddr addr;
  uint32_t count = 0;
  uint32_t size = 64;
  bool verbose = false, validate = false, debug = false;
  EndpointConfig ep;  // --dev, --ip, --ip6, --mac, --port-mtu, --pcap
  uint32_t timeout_s = 60;
  bool counters = false, json = false;
};

class Rping {
 public:
  explicit Rping(const Config& cfg) : cfg_(cfg) {}
  ~Rping();
  bool open(std::string& err);
  bool run_server(std::string& err);
  bool run_client(std::string& err);
  void print_counters(std::FILE* out) const { ep_.print_counters(out, true); }
  bool close_capture(std::string& err) { return ep_.close_capture(err); }
  uint32_t pings() const { return pings_; }

 private:
  enum class Wait : uint8_t { kOk, kDisconnected, kFailed };
  void pump() { ep_.pump(); }
  /// The connection (rdma_cm, as rping's server / client set it up), with
  /// its QP and the first receive posted; id_ afterwards.
  bool connect(std::string& err);
  /// Waits for a completion of opcode want (SEND completions and refilled receives on the way).
  Wait wait_wc(WcOpcode want, std::string& err);
  bool setup_qp(CmId* id, std::string& err);
  bool post(WrOpcode op, uint64_t wr_id, Mr* mr, uint8_t* at, uint32_t len, uint64_t raddr = 0, uint32_t rkey = 0);
  bool post_recv_info(Qp* qp);
  void put_info(Mr* mr, uint8_t* buf);

  const Config& cfg_;
  Endpoint ep_;  // first: it outlives the objects below
  Cq* cq_ = nullptr;
  CmId* id_ = nullptr;
  std::unique_ptr<uint8_t[]> mem_;
  uint8_t* recv_buf_ = nullptr;
  uint8_t* send_buf_ = nullptr;
  uint8_t* rdma_buf_ = nullptr;
  uint8_t* start_buf_ = nullptr;
  Mr* recv_mr_ = nullptr;
  Mr* send_mr_ = nullptr;
  Mr* rdma_mr_ = nullptr;
  Mr* start_mr_ = nullptr;
  uint32_t pings_ = 0;
  bool disconnected_ = false;
};

Rping::~Rping() {
  if (id_) (void)cm_destroy_id(id_);  // destroys its QP too
  for (Mr* m : {recv_mr_, send_mr_, rdma_mr_, start_mr_}) {
    if (m) (void)dereg_mr(m);
  }
  if (cq_) (void)destroy_cq(cq_);
}

bool Rping::open(std::string& err) {
  if (!ep_.open(cfg_.ep, err)) return false;
  ep_.set_cm_trace(cfg_.debug);
  auto cq = create_cq(ep_.ctx(), 64);
  if (!cq.ok()) {
    err = std::string("create_cq: ") + cq.status().message();
    return false;
  }
  cq_ = *cq;
  mem_ = std::make_unique<uint8_t[]>(2 * kInfoBytes + 2 * size_t(cfg_.size));
  recv_buf_ = mem_.get();
  send_buf_ = recv_buf_ + kInfoBytes;
  rdma_buf_ = send_buf_ + kInfoBytes;
  start_buf_ = rdma_buf_ + cfg_.size;
  // As rping: the rdma buffer is written by the peer (client) or locally by
  // the READ (server); the client's start buffer is read by the server.
  const uint32_t rw = kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite;
  struct {
    Mr** mr;
    uint8_t* at;
    uint32_t len;
    uint32_t access;
  } regs[] = {{&recv_mr_, recv_buf_, kInfoBytes, kAccessLocalWrite},
              {&send_mr_, send_buf_, kInfoBytes, 0},
              {&rdma_mr_, rdma_buf_, cfg_.size, rw},
              {&start_mr_, start_buf_, cfg_.size, rw}};
  for (auto& r : regs) {
    if (cfg_.server && r.mr == &start_mr_) continue;
    auto mr = reg_mr(ep_.pd(), r.at, r.len, r.access);
    if (!mr.ok()) {
      err = std::string("reg_mr: ") + mr.status().message();
      return false;
    }
    *r.mr = *mr;
  }
  return true;
}

Rping::Wait Rping::wait_wc(WcOpcode want, std::string& err) {
  const Deadline end(cfg_.timeout_s);
  while (!end.expired("a completion", err)) {
    pump();
    CmEvent ev;
    while (cm_get_event(ep_.ctx(), &ev)) {
      if (cfg_.debug) std::fprintf(stderr, "cma_event type %s\n", cm_event_str(ev.event));
      if (ev.event == CmEventType::kDisconnected) {
        std::fprintf(stderr, "%s DISCONNECT EVENT...\n", cfg_.server ? "server" : "client");
        disconnected_ = true;
      }
    }
    Wc wc;
    while (poll_cq(cq_, 1, &wc) == 1) {
      if (wc.status != WcStatus::kSuccess) {
        if (disconnected_ && wc.status == WcStatus::kWrFlushErr) return Wait::kDisconnected;
        err = std::string("cq completion failed status ") + std::to_string(int(wc.status)) + " (" +
              wc_status_str(wc.status) + ")";
        return Wait::kFailed;
      }
      if (wc.opcode == WcOpcode::kRecv) {
        if (wc.byte_len != kInfoBytes) {
          err = "Received bogus data, size " + std::to_string(wc.byte_len);
          return Wait::kFailed;
        }
        if (!post_recv_info(id_->qp)) {
          err = "post recv error";
          return Wait::kFailed;
        }
      }
      if (wc.opcode == want) return Wait::kOk;
    }
    if (disconnected_) return Wait::kDisconnected;
  }
  return Wait::kFailed;
}

bool Rping::post(WrOpcode op, uint64_t wr_id, Mr* mr, uint8_t* at, uint32_t len, uint64_t raddr, uint32_t rkey) {
  Sge sge{uint64_t(uintptr_t(at)), len, mr->lkey};
  SendWr wr = write_wr(wr_id, &sge, raddr, rkey);  // SEND, WRITE or READ: op
  wr.opcode = op;
  wr.signaled();
  return uroce::post_send(id_->qp, &wr, nullptr).ok();
}

bool Rping::post_recv_info(Qp* qp) {
  Sge sge{uint64_t(uintptr_t(recv_buf_)), kInfoBytes, recv_mr_->lkey};
  RecvWr wr;
  wr.wr_id = kWridRecv;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return uroce::post_recv(qp, &wr, nullptr).ok();
}

// struct rping_rdma_info of buf / mr, in network byte order (rping_format_send).
void Rping::put_info(Mr* mr, uint8_t* buf) {
  const uint64_t addr = rte_cpu_to_be_64(uint64_t(uintptr_t(buf)));
  const uint32_t rkey = rte_cpu_to_be_32(mr->rkey);
  const uint32_t size = rte_cpu_to_be_32(cfg_.size);
  std::memcpy(send_buf_, &addr, 8);
  std::memcpy(send_buf_ + 8, &rkey, 4);
  std::memcpy(send_buf_ + 12, &size, 4);
}

bool Rping::setup_qp(CmId* id, std::string& err) {
  QpInitAttr ia;
  ia.send_cq = cq_;
  ia.recv_cq = cq_;
  ia.qp_type = QpType::kRc;
  ia.cap.max_send_wr = 16;  // RPING_SQ_DEPTH
  ia.cap.max_recv_wr = 2;
  if (Status s = cm_create_qp(id, ep_.pd(), ia); !s.ok()) {
    err = std::string("rdma_create_qp: ") + s.message();
    return false;
  }
  ep_.trace_if_asked(id->qp);
  if (!post_recv_info(id->qp)) {
    err = "ibv_post_recv failed";
    return false;
  }
  return true;
}

bool Rping::connect(std::string& err) {
  // rping: REQ / REP with responder resources 1, initiator depth 1, retry count 7
  // (CmConnParam's defaults); a REJ ends the client, as rping's does.
  const CmPeer peer{.server = cfg_.server, .addr = cfg_.addr, .timeout_s = cfg_.timeout_s, .retry_rejected = false};
  id_ = ep_.cm_connect_rc(peer, CmConnParam{}, [this](CmId* id, std::string& e) { return setup_qp(id, e); }, err);
  return id_ != nullptr;
}

bool Rping::run_server(std::string& err) {
  if (!connect(err)) return false;
  for (;;) {
    // Wait for the client's start buffer address, READ it, tell it to go on.
    Wait w = wait_wc(WcOpcode::kRecv, err);
    if (w == Wait::kDisconnected) return true;  // the client is done
    if (w == Wait::kFailed) return false;
    uint64_t raddr;
    uint32_t rkey, rlen;
    std::memcpy(&raddr, recv_buf_, 8);
    std::memcpy(&rkey, recv_buf_ + 8, 4);
    std::memcpy(&rlen, recv_buf_ + 12, 4);
    raddr = rte_be_to_cpu_64(raddr);
    rkey = rte_be_to_cpu_32(rkey);
    rlen = std::min(rte_be_to_cpu_32(rlen), cfg_.size);
    if (!post(WrOpcode::kRdmaRead, kWridRdma, rdma_mr_, rdma_buf_, rlen, raddr, rkey)) {
      err = "post send error (READ)";
      return false;
    }
    if (wait_wc(WcOpcode::kRdmaRead, err) != Wait::kOk) return false;
    rdma_buf_[cfg_.size - 1] = 0;
    if (cfg_.verbose) std::printf("server ping data: %s\n", reinterpret_cast<const char*>(rdma_buf_));
    put_info(rdma_mr_, rdma_buf_);
    if (!post(WrOpcode::kSend, kWridSend, send_mr_, send_buf_, kInfoBytes)) {
      err = "post send error";
      return false;
    }
    // Wait for the client's rdma buffer address, WRITE the data back, say done.
    w = wait_wc(WcOpcode::kRecv, err);
    if (w != Wait::kOk) return false;
    std::memcpy(&raddr, recv_buf_, 8);
    std::memcpy(&rkey, recv_buf_ + 8, 4);
    raddr = rte_be_to_cpu_64(raddr);
    rkey = rte_be_to_cpu_32(rkey);
    const uint32_t wlen = uint32_t(std::strlen(reinterpret_cast<const char*>(rdma_buf_)) + 1);
    if (!post(WrOpcode::kRdmaWrite, kWridRdma, rdma_mr_, rdma_buf_, wlen, raddr, rkey)) {
      err = "post send error (WRITE)";
      return false;
    }
    if (wait_wc(WcOpcode::kRdmaWrite, err) != Wait::kOk) return false;
    if (!post(WrOpcode::kSend, kWridSend, send_mr_, send_buf_, kInfoBytes)) {
      err = "post send error";
      return false;
    }
    ++pings_;
  }
}

bool Rping::run_client(std::string& err) {
  if (!connect(err)) return false;
  char start = 'A';
  for (uint32_t ping = 0; !cfg_.count || ping < cfg_.count; ++ping) {
    if (g_stop) {
      err = "interrupted";
      return false;
    }
    // rping_test_client: "rdma-ping-N: " then letters from `start`, 'A'..'z' cycling.
    int cc = std::snprintf(reinterpret_cast<char*>(start_buf_), cfg_.size, kMsgFmt, int(ping));
    char c = start;
    for (uint32_t i = uint32_t(cc); i < cfg_.size; ++i) {
      start_buf_[i] = uint8_t(c);
      if (++c > 'z') c = 'A';
    }
    if (++start > 'z') start = 'A';
    start_buf_[cfg_.size - 1] = 0;
    put_info(start_mr_, start_buf_);
    if (!post(WrOpcode::kSend, kWridSend, send_mr_, send_buf_, kInfoBytes)) {
      err = "post send error";
      return false;
    }
    if (wait_wc(WcOpcode::kRecv, err) != Wait::kOk) return false;  // the server READ it
    put_info(rdma_mr_, rdma_buf_);
    if (!post(WrOpcode::kSend, kWridSend, send_mr_, send_buf_, kInfoBytes)) {
      err = "post send error";
      return false;
    }
    if (wait_wc(WcOpcode::kRecv, err) != Wait::kOk) return false;  // the server WROTE it back
    if (cfg_.validate && std::memcmp(start_buf_, rdma_buf_, cfg_.size) != 0) {
      err = "data mismatch!";
      return false;
    }
    if (cfg_.verbose) std::printf("ping data: %s\n", reinterpret_cast<const char*>(rdma_buf_));
    std::memset(rdma_buf_, 0, cfg_.size);  // the next WRITE must really land
    ++pings_;
  }
  if (Status s = cm_disconnect(id_); !s.ok()) {
    err = std::string("rdma_disconnect: ") + s.message();
    return false;
  }
  CmEvent ev;
  return ep_.expect_cm_event(id_, CmEventType::kDisconnected, ev, Deadline(cfg_.timeout_s), err);
}

}  // namespace

int cmd_rping(int argc, char** argv) {
  dpdk::SplitArgs split;
  Args args;
  if (auto rc = parse_endpoint_command(kRpingCommand, argc, argv, split, args)) return *rc;
  auto usage = [](const std::string& msg) { return usage_error(kRpingCommand, msg); };
  Config cfg;
  if (args.flag("server") == args.flag("client")) return usage("give exactly one of -s (server) and -c (client)");
  cfg.server = args.flag("server");
  if (const std::string e = read_endpoint_options(args, 0, "", cfg.ep); !e.empty()) return usage(e);
  const std::string_view a = args.get_str("addr");
  if (a.empty()) return usage("-a is required (server: the address to bind; client: the server's)");
  std::optional<Gid> g = parse_ip_gid(a, false);
  if (!g) g = parse_ip_gid(a, true);
  if (!g) return usage("-a is not an IPv4 or IPv6 address");
  const Gid any4 = *parse_ip_gid("0.0.0.0", false);
  cfg.addr = SockAddr{*g == any4 || *g == Gid{} ? Gid{} : *g, uint16_t(args.get_uint("port"))};
  cfg.count = uint32_t(args.get_uint("count"));
  cfg.size = uint32_t(args.get_uint("size"));
  cfg.verbose = args.flag("verbose");
  cfg.validate = args.flag("validate");
  cfg.debug = args.flag("debug");
  cfg.timeout_s = uint32_t(args.get_uint("timeout"));
  cfg.ep.timeout_s = cfg.timeout_s;
  cfg.counters = args.flag("counters");
  cfg.json = args.flag("json");

  std::FILE* info = cfg.json ? stderr : stdout;
  if (!start_endpoint_process("rping", split)) return kExitFailure;
  std::fprintf(info, "# uroce rping %s\n", args.config_line().c_str());
  const char* role = cfg.server ? "server" : "client";
  std::string err;
  Rping rp(cfg);
  const auto t0 = std::chrono::steady_clock::now();
  bool ok = rp.open(err);
  if (ok) ok = cfg.server ? rp.run_server(err) : rp.run_client(err);
  if (!rp.close_capture(err)) ok = false;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (cfg.counters) rp.print_counters(info);
  if (cfg.json) {
    JsonWriter w;
    w.begin_object().key("command").str("rping").key("role").str(role).key("pings").num(rp.pings());
    w.key("size").num(cfg.size).key("seconds").fixed(secs, 3).key("ok").boolean(ok).key("error").str(err).end_object();
    std::printf("%s\n", w.text().c_str());
  } else {
    std::fprintf(info, "# %s: %u pings of %u bytes in %.3f s\n", role, rp.pings(), cfg.size, secs);
  }
  if (!ok) {
    std::fprintf(stderr, "uroce rping (%s): %s\n", role, err.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace uroce::apps
