// `uroce conform`: uroce as a deliberately deviant peer that tests another
// RoCE implementation (docs/CONFORMANCE.md). Three ways to run:
//   --target HOST:PORT  the tester: a bare port (--dev), the target helper's
//                       control channel at HOST:PORT; runs the cases
//   --serve PORT        the target helper on uroce itself (target.cc)
//   --target self       both, as two processes on a net_memif link (the self-test)
// Output: the config echo, the Markdown table; --report-dir: report.json,
// junit.xml, one pcap per case. Exit: 0 every case as wanted, 1 otherwise, 2 usage.
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <cerrno>
#include <cstring>

#include <uroce/eal.h>

#include "apps/commands.h"
#include "apps/common/addr_text.h"
#include "apps/common/args.h"
#include "apps/common/endpoint.h"
#include "apps/common/launch.h"
#include "apps/common/oob.h"
#include "apps/conform/conform.h"
#include "apps/conform/report.h"
#include "apps/conform/target.h"
#include "drivers/registry.h"

namespace uroce::apps {

namespace {

using conform::Case;
using conform::CaseResult;

constexpr OptSpec kConformOptions[] = {
    UROCE_ENDPOINT_OPTIONS,
    {.name = "target", .kind = OptKind::kString, .def = "", .help = "the target helper's control channel, or 'self': uroce on the far side of a memif link started here", .meta = "HOST:PORT|self"},
    {.name = "cases", .kind = OptKind::kString, .def = "*", .help = "the cases to run: shell patterns, comma-separated (see --list)", .meta = "PATTERN"},
    {.name = "report-dir", .kind = OptKind::kString, .def = "", .help = "write report.json, junit.xml and CASE.pcap for each case here (made if missing)", .meta = "DIR"},
    {.name = "list", .kind = OptKind::kFlag, .help = "print the cases (name, rule, expectation) and exit"},
    {.name = "wait-ms", .kind = OptKind::kUint, .def = "20", .help = "quiet period that ends the wait for the target's answer (raise it for a VM or a NIC)", .min = 1, .max = 10000},
    {.name = "answer-ms", .kind = OptKind::kUint, .def = "1000", .help = "how long to wait for an answer a case expects", .min = 1, .max = 60000},
    {.name = "timeout", .kind = OptKind::kUint, .def = "30", .help = "seconds to wait for the helper (its answers, the connection)", .min = 1, .max = 3600},
    {.name = "strict", .kind = OptKind::kFlag, .help = "a case that is not applicable fails the run too (--target self sets it)"},
    {.name = "broken", .kind = OptKind::kFlag, .help = "self-test: ask the helper for each case's broken variant of uroce; every case must deviate"},
    {.name = "serve", .kind = OptKind::kUint, .def = "0", .help = "be the target helper on uroce itself, control channel on this TCP port", .max = 65535},
    {.name = "serve-host", .kind = OptKind::kString, .def = "127.0.0.1", .help = "with --serve: the address the control channel listens on", .meta = "A.B.C.D"},
    {.name = "cc", .kind = OptKind::kChoice, .def = "dcqcn", .help = "with --serve and --target self: the uroce target's congestion control", .choices = "none|dcqcn|timely"},
    {.name = "self-test-breaks", .kind = OptKind::kFlag, .help = "with --serve: run the broken variant a case asks for (test only)"},
    {.name = "lcores", .kind = OptKind::kString, .def = "0,1", .help = "--target self: the helper's and the tester's lcore", .meta = "A,B"},
};

constexpr std::string_view kConformDetails =
    "A case sends the target frames built with the stack's encoder, each with one\n"
    "deviation, and checks its answer against the rule it cites; the verdict is\n"
    "conforms, deviates (with what was seen) or not applicable (with the reason).\n"
    "Examples:\n"
    "  uroce conform --target self                         # every case against uroce over memif\n"
    "  uroce conform --target self --broken                # each case against its broken variant\n"
    "  uroce conform -l 1 --vdev=net_memif0,role=server,socket=/tmp/c.sock -- --serve 18600 --ip 10.0.0.1 --dev net_memif0\n"
    "  uroce conform -l 2 --vdev=net_memif0,role=client,socket=/tmp/c.sock -- --target 127.0.0.1:18600 --ip 10.0.0.2 --dev net_memif0\n";

constexpr CommandSpec kConformCommand = {
    .name = "conform",
    .positional = "",
    .summary = "conformance cases: uroce as a deviant peer, the target's answers checked against the IBA rules",
    .options = kConformOptions,
    .max_positional = 0,
    .details = kConformDetails,
};

std::vector<const Case*> all_cases() {
  std::vector<const Case*> v;
  for (const auto& group : {conform::responder_cases(), conform::requester_cases(), conform::ud_cases(),
                            conform::cm_cases()}) {
    for (const Case& c : group) v.push_back(&c);
  }
  return v;
}

/// The cases whose name matches one of the comma-separated patterns.
std::vector<const Case*> select_cases(std::string_view patterns) {
  std::vector<const Case*> out;
  const auto pats = split_list(patterns);
  for (const Case* c : all_cases()) {
    const std::string name(c->name);
    for (const std::string& p : pats) {
      if (fnmatch(p.c_str(), name.c_str(), 0) == 0) {
        out.push_back(c);
        break;
      }
    }
  }
  return out;
}

int list_cases(const std::vector<const Case*>& cases) {
  std::printf("| case | group | expected | rule | broken variant (self-test) |\n|---|---|---|---|---|\n");
  for (const Case* c : cases) {
    std::printf("| %.*s | %.*s | %.*s | %.*s | %.*s |\n", int(c->name.size()), c->name.data(), int(c->group.size()),
                c->group.data(), int(c->expect.size()), c->expect.data(), int(c->rule.size()), c->rule.data(),
                int(conform::break_name(c->brk).size()), conform::break_name(c->brk).data());
  }
  return kExitOk;
}

/// --target self: the helper and the tester as two children on a memif link.
int launch_self(const Args& args, const dpdk::SplitArgs& split) {
  const std::string dir = make_temp_dir("conform");
  if (dir.empty()) return kExitFailure;
  const std::string sock = dir + "/memif.sock";
  const uint16_t port = free_tcp_port("127.0.0.1");
  const auto lcores = split_list(args.get_str("lcores"));
  if (lcores.size() != 2) return usage_error(kConformCommand, "--lcores needs two lcores, A,B");
  std::printf("# uroce conform %s\n# target: uroce over net_memif (socket %s), control channel 127.0.0.1:%u\n",
              args.config_line().c_str(), sock.c_str(), unsigned(port));
  std::fflush(stdout);
  PairLaunch pair{.tool = "conform", .sock = sock, .grace_s = int(args.get_uint("timeout")), .remove_dir = dir};
  for (int i = 0; i < 2; ++i) {
    const bool helper = i == 0;
    std::vector<std::string>& av = pair.argv[i];
    av = {"conform"};
    std::vector<std::string> eal = split.eal;
    if (eal.empty()) {
      eal = default_eal_args();
      eal.push_back("--log-level=pmd.net.memif:critical");
    }
    if (!eal_has_lcores(eal)) av.insert(av.end(), {"-l", lcores[i]});
    av.insert(av.end(), eal.begin(), eal.end());
    pair.file_prefix[i] = strf("uroce-conform-%d-%d", int(getpid()), i);
    av.push_back("--file-prefix=" + pair.file_prefix[i]);
    av.push_back("--");
    av.push_back(strf("--dev=net_memif0,role=%s,socket=%s,socket-abstract=no,mac=02:00:00:00:c0:0%d",
                      helper ? "server" : "client", sock.c_str(), i + 1));
    av.push_back(strf("--ip=10.192.0.%d", i + 1));
    av.push_back(strf("--timeout=%u", unsigned(args.get_uint("timeout"))));
    if (helper) {
      av.push_back(strf("--serve=%u", unsigned(port)));
      av.push_back("--cc=" + std::string(args.get_str("cc")));
      if (args.flag("broken")) av.push_back("--self-test-breaks");
    } else {
      av.push_back(strf("--target=127.0.0.1:%u", unsigned(port)));
      av.push_back("--cases=" + std::string(args.get_str("cases")));
      av.push_back(strf("--wait-ms=%u", unsigned(args.get_uint("wait-ms"))));
      av.push_back(strf("--answer-ms=%u", unsigned(args.get_uint("answer-ms"))));
      if (args.given("report-dir")) av.push_back("--report-dir=" + std::string(args.get_str("report-dir")));
      if (args.given("pcap")) av.push_back("--pcap=" + std::string(args.get_str("pcap")));
      if (args.flag("broken")) av.push_back("--broken");
      av.push_back("--strict");
    }
  }
  return run_pair(pair);
}

int run_tester(const Args& args, const dpdk::SplitArgs& split, const std::vector<const Case*>& cases) {
  const std::string target(args.get_str("target"));
  const size_t colon = target.rfind(':');
  const auto tport = colon == std::string::npos ? std::nullopt : parse_uint(target.substr(colon + 1));
  if (!tport || *tport == 0 || *tport > 65535) {
    return usage_error(kConformCommand, "--target must be HOST:PORT or self, not '" + target + "'");
  }
  const std::string host = target.substr(0, colon);
  EndpointConfig ec;
  if (std::string e = read_endpoint_options(args, 0, "--ip", ec); !e.empty()) return usage_error(kConformCommand, e);
  const std::string report_dir(args.get_str("report-dir"));
  if (!report_dir.empty() && mkdir(report_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "uroce conform: %s: %s\n", report_dir.c_str(), std::strerror(errno));
    return kExitFailure;
  }
  if (!start_endpoint_process("conform", split)) return kExitFailure;
  std::printf("# uroce conform %s\n", args.config_line().c_str());

  drivers::IoConfig pc;
  pc.device = ec.dev;
  pc.mtu = ec.port_mtu;
  pc.mac = ec.addrs.mac;
  pc.link_timeout_ms = uint32_t(args.get_uint("timeout")) * 1000;
  pc.pcap_path = ec.pcap;
  auto port = drivers::make_packet_io("dpdk", pc);
  if (!port.ok()) {
    std::fprintf(stderr, "uroce conform: port '%s': %s\n", ec.dev.c_str(), port.status().message());
    return kExitFailure;
  }
  TcpChannel ch(&g_stop);
  std::string err;
  if (!ch.connect_to(host, uint16_t(*tport), uint32_t(args.get_uint("timeout")), err)) {
    std::fprintf(stderr, "uroce conform: target helper %s: %s\n", target.c_str(), err.c_str());
    return kExitFailure;
  }
  conform::RunInfo info{.target = target, .broken = args.flag("broken"), .strict = args.flag("strict"), .wait_ms = uint32_t(args.get_uint("wait-ms"))};
  conform::Tester tester({.port = port->get(), .helper = &ch, .gid = *ec.addrs.gid4, .wait_ms = info.wait_ms,
                          .answer_ms = uint32_t(args.get_uint("answer-ms")),
                          .timeout_s = uint32_t(args.get_uint("timeout"))});
  std::vector<CaseResult> results;
  for (uint32_t i = 0; i < cases.size() && !g_stop; ++i) {
    const Case& c = *cases[i];
    const std::string pcap = report_dir.empty() ? "" : report_dir + "/" + std::string(c.name) + ".pcap";
    results.push_back(tester.run_case(c, i, info.broken ? c.brk : conform::Break::kNone, pcap));
    const CaseResult& r = results.back();
    std::printf("# %-36.*s %s (%.0f ms)\n", int(c.name.size()), c.name.data(),
                std::string(conform::verdict_name(r.out.verdict)).c_str(), r.ms);
  }
  tester.quit();
  conform::write_markdown(stdout, info, results);
  bool ok = !g_stop && results.size() == cases.size();
  for (const CaseResult& r : results) ok = ok && conform::passes(info, r);
  if (!report_dir.empty()) {
    ok = write_text_file("conform", report_dir + "/report.json",
                         [&](std::FILE* f) { std::fputs(conform::json_report(info, results).c_str(), f); }) && ok;
    ok = write_text_file("conform", report_dir + "/junit.xml",
                         [&](std::FILE* f) { std::fputs(conform::junit_report(info, results).c_str(), f); }) && ok;
  }
  if (Status s = (*port)->stop_capture(); !s.ok()) {
    std::fprintf(stderr, "uroce conform: --pcap: %s\n", s.message());
    ok = false;
  }
  return ok ? kExitOk : kExitFailure;
}

}  // namespace

int cmd_conform(int argc, char** argv) {
  dpdk::SplitArgs split;
  Args args;
  if (auto rc = parse_endpoint_command(kConformCommand, argc, argv, split, args)) return *rc;
  const auto cases = select_cases(args.get_str("cases"));
  if (cases.empty()) return usage_error(kConformCommand, "no case matches --cases '" + std::string(args.get_str("cases")) + "'");
  if (args.flag("list")) return list_cases(cases);
  const bool serving = args.get_uint("serve") != 0;
  const std::string_view target = args.get_str("target");
  if (serving == !target.empty()) return usage_error(kConformCommand, "give one of --target and --serve");
  if (args.flag("self-test-breaks") && !serving) return usage_error(kConformCommand, "--self-test-breaks goes with --serve");
  if (target == "self") return launch_self(args, split);
  if (!serving) return run_tester(args, split, cases);

  conform::ServeConfig sc;
  if (std::string e = read_endpoint_options(args, 0, "--ip", sc.endpoint); !e.empty()) {
    return usage_error(kConformCommand, e);
  }
  sc.endpoint.timeout_s = uint32_t(args.get_uint("timeout"));
  sc.host = std::string(args.get_str("serve-host"));
  sc.port = uint16_t(args.get_uint("serve"));
  sc.timeout_s = uint32_t(args.get_uint("timeout"));
  sc.breaks = args.flag("self-test-breaks");
  for (size_t i = 0; i < std::size(kCcAlgorithmNames); ++i) {
    if (kCcAlgorithmNames[i] == args.get_str("cc")) sc.endpoint.cc = CcAlgorithm(i);
  }
  if (!start_endpoint_process("conform", split)) return kExitFailure;
  return conform::serve(sc);
}

}  // namespace uroce::apps
