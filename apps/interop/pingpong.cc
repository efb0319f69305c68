// `uroce pingpong`: rdma-core's ibv_rc_pingpong, ibv_uc_pingpong,
// ibv_ud_pingpong and ibv_srq_pingpong on the uroce stack, wire- and
// out-of-band-compatible with the stock tools (rdma-core v44, read for the
// facts only; docs/INTEROP.md has the formats and the interop matrix):
//
//   TCP port 18515 (-p): the client sends "%04x:%06x:%06x:%s" LID:QPN:PSN:GID
//   + NUL (52 bytes; srq: 256 of them, rdma-core's MAX_QP, unused ones zero),
//   the server connects its QP(s) and answers with its own, the client
//   connects and writes "done\0". The GID is 32 hex digits of the 16 bytes in
//   network order. LID is 0 (RoCE).
//   Then a SEND ping-pong of -n iterations: the client posts the first SEND,
//   each side posts its next SEND once its previous SEND completed and a
//   message arrived (rdma-core's "pending" mask); -r receives are posted up
//   front and refilled when one (srq: -q) is left. One buffer is the send
//   source and the receive target, filled with 0x7b; UD receives into
//   40 bytes of GRH + -s bytes and sends from offset 40, with Q_Key 0x11111111.
//   srq: -q RC QPs share one SRQ; -n counts messages over all QPs together.
//   -c: the client zeroes the first byte of every page before the first SEND
//   and the server checks those bytes at the end ("invalid data in page N",
//   as rdma-core prints it; here it also fails the run).
//   QP attributes as rdma-core sets them: RTR max_dest_rd_atomic 1,
//   min_rnr_timer 12 (RC), RTS timeout 14, retry_cnt 7, rnr_retry 7,
//   max_rd_atomic 1, path MTU -m (default 1024), SL -l.
//
// -R (--rdma_cm): no TCP. The QPs are created and connected by the RDMA CM
// over QP1 (stack/cm, include/uroce/cm.h), one rdma_cm connection per QP:
// rc, uc and srq by REQ / REP / RTU in rdma_cm's TCP port space (service ID
// 0x106 << 16 | -p; the server listens on --listen, the client connects to
// HOST and retries while the server answers REJ), ud by SIDR in the UDP port
// space (the server's QPN and Q_Key 0x01234567 in the SIDR REP; the server
// answers the path the SIDR REQ came on, to the QPN of the first datagram).
// The CM picks the PSNs, the path MTU (the port's) and the RC attributes;
// the receives are posted before the REP / REQ leaves; at the end each side
// disconnects (DREQ / DREP). Only uroce has this mode (the stock pingpongs
// exchange QPNs over TCP only); docs/CM.md.
//
// The port is any rte_ethdev port (EAL args before "--", e.g.
// --vdev=net_af_packet0,iface=uxtap0; --dev picks it). Our addresses: --ip
// (GID index 0, ::ffff:a.b.c.d) and --ip6 (GID index 1), MAC --mac. The
// peer's MAC is resolved through the engine's ARP / neighbour discovery
// (stack/net NetStack::resolve) and goes into the AH's dmac.
//
// Run-to-completion: the one lcore calls uroce::poll(ctx, now_ns) in every
// wait loop, with the TSC clock (drivers/dpdk/tsc_clock.h).
//
// Output: the config echo, rdma-core's "local address:" / "remote address:"
// lines, then its two result lines
//   "%lld bytes in %.2f seconds = %.2f Mbit/sec"
//   "%d iters in %.2f seconds = %.2f usec/iter"
// (or with --json one object with the same fields). SIGINT/SIGTERM stop the
// run and the results so far are still printed.
// Exit: 0 success, 1 failure or interrupted, 2 usage error.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <rte_lcore.h>

#include <uroce/cm.h>
#include <uroce/counters.h>
#include <uroce/eal.h>
#include <uroce/verbs.h>
#include <uroce/wr.h>

#include "apps/commands.h"
#include "apps/common/addr_text.h"
#include "apps/common/args.h"
#include "apps/common/endpoint.h"
#include "apps/common/json_writer.h"
#include "apps/common/launch.h"
#include "apps/common/oob.h"
#include "apps/common/page_buffer.h"
#include "drivers/dpdk/eal_args.h"

namespace uroce::apps {
namespace {

// ---------------------------------------------------------------- options

constexpr OptSpec kPingpongOptions[] = {
    {.name = "transport", .short_name = 'T', .kind = OptKind::kChoice, .def = "rc", .help = "which rdma-core tool to be: ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong or ibv_srq_pingpong", .choices = "rc|uc|ud|srq"},
    {.name = "port", .short_name = 'p', .kind = OptKind::kUint, .def = "18515", .help = "out-of-band TCP port: listen on (server) / connect to (client)", .max = 65535},
    {.name = "ib-dev", .short_name = 'd', .kind = OptKind::kString, .def = "", .help = "rdma-core's device name: accepted and ignored (the port is --dev)", .meta = "DEV"},
    {.name = "ib-port", .short_name = 'i', .kind = OptKind::kUint, .def = "1", .help = "port of the device (uroce devices have port 1 only)", .min = 1, .max = 1},
    {.name = "size", .short_name = 's', .kind = OptKind::kUint, .def = "0", .help = "message size in bytes (0: rdma-core's default, 4096; ud 2048)", .max = 1u << 30},
    {.name = "mtu", .short_name = 'm', .kind = OptKind::kUint, .def = "1024", .help = "path MTU: 256, 512, 1024, 2048 or 4096 (ud: the port's)", .min = 256, .max = 4096},
    {.name = "rx-depth", .short_name = 'r', .kind = OptKind::kUint, .def = "500", .help = "receives posted at a time", .min = 1, .max = 16384},
    {.name = "iters", .short_name = 'n', .kind = OptKind::kUint, .def = "1000", .help = "exchanges (srq: messages over all QPs)", .min = 1, .max = 1u << 30},
    {.name = "sl", .short_name = 'l', .kind = OptKind::kUint, .def = "0", .help = "service level (carried in the AH; RoCE sends no SL on the wire)", .max = 15},
    {.name = "events", .short_name = 'e', .help = "rdma-core: sleep on CQ events; accepted, uroce always polls"},
    {.name = "gid-idx", .short_name = 'g', .kind = OptKind::kUint, .def = "0", .help = "our GID index: 0 = --ip (::ffff:a.b.c.d), 1 = --ip6", .max = 1},
    {.name = "odp", .short_name = 'o', .help = "rdma-core: on-demand paging; refused (not supported, as on rxe)"},
    {.name = "iodp", .short_name = 'O', .help = "rdma-core: implicit on-demand paging; refused"},
    {.name = "prefetch", .short_name = 'P', .help = "rdma-core: prefetch an ODP MR; refused"},
    {.name = "ts", .short_name = 't', .help = "rdma-core: completion timestamps; refused (not supported, as on rxe)"},
    {.name = "dm", .short_name = 'j', .help = "rdma-core: device memory; refused"},
    {.name = "new-send", .short_name = 'N', .help = "rdma-core: ibv_wr_* send API; accepted (same wire behaviour)"},
    {.name = "chk", .short_name = 'c', .help = "validate the received buffer as rdma-core does (server: first byte of each page)"},
    {.name = "num-qp", .short_name = 'q', .kind = OptKind::kUint, .def = "16", .help = "srq: number of QPs", .min = 1, .max = 255},
    {.name = "rdma_cm", .short_name = 'R', .help = "connect with RDMA CM (uroce on both sides: the stock tools have no CM mode): rc/uc/srq by REQ/REP/RTU in rdma_cm's TCP port space, port -p, one connection per QP; ud by SIDR in the UDP port space (Q_Key 0x01234567); no TCP"},
    {.name = "srq-oob-msgs", .kind = OptKind::kUint, .def = "256", .help = "srq: out-of-band messages each way (rdma-core's MAX_QP)", .min = 1, .max = 256},
    UROCE_ENDPOINT_OPTIONS,
    {.name = "listen", .kind = OptKind::kString, .def = "0.0.0.0", .help = "server: out-of-band listen address", .meta = "A.B.C.D"},
    {.name = "timeout", .kind = OptKind::kUint, .def = "60", .help = "seconds to wait for the peer (TCP, ARP) and for progress of the ping-pong", .min = 1, .max = 3600},
    UROCE_QP_TIMEOUT_OPTION,
    {.name = "counters", .help = "print the device counters that are not zero at the end"},
    {.name = "zero-copy", .help = "send payloads of 512 bytes and more from the registered buffer in place, where the port takes chained mbufs (counters tx_zero_copy / tx_copied)"},
    {.name = "json", .help = "write the results as JSON on stdout (everything else goes to stderr)"},
    {.name = "drop-rate", .kind = OptKind::kDouble, .def = "0", .help = "test hook: lose this fraction of the frames received and sent, at random (drivers/dpdk/fault_io.h)", .min = 0, .max = 1},
    {.name = "drop-seed", .kind = OptKind::kUint, .def = "1", .help = "seed of --drop-rate's losses"},
};

constexpr std::string_view kPingpongDetails =
    "Server: no HOST (listens on --listen:-p). Client: HOST is the server's IPv4 address.\n"
    "-R: no TCP; the server's rdma_cm listener is --listen:-p (0.0.0.0: any of ours), the\n"
    "client connects to HOST:-p (IPv4 or IPv6); -m is then the CM's (the port's MTU).\n"
    "EAL arguments go before a '--' (uroce pingpong --no-huge --no-pci --no-shconf\n"
    "--vdev=net_af_packet0,iface=tap0 -- --ip 10.70.0.3 10.70.0.1); without one EAL gets\n"
    "--no-huge --no-pci --no-shconf -m 512 and a port must be given as --dev SPEC.\n"
    "The peer must send a GID (run the stock tool with -g), of the family of ours.\n"
    "Output: rdma-core's lines; --json keys: transport, role, size, iters, bytes, seconds,\n"
    "mbit_per_s, usec_per_iter, chk, invalid_pages, ok. Exit: 0 ok, 1 failure or\n"
    "interrupted, 2 usage error.\n";

constexpr CommandSpec kPingpongCommand = {
    .name = "pingpong",
    .positional = "[HOST]",
    .summary = "rdma-core's ibv_{rc,uc,ud,srq}_pingpong on uroce, compatible on the wire and out of band",
    .options = kPingpongOptions,
    .max_positional = 1,
    .details = kPingpongDetails,
};


enum class Kind : uint8_t { kRc, kUc, kUd, kSrq };

// rdma-core's wr_ids and its pending mask.
inline constexpr uint64_t kRecvWrid = 1;
inline constexpr uint64_t kSendWrid = 2;
inline constexpr uint32_t kQkey = 0x11111111;     // ibv_ud_pingpong's fixed Q_Key
inline constexpr uint32_t kUdGrhBytes = 40;       // the GRH area of a UD receive buffer
inline constexpr size_t kDestMsgBytes = 52;       // sizeof "0000:000000:000000:" + 32 hex + NUL
inline constexpr char kDone[] = "done";           // sent with its NUL: 5 bytes

struct Config {
  Kind kind = Kind::kRc;
  bool server = true;
  std::string host;
  uint16_t port = 0;
  uint32_t size = 0;
  Mtu mtu = Mtu::k1024;
  uint32_t rx_depth = 0;
  uint32_t iters = 0;
  uint8_t sl = 0;
  uint8_t gid_idx = 0;
  bool chk = false;
  uint32_t num_qp = 1;
  uint32_t oob_msgs = 1;
  bool cm = false;  // -R
  SockAddr cm_addr;  // -R: server: --listen (zero: any of ours), client: HOST; port -p
  EndpointConfig ep;  // --dev, --ip, --ip6, --mac, --port-mtu, --pcap, --zero-copy, --drop-rate, --drop-seed
  std::string listen;
  uint32_t timeout_s = 0;
  uint8_t qp_timeout = 14;  // --qp-timeout
  bool counters = false;
  bool json = false;
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kRc: return "rc";
    case Kind::kUc: return "uc";
    case Kind::kUd: return "ud";
    case Kind::kSrq: return "srq";
  }
  return "?";
}

// ---------------------------------------------------------------- the exchange message

struct Dest {
  uint32_t lid = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  Gid gid;
};

/// rdma-core's "%04x:%06x:%06x:%s" with the GID as 4 x %08x of big-endian words.
void format_dest(const Dest& d, char (&msg)[kDestMsgBytes]) {
  char gid[33];
  for (int i = 0; i < 16; ++i) std::snprintf(gid + 2 * i, 3, "%02x", d.gid.raw[i]);
  std::memset(msg, 0, sizeof(msg));
  std::snprintf(msg, sizeof(msg), "%04x:%06x:%06x:%s", d.lid, d.qpn & 0xffffff, d.psn & 0xffffff, gid);
}

/// sscanf("%x:%x:%x:%s") as rdma-core parses it; false if it does not fit.
bool parse_dest(const char (&msg)[kDestMsgBytes], Dest& d) {
  char text[kDestMsgBytes + 1] = {};
  std::memcpy(text, msg, kDestMsgBytes);
  char gid[33] = {};
  unsigned lid = 0, qpn = 0, psn = 0;
  if (std::sscanf(text, "%x:%x:%x:%32s", &lid, &qpn, &psn, gid) != 4 || std::strlen(gid) != 32) return false;
  d.lid = lid;
  d.qpn = qpn;
  d.psn = psn;
  for (int i = 0; i < 16; ++i) {
    unsigned b = 0;
    if (std::sscanf(gid + 2 * i, "%2x", &b) != 1) return false;
    d.gid.raw[i] = uint8_t(b);
  }
  return true;
}


void print_dest(std::FILE* out, const char* which, const Dest& d) {
  std::fprintf(out, "  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", which, d.lid, d.qpn, d.psn,
               gid_str(d.gid).c_str());
}

// ---------------------------------------------------------------- the endpoint

struct RunResult {
  uint32_t iters_done = 0;  // min(scnt, rcnt) when it stopped
  double usec = 0;
  uint32_t invalid_pages = 0;
  bool ok = false;
  std::string error;
};

class Pingpong {
 public:
  explicit Pingpong(const Config& cfg) : cfg_(cfg) {}
  ~Pingpong();

  /// A TCP server listens now, before open() waits for the port's link
  /// (TcpChannel::listen); exchange() accepts.
  bool listen(std::string& err);
  bool open(std::string& err);
  bool exchange(std::string& err);
  RunResult run();
  void print_counters(std::FILE* out) const { ep_.print_counters(out, cfg_.cm); }
  const Endpoint& endpoint() const { return ep_; }
  bool close_capture(std::string& err) { return ep_.close_capture(err); }
  const Gid& gid() const { return gid_; }

 private:
  void pump() { ep_.pump(); }
  bool connect_qps(std::string& err);
  /// -R: the QPs, each created and connected by rdma_cm (make_qp posts its
  /// receives), instead of create + TCP exchange + connect_qps.
  bool connect_cm(std::string& err);
  QpInitAttr qp_init_attr() const;
  uint32_t post_recvs(Qp* qp, uint32_t n);
  bool post_send(uint32_t qp_index);
  int find_qp(uint32_t qpn) const;
  uint32_t buf_bytes() const { return cfg_.size + (cfg_.kind == Kind::kUd ? kUdGrhBytes : 0); }
  uint32_t payload_off() const { return cfg_.kind == Kind::kUd ? kUdGrhBytes : 0; }

  const Config& cfg_;
  Endpoint ep_;  // first: it outlives the objects below
  Gid gid_;
  Mr* mr_ = nullptr;
  Cq* cq_ = nullptr;
  Srq* srq_ = nullptr;
  Ah* ah_ = nullptr;
  std::vector<Qp*> qps_;
  std::vector<CmId*> cm_ids_;  // -R: the ids that own qps_
  uint32_t ud_qkey_ = kQkey;   // the Q_Key our UD sends carry (-R: rdma_cm's)
  std::vector<Dest> me_, rem_;
  std::vector<uint8_t> pending_;
  uint8_t* buf_ = nullptr;
  PageBuffer mem_;  // page-aligned, as the stock tool aligns it
  uint32_t routs_ = 0;
  TcpChannel oob_{&g_stop};  // the out-of-band exchange (not with -R)
};

Pingpong::~Pingpong() {
  if (cm_ids_.empty()) {
    for (Qp* q : qps_) (void)destroy_qp(q);
  }
  for (CmId* id : cm_ids_) (void)cm_destroy_id(id);  // with its QP
  if (ah_) (void)destroy_ah(ah_);
  if (srq_) (void)destroy_srq(srq_);
  if (cq_) (void)destroy_cq(cq_);
  if (mr_) (void)dereg_mr(mr_);
}

bool Pingpong::listen(std::string& err) {
  if (cfg_.cm || !cfg_.server || oob_.listen(cfg_.listen, cfg_.port, err)) return true;
  err = "Couldn't listen to port " + std::to_string(cfg_.port) + ": " + err;
  return false;
}

bool Pingpong::open(std::string& err) {
  // The QPs send from GID index -g (AH sgid_index): 0 = --ip, 1 = --ip6.
  gid_ = *cfg_.ep.addrs.gid(cfg_.gid_idx);
  if (!ep_.open(cfg_.ep, err)) return false;
  Context* ctx = ep_.ctx();

  if (cfg_.kind == Kind::kUd && cfg_.size > mtu_bytes(ep_.max_mtu())) {
    err = "Requested size larger than port MTU (" + std::to_string(mtu_bytes(ep_.max_mtu())) + ")";
    return false;
  }
  if (cfg_.kind != Kind::kUd && mtu_bytes(cfg_.mtu) > mtu_bytes(ep_.max_mtu())) {
    err = "-m " + std::to_string(mtu_bytes(cfg_.mtu)) + " is larger than the port carries (" +
          std::to_string(mtu_bytes(ep_.max_mtu())) + " with --port-mtu " + std::to_string(ep_.port_info().mtu) + ")";
    return false;
  }

  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t bytes = std::max<size_t>(buf_bytes(), 1);
  mem_ = page_buffer(bytes + page);
  buf_ = mem_.get();
  std::memset(buf_, 0x7b, bytes);  // rdma-core fills its buffer with 0x7b

  auto mr = reg_mr(ep_.pd(), buf_, bytes, kAccessLocalWrite);
  if (!mr.ok()) {
    err = std::string("reg_mr: ") + mr.status().message();
    return false;
  }
  mr_ = *mr;
  const uint32_t n_qp = cfg_.kind == Kind::kSrq ? cfg_.num_qp : 1;
  auto cq = create_cq(ctx, cfg_.rx_depth + n_qp);
  if (!cq.ok()) {
    err = std::string("create_cq: ") + cq.status().message();
    return false;
  }
  cq_ = *cq;
  if (cfg_.kind == Kind::kSrq) {
    SrqInitAttr sa;
    sa.max_wr = cfg_.rx_depth;
    sa.max_sge = 1;
    auto srq = create_srq(ep_.pd(), sa);
    if (!srq.ok()) {
      err = std::string("create_srq: ") + srq.status().message();
      return false;
    }
    srq_ = *srq;
  }
  pending_.assign(n_qp, 0);
  if (cfg_.cm) {  // rdma_cm makes the QPs (connect_cm); an SRQ takes its receives now
    if (srq_) routs_ = post_recvs(nullptr, cfg_.rx_depth);
    if (srq_ && routs_ < cfg_.rx_depth) {
      err = "Couldn't post receive (" + std::to_string(routs_) + ")";
      return false;
    }
    return true;
  }
  for (uint32_t i = 0; i < n_qp; ++i) {
    auto q = create_qp(ep_.pd(), qp_init_attr());
    if (!q.ok()) {
      err = "create_qp[" + std::to_string(i) + "]: " + q.status().message();
      return false;
    }
    qps_.push_back(*q);
    ep_.trace_if_asked(*q);
    if (!init_qp(*q, 0, kQkey, err)) return false;  // access 0: SEND only, as rdma-core
  }
  routs_ = post_recvs(qps_[0], cfg_.rx_depth);
  if (routs_ < cfg_.rx_depth) {
    err = "Couldn't post receive (" + std::to_string(routs_) + ")";
    return false;
  }

  std::random_device rd;
  std::mt19937 rng(rd() ^ uint32_t(getpid()));
  me_.assign(cfg_.oob_msgs, Dest{});  // srq: the messages past -q stay zero, as rdma-core's
  for (uint32_t i = 0; i < n_qp; ++i) {
    me_[i].qpn = qps_[i]->qp_num;
    me_[i].psn = rng() & 0xffffff;
    me_[i].gid = gid_;
  }
  if (cfg_.kind == Kind::kUd) {
    // ibv_ud_pingpong moves its QP to RTS before the exchange: RTR needs nothing, RTS the SQ PSN.
    QpAttr a;
    a.qp_state = QpState::kRtr;
    Status s = modify_qp(qps_[0], a, kQpState);
    if (s.ok()) {
      a.qp_state = QpState::kRts;
      a.sq_psn = me_[0].psn;
      s = modify_qp(qps_[0], a, kQpState | kQpSqPsn);
    }
    if (!s.ok()) {
      err = "modify_qp UD RTR/RTS: " + std::string(s.message());
      return false;
    }
  }
  return true;
}

QpInitAttr Pingpong::qp_init_attr() const {
  QpInitAttr ia;
  ia.send_cq = cq_;
  ia.recv_cq = cq_;
  ia.srq = srq_;
  ia.cap.max_send_wr = 1;
  ia.cap.max_recv_wr = srq_ ? 0 : cfg_.rx_depth;
  ia.qp_type = cfg_.kind == Kind::kUc ? QpType::kUc : cfg_.kind == Kind::kUd ? QpType::kUd : QpType::kRc;
  return ia;
}

/// n receives on qp (on the SRQ if there is one); returns how many were posted.
uint32_t Pingpong::post_recvs(Qp* qp, uint32_t n) {
  Sge sge{uint64_t(uintptr_t(buf_)), buf_bytes(), mr_->lkey};
  RecvWr wr;
  wr.wr_id = kRecvWrid;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  RecvWr* bad = nullptr;
  uint32_t i = 0;
  for (; i < n; ++i) {
    const Status s = srq_ ? post_srq_recv(srq_, &wr, &bad) : uroce::post_recv(qp, &wr, &bad);
    if (!s.ok()) break;
  }
  return i;
}

bool Pingpong::post_send(uint32_t qp_index) {
  Sge sge{uint64_t(uintptr_t(buf_ + payload_off())), cfg_.size, mr_->lkey};
  SendWr wr = cfg_.kind == Kind::kUd ? ud_send_wr(kSendWrid, &sge, ah_, rem_[0].qpn, ud_qkey_) : send_wr(kSendWrid, &sge);
  wr.signaled();
  SendWr* bad = nullptr;
  return uroce::post_send(qps_[qp_index], &wr, &bad).ok();
}

int Pingpong::find_qp(uint32_t qpn) const {
  for (size_t i = 0; i < qps_.size(); ++i) {
    if (qps_[i]->qp_num == qpn) return int(i);
  }
  return -1;
}

bool Pingpong::connect_qps(std::string& err) {
  const Gid& peer = rem_[0].gid;
  if (peer == Gid{}) {
    err = "the peer sent no GID: run it with -g (RoCE needs a GID)";
    return false;
  }
  if (peer.is_ipv4_mapped() != gid_.is_ipv4_mapped()) {
    err = "the peer's GID " + gid_str(peer) + " is of the other IP family than ours (" + gid_str(gid_) + "): check -g";
    return false;
  }
  AhAttr ah;
  ah.dgid = peer;  // srq: rdma-core takes the first message's GID for every QP
  ah.sgid_index = cfg_.gid_idx;
  ah.hop_limit = 64;  // rdma-core asks for 1; rxe sends TTL 64 whatever it is given (docs/INTEROP.md)
  ah.sl = cfg_.sl;
  if (!ep_.resolve(peer, cfg_.gid_idx, ah.dmac, Deadline(cfg_.timeout_s), err)) return false;
  if (cfg_.kind == Kind::kUd) {
    auto r = create_ah(ep_.pd(), ah);
    if (!r.ok()) {
      err = std::string("create_ah: ") + r.status().message();
      return false;
    }
    ah_ = *r;
    return true;
  }
  // rdma-core's attributes (QpConnect's defaults): RTR max_dest_rd_atomic 1,
  // min_rnr_timer 12; RTS timeout 14 (--qp-timeout), retry_cnt 7, rnr_retry 7, max_rd_atomic 1.
  for (size_t i = 0; i < qps_.size(); ++i) {
    if (!connect_qp(qps_[i], {.ah = ah, .path_mtu = cfg_.mtu, .dest_qpn = rem_[i].qpn, .rq_psn = rem_[i].psn,
                              .sq_psn = me_[i].psn, .timeout = cfg_.qp_timeout}, err)) {
      return false;
    }
  }
  return true;
}

bool Pingpong::connect_cm(std::string& err) {
  const CmPeer peer{.server = cfg_.server, .addr = cfg_.cm_addr, .timeout_s = cfg_.timeout_s};
  auto make_qp = [this](CmId* id, std::string& e) {
    // A connection attempt that was rejected left its receives flushed here.
    Wc stale;
    while (poll_cq(cq_, 1, &stale) == 1) {
    }
    if (Status s = cm_create_qp(id, ep_.pd(), qp_init_attr()); !s.ok()) {
      e = std::string("rdma_create_qp: ") + s.message();
      return false;
    }
    ep_.trace_if_asked(id->qp);
    if (srq_) return true;
    routs_ = post_recvs(id->qp, cfg_.rx_depth);  // before the REP / REQ leaves
    if (routs_ < cfg_.rx_depth) {
      e = "Couldn't post receive (" + std::to_string(routs_) + ")";
      return false;
    }
    return true;
  };
  const uint32_t n_qp = uint32_t(pending_.size());
  me_.assign(n_qp, Dest{});
  rem_.assign(n_qp, Dest{});
  for (uint32_t i = 0; i < n_qp; ++i) {
    CmEvent est;
    CmId* id = cfg_.kind == Kind::kUd ? ep_.cm_connect_ud(peer, make_qp, &est, err)
                                      : ep_.cm_connect_rc(peer, CmConnParam{}, make_qp, err);
    if (!id) {
      err = "rdma_cm connection [" + std::to_string(i) + "]: " + err;
      return false;
    }
    cm_ids_.push_back(id);
    qps_.push_back(id->qp);
    me_[i] = {.qpn = id->qp->qp_num, .gid = gid_};
    rem_[i].gid = id->dst.ip;
    if (cfg_.kind != Kind::kUd) {  // the PSNs and the peer's QPN the CM set
      QpAttr a;
      QpInitAttr ia;
      if (Status s = query_qp(id->qp, &a, &ia); !s.ok()) {
        err = std::string("query_qp: ") + s.message();
        return false;
      }
      me_[i].psn = a.sq_psn;
      rem_[i] = {.qpn = a.dest_qp_num, .psn = a.rq_psn, .gid = id->dst.ip};
      continue;
    }
    // UD: the client has the server's QPN, Q_Key and path from the SIDR REP;
    // the server answers the path the SIDR REQ came on, to the QPN the first
    // datagram comes from (run() takes it from the completion, as udaddy does).
    ud_qkey_ = cfg_.server ? kRdmaUdpQkey : est.ud_qkey;
    if (!cfg_.server) rem_[i].qpn = est.ud_qp_num;
    auto ah = create_ah(ep_.pd(), cfg_.server ? id->route : est.ud_ah);
    if (!ah.ok()) {
      err = std::string("create_ah: ") + ah.status().message();
      return false;
    }
    ah_ = *ah;
  }
  return true;
}

bool Pingpong::exchange(std::string& err) {
  std::FILE* info = cfg_.json ? stderr : stdout;
  if (cfg_.cm) {
    if (!connect_cm(err)) return false;
    for (uint32_t i = 0; i < qps_.size(); ++i) print_dest(info, "local address: ", me_[i]);
    for (uint32_t i = 0; i < qps_.size(); ++i) print_dest(info, "remote address:", rem_[i]);
    return true;
  }
  for (uint32_t i = 0; i < qps_.size(); ++i) print_dest(info, "local address: ", me_[i]);
  auto idle = [this] { pump(); };
  auto send_mine = [&]() {
    for (const Dest& d : me_) {
      char msg[kDestMsgBytes];
      format_dest(d, msg);
      if (!oob_.send_bytes(msg, sizeof(msg))) {
        err = "Couldn't send local address";
        return false;
      }
    }
    return true;
  };
  auto read_theirs = [&]() {
    rem_.assign(me_.size(), Dest{});
    for (size_t i = 0; i < me_.size(); ++i) {
      char msg[kDestMsgBytes];
      if (!oob_.recv_wait(msg, sizeof(msg), cfg_.timeout_s, idle, err)) {
        err = "Couldn't read remote address [" + std::to_string(i) + "]: " + err;
        return false;
      }
      if (i < qps_.size() && !parse_dest(msg, rem_[i])) {
        err = "remote address [" + std::to_string(i) + "] is not LID:QPN:PSN:GID";
        return false;
      }
    }
    return true;
  };
  if (cfg_.server) {
    if (!oob_.accept_one(cfg_.listen, cfg_.port, cfg_.timeout_s, idle, err)) return false;
    if (!read_theirs() || !connect_qps(err) || !send_mine()) return false;
    char done[sizeof(kDone)];
    if (!oob_.recv_wait(done, sizeof(done), cfg_.timeout_s, idle, err) || std::memcmp(done, kDone, sizeof(kDone)) != 0) {
      err = "no \"done\" from the client" + (err.empty() ? std::string() : ": " + err);
      return false;
    }
  } else {
    if (!oob_.connect_to(cfg_.host, cfg_.port, cfg_.timeout_s, idle, err)) {
      err = "Couldn't connect to " + cfg_.host + ":" + std::to_string(cfg_.port) + ": " + err;
      return false;
    }
    if (!send_mine() || !read_theirs()) return false;
    if (!oob_.send_bytes(kDone, sizeof(kDone))) {
      err = "Couldn't write \"done\"";
      return false;
    }
  }
  for (uint32_t i = 0; i < qps_.size(); ++i) print_dest(info, "remote address:", rem_[i]);
  return cfg_.server || connect_qps(err);
}

RunResult Pingpong::run() {
  RunResult res;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const uint32_t n_qp = uint32_t(qps_.size());
  const uint32_t refill_at = cfg_.kind == Kind::kSrq ? n_qp : 1;
  uint32_t scnt = 0, rcnt = 0;
  auto fail = [&res](std::string e) {
    res.error = std::move(e);
    return false;
  };
  // The client starts: a SEND on every QP (rdma-core's pending = SEND | RECV).
  for (uint32_t i = 0; i < n_qp; ++i) pending_[i] = uint8_t(kRecvWrid);
  if (!cfg_.server) {
    if (cfg_.chk) {
      for (size_t i = 0; i < cfg_.size; i += page) buf_[payload_off() + i] = 0;  // i / page % sizeof(char)
    }
    for (uint32_t i = 0; i < n_qp; ++i) {
      if (!post_send(i)) {
        res.error = "Couldn't post send";
        return res;
      }
      pending_[i] = uint8_t(kRecvWrid | kSendWrid);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  auto handle = [&](const Wc& wc) {
    if (wc.status != WcStatus::kSuccess) {
      return fail("Failed status " + std::string(wc_status_str(wc.status)) + " (" + std::to_string(int(wc.status)) +
                  ") for wr_id " + std::to_string(int(wc.wr_id)));
    }
    const int qi = find_qp(wc.qp_num);
    if (qi < 0) return fail("Couldn't find QPN " + std::to_string(wc.qp_num));
    if (wc.wr_id == kSendWrid) {
      ++scnt;
    } else if (wc.wr_id == kRecvWrid) {
      if (cfg_.kind == Kind::kUd && rem_[0].qpn == 0) rem_[0].qpn = wc.src_qp;  // -R server: the SIDR peer
      if (--routs_ <= refill_at) {
        routs_ += post_recvs(qps_[0], cfg_.rx_depth - routs_);
        if (routs_ < cfg_.rx_depth) return fail("Couldn't post receive (" + std::to_string(routs_) + ")");
      }
      ++rcnt;
    } else {
      return fail("Completion for unknown wr_id " + std::to_string(wc.wr_id));
    }
    pending_[size_t(qi)] &= uint8_t(~wc.wr_id);
    if (scnt < cfg_.iters && !pending_[size_t(qi)]) {
      if (!post_send(uint32_t(qi))) return fail("Couldn't post send");
      pending_[size_t(qi)] = uint8_t(kRecvWrid | kSendWrid);
    }
    return true;
  };
  bool ok = true;
  Wc wc[32];
  while (ok && (rcnt < cfg_.iters || scnt < cfg_.iters)) {
    if (g_stop) {
      res.error = "interrupted";
      ok = false;
      break;
    }
    pump();
    const int ne = poll_cq(cq_, 32, wc);
    const auto now = std::chrono::steady_clock::now();
    if (ne > 0) last_progress = now;
    for (int i = 0; i < ne && ok; ++i) ok = handle(wc[i]);
    if (ok && now - last_progress > std::chrono::seconds(cfg_.timeout_s)) {
      res.error = "no completion for " + std::to_string(cfg_.timeout_s) + " s (sent " + std::to_string(scnt) +
                  ", received " + std::to_string(rcnt) + ")";
      ok = false;
    }
  }
  const auto end = std::chrono::steady_clock::now();
  res.usec = double(std::chrono::duration_cast<std::chrono::microseconds>(end - start).count());
  res.iters_done = ok ? cfg_.iters : std::min(scnt, rcnt);
  if (ok && cfg_.server && cfg_.chk) {
    for (size_t i = 0; i < cfg_.size; i += page) {
      if (buf_[payload_off() + i] != 0) {
        std::printf("invalid data in page %zu\n", i / page);
        ++res.invalid_pages;
      }
    }
  }
  // Let the last ACKs leave (the peer's final SEND completion waits for them).
  ep_.drain(200);
  // -R: rdma_disconnect (DREQ / DREP) of each connection; the CM answers the peer's.
  if (!cm_ids_.empty()) ep_.cm_disconnect_all(cm_ids_, 1000);
  res.ok = ok && res.invalid_pages == 0;
  if (ok && res.invalid_pages) res.error = std::to_string(res.invalid_pages) + " invalid page(s)";
  return res;
}

}  // namespace

int cmd_pingpong(int argc, char** argv) {
  dpdk::SplitArgs split;
  Args args;
  if (auto rc = parse_endpoint_command(kPingpongCommand, argc, argv, split, args)) return *rc;
  auto usage = [](const std::string& msg) { return usage_error(kPingpongCommand, msg); };
  for (const char* name : {"odp", "iodp", "prefetch", "ts", "dm"}) {
    if (args.flag(name)) {
      return usage(std::string("--") + name + " is not supported by uroce (rxe refuses it too: no ODP, completion "
                   "timestamps or device memory)");
    }
  }
  Config cfg;
  const std::string_view t = args.get_str("transport");
  cfg.kind = t == "rc" ? Kind::kRc : t == "uc" ? Kind::kUc : t == "ud" ? Kind::kUd : Kind::kSrq;
  cfg.server = args.positional().empty();
  if (!cfg.server) cfg.host = std::string(args.positional()[0]);
  cfg.port = uint16_t(args.get_uint("port"));
  cfg.size = uint32_t(args.get_uint("size"));
  if (cfg.size == 0) cfg.size = cfg.kind == Kind::kUd ? 2048 : 4096;
  const uint64_t mtu = args.get_uint("mtu");
  if (mtu & (mtu - 1)) return usage("--mtu must be 256, 512, 1024, 2048 or 4096");
  cfg.mtu = mtu == 256 ? Mtu::k256 : mtu == 512 ? Mtu::k512 : mtu == 1024 ? Mtu::k1024 : mtu == 2048 ? Mtu::k2048 : Mtu::k4096;
  cfg.rx_depth = uint32_t(args.get_uint("rx-depth"));
  cfg.iters = uint32_t(args.get_uint("iters"));
  cfg.sl = uint8_t(args.get_uint("sl"));
  cfg.gid_idx = uint8_t(args.get_uint("gid-idx"));
  cfg.chk = args.flag("chk");
  cfg.ep.tx_zero_copy = args.flag("zero-copy");
  if (cfg.kind == Kind::kSrq) {
    cfg.num_qp = uint32_t(args.get_uint("num-qp"));
    cfg.oob_msgs = uint32_t(args.get_uint("srq-oob-msgs"));
    if (cfg.num_qp > cfg.oob_msgs) return usage("--num-qp must not exceed --srq-oob-msgs");
    if (cfg.num_qp > cfg.rx_depth) {
      return usage("rx_depth " + std::to_string(cfg.rx_depth) + " is too small for " + std::to_string(cfg.num_qp) +
                   " QPs -- must have at least one receive per QP");
    }
  } else if (args.given("num-qp")) {
    return usage("--num-qp is for --transport srq");
  }
  if (const std::string e = read_endpoint_options(args, cfg.gid_idx, "-g", cfg.ep); !e.empty()) return usage(e);
  cfg.listen = std::string(args.get_str("listen"));
  cfg.cm = args.flag("rdma_cm");
  if (cfg.cm) {
    if (args.given("mtu")) return usage("-m with -R: rdma_cm takes the path MTU the port carries (set --port-mtu)");
    const std::string_view a = cfg.server ? std::string_view(cfg.listen) : std::string_view(cfg.host);
    std::optional<Gid> g = parse_ip_gid(a, false);
    if (!g) g = parse_ip_gid(a, true);
    if (!g) return usage(std::string("-R: ") + (cfg.server ? "--listen" : "HOST") + " is not an IPv4 or IPv6 address");
    const bool any = *g == *parse_ip_gid("0.0.0.0", false) || *g == Gid{};
    cfg.cm_addr = SockAddr{any ? Gid{} : *g, cfg.port};
  }
  cfg.timeout_s = uint32_t(args.get_uint("timeout"));
  cfg.qp_timeout = read_qp_timeout(args);
  cfg.ep.timeout_s = cfg.timeout_s;
  cfg.ep.max_qp = cfg.num_qp + 4;
  cfg.counters = args.flag("counters");
  cfg.ep.drop_rate = args.get_double("drop-rate");
  cfg.ep.drop_seed = args.get_uint("drop-seed");
  cfg.json = args.flag("json");

  std::FILE* info = cfg.json ? stderr : stdout;
  const char* role = cfg.server ? "server" : "client";
  if (!start_endpoint_process("pingpong", split)) return kExitFailure;
  std::fprintf(info, "# uroce pingpong %s\n", args.config_line().c_str());
  std::string err;
  Pingpong pp(cfg);
  if (!pp.listen(err) || !pp.open(err)) {
    std::fprintf(stderr, "uroce pingpong (%s): %s\n", role, err.c_str());
    return kExitFailure;
  }
  const auto& pi = pp.endpoint().port_info();
  std::fprintf(info, "# %s %s: size %u, path MTU %u, port %s (%s) mtu %u, mac %s, gid %s, lcore %u%s%s\n",
               kind_name(cfg.kind), role, cfg.size, cfg.cm ? mtu_bytes(pp.endpoint().max_mtu()) : mtu_bytes(cfg.mtu), pi.name.c_str(), pi.driver.c_str(), pi.mtu,
               mac_str(pp.endpoint().mac()).c_str(), gid_str(pp.gid()).c_str(), rte_lcore_id(),
               cfg.ep.pcap.empty() ? "" : ", capture ", cfg.ep.pcap.c_str());
  RunResult r;
  if (pp.exchange(err)) {
    r = pp.run();
  } else {
    r.error = err;
  }
  if (!pp.close_capture(r.error)) r.ok = false;
  const bool ran = r.ok || r.iters_done > 0;
  const double usec = r.usec > 0 ? r.usec : 1;
  const uint32_t iters = r.ok ? cfg.iters : r.iters_done;
  const long long bytes = (long long)cfg.size * iters * 2;
  if (cfg.json) {
    JsonWriter w;
    w.begin_object().key("command").str("pingpong").key("transport").str(kind_name(cfg.kind)).key("role").str(role);
    w.key("size").num(cfg.size).key("iters").num(iters).key("bytes").num(bytes).key("seconds").fixed(usec / 1e6, 6);
    w.key("mbit_per_s").fixed(bytes * 8. / usec, 2).key("usec_per_iter").fixed(iters ? usec / iters : 0.0, 2);
    w.key("chk").boolean(cfg.chk).key("invalid_pages").num(r.invalid_pages).key("ok").boolean(r.ok);
    w.key("interrupted").boolean(g_stop).key("error").str(r.error).end_object();
    std::printf("%s\n", w.text().c_str());
  } else if (ran) {
    std::printf("%lld bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec / 1000000., bytes * 8. / usec);
    std::printf("%u iters in %.2f seconds = %.2f usec/iter\n", iters, usec / 1000000., iters ? usec / iters : 0.0);
  }
  if (cfg.counters) pp.print_counters(info);
  if (!r.ok) {
    std::fprintf(stderr, "uroce pingpong (%s %s): %s\n", kind_name(cfg.kind), role, r.error.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace uroce::apps
