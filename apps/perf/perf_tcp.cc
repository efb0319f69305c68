// `uroce perf --tcp block|busy`: the workloads of `uroce perf` over one kernel
// TCP connection (normally on loopback), printed in the same perftest columns
// and JSON, so the RDMA figures have their kernel-socket baseline on the same
// machine and in the same units (docs/PERFORMANCE.md, `uroce compare`).
//
//   *_lat   ping-pong: the client sends a --size message and waits for the
//           server's --size message back, -n times; both sides time each post
//           (the client's send, the server's send after its receive) and report
//           perftest's statistics of post-to-post time halved, as `uroce perf
//           write_lat`/`send_lat` do. A message is read whole before the reply.
//   *_bw    streaming: the client sends -n messages of --size bytes, one send()
//           per message (the analogue of one work request), then waits for the
//           server's one-byte acknowledgement that all bytes arrived; average
//           bandwidth and message rate over first send to acknowledgement. A
//           byte stream has no per-message completions, so perftest's peak
//           (best window between a post and a completion) is reported equal to
//           the average. The server reads in chunks as large as 256 KiB and
//           prints the client's report (as perftest's bw server does).
// send_* and write_* run the same TCP exchange (sockets have no one-sided
// write). Both sides set TCP_NODELAY (each message leaves at once, as each RDMA
// message is its own packet). --tcp block uses blocking calls (SO_RCVTIMEO
// 200 ms so SIGINT and --timeout are noticed); --tcp busy makes the socket
// non-blocking and spins on EAGAIN, the sockets' equivalent of polling a CQ.
// --busy-poll US also sets SO_BUSY_POLL, which makes the kernel poll the NIC
// queue in recv(); loopback has no NIC queue, so it changes nothing there.
// Timing: CLOCK_MONOTONIC (vDSO) in ns. Data path of the test: no allocation.
#include "apps/perf/perf_tcp.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "apps/common/args.h"
#include "apps/common/json_writer.h"
#include "apps/common/launch.h"
#include "apps/common/oob.h"
#include "apps/common/perf_report.h"

namespace uroce::apps {
namespace {

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

inline constexpr size_t kServerChunkBytes = 256 * 1024;
inline constexpr double kMbFactor = 0x100000;   // MB/sec: 2^20 bytes
inline constexpr double kGbFactor = 125000000;  // Gb/sec: 1e9 bits

/// One connected socket and the way it waits.
class Sock {
 public:
  Sock(int fd, const TcpPerfConfig& cfg) : fd_(fd), busy_(cfg.busy), timeout_ns_(uint64_t(cfg.timeout_s) * 1'000'000'000ull) {}

  bool setup(std::string& err) {
    if (busy_) {
      const int fl = fcntl(fd_, F_GETFL);
      if (fl < 0 || fcntl(fd_, F_SETFL, fl | O_NONBLOCK) < 0) {
        err = std::string("O_NONBLOCK: ") + std::strerror(errno);
        return false;
      }
    } else {
      const timeval tv{0, 200000};
      setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }
    return true;
  }

  /// All n bytes out. False with err set on error, timeout or stop.
  bool send_all(const uint8_t* p, size_t n, std::string& err) {
    uint64_t waited_since = 0;
    while (n > 0) {
      const ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (w > 0) {
        p += w;
        n -= size_t(w);
        waited_since = 0;
      } else if (!keep_waiting(w, "send", waited_since, err)) {
        return false;
      }
    }
    return true;
  }

  /// Between min and max bytes in (max >= min). Returns the count, 0 with err set on failure.
  size_t recv_some(uint8_t* p, size_t min, size_t max, std::string& err) {
    size_t got = 0;
    uint64_t waited_since = 0;
    while (got < min) {
      const ssize_t r = ::recv(fd_, p + got, max - got, 0);
      if (r > 0) {
        got += size_t(r);
        waited_since = 0;
      } else if (r == 0) {
        err = "the peer closed the connection";
        return 0;
      } else if (!keep_waiting(r, "recv", waited_since, err)) {
        return 0;
      }
    }
    return got;
  }
  bool recv_all(uint8_t* p, size_t n, std::string& err) { return n == 0 || recv_some(p, n, n, err) == n; }

 private:
  // After a call that moved nothing: true to try again (EAGAIN, EINTR), false
  // with err set on an error, SIGINT or --timeout without progress.
  bool keep_waiting(ssize_t rc, const char* what, uint64_t& waited_since, std::string& err) const {
    if (rc < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      err = std::string(what) + ": " + std::strerror(errno);
      return false;
    }
    if (g_stop) {
      err = "interrupted";
      return false;
    }
    const uint64_t t = now_ns();
    if (waited_since == 0) {
      waited_since = t;
    } else if (t - waited_since > timeout_ns_) {
      err = std::string(what) + ": no progress for " + std::to_string(timeout_ns_ / 1'000'000'000ull) + " s";
      return false;
    }
    return true;
  }

  int fd_;
  bool busy_;
  uint64_t timeout_ns_;
};

bool run_lat(Sock& s, const TcpPerfConfig& cfg, uint32_t size, uint8_t* buf, std::vector<uint64_t>& tposted,
             LatReport& rep, std::string& err) {
  for (uint32_t i = 0; i < cfg.iters; ++i) {
    if (cfg.server && !s.recv_all(buf, size, err)) return false;
    tposted[i] = now_ns();
    if (!s.send_all(buf, size, err)) return false;
    if (!cfg.server && !s.recv_all(buf, size, err)) return false;
  }
  rep = lat_report(size, std::span<const uint64_t>(tposted.data(), cfg.iters), 2 * 1000.0);  // ns -> us, halved
  return true;
}

bool run_bw(Sock& s, const TcpPerfConfig& cfg, uint32_t size, uint8_t* buf, BwReport& rep, std::string& err) {
  const double fmt = cfg.gbits ? kGbFactor : kMbFactor;
  if (cfg.server) {
    const uint64_t total = uint64_t(size) * cfg.iters;
    uint64_t got = 0;
    while (got < total) {
      const size_t want = size_t(std::min<uint64_t>(total - got, kServerChunkBytes));
      const size_t n = s.recv_some(buf, 1, want, err);
      if (n == 0) return false;
      got += n;
    }
    const uint8_t ack = 1;
    if (!s.send_all(&ack, 1, err)) return false;
    // The client's report, as perftest's bw server prints it (same host: raw doubles).
    return s.recv_all(reinterpret_cast<uint8_t*>(&rep), sizeof(rep), err);
  }
  const uint64_t t0 = now_ns();
  for (uint32_t i = 0; i < cfg.iters; ++i) {
    if (!s.send_all(buf, size, err)) return false;
  }
  uint8_t ack = 0;
  if (!s.recv_all(&ack, 1, err)) return false;
  const double secs = double(now_ns() - t0) / 1e9;
  rep.size = size;
  rep.iters = cfg.iters;
  rep.bw_avg = secs > 0 ? double(size) * double(cfg.iters) / secs / fmt : 0;
  rep.bw_peak = rep.bw_avg;
  rep.msg_rate = secs > 0 ? double(cfg.iters) / secs / 1e6 : 0;
  return s.send_all(reinterpret_cast<const uint8_t*>(&rep), sizeof(rep), err);
}

void print_banner(std::FILE* out, const TcpPerfConfig& cfg) {
  std::fprintf(out, "%s                    Kernel TCP %s Test (the exchange of %.*s)\n", kResultLine,
               cfg.bw ? "BW" : "Latency", int(cfg.test.size()), cfg.test.data());
  std::fprintf(out, " Connection type : TCP\t\tSocket mode    : %s\n", cfg.busy ? "non-blocking, busy poll" : "blocking");
  std::fprintf(out, " TCP_NODELAY     : ON\t\tSO_BUSY_POLL   : %u[usec]\n", cfg.busy_poll_us);
  std::fprintf(out, "%s", kResultLine);
}

}  // namespace

int run_perf_tcp(const TcpPerfConfig& cfg) {
  install_stop_handlers();
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Output out;
  out.info = cfg.json ? stderr : stdout;
  out.gbits = cfg.gbits;
  const char* role = cfg.server ? "server" : "client";
  std::fprintf(out.info, "# uroce perf %.*s %s tcp-mode=%s\n", int(cfg.test.size()), cfg.test.data(), cfg.config_line.c_str(),
               cfg.busy ? "busy" : "block");
  std::string err;
  bool ok = false;
  {
    TcpChannel ch(&g_stop);
    auto idle = [] {};
    if (cfg.server) {
      std::fprintf(out.info, "\n************************************\n* Waiting for client to connect... *\n************************************\n");
      ok = ch.accept_one(cfg.listen, cfg.port, cfg.timeout_s, idle, err);
    } else {
      ok = ch.connect_to(cfg.host, cfg.port, cfg.timeout_s, idle, err);
    }
    Sock s(ch.fd(), cfg);
    if (ok) ok = s.setup(err);
    if (ok && cfg.busy_poll_us) {
      const int us = int(cfg.busy_poll_us);
      if (setsockopt(ch.fd(), SOL_SOCKET, SO_BUSY_POLL, &us, sizeof(us)) != 0) {
        std::fprintf(out.info, "# note: SO_BUSY_POLL %u: %s (running without it)\n", cfg.busy_poll_us, std::strerror(errno));
      }
    }
    if (ok) {
      print_banner(out.info, cfg);
      const uint32_t max_size = *std::max_element(cfg.sizes.begin(), cfg.sizes.end());
      const size_t buf_bytes = std::max<size_t>({max_size, kServerChunkBytes, sizeof(BwReport)});
      std::unique_ptr<uint8_t[]> buf(new uint8_t[buf_bytes]);
      std::memset(buf.get(), 0x5a, buf_bytes);
      std::vector<uint64_t> tposted(cfg.iters, 0);
      if (cfg.bw) {
        out.bw_header();
      } else {
        out.lat_header();
      }
      for (uint32_t size : cfg.sizes) {
        if (cfg.bw) {
          BwReport r;
          ok = run_bw(s, cfg, size, buf.get(), r, err);
          if (ok) out.bw_line(r);
        } else {
          LatReport r;
          ok = run_lat(s, cfg, size, buf.get(), tposted, r, err);
          if (ok) out.lat_line(r);
        }
        if (!ok) break;
      }
      std::fprintf(out.info, "%s", kResultLine);
    }
  }
  if (cfg.json) {
    JsonWriter w;
    w.begin_object().key("command").str("perf").key("transport").str("tcp").key("tcp_mode").str(cfg.busy ? "busy" : "block");
    w.key("test").str(cfg.test).key("role").str(role).key("size").num(cfg.sizes.front()).key("iters").num(cfg.iters);
    w.key("num_qp").num(1).key("bidirectional").boolean(false).key("all").boolean(cfg.sizes.size() > 1);
    out.write_json_results(w.key("results"));
    w.key("ok").boolean(ok).key("interrupted").boolean(g_stop).key("error").str(err).end_object();
    std::printf("%s\n", w.text().c_str());
  }
  if (!ok) {
    std::fprintf(stderr, "uroce perf (%.*s tcp %s): %s\n", int(cfg.test.size()), cfg.test.data(), role, err.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace uroce::apps
