// The engine clock of DPDK programs: the TSC (rte_rdtsc) in nanoseconds since
// the clock was started. The one place in uroce that turns TSC cycles into ns
// (STYLE rule 16: the stack never reads a clock; the program's lcore passes
// now_ns() to uroce::poll). Data path: one rdtsc, one 64x64->128 multiply
// and a shift; no division, floating point or syscall.
#pragma once

#include <cstdint>

#include <rte_cycles.h>

namespace uroce::dpdk {

class TscClock {
 public:
  /// Starts the clock at 0 now. EAL must be up (rte_get_tsc_hz is measured by
  /// rte_eal_init). Control path.
  TscClock() : hz_(rte_get_tsc_hz()), tsc0_(rte_rdtsc()) {
    // ns = cycles * 1e9 / hz, as cycles * mult_ >> 32 (exact to 1 ns per ~4 s).
    mult_ = hz_ ? (uint64_t(1'000'000'000) << 32) / hz_ : 0;
  }

  /// Nanoseconds since construction.
  uint64_t now_ns() const { return to_ns(rte_rdtsc() - tsc0_); }
  /// Converts a TSC interval to nanoseconds.
  uint64_t to_ns(uint64_t cycles) const {
    return uint64_t((Uint128(cycles) * mult_) >> 32);
  }
  uint64_t hz() const { return hz_; }
  /// now_ns() of the TscClock at clock, in the form DeviceConfig::clock takes.
  static uint64_t read(const void* clock) { return static_cast<const TscClock*>(clock)->now_ns(); }

 private:
  __extension__ typedef unsigned __int128 Uint128;  // GCC/Clang builtin; no -Wpedantic noise

  uint64_t hz_;
  uint64_t tsc0_;
  uint64_t mult_ = 0;
};

}  // namespace uroce::dpdk
