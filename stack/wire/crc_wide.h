// The 256-bit step of the avx2 kernel's fold (CrcKernel::kAvx2 in icrc.h):
// icrc.cc's folder hands it its runs of 128-byte rows. x86-64 only.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace uroce::wire::clmul {

// The four 128-bit lanes of a fold (clmul.h): their sum
// x0·x^384 + x1·x^256 + x2·x^128 + x3, x3 the latest block, times x^32 is
// the CRC of the input so far modulo P.
struct Lanes {
  __m128i x0;
  __m128i x1;
  __m128i x2;
  __m128i x3;
};

/// Continues the lanes `in` over n bytes at p (n a multiple of 128, at
/// least 128; any alignment) and returns them. blocks: skip part of each
/// long block (crc_wide.cc) rather than fold every row; faster on AMD Zen 5,
/// slower on the Intel core measured (docs/PERFORMANCE.md). Needs AVX2 and
/// VPCLMULQDQ (the caller checks); leaves the upper SIMD state clean.
Lanes fold_rows_wide(Lanes in, const uint8_t* p, size_t n, bool blocks);

}  // namespace uroce::wire::clmul

#endif
