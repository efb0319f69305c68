// `uroce compare`'s report (compare.h): the medians of the rounds in
// perftest-style tables, the ratios the targets of docs/PERFORMANCE.md are
// stated in, and the same as JSON (--json, --charts).
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apps/common/json_writer.h"
#include "apps/common/launch.h"
#include "apps/tools/compare.h"

namespace uroce::apps::compare {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::optional<double> med(const Samples& s, const std::string& metric, uint32_t size) {
  auto m = s.find(metric);
  if (m == s.end()) return std::nullopt;
  auto v = m->second.find(size);
  if (v == m->second.end() || v->second.empty()) return std::nullopt;
  return median(v->second);
}

struct Ratio {
  std::string name;  ///< "stack.write_lat / floor.lat"
  std::string num, den;
  std::string target;  ///< what docs/PERFORMANCE.md asks of it, or empty
};

// The floor of the ratios is the multi-frame one (kind floor): a message of
// the size in the frames the stack sends, its payload copied each side.
const Ratio kRatios[] = {
    {"stack write_lat / floor lat", "stack.write_lat", "floor.lat", "<= 5 at 64 B, <= 2.5 at every size"},
    {"stack send_lat / floor lat", "stack.send_lat", "floor.lat", "<= 5 at 64 B, <= 2.5 at every size"},
    {"tcp-block lat / stack write_lat", "tcp-block.lat", "stack.write_lat", ">= 10 at 64 B"},
    {"tcp-busy lat / stack write_lat", "tcp-busy.lat", "stack.write_lat", ">= 10 at 64 B, >= 1.5 at 64 KB and 1 MB"},
    {"tcp-block lat / stack send_lat", "tcp-block.lat", "stack.send_lat", ">= 10 at 64 B"},
    {"tcp-busy lat / stack send_lat", "tcp-busy.lat", "stack.send_lat", ">= 10 at 64 B, >= 1.5 at 64 KB and 1 MB"},
    {"stack write rate / floor frame rate", "stack.write_rate", "floor.rate", ">= 0.4 at 64 B"},
    {"stack write bw / tcp-block bw", "stack.write_bw", "tcp-block.bw", ">= 3 at 64 KB and 1 MB"},
    {"stack write bw / tcp-busy bw", "stack.write_bw", "tcp-busy.bw", ">= 3 at 64 KB"},
    {"verbs write_lat / stack write_lat", "verbs.write_lat", "stack.write_lat", ""},
    {"uroce-run write_lat / stack write_lat", "uroce-run.write_lat", "stack.write_lat", "<= 1.1 at 64 B"},
    {"uroce-run rate / stack write rate", "uroce-run.write_rate", "stack.write_rate", ">= 0.9 at 64 B"},
    {"demo send_lat / stack send_lat", "demo.send_lat", "stack.send_lat", "<= 1.15 at every size"},
    {"demo write_lat / stack write_lat", "demo.write_lat", "stack.write_lat", "<= 1.15 at every size"},
    {"demo read_lat / stack read_lat", "demo.read_lat", "stack.read_lat", "<= 1.15 at every size"},
};

struct Column {
  std::string metric, title;
};

void print_table(std::FILE* out, const char* title, const std::vector<Column>& cols, const Samples& s,
                 const std::vector<uint32_t>& sizes) {
  std::fprintf(out, "%s\n %-8s", title, "bytes");
  for (const auto& c : cols) std::fprintf(out, " %14s", c.title.c_str());
  std::fprintf(out, "\n");
  for (uint32_t size : sizes) {
    std::fprintf(out, " %-8u", size);
    for (const auto& c : cols) {
      if (auto v = med(s, c.metric, size)) {
        std::fprintf(out, " %14.3f", *v);
      } else {
        std::fprintf(out, " %14s", "-");
      }
    }
    std::fprintf(out, "\n");
  }
}

}  // namespace

void print_report(std::FILE* out, const Config& cfg, const Samples& s, const Samples& line_rtt, const Verbs& verbs,
                  size_t failures) {
  std::fprintf(out, "\n# medians of %u interleaved round%s; stack path MTU %u, %u WRITEs in flight; verbs %s\n",
               cfg.rounds, cfg.rounds == 1 ? "" : "s", cfg.mtu, cfg.tx_depth, verbs.status.c_str());
  // The uroce-run columns only when asked for: the default tables stay as they were.
  auto with_run = [&](std::vector<Column> cols, const char* metric) {
    if (cfg.wants("uroce-run")) cols.push_back({metric, "run WRITE"});
    return cols;
  };
  print_table(out, "# latency, half round trip, t_typical [usec]",
              with_run({{"stack.write_lat", "stack WRITE"}, {"stack.send_lat", "stack SEND"}, {"tcp-block.lat", "tcp block"},
                        {"tcp-busy.lat", "tcp busy"}, {"floor.lat", "floor"}, {"floor-1frame.lat", "floor 1frame"},
                        {"verbs.write_lat", "verbs WRITE"},
                        {"verbs.send_lat", "verbs SEND"}},
                       "uroce-run.write_lat"),
              s, cfg.sizes);
  print_table(out, "# bandwidth, average [MB/sec]",
              with_run({{"stack.write_bw", "stack WRITE"}, {"tcp-block.bw", "tcp block"}, {"tcp-busy.bw", "tcp busy"},
                        {"floor.bw", "floor"}, {"floor-1frame.bw", "floor 1frame"}, {"verbs.write_bw", "verbs WRITE"}},
                       "uroce-run.write_bw"),
              s, cfg.sizes);
  print_table(out, "# message rate [Mmsg/s]",
              with_run({{"stack.write_rate", "stack WRITE"}, {"tcp-block.rate", "tcp block"}, {"tcp-busy.rate", "tcp busy"},
                        {"floor.rate", "floor"}, {"floor-1frame.rate", "floor 1frame"}, {"verbs.write_rate", "verbs WRITE"}},
                       "uroce-run.write_rate"),
              s, cfg.sizes);
  if (cfg.wants("demo")) {
    print_table(out, "# uroce demo against uroce perf: SEND and WRITE half a round trip, READ a whole one [usec]",
                {{"demo.send_lat", "demo SEND"}, {"stack.send_lat", "perf SEND"}, {"demo.write_lat", "demo WRITE"},
                 {"stack.write_lat", "perf WRITE"}, {"demo.read_lat", "demo READ"}, {"stack.read_lat", "perf READ"}},
                s, cfg.sizes);
  }
  std::fprintf(out, "# ratios (of the medians)\n %-38s", "ratio");
  for (uint32_t size : cfg.sizes) std::fprintf(out, " %10u", size);
  std::fprintf(out, "   target\n");
  for (const Ratio& r : kRatios) {
    std::string row;
    bool any = false;
    for (uint32_t size : cfg.sizes) {
      auto a = med(s, r.num, size), b = med(s, r.den, size);
      any = any || (a && b && *b > 0);
      row += a && b && *b > 0 ? strf(" %10.2f", *a / *b) : strf(" %10s", "-");
    }
    if (any) std::fprintf(out, " %-38s%s   %s\n", r.name.c_str(), row.c_str(), r.target.c_str());
  }
  std::vector<double> rtt;
  for (const auto& [metric, by_size] : line_rtt) {
    for (const auto& [size, v] : by_size) rtt.insert(rtt.end(), v.begin(), v.end());
  }
  std::sort(rtt.begin(), rtt.end());
  if (!rtt.empty() && rtt.front() > 0) {
    std::fprintf(out, "# a cache line's round trip between CPUs %d and %d before each measurement: %.0f to %.0f ns,"
                 " median %.0f\n", cfg.cpu[0], cfg.cpu[1], rtt.front(), rtt.back(), median(rtt));
    if (rtt.back() > 3 * rtt.front()) {
      std::fprintf(out, "# it moved by more than 3x: the host put the CPUs on near and far cores in turn, and the rounds\n"
                        "# mix both (--json line_rtt_ns pairs each value with the round trip before it)\n");
    }
  }
  if (failures) std::fprintf(out, "# %zu measurement(s) failed\n", failures);
}

void print_json(const Config& cfg, const Samples& s, const Samples& line_rtt, const Verbs& verbs,
                const std::vector<std::string>& failures, std::FILE* out) {
  struct sysinfo si {};
  sysinfo(&si);
  JsonWriter w;
  w.begin_object().key("command").str("compare").key("rounds").num(cfg.rounds).key("mtu").num(cfg.mtu);
  w.key("tx_depth").num(cfg.tx_depth).key("memif_zc").boolean(cfg.memif_zc).key("sizes").begin_array();
  for (uint32_t size : cfg.sizes) w.num(size);
  w.end_array();
  w.key("machine").begin_object().key("cpus_online").num(sysconf(_SC_NPROCESSORS_ONLN));
  w.key("load1").fixed(double(si.loads[0]) / double(1 << SI_LOAD_SHIFT), 2).end_object();
  w.key("verbs").begin_object().key("status").str(verbs.status).key("device").str(verbs.device).end_object();
  for (const auto& [key, samples] : {std::pair{"median", &s}, std::pair{"runs", &s}, std::pair{"line_rtt_ns", &line_rtt}}) {
    const bool medians = std::string_view(key) == "median";
    w.key(key).begin_object();
    for (const auto& [metric, by_size] : *samples) {
      w.key(metric).begin_object();
      for (const auto& [size, v] : by_size) {
        w.key(std::to_string(size));
        if (medians) {
          w.general(median(v), 6);
        } else {
          w.begin_array();
          for (double x : v) w.general(x, 6);
          w.end_array();
        }
      }
      w.end_object();
    }
    w.end_object();
  }
  w.key("ratios").begin_object();
  for (const Ratio& r : kRatios) {
    JsonWriter body;
    body.begin_object();
    bool any = false;
    for (uint32_t size : cfg.sizes) {
      auto a = med(s, r.num, size), b = med(s, r.den, size);
      if (a && b && *b > 0) {
        body.key(std::to_string(size)).general(*a / *b, 4);
        any = true;
      }
    }
    if (any) w.key(r.name).raw(body.end_object().text());
  }
  w.end_object().key("failures").begin_array();
  for (const std::string& f : failures) w.str(f);
  w.end_array().end_object();
  std::fprintf(out, "%s\n", w.text().c_str());
}

}  // namespace uroce::apps::compare
