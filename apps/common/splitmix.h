// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014; the finaliser as Vigna published it): the
// tools' cheap, stateless way from a seed and an index to the bytes of a
// test pattern, so that each side computes what the other must have sent.
#pragma once

#include <cstdint>

namespace uroce::apps {

inline constexpr uint64_t kSplitmixGamma = 0x9e3779b97f4a7c15ull;

inline uint64_t splitmix(uint64_t x) {
  x += kSplitmixGamma;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace uroce::apps
