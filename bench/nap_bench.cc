// What one nap of a progress thread costs this host: the verbs library's
// engine thread (apps/libibverbs/provider.cc) sleeps as here, with a timer
// slack of 1 us, and a nap's CPU time is taken from the program that shares
// its CPU. Where a nap costs tens of microseconds of CPU (a guest whose
// timer and context switch exit to the hypervisor), it bounds how often that
// thread can look at the link: the bound of ib_write_lat in docs/VERBS.md,
// "Cost".
//
//   nap/<ns>  one std::this_thread::sleep_for(<ns>): Time is its wall
//             time, CPU the calling thread's CPU time
#include <benchmark/benchmark.h>

#include <sys/prctl.h>

#include <chrono>
#include <thread>

namespace {

void bm_nap(benchmark::State& state) {
  prctl(PR_SET_TIMERSLACK, 1000UL);
  const std::chrono::nanoseconds nap(state.range(0));
  for (auto _ : state) std::this_thread::sleep_for(nap);
  prctl(PR_SET_TIMERSLACK, 0UL);  // back to the thread's default
}

}  // namespace

BENCHMARK(bm_nap)->Name("nap")->Arg(2'000)->Arg(5'000)->Arg(20'000)->Arg(200'000)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
