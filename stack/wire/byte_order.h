// Big-endian integer types for wire headers. Each is a byte array (alignof 1),
// readable and writable only through get()/set(), so byte order cannot be
// forgotten and a packed header never needs #pragma pack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace uroce::wire {

template <typename T, size_t N>
struct BigEndian {
  uint8_t b[N];

  // Where the field is as wide as T, one load or store and a byte swap: GCC
  // left the byte loop a loop for 8 bytes (a RETH's VA cost eight dependent
  // shifts in wire::parse). The loop stays for constant evaluation and be24.
  constexpr T get() const {
    if constexpr (N == sizeof(T) && N > 1) {
      if (!std::is_constant_evaluated()) {
        T v;
        std::memcpy(&v, b, N);
        return byteswap(v);
      }
    }
    T v = 0;
    for (size_t i = 0; i < N; ++i) v = T(v << 8) | b[i];
    return v;
  }
  constexpr void set(T v) {
    if constexpr (N == sizeof(T) && N > 1) {
      if (!std::is_constant_evaluated()) {
        v = byteswap(v);
        std::memcpy(b, &v, N);
        return;
      }
    }
    for (size_t i = N; i-- > 0;) {
      b[i] = uint8_t(v);
      v = T(uint64_t(v) >> 8);
    }
  }

 private:
  static T byteswap(T v) {
    if constexpr (N == 2) return T(__builtin_bswap16(uint16_t(v)));
    if constexpr (N == 4) return T(__builtin_bswap32(uint32_t(v)));
    if constexpr (N == 8) return T(__builtin_bswap64(uint64_t(v)));
    return v;
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
