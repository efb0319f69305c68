// The one uroce endpoint of the apps that run on a DPDK port (demo,
// pingpong, perf, rping, ucmatose, udaddy, qperf): the DPDK port, the device on it with our addresses in the
// GID table, one PD, the clock, and the waits every app needs while the
// engine keeps running (run-to-completion: each wait calls pump(), so the
// stack answers ARP, ACKs, retransmits and runs the CM meanwhile).
//
//   EndpointConfig ec{.dev = ..., .addrs = ...};
//   Endpoint ep;
//   if (!ep.open(ec, err)) ...
//   auto cq = create_cq(ep.ctx(), 64);                       // the app's own objects
//   Deadline end(ec.timeout_s);
//   Wc wc;
//   if (!ep.wait_wc(cq, wc, end, "a completion", err)) ...   // err: "timed out after 60 s waiting for ..."
//
// QP connection the verbs way (connect_qp: RTR, RTS from exchanged QP info)
// or the rdma_cm way (cm_connect_rc: listen / accept or resolve / connect,
// as librdmacm's tools do it). The app destroys its own QPs, CQs, MRs and CM
// ids before the Endpoint goes (declare the Endpoint member first); the
// Endpoint then frees the PD, the device and the port.
//
// Every wait ends with err set on timeout ("timed out ..."), on the stop flag
// (g_stop, "interrupted") or on an error. Control path only.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <uroce/cm.h>
#include <uroce/verbs.h>

#include "apps/common/addr_text.h"
#include "apps/common/args.h"
#include "apps/common/json_writer.h"
#include "apps/common/qp_trace.h"
#include "drivers/dpdk/eal_args.h"
#include "drivers/dpdk/fault_io.h"
#include "drivers/dpdk/tsc_clock.h"
#include "drivers/io_port.h"

namespace uroce::apps {

/// The command line of an endpoint command (`uroce NAME [EAL args --] options`):
/// the EAL arguments before a "--" go to split, the rest is parsed against
/// spec into args, with parse_command_line's reactions. Returns the exit code
/// to return at once (--help, usage error), or nullopt to run. split must
/// outlive args (args refers to its text).
std::optional<int> parse_endpoint_command(const CommandSpec& spec, int argc, char** argv, dpdk::SplitArgs& split,
                                          Args& args);
/// Prints "uroce NAME: MSG (see uroce NAME --help)" to stderr; returns kExitUsage.
int usage_error(const CommandSpec& spec, const std::string& msg);
/// The start of an endpoint process once its options are read: installs the
/// stop handlers, makes stdout line-buffered and initialises the EAL from
/// split. On failure prints "uroce WHO: MSG" to stderr and returns false.
bool start_endpoint_process(std::string_view who, const dpdk::SplitArgs& split);

/// The options of every endpoint command for its port and addresses (an
/// OptSpec list, to put in the command's table): --dev, --ip, --ip6, --mac,
/// --port-mtu, --pcap, --trace-qp. read_endpoint_options reads them.
#define UROCE_ENDPOINT_OPTIONS                                                                                          \
  {.name = "dev", .kind = OptKind::kString, .def = "0", .help = "the port: an ethdev probed from the EAL args (name or port id) or a device spec", .meta = "SPEC"}, \
  {.name = "ip", .kind = OptKind::kString, .def = "", .help = "our IPv4 address: GID index 0 (::ffff:a.b.c.d)", .meta = "A.B.C.D"}, \
  {.name = "ip6", .kind = OptKind::kString, .def = "", .help = "our IPv6 address: GID index 1", .meta = "ADDR"}, \
  {.name = "mac", .kind = OptKind::kString, .def = "", .help = "our MAC (the port's if empty); the port itself keeps its own", .meta = "MAC"}, \
  {.name = "port-mtu", .kind = OptKind::kUint, .def = "1500", .help = "Ethernet MTU to set on the port (af_packet: the kernel interface's)", .min = 576, .max = 9600}, \
  {.name = "pcap", .kind = OptKind::kString, .def = "", .help = "capture every frame of the port to FILE (the command fails if the file cannot all be written)", .meta = "FILE"}, \
  UROCE_TRACE_QP_OPTION

struct EndpointConfig;
/// Reads UROCE_ENDPOINT_OPTIONS into ec: --dev, --port-mtu, --pcap, and the
/// addresses. gid_idx / idx_opt: the GID index the command sends from and
/// its option ("-g", "-x"), whose address must be given; idx_opt empty: at
/// least one of --ip / --ip6 (the rdma_cm tools pick by the peer's family).
/// Returns "" or the error to print with the command's usage.
std::string read_endpoint_options(const Args& args, uint8_t gid_idx, std::string_view idx_opt, EndpointConfig& ec);

/// The end of a wait: a time limit that the stop flag (g_stop) also ends.
class Deadline {
 public:
  /// timeout_s seconds from now.
  explicit Deadline(uint32_t timeout_s);
  /// ms milliseconds from now.
  static Deadline in_ms(uint32_t ms);
  /// True once g_stop is set or the time is up, with err = "interrupted" or
  /// "timed out after N s waiting for <what>".
  bool expired(std::string_view what, std::string& err) const;
  /// True once the time is up (the stop flag not considered).
  bool passed() const { return std::chrono::steady_clock::now() >= end_; }

 private:
  Deadline(std::chrono::steady_clock::duration d, std::string limit);
  std::chrono::steady_clock::time_point end_;
  std::string limit_;  // "60 s", "200 ms": for the message
};

/// What open() sets up. The defaults are the apps' option defaults.
struct EndpointConfig {
  std::string driver = "dpdk"; ///< the packet driver (drivers/registry.h): "dpdk" or "loopback"
  std::string dev = "0";       ///< --dev: the driver's device spec (dpdk: an ethdev probed from the EAL args, name or port id, or a device spec)
  OurAddrs addrs;              ///< --ip (GID index 0), --ip6 (GID index 1), --mac (the port's if unset)
  uint16_t port_mtu = 1500;    ///< --port-mtu: Ethernet MTU to set on the port
  uint32_t timeout_s = 60;     ///< link-up wait of the port
  std::string pcap;            ///< --pcap: capture every frame of the port to this file
  uint32_t trace_qpn = 0;      ///< --trace-qp: the QPN whose state steps go to stderr (0: none)
  uint32_t max_qp = 8;         ///< QPs the device holds
  bool tx_zero_copy = false;   ///< --zero-copy (DeviceConfig::tx_zero_copy)
  double drop_rate = 0;        ///< --drop-rate test hook: lose this fraction of frames (dpdk::RandomDropIo)
  uint64_t drop_seed = 1;      ///< --drop-seed
  uint32_t drop_every = 0;     ///< the demo's --drop-every: lose every Nth transmitted frame (dpdk::DropEveryNthIo; 0: none)
  uint64_t key_seed = 0;       ///< DeviceConfig::key_seed (0: from the TSC; fixed for reproducible keys)
  /// Test hook (`uroce conform --self-test-breaks`): the device runs on the
  /// PacketIo this returns, a wrapper of the port's that the caller owns.
  std::function<PacketIo&(PacketIo&)> wrap_io;
  /// The port takes addrs.mac as its own MAC (a memif end, which nothing
  /// else owns). false: the port keeps its MAC and runs promiscuous, the
  /// stack answering for addrs.mac in software.
  bool set_port_mac = false;
  CcAlgorithm cc = CcAlgorithm::kNone;  ///< DeviceConfig::cc's algorithm for every RC/UC QP
};

/// Where an rdma_cm connection goes: the server binds addr (ip zero: any of
/// ours) and listens, the client connects to addr.
struct CmPeer {
  bool server = false;
  SockAddr addr;
  uint32_t timeout_s = 60;  ///< for the whole connection setup
  /// Client: start over (new id, after 100 ms, as perftest does) while the
  /// server answers REJ / is unreachable, until timeout_s. false: the first
  /// REJ fails the connect, as librdmacm's examples (rping) do.
  bool retry_rejected = true;
};

/// RTR and RTS attributes of a connected (RC or UC) QP, as ibv_modify_qp takes
/// them; the defaults are rdma-core's and perftest's (IBA 11.2.4.2 / 11.4).
struct QpConnect {
  AhAttr ah;                       ///< the path: dgid, dmac (resolve()), sgid_index, hop limit, SL
  Mtu path_mtu = Mtu::k1024;
  uint32_t dest_qpn = 0;           ///< the peer's QPN
  uint32_t rq_psn = 0;             ///< the peer's first PSN (our expected PSN)
  uint32_t sq_psn = 0;             ///< our first PSN
  uint8_t max_dest_rd_atomic = 1;  ///< RC: READ / atomic requests we accept at once
  uint8_t min_rnr_timer = 12;      ///< RC
  uint8_t timeout = 14;            ///< RC: local ACK timeout code, 4.096 us * 2^N
  uint8_t retry_cnt = 7;           ///< RC
  uint8_t rnr_retry = 7;           ///< RC
  uint8_t max_rd_atomic = 1;       ///< RC: READ / atomic requests we issue at once
  QpExt ext;                       ///< RC: uroce's extension, as both sides agreed (default: none)
};

/// --qp-timeout (-u, perftest's letter), for a command's OptSpec table:
/// QpConnect::timeout, the RC local ACK timeout code (IBA 11.2.4.2; 0: no
/// timer). Its default is QpConnect's, rdma-core's and perftest's 14 (67 ms
/// a try, 7 retries); read_qp_timeout reads it.
#define UROCE_QP_TIMEOUT_OPTION                                                                                        \
  {.name = "qp-timeout", .short_name = 'u', .kind = OptKind::kUint, .def = "14",                                   \
   .help = "RC: local ACK timeout code, 4.096 us * 2^N (0: none; rdma-core's and perftest's 14)", .max = 31}
inline uint8_t read_qp_timeout(const Args& args) { return uint8_t(args.get_uint("qp-timeout")); }

/// Moves qp from INIT to RTR and RTS with c. UC QPs get only the attributes
/// UC has (path, PSNs). False with err = "Failed to modify QP <qpn> to RTR|RTS: ...".
bool connect_qp(Qp* qp, const QpConnect& c, std::string& err);

/// Moves a new RC / UC QP to INIT on port 1, P_Key index 0, with access
/// (kAccessRemote* / kAccessLocalWrite); a UD QP with Q_Key qkey instead.
bool init_qp(Qp* qp, uint32_t access, uint32_t qkey, std::string& err);

class Endpoint {
 public:
  Endpoint() = default;
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  /// Opens the port (promiscuous: the stack answers for --mac in software),
  /// the device on it (GID 0 = --ip, GID 1 = --ip6), polls once and allocates
  /// the PD. False with err set. The config is copied.
  bool open(const EndpointConfig& cfg, std::string& err);

  Context* ctx() const { return ctx_.get(); }
  Pd* pd() const { return pd_; }
  drivers::IoPort& port() const { return *port_; }
  const drivers::IoPortInfo& port_info() const { return port_->info(); }
  const dpdk::TscClock& clock() const { return *clock_; }
  /// Frames --drop-every has lost (0 without it).
  uint64_t drop_every_dropped() const { return drop_nth_ ? drop_nth_->dropped() : 0; }
  /// Our MAC: --mac, else the port's.
  MacAddr mac() const;
  /// Our GID at index 0 (--ip) or 1 (--ip6), if given.
  const std::optional<Gid>& gid(uint8_t index) const { return cfg_.addrs.gid(index); }
  /// The largest path MTU the port carries (also the UD MTU).
  Mtu max_mtu() const;
  const EndpointConfig& config() const { return cfg_; }
  /// Starts --trace-qp's trace of qp if it is the QP asked for (then true).
  /// Call it for each QP the command makes, once it exists.
  bool trace_if_asked(Qp* qp) const { return trace_qp_if(qp, cfg_.trace_qpn); }

  /// One engine poll at the TSC clock.
  /// One engine step; returns the frames it received and sent (0: idle).
  uint32_t pump() { return uroce::poll(ctx_.get(), clock_->now_ns()); }
  /// Pumps for ms milliseconds (lets the last ACKs and responses leave).
  void drain(uint32_t ms);
  /// Ends --pcap's capture: false if it could not all be written (a full
  /// disk), with the reason added to err (after "; " if err already holds
  /// one), so that the command fails rather than leave a short capture
  /// behind unsaid. True without a capture.
  bool close_capture(std::string& err);

  /// The peer's MAC for ip through the engine's ARP / neighbour discovery,
  /// sent from our GID sgid_index.
  bool resolve(const Gid& ip, uint8_t sgid_index, MacAddr& mac, const Deadline& end, std::string& err);

  /// Waits for one completion of cq (its status is the caller's to check).
  bool wait_wc(Cq* cq, Wc& wc, const Deadline& end, std::string_view what, std::string& err);

  /// Waits for the next CM event about id (or its listener; any id if null).
  /// A connect request to one of cm_connect_*'s listeners that comes while
  /// waiting for something else is kept for the next accept; other events
  /// about other ids are dropped (the CM itself answers the peer's DREQs).
  /// With set_cm_trace(true) each event taken is printed to stderr.
  bool wait_cm_event(const CmId* id, CmEvent& ev, const Deadline& end, std::string_view what, std::string& err);
  /// Waits for event want about id; another event fails with
  /// err = "unexpected CM event X (status N), waiting for Y".
  bool expect_cm_event(const CmId* id, CmEventType want, CmEvent& ev, const Deadline& end, std::string& err);
  void set_cm_trace(bool on) { cm_trace_ = on; }

  /// One RC connection by rdma_cm (port space TCP), as librdmacm's tools set
  /// it up: the server listens on peer.addr (the first call makes the
  /// listener, which stays until the Endpoint goes, so a peer's next REQ that
  /// comes early waits for the next call instead of being rejected, as with
  /// perftest's one listening id), takes the next REQ and accepts it; the
  /// client resolves address and route and connects (see CmPeer::retry_rejected). make_qp gives the id its QP
  /// (cm_create_qp) and posts the receives the first messages need, before
  /// the REP / REQ leaves; an id it fails on is rejected. Returns the
  /// connected id (the caller destroys it, with its QP), or nullptr with err
  /// set; ids given up on are destroyed here, their QPs with them.
  CmId* cm_connect_rc(const CmPeer& peer, const CmConnParam& param,
                      const std::function<bool(CmId*, std::string&)>& make_qp, std::string& err);
  /// The same for a UD service (port space UDP, SIDR, as udaddy): the
  /// server's id is done once it has answered the SIDR REQ (it learns no
  /// peer QPN: the first datagram's source QP is the peer); the client's
  /// ESTABLISHED event, with the server's QPN, Q_Key and AH (ud_*), goes to
  /// *established.
  CmId* cm_connect_ud(const CmPeer& peer, const std::function<bool(CmId*, std::string&)>& make_qp,
                      CmEvent* established, std::string& err);

  /// rdma_disconnect of each id, then waits up to ms for their DISCONNECTED events.
  void cm_disconnect_all(std::span<CmId* const> ids, uint32_t ms);

  /// Calls f(name, value) for each device counter that is not zero, then
  /// the --drop-rate hook's hook_rx_dropped / hook_tx_dropped (when it is on)
  /// and the port's port_rx_missed (af_packet: the kernel's ring was full).
  void for_each_counter(const std::function<void(std::string_view, uint64_t)>& f) const;
  /// for_each_counter as a JSON object {"name":value,...}, w's next value.
  void write_counters_json(JsonWriter& w) const;
  /// "# counters: name=value ..." (non-zero ones); with cm also
  /// "# cm counters: ..." on a second line.
  void print_counters(std::FILE* out, bool cm) const;
  /// "# cm counters: name=value ..." (non-zero ones).
  void print_cm_counters(std::FILE* out) const;

 private:
  using MakeQp = std::function<bool(CmId*, std::string&)>;
  CmId* cm_connect_ps(CmPortSpace ps, const CmPeer& peer, const CmConnParam& param, const MakeQp& make_qp,
                      CmEvent* established, std::string& err);
  int cm_connect_once(CmPortSpace ps, const CmPeer& peer, const CmConnParam& param, const MakeQp& make_qp,
                      const Deadline& end, CmId*& out, CmEvent* established, std::string& err);
  CmId* cm_accept_one(CmPortSpace ps, const CmPeer& peer, const CmConnParam& param, const MakeQp& make_qp,
                      const Deadline& end, std::string& err);
  /// The listener for (ps, addr): made, bound and listening on first use.
  CmId* listener(CmPortSpace ps, const SockAddr& addr, std::string& err);
  bool is_listener(const CmId* id) const;

  struct Listener {
    CmPortSpace ps;
    SockAddr addr;
    CmId* id;
  };
  std::vector<Listener> listeners_;
  std::deque<CmEvent> requests_;  // connect requests to listeners_ not taken yet

  EndpointConfig cfg_;
  std::unique_ptr<drivers::IoPort> port_;
  std::optional<dpdk::RandomDropIo> fault_;  // --drop-rate
  std::optional<dpdk::DropEveryNthIo> drop_nth_;  // --drop-every
  std::optional<dpdk::TscClock> clock_;
  ContextPtr ctx_;
  Pd* pd_ = nullptr;
  bool cm_trace_ = false;
};

}  // namespace uroce::apps
