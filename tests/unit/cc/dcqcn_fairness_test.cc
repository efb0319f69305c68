// Model check for stack/cc/dcqcn.cc: N DCQCN senders share one fluid
// bottleneck with RED-style ECN marking, and converge to fair shares
// (Jain's index >= 0.99). A sanity check of the control loop only: the queue
// is a deterministic fluid model in this file, not the packet fabric; the
// packet-level incast scenarios belong to `uroce sim` once the fabric marks ECN.
//
// Model (time step 1 us):
//   queue  q += (sum of rates - C) * dt, floored at 0 (lossless: PFC, no drops)
//   mark   p(q) = 0 below K_min, Pmax * (q - K_min)/(K_max - K_min) up to K_max,
//          1 above (the paper's switch settings: K_min 5 KB, K_max 200 KB,
//          Pmax 1 %)
//   Each flow accumulates expected marked bytes r_i * dt * p(q); every full
//   MTU of marks is one CE-marked packet at that flow's NP (CnpGenerator);
//   a CNP reaches the RP after a fixed feedback delay.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <vector>

#include <gtest/gtest.h>

#include "stack/cc/cnp.h"
#include "stack/cc/dcqcn.h"

namespace uroce::cc {
namespace {

constexpr uint64_t kG = 1'000'000'000;

struct FluidResult {
  std::array<double, 8> avg_gbps{};
  double jain = 0;
  double max_queue_kb = 0;
};

double jain_index(const double* x, int n) {
  double s = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    s += x[i];
    s2 += x[i] * x[i];
  }
  return s2 == 0 ? 0 : s * s / (n * s2);
}

// n flows with line rate `line`, flow i starts at i * stagger_us; runs for
// run_us and averages each flow's rate over the last measure_us.
FluidResult run_fluid(int n, const DcqcnParams& rp, const CnpParams& np, uint64_t line,
                      uint64_t capacity, uint64_t stagger_us, uint64_t run_us,
                      uint64_t measure_us) {
  constexpr double kKminBytes = 5 * 1024;
  constexpr double kKmaxBytes = 200 * 1024;
  constexpr double kPmax = 0.01;
  constexpr double kMtu = 1000;
  constexpr uint64_t kFeedbackDelayNs = 4'000;  // NP -> RP CNP latency
  constexpr uint64_t kDtNs = 1'000;

  const size_t nf = static_cast<size_t>(n);
  std::vector<Dcqcn> rps(nf, Dcqcn(line, rp));
  std::vector<CnpGenerator> nps(nf, CnpGenerator(np));
  std::vector<double> marks(nf, 0.0);
  std::vector<double> sent_bytes(nf, 0.0);
  std::vector<double> carry(nf, 0.0);
  std::vector<std::deque<uint64_t>> cnp_in_flight(nf);
  double q = 0;
  FluidResult res;

  for (uint64_t t = 0; t < run_us * 1000; t += kDtNs) {
    double total_bps = 0;
    for (int i = 0; i < n; ++i) {
      auto& d = rps[size_t(i)];
      auto& fl = cnp_in_flight[size_t(i)];
      while (!fl.empty() && fl.front() <= t) {
        d.on_cnp(fl.front());
        fl.pop_front();
      }
      d.on_timer(t);
      if (t < uint64_t(i) * stagger_us * 1000) continue;
      total_bps += double(d.rate_bps());
    }
    const double p = q <= kKminBytes   ? 0.0
                     : q >= kKmaxBytes ? 1.0
                                       : kPmax * (q - kKminBytes) / (kKmaxBytes - kKminBytes);
    for (int i = 0; i < n; ++i) {
      if (t < uint64_t(i) * stagger_us * 1000) continue;
      auto& d = rps[size_t(i)];
      const double bytes = double(d.rate_bps()) * double(kDtNs) / 8e9;
      // Whole bytes to the byte counter; the fraction carries over.
      carry[size_t(i)] += bytes;
      const uint64_t whole = uint64_t(carry[size_t(i)]);
      carry[size_t(i)] -= double(whole);
      d.on_bytes_sent(whole, t);
      if (t >= (run_us - measure_us) * 1000) sent_bytes[size_t(i)] += bytes;
      marks[size_t(i)] += bytes * p;
      while (marks[size_t(i)] >= kMtu) {
        marks[size_t(i)] -= kMtu;
        if (nps[size_t(i)].on_ce_marked(t)) cnp_in_flight[size_t(i)].push_back(t + kFeedbackDelayNs);
      }
    }
    q = std::max(0.0, q + (total_bps - double(capacity)) * double(kDtNs) / 8e9);
    res.max_queue_kb = std::max(res.max_queue_kb, q / 1024);
  }
  for (int i = 0; i < n; ++i)
    res.avg_gbps[size_t(i)] = sent_bytes[size_t(i)] * 8 / double(measure_us * 1000);
  res.jain = jain_index(res.avg_gbps.data(), n);
  return res;
}

void print(const char* name, int n, const FluidResult& r) {
  std::printf("%s: jain %.5f, max queue %.1f KB, Gb/s:", name, r.jain, r.max_queue_kb);
  for (int i = 0; i < n; ++i) std::printf(" %.3f", r.avg_gbps[size_t(i)]);
  std::printf("\n");
}

double total_gbps(const FluidResult& r, int n) {
  double total = 0;
  for (int i = 0; i < n; ++i) total += r.avg_gbps[size_t(i)];
  return total;
}

TEST(DcqcnFairness, FourStaggeredFlowsConvergeWithPaperParams) {
  // Events: 4 flows at 100 Gb/s into a 100 Gb/s bottleneck, starting 1 ms
  // apart; the paper's RP parameters and N = 50 us CNP interval; 100 ms run,
  // the last 50 ms measured.
  // Expect: Jain's index >= 0.99, the link used (> 90 Gb/s in total) and the
  // queue held near the marking band (< 1 MB).
  const FluidResult r = run_fluid(4, DcqcnParams::paper(), CnpParams{.min_time_between_cnps = 50},
                                  100 * kG, 100 * kG, 1000, 100'000, 50'000);
  print("paper", 4, r);
  EXPECT_GE(r.jain, 0.99);
  EXPECT_GT(total_gbps(r, 4), 90.0);
  EXPECT_LT(r.max_queue_kb, 1024.0);
}

TEST(DcqcnFairness, EightStaggeredFlowsConvergeWithPaperParams) {
  // Events: as above with 8 flows. Expect: Jain >= 0.99, > 90 Gb/s, queue < 1 MB.
  const FluidResult r = run_fluid(8, DcqcnParams::paper(), CnpParams{.min_time_between_cnps = 50},
                                  100 * kG, 100 * kG, 1000, 100'000, 50'000);
  print("paper", 8, r);
  EXPECT_GE(r.jain, 0.99);
  EXPECT_GT(total_gbps(r, 8), 90.0);
  EXPECT_LT(r.max_queue_kb, 1024.0);
}

// Known gap, kept visible: with the ConnectX firmware defaults this fluid
// model reaches Jain 0.947 (22.2 / 22.2 / 20.5 / 35.2 Gb/s over the last
// 50 ms), not 0.99. With the byte counter in 64-byte units (2 MiB) and RT
// clamped after a byte-counter increase, recovery no longer outruns the cuts
// (Jain was about 0.5 with a 32 KiB counter), but the 1 us alpha period lets
// alpha decay between CNPs (one CNP per flow at most every 4 us), so each cut
// is small and the flows equalise slowly. The packet-level runs
// (`tests/cc/report.sh`, docs/CC.md) are the reference for the figures.
TEST(DcqcnFairness, DISABLED_FourStaggeredFlowsConvergeWithConnectXDefaults) {
  // Events: as the paper case, with ConnectX RP/NP defaults.
  // Expect: Jain >= 0.99 (fails today: see above).
  const FluidResult r = run_fluid(4, DcqcnParams::connectx(), CnpParams{}, 100 * kG, 100 * kG,
                                  1000, 100'000, 50'000);
  print("connectx", 4, r);
  EXPECT_GE(r.jain, 0.99);
  EXPECT_GT(total_gbps(r, 4), 90.0);
}

}  // namespace
}  // namespace uroce::cc
