// `uroce perf`: perftest's ib_{send,write,read,atomic}_{bw,lat} on the uroce
// stack (perf.h describes the tool and its exchange with perftest). This
// file: the per-test sequences of handshakes and runs (perftest's order),
// the banner and address lines, --json, and the command itself.
// Control path.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include <uroce/counters.h>
#include <uroce/eal.h>
#include <uroce/verbs.h>

#include "apps/commands.h"
#include "apps/common/addr_text.h"
#include "apps/common/args.h"
#include "apps/common/endpoint.h"
#include "apps/common/json_writer.h"
#include "apps/common/launch.h"
#include "apps/common/oob.h"
#include "apps/common/perf_report.h"
#include "apps/common/watchdog.h"
#include "apps/perf/perf.h"
#include "apps/perf/perf_exchange.h"
#include "apps/perf/perf_tcp.h"
#include "drivers/dpdk/eal_args.h"

namespace uroce::apps {
namespace perftest {

std::vector<uint32_t> sizes_of(const Config& cfg) {
  std::vector<uint32_t> v;
  if (cfg.all && cfg.test.verb != Verb::kAtomic) {
    for (int i = 1; i < kAllMaxPow; ++i) v.push_back(1u << i);
  } else {
    v.push_back(cfg.size);
  }
  return v;
}

namespace {

// ---------------------------------------------------------------- output

void print_dest(std::FILE* out, const char* side, const Dest& d, Verb verb) {  // ctx_print_pingpong_data
  std::fprintf(out, " %s address: LID %#04x QPN %#06x PSN %#06x", side, d.lid, d.qpn, d.psn);
  if (verb == Verb::kRead) std::fprintf(out, " OUT %#04x", d.out_reads);
  if (verb == Verb::kRead || verb == Verb::kWrite) {
    std::fprintf(out, " RKey %#08x VAddr %#016llx", d.rkey, (unsigned long long)d.vaddr);
  }
  std::fprintf(out, "\n GID: ");
  for (int i = 0; i < 16; ++i) std::fprintf(out, "%02d%s", d.gid.raw[i], i < 15 ? ":" : "\n");
}

void print_test_info(std::FILE* out, const Config& cfg, const Perf& perf) {  // ctx_print_test_info
  std::fprintf(out, "%s                    %s ", kResultLine, verb_name(cfg.test.verb));
  if (cfg.test.verb == Verb::kAtomic) std::fprintf(out, "%s ", cfg.cas ? "CMP_AND_SWAP" : "FETCH_AND_ADD");
  if (cfg.test.tst == Tst::kBw) {
    std::fprintf(out, "%sBW Test\n", cfg.duplex ? "Bidirectional " : "");
  } else {
    std::fprintf(out, "Latency Test\n");
  }
  std::fprintf(out, " Dual-port       : OFF\t\tDevice         : %s\n", perf.port_info().name.c_str());
  std::fprintf(out, " Number of qps   : %u\t\tTransport type : IB\n", cfg.num_qp);
  std::fprintf(out, " Connection type : RC\t\tUsing SRQ      : OFF\n");
  std::fprintf(out, " PCIe relax order: Unsupported\n ibv_wr* API     : OFF\n");
  if (!cfg.server || cfg.duplex) std::fprintf(out, " TX depth        : %u\n", cfg.tx_depth);
  if (cfg.test.verb == Verb::kSend && (cfg.server || cfg.duplex || cfg.test.tst == Tst::kLat)) {
    std::fprintf(out, " RX depth        : %u\n", cfg.rx_depth);
  }
  if (cfg.test.tst == Tst::kBw) std::fprintf(out, " CQ Moderation   : %u\n", cfg.cq_mod);
  std::fprintf(out, " Mtu             : %u[B]\n Link type       : Ethernet\n GID index       : %u\n", mtu_bytes(perf.curr_mtu()),
               cfg.gid_idx);
  if (cfg.test.verb == Verb::kRead || cfg.test.verb == Verb::kAtomic) {
    std::fprintf(out, " Outstand reads  : %u\n", perf.out_reads());
  } else {
    std::fprintf(out, " Max inline data : 0[B]\n");
  }
  std::fprintf(out, cfg.rdma_cm ? " rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n%s" : " rdma_cm QPs\t : OFF\n Data ex. method : Ethernet\n%s",
               kResultLine);
}

// ---------------------------------------------------------------- the test sequences

/// A bw result line: ours, or with -b ours plus the peer's (each side's
/// report exchanged, as perftest's xchg_bw_reports, then summed).
bool bw_line(Oob& oob, const Config& cfg, const BwReport& r, Output& out, std::string& err) {
  if (!cfg.duplex) {
    out.bw_line(r);
    return true;
  }
  BwReport theirs;
  if (!oob.reports(r, theirs, err)) return false;
  BwReport sum = r;
  sum.bw_peak += theirs.bw_peak;
  sum.bw_avg += theirs.bw_avg;
  sum.msg_rate += theirs.msg_rate;
  out.bw_line(sum);
  return true;
}

/// Everything after the TCP connection: versions, system data, MTU, resources,
/// the per-test handshakes and runs. False with err set.
bool run_test(Perf& perf, Oob& oob, const Config& cfg, Output& out, std::string& err) {
  const Verb verb = cfg.test.verb;
  // exchange_versions / check_version_compatibility
  char rem_version[16] = {};
  if (!oob.xchg(kVersion, rem_version, sizeof(kVersion), "the version", err)) return false;
  rem_version[15] = 0;
  if (std::atof(rem_version) < kMinPeerVersion) {
    err = "Current implementation is not compatible with versions older than 5.70 (the peer sent \"" +
          std::string(rem_version) + "\")";
    return false;
  }
  // check_sys_data: cycle buffer (page size) and cache line, big-endian; the larger wins
  const long page = sysconf(_SC_PAGESIZE);
  const uint32_t my_cycle = page > 0 ? uint32_t(page) : kDefaultPageBytes;
  uint32_t out_be = __builtin_bswap32(my_cycle), in_be = 0;
  if (!oob.xchg(&out_be, &in_be, 4, "the page size", err)) return false;
  perf.cycle_buffer = std::max(my_cycle, __builtin_bswap32(in_be));
  out_be = __builtin_bswap32(kCacheLineBytes);
  if (!oob.xchg(&out_be, &in_be, 4, "the cache line size", err)) return false;
  perf.cache_line = std::max(kCacheLineBytes, __builtin_bswap32(in_be));
  // check_mtu: the IBV_MTU code as decimal text in 2 bytes; the smaller wins
  Mtu mine = perf.port_mtu();
  if (cfg.mtu_bytes) mine = Mtu(std::countr_zero(cfg.mtu_bytes) - 7);
  char cur[2] = {char('0' + uint8_t(mine)), 0}, rem[2] = {};
  if (!oob.xchg(cur, rem, 2, "the MTU", err)) return false;
  const int rem_mtu = rem[0] - '0';
  perf.set_curr_mtu(rem_mtu >= 1 && rem_mtu <= 5 && rem_mtu < int(mine) ? Mtu(rem_mtu) : mine);

  if (cfg.rdma_cm) {  // create_rdma_cm_connection: hs, the QPs' rdma_cm connections, hs
    const CmPeer peer = cm_peer(cfg);
    if (!oob.hs_zero(err) || !perf.setup(err, &peer) || !oob.hs_zero(err)) return false;
  } else if (!perf.setup(err)) {
    return false;
  }
  // -R: rdma_cm has connected the QPs already (perftest skips ctx_connect)
  auto connect = [&] { return cfg.rdma_cm || perf.connect_qps(err); };
  print_test_info(out.info, cfg, perf);
  auto print_local = [&] {
    for (const Dest& d : perf.me()) print_dest(out.info, "local", d, verb);
  };
  auto print_remote = [&] {
    for (const Dest& d : perf.rem()) print_dest(out.info, "remote", d, verb);
  };
  const std::vector<uint32_t> sizes = sizes_of(cfg);

  if (cfg.test.tst == Tst::kBw && verb != Verb::kSend) {  // write_bw, read_bw, atomic_bw
    if (!oob.hs_all(err) || !connect()) return false;
    print_local();
    if (!oob.hs_all(err)) return false;
    print_remote();
    if (!oob.hs(0, err)) return false;  // after RTR
    out.bw_header();
    if (cfg.server && !cfg.duplex) {  // the target: waits for the client to finish, prints its report
      BwReport zero, theirs;
      if (!oob.hs(0, err) || !oob.reports(zero, theirs, err)) return false;
      out.bw_line(theirs);
      if (!oob.close(err)) return false;
      std::fprintf(out.info, "%s", kResultLine);
      return true;
    }
    BwReport last;
    for (uint32_t s : sizes) {
      if (cfg.duplex && !oob.hs(0, err)) return false;
      BwReport r;
      if (cfg.perform_warm_up && !perf.warm_up(s, err)) return false;
      if (!perf.run_bw(s, r, err)) {
        if (r.iters) out.bw_line(r);
        return false;
      }
      if (cfg.duplex && cfg.all && !oob.hs(0, err)) return false;  // perftest >= 4.6, -a -b
      if (!bw_line(oob, cfg, r, out, err)) return false;
      last = r;
    }
    std::fprintf(out.info, "%s", kResultLine);
    if (!cfg.server && !cfg.duplex) {
      BwReport theirs;
      if (!oob.hs(0, err) || !oob.reports(last, theirs, err)) return false;
    }
    return oob.close(err);
  }

  if (cfg.test.tst == Tst::kBw) {  // send_bw
    if (!oob.hs_all(err) || !connect() || !oob.hs(0, err)) return false;
    print_local();
    if (!oob.hs_all(err)) return false;
    print_remote();
    out.bw_header();
    for (uint32_t s : sizes) {
      if ((cfg.server || cfg.duplex) && !perf.post_recvs_all(s, err)) return false;
      if (!oob.hs(0, err)) return false;
      BwReport r;
      const bool ok = cfg.duplex ? perf.run_bi_send(s, r, err)
                      : cfg.server ? perf.run_bw_send_server(s, r, err)
                                   : perf.run_bw(s, r, err);
      if (!ok) {
        if (r.iters) out.bw_line(r);
        return false;
      }
      if (!bw_line(oob, cfg, r, out, err)) return false;
      if (cfg.all && !oob.hs(0, err)) return false;
    }
    std::fprintf(out.info, "%s", kResultLine);
    return oob.close(err);
  }

  if (verb == Verb::kSend) {  // send_lat
    if (!oob.hs_all(err) || !connect() || !oob.hs(0, err)) return false;
    print_local();
    if (!oob.hs_all(err)) return false;
    print_remote();
    out.lat_header();
    for (uint32_t s : sizes) {
      if (!perf.post_recvs_all(s, err) || !oob.hs(0, err)) return false;
      LatReport r;
      if (!perf.run_lat(s, r, err)) return false;
      out.lat_line(r);
    }
    std::fprintf(out.info, "%s", kResultLine);
    return oob.close(err);
  }

  // write_lat, read_lat, atomic_lat
  if (!oob.hs(0, err) || !oob.hs_all(err) || !connect()) return false;
  print_local();
  if (!oob.hs_all(err)) return false;
  print_remote();
  if (!oob.hs(0, err)) return false;  // after RTR
  if (verb != Verb::kWrite && cfg.server) {  // only the client reads
    if (!oob.close(err)) return false;
    std::fprintf(out.info, "%s", kResultLine);
    return true;
  }
  out.lat_header();
  for (uint32_t s : sizes) {
    LatReport r;
    if (!perf.run_lat(s, r, err)) return false;
    out.lat_line(r);
  }
  if (verb != Verb::kWrite && !oob.close(err)) return false;  // write_lat has no close
  std::fprintf(out.info, "%s", kResultLine);
  return true;
}

void print_json(const Config& cfg, const Output& out, bool ok, const std::string& error, const Endpoint& ep) {
  JsonWriter w;
  w.begin_object().key("command").str("perf").key("test").str(cfg.test.name);
  w.key("role").str(cfg.server ? "server" : "client").key("size").num(cfg.size).key("iters").num(cfg.iters);
  w.key("num_qp").num(cfg.num_qp).key("bidirectional").boolean(cfg.duplex).key("all").boolean(cfg.all);
  out.write_json_results(w.key("results"));
  ep.write_counters_json(w.key("counters"));
  w.key("ok").boolean(ok).key("interrupted").boolean(g_stop).key("error").str(error).end_object();
  std::printf("%s\n", w.text().c_str());
}

}  // namespace

/// The command, in perftest's namespace (cmd_perf below is its name outside).
int run(int argc, char** argv) {
  dpdk::SplitArgs split;
  Args args;
  if (auto rc = parse_endpoint_command(kPerfCommand, argc, argv, split, args)) return *rc;
  Config cfg;
  if (auto rc = read_config(args, cfg)) return *rc;
  const std::string_view test = cfg.test.name;
  Output out;
  out.info = cfg.json ? stderr : stdout;
  out.gbits = cfg.gbits;
  const char* role = cfg.server ? "server" : "client";
  for (const char* name : {"CPU-freq", "events", "inline_size", "ib-dev"}) {
    if (args.given(name)) std::fprintf(out.info, "# note: --%s is accepted for perftest compatibility and has no effect here\n", name);
  }
  if (!start_endpoint_process("perf", split)) return kExitFailure;
  std::fprintf(out.info, "# uroce perf %.*s %s\n", int(test.size()), test.data(), args.config_line().c_str());
  std::string err;
  Perf perf(cfg);
  std::optional<Oob> oob(std::in_place, perf, cfg);
  if (!oob->listen(err) || !perf.open(err)) {
    std::fprintf(stderr, "uroce perf (%s): %s\n", role, err.c_str());
    return kExitFailure;
  }
  const auto& pi = perf.port_info();
  std::fprintf(out.info, "# %.*s %s: port %s (%s) mtu %u, mac %s, gid %s, lcore %u%s%s\n", int(test.size()), test.data(), role,
               pi.name.c_str(), pi.driver.c_str(), pi.mtu, mac_str(perf.endpoint().mac()).c_str(),
               gid_str(perf.gid()).c_str(), rte_lcore_id(), cfg.ep.pcap.empty() ? "" : ", capture ", cfg.ep.pcap.c_str());
  if (cfg.server) {
    std::fprintf(out.info, "\n************************************\n* Waiting for client to connect... *\n************************************\n");
  }
  bool ok = oob->open(err) && run_test(perf, *oob, cfg, out, err);
  if (cfg.rdma_cm) {  // perftest's destroy_ctx: the QPs' connections, then the channel's
    perf.disconnect_cm(1000);
    oob->disconnect();
  }
  // Let the last ACKs and READ/atomic responses leave before the port closes.
  perf.drain(200);
  oob.reset();  // the channel (with -R its id and QP) before the capture closes
  if (!perf.endpoint().close_capture(err)) ok = false;
  if (ok && !cfg.save_buffer.empty()) ok = perf.save_buffer(cfg.save_buffer, err);
  if (cfg.json) print_json(cfg, out, ok, err, perf.endpoint());
  if (cfg.counters) perf.print_counters(out.info);
  if (!ok) {
    std::fprintf(stderr, "uroce perf (%.*s %s): %s\n", int(test.size()), test.data(), role, err.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace perftest

int cmd_perf(int argc, char** argv) { return perftest::run(argc, argv); }

}  // namespace uroce::apps
