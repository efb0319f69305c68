// The /uroce/* DPDK telemetry commands (telemetry.h). Each reply is a JSON
// object built with rte_tel_data (one level of nested containers, as DPDK
// 22.11 allows). Devices are numbered in the order they were opened in this
// process (the "dev" parameter and the keys of /uroce/ports).
//
//   /uroce/ports            dev -> {mac, mtu, max_path_mtu, engine, engines, qps, gid<i>...}
//   /uroce/qps[,dev]        "<dev>_<qpn>" -> {dev, qpn, type, state, dest_qpn, path_mtu, sq_psn, next_psn,
//                                   una_psn, epsn, msn, outstanding_wqes, retry_left, rnr_left, rnr_wait}
//                           (first kMaxQpsListed QPs; /uroce/qp for one)
//   /uroce/qp,[dev,]qpn     that QP's fields and its non-zero per-QP counters
//                           (without dev: the first device that has the QPN)
//   /uroce/counters[,dev]   counter -> value (summed over devices without dev)
//   /uroce/cc[,dev]         "dev<N>" -> device CC config and CNP counters;
//                           "<dev>_<qpn>" -> the QP's rate, DCQCN alpha/stage, RTT samples
#include "stack/device/telemetry.h"

#include <rte_telemetry.h>

#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "stack/cc/dcqcn.h"
#include "stack/device/context.h"

namespace uroce {

namespace {

inline constexpr uint32_t kMaxQpsListed = 64;  // a 16 KB telemetry reply holds about this many

struct Entry {
  uint32_t dev;
  Context* ctx;
};

struct Registry {
  std::vector<Entry> devices;
  uint32_t next_dev = 0;
  bool commands_registered = false;
};

Registry& registry() {
  static Registry r;
  return r;
}

const char* type_name(QpType t) {
  switch (t) {
    case QpType::kRc: return "RC";
    case QpType::kUc: return "UC";
    case QpType::kUd: return "UD";
  }
  return "?";
}

std::string mac_text(const MacAddr& m) {
  char b[18];
  std::snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m.b[0], m.b[1], m.b[2], m.b[3], m.b[4], m.b[5]);
  return b;
}

std::string gid_text(const Gid& g) {
  char b[INET6_ADDRSTRLEN];
  return inet_ntop(AF_INET6, g.raw, b, sizeof b) ? b : "?";
}

// Parses an optional unsigned parameter; false if present but not a number.
bool parse_param(const char* params, bool& given, uint32_t& value) {
  given = params && *params;
  if (!given) return true;
  char* end = nullptr;
  const unsigned long v = std::strtoul(params, &end, 0);
  value = uint32_t(v);
  return end && *end == '\0';
}

void add_u64(rte_tel_data* d, const char* name, uint64_t v) { rte_tel_data_add_dict_u64(d, name, v); }

void qp_fields(rte_tel_data* q, uint32_t dev, const transport::QpImpl& qp) {
  add_u64(q, "dev", dev);
  add_u64(q, "qpn", qp.qp_num);
  rte_tel_data_add_dict_string(q, "type", type_name(qp.qp_type));
  rte_tel_data_add_dict_string(q, "state", qp_state_str(qp.state));
  add_u64(q, "dest_qpn", qp.attr.dest_qp_num);
  add_u64(q, "path_mtu", mtu_bytes(qp.attr.path_mtu));
  add_u64(q, "sq_psn", qp.req.sq_psn);       // next PSN a new WQE gets
  add_u64(q, "next_psn", qp.req.req_psn);    // next PSN the requester sends
  add_u64(q, "una_psn", qp.comp.comp_psn);   // oldest PSN not yet acknowledged
  add_u64(q, "epsn", qp.resp.epsn);          // responder: expected PSN
  add_u64(q, "msn", qp.resp.msn);            // responder: messages completed
  add_u64(q, "outstanding_wqes", qp.sq.size());
  add_u64(q, "retry_left", qp.comp.retry_left);
  add_u64(q, "rnr_left", qp.comp.rnr_left);
  add_u64(q, "rnr_wait", qp.req.rnr_wait);
}

// Calls f(dev, ctx, qp) for each live QP (lock held).
template <typename F>
void for_each_qp(F&& f) {
  for (const Entry& e : registry().devices) {
    for (uint32_t i = 0; i < e.ctx->qps.capacity(); ++i) {
      if (const transport::QpImpl* qp = e.ctx->qps.at(i)) f(e.dev, *e.ctx, *qp);
    }
  }
}

// Adds to d a dict "<dev>_<qpn>" for each QP (of device dev only if given;
// the first kMaxQpsListed), with the fields fill(q, dev, qp) adds. 0, or
// -ENOMEM. The caller holds telemetry_mutex().
template <typename F>
int add_qp_dicts(rte_tel_data* d, bool given, uint32_t dev, F&& fill) {
  uint32_t n = 0;
  int err = 0;
  for_each_qp([&](uint32_t qdev, const Context&, const transport::QpImpl& qp) {
    if ((given && qdev != dev) || n >= kMaxQpsListed || err) return;
    rte_tel_data* q = rte_tel_data_alloc();
    if (!q) {
      err = -ENOMEM;
      return;
    }
    rte_tel_data_start_dict(q);
    fill(q, qdev, qp);
    // DPDK 22.11 takes only [A-Za-z0-9_/] in names.
    const std::string key = std::to_string(qdev) + "_" + std::to_string(qp.qp_num);
    rte_tel_data_add_dict_container(d, key.c_str(), q, 0);
    ++n;
  });
  return err;
}

int cmd_ports(const char*, const char*, rte_tel_data* d) {
  std::lock_guard lock(telemetry_mutex());
  rte_tel_data_start_dict(d);
  for (const Entry& e : registry().devices) {
    const Context& c = *e.ctx;
    rte_tel_data* p = rte_tel_data_alloc();
    if (!p) return -ENOMEM;
    rte_tel_data_start_dict(p);
    rte_tel_data_add_dict_string(p, "mac", mac_text(c.mac).c_str());
    add_u64(p, "mtu", c.io.caps().mtu);
    add_u64(p, "max_path_mtu", mtu_bytes(c.max_mtu));
    add_u64(p, "engine", c.engine_id);
    add_u64(p, "engines", c.n_engines);
    uint32_t qps = 0;
    for (uint32_t i = 0; i < c.qps.capacity(); ++i) qps += c.qps.at(i) != nullptr;
    add_u64(p, "qps", qps);
    for (uint8_t g = 0; g < net::GidTable::kSize; ++g) {
      if (const net::GidEntry* ge = c.net->gids().at(g)) {
        const std::string key = "gid" + std::to_string(g);
        rte_tel_data_add_dict_string(p, key.c_str(), gid_text(ge->gid).c_str());
      }
    }
    rte_tel_data_add_dict_container(d, std::to_string(e.dev).c_str(), p, 0);
  }
  return 0;
}

int cmd_qps(const char*, const char* params, rte_tel_data* d) {
  bool given = false;
  uint32_t dev = 0;
  if (!parse_param(params, given, dev)) return -EINVAL;
  std::lock_guard lock(telemetry_mutex());
  rte_tel_data_start_dict(d);
  return add_qp_dicts(d, given, dev, qp_fields);
}

int cmd_qp(const char*, const char* params, rte_tel_data* d) {
  // "qpn" or "dev,qpn"
  const char* comma = params ? std::strchr(params, ',') : nullptr;
  bool has_dev = comma != nullptr, given = false;
  uint32_t dev = 0, qpn = 0;
  if (has_dev) {
    const std::string dev_text(params, comma);
    if (!parse_param(dev_text.c_str(), has_dev, dev)) return -EINVAL;
  }
  if (!parse_param(comma ? comma + 1 : params, given, qpn) || !given) return -EINVAL;
  std::lock_guard lock(telemetry_mutex());
  bool found = false;
  int err = 0;
  for_each_qp([&](uint32_t qdev, const Context& c, const transport::QpImpl& qp) {
    if (qp.qp_num != qpn || (has_dev && qdev != dev) || found) return;
    found = true;
    rte_tel_data_start_dict(d);
    qp_fields(d, qdev, qp);
    // Per-QP counters (query_qp_counters), the non-zero ones, in one nested dict.
    rte_tel_data* cn = rte_tel_data_alloc();
    if (!cn) {
      err = -ENOMEM;
      return;
    }
    rte_tel_data_start_dict(cn);
    if (c.qp_counters_gen[qp.index] == c.qps.generation(qp.index)) {
      const QpCounters& qc = c.qp_counters[qp.index];
      for (size_t i = 0; i < qc.v.size(); ++i) {
        if (qc.v[i]) add_u64(cn, std::string(kCounterNames[i]).c_str(), qc.v[i]);
      }
    }
    rte_tel_data_add_dict_container(d, "counters", cn, 0);
  });
  return err ? err : found ? 0 : -ENOENT;
}

int cmd_counters(const char*, const char* params, rte_tel_data* d) {
  bool given = false;
  uint32_t dev = 0;
  if (!parse_param(params, given, dev)) return -EINVAL;
  std::lock_guard lock(telemetry_mutex());
  Counters sum;
  bool any = false;
  for (const Entry& e : registry().devices) {
    if (given && e.dev != dev) continue;
    any = true;
    for (size_t i = 0; i < size_t(Counter::kCount); ++i) sum.v[i] += e.ctx->counters.v[i];
  }
  if (given && !any) return -ENOENT;
  rte_tel_data_start_dict(d);
  for (size_t i = 0; i < size_t(Counter::kCount); ++i) add_u64(d, std::string(kCounterNames[i]).c_str(), sum.v[i]);
  return 0;
}

const char* stage_name(cc::DcqcnStage st) {
  switch (st) {
    case cc::DcqcnStage::kIdle: return "idle";
    case cc::DcqcnStage::kFastRecovery: return "fast_recovery";
    case cc::DcqcnStage::kAdditiveIncrease: return "additive_increase";
    case cc::DcqcnStage::kHyperIncrease: return "hyper_increase";
  }
  return "?";
}

// Congestion control (include/uroce/cc.h, stack/transport/qp_cc.h QpCc):
// per device ("dev<N>") the configuration and the NP/RP counters; per QP
// ("<dev>_<qpn>", first kMaxQpsListed) the algorithm's state: current and
// target rate, DCQCN's alpha and increase stage, RTT samples (TIMELY's input).
int cmd_cc(const char*, const char* params, rte_tel_data* d) {
  bool given = false;
  uint32_t dev = 0;
  if (!parse_param(params, given, dev)) return -EINVAL;
  std::lock_guard lock(telemetry_mutex());
  rte_tel_data_start_dict(d);
  for (const Entry& e : registry().devices) {
    if (given && e.dev != dev) continue;
    const Context& c = *e.ctx;
    rte_tel_data* p = rte_tel_data_alloc();
    if (!p) return -ENOMEM;
    rte_tel_data_start_dict(p);
    rte_tel_data_add_dict_string(p, "algorithm", std::string(kCcAlgorithmNames[size_t(c.cfg.cc.algorithm)]).c_str());
    add_u64(p, "line_rate_mbps", c.cfg.cc.line_rate_mbps);
    rte_tel_data_add_dict_string(p, "ecn", c.cfg.ecn ? "ECT(0)" : "Not-ECT");
    add_u64(p, "np_enabled", c.cfg.cc.np_enabled);
    add_u64(p, "dscp", c.cfg.dscp);
    for (Counter k : {Counter::rcvd_cnp, Counter::rp_cnp_handled, Counter::rp_cnp_ignored,
                      Counter::np_ecn_marked_roce_packets, Counter::np_cnp_sent, Counter::np_cnp_suppressed}) {
      add_u64(p, std::string(kCounterNames[size_t(k)]).c_str(), c.counters.get(k));
    }
    rte_tel_data_add_dict_container(d, ("dev" + std::to_string(e.dev)).c_str(), p, 0);
  }
  return add_qp_dicts(d, given, dev, [](rte_tel_data* q, uint32_t qdev, const transport::QpImpl& qp) {
    add_u64(q, "dev", qdev);
    add_u64(q, "qpn", qp.qp_num);
    const cc::CongestionControl& alg = qp.cc.algorithm();
    rte_tel_data_add_dict_string(q, "algorithm", std::string(kCcAlgorithmNames[size_t(alg.algorithm())]).c_str());
    add_u64(q, "rate_mbps", qp.cc.rate_bps() / 1'000'000);
    if (const cc::Dcqcn* dq = alg.get_if<cc::Dcqcn>()) {
      add_u64(q, "target_rate_mbps", dq->target_rate_bps() / 1'000'000);
      add_u64(q, "alpha_1024", (uint64_t(dq->alpha_q20()) * 1024) >> cc::Dcqcn::kAlphaShift);
      rte_tel_data_add_dict_string(q, "stage", stage_name(dq->stage()));
    }
    add_u64(q, "rtt_samples", qp.cc.rtt_samples());
    add_u64(q, "last_rtt_ns", qp.cc.last_rtt_ns());
  });
}

void register_commands() {
  rte_telemetry_register_cmd("/uroce/ports", cmd_ports,
                             "uroce devices: MAC, MTU, engine, QP count, GIDs. No parameters");
  rte_telemetry_register_cmd("/uroce/qps", cmd_qps,
                             "uroce QPs with state and PSNs (first 64). Parameter: device (optional)");
  rte_telemetry_register_cmd("/uroce/qp", cmd_qp, "one uroce QP and its counters. Parameters: [device,]QPN");
  rte_telemetry_register_cmd("/uroce/counters", cmd_counters,
                             "uroce device counters, summed over devices. Parameter: device (optional)");
  rte_telemetry_register_cmd("/uroce/cc", cmd_cc,
                             "uroce congestion control: per device and per QP (rate, alpha, stage). Parameter: device (optional)");
}

}  // namespace

std::mutex& telemetry_mutex() {
  static std::mutex m;
  return m;
}

void telemetry_add(Context* ctx) {
  std::lock_guard lock(telemetry_mutex());
  Registry& r = registry();
  if (!r.commands_registered) {
    register_commands();
    r.commands_registered = true;
  }
  r.devices.push_back({r.next_dev++, ctx});
}

void telemetry_remove(Context* ctx) {
  std::lock_guard lock(telemetry_mutex());
  auto& v = registry().devices;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it->ctx == ctx) {
      v.erase(it);
      return;
    }
  }
}

}  // namespace uroce
