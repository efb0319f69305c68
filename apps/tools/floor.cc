// `uroce floor`: the raw frame floor under the stack, two processes on one
// rte_ethdev link (net_memif for `uroce compare`) moving bare Ethernet frames
// with no protocol work at all, so the stack's figures have the cost of the
// link itself beside them (docs/PERFORMANCE.md):
//   pingpong  the client sends one --size frame and waits for the server to
//             bounce it, -n times; perftest's latency statistics of the
//             post-to-post time halved (apps/perf_report), as `uroce perf
//             write_lat` reports them
//   blast     the client sends --size frames for --seconds in bursts of 32
//             (allocate, copy a template, tx_burst: the least a sender that
//             builds frames does); the server counts what arrives and reports
//             the frame rate between the first and the last frame
// The frames carry EtherType 0x88b5 (IEEE 802 local experimental), a kind and
// a sequence number after the Ethernet header. The client ends a run with an
// END frame. One endpoint per process (--role server|client, --dev SPEC);
// `uroce compare` starts the pair on a memif socket.
//
// Usage: uroce floor [EAL args --] pingpong|blast --role R --dev SPEC [options]
// Output: the config echo and a perf-style row; --json: one JSON object on
// stdout. Exit: 0 ok, 1 failure or interrupted, 2 usage.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <uroce/eal.h>

#include "apps/commands.h"
#include "apps/common/args.h"
#include "apps/common/endpoint.h"
#include "apps/common/json_writer.h"
#include "apps/common/launch.h"
#include "apps/common/perf_report.h"
#include "apps/common/watchdog.h"
#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/eal_args.h"

namespace uroce::apps {
namespace {

constexpr OptSpec kFloorOptions[] = {
    {.name = "role", .kind = OptKind::kChoice, .def = "client", .help = "this endpoint: the server bounces or counts, the client drives", .choices = "server|client"},
    {.name = "dev", .kind = OptKind::kString, .def = "", .help = "the port: an EAL device spec (net_memif0,role=server,socket=...)", .meta = "SPEC"},
    {.name = "size", .short_name = 's', .kind = OptKind::kUint, .def = "64", .help = "frame bytes, Ethernet header included (FCS not counted)", .min = 60, .max = 9000},
    {.name = "iters", .short_name = 'n', .kind = OptKind::kUint, .def = "10000", .help = "pingpong: round trips", .min = 5, .max = 100'000'000},
    {.name = "seconds", .kind = OptKind::kDouble, .def = "2", .help = "blast: how long the client sends", .min = 0, .max = 3600},
    {.name = "port-mtu", .kind = OptKind::kUint, .def = "1500", .help = "Ethernet MTU to set on the port", .min = 576, .max = 9600},
    {.name = "timeout", .kind = OptKind::kUint, .def = "60", .help = "seconds to wait for the peer and for progress", .min = 1, .max = 3600},
    {.name = "json", .help = "write the result as JSON on stdout (everything else goes to stderr)"},
};

constexpr CommandSpec kFloorCommand = {
    .name = "floor",
    .positional = "pingpong|blast",
    .summary = "the raw frame floor: bare frames bounced or blasted between two processes, no protocol",
    .options = kFloorOptions,
    .min_positional = 1,
    .max_positional = 1,
    .details = "EAL arguments go before a '--'; without one EAL gets --no-huge --no-pci --no-shconf -m 512.\n"
               "pingpong --json keys: mode, role, frame_bytes, results[] (perf's lat row, usec);\n"
               "blast: mode, role, frame_bytes, frames, seconds, mpps (server: received; client: sent).\n",
};

constexpr uint16_t kEtherTypeLocal = 0x88b5;
enum class Kind : uint8_t { kData = 1, kEnd = 2 };
struct [[gnu::packed]] FloorHdr {
  uint8_t kind;
  uint32_t seq;
};
constexpr size_t kEthHdr = 14;

const FloorHdr* hdr_of(const rte_mbuf* m) {
  return m->data_len >= kEthHdr + sizeof(FloorHdr) ? rte_pktmbuf_mtod_offset(m, const FloorHdr*, kEthHdr) : nullptr;
}

/// A frame of `size` bytes from the template, with kind and seq set. nullptr if the pool is empty.
rte_mbuf* make_frame(dpdk::DpdkQueue& q, const uint8_t* tmpl, uint16_t size, Kind kind, uint32_t seq) {
  rte_mbuf* m = rte_pktmbuf_alloc(q.tx_pool());
  if (m == nullptr) return nullptr;
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, size));
  std::memcpy(p, tmpl, size);
  const FloorHdr h{uint8_t(kind), seq};
  std::memcpy(p + kEthHdr, &h, sizeof(h));
  return m;
}

struct Run {
  dpdk::DpdkQueue& q;
  bool server;
  uint16_t size;
  uint32_t timeout_s;
  alignas(64) uint8_t tmpl[9000 + 64] = {};

  bool send(rte_mbuf* m, std::string& err) {
    Watchdog dog(timeout_s);
    while (q.tx_burst(&m, 1) == 0) {
      if (dog.stalled(false, err)) {
        rte_pktmbuf_free(m);
        return false;
      }
    }
    return true;
  }
};

bool pingpong(Run& r, uint32_t iters, LatReport& rep, std::string& err) {
  rte_mbuf* rx[dpdk::kBurstSize];
  Watchdog dog(r.timeout_s);
  if (r.server) {
    for (;;) {
      const uint16_t n = r.q.rx_burst(rx, dpdk::kBurstSize);
      if (dog.stalled(n > 0, err)) return false;
      if (n == 0) continue;
      uint16_t keep = 0;
      bool end = false;
      for (uint16_t i = 0; i < n; ++i) {
        const FloorHdr* h = hdr_of(rx[i]);
        if (h != nullptr && h->kind == uint8_t(Kind::kEnd)) {
          end = true;
          rte_pktmbuf_free(rx[i]);
        } else {
          rx[keep++] = rx[i];
        }
      }
      for (uint16_t done = 0; done < keep;) done += r.q.tx_burst(rx + done, uint16_t(keep - done));
      if (end) return true;
    }
  }
  std::vector<uint64_t> tposted(iters);
  for (uint32_t i = 0; i < iters; ++i) {
    rte_mbuf* m = make_frame(r.q, r.tmpl, r.size, Kind::kData, i);
    if (m == nullptr) {
      err = "mbuf pool empty";
      return false;
    }
    tposted[i] = rte_rdtsc();
    if (!r.send(m, err)) return false;
    for (bool got = false; !got;) {
      const uint16_t n = r.q.rx_burst(rx, dpdk::kBurstSize);
      for (uint16_t k = 0; k < n; ++k) {
        const FloorHdr* h = hdr_of(rx[k]);
        got = got || (h != nullptr && h->seq == i);
      }
      if (n) rte_pktmbuf_free_bulk(rx, n);
      if (dog.stalled(got, err)) return false;
    }
  }
  rep = lat_report(r.size, tposted, 2.0 * double(rte_get_tsc_hz()) / 1e6);
  rte_mbuf* end = make_frame(r.q, r.tmpl, r.size, Kind::kEnd, 0);
  return end != nullptr && r.send(end, err);
}

struct BlastResult {
  uint64_t frames = 0;
  double seconds = 0;
};

bool blast(Run& r, double seconds, BlastResult& res, std::string& err) {
  rte_mbuf* b[dpdk::kBurstSize];
  const double hz = double(rte_get_tsc_hz());
  if (r.server) {
    uint64_t t_first = 0, t_last = 0;
    Watchdog dog(r.timeout_s);
    for (bool end = false; !end;) {
      const uint16_t n = r.q.rx_burst(b, dpdk::kBurstSize);
      if (dog.stalled(n > 0, err)) return false;
      if (n == 0) continue;
      const uint64_t now = rte_rdtsc();  // the rate is timed from the first burst to the last
      for (uint16_t i = 0; i < n; ++i) {
        const FloorHdr* h = hdr_of(b[i]);
        if (h != nullptr && h->kind == uint8_t(Kind::kEnd)) {
          end = true;
        } else {
          if (res.frames++ == 0) t_first = now;
          t_last = now;
        }
      }
      rte_pktmbuf_free_bulk(b, n);
    }
    res.seconds = double(t_last - t_first) / hz;
    return res.frames > 1;
  }
  const uint64_t t0 = rte_rdtsc();
  const uint64_t t_end = t0 + uint64_t(seconds * hz);
  uint64_t t = t0;
  while (!g_stop && (t = rte_rdtsc()) < t_end) {
    if (rte_pktmbuf_alloc_bulk(r.q.tx_pool(), b, dpdk::kBurstSize) != 0) continue;
    for (uint16_t i = 0; i < dpdk::kBurstSize; ++i) {
      std::memcpy(rte_pktmbuf_append(b[i], r.size), r.tmpl, r.size);
    }
    const uint16_t ok = r.q.tx_burst(b, dpdk::kBurstSize);
    if (ok < dpdk::kBurstSize) rte_pktmbuf_free_bulk(b + ok, dpdk::kBurstSize - ok);
    res.frames += ok;
  }
  res.seconds = double(t - t0) / hz;
  rte_delay_ms(50);  // let the server drain before it is told to stop
  rte_mbuf* end = make_frame(r.q, r.tmpl, r.size, Kind::kEnd, 0);
  return end != nullptr && r.send(end, err) && !g_stop;
}

}  // namespace

int cmd_floor(int argc, char** argv) {
  dpdk::SplitArgs split;
  Args args;
  if (auto rc = parse_endpoint_command(kFloorCommand, argc, argv, split, args)) return *rc;
  const std::string mode(args.positional()[0]);
  if (mode != "pingpong" && mode != "blast") {
    return usage_error(kFloorCommand, strf("unknown mode '%s'", mode.c_str()));
  }
  if (args.get_str("dev").empty()) {
    return usage_error(kFloorCommand, "--dev SPEC is needed");
  }
  const bool server = args.get_str("role") == "server";
  const bool json = args.flag("json");
  std::FILE* info = json ? stderr : stdout;
  if (!start_endpoint_process("floor", split)) return kExitFailure;
  std::fprintf(info, "# uroce floor %s %s\n", mode.c_str(), args.config_line().c_str());
  std::string err;
  bool ok = false;
  Output out;
  out.info = info;
  BlastResult br;
  {
    dpdk::DpdkPortConfig pc;
    pc.device = std::string(args.get_str("dev"));
    pc.mtu = uint16_t(args.get_uint("port-mtu"));
    pc.link_timeout_ms = uint32_t(args.get_uint("timeout")) * 1000;
    pc.promiscuous = true;
    auto port = dpdk::DpdkPort::open(pc);
    if (!port.ok()) {
      std::fprintf(stderr, "uroce floor: port '%s': %s\n", pc.device.c_str(), port.status().message());
      rte_eal_cleanup();
      return kExitFailure;
    }
    const uint16_t size = uint16_t(args.get_uint("size"));
    if (size > (*port)->info().mtu + kEthHdr) {
      std::fprintf(stderr, "uroce floor: --size %u is larger than the port's MTU %u + 14\n", size, (*port)->info().mtu);
      return kExitUsage;
    }
    Run r{.q = (*port)->queue(0), .server = server, .size = size,
          .timeout_s = uint32_t(args.get_uint("timeout"))};
    static constexpr uint8_t kBroadcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    std::memcpy(r.tmpl, kBroadcast, 6);
    std::memcpy(r.tmpl + 6, r.q.mac().b, 6);
    r.tmpl[12] = uint8_t(kEtherTypeLocal >> 8);
    r.tmpl[13] = uint8_t(kEtherTypeLocal);
    if (mode == "pingpong") {
      LatReport rep;
      ok = pingpong(r, uint32_t(args.get_uint("iters")), rep, err);
      if (ok && !server) {
        out.lat_header();
        out.lat_line(rep);
        std::fprintf(info, "%s", kResultLine);
      }
    } else {
      ok = blast(r, args.get_double("seconds"), br, err);
      if (ok) {
        std::fprintf(info, " frame bytes %u, %s %llu frames in %.3f s: %.3f Mframes/s\n", size,
                     server ? "received" : "sent", (unsigned long long)br.frames, br.seconds,
                     br.seconds > 0 ? double(br.frames) / br.seconds / 1e6 : 0.0);
      }
    }
    (*port)->close();
  }
  if (json) {
    JsonWriter w;
    w.begin_object().key("command").str("floor").key("mode").str(mode).key("role").str(server ? "server" : "client");
    w.key("frame_bytes").num(args.get_uint("size"));
    if (mode == "pingpong") {
      out.write_json_results(w.key("results"));
    } else {
      w.key("frames").num(br.frames).key("seconds").fixed(br.seconds, 6);
      w.key("mpps").fixed(br.seconds > 0 ? double(br.frames) / br.seconds / 1e6 : 0.0, 6);
    }
    w.key("ok").boolean(ok).key("error").str(err).end_object();
    std::printf("%s\n", w.text().c_str());
  }
  rte_eal_cleanup();
  if (!ok) {
    std::fprintf(stderr, "uroce floor (%s %s): %s\n", mode.c_str(), server ? "server" : "client", err.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace uroce::apps
