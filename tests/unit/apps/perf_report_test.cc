// uroce perf's report arithmetic (apps/common/perf_report.h) against the definition
// it replaces: perftest's print_report_bw peak, a double loop over every
// (post, signaled completion) window.
#include "apps/common/perf_report.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace uroce::apps {
namespace {

// perftest's loop, written out: the windows (i, j), j signaled and j >= i.
double peak_by_definition(const std::vector<uint64_t>& posted, const std::vector<uint64_t>& completed, uint32_t cq_mod) {
  const uint64_t tot = posted.size();
  double opt = double(completed[0] - posted[0]);
  for (uint64_t i = 0; i < tot; ++i) {
    for (uint64_t j = (i + cq_mod) / cq_mod * cq_mod - 1; j < tot; j += cq_mod) {
      opt = std::min(opt, double(completed[j] - posted[i]) / double(j - i + 1));
    }
    if (tot % cq_mod) opt = std::min(opt, double(completed[tot - 1] - posted[i]) / double(tot - i));
  }
  return opt;
}

// A bw run's stamps: posts in bursts with idle gaps, each completion a
// random time after its post and after the previous completion.
void make_run(std::mt19937_64& rng, size_t n, std::vector<uint64_t>& posted, std::vector<uint64_t>& completed) {
  posted.assign(n, 0);
  completed.assign(n, 0);
  uint64_t t = 1'000'000'000'000ull + rng() % 1000;  // a TSC far from 0
  uint64_t done = t;
  for (size_t i = 0; i < n; ++i) {
    t += rng() % 4 == 0 ? rng() % 5000 : rng() % 40;  // bursts and gaps, repeats allowed
    posted[i] = t;
    done = std::max(done, t) + 1 + rng() % 300;
    completed[i] = done;
  }
}

TEST(PerfReport, PeakWindowMatchesPerftestsDoubleLoop) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> posted, completed;
  for (int round = 0; round < 400; ++round) {
    const size_t n = 1 + rng() % 300;
    const uint32_t cq_mod = uint32_t(1 + rng() % 120);
    make_run(rng, n, posted, completed);
    const double want = peak_by_definition(posted, completed, cq_mod);
    const double got = peak_window_ticks(posted, completed, cq_mod);
    ASSERT_DOUBLE_EQ(got, want) << "round " << round << " n " << n << " cq_mod " << cq_mod;
  }
}

TEST(PerfReport, PeakWindowFindsAFastBurstInsideASlowRun) {
  // 1,000 messages 100 ticks apart, except messages 400..499 posted and
  // completed 10 ticks apart: the peak window is that burst.
  std::vector<uint64_t> posted(1000), completed(1000);
  uint64_t t = 5000;
  for (size_t i = 0; i < posted.size(); ++i) {
    t += (i >= 400 && i < 500) ? 10 : 100;
    posted[i] = t;
    completed[i] = t + 50;
  }
  // Window (399, 499): posted[399] is the burst's start, 100 gaps of 10 before
  // posted[499], whose completion is 50 later: (100 * 10 + 50) / 101.
  EXPECT_DOUBLE_EQ(peak_window_ticks(posted, completed, 100), 1050.0 / 101);
  EXPECT_DOUBLE_EQ(peak_window_ticks(posted, completed, 100), peak_by_definition(posted, completed, 100));
}

TEST(PerfReport, PeakWindowOfMillionsOfMessagesIsQuick) {
  // perftest's loop needs minutes here (n^2 / cq_mod = 9e10 windows).
  std::mt19937_64 rng(11);
  std::vector<uint64_t> posted, completed;
  make_run(rng, 3'000'000, posted, completed);
  const double got = peak_window_ticks(posted, completed, 100);
  EXPECT_GT(got, 0);
  // Spot check against windows that end at the signaled completions near the end.
  double some = 1e300;
  for (size_t j = 99; j < posted.size(); j += 100 * 997) {
    for (size_t i = 0; i <= j; i += 31) some = std::min(some, double(completed[j] - posted[i]) / double(j - i + 1));
  }
  EXPECT_LE(got, some);
}

TEST(PerfReport, PeakWindowOfNothingIsZero) {
  EXPECT_EQ(peak_window_ticks({}, {}, 100), 0);
}

}  // namespace
}  // namespace uroce::apps
