#include "stack/wire/aeth.h"

#include <array>

namespace uroce::wire {

std::string_view nak_code_name(uint8_t code) {
  static constexpr std::array<std::string_view, 5> kNames = {
      "PSN Sequence Error", "Invalid Request", "Remote Access Error",
      "Remote Operational Error", "Invalid RD Request"};
  return code < kNames.size() ? kNames[code] : "Reserved";
}

uint64_t rnr_timer_ns(uint8_t code) {
  // IBA Table 45, in units of 10 us; code 0 is the longest, 655.36 ms.
  static constexpr std::array<uint32_t, 32> kTens = {
      65536, 1,    2,    3,    4,    6,    8,     12,    16,    24,    32,
      48,    64,   96,   128,  192,  256,  384,   512,   768,   1024,  1536,
      2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return uint64_t(kTens[code & 0x1f]) * 10'000;
}

}  // namespace uroce::wire
