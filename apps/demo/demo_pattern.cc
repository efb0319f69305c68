// `uroce demo`'s data patterns: message k of a case is a run of 64-bit
// words derived from the case's seed and k, its last byte a tag; filling and
// checking them, the text of a mismatch, and the final value of the atomic
// word after a case's CAS / FAA. Data path (fill and check run per message).
#include "apps/demo/demo.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_cycles.h>

#include <uroce/verbs.h>

namespace uroce::apps::demo {

// Message bytes: 64-bit words key, key + G, key + 2G, ... (little-endian), the
// last byte replaced by the tag. Cheap to make and to check (the compiler
// vectorises both loops), and any misplaced, stale or foreign byte shows.
void fill(uint8_t* p, uint32_t len, uint64_t key, uint8_t tag) {
  uint64_t w = key;
  uint32_t i = 0;
  for (; i + 8 <= len; i += 8, w += kSplitmix64Gamma) std::memcpy(p + i, &w, 8);
  for (uint32_t b = 0; i < len; ++i, ++b) p[i] = uint8_t(w >> (8 * b));
  if (len) p[len - 1] = tag;
}

/// Offset of the first byte that differs from fill(len, key, tag), or -1.
int64_t check(const uint8_t* p, uint32_t len, uint64_t key, uint8_t tag) {
  if (len == 0) return -1;
  uint64_t w = key;
  uint32_t i = 0;
  const uint32_t body = len - 1;  // the last byte is the tag
  for (; i + 8 <= body; i += 8, w += kSplitmix64Gamma) {
    uint64_t got;
    std::memcpy(&got, p + i, 8);
    if (got != w) {
      for (uint32_t b = 0; b < 8; ++b) {
        if (p[i + b] != uint8_t(w >> (8 * b))) return i + b;
      }
    }
  }
  for (uint32_t b = 0; i < body; ++i, ++b) {
    if (p[i] != uint8_t(w >> (8 * b))) return i;
  }
  return p[len - 1] == tag ? -1 : int64_t(len - 1);
}

/// "byte OFF of LEN differs" for a failed check of message k, with what the
/// bytes are instead: another message's (which one), zeros, or unknown. A
/// stale, misplaced or duplicated message then names itself in the report.
std::string mismatch(const uint8_t* p, uint32_t len, uint64_t seed, uint64_t k, int64_t off) {
  std::string what = "bytes of no message within 4096 of it";
  if (std::all_of(p, p + len, [](uint8_t b) { return b == 0; })) {
    what = "all zero";
  } else {
    const uint64_t lo = k > 4096 ? k - 4096 : 0;
    for (uint64_t j = lo; j < k + 4096; ++j) {
      if (j != k && check(p, len, msg_key(seed, j), msg_tag(j)) < 0) {
        what = strf("message %llu's bytes", (unsigned long long)j);
        break;
      }
    }
  }
  const uint8_t want = off == int64_t(len) - 1 ? msg_tag(k) : uint8_t((msg_key(seed, k) + kSplitmix64Gamma * uint64_t(off / 8)) >> (8 * (off % 8)));
  return strf("byte %lld of %u differs: 0x%02x, want 0x%02x; it holds %s", (long long)off, len, p[off], want, what.c_str());
}

uint64_t atomic_final(uint64_t seed, WrOpcode op, uint64_t count) {
  if (op == WrOpcode::kAtomicCmpAndSwp) return cas_value(seed, count);
  uint64_t v = atomic_initial(seed);
  for (uint64_t k = 0; k < count; ++k) v += faa_add(seed, k);
  return v;
}

}  // namespace uroce::apps::demo
