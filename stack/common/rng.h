// Small, fast, portable pseudo-random numbers, the one copy in the tree:
// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014) for keys, seeds and stateless mixing, and
// xoshiro256** (Blackman and Vigna, https://prng.di.unimi.it/) seeded through
// splitmix64 for the fabric's fault injection and `uroce sim`. The standard
// library's distributions are not used because their output differs between
// library implementations; every value here is defined bit for bit, so one
// 64-bit seed reproduces a run anywhere. None of it is cryptographic.
#pragma once

#include <cstdint>

namespace uroce {

/// splitmix64's increment: 2^64 divided by the golden ratio, odd. Also a good
/// multiplier for spreading a small seed over all 64 bits.
inline constexpr uint64_t kSplitmix64Gamma = 0x9e3779b97f4a7c15ull;

/// splitmix64's output function: a bijective mix of the 64 bits of z.
inline constexpr uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// One step of splitmix64: advances state by the gamma and returns a
/// well-mixed value of the new state. Full period 2^64 over one word.
inline constexpr uint64_t splitmix64(uint64_t& state) { return splitmix64_mix(state += kSplitmix64Gamma); }

/// Stateless form: the value splitmix64 returns from state x (x is not
/// changed). A hash of x, for patterns indexed by position.
inline constexpr uint64_t splitmix64_of(uint64_t x) { return splitmix64(x); }

/// Mixes a seed and a stream number into an independent seed (per port, per QP).
inline constexpr uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  uint64_t s = seed ^ (stream * 0xd1b54a32d192ed03ull);
  splitmix64(s);
  return splitmix64(s);
}

/// Maps a uniform 64-bit value r to [0, n): the high half of r * n.
inline constexpr uint64_t scale(uint64_t r, uint64_t n) {
  __extension__ using U128 = unsigned __int128;
  return uint64_t(U128(r) * n >> 64);
}

/// xoshiro256**: 256 bits of state, period 2^256 - 1. Constructed or reseeded
/// from one 64-bit seed (its four words are four splitmix64 steps from the
/// seed, as the authors recommend), so equal seeds give equal sequences.
class Rng {
 public:
  explicit constexpr Rng(uint64_t seed = 0) { reseed(seed); }

  /// Restarts the sequence: afterwards next() returns what Rng(seed) would.
  constexpr void reseed(uint64_t seed) {
    uint64_t sm = seed;
    for (auto& w : s_) w = splitmix64(sm);
  }

  /// The next 64 uniform bits.
  constexpr uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform in [0, 1) with 53 random bits.
  double uniform01() { return double(next() >> 11) * 0x1.0p-53; }
  /// Uniform in [0, n) (Lemire's multiply-shift; n == 0 gives 0).
  uint64_t below(uint64_t n) { return scale(next(), n); }
  /// Uniform in [lo, hi], inclusive.
  uint64_t range(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }
  /// True with probability p (p <= 0: never, p >= 1: always).
  bool chance(double p) { return uniform01() < p; }

 private:
  static constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4]{};
};

}  // namespace uroce
