// The wide step (CrcKernel::kAvx2): icrc.cc's folding with VPCLMULQDQ on
// 256-bit registers, each holding two 128-bit lanes, for CPUs that have it
// with AVX2 but not AVX-512 (AMD Zen 3, Intel Alder Lake client cores),
// and, between 196 bytes and 2 KB, for the avx512 kernel.
// Four registers are eight lanes over 128-byte rows, each folded by x^1024
// per row: 16 bytes per VPCLMULQDQ, twice the 128-bit fold's 8.
//
// It continues the folder's four lanes x0..x3 (x3 the latest block) and
// returns them, so the headers, the short spans, the tail and the reduction
// stay the folder's. In: the four lanes fold by x^512 into the first 64
// bytes (the folder's four-block step, two lanes per register), and the
// next 64 bytes load as lanes 4..7 unfolded: eight lanes L0..L7 whose sum
// Σ Li·x^(128·(7-i)) is the input so far. Out: Li·x^512 + L(i+4) are again
// four lanes with the same sum.

#include "stack/wire/crc_wide.h"

#if defined(__x86_64__)
#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>

#include "stack/wire/clmul.h"

namespace uroce::wire::clmul {
namespace {

// tune=znver3: whole 256-bit unaligned loads (GCC's generic tuning splits
// each into two 128-bit halves, two more instructions per register).
#define UROCE_TARGET_WIDE __attribute__((target("avx2,vpclmulqdq,pclmul,tune=znver3")))

UROCE_TARGET_WIDE inline __m256i operands_wide(OperandPair k) {
  return _mm256_set_epi64x(int64_t(k.hi), int64_t(k.lo), int64_t(k.hi), int64_t(k.lo));
}

UROCE_TARGET_WIDE inline __m256i fold_wide(__m256i y, __m256i k) {
  return _mm256_xor_si256(_mm256_clmulepi64_epi128(y, k, 0x00), _mm256_clmulepi64_epi128(y, k, 0x11));
}

UROCE_TARGET_WIDE inline __m256i load_wide(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// ---------------------------------------------------------------------------
// Skipping bytes: a multiple of P with few terms. The multiplier bounds
// the fold at 8 bytes a cycle on 256-bit registers (two VPCLMULQDQs per 32
// bytes, one issued every two cycles: docs/PERFORMANCE.md), while the load
// and XOR pipes sit mostly idle. So part of a long run is not folded at
// all, but moved onto later bytes with loads and XORs alone (the idea of
// S. Russell's "Chorba" CRC, 2024).
//
// With y = x^8 (one byte), y^2203 + y^404 + y^53 + y^52 + 1 is a multiple
// of P (found by a search over sums of three powers; checked below), so
// y^2203 ≡ y^404 + y^53 + y^52 + 1 (mod P). Bytes C at stream offset s, at
// least 2,203 bytes before the end, add to the CRC what C XORed in at
// offsets s + 2203 - e adds, one copy for each term y^e of the right side
// (a later offset is a lower degree). So the bytes at the start of a
// block (A) count as zeros once their four copies are XORed into the
// kSkipRows rows after them, where every copy lands; the lanes jump over
// the zeros with one fold. The rows are 2,304 bytes whatever A is (the
// copies of A's last byte land up to 2,202 bytes past its end), and A can
// be up to 1,792 bytes (the shortest shift, 1,799, must pass A's end).
// The multiplier folds the rows alone; each 32 bytes of them take up to
// four more loads and XORs. A copy that covers only part of 32 bytes is
// shifted or masked in a register, from loads inside the block.
//
// Two block sizes: 4,096 bytes (A 1,792: a 4 KB payload's ICRC run) for
// every whole one, then 3,968 (A 1,664: a 4 KB CRC's run, see below) where
// the rest still holds one. More copies let A grow, but cost more loads
// than they save folds (on Zen 5, five copies of 1,920 bytes run no faster
// than four of 1,792, seven of 1,920 slower: docs/PERFORMANCE.md).

constexpr size_t kSkipDegree = 2203;
constexpr std::array<size_t, 3> kSkipTerms = {52, 53, 404};
// The offsets of the copies from the bytes: one per term of the right side.
constexpr std::array<ptrdiff_t, kSkipTerms.size() + 1> kSkipShifts = [] {
  std::array<ptrdiff_t, kSkipTerms.size() + 1> s{};
  s[0] = kSkipDegree;  // the term y^0
  for (size_t i = 0; i < kSkipTerms.size(); ++i) s[i + 1] = ptrdiff_t(kSkipDegree - kSkipTerms[i]);
  return s;
}();
constexpr size_t kSkipRows = (kSkipDegree + 127) / 128;  // the rows after A

consteval bool skip_poly_divides() {
  uint32_t sum = xpow_mod(8 * kSkipDegree) ^ xpow_mod(0);
  for (const size_t e : kSkipTerms) sum ^= xpow_mod(8 * unsigned(e));
  return sum == 0;
}
static_assert(skip_poly_divides());
static_assert(*std::max_element(kSkipShifts.begin(), kSkipShifts.end()) <= ptrdiff_t(128 * kSkipRows));

// A block that skips its first `skip` bytes (A), then folds the rows after
// them. (A struct passed as a template argument, not a class template with
// a constant member: clang 14 refuses consteval calls on template
// parameters.)
struct SkipBlock {
  size_t skip;       // A: whole rows, all of whose copies land past it
  size_t bytes;      // A, then the rows
  OperandPair over;  // the fold over A, to the row after it
};
consteval SkipBlock skip_block(size_t skip) {
  return {skip, skip + 128 * kSkipRows, fold_pair(8 * unsigned(skip + 128))};
}
constexpr SkipBlock kLongBlock = skip_block(1792);   // A: 14 rows
constexpr SkipBlock kShortBlock = skip_block(1664);  // A: 13 rows
// A CRC of 4,096 bytes folds a run of 3,968 (its first 16 bytes and last
// 112 go to the 128-bit fold); an ICRC of a 4,096-byte payload, 4,096.
static_assert(kLongBlock.bytes == 4096 && kShortBlock.bytes == 3968);

// 32 zeros, then 32 ones: a 32-byte load at k has ones in bytes 32 - k on.
alignas(64) constexpr std::array<uint8_t, 64> kEdgeMask = [] {
  std::array<uint8_t, 64> m{};
  for (size_t i = 32; i < 64; ++i) m[i] = 0xff;
  return m;
}();

// The block's code is unrolled whole (its loads' offsets and masks are
// constants); GCC does not inline that much on its own.
#define UROCE_WIDE_INLINE UROCE_TARGET_WIDE inline __attribute__((always_inline))

// v with byte i moved to i + kS (0 < kS < 32), zeros below.
template <int kS>
UROCE_WIDE_INLINE __m256i shift_up_wide(__m256i v) {
  const __m256i lo_up = _mm256_permute2x128_si256(v, v, 0x08);  // zeros, then bytes 0..15
  if constexpr (kS < 16) {
    return _mm256_alignr_epi8(v, lo_up, 16 - kS);
  } else if constexpr (kS == 16) {
    return lo_up;
  } else {
    return _mm256_slli_si256(lo_up, kS - 16);
  }
}

// The 32 bytes from kW on of block kB's A (at a), zeros outside A; reads
// no byte before A, and after it only the block's.
template <SkipBlock kB, ptrdiff_t kW>
UROCE_WIDE_INLINE __m256i skip_bytes(const uint8_t* a) {
  constexpr auto kLen = ptrdiff_t(kB.skip);
  if constexpr (kW <= -32 || kW >= kLen) {
    return _mm256_setzero_si256();
  } else if constexpr (kW < 0) {
    return shift_up_wide<-kW>(load_wide(a));
  } else if constexpr (kW + 32 > kLen) {  // bytes kLen - kW on are past A's end
    return _mm256_andnot_si256(load_wide(kEdgeMask.data() + 32 - kLen + kW), load_wide(a + kW));
  } else {
    return load_wide(a + kW);
  }
}

// The 32 bytes at kAt from A (at a), a row after A, with A's copies XORed in.
template <SkipBlock kB, ptrdiff_t kAt, size_t... kI>
UROCE_WIDE_INLINE __m256i skip_row_bytes(const uint8_t* a, std::index_sequence<kI...>) {
  return (load_wide(a + kAt) ^ ... ^ skip_bytes<kB, kAt - kSkipShifts[kI]>(a));
}

// Row kR after A into y0..y3: folded by x^1024 first, but for row 0 (y0..y3
// come to it folded over A).
template <SkipBlock kB, size_t kR>
UROCE_WIDE_INLINE void fold_skip_row(__m256i& y0, __m256i& y1, __m256i& y2, __m256i& y3, const uint8_t* a) {
  constexpr auto kAt = ptrdiff_t(kB.skip + 128 * kR);
  constexpr auto kCopies = std::make_index_sequence<kSkipShifts.size()>();
  if constexpr (kR > 0) {
    const __m256i k1024 = operands_wide(kFold1024);
    y0 = fold_wide(y0, k1024);
    y1 = fold_wide(y1, k1024);
    y2 = fold_wide(y2, k1024);
    y3 = fold_wide(y3, k1024);
  }
  y0 = _mm256_xor_si256(y0, skip_row_bytes<kB, kAt>(a, kCopies));
  y1 = _mm256_xor_si256(y1, skip_row_bytes<kB, kAt + 32>(a, kCopies));
  y2 = _mm256_xor_si256(y2, skip_row_bytes<kB, kAt + 64>(a, kCopies));
  y3 = _mm256_xor_si256(y3, skip_row_bytes<kB, kAt + 96>(a, kCopies));
}

// The kSkipRows rows after A (at a) into y0..y3.
template <SkipBlock kB, size_t... kR>
UROCE_WIDE_INLINE void fold_skip_rows(__m256i& y0, __m256i& y1, __m256i& y2, __m256i& y3, const uint8_t* a,
                                      std::index_sequence<kR...>) {
  (fold_skip_row<kB, kR>(y0, y1, y2, y3, a), ...);
}

// Block kB at a into y0..y3; `first`: lanes 0..3 (y0, y1) are still zeros.
template <SkipBlock kB>
UROCE_WIDE_INLINE void fold_skip_block(__m256i& y0, __m256i& y1, __m256i& y2, __m256i& y3, const uint8_t* a,
                                       bool first) {
  static_assert(kB.skip % 128 == 0 && *std::min_element(kSkipShifts.begin(), kSkipShifts.end()) >= ptrdiff_t(kB.skip));
  const __m256i k_over = operands_wide(kB.over);
  if (!first) {
    y0 = fold_wide(y0, k_over);
    y1 = fold_wide(y1, k_over);
  }
  y2 = fold_wide(y2, k_over);
  y3 = fold_wide(y3, k_over);
  fold_skip_rows<kB>(y0, y1, y2, y3, a, std::make_index_sequence<kSkipRows>());
}

}  // namespace

// With blocks, each whole kLongBlock skips its bytes A, then a kShortBlock
// if the rest still holds one; the rows after them (all rows without) fold.
// Ends with VZEROUPPER (the compiler's, as for every function that uses the
// upper halves): the caller is SSE code.
UROCE_TARGET_WIDE Lanes fold_rows_wide(Lanes in, const uint8_t* p, size_t n, bool blocks) {
  const __m256i k512 = operands_wide(kFold512);
  const __m256i k1024 = operands_wide(kFold1024);
  const __m256i in01 = _mm256_set_m128i(in.x1, in.x0);
  const __m256i in23 = _mm256_set_m128i(in.x3, in.x2);
  __m256i y0;
  __m256i y1;
  __m256i y2;
  __m256i y3;
  size_t i;
  if (blocks && n >= kShortBlock.bytes) {  // the four lanes are lanes 4..7 of eight, 0..3 zeros
    y0 = _mm256_setzero_si256();
    y1 = _mm256_setzero_si256();
    y2 = in01;
    y3 = in23;
    i = 0;
  } else {
    y0 = _mm256_xor_si256(fold_wide(in01, k512), load_wide(p));
    y1 = _mm256_xor_si256(fold_wide(in23, k512), load_wide(p + 32));
    y2 = load_wide(p + 64);
    y3 = load_wide(p + 96);
    i = 128;
  }
  for (; blocks && n - i >= kLongBlock.bytes; i += kLongBlock.bytes) {
    fold_skip_block<kLongBlock>(y0, y1, y2, y3, p + i, i == 0);
  }
  if (blocks && n - i >= kShortBlock.bytes) {
    fold_skip_block<kShortBlock>(y0, y1, y2, y3, p + i, i == 0);
    i += kShortBlock.bytes;
  }
  for (; i < n; i += 128) {
    y0 = _mm256_xor_si256(fold_wide(y0, k1024), load_wide(p + i));
    y1 = _mm256_xor_si256(fold_wide(y1, k1024), load_wide(p + i + 32));
    y2 = _mm256_xor_si256(fold_wide(y2, k1024), load_wide(p + i + 64));
    y3 = _mm256_xor_si256(fold_wide(y3, k1024), load_wide(p + i + 96));
  }
  y0 = _mm256_xor_si256(fold_wide(y0, k512), y2);
  y1 = _mm256_xor_si256(fold_wide(y1, k512), y3);
  return {_mm256_castsi256_si128(y0), _mm256_extracti128_si256(y0, 1), _mm256_castsi256_si128(y1),
          _mm256_extracti128_si256(y1, 1)};
}

}  // namespace uroce::wire::clmul
#endif
