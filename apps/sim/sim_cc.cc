// `uroce sim --scenario S`: congestion control on the in-memory fabric.
//
// Topology: one switch (drivers/loopback), host 0 the receiver, hosts 1..N
// senders, every link at --link-gbps with --buffer-kb of switch egress
// buffer and RED/ECN marking (--red-kmin-kb, --red-kmax-kb, --red-pmax) on
// each egress queue. Every flow is one RC QP pair, sender host i -> host 0,
// moving data with RDMA WRITEs of --msg-kb, at most --sq-depth outstanding,
// so the bottleneck is the switch's egress queue toward host 0. With --op
// read host 0 READs the same amounts from host i instead: the READ responses
// are the congested data, host 0's notification point answers their CE marks
// and host i's reaction point paces them. All hosts run
// the same congestion control (--cc none|dcqcn|timely); DCQCN sends ECN-capable
// packets, the receiver's notification point answers CE marks with CNPs.
//
// Scenarios (T = --duration-ms):
//   incast      N flows start together and run for T (N:1 incast)
//   share       2 flows; the second starts at T/5
//   join-leave  3 flows: 0 runs throughout, 1 joins at T/4, 2 runs T/2..3T/4
//   mixed       2 long flows plus N-2 hosts sending short flows (16 KB ..
//               1 MB, seeded arrivals during the first 70 % of T): FCTs
//
// Measured (virtual time, stepped every --step-ns):
//   goodput     per flow, bytes the receiver accepted in order (its QP's
//               rcvd_pkts - out_of_sequence - duplicate_request, x MTU)
//   send rate   per flow, bytes its host put on its link (retransmissions too)
//   queue       the switch's egress backlog toward the receiver, every step
//   utilisation wire bytes delivered to the receiver / capacity
//   drops       switch buffer tail drops and the senders' retransmissions, per
//               sample; totals of CNPs and timeouts from the hosts' counters
// Convergence: --window-us windows slide by a quarter window; the flows
// converged at the start of the first window after the last join from which every window
// has Jain's index >= --converge-jain (0.95) over the per-flow goodput of the
// long flows (the index is computed over the flows active through the whole
// window) and bottleneck utilisation >= --converge-util (0.9); the
// convergence time is counted from the last join. The summary's jain, util
// and p99 queue are steady-state figures over the second half of the steady
// period (last join .. first leave), or from convergence on if that is later.
#include "apps/sim/sim_cc.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <uroce/eal.h>
#include <uroce/verbs.h>
#include <uroce/wr.h>

#include "apps/common/json_writer.h"
#include "apps/common/launch.h"
#include "apps/sim/sim_hosts.h"
#include "drivers/loopback/fabric.h"
#include "stack/common/rng.h"

namespace uroce::apps {
namespace {

using loopback::Fabric;
using loopback::PortCounter;

constexpr uint32_t kWireOverhead = 24;  // as LinkConfig::overhead_bytes

using Host = sim::SimHost;

struct ShortMsg {
  uint64_t arrival_ns;
  uint32_t bytes;
  uint64_t done_ns = 0;
};

struct Flow {
  uint32_t host = 0;  // sender
  bool long_flow = true;
  uint64_t start_ns = 0;
  uint64_t stop_ns = 0;
  Qp* sqp = nullptr;
  Qp* rqp = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  uint64_t read_bytes = 0;  // --op read: bytes of READs completed at host 0
  uint32_t outstanding = 0;
  uint64_t wr_seq = 0;
  std::vector<ShortMsg> shorts;
  size_t next_short = 0;   // next to post
  size_t next_done = 0;    // next to complete (FIFO)
  uint32_t short_left = 0; // WRs of the message being posted
  bool failed = false;
};

struct Snapshot {
  uint64_t t_ns;
  uint64_t rx_wire_bytes;              // delivered to the receiver port
  uint64_t drops;                      // switch buffer drops toward the receiver, cumulative
  uint64_t retransmits;                // packets the senders sent again, cumulative
  std::vector<uint64_t> good_bytes;    // per flow, cumulative
  std::vector<uint64_t> sent_bytes;    // per flow (its host's link), cumulative
  double queue_kb_max;                 // in the interval ending here
  double queue_kb;                     // at t
};

double jain(const std::vector<double>& x) {
  double s = 0, s2 = 0;
  for (double v : x) {
    s += v;
    s2 += v * v;
  }
  return s2 == 0 ? 0 : s * s / (double(x.size()) * s2);
}

double percentile(std::vector<uint32_t> v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, size_t(p * double(v.size())));
  std::nth_element(v.begin(), v.begin() + long(k), v.end());
  return double(v[k]);
}

class CcRun {
 public:
  explicit CcRun(const Args& a) : a_(a) {}
  int run();

 private:
  bool setup();
  bool connect(Flow& f);
  void post(Flow& f, uint64_t now);
  void reap(Flow& f, uint64_t now);
  void snapshot(uint64_t t, double qmax_kb, double q_kb);
  uint64_t good_bytes(const Flow& f) const;
  bool active_through(const Flow& f, uint64_t t0, uint64_t t1) const {
    return f.long_flow && f.start_ns <= t0 && f.stop_ns >= t1;
  }
  int report();

  const Args& a_;
  std::string scenario_;
  CcAlgorithm algo_ = CcAlgorithm::kNone;
  uint32_t n_ = 0;
  uint64_t link_bps_ = 0;
  uint32_t mtu_ = 4096;
  Mtu mtu_code_ = Mtu::k4096;
  uint32_t msg_bytes_ = 0;
  uint32_t sq_depth_ = 16;
  bool read_ = false;       // --op read
  uint64_t duration_ns_ = 0;
  uint64_t steady_begin_ns_ = 0;  // last join
  uint64_t steady_end_ns_ = 0;    // first leave
  std::unique_ptr<Fabric> fabric_;
  std::vector<std::unique_ptr<Host>> hosts_;
  std::vector<Flow> flows_;
  std::vector<Snapshot> snaps_;
  std::vector<uint32_t> queue_samples_;  // bytes, every step
  std::vector<uint64_t> queue_t_;        // time of each sample
  DeviceConfig dc_;
  Rng order_rng_{1};  // the hosts' poll order each step (seeded in setup)
  std::vector<size_t> order_;   // that order
};

// ---------------------------------------------------------------- configuration

struct UintKnob {
  const char* name;
  uint32_t DcqcnParams::*field;
};
constexpr UintKnob kDcqcnKnobs[] = {
    {"rpg-time-reset", &DcqcnParams::rpg_time_reset},
    {"rpg-byte-reset", &DcqcnParams::rpg_byte_reset},
    {"rpg-threshold", &DcqcnParams::rpg_threshold},
    {"rpg-max-rate", &DcqcnParams::rpg_max_rate},
    {"rpg-ai-rate", &DcqcnParams::rpg_ai_rate},
    {"rpg-hai-rate", &DcqcnParams::rpg_hai_rate},
    {"rpg-gd", &DcqcnParams::rpg_gd},
    {"rpg-min-dec-fac", &DcqcnParams::rpg_min_dec_fac},
    {"rpg-min-rate", &DcqcnParams::rpg_min_rate},
    {"rate-to-set-on-first-cnp", &DcqcnParams::rate_to_set_on_first_cnp},
    {"dce-tcp-g", &DcqcnParams::dce_tcp_g},
    {"dce-tcp-rtt", &DcqcnParams::dce_tcp_rtt},
    {"rate-reduce-monitor-period", &DcqcnParams::rate_reduce_monitor_period},
    {"initial-alpha-value", &DcqcnParams::initial_alpha_value},
};

CcConfig cc_config(const Args& a, CcAlgorithm algo, uint64_t link_bps) {
  CcConfig c;
  c.algorithm = algo;
  c.line_rate_mbps = uint32_t(link_bps / 1'000'000);
  c.pacer_burst_bytes = uint32_t(a.get_uint("pacer-burst"));
  c.dcqcn = a.get_str("dcqcn-preset") == "paper" ? DcqcnParams::paper() : DcqcnParams::connectx();
  for (const UintKnob& k : kDcqcnKnobs) {
    if (a.given(k.name)) c.dcqcn.*k.field = uint32_t(a.get_uint(k.name));
  }
  if (a.given("clamp-tgt-rate")) c.dcqcn.clamp_tgt_rate = a.get_uint("clamp-tgt-rate") != 0;
  if (a.given("clamp-tgt-rate-after-time-inc")) {
    c.dcqcn.clamp_tgt_rate_after_time_inc = a.get_uint("clamp-tgt-rate-after-time-inc") != 0;
  }
  c.cnp.min_time_between_cnps = uint32_t(a.get_uint("min-time-between-cnps"));
  c.timely.t_low_ns = a.get_uint("timely-t-low-ns");
  c.timely.t_high_ns = a.get_uint("timely-t-high-ns");
  c.timely.min_rtt_ns = a.get_uint("timely-min-rtt-ns");
  c.timely.delta_bps = a.get_uint("timely-delta-mbps") * 1'000'000;
  c.timely.min_rate_bps = a.get_uint("timely-min-rate-mbps") * 1'000'000;
  c.timely.beta = a.get_double("timely-beta");
  c.timely.alpha = a.get_double("timely-alpha");
  c.timely.patched = a.get_uint("timely-patched") != 0;
  c.timely.scale_by_elapsed = a.get_uint("timely-scale-by-elapsed") != 0;
  return c;
}

bool CcRun::setup() {
  scenario_ = std::string(a_.get_str("scenario"));
  const std::string_view cc = a_.get_str("cc");
  algo_ = cc == "dcqcn" ? CcAlgorithm::kDcqcn : cc == "timely" ? CcAlgorithm::kTimely : CcAlgorithm::kNone;
  n_ = uint32_t(a_.get_uint("flows"));
  if (scenario_ == "share") n_ = 2;
  if (scenario_ == "join-leave") n_ = 3;
  if (scenario_ == "mixed" && n_ < 3) n_ = 3;
  link_bps_ = a_.get_uint("link-gbps") * 1'000'000'000ull;
  msg_bytes_ = uint32_t(a_.get_uint("msg-kb") * 1024);
  sq_depth_ = uint32_t(a_.get_uint("sq-depth"));
  read_ = a_.get_str("op") == "read";
  duration_ns_ = a_.get_uint("duration-us") * 1000;
  const uint64_t seed = a_.get_uint("seed-start");
  Rng rng(derive_seed(seed, 8));
  order_rng_ = Rng(derive_seed(seed, 9));

  loopback::FabricConfig fc;
  fc.seed = seed;
  if (a_.given("pcap")) fc.pcap_path = std::string(a_.get_str("pcap"));
  fc.copy_pool_size = 64;
  auto fabric = Fabric::create(fc);
  if (!fabric.ok()) {
    std::fprintf(stderr, "uroce sim: fabric: %s\n", fabric.status().message());
    return false;
  }
  fabric_ = std::move(fabric).value();

  dc_.cc = cc_config(a_, algo_, link_bps_);
  dc_.ecn = algo_ == CcAlgorithm::kDcqcn;  // only a sender that reacts to CE claims ECT
  for (uint32_t h = 0; h <= n_; ++h) {
    loopback::PortConfig pc;
    pc.link.rate_bps = link_bps_;
    pc.link.prop_delay_ns = a_.get_uint("link-delay-ns");
    pc.link.buffer_bytes = uint32_t(a_.get_uint("buffer-kb") * 1024);
    pc.link.red.enabled = true;
    pc.link.red.kmin_bytes = uint32_t(a_.get_uint("red-kmin-kb") * 1024);
    pc.link.red.kmax_bytes = uint32_t(a_.get_uint("red-kmax-kb") * 1024);
    pc.link.red.pmax = a_.get_double("red-pmax");
    pc.link.pfc.enabled = a_.flag("pfc");
    pc.link.pfc.xoff_bytes = uint32_t(a_.get_uint("pfc-xoff-kb") * 1024);
    pc.link.pfc.xon_bytes = uint32_t(a_.get_uint("pfc-xon-kb") * 1024);
    pc.link.tx_queue_bytes = uint32_t(a_.get_uint("nic-queue-kb") * 1024);
    pc.pool_size = h == 0 ? 2048 : 512;
    pc.rx_ring_size = h == 0 ? 4096 : 1024;
    auto host = std::make_unique<Host>();
    DeviceConfig dc = dc_;
    dc.mac = MacAddr{{0x02, 0xcc, 0x00, 0x00, uint8_t(h >> 8), uint8_t(h)}};
    const uint8_t v4[4] = {10, 8, uint8_t(h >> 8), uint8_t(h)};
    dc.gid = Gid::from_ipv4(v4);
    dc.key_seed = derive_seed(seed, 100 + h) | 1;
    dc.max_qp = n_ + 4;
    dc.max_cq = n_ + 4;
    const size_t bytes = h == 0 ? size_t(4) << 20 : std::max<size_t>(msg_bytes_, 1u << 20);
    if (!sim::open_host(*fabric_, pc, dc, bytes, uint8_t(h), *host).ok()) return false;
    hosts_.push_back(std::move(host));
  }

  // The flows of the scenario.
  const uint64_t T = duration_ns_;
  flows_.resize(n_);
  for (uint32_t i = 0; i < n_; ++i) {
    Flow& f = flows_[i];
    f.host = i + 1;
    f.start_ns = uint64_t(i) * 1000;  // 1 us apart: no lock-step start
    f.stop_ns = T;
  }
  steady_begin_ns_ = flows_.back().start_ns;
  steady_end_ns_ = T;
  if (scenario_ == "share") {
    flows_[1].start_ns = T / 5;
    steady_begin_ns_ = T / 5;
  } else if (scenario_ == "join-leave") {
    flows_[1].start_ns = T / 4;
    flows_[2].start_ns = T / 2;
    flows_[2].stop_ns = 3 * T / 4;
    steady_begin_ns_ = T / 2;
    steady_end_ns_ = 3 * T / 4;
  } else if (scenario_ == "mixed") {
    static constexpr uint32_t kSizes[] = {16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024};
    steady_begin_ns_ = flows_[1].start_ns;
    for (uint32_t i = 2; i < n_; ++i) {
      Flow& f = flows_[i];
      f.long_flow = false;
      f.start_ns = T / 20;
      for (uint64_t t = T / 20 + rng.below(T / 10); t < 7 * T / 10; t += 1 + rng.below(T / 8)) {
        f.shorts.push_back(ShortMsg{t, kSizes[rng.below(4)]});
      }
    }
  }
  for (Flow& f : flows_) {
    if (!connect(f)) return false;
  }
  return true;
}

// READs outstanding per QP (--op read): the most a QP allows (IBA 9.7.5.1.4).
constexpr uint8_t kRdAtomic = 16;

bool CcRun::connect(Flow& f) {
  const Host& s = *hosts_[f.host];
  const Host& r = *hosts_[0];
  sim::RcConnect c;
  c.mtu = mtu_code_;
  c.timeout = uint8_t(a_.get_uint("qp-timeout"));
  c.rd_atomic = kRdAtomic;
  sim::RcPair p;
  if (Status st = sim::create_rc_pair(s, r, sq_depth_, c, p); !st.ok()) {
    std::fprintf(stderr, "uroce sim: QP pair: %s\n", st.message());
    return false;
  }
  f.sqp = p.sqp;
  f.rqp = p.rqp;
  f.scq = p.scq;
  f.rcq = p.rcq;
  return true;
}

// Long flows keep sq_depth WRITEs of msg_bytes outstanding while active;
// short flows post their messages (split in msg_bytes WRs) from their arrival.
void CcRun::post(Flow& f, uint64_t now) {
  if (f.failed || now < f.start_ns) return;
  Host& s = *hosts_[f.host];
  Host& r = *hosts_[0];
  while (f.outstanding < sq_depth_) {
    uint32_t len = msg_bytes_;
    if (f.long_flow) {
      if (now >= f.stop_ns) return;
    } else {
      if (f.short_left == 0) {
        if (f.next_short == f.shorts.size() || f.shorts[f.next_short].arrival_ns > now) return;
        f.short_left = f.shorts[f.next_short].bytes;
      }
      len = std::min(f.short_left, msg_bytes_);
    }
    // Every flow writes the same target (or reads into it): only the traffic matters.
    Sge sge{uint64_t(uintptr_t(read_ ? r.mem.get() : s.mem.get())), len, read_ ? r.mr->lkey : s.mr->lkey};
    const uint64_t raddr = uint64_t(uintptr_t(read_ ? s.mem.get() : r.mem.get()));
    const uint32_t rkey = read_ ? s.mr->rkey : r.mr->rkey;
    SendWr w = read_ ? read_wr(0, &sge, raddr, rkey) : write_wr(0, &sge, raddr, rkey);
    // wr_id: low bit set on the last WR of a short message.
    bool last = false;
    if (!f.long_flow) {
      f.short_left -= len;
      last = f.short_left == 0;
      if (last) ++f.next_short;
    }
    // wr_id: the length in the high half (a READ's completion does not carry it).
    w.wr_id = uint64_t(len) << 32 | (f.wr_seq++ & 0x7fffffff) << 1 | (last ? 1 : 0);
    SendWr* bad = nullptr;
    if (!post_send(read_ ? f.rqp : f.sqp, &w, &bad).ok()) {
      f.failed = true;
      return;
    }
    ++f.outstanding;
  }
}

void CcRun::reap(Flow& f, uint64_t now) {
  Wc wc[32];
  for (int n; (n = poll_cq(read_ ? f.rcq : f.scq, 32, wc)) > 0;) {
    for (int i = 0; i < n; ++i) {
      --f.outstanding;
      if (wc[i].status == WcStatus::kSuccess) f.read_bytes += wc[i].wr_id >> 32;
      if (wc[i].status != WcStatus::kSuccess) f.failed = true;
      if (!f.long_flow && (wc[i].wr_id & 1) && f.next_done < f.shorts.size()) f.shorts[f.next_done++].done_ns = now;
    }
  }
}

uint64_t CcRun::good_bytes(const Flow& f) const {
  if (read_) return f.read_bytes;  // READ data is in place when the READ completes
  const Counters& c = query_qp_counters(f.rqp);
  const uint64_t pkts = c.get(Counter::rcvd_pkts) - c.get(Counter::out_of_sequence) - c.get(Counter::duplicate_request);
  return pkts * mtu_;
}

void CcRun::snapshot(uint64_t t, double qmax_kb, double q_kb) {
  Snapshot s;
  s.t_ns = t;
  const auto& rc = hosts_[0]->port->counters();
  s.rx_wire_bytes = rc.get(PortCounter::rx_bytes) + rc.get(PortCounter::rx_frames) * kWireOverhead;
  s.drops = rc.get(PortCounter::drop_buffer);
  s.retransmits = 0;
  for (const Flow& f : flows_) s.retransmits += query_qp_counters(read_ ? f.rqp : f.sqp).get(Counter::retransmits);
  for (const Flow& f : flows_) {
    s.good_bytes.push_back(good_bytes(f));
    const auto& hc = hosts_[f.host]->port->counters();
    s.sent_bytes.push_back(hc.get(PortCounter::tx_bytes) + hc.get(PortCounter::tx_frames) * kWireOverhead);
  }
  s.queue_kb_max = qmax_kb;
  s.queue_kb = q_kb;
  snaps_.push_back(std::move(s));
}

int CcRun::run() {
  if (!setup()) return kExitFailure;
  const uint64_t step = a_.get_uint("step-ns");
  const uint64_t sample = a_.get_uint("sample-us") * 1000;
  uint64_t next_sample = 0;
  double qmax = 0;
  queue_samples_.reserve(duration_ns_ / step + 1);
  for (uint64_t now = 0; now <= duration_ns_; now += step) {
    fabric_->advance(now);
    for (Flow& f : flows_) post(f, now);
    // Hosts poll in a seeded random order each step: frames of one step
    // reach the switch in that order, and a fixed order would give the
    // lower-numbered senders a lasting edge in the queue and in marking.
    order_.resize(hosts_.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[size_t(order_rng_.below(i))]);
    for (size_t i : order_) poll(hosts_[i]->ctx.get(), now);
    for (Flow& f : flows_) reap(f, now);
    const uint64_t q = fabric_->queue_bytes(0);
    queue_samples_.push_back(uint32_t(q));
    queue_t_.push_back(now);
    qmax = std::max(qmax, double(q) / 1024);
    if (now >= next_sample) {
      snapshot(now, qmax, double(q) / 1024);
      qmax = 0;
      next_sample += sample;
    }
  }
  int rc = report();
  if (const Status s = fabric_->close_capture(); !s.ok()) {
    std::fprintf(stderr, "uroce sim: %s\n", s.message());
    rc = kExitFailure;
  }
  // Devices before the fabric: they may hold its mbufs.
  for (Flow& f : flows_) {
    (void)destroy_qp(f.sqp);
    (void)destroy_qp(f.rqp);
  }
  hosts_.clear();
  fabric_.reset();
  return rc;
}

// ---------------------------------------------------------------- results

int CcRun::report() {
  const uint64_t window = a_.get_uint("window-us") * 1000;
  const uint64_t sample = a_.get_uint("sample-us") * 1000;
  auto snap_at = [&](uint64_t t) -> const Snapshot& {
    const size_t i = std::min(snaps_.size() - 1, size_t(t / sample));
    return snaps_[i];
  };
  auto jain_between = [&](uint64_t t0, uint64_t t1) {
    const Snapshot& a = snap_at(t0);
    const Snapshot& b = snap_at(t1);
    std::vector<double> x;
    for (size_t i = 0; i < flows_.size(); ++i) {
      if (active_through(flows_[i], t0, t1)) x.push_back(double(b.good_bytes[i] - a.good_bytes[i]));
    }
    return x.size() < 2 ? 1.0 : jain(x);
  };
  // Convergence: the first window after steady_begin from which all windows are fair.
  const double converge_jain = a_.get_double("converge-jain");
  const double converge_util = a_.get_double("converge-util");
  auto util_between = [&](uint64_t t0, uint64_t t1) {
    return double(snap_at(t1).rx_wire_bytes - snap_at(t0).rx_wire_bytes) * 8 / (double(link_bps_) * double(t1 - t0) / 1e9);
  };
  // Windows slide by a quarter window (at least one sample).
  const uint64_t slide = std::max(sample, window / 4 / sample * sample);
  const uint64_t first_w = (steady_begin_ns_ + slide - 1) / slide * slide;
  int64_t conv_ns = -1;
  for (uint64_t t = first_w; t + window <= steady_end_ns_; t += slide) {
    bool all = true;
    for (uint64_t u = t; u + window <= steady_end_ns_; u += slide) {
      if (jain_between(u, u + window) < converge_jain || util_between(u, u + window) < converge_util) {
        all = false;
        break;
      }
    }
    if (all) {
      conv_ns = int64_t(t);
      break;
    }
  }
  // Steady-state figures: the second half of the steady period, or from
  // convergence on if that is later.
  const uint64_t m0 = std::max<uint64_t>((steady_begin_ns_ + steady_end_ns_) / 2, conv_ns >= 0 ? uint64_t(conv_ns) : 0);
  const uint64_t m1 = steady_end_ns_;
  const double span_s = double(m1 - m0) / 1e9;
  const double util = span_s > 0 ? util_between(m0, m1) : 0;
  const double jain_m = jain_between(m0, m1);
  std::vector<uint32_t> qs, qall;
  for (size_t i = 0; i < queue_samples_.size(); ++i) {
    if (queue_t_[i] >= m0 && queue_t_[i] < m1) qs.push_back(queue_samples_[i]);
  }
  const double p99_kb = percentile(qs, 0.99) / 1024;
  const double p99_all_kb = percentile(queue_samples_, 0.99) / 1024;
  const double max_kb = double(*std::max_element(queue_samples_.begin(), queue_samples_.end())) / 1024;
  const double buffer_kb = double(a_.get_uint("buffer-kb"));
  uint64_t retrans = 0, timeouts = 0, cnp_sent = 0, cnp_handled = 0, paced = 0, rtts = 0, failed = 0;
  for (auto& h : hosts_) {
    const Counters& c = query_counters(h->ctx.get());
    retrans += c.get(Counter::retransmits);
    timeouts += c.get(Counter::local_ack_timeout_err);
    cnp_sent += c.get(Counter::np_cnp_sent);
    cnp_handled += c.get(Counter::rp_cnp_handled);
    paced += c.get(Counter::cc_tx_paced);
    rtts += c.get(Counter::cc_rtt_samples);
  }
  for (const Flow& f : flows_) failed += f.failed;
  const uint64_t drops = hosts_[0]->port->counters().get(PortCounter::drop_buffer);
  const uint64_t marked = hosts_[0]->port->counters().get(PortCounter::ecn_marked);
  uint64_t pauses = 0;
  for (auto& h : hosts_) pauses += h->port->counters().get(PortCounter::pfc_pause_rx);
  std::vector<double> fct_us;
  uint64_t shorts = 0, unfinished = 0;
  for (const Flow& f : flows_) {
    for (const ShortMsg& m : f.shorts) {
      ++shorts;
      if (m.done_ns) fct_us.push_back(double(m.done_ns - m.arrival_ns) / 1000);
      else ++unfinished;
    }
  }
  std::sort(fct_us.begin(), fct_us.end());
  auto fct_p = [&](double p) { return fct_us.empty() ? 0.0 : fct_us[std::min(fct_us.size() - 1, size_t(p * double(fct_us.size())))]; };

  const std::string label = std::string(scenario_) + (read_ ? "-read-" : "-") + std::string(cc_algorithm_name(algo_)) +
                            "-n" + std::to_string(n_);
  char conv[32];
  if (conv_ns >= 0) std::snprintf(conv, sizeof(conv), "%.3f", double(uint64_t(conv_ns) - steady_begin_ns_) / 1e6);
  else std::snprintf(conv, sizeof(conv), "none");
  const bool json = a_.flag("json");
  if (json) {
    const double conv_ms = conv_ns >= 0 ? double(uint64_t(conv_ns) - steady_begin_ns_) / 1e6 : 0.0;
    JsonWriter w;
    w.begin_object().key("label").str(label).key("scenario").str(scenario_).key("cc").str(cc_algorithm_name(algo_));
    w.key("flows").num(n_).key("link_gbps").fixed(double(link_bps_) / 1e9, 1).key("util").fixed(util, 4);
    w.key("jain").fixed(jain_m, 4).key("converged").boolean(conv_ns >= 0).key("convergence_ms");
    if (conv_ns >= 0) w.fixed(conv_ms, 3);
    else w.null();
    w.key("p99_queue_kb").fixed(p99_kb, 1).key("p99_queue_all_kb").fixed(p99_all_kb, 1);
    w.key("max_queue_kb").fixed(max_kb, 1).key("buffer_kb").fixed(buffer_kb, 0).key("drops").num(drops);
    w.key("retransmits").num(retrans).key("timeouts").num(timeouts).key("ecn_marked").num(marked);
    w.key("cnp_sent").num(cnp_sent).key("cnp_handled").num(cnp_handled).key("pfc_pauses").num(pauses);
    w.key("paced").num(paced).key("rtt_samples").num(rtts).key("failed_flows").num(failed);
    w.key("short_flows").num(shorts).key("unfinished").num(unfinished).key("fct_p50_us").fixed(fct_p(0.5), 1);
    w.key("fct_p99_us").fixed(fct_p(0.99), 1).key("measured_ms").begin_array().fixed(double(m0) / 1e6, 3);
    w.fixed(double(m1) / 1e6, 3).end_array().end_object();
    std::printf("%s\n", w.text().c_str());
  } else {
    std::printf("# uroce sim %s\n", a_.config_line().c_str());
    std::printf(" %-22s %-6s %-7s %-8s %-10s %-10s %-10s %-8s %-8s %-8s %-9s\n", "label", "util", "jain", "conv_ms",
                "p99_q_KB", "max_q_KB", "buffer_KB", "drops", "retrans", "cnps", "fct_p99us");
    std::printf(" %-22s %-6.3f %-7.4f %-8s %-10.1f %-10.1f %-10.0f %-8llu %-8llu %-8llu %-9.1f\n", label.c_str(), util,
                jain_m, conv, p99_kb, max_kb, buffer_kb, (unsigned long long)drops, (unsigned long long)retrans,
                (unsigned long long)cnp_handled, fct_p(0.99));
  }
  bool csv_ok = true;
  if (a_.given("csv-dir")) {
    const std::string dir(a_.get_str("csv-dir"));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const bool series_ok = write_text_file("sim", dir + "/" + label + ".series.csv", [&](std::FILE* f) {
      std::fprintf(f, "t_us,queue_kb,queue_max_kb,util,drops,retransmits");
      for (size_t i = 0; i < flows_.size(); ++i) std::fprintf(f, ",goodput_gbps_%zu", i);
      for (size_t i = 0; i < flows_.size(); ++i) std::fprintf(f, ",send_gbps_%zu", i);
      std::fprintf(f, "\n");
      for (size_t k = 1; k < snaps_.size(); ++k) {
        const Snapshot& p = snaps_[k - 1];
        const Snapshot& s = snaps_[k];
        const double dt = double(s.t_ns - p.t_ns);
        std::fprintf(f, "%.1f,%.2f,%.2f,%.4f,%llu,%llu", double(s.t_ns) / 1000, s.queue_kb, s.queue_kb_max,
                     double(s.rx_wire_bytes - p.rx_wire_bytes) * 8 / dt / (double(link_bps_) / 1e9),
                     (unsigned long long)(s.drops - p.drops), (unsigned long long)(s.retransmits - p.retransmits));
        for (size_t i = 0; i < flows_.size(); ++i) std::fprintf(f, ",%.4f", double(s.good_bytes[i] - p.good_bytes[i]) * 8 / dt);
        for (size_t i = 0; i < flows_.size(); ++i) std::fprintf(f, ",%.4f", double(s.sent_bytes[i] - p.sent_bytes[i]) * 8 / dt);
        std::fprintf(f, "\n");
      }
    });
    const bool fct_ok = write_text_file("sim", dir + "/" + label + ".fct.csv", [&](std::FILE* f) {
      std::fprintf(f, "flow,bytes,arrival_us,fct_us\n");
      for (size_t i = 0; i < flows_.size(); ++i) {
        for (const ShortMsg& m : flows_[i].shorts) {
          std::fprintf(f, "%zu,%u,%.1f,%.1f\n", i, m.bytes, double(m.arrival_ns) / 1000,
                       m.done_ns ? double(m.done_ns - m.arrival_ns) / 1000 : -1.0);
        }
      }
    });
    csv_ok = series_ok && fct_ok;
  }

  // Targets (for tests): each miss is printed with the figure reached.
  int rc = failed || !csv_ok ? kExitFailure : kExitOk;
  if (failed) std::fprintf(stderr, "uroce sim: %llu flow(s) failed (a WR completed in error)\n", (unsigned long long)failed);
  auto miss = [&](const char* what, double got, const char* op, double want) {
    std::fprintf(stderr, "uroce sim: %s: target %s %s %g, got %g\n", label.c_str(), what, op, want, got);
    rc = kExitFailure;
  };
  if (a_.given("expect-util") && util < a_.get_double("expect-util")) miss("utilisation", util, ">=", a_.get_double("expect-util"));
  if (a_.given("expect-jain") && jain_m < a_.get_double("expect-jain")) miss("jain", jain_m, ">=", a_.get_double("expect-jain"));
  if (a_.given("expect-jain-below") && jain_m >= a_.get_double("expect-jain-below")) {
    miss("jain", jain_m, "<", a_.get_double("expect-jain-below"));
  }
  if (a_.given("expect-p99-queue-kb") && p99_kb > a_.get_double("expect-p99-queue-kb")) {
    miss("p99 queue KB", p99_kb, "<=", a_.get_double("expect-p99-queue-kb"));
  }
  if (a_.flag("expect-converged") && conv_ns < 0) miss("converged", 0, "==", 1);
  if (a_.flag("expect-no-drops") && (drops != 0 || retrans != 0)) miss("drops + retransmits", double(drops + retrans), "==", 0);
  if (a_.flag("expect-drops") && (drops == 0 || retrans == 0)) {
    miss("drops and retransmits both", double(std::min(drops, retrans)), ">", 0);
  }
  return rc;
}

}  // namespace

int run_cc_scenario(const Args& args) {
  const char* bad = nullptr;
  if (args.get_uint("msg-kb") % 4 != 0) bad = "--msg-kb must be a multiple of the 4 KiB path MTU";
  else if (args.get_uint("window-us") % args.get_uint("sample-us") != 0) bad = "--window-us must be a multiple of --sample-us";
  else if (args.get_uint("duration-us") < 2 * args.get_uint("window-us")) bad = "--duration-us must be at least two --window-us";
  else if (args.get_uint("red-kmax-kb") <= args.get_uint("red-kmin-kb")) bad = "--red-kmax-kb must be above --red-kmin-kb";
  else if (args.get_uint("pfc-xon-kb") >= args.get_uint("pfc-xoff-kb")) bad = "--pfc-xon-kb must be below --pfc-xoff-kb";
  if (bad) {
    std::fprintf(stderr, "uroce sim: %s (see uroce sim --help)\n", bad);
    return kExitUsage;
  }
  if (Status s = init_eal(); !s.ok()) {
    std::fprintf(stderr, "uroce sim: %s\n", s.message());
    return kExitFailure;
  }
  return CcRun(args).run();
}

}  // namespace uroce::apps
