// `uroce sim --scenario loss|reorder|blackhole|balance`: loss recovery and
// multipath on the two-tier leaf/spine fabric (drivers/loopback), go-back-N
// beside uroce's extension (issue 23; the experiments of docs/LOSS_RECOVERY.md).
//
// Topology: 2 leaves joined by S spines (--spines; 0: the scenario's). The
// sender host hangs off leaf 0, the receiver off leaf 1; host links at
// --link-gbps with --link-delay-ns; path s (each leaf's cable to spine s) at
// the same rate, --path-delay-ns + s * --path-delay-step-ns one way, and
// --buffer-kb of buffer at either end. RC QPs move --msg-kb RDMA WRITEs
// (--op read: the sender READs them from the receiver, so the data are READ
// responses), --sq-depth outstanding each, for --duration-us of virtual time,
// without congestion control. A scenario runs its variants one after another, each on
// a fresh fabric with the same seed (--seed-start):
//   loss       1 QP on 1 path; --path-loss on leaf 0's paths, so on the data
//              and on the ACKs: off and sr without loss, then with it
//   reorder    1 QP on 8 paths of unequal delay, no loss: off (one source
//              port, in order), spray (go-back-N over --paths ports) and
//              sr-spray (selective repeat over --paths ports)
//   blackhole  1 QP on 8 paths; at --blackhole-at-us the path its first data
//              frame took becomes a blackhole for good: off beside sr-spray
//   balance    --flows QPs (8) on 4 paths: one source port each (off)
//              beside sprayed over --paths ports each (sr-spray)
// Measured per variant:
//   goodput          bytes of WRITEs (READs) completed at the sender over
//                    the run (and per --sample-us in the time series)
//   retransmits      the sender's packets sent again (its `retransmits`);
//                    --op read: the READ response frames the receiver sent
//                    again (a PSN it had sent before, counted at the switch)
//   fabric_drops     frames the fabric dropped: path loss, blackhole, buffers
//   spurious         retransmits beyond fabric_drops (a lower bound on the
//                    retransmissions of packets that were not lost)
//   timeouts, failed local ACK timeouts; QPs that completed a WR in error
//   path_bytes       bytes each of leaf 0's uplinks (--op read: leaf 1's) carried (the data
//                    direction), paths_used (those that carried any) and the
//                    most / least loaded ratio
//   blackhole        goodput before (from half the time to the blackhole to
//                    it), the time to recover (from the blackhole to the end
//                    of the first --sample-us sample back at 80 % of that
//                    goodput after one below it; 0 if none was below; none
//                    if it never came back) and the goodput after (from the
//                    blackhole to the end)
#include "apps/sim/sim_paths.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <rte_mbuf.h>

#include <uroce/eal.h>
#include <uroce/verbs.h>
#include <uroce/wr.h>

#include "apps/common/json_writer.h"
#include "apps/common/launch.h"
#include "apps/sim/sim_ext.h"
#include "apps/sim/sim_hosts.h"
#include "drivers/loopback/fabric.h"
#include "stack/common/rng.h"
#include "stack/wire/headers.h"
#include "stack/wire/opcodes.h"

namespace uroce::apps {
namespace {

using loopback::Fabric;
using loopback::PathCounter;
using loopback::PathDir;
using loopback::PortCounter;
using sim::ExtMode;

/// A blackhole's recovery: the goodput of a sample is back to this share of
/// the goodput before the blackhole.
constexpr double kRecoveredShare = 0.8;

struct Variant {
  ExtMode ext;
  double loss;
};

struct VariantResult {
  Variant v;
  double goodput_gbps = 0;
  uint64_t retransmits = 0, fabric_drops = 0, timeouts = 0, failed = 0;
  std::vector<uint64_t> path_bytes;  // the data's leaf's uplinks
  uint32_t paths_used = 0;
  std::optional<double> path_ratio;  // most / least loaded; none if a path carried nothing
  // blackhole
  uint64_t blackhole_ns = 0;
  double before_gbps = 0, after_gbps = 0;
  std::optional<double> recover_us;
  // time series, per sample
  std::vector<uint64_t> t_ns, good_bytes, retrans;
  std::vector<std::vector<uint64_t>> path_sample_bytes;

  uint64_t spurious() const { return retransmits > fabric_drops ? retransmits - fabric_drops : 0; }
  std::string label() const {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s-loss%g", std::string(sim::ext_name(v.ext)).c_str(), v.loss * 100);
    return buf;
  }
};

struct Flow {
  sim::RcPair qp;
  uint32_t outstanding = 0;
  bool failed = false;
};

// What the switch sees: the spine of the first data frame (blackhole
// scenario: the sender's, or with --op read the receiver's), and the READ
// response frames the receiver sends again (a PSN it sent before; the runs
// are too short for the 24-bit PSN to wrap).
struct FrameWatch {
  Fabric* fabric = nullptr;
  uint32_t data_port = 0;  // the port the data leave from
  bool read = false;
  std::optional<uint32_t> spine;
  std::vector<uint64_t> sent;  // a bit per PSN: a READ response with it went out
  uint64_t resent = 0;
};

loopback::HookVerdict watch_hook(void* user, const loopback::FrameEvent& ev, rte_mbuf* m) {
  auto& w = *static_cast<FrameWatch*>(user);
  if (ev.src_port != w.data_port) return loopback::HookVerdict::kPass;
  if (!w.spine && rte_pktmbuf_pkt_len(m) > 1024) w.spine = w.fabric->ecmp_spine(m);
  // RoCEv2 over IPv4 without a VLAN tag (the sim's hosts): the BTH after 42 bytes.
  constexpr uint32_t kBth = sizeof(wire::EthHdr) + sizeof(wire::Ipv4Hdr) + sizeof(wire::UdpHdr);
  if (!w.read || rte_pktmbuf_data_len(m) < kBth + sizeof(wire::Bth)) return loopback::HookVerdict::kPass;
  const auto* bth = rte_pktmbuf_mtod_offset(m, const wire::Bth*, kBth);
  if (!(wire::kOpcodes[bth->opcode].flags & wire::kRead) || (wire::kOpcodes[bth->opcode].flags & wire::kReq)) {
    return loopback::HookVerdict::kPass;
  }
  const uint32_t psn = wire::bth_psn(*bth);
  uint64_t& word = w.sent[psn / 64];
  if (word >> (psn % 64) & 1) ++w.resent;
  word |= uint64_t(1) << (psn % 64);
  return loopback::HookVerdict::kPass;
}

class PathRun {
 public:
  explicit PathRun(const Args& a) : a_(a) {}
  int run();

 private:
  std::optional<VariantResult> run_variant(const Variant& v);
  int report(const std::vector<VariantResult>& rs);

  const Args& a_;
  std::string scenario_;
};

std::optional<VariantResult> PathRun::run_variant(const Variant& v) {
  const bool balance = scenario_ == "balance";
  const uint32_t spines = a_.get_uint("spines") != 0 ? uint32_t(a_.get_uint("spines"))
                          : scenario_ == "loss"        ? 1u
                          : balance                    ? 4u
                                                       : 8u;
  const uint32_t flows = balance ? uint32_t(a_.get_uint("flows")) : 1u;
  const uint64_t link_bps = a_.get_uint("link-gbps") * 1'000'000'000ull;
  const uint32_t msg = uint32_t(a_.get_uint("msg-kb") * 1024);
  const uint32_t sq_depth = uint32_t(a_.get_uint("sq-depth"));
  const uint64_t duration = a_.get_uint("duration-us") * 1000;
  const uint64_t step = a_.get_uint("step-ns");
  const uint64_t sample = a_.get_uint("sample-us") * 1000;
  const uint64_t seed = a_.get_uint("seed-start");
  const uint64_t bh_at = scenario_ != "blackhole"          ? 0
                         : a_.get_uint("blackhole-at-us") != 0 ? a_.get_uint("blackhole-at-us") * 1000
                                                               : duration / 2;

  loopback::FabricConfig fc;
  fc.seed = seed;
  fc.copy_pool_size = 64;
  fc.topology.leaves = 2;
  fc.topology.spines = spines;
  fc.topology.path.rate_bps = link_bps;
  fc.topology.path.buffer_bytes = uint32_t(a_.get_uint("buffer-kb") * 1024);
  auto fabric = Fabric::create(fc);
  if (!fabric.ok()) {
    std::fprintf(stderr, "uroce sim: fabric: %s\n", fabric.status().message());
    return std::nullopt;
  }
  std::unique_ptr<Fabric> f = std::move(fabric).value();
  for (uint32_t leaf = 0; leaf < 2; ++leaf) {
    for (uint32_t s = 0; s < spines; ++s) {
      loopback::PathConfig pc = fc.topology.path;
      pc.prop_delay_ns = a_.get_uint("path-delay-ns") + s * a_.get_uint("path-delay-step-ns");
      pc.loss = leaf == 0 ? v.loss : 0;
      f->set_path(leaf, s, pc);
    }
  }
  std::vector<std::unique_ptr<sim::SimHost>> hosts;
  for (uint32_t h = 0; h < 2; ++h) {
    loopback::PortConfig pc;
    pc.leaf = h;
    pc.link.rate_bps = link_bps;
    pc.link.prop_delay_ns = a_.get_uint("link-delay-ns");
    pc.link.buffer_bytes = uint32_t(a_.get_uint("buffer-kb") * 1024);
    pc.link.tx_queue_bytes = uint32_t(a_.get_uint("nic-queue-kb") * 1024);
    pc.pool_size = 4096;
    pc.rx_ring_size = 4096;
    DeviceConfig dc;
    dc.mac = MacAddr{{0x02, 0x5e, 0x00, 0x00, 0x00, uint8_t(h + 1)}};
    const uint8_t v4[4] = {10, 9, 0, uint8_t(h + 1)};
    dc.gid = Gid::from_ipv4(v4);
    dc.key_seed = derive_seed(seed, 100 + h) | 1;
    dc.max_qp = flows + 4;
    dc.max_cq = 2 * flows + 4;
    hosts.push_back(std::make_unique<sim::SimHost>());
    if (!sim::open_host(*f, pc, dc, std::max<size_t>(msg, 1u << 20), uint8_t(h), *hosts.back()).ok()) return std::nullopt;
  }
  sim::SimHost& snd = *hosts[0];
  sim::SimHost& rcv = *hosts[1];
  sim::RcConnect c;
  c.timeout = uint8_t(a_.get_uint("qp-timeout"));
  c.use_ext = v.ext != ExtMode::kOff;
  c.ext = sim::qp_ext(v.ext, uint16_t(a_.get_uint("paths")));
  std::vector<Flow> fl(flows);
  for (Flow& x : fl) {
    if (Status st = sim::create_rc_pair(snd, rcv, sq_depth, c, x.qp); !st.ok()) {
      std::fprintf(stderr, "uroce sim: QP pair: %s\n", st.message());
      return std::nullopt;
    }
  }
  const bool read = a_.get_str("op") == "read";
  FrameWatch watch{f.get(), read ? rcv.port->index() : snd.port->index(), read, std::nullopt, {}, 0};
  if (read) watch.sent.assign((wire::kBthPsnMask + 1) / 64, 0);
  f->set_hook(watch_hook, &watch);

  VariantResult r;
  r.v = v;
  uint64_t good = 0, next_sample = sample;
  bool blackholed = false;
  auto path_bytes_now = [&] {
    std::vector<uint64_t> b(spines);
    for (uint32_t s = 0; s < spines; ++s) b[s] = f->path_counters(read ? 1 : 0, s, PathDir::kUp).get(PathCounter::bytes);
    return b;
  };
  auto retrans_now = [&] { return query_counters(snd.ctx.get()).get(Counter::retransmits); };
  Wc wc[32];
  for (uint64_t now = 0; now <= duration; now += step) {
    f->advance(now);
    if (bh_at != 0 && !blackholed && now >= bh_at && watch.spine) {
      f->schedule_blackhole(read ? 1 : 0, *watch.spine, now, true);
      blackholed = true;
      r.blackhole_ns = now;
    }
    for (Flow& x : fl) {
      while (!x.failed && x.outstanding < sq_depth) {
        Sge sge{uint64_t(uintptr_t(snd.mem.get())), msg, snd.mr->lkey};
        const uint64_t raddr = uint64_t(uintptr_t(rcv.mem.get()));
        SendWr w = read ? read_wr(0, &sge, raddr, rcv.mr->rkey) : write_wr(0, &sge, raddr, rcv.mr->rkey);
        SendWr* bad = nullptr;
        if (!post_send(x.qp.sqp, &w, &bad).ok()) {
          x.failed = true;
          break;
        }
        ++x.outstanding;
      }
    }
    poll(snd.ctx.get(), now);
    poll(rcv.ctx.get(), now);
    for (Flow& x : fl) {
      for (int n; (n = poll_cq(x.qp.scq, 32, wc)) > 0;) {
        for (int i = 0; i < n; ++i) {
          --x.outstanding;
          if (wc[i].status == WcStatus::kSuccess) {
            good += msg;
          } else {
            x.failed = true;
          }
        }
      }
    }
    if (now >= next_sample) {
      r.t_ns.push_back(now);
      r.good_bytes.push_back(good);
      r.retrans.push_back(retrans_now());
      r.path_sample_bytes.push_back(path_bytes_now());
      next_sample += sample;
    }
  }
  r.goodput_gbps = double(good) * 8 / double(duration);
  r.retransmits = read ? watch.resent : retrans_now();
  const Counters& sc = query_counters(snd.ctx.get());
  r.timeouts = sc.get(Counter::local_ack_timeout_err);
  for (const Flow& x : fl) r.failed += x.failed;
  for (uint32_t leaf = 0; leaf < 2; ++leaf) {
    for (uint32_t s = 0; s < spines; ++s) {
      for (PathDir d : {PathDir::kUp, PathDir::kDown}) {
        const auto& pc = f->path_counters(leaf, s, d);
        r.fabric_drops += pc.get(PathCounter::drop_buffer) + pc.get(PathCounter::drop_loss) +
                          pc.get(PathCounter::drop_blackhole);
      }
    }
  }
  const loopback::PortCounters ports = f->totals();
  r.fabric_drops += ports.get(PortCounter::drop_buffer) + ports.get(PortCounter::drop_rx_ring_full);
  r.path_bytes = path_bytes_now();
  const auto [lo, hi] = std::minmax_element(r.path_bytes.begin(), r.path_bytes.end());
  for (uint64_t b : r.path_bytes) r.paths_used += b != 0;
  if (*lo != 0) r.path_ratio = double(*hi) / double(*lo);
  if (blackholed) {
    // Goodput before: from half the time to the blackhole up to it; after: to the end.
    auto good_at = [&](uint64_t t) {
      size_t i = 0;
      while (i + 1 < r.t_ns.size() && r.t_ns[i + 1] <= t) ++i;
      return r.t_ns.empty() || r.t_ns[0] > t ? uint64_t(0) : r.good_bytes[i];
    };
    const uint64_t b0 = r.blackhole_ns / 2;
    r.before_gbps = double(good_at(r.blackhole_ns) - good_at(b0)) * 8 / double(r.blackhole_ns - b0);
    r.after_gbps = double(good - good_at(r.blackhole_ns)) * 8 / double(duration - r.blackhole_ns);
    // Recovered: the first sample back at kRecoveredShare of the goodput
    // before, after one below it (the completions of what was already
    // through when the path failed do not count); no sample below: 0.
    bool dipped = false;
    for (size_t i = 1; i < r.t_ns.size(); ++i) {
      if (r.t_ns[i - 1] < r.blackhole_ns) continue;
      const double g = double(r.good_bytes[i] - r.good_bytes[i - 1]) * 8 / double(r.t_ns[i] - r.t_ns[i - 1]);
      if (g < kRecoveredShare * r.before_gbps) {
        dipped = true;
      } else if (dipped) {
        r.recover_us = double(r.t_ns[i] - r.blackhole_ns) / 1000;
        break;
      }
    }
    if (!dipped) r.recover_us = 0.0;
  }
  // Devices before the fabric: they may hold its mbufs.
  for (Flow& x : fl) {
    (void)destroy_qp(x.qp.sqp);
    (void)destroy_qp(x.qp.rqp);
  }
  hosts.clear();
  f.reset();
  return r;
}

int PathRun::run() {
  scenario_ = std::string(a_.get_str("scenario"));
  const double loss = a_.get_double("path-loss");
  std::vector<Variant> vs;
  if (scenario_ == "loss") {
    vs = {{ExtMode::kOff, 0}, {ExtMode::kSr, 0}, {ExtMode::kOff, loss}, {ExtMode::kSr, loss}};
  } else if (scenario_ == "reorder") {
    vs = {{ExtMode::kOff, 0}, {ExtMode::kSpray, 0}, {ExtMode::kSrSpray, 0}};
  } else {  // blackhole, balance
    vs = {{ExtMode::kOff, 0}, {ExtMode::kSrSpray, 0}};
  }
  std::vector<VariantResult> rs;
  for (const Variant& v : vs) {
    if (g_stop) {
      std::fprintf(stderr, "uroce sim: interrupted after %zu of %zu variants\n", rs.size(), vs.size());
      return kExitFailure;
    }
    auto r = run_variant(v);
    if (!r) return kExitFailure;
    rs.push_back(std::move(*r));
  }
  return report(rs);
}

int PathRun::report(const std::vector<VariantResult>& rs) {
  // The scenario's comparison: the extension's variant against go-back-N's
  // (sprayed too in reorder), at the loss of the scenario; loss: each also
  // against itself without loss.
  auto find = [&rs](ExtMode e, double loss) -> const VariantResult& {
    return *std::find_if(rs.begin(), rs.end(), [&](const VariantResult& r) { return r.v.ext == e && r.v.loss == loss; });
  };
  const bool lossy = scenario_ == "loss";
  const double loss = lossy ? a_.get_double("path-loss") : 0;
  const VariantResult& ext = find(lossy ? ExtMode::kSr : ExtMode::kSrSpray, loss);
  const VariantResult& gbn = find(scenario_ == "reorder" ? ExtMode::kSpray : ExtMode::kOff, loss);
  const double keep = lossy ? ext.goodput_gbps / std::max(find(ExtMode::kSr, 0).goodput_gbps, 1e-9) : 0;
  const double gbn_keep = lossy ? gbn.goodput_gbps / std::max(find(ExtMode::kOff, 0).goodput_gbps, 1e-9) : 0;
  bool ext_better = ext.goodput_gbps > gbn.goodput_gbps;
  if (scenario_ == "blackhole") ext_better = ext.after_gbps > gbn.after_gbps;
  if (scenario_ == "balance") ext_better = ext.path_ratio && (!gbn.path_ratio || *ext.path_ratio < *gbn.path_ratio);
  if (a_.flag("json")) {
    JsonWriter w;
    w.begin_object().key("scenario").str(scenario_).key("seed").num(a_.get_uint("seed-start"));
    w.key("paths").num(a_.get_uint("paths")).key("variants").begin_array();
    for (const VariantResult& r : rs) {
      w.begin_object().key("label").str(r.label()).key("ext").str(sim::ext_name(r.v.ext)).key("loss").fixed(r.v.loss, 4);
      w.key("goodput_gbps").fixed(r.goodput_gbps, 3).key("retransmits").num(r.retransmits);
      w.key("fabric_drops").num(r.fabric_drops).key("spurious_retransmits").num(r.spurious());
      w.key("timeouts").num(r.timeouts).key("qps_failed").num(r.failed).key("paths_used").num(r.paths_used);
      w.key("path_bytes").begin_array();
      for (uint64_t b : r.path_bytes) w.num(b);
      w.end_array().key("path_ratio");
      if (r.path_ratio) w.fixed(*r.path_ratio, 3);
      else w.null();
      if (scenario_ == "blackhole") {
        w.key("blackhole_us").fixed(double(r.blackhole_ns) / 1000, 1).key("before_gbps").fixed(r.before_gbps, 3);
        w.key("recover_us");
        if (r.recover_us) w.fixed(*r.recover_us, 1);
        else w.null();
        w.key("after_gbps").fixed(r.after_gbps, 3);
      }
      w.end_object();
    }
    w.end_array().key("ext_better").boolean(ext_better);
    if (scenario_ == "loss") w.key("ext_keeps").fixed(keep, 4).key("gbn_keeps").fixed(gbn_keep, 4);
    w.end_object();
    std::printf("%s\n", w.text().c_str());
  } else {
    std::printf("# uroce sim %s\n", a_.config_line().c_str());
    std::printf(" %-18s %-9s %-10s %-9s %-9s %-9s %-8s %-6s %-6s %-8s", "label", "ext", "goodput", "retrans",
                "drops", "spurious", "timeouts", "failed", "paths", "ratio");
    if (scenario_ == "blackhole") std::printf(" %-11s %-11s %-10s", "before_gbps", "recover_us", "after_gbps");
    std::printf("\n");
    for (const VariantResult& r : rs) {
      char ratio[16] = "inf", rec[16] = "never";
      if (r.path_ratio) std::snprintf(ratio, sizeof(ratio), "%.3f", *r.path_ratio);
      if (r.recover_us) std::snprintf(rec, sizeof(rec), "%.1f", *r.recover_us);
      std::printf(" %-18s %-9s %-10.3f %-9llu %-9llu %-9llu %-8llu %-6llu %-6u %-8s", r.label().c_str(),
                  std::string(sim::ext_name(r.v.ext)).c_str(), r.goodput_gbps, (unsigned long long)r.retransmits,
                  (unsigned long long)r.fabric_drops, (unsigned long long)r.spurious(),
                  (unsigned long long)r.timeouts, (unsigned long long)r.failed, r.paths_used, ratio);
      if (scenario_ == "blackhole") std::printf(" %-11.3f %-11s %-10.3f", r.before_gbps, rec, r.after_gbps);
      std::printf("\n");
    }
    if (scenario_ == "loss") {
      std::printf("# at %g %% loss: sr keeps %.1f %% of its loss-free goodput (issue 23 target: >= 80 %%), "
                  "go-back-N %.1f %%\n", ext.v.loss * 100, keep * 100, gbn_keep * 100);
    }
  }
  bool csv_ok = true;
  if (a_.given("csv-dir")) {
    const std::string dir(a_.get_str("csv-dir"));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    for (const VariantResult& r : rs) {
      csv_ok &= write_text_file("sim", dir + "/" + scenario_ + "-" + r.label() + ".series.csv", [&](std::FILE* out) {
        std::fprintf(out, "t_us,goodput_gbps,retransmits");
        for (size_t s = 0; s < r.path_bytes.size(); ++s) std::fprintf(out, ",path%zu_gbps", s);
        std::fprintf(out, "\n");
        for (size_t k = 1; k < r.t_ns.size(); ++k) {
          const double dt = double(r.t_ns[k] - r.t_ns[k - 1]);
          std::fprintf(out, "%.1f,%.4f,%llu", double(r.t_ns[k]) / 1000,
                       double(r.good_bytes[k] - r.good_bytes[k - 1]) * 8 / dt,
                       (unsigned long long)(r.retrans[k] - r.retrans[k - 1]));
          for (size_t s = 0; s < r.path_bytes.size(); ++s) {
            std::fprintf(out, ",%.4f", double(r.path_sample_bytes[k][s] - r.path_sample_bytes[k - 1][s]) * 8 / dt);
          }
          std::fprintf(out, "\n");
        }
      });
    }
  }
  int rc = csv_ok && !g_stop ? kExitOk : kExitFailure;
  if (a_.flag("expect-ext-better") && !ext_better) {
    std::fprintf(stderr, "uroce sim: %s: target: %s better than %s, it is not\n", scenario_.c_str(),
                 ext.label().c_str(), gbn.label().c_str());
    rc = kExitFailure;
  }
  if (scenario_ == "loss" && a_.given("expect-keep") && keep < a_.get_double("expect-keep")) {
    std::fprintf(stderr, "uroce sim: loss: target: %s keeps >= %g of its loss-free goodput, got %.4f\n",
                 ext.label().c_str(), a_.get_double("expect-keep"), keep);
    rc = kExitFailure;
  }
  return rc;
}

}  // namespace

int run_path_scenario(const Args& args) {
  if (args.get_uint("msg-kb") % 4 != 0) {
    std::fprintf(stderr, "uroce sim: --msg-kb must be a multiple of the 4 KiB path MTU (see uroce sim --help)\n");
    return kExitUsage;
  }
  if (args.get_str("scenario") == "balance" && args.get_uint("spines") == 1) {
    std::fprintf(stderr, "uroce sim: balance wants at least 2 --spines (see uroce sim --help)\n");
    return kExitUsage;
  }
  if (Status s = init_eal(); !s.ok()) {
    std::fprintf(stderr, "uroce sim: %s\n", s.message());
    return kExitFailure;
  }
  install_stop_handlers();
  return PathRun(args).run();
}

}  // namespace uroce::apps
