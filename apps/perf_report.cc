// The result rows of `uroce perf` (see perf_report.h).
#include "apps/perf_report.h"

#include <algorithm>
#include <cmath>

namespace uroce::apps {

namespace {
inline constexpr size_t kLatTail = 2;  // perftest's LAT_MEASURE_TAIL
}  // namespace

LatReport lat_report(uint64_t size, std::span<const uint64_t> tposted, double ticks_per_us) {
  LatReport rep;
  rep.size = size;
  rep.iters = tposted.size();
  std::vector<double> delta;
  for (size_t i = 0; i + 1 < tposted.size(); ++i) delta.push_back(double(tposted[i + 1] - tposted[i]) / ticks_per_us);
  std::sort(delta.begin(), delta.end());
  const size_t n = delta.size() > kLatTail ? delta.size() - kLatTail : 0;
  if (n == 0) return rep;
  rep.t_typical = (n - 1) % 2 ? (delta[n / 2] + delta[n / 2 - 1]) / 2 : delta[n / 2];
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += delta[i];
  rep.t_avg = sum / double(n);
  double var = 0;
  for (size_t i = 0; i < n; ++i) var += (delta[i] - rep.t_avg) * (delta[i] - rep.t_avg);
  rep.t_stdev = std::sqrt(var / double(n));
  rep.t_min = delta[0];
  rep.t_max = delta[n];
  rep.p99 = delta[std::min(delta.size() - 1, size_t(std::ceil(double(n) * 0.99)))];
  rep.p99_9 = delta[std::min(delta.size() - 1, size_t(std::ceil(double(n) * 0.999)))];
  return rep;
}

void Output::bw_header() const {
  std::fprintf(info, "%s", kResultLine);
  std::fprintf(info, gbits ? " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
                           : " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
}

void Output::bw_line(const BwReport& r) {
  bw.push_back(r);
  if (gbits && r.bw_avg < 0.1) {
    std::fprintf(info, " %-7llu    %llu           %-7.6lf            %-7.6lf            %-7.6lf\n", (unsigned long long)r.size,
                 (unsigned long long)r.iters, r.bw_peak, r.bw_avg, r.msg_rate);
  } else {
    std::fprintf(info, " %-7llu    %-10llu       %-7.2lf            %-7.2lf\t\t   %-7.6lf\n", (unsigned long long)r.size,
                 (unsigned long long)r.iters, r.bw_peak, r.bw_avg, r.msg_rate);
  }
}

void Output::lat_header() const {
  std::fprintf(info, "%s", kResultLine);
  std::fprintf(info, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
                     "99%% percentile[usec]   99.9%% percentile[usec] \n");
}

void Output::lat_line(const LatReport& r) {
  lat.push_back(r);
  std::fprintf(info, " %-7llu %llu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
               (unsigned long long)r.size, (unsigned long long)r.iters, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev,
               r.p99, r.p99_9);
}

void Output::print_json_results() const {
  std::printf("[");
  bool first = true;
  for (const BwReport& r : bw) {
    std::printf("%s{\"bytes\":%llu,\"iterations\":%llu,\"bw_peak\":%.2f,\"bw_average\":%.2f,\"msg_rate\":%.6f,"
                "\"unit\":\"%s\"}",
                first ? "" : ",", (unsigned long long)r.size, (unsigned long long)r.iters, r.bw_peak, r.bw_avg, r.msg_rate,
                gbits ? "Gb/sec" : "MB/sec");
    first = false;
  }
  for (const LatReport& r : lat) {
    std::printf("%s{\"bytes\":%llu,\"iterations\":%llu,\"t_min\":%.2f,\"t_max\":%.2f,\"t_typical\":%.2f,\"t_avg\":%.2f,"
                "\"t_stdev\":%.2f,\"p99\":%.2f,\"p99_9\":%.2f}",
                first ? "" : ",", (unsigned long long)r.size, (unsigned long long)r.iters, r.t_min, r.t_max, r.t_typical,
                r.t_avg, r.t_stdev, r.p99, r.p99_9);
    first = false;
  }
  std::printf("]");
}

}  // namespace uroce::apps
