// The result rows of `uroce perf` (see perf_report.h).
#include "apps/common/perf_report.h"

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

double peak_window_ticks(std::span<const uint64_t> tposted, std::span<const uint64_t> tcompleted, uint32_t cq_mod) {
  // Window (i, j) is the slope from point P_i = (i, tposted[i]) to
  // Q_j = (j + 1, tcompleted[j]). For a fixed j the least slope over i <= j is
  // at the upper tangent from Q_j (to the right of every P_i) to the upper
  // convex hull of P_0..P_j: along that hull the slope to Q_j falls, then
  // rises, so a binary search finds it. Integer cross products keep it exact;
  // stamps are taken relative to tposted[0] so they fit 64 bits.
  const size_t n = std::min(tposted.size(), tcompleted.size());
  if (n == 0 || cq_mod == 0) return 0;
  struct Pt {
    int64_t x, y;
  };
  const uint64_t base = tposted[0];
  auto y_of = [base](uint64_t t) { return int64_t(t - base); };
  // > 0 when c lies to the left of (above) the line from a to b, a.x < b.x
  auto cross = [](const Pt& a, const Pt& b, const Pt& c) {
    return __int128(b.x - a.x) * (c.y - a.y) - __int128(b.y - a.y) * (c.x - a.x);
  };
  std::vector<Pt> hull;
  double best = double(tcompleted[0] - tposted[0]);  // as perftest: unsigned, huge if unstamped
  size_t added = 0;
  auto query = [&](size_t j) {
    for (; added <= j; ++added) {
      const Pt p{int64_t(added), y_of(tposted[added])};
      while (hull.size() >= 2 && cross(hull[hull.size() - 2], hull.back(), p) >= 0) hull.pop_back();
      hull.push_back(p);
    }
    const Pt q{int64_t(j) + 1, y_of(tcompleted[j])};
    size_t lo = 0, hi = hull.size() - 1;  // the first k whose successor is no better
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (cross(hull[mid], q, hull[mid + 1]) > 0) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const Pt& p = hull[lo];
    best = std::min(best, double(q.y - p.y) / double(q.x - p.x));
  };
  for (size_t j = cq_mod - 1; j < n; j += cq_mod) query(j);
  if (n % cq_mod) query(n - 1);
  return best;
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

void Output::write_json_results(JsonWriter& w) const {
  w.begin_array();
  for (const BwReport& r : bw) {
    w.begin_object().key("bytes").num(r.size).key("iterations").num(r.iters).key("bw_peak").fixed(r.bw_peak, 2);
    w.key("bw_average").fixed(r.bw_avg, 2).key("msg_rate").fixed(r.msg_rate, 6);
    w.key("unit").str(gbits ? "Gb/sec" : "MB/sec").end_object();
  }
  for (const LatReport& r : lat) {
    w.begin_object().key("bytes").num(r.size).key("iterations").num(r.iters).key("t_min").fixed(r.t_min, 2);
    w.key("t_max").fixed(r.t_max, 2).key("t_typical").fixed(r.t_typical, 2).key("t_avg").fixed(r.t_avg, 2);
    w.key("t_stdev").fixed(r.t_stdev, 2).key("p99").fixed(r.p99, 2).key("p99_9").fixed(r.p99_9, 2).end_object();
  }
  w.end_array();
}

}  // namespace uroce::apps
