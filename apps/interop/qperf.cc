// `uroce qperf`: qperf's RDMA tests rc_lat and rc_bw on the uroce stack, as a
// qperf server for a stock client or as a client of a stock server, with
// connections set up by the CM over QP1 (qperf's -cm1). Wire facts from qperf
// 0.4.11 (github linux-rdma/qperf, src/qperf.c, support.c, rdma.c; read for the
// facts only; docs/CM.md "qperf -cm1"):
//
//   Control: one TCP connection per test to the server's port 19765 (-lp).
//   Integers travel little-endian (enc_int: the low byte first), each struct as
//   its C size with the fields packed from the start:
//     REQ  200 bytes: ver_maj, ver_min, ver_inc, req_index (u16 each), then
//          access_recv, affinity, alt_port, flip, msg_size, mtu_size, no_msgs,
//          poll_mode, port, rd_atomic, sl, sock_buf_size, src_path_bits, time,
//          timeout, use_cm (u32 each), id[64], static_rate[64]. The server
//          reads the first 6 bytes, refuses a major.minor other than its own
//          ("upgrade qperf on ..."), then reads the other 194.
//     req_index indexes qperf's test table (conf 0, quit 1, ..., rc_bw 13,
//          rc_lat 16, ...: kTests below).
//     CM port  4 bytes (u32): with -cm1 the server binds rdma_cm (port space
//          TCP) to any address and port 0 and sends the port it got; the client
//          resolves the server's name (the TCP peer) with that port and connects
//          (responder resources 1, initiator depth 1, retry 7, RNR retry 7).
//     NODE 40 bytes each way (both send, then read): vaddr u64, lid, qpn, psn,
//          srqn, rkey, alt_lid, rd_atomic (u32), 4 bytes of padding.
//     sync "synchronization before test" (27 bytes) each way; both sides then
//          run the test for `time` seconds (or `no_msgs` messages) on their
//          own timers.
//     STAT 256 bytes, server -> client: no_cpus, no_ticks, max_cqes (u32),
//          time_s[9], time_e[9] (u64: real time, user, nice, kernel, idle,
//          iowait, irq, softirq, steal, in units of 1/no_ticks s), then
//          {no_bytes, no_msgs, no_errs} (u64) for send, recv, rem_send,
//          rem_recv, 4 bytes of padding; then the client sends
//          "synchronization after test" (26 bytes). The client disconnects the
//          RC connection (DREQ), the server waits for it.
//     Errors: the side that fails sends one urgent (MSG_OOB) byte '?', then
//          its message, and shuts the connection down; the other side prints
//          "server: <message>" (or "client: ...") and exits 1.
//   rc_lat: SEND/RECV ping-pong of msg_size (default 1) bytes, one receive
//     posted; the client sends first, each side sends again once its SEND
//     completed and the next message arrived. latency = the client's real
//     time / (messages received by both sides): the one-way time.
//   rc_bw: the client streams SENDs of msg_size (default 65536) bytes, all
//     from one buffer; the server keeps 1024 receives posted into one buffer.
//     bw = bytes the server received / the server's real time.
//
// Our STAT gives times in microseconds (no_ticks = 1000000) from the steady
// clock, and the CPU times of /proc/stat scaled to that unit.
// Exit: 0 ok, 1 failure, 2 usage error.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
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
#include "apps/common/json_writer.h"
#include "apps/common/launch.h"
#include "apps/common/oob.h"
#include "apps/interop/qperf_proto.h"
#include "drivers/dpdk/eal_args.h"

namespace uroce::apps {
namespace {

using namespace qperf;  // NOLINT: the protocol's names, as qperf calls them

// ------------------------------------------------------------------ what we serve
constexpr uint32_t kTicksPerSec = 1'000'000;  // our STAT's time unit: microseconds
constexpr uint32_t kRecvDepth = 1024;         // qperf's NCQE: rc_bw's posted receives
constexpr uint32_t kSendDepth = 128;          // our rc_bw sender's outstanding SENDs
constexpr uint32_t kMaxMsgSize = 1u << 26;    // the largest message buffer a client may make us allocate

enum class Test : uint8_t { kConf, kQuit, kRcBw, kRcLat };
constexpr std::pair<Test, uint16_t> kSupported[] = {{Test::kConf, *test_index("conf")},
                                                    {Test::kQuit, *test_index("quit")},
                                                    {Test::kRcBw, *test_index("rc_bw")},
                                                    {Test::kRcLat, *test_index("rc_lat")}};
constexpr char kSupportedList[] = "conf quit rc_bw rc_lat";

std::optional<Test> supported(uint16_t index) {
  for (const auto& [t, i] : kSupported) {
    if (i == index) return t;
  }
  return std::nullopt;
}

// ------------------------------------------------------------------ our STAT clock
/// Real time (steady clock) and the CPU times of /proc/stat, in microseconds.
std::array<uint64_t, kTimes> now_times() {
  std::array<uint64_t, kTimes> t{};
  t[0] = uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
  std::ifstream f("/proc/stat");
  std::string cpu;
  f >> cpu;
  const uint64_t per_tick = kTicksPerSec / uint64_t(std::max(1L, sysconf(_SC_CLK_TCK)));
  for (size_t i = 1; i < kTimes && cpu == "cpu" && f >> t[i]; ++i) t[i] *= per_tick;
  return t;
}

Stat local_stat() {
  Stat s;
  s.no_cpus = uint32_t(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  s.no_ticks = kTicksPerSec;
  return s;
}

// ------------------------------------------------------------------ options
constexpr OptSpec kQperfOptions[] = {
    {.name = "listen-port", .short_name = 'l', .kind = OptKind::kUint, .def = "19765", .help = "qperf's TCP port (its -lp): the server listens there, the client connects there", .min = 1, .max = 65535},
    {.name = "listen", .kind = OptKind::kString, .def = "0.0.0.0", .help = "server: the IPv4 address to take qperf's TCP connections on", .meta = "A.B.C.D"},
    {.name = "count", .short_name = 'C', .kind = OptKind::kUint, .def = "0", .help = "server: exit after serving this many requests (0: until a client's quit or SIGINT)", .max = 1u << 30},
    {.name = "time", .short_name = 't', .kind = OptKind::kUint, .def = "2", .help = "client: seconds each test runs (qperf's -t)", .min = 1, .max = 3600},
    {.name = "msg-size", .short_name = 'm', .kind = OptKind::kUint, .def = "0", .help = "client: message bytes (qperf's -m; 0: the test's default, rc_lat 1, rc_bw 65536)", .max = 1u << 30},
    {.name = "no-msgs", .short_name = 'n', .kind = OptKind::kUint, .def = "0", .help = "client: end each test after this many messages instead of -t (qperf's -n)", .max = 1u << 30},
    {.name = "verbose", .short_name = 'v', .help = "client: also show msg_rate and each side's messages, bytes and real time"},
    UROCE_ENDPOINT_OPTIONS,
    {.name = "timeout", .kind = OptKind::kUint, .def = "60", .help = "seconds to wait for the peer at each step", .min = 1, .max = 3600},
    {.name = "counters", .help = "print the device and CM counters that are not zero at the end"},
    {.name = "json", .help = "write the results as JSON on stdout (everything else goes to stderr)"},
};

constexpr std::string_view kQperfDetails =
    "Without SERVER: a qperf server for stock qperf clients (qperf -cm1 HOST rc_lat rc_bw).\n"
    "With SERVER and TESTS: a client of a stock qperf server (qperf with no arguments), -cm1 always.\n"
    "Tests: rc_lat, rc_bw, conf and quit (it ends a server); other tests are refused\n"
    "with qperf's error report, so a stock client prints \"server: ...\" and exits.\n"
    "qperf's TCP control connection goes through the kernel (--listen, SERVER), the RDMA\n"
    "connection through our port: rdma_cm dials SERVER, so as a server our --ip must be the\n"
    "address the client dials (with the kernel's TCP on the same address and MAC).\n"
    "EAL arguments go before a '--' (uroce qperf --no-huge --no-pci --no-shconf\n"
    "--vdev=net_af_packet0,iface=tap0 -- --ip 10.70.0.2 -t 2 10.70.0.1 rc_lat rc_bw).\n"
    "--json keys: role, tests [{test, latency_us, msg_rate, bw_MBps, loc/rem msgs, bytes, real_s}], ok, error.\n"
    "Exit: 0 ok, 1 failure, 2 usage error.\n";

constexpr CommandSpec kQperfCommand = {
    .name = "qperf",
    .positional = "[SERVER TEST...]",
    .summary = "qperf's rc_lat and rc_bw on uroce (RDMA CM, qperf -cm1), server or client of the stock tool",
    .options = kQperfOptions,
    .details = kQperfDetails,
};

struct Config {
  bool server = true;
  std::string host;  // client: the server (TCP and rdma_cm)
  std::vector<uint16_t> tests;
  uint16_t listen_port = 19765;
  uint16_t cm_port = 0;  // server: the rdma_cm port of every test
  std::string listen = "0.0.0.0";
  uint32_t count = 0, time_s = 2, msg_size = 0, no_msgs = 0;
  bool verbose = false;
  EndpointConfig ep;  // --dev, --ip, --mac, --port-mtu, --pcap
  uint32_t timeout_s = 60;
  bool counters = false, json = false;
};

// ------------------------------------------------------------------ control connection
/// qperf's TCP control connection: fixed-size messages both ways, the peer's
/// error report (urgent byte + text) recognised, ours sent the same way. Every
/// wait pumps the engine.
class Control {
 public:
  Control(Endpoint& st, uint32_t timeout_s, bool client) : st_(st), timeout_s_(timeout_s), client_(client) {}
  TcpChannel& tcp() { return tcp_; }
  auto idle() {
    return [this] { st_.pump(); };
  }
  bool send(const void* p, size_t n, const char* what, std::string& err) {
    if (tcp_.send_bytes(p, n)) return true;
    err = std::string("failed to send ") + what + ": the " + peer() + " closed the connection";
    return false;
  }
  bool recv(void* p, size_t n, const char* what, std::string& err) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s_);
    while (true) {
      if (peer_error(err)) return false;
      if (tcp_.try_recv(p, n)) return true;
      if (tcp_.eof() || g_stop || std::chrono::steady_clock::now() > end) {
        if (peer_error(err)) return false;
        err = std::string("failed to receive ") + what + ": " +
              (g_stop ? "interrupted" : tcp_.eof() ? std::string(peer()) + " not responding" : "timed out");
        return false;
      }
      st_.pump();
    }
  }
  /// qperf's synchronize(): both send msg, then both read it back.
  bool sync(std::string_view msg, std::string& err) { return send(msg.data(), msg.size(), msg.data(), err) && expect(msg, err); }
  bool expect(std::string_view msg, std::string& err) {
    std::string got(msg.size(), '\0');
    if (!recv(got.data(), got.size(), msg.data(), err)) return false;
    if (got == msg) return true;
    err = "synchronize " + std::string(msg) + " failure: data does not match";
    return false;
  }
  /// qperf's error(): one urgent byte '?', the message, our half closed, the
  /// rest drained for up to 3 s (ERROR_TIMEOUT). Byte and message leave in one
  /// segment (TCP_CORK): qperf's urgent() reads the message right after the
  /// byte from a non-blocking socket, so a message that comes later is lost.
  void report_error(const std::string& msg) {
    if (tcp_.fd() < 0) return;
    const int on = 1, off = 0;
    (void)::setsockopt(tcp_.fd(), IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
    (void)::send(tcp_.fd(), "?", 1, MSG_OOB | MSG_NOSIGNAL);
    (void)tcp_.send_bytes(msg.data(), msg.size());
    (void)::setsockopt(tcp_.fd(), IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
    ::shutdown(tcp_.fd(), SHUT_WR);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    uint8_t b;
    while (!tcp_.eof() && std::chrono::steady_clock::now() < end) {
      if (!tcp_.try_recv(&b, 1)) st_.pump();
    }
  }

 private:
  const char* peer() const { return client_ ? "server" : "client"; }
  /// The peer's error report, if one came: err = "server: <its message>". The
  /// report starts at TCP's urgent mark. Data sent before it is read first
  /// (recv() stops at the mark, as qperf's urgent() reads up to it); at the
  /// mark a plain recv() would skip the urgent byte and return the report's
  /// text as data, so this must be asked before every read.
  bool peer_error(std::string& err) {
    pollfd p{tcp_.fd(), POLLPRI, 0};
    if (tcp_.fd() < 0 || ::poll(&p, 1, 0) != 1 || !(p.revents & POLLPRI) || ::sockatmark(tcp_.fd()) != 1) {
      return false;
    }
    char mark;
    (void)::recv(tcp_.fd(), &mark, 1, MSG_OOB);
    std::string text;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);  // qperf's ERROR_TIMEOUT
    char c;
    while (!tcp_.eof() && std::chrono::steady_clock::now() < end && text.size() < 256) {
      if (tcp_.try_recv(&c, 1)) {
        text += c;
      } else {
        st_.pump();
      }
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
    err = std::string(peer()) + ": " + text;
    return true;
  }

  Endpoint& st_;
  TcpChannel tcp_{&g_stop};
  uint32_t timeout_s_;
  bool client_;
};

// ------------------------------------------------------------------ one RC test
struct Outcome {
  std::string test;
  Stat local, remote;
  bool ok = false;
};

/// One qperf RC test on one rdma_cm connection: rd_open / rd_prep, the test
/// loop, exchange_results and the close, for either role.
class RcTest {
 public:
  RcTest(Endpoint& st, Control& ctl, const Config& cfg, const Req& req, Test test)
      : st_(st), ctl_(ctl), cfg_(cfg), req_(req), test_(test), client_(!cfg.server) {}
  ~RcTest() {
    if (id_) (void)cm_destroy_id(id_);  // and its QP
    if (mr_) (void)dereg_mr(mr_);
    if (cq_) (void)destroy_cq(cq_);
  }
  bool run(Stat& local, Stat& remote, std::string& err) {
    local = local_stat();
    return open(err) && exchange_nodes(err) && ctl_.sync(kSyncBefore, err) && loop(local, err) &&
           exchange_results(local, remote, err) && close(err);
  }

 private:
  bool bw() const { return test_ == Test::kRcBw; }
  bool sender() const { return !bw() || client_; }  // rc_bw: the client sends, the server receives
  uint32_t send_depth() const { return bw() ? (client_ ? kSendDepth : 1) : 1; }
  uint32_t recv_depth() const { return bw() ? (client_ ? 1 : kRecvDepth) : 1; }

  bool open(std::string& err) {
    const uint32_t size = std::max<uint32_t>(req_.msg_size, 1);
    buf_.assign(size, 0);
    auto cq = create_cq(st_.ctx(), send_depth() + recv_depth());
    if (!cq.ok()) {
      err = std::string("create_cq: ") + cq.status().message();
      return false;
    }
    cq_ = *cq;
    auto mr = reg_mr(st_.pd(), buf_.data(), size,
                     kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic);
    if (!mr.ok()) {
      err = std::string("reg_mr: ") + mr.status().message();
      return false;
    }
    mr_ = *mr;
    CmPeer peer;
    peer.server = !client_;
    peer.timeout_s = cfg_.timeout_s;
    if (client_) {
      uint8_t p[4];
      if (!ctl_.recv(p, sizeof(p), "RDMA CM TCP IPv4 server port", err)) return false;
      uint32_t port = 0;
      Dec{p}(port);
      if (port == 0 || port > 65535) {
        err = "the server sent rdma_cm port " + std::to_string(port);
        return false;
      }
      peer.addr = SockAddr{*parse_ip_gid(cfg_.host, false), uint16_t(port)};
    } else {
      // qperf binds port 0 (a free port) for each test; our endpoint keeps its
      // listener per port for the whole run, so we take one port from the
      // ephemeral range for all tests (cfg_.cm_port). It is announced before
      // the accept, as qperf does; a REQ that comes first waits for it.
      const uint16_t port = cfg_.cm_port;
      peer.addr = SockAddr{Gid{}, port};
      uint8_t p[4];
      Enc{p}(uint32_t(port));
      if (!ctl_.send(p, sizeof(p), "RDMA CM TCP IPv4 server port", err)) return false;
    }
    CmConnParam param;  // qperf's: responder resources 1, initiator depth 1, retry 7, RNR retry 7
    id_ = st_.cm_connect_rc(peer, param, [this](CmId* id, std::string& e) { return make_qp(id, e); }, err);
    return id_ != nullptr;
  }

  bool make_qp(CmId* id, std::string& err) {
    Wc stale[16];  // a rejected attempt left its flushed receives here
    while (poll_cq(cq_, 16, stale) > 0) {
    }
    QpInitAttr ia;
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.qp_type = QpType::kRc;
    ia.cap.max_send_wr = send_depth();
    ia.cap.max_recv_wr = recv_depth();
    if (Status s = cm_create_qp(id, st_.pd(), ia); !s.ok()) {
      err = std::string("rdma_create_qp: ") + s.message();
      return false;
    }
    st_.trace_if_asked(id->qp);
    // rc_lat: one receive; rc_bw server: NCQE receives, all into the one buffer.
    for (uint32_t i = 0; i < (sender() && bw() ? 0 : recv_depth()); ++i) {
      if (!post_recv_one(id->qp)) {
        err = "failed to post receive";
        return false;
      }
    }
    return true;
  }
  bool post_recv_one(Qp* qp) {
    Sge sge{uint64_t(uintptr_t(buf_.data())), uint32_t(buf_.size()), mr_->lkey};
    RecvWr wr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return post_recv(qp, &wr, nullptr).ok();
  }
  bool post_send_one() {
    Sge sge{uint64_t(uintptr_t(buf_.data())), req_.msg_size, mr_->lkey};
    SendWr wr = send_wr(0, req_.msg_size ? &sge : nullptr);
    wr.signaled();
    return post_send(id_->qp, &wr, nullptr).ok();
  }

  bool exchange_nodes(std::string& err) {
    Node n;
    n.qpn = id_->qp->qp_num;
    n.rkey = mr_->rkey;
    n.vaddr = uint64_t(uintptr_t(buf_.data()));
    const auto out = encode_node(n);
    uint8_t in[kNodeBytes];
    return ctl_.send(out.data(), out.size(), "node information", err) && ctl_.recv(in, sizeof(in), "node information", err);
  }

  /// rd_pp_lat_loop (rc_lat), rd_client_bw and rd_server_def (rc_bw).
  bool loop(Stat& st, std::string& err) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(req_.time);
    const auto finished = [&] {
      return g_stop || (req_.time && std::chrono::steady_clock::now() >= end) ||
             (req_.no_msgs && (bw() ? (client_ ? st.s.msgs : st.r.msgs) : st.r.msgs) >= req_.no_msgs);
    };
    st.time_s = now_times();
    uint32_t outstanding = 0;
    int done = client_ ? 0 : 1;  // rc_lat: bit 0 our SEND completed, bit 1 a message came
    if (sender()) {
      const uint32_t first = bw() ? send_depth() : (client_ ? 1 : 0);
      for (uint32_t i = 0; i < first; ++i, ++outstanding) {
        if (!post_send_one()) return fail("failed to post send", err);
      }
    }
    Wc wc[32];
    while (!finished()) {
      st_.pump();
      const int n = poll_cq(cq_, 32, wc);
      st.max_cqes = std::max(st.max_cqes, uint32_t(std::max(n, 0)));
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != WcStatus::kSuccess) {
          ++(wc[i].opcode == WcOpcode::kRecv ? st.r.errs : st.s.errs);
          return fail(std::string(kTests[req_.req_index]) + " failed: " + wc_status_str(wc[i].status), err);
        }
        if (wc[i].opcode == WcOpcode::kRecv) {
          st.r.bytes += req_.msg_size;
          ++st.r.msgs;
          if (!post_recv_one(id_->qp)) return fail("failed to post receive", err);
          done |= 2;
        } else {
          st.s.bytes += req_.msg_size;
          ++st.s.msgs;
          --outstanding;
          done |= 1;
        }
      }
      if (bw()) {
        for (; sender() && outstanding < send_depth() &&
               (!req_.no_msgs || st.s.msgs + outstanding < req_.no_msgs); ++outstanding) {
          if (!post_send_one()) return fail("failed to post send", err);
        }
      } else if (done == 3) {
        if (!post_send_one()) return fail("failed to post send", err);
        ++outstanding;
        done = 0;
      }
    }
    st.time_e = now_times();
    if (g_stop) return fail("interrupted", err);
    return true;
  }

  /// qperf's exchange_results: the server's STAT to the client, the client's sync back.
  bool exchange_results(const Stat& local, Stat& remote, std::string& err) {
    if (client_) {
      uint8_t b[kStatBytes];
      if (!ctl_.recv(b, sizeof(b), "results", err)) return false;
      remote = decode_stat(b);
      return ctl_.send(kSyncAfter, sizeof(kSyncAfter) - 1, kSyncAfter, err);
    }
    const auto b = encode_stat(local);
    return ctl_.send(b.data(), b.size(), "results", err) && ctl_.expect(kSyncAfter, err);
  }

  /// cm_close: the client disconnects, both wait for DISCONNECTED.
  bool close(std::string& err) {
    if (client_) {
      if (Status s = cm_disconnect(id_); !s.ok()) return fail(std::string("rdma_disconnect: ") + s.message(), err);
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(cfg_.timeout_s);
    CmEvent ev;
    while (!g_stop && std::chrono::steady_clock::now() < end) {
      st_.pump();
      Wc wc[32];
      (void)poll_cq(cq_, 32, wc);  // flushed work requests
      while (cm_get_event(st_.ctx(), &ev)) {
        if (ev.id == id_ && ev.event == CmEventType::kDisconnected) return true;
      }
    }
    return fail("no RDMA_CM_EVENT_DISCONNECTED", err);
  }

  static bool fail(const std::string& what, std::string& err) {
    err = what;
    return false;
  }

  Endpoint& st_;
  Control& ctl_;
  const Config& cfg_;
  const Req& req_;
  Test test_;
  bool client_;
  std::vector<uint8_t> buf_;
  Cq* cq_ = nullptr;
  Mr* mr_ = nullptr;
  CmId* id_ = nullptr;
};

// ------------------------------------------------------------------ showing results (qperf's view_* / place_show)
/// One line of qperf's result table: data with a unit is right-aligned, text (no unit) is not.
struct Row {
  std::string name, data, unit;
  bool has_unit = true;
};
/// A value scaled by 1000 until it is below 1000, with the unit it reached (qperf's view_*).
Row scaled(std::string name, double v, std::initializer_list<const char*> units) {
  const char* unit = *units.begin();
  for (auto it = units.begin() + 1; v >= 1000 && it != units.end(); ++it) {
    v /= 1000;
    unit = *it;
  }
  return {std::move(name), qperf_number(v), unit};
}
Row time_row(std::string name, double s) { return scaled(std::move(name), s * 1e9, {"ns", "us", "ms", "sec"}); }
Row band_row(std::string name, double bps) {
  return scaled(std::move(name), bps, {"bytes/sec", "KB/sec", "MB/sec", "GB/sec", "TB/sec"});
}
Row rate_row(std::string name, double r) { return scaled(std::move(name), r, {"/sec", "K/sec", "M/sec", "G/sec", "T/sec"}); }

/// qperf's place_show: "    name  =  data unit", names padded, data with a unit right-aligned.
void show(std::FILE* out, const std::vector<Row>& rows) {
  size_t nw = 0, dw = 0;
  for (const Row& r : rows) {
    nw = std::max(nw, r.name.size());
    if (r.has_unit) dw = std::max(dw, r.data.size());
  }
  for (const Row& r : rows) {
    if (r.has_unit) {
      std::fprintf(out, "    %-*s  =  %*s %s\n", int(nw), r.name.c_str(), int(dw), r.data.c_str(), r.unit.c_str());
    } else {
      std::fprintf(out, "    %-*s  =  %s\n", int(nw), r.name.c_str(), r.data.c_str());
    }
  }
}

void show_results(std::FILE* out, Test test, const Stat& l, const Stat& r, const Results& res, bool verbose) {
  std::vector<Row> rows;
  rows.push_back(test == Test::kRcLat ? time_row("latency", res.latency_s) : band_row("bw", res.recv_bw));
  if (verbose) {
    rows.push_back(rate_row("msg_rate", res.msg_rate));
    rows.push_back(time_row("loc_real_time", res.loc_real_s));
    rows.push_back(time_row("rem_real_time", res.rem_real_s));
    const std::pair<const char*, uint64_t> counts[] = {
        {"loc_send_msgs", l.s.msgs},   {"loc_recv_msgs", l.r.msgs},   {"rem_send_msgs", r.s.msgs},
        {"rem_recv_msgs", r.r.msgs},   {"loc_send_bytes", l.s.bytes}, {"loc_recv_bytes", l.r.bytes},
        {"rem_send_bytes", r.s.bytes}, {"rem_recv_bytes", r.r.bytes}};
    for (const auto& [name, v] : counts) {
      if (v) rows.push_back({name, std::to_string(v), ""});
    }
  }
  show(out, rows);
}

void write_outcome_json(JsonWriter& w, const Outcome& o) {
  const Results res = calc(o.local, o.remote);
  w.begin_object().key("test").str(o.test).key("ok").boolean(o.ok).key("latency_us").fixed(res.latency_s * 1e6, 3);
  w.key("msg_rate").fixed(res.msg_rate, 1).key("bw_MBps").fixed(res.recv_bw / 1e6, 3);
  w.key("loc_recv_msgs").num(o.local.r.msgs).key("rem_recv_msgs").num(o.remote.r.msgs);
  w.key("loc_send_bytes").num(o.local.s.bytes).key("rem_recv_bytes").num(o.remote.r.bytes);
  w.key("loc_real_s").fixed(res.loc_real_s, 6).key("rem_real_s").fixed(res.rem_real_s, 6).end_object();
}

// ------------------------------------------------------------------ conf
/// CONF: node, cpu, os, qperf version, 64 bytes each (the os names uroce).
void get_conf(uint8_t out[kConfBytes]) {
  utsname u{};
  (void)uname(&u);
  std::string cpu;
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; cpu.empty() && std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) cpu = line.substr(line.find(':') + 2);
  }
  std::memset(out, 0, kConfBytes);
  const std::string fields[4] = {u.nodename, cpu, std::string(u.sysname) + " " + u.release + " + uroce",
                                 strf("%d.%d.%d", kVerMaj, kVerMin, kVerInc)};
  for (size_t i = 0; i < 4; ++i) {
    std::memcpy(out + i * kStrSize, fields[i].data(), std::min(fields[i].size(), kStrSize - 1));
  }
}

// ------------------------------------------------------------------ client
bool run_client_test(Endpoint& st, const Config& cfg, uint16_t index, Outcome& o, std::FILE* out, std::string& err) {
  const Test test = *supported(index);
  o.test = std::string(kTests[index]);
  std::fprintf(out, "%s:\n", o.test.c_str());
  Control ctl(st, cfg.timeout_s, true);
  if (!ctl.tcp().connect_to(cfg.host, cfg.listen_port, cfg.timeout_s, ctl.idle(), err)) return false;
  const Req req = client_request(index, cfg.msg_size ? cfg.msg_size : test == Test::kRcBw ? 65536 : 1,
                                 cfg.time_s, cfg.no_msgs);
  const auto b = encode_req(req);
  if (!ctl.send(b.data(), b.size(), "request data", err)) return false;
  if (test == Test::kQuit) {  // qperf's run_client_quit: the server exits after the sync
    return o.ok = ctl.sync(kSyncBefore, err);
  }
  if (test == Test::kConf) {
    uint8_t rconf[kConfBytes], lconf[kConfBytes];
    if (!ctl.recv(rconf, sizeof(rconf), "configuration", err)) return false;
    get_conf(lconf);
    std::vector<Row> rows;
    const char* names[4] = {"node", "cpu", "os", "qperf"};
    for (size_t i = 0; i < 8; ++i) {
      const char* f = reinterpret_cast<const char*>((i < 4 ? lconf : rconf) + (i % 4) * kStrSize);
      rows.push_back({std::string(i < 4 ? "loc_" : "rem_") + names[i % 4], std::string(f, strnlen(f, kStrSize)), "", false});
    }
    show(out, rows);
    return o.ok = true;
  }
  RcTest rc(st, ctl, cfg, req, test);
  if (!rc.run(o.local, o.remote, err)) return false;
  show_results(out, test, o.local, o.remote, calc(o.local, o.remote), cfg.verbose);
  return o.ok = true;
}

// ------------------------------------------------------------------ server
/// What became of one request.
enum class Served : uint8_t { kOk, kQuit, kRefused, kFailed, kStopped, kFatal };

/// Serves one request (qperf's server forks one child per request; we serve
/// them in turn). err says why a request was refused or failed.
Served serve_one(Endpoint& st, const Config& cfg, std::FILE* info, Outcome& o, std::string& err) {
  Control ctl(st, cfg.timeout_s, false);
  // The server waits for clients as long as it runs: accept in rounds of --timeout.
  while (!ctl.tcp().accept_one(cfg.listen, cfg.listen_port, cfg.timeout_s, ctl.idle(), err)) {
    if (g_stop) return Served::kStopped;
    if (err.rfind("no client", 0) != 0) return Served::kFatal;  // cannot listen
  }
  uint8_t b[kReqBytes] = {};
  if (!ctl.recv(b, kReqVersionBytes, "request version", err)) return Served::kFailed;
  Req req;
  Dec d{b};
  d(req.ver_maj), d(req.ver_min), d(req.ver_inc);
  if (req.ver_maj != kVerMaj || req.ver_min != kVerMin) {
    const bool client_newer = req.ver_maj > kVerMaj || (req.ver_maj == kVerMaj && req.ver_min > kVerMin);
    err = client_newer ? strf("upgrade qperf on server from %d.%d.%d to %d.%d.%d", kVerMaj, kVerMin, kVerInc,
                              req.ver_maj, req.ver_min, req.ver_inc)
                       : strf("upgrade qperf on client from %d.%d.%d to %d.%d.%d", req.ver_maj, req.ver_min,
                              req.ver_inc, kVerMaj, kVerMin, kVerInc);
    ctl.report_error(err);
    return Served::kRefused;
  }
  if (!ctl.recv(b + kReqVersionBytes, kReqBytes - kReqVersionBytes, "request data", err)) return Served::kFailed;
  req = decode_req(b);
  o.test = req.req_index < std::size(kTests) ? std::string(kTests[req.req_index]) : "#" + std::to_string(req.req_index);
  const std::optional<Test> test = supported(req.req_index);
  if (!test) {
    err = req.req_index < std::size(kTests)
              ? "uroce qperf: test " + o.test + " is not supported (supported: " + kSupportedList + ")"
              : "bad request index: " + std::to_string(req.req_index);
    ctl.report_error(err);
    return Served::kRefused;
  }
  std::fprintf(info, "# request: %s msg_size=%u time=%u no_msgs=%u use_cm=%u\n", o.test.c_str(), req.msg_size,
               req.time, req.no_msgs, req.use_cm);
  switch (*test) {
    case Test::kConf: {
      uint8_t conf[kConfBytes];
      get_conf(conf);
      return (o.ok = ctl.send(conf, sizeof(conf), "configuration", err)) ? Served::kOk : Served::kFailed;
    }
    case Test::kQuit: {
      // qperf's run_server_quit: sync, then wait for the client to close first.
      if (!ctl.sync(kSyncBefore, err)) return Served::kFailed;
      uint8_t x;
      (void)ctl.recv(&x, 1, "the client's close", err);
      err.clear();
      o.ok = true;
      return Served::kQuit;
    }
    case Test::kRcBw:
    case Test::kRcLat:
      break;
  }
  if (!req.use_cm) {
    err = "uroce qperf: " + o.test + " needs the connection manager (qperf -cm1)";
    ctl.report_error(err);
    return Served::kRefused;
  }
  if (req.msg_size > kMaxMsgSize) {
    err = strf("uroce qperf: msg_size %u is larger than we serve (%u)", req.msg_size, kMaxMsgSize);
    ctl.report_error(err);
    return Served::kRefused;
  }
  RcTest rc(st, ctl, cfg, req, *test);
  if (!rc.run(o.local, o.remote, err)) {
    if (!g_stop) ctl.report_error(err);
    return g_stop ? Served::kStopped : Served::kFailed;
  }
  std::fprintf(info, "# served %s: received %llu msgs (%llu bytes), sent %llu msgs in %.3f s\n", o.test.c_str(),
               (unsigned long long)o.local.r.msgs, (unsigned long long)o.local.r.bytes,
               (unsigned long long)o.local.s.msgs, real_s(o.local));
  o.ok = true;
  return Served::kOk;
}

}  // namespace

int cmd_qperf(int argc, char** argv) {
  dpdk::SplitArgs split;
  Args args;
  if (auto rc = parse_endpoint_command(kQperfCommand, argc, argv, split, args)) return *rc;
  auto usage = [](const std::string& msg) { return usage_error(kQperfCommand, msg); };
  Config cfg;
  const auto& pos = args.positional();
  cfg.server = pos.empty();
  if (!cfg.server) {
    cfg.host = std::string(pos[0]);
    if (!parse_ip_gid(cfg.host, false)) return usage("SERVER must be an IPv4 address (qperf -cm1 dials IPv4)");
    if (pos.size() < 2) return usage("give the tests to run after SERVER (rc_lat, rc_bw, conf)");
    for (size_t i = 1; i < pos.size(); ++i) {
      const std::optional<uint16_t> idx = test_index(pos[i]);
      if (!idx) return usage("unknown test '" + std::string(pos[i]) + "'");
      const std::optional<Test> t = supported(*idx);
      if (!t) return usage("test '" + std::string(pos[i]) + "' is not supported (supported: " + kSupportedList + ")");
      cfg.tests.push_back(*idx);
    }
  }
  // qperf -cm1 is IPv4 only (rdma_cm bound and resolved as AF_INET): we send from GID 0.
  if (const std::string e = read_endpoint_options(args, 0, "GID index", cfg.ep); !e.empty()) return usage(e);
  cfg.listen_port = uint16_t(args.get_uint("listen-port"));
  cfg.listen = std::string(args.get_str("listen"));
  if (!parse_ip_gid(cfg.listen, false)) return usage("--listen is not an IPv4 address");
  cfg.count = uint32_t(args.get_uint("count"));
  cfg.time_s = uint32_t(args.get_uint("time"));
  cfg.msg_size = uint32_t(args.get_uint("msg-size"));
  cfg.no_msgs = uint32_t(args.get_uint("no-msgs"));
  cfg.verbose = args.flag("verbose");
  cfg.timeout_s = uint32_t(args.get_uint("timeout"));
  cfg.ep.timeout_s = cfg.timeout_s;
  cfg.cm_port = uint16_t(49152 + uint32_t(getpid()) % 16384);
  cfg.counters = args.flag("counters");
  cfg.json = args.flag("json");

  std::FILE* info = cfg.json ? stderr : stdout;
  if (!start_endpoint_process("qperf", split)) return kExitFailure;
  std::fprintf(info, "# uroce qperf %s\n", args.config_line().c_str());
  const char* role = cfg.server ? "server" : "client";
  Endpoint st;
  std::string err;
  std::vector<Outcome> done;
  bool ok = st.open(cfg.ep, err);
  if (ok && cfg.server) {
    // A refused request is the client's mistake, reported to it; a failed one fails the run.
    // The server ends on a quit request, after --count requests, or with SIGINT.
    uint32_t failed = 0;
    for (Served s = Served::kOk; s != Served::kQuit && s != Served::kStopped && s != Served::kFatal &&
                                 (!cfg.count || done.size() < cfg.count);) {
      Outcome o;
      std::string why;
      s = serve_one(st, cfg, info, o, why);
      if (s == Served::kRefused || s == Served::kFailed) {
        std::fprintf(info, "# %s %s: %s\n", s == Served::kRefused ? "refused" : "failed", o.test.c_str(), why.c_str());
      }
      if (s == Served::kFailed || s == Served::kFatal) {
        ++failed;
        err = why;
      }
      if (s != Served::kStopped && s != Served::kFatal) done.push_back(o);
    }
    ok = failed == 0;
  } else if (ok) {
    for (const uint16_t index : cfg.tests) {
      Outcome o;
      ok = run_client_test(st, cfg, index, o, info, err);
      done.push_back(o);
      if (!ok) break;
    }
  }
  if (!st.close_capture(err)) ok = false;
  if (cfg.counters && st.ctx()) st.print_counters(info, true);
  if (cfg.json) {
    JsonWriter w;
    w.begin_object().key("command").str("qperf").key("role").str(role).key("tests").begin_array();
    for (const Outcome& o : done) write_outcome_json(w, o);
    w.end_array().key("ok").boolean(ok).key("error").str(err).end_object();
    std::printf("%s\n", w.text().c_str());
  }
  if (!ok) {
    std::fprintf(stderr, "uroce qperf (%s): %s\n", role, err.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace uroce::apps
