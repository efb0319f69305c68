// Big-endian integer types for wire headers. Each is a byte array (alignof 1),
// readable and writable only through get()/set(), so byte order cannot be
// forgotten and a packed header never needs #pragma pack.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uroce::wire {

template <typename T, size_t N>
struct BigEndian {
  uint8_t b[N];

  constexpr T get() const {
    T v = 0;
    for (size_t i = 0; i < N; ++i) v = T(v << 8) | b[i];
    return v;
  }
  constexpr void set(T v) {
    for (size_t i = N; i-- > 0;) {
      b[i] = uint8_t(v);
      v = T(uint64_t(v) >> 8);
    }
  }
};

using be16 = BigEndian<uint16_t, 2>;
using be24 = BigEndian<uint32_t, 3>;
using be32 = BigEndian<uint32_t, 4>;
using be64 = BigEndian<uint64_t, 8>;

static_assert(sizeof(be16) == 2 && alignof(be16) == 1);
static_assert(sizeof(be32) == 4 && alignof(be32) == 1);
static_assert(sizeof(be64) == 8 && alignof(be64) == 1);

}  // namespace uroce::wire
