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

#include "apps/addr_text.h"
#include "apps/args.h"
#include "apps/commands.h"
#include "apps/launch.h"
#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/eal_args.h"
#include "drivers/dpdk/tsc_clock.h"
#include "stack/engine/context.h"  // the GID table: --ip6 as GID index 1

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
    {.name = "dev", .kind = OptKind::kString, .def = "0", .help = "the port: an ethdev probed from the EAL args (name or port id) or a device spec", .meta = "SPEC"},
    {.name = "ip", .kind = OptKind::kString, .def = "", .help = "our IPv4 address: GID index 0 (::ffff:a.b.c.d)", .meta = "A.B.C.D"},
    {.name = "ip6", .kind = OptKind::kString, .def = "", .help = "our IPv6 address: GID index 1", .meta = "ADDR"},
    {.name = "mac", .kind = OptKind::kString, .def = "", .help = "our MAC (the port's if empty)", .meta = "MAC"},
    {.name = "port-mtu", .kind = OptKind::kUint, .def = "1500", .help = "Ethernet MTU to set on the port", .min = 576, .max = 9600},
    {.name = "timeout", .kind = OptKind::kUint, .def = "60", .help = "seconds to wait for the peer and for each step", .min = 1, .max = 3600},
    {.name = "pcap", .kind = OptKind::kString, .def = "", .help = "capture every frame of the port to FILE", .meta = "FILE"},
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
  std::string dev;
  std::optional<Gid> gid4, gid6;
  std::optional<MacAddr> mac;
  uint16_t port_mtu = 1500;
  uint32_t timeout_s = 60;
  std::string pcap;
  bool counters = false, json = false;
};

class Rping {
 public:
  explicit Rping(const Config& cfg) : cfg_(cfg) {}
  ~Rping();
  bool open(std::string& err);
  bool run_server(std::string& err);
  bool run_client(std::string& err);
  void print_counters(std::FILE* out) const;
  uint32_t pings() const { return pings_; }

 private:
  enum class Wait : uint8_t { kOk, kDisconnected, kFailed };
  void pump() { uroce::poll(ctx_.get(), clock_->now_ns()); }
  bool deadline_passed(std::chrono::steady_clock::time_point end, std::string& err, const char* what) const;
  /// Waits for a CM event of type want on id (any id if null).
  bool wait_event(CmEventType want, CmEvent& ev, std::string& err);
  /// Waits for a completion of opcode want (SEND completions and refilled receives on the way).
  Wait wait_wc(WcOpcode want, std::string& err);
  bool setup_qp(CmId* id, std::string& err);
  bool post(WrOpcode op, uint64_t wr_id, Mr* mr, uint8_t* at, uint32_t len, uint64_t raddr = 0, uint32_t rkey = 0);
  bool post_recv_info();
  void put_info(Mr* mr, uint8_t* buf);

  const Config& cfg_;
  std::unique_ptr<dpdk::DpdkPort> port_;
  std::optional<dpdk::TscClock> clock_;
  ContextPtr ctx_;
  Pd* pd_ = nullptr;
  Cq* cq_ = nullptr;
  CmId* listen_id_ = nullptr;
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
  if (!ctx_) return;
  if (id_) (void)cm_destroy_id(id_);  // destroys its QP too
  if (listen_id_) (void)cm_destroy_id(listen_id_);
  for (Mr* m : {recv_mr_, send_mr_, rdma_mr_, start_mr_}) {
    if (m) (void)dereg_mr(m);
  }
  if (cq_) (void)destroy_cq(cq_);
  if (pd_) (void)dealloc_pd(pd_);
  ctx_.reset();
}

bool Rping::open(std::string& err) {
  dpdk::DpdkPortConfig pc;
  pc.device = cfg_.dev;
  pc.mtu = cfg_.port_mtu;
  pc.promiscuous = true;  // the stack answers for --mac in software
  pc.link_timeout_ms = cfg_.timeout_s * 1000;
  pc.pcap_path = cfg_.pcap;
  auto port = dpdk::DpdkPort::open(pc);
  if (!port.ok()) {
    err = "port '" + cfg_.dev + "': " + port.status().message();
    return false;
  }
  port_ = std::move(port).value();
  clock_.emplace();
  DeviceConfig dc;
  dc.mac = cfg_.mac ? *cfg_.mac : port_->info().mac;
  if (cfg_.gid4) dc.gid = *cfg_.gid4;
  dc.max_qp = 8;
  auto ctx = open_device(port_->queue(0), dc);
  if (!ctx.ok()) {
    err = std::string("open_device: ") + ctx.status().message();
    return false;
  }
  ctx_ = std::move(ctx).value();
  if (cfg_.gid6) {
    const Status st = ctx_->net->gids().set(1, net::GidEntry{*cfg_.gid6, net::GidType::kRoceV2, net::kNoVlan, dc.mac});
    if (!st.ok()) {
      err = std::string("GID index 1 (--ip6): ") + st.message();
      return false;
    }
  }
  pump();
  auto pd = alloc_pd(ctx_.get());
  if (!pd.ok()) {
    err = std::string("alloc_pd: ") + pd.status().message();
    return false;
  }
  pd_ = *pd;
  auto cq = create_cq(ctx_.get(), 64);
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
    auto mr = reg_mr(pd_, r.at, r.len, r.access);
    if (!mr.ok()) {
      err = std::string("reg_mr: ") + mr.status().message();
      return false;
    }
    *r.mr = *mr;
  }
  return true;
}

bool Rping::deadline_passed(std::chrono::steady_clock::time_point end, std::string& err, const char* what) const {
  if (g_stop) {
    err = "interrupted";
    return true;
  }
  if (std::chrono::steady_clock::now() < end) return false;
  err = std::string("timed out after ") + std::to_string(cfg_.timeout_s) + " s waiting for " + what;
  return true;
}

bool Rping::wait_event(CmEventType want, CmEvent& ev, std::string& err) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(cfg_.timeout_s);
  while (!deadline_passed(end, err, cm_event_str(want))) {
    pump();
    if (!cm_get_event(ctx_.get(), &ev)) continue;
    if (cfg_.debug) std::fprintf(stderr, "cma_event type %s cma_id %p (%s)\n", cm_event_str(ev.event),
                                 static_cast<void*>(ev.id), cfg_.server ? "parent" : "child");
    if (ev.event == want) return true;
    err = std::string("unexpected CM event ") + cm_event_str(ev.event) + " (status " + std::to_string(ev.status) +
          "), waiting for " + cm_event_str(want);
    return false;
  }
  return false;
}

Rping::Wait Rping::wait_wc(WcOpcode want, std::string& err) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(cfg_.timeout_s);
  while (!deadline_passed(end, err, "a completion")) {
    pump();
    CmEvent ev;
    while (cm_get_event(ctx_.get(), &ev)) {
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
        if (!post_recv_info()) {
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
  SendWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = kSendSignaled;
  wr.rdma.remote_addr = raddr;
  wr.rdma.rkey = rkey;
  return uroce::post_send(id_->qp, &wr, nullptr).ok();
}

bool Rping::post_recv_info() {
  Sge sge{uint64_t(uintptr_t(recv_buf_)), kInfoBytes, recv_mr_->lkey};
  RecvWr wr;
  wr.wr_id = kWridRecv;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return uroce::post_recv(id_->qp, &wr, nullptr).ok();
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
  if (Status s = cm_create_qp(id, pd_, ia); !s.ok()) {
    err = std::string("rdma_create_qp: ") + s.message();
    return false;
  }
  id_ = id;
  if (!post_recv_info()) {
    err = "ibv_post_recv failed";
    return false;
  }
  return true;
}

bool Rping::run_server(std::string& err) {
  auto l = cm_create_id(ctx_.get(), nullptr, CmPortSpace::kTcp);
  if (!l.ok()) {
    err = std::string("rdma_create_id: ") + l.status().message();
    return false;
  }
  listen_id_ = *l;
  if (Status s = cm_bind_addr(listen_id_, cfg_.addr); !s.ok()) {
    err = std::string("rdma_bind_addr: ") + s.message();
    return false;
  }
  if (Status s = cm_listen(listen_id_, 3); !s.ok()) {
    err = std::string("rdma_listen: ") + s.message();
    return false;
  }
  CmEvent ev;
  if (!wait_event(CmEventType::kConnectRequest, ev, err)) return false;
  if (!setup_qp(ev.id, err)) return false;
  CmConnParam p;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  if (Status s = cm_accept(id_, p); !s.ok()) {
    err = std::string("rdma_accept: ") + s.message();
    return false;
  }
  if (!wait_event(CmEventType::kEstablished, ev, err)) return false;
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
  auto id = cm_create_id(ctx_.get(), nullptr, CmPortSpace::kTcp);
  if (!id.ok()) {
    err = std::string("rdma_create_id: ") + id.status().message();
    return false;
  }
  CmId* cid = *id;
  if (Status s = cm_resolve_addr(cid, nullptr, cfg_.addr, 2000); !s.ok()) {
    (void)cm_destroy_id(cid);
    err = std::string("rdma_resolve_addr: ") + s.message();
    return false;
  }
  id_ = cid;  // owned from here on
  CmEvent ev;
  if (!wait_event(CmEventType::kAddrResolved, ev, err)) return false;
  if (Status s = cm_resolve_route(id_, 2000); !s.ok()) {
    err = std::string("rdma_resolve_route: ") + s.message();
    return false;
  }
  if (!wait_event(CmEventType::kRouteResolved, ev, err)) return false;
  if (!setup_qp(id_, err)) return false;
  CmConnParam p;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  if (Status s = cm_connect(id_, p); !s.ok()) {
    err = std::string("rdma_connect: ") + s.message();
    return false;
  }
  if (!wait_event(CmEventType::kEstablished, ev, err)) return false;
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
  return wait_event(CmEventType::kDisconnected, ev, err);
}

void Rping::print_counters(std::FILE* out) const {
  const Counters& c = query_counters(ctx_.get());
  std::fprintf(out, "# counters:");
  for (size_t i = 0; i < kCounterNames.size(); ++i) {
    if (c.v[i]) std::fprintf(out, " %.*s=%llu", int(kCounterNames[i].size()), kCounterNames[i].data(), (unsigned long long)c.v[i]);
  }
  const CmCounters cc = query_cm_counters(ctx_.get());
  std::fprintf(out, "\n# cm counters:");
  for (size_t i = 0; i < size_t(CmCounter::kCount); ++i) {
    if (cc.v[i]) std::fprintf(out, " %s=%llu", kCmCounterNames[i], (unsigned long long)cc.v[i]);
  }
  std::fprintf(out, "\n");
}

}  // namespace

int cmd_rping(int argc, char** argv) {
  const dpdk::SplitArgs split = dpdk::split_eal_args(argc, argv, 1);
  std::vector<const char*> av = {"rping"};
  for (const auto& a : split.app) av.push_back(a.c_str());
  Args args;
  if (auto rc = parse_command_line(kRpingCommand, int(av.size()), av.data(), args)) return *rc;
  auto usage = [](const std::string& msg) {
    std::fprintf(stderr, "uroce rping: %s (see uroce rping --help)\n", msg.c_str());
    return kExitUsage;
  };
  Config cfg;
  if (args.flag("server") == args.flag("client")) return usage("give exactly one of -s (server) and -c (client)");
  cfg.server = args.flag("server");
  if (args.given("ip")) {
    cfg.gid4 = parse_ip_gid(args.get_str("ip"), false);
    if (!cfg.gid4) return usage("--ip is not an IPv4 address");
  }
  if (args.given("ip6")) {
    cfg.gid6 = parse_ip_gid(args.get_str("ip6"), true);
    if (!cfg.gid6) return usage("--ip6 is not an IPv6 address");
  }
  if (!cfg.gid4 && !cfg.gid6) return usage("give our address: --ip and/or --ip6");
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
  cfg.dev = std::string(args.get_str("dev"));
  if (args.given("mac")) {
    cfg.mac = parse_mac(args.get_str("mac"));
    if (!cfg.mac) return usage("--mac is not aa:bb:cc:dd:ee:ff");
  }
  cfg.port_mtu = uint16_t(args.get_uint("port-mtu"));
  cfg.timeout_s = uint32_t(args.get_uint("timeout"));
  cfg.pcap = std::string(args.get_str("pcap"));
  cfg.counters = args.flag("counters");
  cfg.json = args.flag("json");

  install_stop_handlers();
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::FILE* info = cfg.json ? stderr : stdout;
  if (Status s = dpdk::init_eal_from_args(split); !s.ok()) {
    std::fprintf(stderr, "uroce rping: %s\n", s.message());
    return kExitFailure;
  }
  std::fprintf(info, "# uroce rping %s\n", args.config_line().c_str());
  const char* role = cfg.server ? "server" : "client";
  std::string err;
  Rping rp(cfg);
  const auto t0 = std::chrono::steady_clock::now();
  bool ok = rp.open(err);
  if (ok) ok = cfg.server ? rp.run_server(err) : rp.run_client(err);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (cfg.counters) rp.print_counters(info);
  if (cfg.json) {
    std::printf("{\"command\":\"rping\",\"role\":\"%s\",\"pings\":%u,\"size\":%u,\"seconds\":%.3f,\"ok\":%s,"
                "\"error\":\"%s\"}\n",
                role, rp.pings(), cfg.size, secs, ok ? "true" : "false", json_escape(err).c_str());
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
