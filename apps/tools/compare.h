// What the `uroce compare` files share (compare.cc describes the tool, reads
// the options and runs the rounds): the kinds and the options (Config); the
// runs, one pair of processes per measurement, and the readers of their
// output (compare_runs.cc); the samples, the tables, ratios and JSON made of
// them (compare_report.cc).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uroce::apps::compare {

inline constexpr std::array<std::string_view, 8> kKinds = {"stack", "tcp-block", "tcp-busy", "floor",
                                                           "floor-1frame", "verbs", "uroce-run", "demo"};

struct Config {
  uint32_t rounds = 5;
  std::vector<uint32_t> sizes;
  std::vector<std::string> kinds;
  uint32_t lat_iters = 0, bw_msgs = 0;
  uint64_t lat_bytes = 0, bw_bytes = 0;
  uint32_t tx_depth = 128;
  double floor_seconds = 1;
  uint32_t mtu = 4096;
  int cpu[2] = {0, 1};
  std::string charts, plot_script;
  uint32_t timeout_s = 120;
  bool keep = false, json = false;
  bool memif_zc = false;  ///< --memif-zc

  /// True if --kinds names kind.
  bool wants(std::string_view kind) const { return std::find(kinds.begin(), kinds.end(), kind) != kinds.end(); }
};

// ---------------------------------------------------------------- the runs (compare_runs.cc)

/// The number after "key": in a JSON text (its first occurrence at or after
/// from), if any.
std::optional<double> json_num(const std::string& j, std::string_view key, size_t from = 0);

struct Verbs {
  bool available = false;
  std::string device;
  std::string status;  ///< "ran on DEV" or "skipped: why"
};

/// True if an executable named tool is in one of PATH's folders (split at
/// ':'; an empty entry is the current folder, as for execvp).
bool on_path(const char* tool);
/// libibverbs is loaded at run time (it is not a build dependency): the first
/// RDMA device it lists, and perftest's tools on PATH.
Verbs detect_verbs();
/// A perftest result row "SIZE ITERS f2 f3 ..." in out; field idx as a number.
std::optional<double> perftest_field(const std::string& out, uint32_t size, int idx);

/// Runs the measurements of one `uroce compare`, each a fresh pair of
/// processes, the children's output kept in dir; a measurement that fails
/// three times is named in failures().
class Runner {
 public:
  Runner(const Config& cfg, std::string dir, std::FILE* info) : cfg_(cfg), dir_(std::move(dir)), info_(info) {}
  /// uroce perf TEST at size over memif: its JSON result (client side).
  std::optional<std::string> stack(const std::string& test, uint32_t size);
  /// uroce demo's SEND, WRITE and READ pingpongs at size over memif, no
  /// streaming phase: its JSON result (client side).
  std::optional<std::string> demo(uint32_t size);
  std::optional<std::string> tcp(const std::string& mode, const std::string& test, uint32_t size);
  /// uroce floor MODE for messages of size: the multi-frame floor (kind
  /// floor) or one frame a message (floor-1frame). The client's JSON
  /// (pingpong) or the server's (blast).
  std::optional<std::string> floor(const std::string& kind, const std::string& mode, uint32_t size);
  /// perftest's TOOL on the verbs device; its text output (client side).
  std::optional<std::string> verbs(const std::string& tool, const std::string& device, uint32_t size);
  /// perftest's TOOL under `uroce run` (this executable) on uroce's
  /// libibverbs.so.1, on the stack's memif link; its text output (client side).
  std::optional<std::string> uroce_run(const std::string& tool, uint32_t size);
  const std::vector<std::string>& failures() const { return failures_; }
  /// The round trip of one cache line between the two --cpus, in ns, probed
  /// just before the last measurement's processes started (0 if the probe
  /// could not run there). Every two-process figure crosses between those
  /// CPUs; on a virtual machine the host may move them between cores that
  /// share a cache and cores that do not, and this moves by 5x with it
  /// (docs/PERFORMANCE.md, "Issue 20's rows on AMD EPYC Zen 4").
  double line_rtt_ns() const { return line_rtt_ns_; }

 private:
  /// One pair of processes; the output of the side `want` (0 server, 1 client), or nullopt.
  /// Each is pinned to its CPU of --cpus, or with pin false keeps compare's affinity.
  std::optional<std::string> pair(const std::string& label, std::vector<std::string> server,
                                  std::vector<std::string> client, const std::string& sock, int want,
                                  const std::string& exe = "", bool pin = true);
  std::vector<std::string> eal(int side) const;
  /// The EAL argument memif's zero-copy mode needs on side (the client), if
  /// --memif-zc: the PMD shares EAL's memory with its peer as one file per
  /// memseg list and refuses otherwise ("Zero-copy doesn't support multi-file
  /// segments", rte_eth_memif.c memif_set_zc); --no-huge memory is a memfd
  /// then, so it works without hugepages.
  std::vector<std::string> zc_eal(int side) const;
  std::string memif(int side) const;
  std::string sock() const;
  uint32_t bw_iters(uint32_t size) const;
  uint32_t lat_iters(uint32_t size) const;
  uint32_t iters(const std::string& test, uint32_t size) const;
  /// perftest's TOOL at size, each end's argv after av[i] (the device, or the
  /// `uroce run` in front of the tool); the client's text output.
  std::optional<std::string> perftest(const std::string& label, const std::string& tool, uint32_t size,
                                      std::vector<std::string> (&av)[2], const std::string& sock, const std::string& exe,
                                      bool pin = true);
  /// The flags of every bandwidth run, the stack's and perftest's alike: the
  /// window, and the run timed as a whole, not every post (perftest's -N), as
  /// the TCP path and the floor time theirs.
  std::vector<std::string> bw_flags() const;
  const Config& cfg_;
  std::string dir_;
  std::FILE* info_;
  int n_ = 0;
  std::vector<std::string> failures_;
  double line_rtt_ns_ = 0;
};

// ---------------------------------------------------------------- the report (compare_report.cc)

/// metric name -> size -> one value per round.
using Samples = std::map<std::string, std::map<uint32_t, std::vector<double>>>;

/// The tables of the medians (latency, bandwidth, message rate; uroce-run's
/// and the demo's where cfg asks for them), the ratios against their
/// targets, the cache line's round trips (line_rtt: beside each of s's
/// values, Runner::line_rtt_ns before its measurement) and the count of
/// failed measurements, to out.
void print_report(std::FILE* out, const Config& cfg, const Samples& s, const Samples& line_rtt, const Verbs& verbs,
                  size_t failures);
/// The --json document: the configuration, the machine, the medians, every
/// round's values and the line round trip before each, the ratios and the failures.
void print_json(const Config& cfg, const Samples& s, const Samples& line_rtt, const Verbs& verbs,
                const std::vector<std::string>& failures, std::FILE* out);

}  // namespace uroce::apps::compare
