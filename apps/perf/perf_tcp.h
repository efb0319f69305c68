// `uroce perf --tcp`: the kernel-TCP comparison path of `uroce perf`.
// Control path; see perf_tcp.cc for the workloads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace uroce::apps {

struct TcpPerfConfig {
  std::string_view test;            ///< send_bw, write_bw, send_lat or write_lat (TCP runs the same for both verbs)
  bool bw = false;                  ///< streaming bandwidth / message rate; else ping-pong latency
  bool server = true;
  std::string host;                 ///< client: the server's IPv4 address
  std::string listen;               ///< server: the listen address
  uint16_t port = 0;
  std::vector<uint32_t> sizes;      ///< message sizes, run in order on one connection
  uint32_t iters = 0;               ///< messages (bw) or round trips (lat) per size
  bool busy = false;                ///< non-blocking socket, spin on EAGAIN; else blocking calls
  uint32_t busy_poll_us = 0;        ///< SO_BUSY_POLL on the socket (0: not set)
  bool gbits = false;
  bool json = false;
  uint32_t timeout_s = 60;
  std::string config_line;          ///< the parsed options, echoed at start
};

/// Runs the test over one kernel TCP connection and prints perf's table (and
/// JSON). Returns the process exit code (0 ok, 1 failure or interrupted).
int run_perf_tcp(const TcpPerfConfig& cfg);

}  // namespace uroce::apps
