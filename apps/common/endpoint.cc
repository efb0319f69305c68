// The apps' endpoint (endpoint.h): port, device, PD, the waits, QP and
// rdma_cm connection setup. Control path.
#include "apps/common/endpoint.h"

#include <algorithm>
#include <vector>

#include <uroce/counters.h>

#include "apps/common/launch.h"
#include "drivers/registry.h"
#include "stack/device/context.h"  // the GID table (--ip6 as index 1) and the engine's neighbour resolution

namespace uroce::apps {

// ---------------------------------------------------------------- command line

std::optional<int> parse_endpoint_command(const CommandSpec& spec, int argc, char** argv, dpdk::SplitArgs& split,
                                          Args& args) {
  split = dpdk::split_eal_args(argc, argv, 1);
  const std::string name(spec.name);
  std::vector<const char*> av = {name.c_str()};
  for (const auto& a : split.app) av.push_back(a.c_str());
  return parse_command_line(spec, int(av.size()), av.data(), args);
}

int usage_error(const CommandSpec& spec, const std::string& msg) {
  const int n = int(spec.name.size());
  std::fprintf(stderr, "uroce %.*s: %s (see uroce %.*s --help)\n", n, spec.name.data(), msg.c_str(), n, spec.name.data());
  return kExitUsage;
}

std::string read_endpoint_options(const Args& args, uint8_t gid_idx, std::string_view idx_opt, EndpointConfig& ec) {
  ec.dev = std::string(args.get_str("dev"));
  ec.port_mtu = uint16_t(args.get_uint("port-mtu"));
  ec.pcap = std::string(args.get_str("pcap"));
  ec.trace_qpn = uint32_t(args.get_uint("trace-qp"));
  return idx_opt.empty() ? parse_our_addrs(args, ec.addrs) : parse_our_addrs(args, gid_idx, idx_opt, ec.addrs);
}

bool start_endpoint_process(std::string_view who, const dpdk::SplitArgs& split) {
  install_stop_handlers();
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (Status s = dpdk::init_eal_from_args(split); !s.ok()) {
    std::fprintf(stderr, "uroce %.*s: %s\n", int(who.size()), who.data(), s.message());
    return false;
  }
  return true;
}

// ---------------------------------------------------------------- Deadline

Deadline::Deadline(std::chrono::steady_clock::duration d, std::string limit)
    : end_(std::chrono::steady_clock::now() + d), limit_(std::move(limit)) {}

Deadline::Deadline(uint32_t timeout_s) : Deadline(std::chrono::seconds(timeout_s), std::to_string(timeout_s) + " s") {}

Deadline Deadline::in_ms(uint32_t ms) { return Deadline(std::chrono::milliseconds(ms), std::to_string(ms) + " ms"); }

bool Deadline::expired(std::string_view what, std::string& err) const {
  if (g_stop) {
    err = "interrupted";
    return true;
  }
  if (!passed()) return false;
  err = "timed out after " + limit_ + " waiting for " + std::string(what);
  return true;
}

// ---------------------------------------------------------------- QP transitions

bool connect_qp(Qp* qp, const QpConnect& c, std::string& err) {
  const bool rc = qp->qp_type != QpType::kUc;
  QpAttr a;
  a.qp_state = QpState::kRtr;
  a.path_mtu = c.path_mtu;
  a.dest_qp_num = c.dest_qpn;
  a.rq_psn = c.rq_psn;
  a.ah_attr = c.ah;
  uint32_t mask = kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
  if (rc) {
    a.max_dest_rd_atomic = c.max_dest_rd_atomic;
    a.min_rnr_timer = c.min_rnr_timer;
    mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    if (c.ext.selective_repeat || c.ext.paths > 1) {
      a.ext = c.ext;
      mask |= kQpExt;
    }
  }
  if (Status s = modify_qp(qp, a, mask); !s.ok()) {
    err = "Failed to modify QP " + std::to_string(qp->qp_num) + " to RTR: " + s.message();
    return false;
  }
  a = {};
  a.qp_state = QpState::kRts;
  a.sq_psn = c.sq_psn;
  mask = kQpState | kQpSqPsn;
  if (rc) {
    a.timeout = c.timeout;
    a.retry_cnt = c.retry_cnt;
    a.rnr_retry = c.rnr_retry;
    a.max_rd_atomic = c.max_rd_atomic;
    mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  }
  if (Status s = modify_qp(qp, a, mask); !s.ok()) {
    err = "Failed to modify QP " + std::to_string(qp->qp_num) + " to RTS: " + s.message();
    return false;
  }
  return true;
}

bool init_qp(Qp* qp, uint32_t access, uint32_t qkey, std::string& err) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.pkey_index = 0;
  a.port_num = 1;
  uint32_t mask = kQpState | kQpPkeyIndex | kQpPort;
  if (qp->qp_type == QpType::kUd) {
    a.qkey = qkey;
    mask |= kQpQkey;
  } else {
    a.qp_access_flags = access;
    mask |= kQpAccessFlags;
  }
  if (Status s = modify_qp(qp, a, mask); !s.ok()) {
    err = "Failed to modify QP " + std::to_string(qp->qp_num) + " to INIT: " + s.message();
    return false;
  }
  return true;
}

// ---------------------------------------------------------------- Endpoint

Endpoint::~Endpoint() {
  if (!ctx_) return;
  for (const CmEvent& r : requests_) (void)cm_destroy_id(r.id);  // never accepted: rejected (REJ 28)
  for (const Listener& l : listeners_) (void)cm_destroy_id(l.id);
  if (pd_) (void)dealloc_pd(pd_);
  ctx_.reset();
}

bool Endpoint::open(const EndpointConfig& cfg, std::string& err) {
  cfg_ = cfg;
  drivers::IoConfig pc;
  pc.device = cfg_.dev;
  pc.mtu = cfg_.port_mtu;
  pc.mac = cfg_.addrs.mac;
  pc.port_takes_mac = cfg_.set_port_mac;
  pc.link_timeout_ms = cfg_.timeout_s * 1000;
  pc.pcap_path = cfg_.pcap;
  auto port = drivers::make_packet_io(cfg_.driver, pc);
  if (!port.ok()) {
    err = "port '" + cfg_.dev + "': " + port.status().message();
    return false;
  }
  port_ = std::move(port).value();
  clock_.emplace();
  DeviceConfig dc;
  dc.mac = mac();
  if (cfg_.addrs.gid4) dc.gid = *cfg_.addrs.gid4;
  dc.max_qp = cfg_.max_qp;
  dc.tx_zero_copy = cfg_.tx_zero_copy;
  dc.key_seed = cfg_.key_seed;
  dc.cc.algorithm = cfg_.cc;
  dc.clock = dpdk::TscClock::read;
  dc.clock_ctx = &*clock_;
  PacketIo* io = &port_->io();
  if (cfg_.drop_rate > 0) io = &fault_.emplace(*io, cfg_.drop_rate, cfg_.drop_seed);
  if (cfg_.drop_every > 0) io = &drop_nth_.emplace(*io, cfg_.drop_every);
  if (cfg_.wrap_io) io = &cfg_.wrap_io(*io);
  auto ctx = open_device(*io, dc);
  if (!ctx.ok()) {
    err = std::string("open_device: ") + ctx.status().message();
    return false;
  }
  ctx_ = std::move(ctx).value();
  // The GID table as the tools' GID index numbers it: 0 = --ip, 1 = --ip6.
  if (cfg_.addrs.gid6) {
    const Status st = ctx_->net->gids().set(1, net::GidEntry{*cfg_.addrs.gid6, net::GidType::kRoceV2, net::kNoVlan, dc.mac});
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
  return true;
}

Mtu Endpoint::max_mtu() const { return ctx_->max_mtu; }

MacAddr Endpoint::mac() const { return cfg_.addrs.mac ? *cfg_.addrs.mac : port_->info().mac; }

void Endpoint::drain(uint32_t ms) {
  const Deadline end = Deadline::in_ms(ms);
  while (!end.passed()) pump();
}

bool Endpoint::close_capture(std::string& err) {
  if (!port_) return true;
  const Status s = port_->stop_capture();
  if (!s.ok()) err += (err.empty() ? "" : "; ") + std::string(s.message());
  return s.ok();
}

bool Endpoint::resolve(const Gid& ip, uint8_t sgid_index, MacAddr& mac, const Deadline& end, std::string& err) {
  while (!end.expired("an ARP/ND answer from " + gid_str(ip), err)) {
    const net::Resolution r = ctx_->net->resolve(ip, sgid_index, clock_->now_ns());
    if (r.status == net::ResolveStatus::kResolved) {
      mac = r.mac;
      return true;
    }
    pump();  // sends the ARP request / NS and takes the answer
  }
  return false;
}

bool Endpoint::wait_wc(Cq* cq, Wc& wc, const Deadline& end, std::string_view what, std::string& err) {
  // The clock is read once per kPumpsPerClockRead pumps: a bw responder
  // does all its work in here, and a clock read per empty poll costs rate.
  constexpr uint32_t kPumpsPerClockRead = 256;
  for (uint32_t i = 0; poll_cq(cq, 1, &wc) == 0; ++i) {
    if (i % kPumpsPerClockRead == 0 && end.expired(what, err)) return false;
    pump();
  }
  return true;
}

bool Endpoint::wait_cm_event(const CmId* id, CmEvent& ev, const Deadline& end, std::string_view what,
                             std::string& err) {
  for (;;) {
    while (cm_get_event(ctx_.get(), &ev)) {
      if (cm_trace_) {
        std::fprintf(stderr, "cma_event type %s cma_id %p (status %d)\n", cm_event_str(ev.event),
                     static_cast<void*>(ev.id), ev.status);
      }
      if (!id || ev.id == id || ev.listen_id == id) return true;
      if (ev.event == CmEventType::kConnectRequest && is_listener(ev.listen_id)) requests_.push_back(ev);
    }
    if (end.expired(what, err)) return false;
    pump();
  }
}

bool Endpoint::expect_cm_event(const CmId* id, CmEventType want, CmEvent& ev, const Deadline& end, std::string& err) {
  if (!wait_cm_event(id, ev, end, cm_event_str(want), err)) return false;
  if (ev.event == want) return true;
  err = std::string("unexpected CM event ") + cm_event_str(ev.event) + " (status " + std::to_string(ev.status) +
        "), waiting for " + cm_event_str(want);
  return false;
}

bool Endpoint::is_listener(const CmId* id) const {
  return std::any_of(listeners_.begin(), listeners_.end(), [id](const Listener& l) { return l.id == id; });
}

CmId* Endpoint::listener(CmPortSpace ps, const SockAddr& addr, std::string& err) {
  for (const Listener& l : listeners_) {
    if (l.ps == ps && l.addr == addr) return l.id;
  }
  auto l = cm_create_id(ctx_.get(), nullptr, ps);
  if (!l.ok()) {
    err = std::string("rdma_create_id: ") + l.status().message();
    return nullptr;
  }
  Status s = cm_bind_addr(*l, addr);
  if (s.ok()) s = cm_listen(*l, 8);
  if (!s.ok()) {
    (void)cm_destroy_id(*l);
    err = std::string("rdma_bind_addr / rdma_listen: ") + s.message();
    return nullptr;
  }
  listeners_.push_back({ps, addr, *l});
  return *l;
}

CmId* Endpoint::cm_accept_one(CmPortSpace ps, const CmPeer& peer, const CmConnParam& param, const MakeQp& make_qp,
                              const Deadline& end, std::string& err) {
  CmId* listen_id = listener(ps, peer.addr, err);
  if (!listen_id) return nullptr;
  CmEvent ev;
  const auto kept = std::find_if(requests_.begin(), requests_.end(),
                                 [listen_id](const CmEvent& r) { return r.listen_id == listen_id; });
  if (kept != requests_.end()) {
    ev = *kept;
    requests_.erase(kept);
  } else if (!expect_cm_event(listen_id, CmEventType::kConnectRequest, ev, end, err)) {
    return nullptr;
  }
  CmId* id = ev.id;
  if (!make_qp(id, err)) {
    (void)cm_reject(id, nullptr, 0);
  } else if (Status s = cm_accept(id, param); !s.ok()) {
    err = std::string("rdma_accept: ") + s.message();
  } else if (ps == CmPortSpace::kUdp || expect_cm_event(id, CmEventType::kEstablished, ev, end, err)) {
    // SIDR (UDP): the SIDR REP is the whole answer; nothing comes back.
    return id;
  }
  (void)cm_destroy_id(id);
  return nullptr;
}

/// One attempt of the client: 1 connected, 0 the server is not there yet, -1 failure.
int Endpoint::cm_connect_once(CmPortSpace ps, const CmPeer& peer, const CmConnParam& param, const MakeQp& make_qp,
                              const Deadline& end, CmId*& out, CmEvent* established, std::string& err) {
  auto c = cm_create_id(ctx_.get(), nullptr, ps);
  if (!c.ok()) {
    err = std::string("rdma_create_id: ") + c.status().message();
    return -1;
  }
  CmId* id = *c;
  CmEvent ev;
  int rc = -1;
  if (Status s = cm_resolve_addr(id, nullptr, peer.addr, 2000); !s.ok()) {
    err = std::string("rdma_resolve_addr: ") + s.message();
  } else if (!expect_cm_event(id, CmEventType::kAddrResolved, ev, end, err)) {
    rc = ev.event == CmEventType::kAddrError ? 0 : -1;
  } else if (s = cm_resolve_route(id, 2000); !s.ok()) {
    err = std::string("rdma_resolve_route: ") + s.message();
  } else if (!expect_cm_event(id, CmEventType::kRouteResolved, ev, end, err)) {
  } else if (!make_qp(id, err)) {
  } else if (s = cm_connect(id, param); !s.ok()) {
    err = std::string("rdma_connect: ") + s.message();
  } else if (expect_cm_event(id, CmEventType::kEstablished, ev, end, err)) {
    if (established) *established = ev;
    out = id;
    return 1;
  } else {
    rc = ev.event == CmEventType::kRejected || ev.event == CmEventType::kUnreachable ? 0 : -1;
  }
  (void)cm_destroy_id(id);
  return rc;
}

CmId* Endpoint::cm_connect_rc(const CmPeer& peer, const CmConnParam& param, const MakeQp& make_qp, std::string& err) {
  return cm_connect_ps(CmPortSpace::kTcp, peer, param, make_qp, nullptr, err);
}

CmId* Endpoint::cm_connect_ud(const CmPeer& peer, const MakeQp& make_qp, CmEvent* established, std::string& err) {
  return cm_connect_ps(CmPortSpace::kUdp, peer, CmConnParam{}, make_qp, established, err);
}

CmId* Endpoint::cm_connect_ps(CmPortSpace ps, const CmPeer& peer, const CmConnParam& param, const MakeQp& make_qp,
                              CmEvent* established, std::string& err) {
  const Deadline end(peer.timeout_s);
  if (peer.server) return cm_accept_one(ps, peer, param, make_qp, end, err);
  for (;;) {
    CmId* id = nullptr;
    const int r = cm_connect_once(ps, peer, param, make_qp, end, id, established, err);
    if (r > 0) return id;
    if (r < 0 || !peer.retry_rejected || g_stop) return nullptr;
    if (end.passed()) {
      err = "no rdma_cm server accepted within " + std::to_string(peer.timeout_s) + " s (last attempt: " + err + ")";
      return nullptr;
    }
    drain(100);  // perftest's retry delay
  }
}

void Endpoint::cm_disconnect_all(std::span<CmId* const> ids, uint32_t ms) {
  size_t left = 0;
  for (CmId* id : ids) left += cm_disconnect(id).ok();
  const Deadline end = Deadline::in_ms(ms);
  std::string ignored;
  CmEvent ev;
  while (left && wait_cm_event(nullptr, ev, end, "DISCONNECTED", ignored)) {
    if (ev.event == CmEventType::kDisconnected && std::find(ids.begin(), ids.end(), ev.id) != ids.end()) --left;
  }
}

// ---------------------------------------------------------------- counters

void Endpoint::for_each_counter(const std::function<void(std::string_view, uint64_t)>& f) const {
  const Counters& c = query_counters(ctx_.get());
  for (size_t i = 0; i < kCounterNames.size(); ++i) {
    if (c.v[i]) f(kCounterNames[i], c.v[i]);
  }
  if (fault_) {
    f("hook_rx_dropped", fault_->rx_dropped());
    f("hook_tx_dropped", fault_->tx_dropped());
  }
  if (auto st = port_->stats(); st.ok() && st->rx_missed) f("port_rx_missed", st->rx_missed);
}

void Endpoint::write_counters_json(JsonWriter& w) const {
  w.begin_object();
  for_each_counter([&w](std::string_view n, uint64_t v) { w.key(n).num(v); });
  w.end_object();
}

void Endpoint::print_counters(std::FILE* out, bool cm) const {
  std::fprintf(out, "# counters:");
  for_each_counter([out](std::string_view name, uint64_t v) {
    std::fprintf(out, " %.*s=%llu", int(name.size()), name.data(), (unsigned long long)v);
  });
  std::fprintf(out, "\n");
  if (cm) print_cm_counters(out);
}

void Endpoint::print_cm_counters(std::FILE* out) const {
  const CmCounters cc = query_cm_counters(ctx_.get());
  std::fprintf(out, "# cm counters:");
  for (size_t i = 0; i < size_t(CmCounter::kCount); ++i) {
    if (cc.v[i]) std::fprintf(out, " %s=%llu", kCmCounterNames[i], (unsigned long long)cc.v[i]);
  }
  std::fprintf(out, "\n");
}

}  // namespace uroce::apps
