// The result rows of `uroce perf`, shared by its RDMA path (perf.cc) and its
// kernel-TCP path (perf_tcp.cc) so both print the same perftest columns and
// the same JSON: the bandwidth and latency reports, perftest's latency
// statistics from post timestamps, the table printer and the JSON results
// array. Control path (runs after a measurement).
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <vector>

#include "apps/common/json_writer.h"

namespace uroce::apps {

inline constexpr char kResultLine[] =
    "---------------------------------------------------------------------------------------\n";

/// One bw row: MB/sec (2^20 bytes/s) or Gb/sec (1e9 bit/s), message rate in Mpps.
struct BwReport {
  uint64_t size = 0;
  uint64_t iters = 0;
  double bw_peak = 0;
  double bw_avg = 0;
  double msg_rate = 0;
};

/// One lat row, all in microseconds.
struct LatReport {
  uint64_t size = 0;
  uint64_t iters = 0;
  double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, p99 = 0, p99_9 = 0;
};

/// perftest's print_report_lat: the deltas between consecutive post times
/// `tposted` (any clock), each divided by `ticks_per_us` (for a ping-pong, twice
/// the clock's ticks per microsecond: half a round trip), sorted, the two
/// largest cut (LAT_MEASURE_TAIL), then min, max, median, mean, stdev, 99 and
/// 99.9 percentiles. Returns a report with only size and iters set if fewer
/// than four posts were timed.
LatReport lat_report(uint64_t size, std::span<const uint64_t> tposted, double ticks_per_us);

/// perftest's BW peak window for print_report_bw: the least mean time per
/// message, (tcompleted[j] - tposted[i]) / (j - i + 1), over every window
/// that starts at a post i and ends at a signaled completion j >= i (every
/// cq_mod-th, and the last one), in the clock's ticks; also the one-message
/// window tcompleted[0] - tposted[0], which perftest starts from. Both spans
/// hold one stamp per message. Exact, in O(n log n): perftest's double loop
/// is O(n^2 / cq_mod), minutes for a few million messages.
double peak_window_ticks(std::span<const uint64_t> tposted, std::span<const uint64_t> tcompleted, uint32_t cq_mod);

/// The table (perftest's column layout) and the rows printed so far.
struct Output {
  std::FILE* info = stdout;  ///< banner, addresses, table (stderr with --json)
  bool gbits = false;
  std::vector<BwReport> bw;
  std::vector<LatReport> lat;

  void bw_header() const;
  void bw_line(const BwReport& r);
  void lat_header() const;
  void lat_line(const LatReport& r);
  /// The JSON array of every row, `[{"bytes":..},..]`, as w's next value.
  void write_json_results(JsonWriter& w) const;
};

}  // namespace uroce::apps
