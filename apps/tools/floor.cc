// `uroce floor`: the raw frame floor under the stack, two processes on one
// rte_ethdev link (net_memif for `uroce compare`) moving bare Ethernet frames
// with no protocol work at all, so the stack's figures have the cost of the
// link itself beside them (docs/PERFORMANCE.md). A message is
//   one frame   (--size BYTES, the default): a frame of --size bytes built
//               from a template; the server bounces the frame itself. This is
//               the floor of the figures before issue 20 (`compare`'s
//               floor-1frame)
//   N frames    (--message BYTES): a payload of BYTES in N = ceil(BYTES /
//               --mtu) frames of --mtu payload bytes (the last one the rest)
//               plus --overhead bytes of headers and trailer, the frames the
//               stack sends at that path MTU. Each side copies the payload
//               once a frame, as a stack must: out of its user buffer into each
//               frame it builds, and out of each frame it receives into its
//               user buffer at the frame's offset. The server bounces a message
//               from its buffer once all its frames are in, as perftest's
//               write_lat answers once the last byte has landed (`compare`'s
//               floor)
// Modes:
//   pingpong  the client sends a message and waits for the whole of it to
//             come back, -n times; perftest's latency statistics of the
//             post-to-post time halved (apps/perf_report), as `uroce perf
//             write_lat` reports them
//   blast     the client sends messages back to back for --seconds; the
//             server copies and counts what arrives and reports the frame and
//             message rates between the first frame and the last
// A sender builds at most --burst frames (allocate, copy, tx_burst: the least
// a sender that builds frames does), one message's or several, then hands
// them to the port, and offers what the port refuses again until it takes it.
// The frames carry EtherType 0x88b5 (IEEE 802 local experimental), a kind,
// the message's number and the frame's index in it after the Ethernet header.
// A frame out of its order or not of the run's shape is an error, and so is
// a payload that differs from what was sent, with --check: the client stamps
// each frame's slice of its buffer with the message and frame numbers before
// it builds the frame; the pingpong client compares what comes back, the
// blast server each message it receives. The client ends a run with an END
// frame. One endpoint per process (--role server|client, --dev SPEC);
// `uroce compare` starts the pair on a memif socket.
//
// Usage: uroce floor [EAL args --] pingpong|blast --role R --dev SPEC [options]
// Output: the config echo and a perf-style row; --json: one JSON object on
// stdout. Exit: 0 ok, 1 failure or interrupted, 2 usage.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
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
    {.name = "size", .short_name = 's', .kind = OptKind::kUint, .def = "64", .help = "single-frame messages: frame bytes, Ethernet header included (FCS not counted)", .min = 60, .max = 9000},
    {.name = "message", .kind = OptKind::kUint, .def = "0", .help = "messages of this many payload bytes in ceil(BYTES / --mtu) frames, copied in and out of user buffers (0: single frames of --size)", .max = 8388608, .meta = "BYTES"},
    {.name = "mtu", .kind = OptKind::kUint, .def = "4096", .help = "--message: payload bytes a frame (the path MTU)", .min = 64, .max = 9000},
    {.name = "overhead", .kind = OptKind::kUint, .def = "74", .help = "--message: bytes a frame adds to its payload (74: a RoCEv2 WRITE's Ethernet, IPv4, UDP, BTH, RETH and ICRC)", .min = 64, .max = 256},
    {.name = "burst", .kind = OptKind::kUint, .def = "32", .help = "frames built before each tx_burst", .min = 1, .max = 32},
    {.name = "iters", .short_name = 'n', .kind = OptKind::kUint, .def = "10000", .help = "pingpong: round trips", .min = 5, .max = 100'000'000},
    {.name = "seconds", .kind = OptKind::kDouble, .def = "2", .help = "blast: how long the client sends", .min = 0, .max = 3600},
    {.name = "check", .help = "stamp every message and compare the payload that arrives (pingpong: the client; blast: the server)"},
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
               "Both ends need the same --size, or the same --message, --mtu and --overhead.\n"
               "--json keys, both modes: mode, role, frame_bytes (a message's first frame), message_bytes (0: single\n"
               "frames), frames_per_message, frames (data frames received; blast client: sent), messages,\n"
               "checked, payload_errors; pingpong: results[] (perf's lat row, usec); blast: seconds, mpps\n"
               "(frames), msg_rate (Mmsg/s) (server: received; client: sent).\n",
};

constexpr uint16_t kEtherTypeLocal = 0x88b5;
enum class Kind : uint8_t { kData = 1, kEnd = 2 };
struct [[gnu::packed]] FloorHdr {
  uint8_t kind;
  uint32_t seq;    ///< the message's number
  uint32_t frame;  ///< the frame's index in its message
};
constexpr size_t kEthHdr = 14;
constexpr uint32_t kIcrcBytes = 4;  // the trailer of a multi-frame message's frames

/// What a message is on the wire.
struct Shape {
  uint32_t frames = 1;  ///< frames a message
  uint32_t hdr = 0;     ///< template bytes each frame starts with (its headers)
  uint32_t tail = 0;    ///< zero bytes after the payload
  uint32_t mtu = 0;     ///< payload bytes of every frame but the last
  uint32_t bytes = 0;   ///< payload bytes of a message; 0: the single-frame floor

  uint32_t payload(uint32_t i) const { return i + 1 < frames ? mtu : bytes - mtu * (frames - 1); }
  uint32_t frame_bytes(uint32_t i) const { return hdr + payload(i) + tail; }
};

/// The payload every sender's buffer starts with, and what --check expects.
void fill_pattern(std::vector<uint8_t>& buf) {
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = uint8_t(i * 131 + (i >> 8) + 17);
}

/// --check: message seq's stamp, the message and frame numbers at the start of each frame's slice.
void stamp(const Shape& s, std::vector<uint8_t>& buf, uint32_t seq) {
  for (uint32_t i = 0; i < s.frames; ++i) {
    const uint64_t v = uint64_t(seq) << 32 | i;
    std::memcpy(buf.data() + size_t(i) * s.mtu, &v, std::min<size_t>(sizeof(v), s.payload(i)));
  }
}

/// The next frame a sender builds.
struct Cursor {
  uint32_t seq = 0;
  uint32_t frame = 0;
};

struct Run {
  dpdk::DpdkQueue& q;
  bool server;
  Shape shape;
  uint16_t burst;
  bool check;
  uint32_t timeout_s;
  alignas(64) uint8_t tmpl[9000 + 64] = {};
  std::vector<uint8_t> tx_buf, rx_buf, expect;  ///< the user buffers, shape.bytes each
  uint64_t frames = 0;                           ///< data frames received (blast client: sent)
  uint64_t messages = 0;                         ///< whole messages received (blast client: sent)
  uint64_t payload_errors = 0;                   ///< --check: messages that arrived other than sent

  /// Writes frame c of a message into m: the template's headers, the header
  /// fields, the frame's slice of buf (one copy), the zero trailer.
  void fill(rte_mbuf* m, Kind kind, Cursor c, const uint8_t* buf) const {
    const uint32_t len = kind == Kind::kData ? shape.payload(c.frame) : 0;
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, uint16_t(shape.hdr + len + shape.tail)));
    std::memcpy(p, tmpl, shape.hdr);
    const FloorHdr h{uint8_t(kind), c.seq, c.frame};
    std::memcpy(p + kEthHdr, &h, sizeof(h));
    if (len != 0) std::memcpy(p + shape.hdr, buf + size_t(c.frame) * shape.mtu, len);
    std::memset(p + shape.hdr + len, 0, shape.tail);
  }

  /// Hands n frames to the port, offering what it refuses again. False, with
  /// err set, if it stalls for the timeout or is interrupted (the rest freed).
  bool tx_all(rte_mbuf** b, uint16_t n, std::string& err) {
    Watchdog dog(timeout_s);
    for (uint16_t done = 0; done < n;) {
      const uint16_t k = q.tx_burst(b + done, uint16_t(n - done));
      done = uint16_t(done + k);
      if (done < n && dog.stalled(k > 0, err)) {
        rte_pktmbuf_free_bulk(b + done, n - done);
        return false;
      }
    }
    return true;
  }

  /// Builds n <= burst data frames from c on out of buf and sends them; c
  /// moves past them. The client stamps a message (--check) before its first frame.
  bool send_frames(Cursor& c, uint16_t n, std::vector<uint8_t>& buf, std::string& err) {
    rte_mbuf* b[dpdk::kBurstSize];
    if (rte_pktmbuf_alloc_bulk(q.tx_pool(), b, n) != 0) {
      err = "mbuf pool empty";
      return false;
    }
    for (uint16_t i = 0; i < n; ++i) {
      if (check && !server && c.frame == 0) stamp(shape, buf, c.seq);
      fill(b[i], Kind::kData, c, buf.data());
      if (++c.frame == shape.frames) c = Cursor{c.seq + 1, 0};
    }
    return tx_all(b, n, err);
  }

  /// Message seq, every frame of it, out of buf.
  bool send_message(uint32_t seq, std::vector<uint8_t>& buf, std::string& err) {
    Cursor c{seq, 0};
    for (uint32_t left = shape.frames; left > 0;) {
      const uint16_t n = uint16_t(std::min<uint32_t>(left, burst));
      if (!send_frames(c, n, buf, err)) return false;
      left -= n;
    }
    return true;
  }

  bool send_end(std::string& err) {
    rte_mbuf* m = rte_pktmbuf_alloc(q.tx_pool());
    if (m == nullptr) {
      err = "mbuf pool empty";
      return false;
    }
    fill(m, Kind::kEnd, Cursor{}, nullptr);
    return tx_all(&m, 1, err);
  }

  /// m's header if it is an END frame or a data frame of this run's shape;
  /// otherwise nullopt, with err set.
  std::optional<FloorHdr> parse(const rte_mbuf* m, std::string& err) const {
    FloorHdr h{};
    if (m->data_len < kEthHdr + sizeof(h)) {
      err = strf("a %u-byte frame, too short for the floor's header", m->data_len);
      return std::nullopt;
    }
    std::memcpy(&h, rte_pktmbuf_mtod_offset(m, const uint8_t*, kEthHdr), sizeof(h));
    if (h.kind == uint8_t(Kind::kEnd)) return h;
    if (h.kind != uint8_t(Kind::kData) || h.frame >= shape.frames || m->data_len != shape.frame_bytes(h.frame) ||
        m->nb_segs != 1) {
      err = strf("a frame not of this run's shape: kind %u, frame %u of %u, %u bytes (%u segments)", h.kind, h.frame,
                 shape.frames, m->data_len, m->nb_segs);
      return std::nullopt;
    }
    return h;
  }

  /// Copies data frame h's payload into buf at the frame's offset (one copy).
  void take(const rte_mbuf* m, const FloorHdr& h, std::vector<uint8_t>& buf) {
    const uint32_t len = shape.payload(h.frame);
    if (len != 0) {
      std::memcpy(buf.data() + size_t(h.frame) * shape.mtu, rte_pktmbuf_mtod_offset(m, const uint8_t*, shape.hdr), len);
    }
    ++frames;
  }

  /// --check: buf against what the client sent as message seq; buf is cleared for the next.
  void verify(std::vector<uint8_t>& buf, const std::vector<uint8_t>& sent) {
    if (std::memcmp(buf.data(), sent.data(), buf.size()) != 0) ++payload_errors;
    std::fill(buf.begin(), buf.end(), uint8_t(0));
  }
};

bool pingpong(Run& r, uint32_t iters, LatReport& rep, std::string& err) {
  rte_mbuf* rx[dpdk::kBurstSize];
  Watchdog dog(r.timeout_s);
  if (r.server) {
    uint32_t got = 0;  // frames of the message coming in
    for (;;) {
      const uint16_t n = r.q.rx_burst(rx, dpdk::kBurstSize);
      if (dog.stalled(n > 0, err)) return false;
      uint16_t keep = 0;  // the single-frame floor's frames, bounced as they are
      bool ok = true, end = false;
      for (uint16_t i = 0; i < n; ++i) {
        const auto h = ok && !end ? r.parse(rx[i], err) : std::nullopt;
        if (!h) {
          ok = ok && end;
        } else if (h->kind == uint8_t(Kind::kEnd)) {
          end = true;
        } else if (r.shape.bytes == 0) {
          ++r.frames;
          ++r.messages;
          rx[keep++] = rx[i];
          continue;
        } else {
          r.take(rx[i], *h, r.rx_buf);
          if (++got == r.shape.frames) {
            got = 0;
            ++r.messages;
            ok = r.send_message(h->seq, r.rx_buf, err);
          }
        }
        rte_pktmbuf_free(rx[i]);
      }
      if (!r.tx_all(rx, keep, err) || !ok) return false;
      if (end) return true;
    }
  }
  std::vector<uint64_t> tposted(iters);
  for (uint32_t i = 0; i < iters; ++i) {
    tposted[i] = rte_rdtsc();
    if (!r.send_message(i, r.tx_buf, err)) return false;
    for (uint32_t got = 0; got < r.shape.frames;) {
      const uint16_t n = r.q.rx_burst(rx, dpdk::kBurstSize);
      bool ok = true;
      for (uint16_t k = 0; k < n && ok; ++k) {
        const auto h = r.parse(rx[k], err);
        ok = h && h->kind == uint8_t(Kind::kData) && h->seq == i;
        if (h && !ok) err = strf("frame %u of message %u while waiting for message %u", h->frame, h->seq, i);
        if (ok) {
          r.take(rx[k], *h, r.rx_buf);
          ++got;
        }
      }
      if (n) rte_pktmbuf_free_bulk(rx, n);
      if (!ok || dog.stalled(n > 0, err)) return false;
    }
    ++r.messages;
    if (r.check) r.verify(r.rx_buf, r.tx_buf);
  }
  rep = lat_report(r.shape.bytes ? r.shape.bytes : r.shape.hdr, tposted, 2.0 * double(rte_get_tsc_hz()) / 1e6);
  return r.send_end(err);
}

bool blast(Run& r, double seconds, double& secs, std::string& err) {
  const double hz = double(rte_get_tsc_hz());
  if (r.server) {
    rte_mbuf* b[dpdk::kBurstSize];
    uint64_t t_first = 0, t_last = 0;
    Cursor next;  // memif keeps the order, and the client offers refused frames again: no gaps
    Watchdog dog(r.timeout_s);
    for (bool end = false; !end;) {
      const uint16_t n = r.q.rx_burst(b, dpdk::kBurstSize);
      if (dog.stalled(n > 0, err)) return false;
      if (n == 0) continue;
      const uint64_t now = rte_rdtsc();  // the rate is timed from the first burst to the last
      bool ok = true;
      for (uint16_t i = 0; i < n && ok && !end; ++i) {
        const auto h = r.parse(b[i], err);
        ok = h.has_value();
        if (!ok) break;
        if (h->kind == uint8_t(Kind::kEnd)) {
          end = true;
          break;
        }
        if (h->seq != next.seq || h->frame != next.frame) {
          err = strf("frame %u of message %u where frame %u of message %u was next", h->frame, h->seq, next.frame, next.seq);
          ok = false;
          break;
        }
        r.take(b[i], *h, r.rx_buf);
        if (r.frames == 1) t_first = now;
        t_last = now;
        if (++next.frame == r.shape.frames) {
          ++r.messages;
          if (r.check) {
            stamp(r.shape, r.expect, next.seq);
            r.verify(r.rx_buf, r.expect);
          }
          next = Cursor{next.seq + 1, 0};
        }
      }
      rte_pktmbuf_free_bulk(b, n);
      if (!ok) return false;
    }
    secs = double(t_last - t_first) / hz;
    if (r.frames < 2) err = "fewer than 2 frames arrived";
    return r.frames > 1;
  }
  const uint64_t t0 = rte_rdtsc();
  const uint64_t t_end = t0 + uint64_t(seconds * hz);
  uint64_t t = t0;
  Cursor c;
  while (!g_stop && (t = rte_rdtsc()) < t_end) {
    if (!r.send_frames(c, r.burst, r.tx_buf, err)) return false;
  }
  // The last message whole, so the server's count ends on a message.
  while (!g_stop && c.frame != 0) {
    if (!r.send_frames(c, uint16_t(std::min<uint32_t>(r.burst, r.shape.frames - c.frame)), r.tx_buf, err)) return false;
  }
  r.messages = c.seq;
  r.frames = uint64_t(c.seq) * r.shape.frames;
  secs = double(t - t0) / hz;
  rte_delay_ms(50);  // let the server drain before it is told to stop
  return r.send_end(err) && !g_stop;
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
  Shape shape;
  const uint32_t message = uint32_t(args.get_uint("message"));
  if (message == 0) {
    if (args.given("mtu") || args.given("overhead") || args.flag("check")) {
      return usage_error(kFloorCommand, "--mtu, --overhead and --check are for --message BYTES (single frames carry no payload)");
    }
    shape.hdr = uint32_t(args.get_uint("size"));
  } else {
    if (args.given("size")) {
      return usage_error(kFloorCommand, "--size is the single-frame floor's; --message's frames are --mtu + --overhead bytes");
    }
    shape.mtu = uint32_t(args.get_uint("mtu"));
    shape.bytes = message;
    shape.frames = (message + shape.mtu - 1) / shape.mtu;
    shape.tail = kIcrcBytes;
    shape.hdr = uint32_t(args.get_uint("overhead")) - kIcrcBytes;
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
  double secs = 0;
  uint64_t frames = 0, messages = 0, payload_errors = 0;
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
    if (shape.frame_bytes(0) > (*port)->info().mtu + kEthHdr) {
      std::fprintf(stderr, "uroce floor: frames of %u bytes are larger than the port's MTU %u + 14\n",
                   shape.frame_bytes(0), (*port)->info().mtu);
      (*port)->close();
      rte_eal_cleanup();
      return kExitUsage;
    }
    Run r{.q = (*port)->queue(0), .server = server, .shape = shape, .burst = uint16_t(args.get_uint("burst")),
          .check = args.flag("check"), .timeout_s = uint32_t(args.get_uint("timeout"))};
    static constexpr uint8_t kBroadcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    std::memcpy(r.tmpl, kBroadcast, 6);
    std::memcpy(r.tmpl + 6, r.q.mac().b, 6);
    r.tmpl[12] = uint8_t(kEtherTypeLocal >> 8);
    r.tmpl[13] = uint8_t(kEtherTypeLocal);
    r.tx_buf.resize(shape.bytes);
    r.rx_buf.resize(shape.bytes);
    fill_pattern(r.tx_buf);
    r.expect = r.tx_buf;
    if (mode == "pingpong") {
      LatReport rep;
      ok = pingpong(r, uint32_t(args.get_uint("iters")), rep, err);
      if (ok && !server) {
        out.lat_header();
        out.lat_line(rep);
        std::fprintf(info, "%s", kResultLine);
      }
    } else {
      ok = blast(r, args.get_double("seconds"), secs, err);
      if (ok) {
        std::fprintf(info, " %s %llu frames (%llu messages) in %.3f s: %.3f Mframes/s, %.4f Mmsg/s\n",
                     server ? "received" : "sent", (unsigned long long)r.frames, (unsigned long long)r.messages, secs,
                     secs > 0 ? double(r.frames) / secs / 1e6 : 0.0, secs > 0 ? double(r.messages) / secs / 1e6 : 0.0);
      }
    }
    if (ok) {
      const std::string what = shape.bytes ? strf("%u-byte messages in %u frames of up to %u bytes", shape.bytes,
                                                  shape.frames, shape.frame_bytes(0))
                                           : strf("single %u-byte frames", shape.hdr);
      std::fprintf(info, " %s; %s %llu frames%s\n", what.c_str(), !server && mode == "blast" ? "sent" : "received",
                   (unsigned long long)r.frames,
                   r.check ? strf(", %llu payload error(s)", (unsigned long long)r.payload_errors).c_str() : "");
    }
    if (r.payload_errors != 0) {
      err = strf("%llu message(s) arrived other than sent", (unsigned long long)r.payload_errors);
      ok = false;
    }
    frames = r.frames;
    messages = r.messages;
    payload_errors = r.payload_errors;
    (*port)->close();
  }
  if (json) {
    JsonWriter w;
    w.begin_object().key("command").str("floor").key("mode").str(mode).key("role").str(server ? "server" : "client");
    w.key("frame_bytes").num(shape.frame_bytes(0)).key("message_bytes").num(shape.bytes);
    w.key("frames_per_message").num(shape.frames).key("frames").num(frames).key("messages").num(messages);
    w.key("checked").boolean(args.flag("check")).key("payload_errors").num(payload_errors);
    if (mode == "pingpong") {
      out.write_json_results(w.key("results"));
    } else {
      w.key("seconds").fixed(secs, 6);
      w.key("mpps").fixed(secs > 0 ? double(frames) / secs / 1e6 : 0.0, 6);
      w.key("msg_rate").fixed(secs > 0 ? double(messages) / secs / 1e6 : 0.0, 6);
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
