#include "stack/wire/icrc.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "stack/wire/clmul.h"
#include "stack/wire/crc_wide.h"
#include "stack/wire/headers.h"

namespace uroce::wire {
namespace {

// ISA-L picks its AVX-512 kernel at run time where the CPU has one (for 256
// bytes and more), and that kernel returns without VZEROUPPER. uroce is SSE
// code (DPDK's pkg-config adds -march=corei7), and SSE code that runs while
// the upper ZMM state is dirty is slow: an ICRC over a 1 KB payload took
// 168 ns instead of 36 ns on a Xeon with AVX-512 (bench/crc_bench.cc,
// docs/PERFORMANCE.md). So clear that state after each ISA-L call that ends a CRC.
#if defined(__x86_64__)
__attribute__((target("avx"))) void zero_upper_simd() { _mm256_zeroupper(); }
const bool kCpuHasAvx = [] {
  __builtin_cpu_init();  // may run before libgcc's own constructor
  return __builtin_cpu_supports("avx") != 0;
}();
#endif

// Ends a chain of ISA-L calls: clears the upper SIMD state where there is one.
void leave_simd_clean() {
#if defined(__x86_64__)
  if (kCpuHasAvx) zero_upper_simd();
#endif
}

// crc32_gzip_refl, leaving the SIMD state clean.
uint32_t isal_crc32(uint32_t crc, const uint8_t* p, size_t n) {
  crc = crc32_gzip_refl(crc, p, n);
  leave_simd_clean();
  return crc;
}

// A chainable CRC-32 (zlib convention). ISA-L's AVX-512 kernel leaves the
// upper SIMD state dirty: after the last call of a chain of those, call
// leave_simd_clean() (icrc_isal's kDirty).
using CrcFn = uint32_t (*)(uint32_t crc, const uint8_t* p, size_t n);

#if defined(__x86_64__)
// Two of the kernels crc32_gzip_refl chooses from (ISA-L 2.30 exports them,
// crc.h does not declare them): the SSE one it takes on CPUs without
// AVX-512, and the AVX-512 one. Each is a whole CRC of any length.
extern "C" uint32_t crc32_gzip_refl_by8(uint32_t crc, const unsigned char* p, uint64_t n);
extern "C" uint32_t crc32_gzip_refl_by16_10(uint32_t crc, const unsigned char* p, uint64_t n);
uint32_t isal_by8(uint32_t crc, const uint8_t* p, size_t n) { return crc32_gzip_refl_by8(crc, p, n); }
uint32_t isal_by16_10(uint32_t crc, const uint8_t* p, size_t n) { return crc32_gzip_refl_by16_10(crc, p, n); }
uint32_t isal_by16_10_clean(uint32_t crc, const uint8_t* p, size_t n) {
  crc = crc32_gzip_refl_by16_10(crc, p, n);
  zero_upper_simd();
  return crc;
}
#endif
uint32_t isal_dispatched(uint32_t crc, const uint8_t* p, size_t n) { return crc32_gzip_refl(crc, p, n); }

// A17.3.3: the 8 bytes of 0xFF that stand in for the LRH.
constexpr std::array<uint8_t, 8> kLrhOnes = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// CRC state after the 8 bytes of ones.
const uint32_t kLrhSeed = isal_crc32(0, kLrhOnes.data(), kLrhOnes.size());

// The variant fields of the headers (A17.3.3; A16 for the GRH) as ones over
// zeros, to OR over a copy of the headers: `len` bytes from the first byte of
// the IP header (or GRH) to the end of the BTH, after kMaskLead zero bytes and
// followed by 16 zeros, so that a 16-byte load at any header offset from
// -kMaskLead to len - 1 stays in the table.
constexpr size_t kMaskLead = 24;
constexpr size_t kMaxMasked = sizeof(Ipv6Hdr) + sizeof(UdpHdr) + sizeof(Bth);
struct HeaderMask {
  std::array<uint8_t, kMaskLead + kMaxMasked + 16> bytes{};
  size_t len = 0;
};

consteval HeaderMask header_mask(L3Kind kind) {
  HeaderMask m;
  uint8_t* h = m.bytes.data() + kMaskLead;
  size_t bth_at;
  if (kind == L3Kind::kIpv4) {
    bth_at = sizeof(Ipv4Hdr) + sizeof(UdpHdr);
    h[offsetof(Ipv4Hdr, tos)] = 0xff;
    h[offsetof(Ipv4Hdr, ttl)] = 0xff;
    h[offsetof(Ipv4Hdr, checksum)] = h[offsetof(Ipv4Hdr, checksum) + 1] = 0xff;
  } else {
    bth_at = sizeof(Ipv6Hdr) + (kind == L3Kind::kIpv6 ? sizeof(UdpHdr) : 0);
    const size_t tc_flow = offsetof(Ipv6Hdr, ver_tc_flow);  // all but the 4 version bits
    h[tc_flow] = 0x0f;
    h[tc_flow + 1] = h[tc_flow + 2] = h[tc_flow + 3] = 0xff;
    h[offsetof(Ipv6Hdr, hop_limit)] = 0xff;
  }
  if (kind != L3Kind::kGrh) {
    const size_t csum = bth_at - sizeof(UdpHdr) + offsetof(UdpHdr, checksum);
    h[csum] = h[csum + 1] = 0xff;
  }
  h[bth_at + offsetof(Bth, qpn_word)] = 0xff;  // FECN, BECN, resv6
  m.len = bth_at + sizeof(Bth);
  return m;
}

// Indexed by L3Kind.
constexpr std::array<HeaderMask, 3> kHeaderMasks = {
    header_mask(L3Kind::kIpv4), header_mask(L3Kind::kIpv6), header_mask(L3Kind::kGrh)};

// The ICRC by an ISA-L kernel: from the folded ones over a masked copy of
// the headers (of constant length, so the copy is a few moves, not a call),
// then over the rest in place. kDirty: clear the upper SIMD state after.
template <L3Kind kKind, CrcFn kCrc, bool kDirty>
uint32_t icrc_isal(std::span<const uint8_t> l3, std::span<const std::span<const uint8_t>> rest) {
  constexpr const HeaderMask& kMask = kHeaderMasks[size_t(kKind)];
  std::array<uint8_t, kMask.len> hdr;
  std::memcpy(hdr.data(), l3.data(), hdr.size());
  for (size_t i = 0; i < hdr.size(); ++i) hdr[i] |= kMask.bytes[kMaskLead + i];
  uint32_t crc = kCrc(kLrhSeed, hdr.data(), hdr.size());
  crc = kCrc(crc, l3.data() + hdr.size(), l3.size() - hdr.size());
  for (const std::span<const uint8_t> s : rest) crc = kCrc(crc, s.data(), s.size());
  if constexpr (kDirty) leave_simd_clean();
  return crc;
}

template <CrcFn kCrc, bool kDirty>
uint32_t icrc_isal(L3Kind kind, std::span<const uint8_t> l3, std::span<const std::span<const uint8_t>> rest) {
  switch (kind) {
    case L3Kind::kIpv4: return icrc_isal<L3Kind::kIpv4, kCrc, kDirty>(l3, rest);
    case L3Kind::kIpv6: return icrc_isal<L3Kind::kIpv6, kCrc, kDirty>(l3, rest);
    case L3Kind::kGrh: return icrc_isal<L3Kind::kGrh, kCrc, kDirty>(l3, rest);
  }
  return 0;  // not reached: every L3Kind is handled above
}

#if defined(__x86_64__)
// ---------------------------------------------------------------------------
// The short path: carry-less multiplication folding, 16 bytes at a time
// (the notation and the constants: clmul.h).

using clmul::kBarrett;
using clmul::kFold128;
using clmul::kFold256;
using clmul::kFold384;
using clmul::kFold512;
using clmul::kPoly;
using clmul::kReduce;
using clmul::fold_rows_wide;
using clmul::Lanes;
using clmul::OperandPair;
using clmul::reflect;

__attribute__((target("pclmul"))) inline __m128i operands(OperandPair k) {
  return _mm_set_epi64x(int64_t(k.hi), int64_t(k.lo));
}

__attribute__((target("pclmul"))) inline __m128i fold(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

// R = M(x)·x^32 mod P, reflected (no initial or final inversion), of an
// input folded into four lanes: block k of the input went into lane k mod 4,
// and x3 holds the lane of the last block, x2 the one before, and so on.
__attribute__((target("pclmul"))) uint32_t reduce_lanes(__m128i x0, __m128i x1, __m128i x2, __m128i x3) {
  // Join the lanes: X = x0·x^384 + x1·x^256 + x2·x^128 + x3.
  __m128i x = _mm_xor_si128(_mm_xor_si128(fold(x0, operands(kFold384)), fold(x1, operands(kFold256))),
                            _mm_xor_si128(fold(x2, operands(kFold128)), x3));

  // R = X·x^32 mod P, from 128 bits to 32.
  // (a) X·x^32 = H·x^96 + L·x^32 ≡ Z: H·(x^96 mod P) has at most 96 bits
  //     (bits 32..127), and L·x^32 is L moved to bits 32..95.
  const __m128i k96_64 = operands(kReduce);
  const __m128i z = _mm_xor_si128(_mm_clmulepi64_si128(x, k96_64, 0x00), _mm_slli_si128(_mm_srli_si128(x, 8), 4));
  // (b) Z = Zh·x^64 + Zl with Zh of 32 bits (bits 32..63; bits 0..31 are
  //     zero): U = Zh·(x^64 mod P) + Zl, at most 64 bits, in bits 64..127.
  const __m128i u = _mm_xor_si128(_mm_clmulepi64_si128(z, k96_64, 0x10), z);
  // (c) Barrett: with U = Uh·x^32 + Ul, Q = floor(Uh·mu / x^32) is
  //     floor(U / P), and R = U - Q·P = Ul + (Q·P mod x^32). With the 64-bit
  //     operands mu·x^31 and P·x^31 (each 33 bits reflected), Q lands in bits
  //     0..31 of the first product (Ul·mu cannot reach them), and Q·P mod x^32
  //     in bits 32..63 of the second. (mu's x^0 term cannot change Q: Uh·1
  //     lies below x^32.)
  const __m128i mu_p = operands(kBarrett);
  const __m128i q = _mm_and_si128(_mm_clmulepi64_si128(u, mu_p, 0x01), _mm_set_epi32(0, 0, 0, -1));
  const __m128i qp = _mm_clmulepi64_si128(q, mu_p, 0x10);
  return uint32_t(_mm_extract_epi32(u, 3)) ^ uint32_t(_mm_extract_epi32(qp, 1));
}

// ---------------------------------------------------------------------------
// Folding the ICRC input of a short frame (the ones, the masked headers, the
// rest in any number of spans) as it is read. The input is cut into 16-byte
// blocks aligned to its end (zeros lead it: leading zeros leave M(x), hence
// the CRC, unchanged); each block is built in a register, from one unaligned
// load where it lies in one span, and folded into the lanes at once. Nothing
// is stored: gathering the input into a stack buffer first cost more than the
// folding (a 16-byte load of bytes from several stores waits for them to
// retire; docs/PERFORMANCE.md).

__m128i byte_index() { return _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }

// The first k (< 16) bytes at p in bytes 0..k-1, zeros above; reads p[0..k) only.
__m128i load_short(const uint8_t* p, size_t k) {
  uint64_t lo = 0;
  uint64_t hi = 0;
  uint32_t w0;
  uint32_t w1;
  if (k >= 8) {
    std::memcpy(&lo, p, 8);
    if (k > 8) {
      std::memcpy(&hi, p + k - 8, 8);  // overlaps lo; drop the overlap
      hi >>= 8 * (16 - k);
    }
  } else if (k >= 4) {
    std::memcpy(&w0, p, 4);
    std::memcpy(&w1, p + k - 4, 4);  // may overlap w0 with the same bytes
    lo = w0 | uint64_t(w1) << (8 * (k - 4));
  } else if (k > 0) {
    lo = p[0] | uint64_t(p[k / 2]) << (8 * (k / 2)) | uint64_t(p[k - 1]) << (8 * (k - 1));
  }
  return _mm_set_epi64x(int64_t(hi), int64_t(lo));
}

// v with byte i moved to i + k (k <= 16), zeros below.
__m128i shift_up(__m128i v, size_t k) {
  return _mm_shuffle_epi8(v, _mm_sub_epi8(byte_index(), _mm_set1_epi8(char(k))));  // negative: zero
}

// v with byte i moved to i - k (k <= 16), zeros above.
__m128i shift_down(__m128i v, size_t k) {
  const __m128i idx = _mm_add_epi8(byte_index(), _mm_set1_epi8(char(k)));
  return _mm_shuffle_epi8(v, _mm_adds_epu8(idx, _mm_set1_epi8(0x70)));  // 16 and up: zero
}

// The shortest run of one span the wide step takes (icrc.h).
constexpr size_t kWideMinBytes = kCrcWideMinBytes;
static_assert(kIcrcWideMinBytes == kLrhOnes.size() + kMaxMasked + kWideMinBytes);

// kWide: fold runs of kWideMinBytes and more with fold_rows_wide (the CPU
// must have it: CrcKernel::kAvx2), with its skipped blocks where kBlocks.
template <bool kWide, bool kBlocks = false>
class IcrcFolder {
 public:
  /// Folds n input bytes in all; `mask` (null for none) is ORed over the
  /// bytes that follow the 8 ones.
  __attribute__((target("pclmul"))) IcrcFolder(size_t n, const HeaderMask* mask)
      : mask_(mask),
        lead_((16 - n % 16) % 16),
        mask_end_(mask == nullptr ? 0 : (lead_ + kLrhOnes.size() + mask->len + 15) / 16) {}

  /// Appends the n bytes at p; reads p[0..n) only.
  __attribute__((target("pclmul"))) void append(const uint8_t* p, size_t n) {
    const bool long_span = n >= 16;
    if (fill_ != 0) {  // complete the block under way
      const size_t k = std::min(16 - fill_, n);
      const __m128i head = long_span ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)) : load_short(p, k);
      carry_ = _mm_or_si128(carry_, shift_up(head, fill_));  // drops bytes k..15
      fill_ += k;
      p += k;
      n -= k;
      if (fill_ < 16) return;
      fold_in(carry_);
      fill_ = 0;
    }
    while (n >= 16) {
      if constexpr (kWide) {
        if (n >= kWideMinBytes && count_ >= mask_end_) {  // rows of 128 bytes, no mask
          const size_t rows = n / 128 * 128;
          const Lanes l = fold_rows_wide({x0_, x1_, x2_, x3_}, p, rows, kBlocks);
          x0_ = l.x0;
          x1_ = l.x1;
          x2_ = l.x2;
          x3_ = l.x3;
          count_ += rows / 16;
          p += rows;
          n -= rows;
          continue;
        }
      }
      if (n >= 64 && count_ >= 4 && count_ >= mask_end_) {  // four blocks, no mask: one per lane
        const __m128i k = operands(kFold512);
        x0_ = _mm_xor_si128(fold(x0_, k), _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        x1_ = _mm_xor_si128(fold(x1_, k), _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
        x2_ = _mm_xor_si128(fold(x2_, k), _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32)));
        x3_ = _mm_xor_si128(fold(x3_, k), _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 48)));
        count_ += 4;
        p += 64;
        n -= 64;
      } else {
        fold_in(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        p += 16;
        n -= 16;
      }
    }
    if (n == 0) return;
    // The tail starts the next block: taken from the 16 bytes that end with
    // it where those are all in this span.
    carry_ = long_span ? shift_down(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + n - 16)), 16 - n)
                       : load_short(p, n);
    fill_ = n;
  }

  /// M(x)·x^32 mod P of the input, reflected; all n bytes appended.
  __attribute__((target("pclmul"))) uint32_t remainder() const { return reduce_lanes(x0_, x1_, x2_, x3_); }

 private:
  // Block `count_` of the input (the header mask ORed over it where they
  // meet) into the lanes; see reduce_lanes. Lanes start as zeros, so the
  // first four blocks need no fold.
  __attribute__((target("pclmul"))) void fold_in(__m128i b) {
    if (count_ < mask_end_) {  // the block starts 16·count_ - lead_ - 8 bytes from the headers, at least -23
      const uint8_t* m = mask_->bytes.data() + kMaskLead + 16 * count_ - lead_ - kLrhOnes.size();
      b = _mm_or_si128(b, _mm_loadu_si128(reinterpret_cast<const __m128i*>(m)));
    }
    if (count_ >= 4) b = _mm_xor_si128(b, fold(x0_, operands(kFold512)));
    x0_ = x1_;
    x1_ = x2_;
    x2_ = x3_;
    x3_ = b;
    ++count_;
  }

  const HeaderMask* const mask_;
  const size_t lead_;      // zero bytes before the input
  const size_t mask_end_;  // blocks from here on have no masked byte
  size_t count_ = 0;       // blocks folded
  size_t fill_ = lead_;    // bytes of carry_ in use
  __m128i carry_ = _mm_setzero_si128();
  __m128i x0_ = _mm_setzero_si128();
  __m128i x1_ = _mm_setzero_si128();
  __m128i x2_ = _mm_setzero_si128();
  __m128i x3_ = _mm_setzero_si128();
};

// The ICRC by folding: the ones with the CRC's initial register (all ones,
// zlib's crc32(0, ...)) XORed into their first 4 bytes, the headers masked as
// they are read, the rest; then the final inversion. n: the bytes covered.
// Flattened, so that the folder's lanes live in registers across its appends
// (crc_bench icrc/uroce_icrc_compute/64: 18.6 -> 15 ns; /256: 23 -> 17.5 ns).
template <bool kWide, bool kBlocks = false>
__attribute__((target("pclmul"), flatten)) uint32_t icrc_fold(L3Kind kind, size_t n, std::span<const uint8_t> l3,
                                                               std::span<const std::span<const uint8_t>> rest) {
  static constexpr std::array<uint8_t, 8> kSeededOnes = {0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  // Too short for a wide run: the narrow fold, whose loop has no call
  // (around which its lanes would have to leave the registers).
  if constexpr (kWide) {
    if (n < kIcrcWideMinBytes) return icrc_fold<false>(kind, n, l3, rest);
  }
  IcrcFolder<kWide, kBlocks> f(n, &kHeaderMasks[size_t(kind)]);
  f.append(kSeededOnes.data(), kSeededOnes.size());
  f.append(l3.data(), l3.size());
  for (const std::span<const uint8_t> s : rest) f.append(s.data(), s.size());
  return ~f.remainder();
}

// The ICRC under the sse kernel: the fold up to kIcrcFoldMaxBytes, kCrc above.
template <CrcFn kCrc, bool kDirty>
uint32_t icrc_fold_or_isal(L3Kind kind, size_t n, std::span<const uint8_t> l3,
                           std::span<const std::span<const uint8_t>> rest) {
  if (n <= kIcrcFoldMaxBytes) return icrc_fold<false>(kind, n, l3, rest);
  return icrc_isal<kCrc, kDirty>(kind, l3, rest);
}

// The ICRC under the avx512 kernel: the wide fold (the 128-bit fold where
// too short for it) up to kIcrcWideMaxBytes, ISA-L's AVX-512 kernel above,
// which folds 64 bytes per VPCLMULQDQ but costs two calls and a header copy.
uint32_t icrc_wide_or_isal512(L3Kind kind, size_t n, std::span<const uint8_t> l3,
                              std::span<const std::span<const uint8_t>> rest) {
  if (n <= kIcrcWideMaxBytes) return icrc_fold<true>(kind, n, l3, rest);
  return icrc_isal<isal_by16_10, true>(kind, l3, rest);
}

// zlib's byte table, for CRCs of fewer than 4 bytes.
constexpr std::array<uint32_t, 256> kByteTable = [] {
  std::array<uint32_t, 256> t{};
  const auto p = uint32_t(reflect(kPoly, 32));
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? p ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}();

// A plain CRC by the folder. A CRC continued from `crc` is the CRC from zero
// (no initial inversion) of the input with ~crc XORed into its first 4
// bytes (zlib's initial register, moved into the message), so that word is
// one span of its own and the rest another.
template <bool kWide, bool kBlocks = false>
__attribute__((target("pclmul"), flatten)) uint32_t crc_fold(uint32_t crc, const uint8_t* p, size_t n) {
  if (n < 4) {
    crc = ~crc;
    while (n-- != 0) crc = kByteTable[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
  }
  if constexpr (kWide) {
    if (n < kWideMinBytes) return crc_fold<false>(crc, p, n);
  }
  uint32_t first;
  std::memcpy(&first, p, 4);
  first ^= ~crc;  // x86 is little-endian: byte 0 of the word is p[0]
  IcrcFolder<kWide, kBlocks> f(n, nullptr);
  f.append(reinterpret_cast<const uint8_t*>(&first), 4);
  f.append(p + 4, n - 4);
  return ~f.remainder();
}
#endif

// ---------------------------------------------------------------------------
// Kernel dispatch: one table entry per kernel, chosen at start-up; the data
// path reads one pointer and makes one indirect call.

using IcrcFn = uint32_t (*)(L3Kind kind, size_t n, std::span<const uint8_t> l3,
                            std::span<const std::span<const uint8_t>> rest);

uint32_t icrc_generic(L3Kind kind, size_t, std::span<const uint8_t> l3,
                      std::span<const std::span<const uint8_t>> rest) {
  return icrc_isal<isal_dispatched, true>(kind, l3, rest);
}

// A CPU feature a kernel needs. __builtin_cpu_supports takes only a string
// literal, hence the switch rather than a table of names.
enum class Feature : uint8_t { kPclmul, kSse41, kAvx2, kVpclmul, kAvx512f, kAvx512bw, kAvx512dq, kAvx512vl };

bool cpu_supports(Feature f) {
#if defined(__x86_64__)
  __builtin_cpu_init();  // may run before libgcc's own constructor
  switch (f) {
    case Feature::kPclmul: return __builtin_cpu_supports("pclmul") != 0;
    case Feature::kSse41: return __builtin_cpu_supports("sse4.1") != 0;
    case Feature::kAvx2: return __builtin_cpu_supports("avx2") != 0;
    case Feature::kVpclmul: return __builtin_cpu_supports("vpclmulqdq") != 0;
    case Feature::kAvx512f: return __builtin_cpu_supports("avx512f") != 0;
    case Feature::kAvx512bw: return __builtin_cpu_supports("avx512bw") != 0;
    case Feature::kAvx512dq: return __builtin_cpu_supports("avx512dq") != 0;
    case Feature::kAvx512vl: return __builtin_cpu_supports("avx512vl") != 0;
  }
#endif
  (void)f;
  return false;
}

// True on an AMD CPU (CPUID's vendor string), where kAvx2's skipped blocks pay.
bool amd_cpu() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") != 0;
#else
  return false;
#endif
}

const char* feature_name(Feature f) {
  switch (f) {
    case Feature::kPclmul: return "PCLMULQDQ";
    case Feature::kSse41: return "SSE4.1";
    case Feature::kAvx2: return "AVX2";
    case Feature::kVpclmul: return "VPCLMULQDQ";
    case Feature::kAvx512f: return "AVX-512F";
    case Feature::kAvx512bw: return "AVX-512BW";
    case Feature::kAvx512dq: return "AVX-512DQ";
    case Feature::kAvx512vl: return "AVX-512VL";
  }
  return "?";
}

struct KernelOps {
  CrcKernel kernel;
  const char* name;
  std::span<const Feature> needs;  // the CPU features it runs on
  CrcFn crc;                       // leaves the SIMD state clean
  IcrcFn icrc;
};

constexpr KernelOps kGenericOps = {CrcKernel::kGeneric, "generic", {}, isal_crc32, icrc_generic};
#if defined(__x86_64__)
constexpr std::array kFoldNeeds = {Feature::kPclmul, Feature::kSse41};
constexpr std::array kAvx2Needs = {Feature::kPclmul, Feature::kSse41, Feature::kAvx2, Feature::kVpclmul};
constexpr std::array kAvx512Needs = {Feature::kPclmul,   Feature::kSse41,    Feature::kAvx2,
                                     Feature::kVpclmul,  Feature::kAvx512f,  Feature::kAvx512bw,
                                     Feature::kAvx512dq, Feature::kAvx512vl};
constexpr KernelOps kSseOps = {CrcKernel::kSse, "sse", kFoldNeeds, isal_by8, icrc_fold_or_isal<isal_by8, false>};
constexpr KernelOps kPclmulOps = {CrcKernel::kPclmul, "pclmul", kFoldNeeds, crc_fold<false>, icrc_fold<false>};
constexpr KernelOps kAvx2Ops = {CrcKernel::kAvx2, "avx2", kAvx2Needs, crc_fold<true, true>, icrc_fold<true, true>};
constexpr KernelOps kAvx2FoldOps = {CrcKernel::kAvx2Fold, "avx2-fold", kAvx2Needs, crc_fold<true>, icrc_fold<true>};
constexpr KernelOps kAvx512Ops = {CrcKernel::kAvx512, "avx512", kAvx512Needs, isal_by16_10_clean,
                                  icrc_wide_or_isal512};
#endif

// Indexed by CrcKernel (kAuto has none); null where the architecture has none.
constexpr std::array<const KernelOps*, kCrcKernels.size() + 1> kKernels = {
    nullptr,
#if defined(__x86_64__)
    &kSseOps, &kPclmulOps, &kAvx2Ops, &kAvx2FoldOps, &kAvx512Ops,
#else
    nullptr, nullptr, nullptr, nullptr, nullptr,
#endif
    &kGenericOps,
};

// The features `ops` needs that this CPU lacks, in words ("A, B and C";
// "" for none).
std::string missing_features(const KernelOps& ops) {
  std::vector<const char*> missing;
  for (const Feature f : ops.needs) {
    if (!cpu_supports(f)) missing.push_back(feature_name(f));
  }
  std::string words;
  for (size_t i = 0; i < missing.size(); ++i) {
    if (i > 0) words += i + 1 == missing.size() ? " and " : ", ";
    words += missing[i];
  }
  return words;
}

// Constant-initialised, so a CRC taken by another file's static initialiser
// before the one below runs is still right (ISA-L's own choice).
constinit std::atomic<const KernelOps*> g_ops{&kGenericOps};

[[maybe_unused]] const bool kKernelSet = [] {
  apply_crc_kernel_setting(std::getenv("UROCE_CRC_KERNEL"));
  return true;
}();

}  // namespace

std::string_view crc_kernel_name(CrcKernel k) {
  if (k == CrcKernel::kAuto) return "auto";
  const KernelOps* ops = kKernels[size_t(k)];
  return ops != nullptr ? ops->name : "none";
}

std::optional<CrcKernel> crc_kernel_from_name(std::string_view name) {
  if (name == "auto") return CrcKernel::kAuto;
  for (const KernelOps* ops : kKernels) {
    if (ops != nullptr && name == ops->name) return ops->kernel;
  }
  return std::nullopt;
}

bool crc_kernel_supported(CrcKernel k) {
  if (k == CrcKernel::kAuto) return true;
  const KernelOps* ops = kKernels[size_t(k)];
  return ops != nullptr && missing_features(*ops).empty();
}

CrcKernel crc_kernel_best() {
  // AVX-512 ISA-L folds 64 bytes per VPCLMULQDQ to the wide fold's 32
  // (docs/PERFORMANCE.md, "CRC kernels per CPU"). The skipped blocks of
  // kAvx2 made a 4 KB ICRC 1.6x faster on AMD Zen 5 and 10 % slower on the
  // Intel core measured, so kAvx2Fold where the CPU is not AMD's.
  const CrcKernel avx2 = amd_cpu() ? CrcKernel::kAvx2 : CrcKernel::kAvx2Fold;
  for (const CrcKernel k : {CrcKernel::kAvx512, avx2, CrcKernel::kSse}) {
    if (crc_kernel_supported(k)) return k;
  }
  return CrcKernel::kGeneric;
}

Status set_crc_kernel(CrcKernel k) {
  if (k == CrcKernel::kAuto) k = crc_kernel_best();
  if (!crc_kernel_supported(k)) return Status(StatusCode::kInvalidArgument, "this CPU lacks that CRC kernel");
  g_ops.store(kKernels[size_t(k)], std::memory_order_relaxed);
  return Status();
}

CrcKernel crc_kernel() { return g_ops.load(std::memory_order_relaxed)->kernel; }

void apply_crc_kernel_setting(const char* value) {
  const std::string_view v = value != nullptr ? value : "";
  const std::optional<CrcKernel> k = v.empty() ? CrcKernel::kAuto : crc_kernel_from_name(v);
  std::string has;
  for (const KernelOps* ops : kKernels) {
    if (ops != nullptr && crc_kernel_supported(ops->kernel)) has += std::string(" ") + ops->name;
  }
  if (!k) {
    std::fprintf(stderr, "uroce: UROCE_CRC_KERNEL='%.*s' is not a CRC kernel; give auto or one of:%s\n", int(v.size()),
                 v.data(), has.c_str());
    std::exit(2);
  }
  if (!set_crc_kernel(*k).ok()) {
    const KernelOps* ops = kKernels[size_t(*k)];
    std::fprintf(stderr, "uroce: UROCE_CRC_KERNEL=%.*s: this CPU lacks %s, which that kernel needs; it has:%s\n",
                 int(v.size()), v.data(), ops != nullptr ? missing_features(*ops).c_str() : "its architecture",
                 has.c_str());
    std::exit(2);
  }
}

uint32_t crc32_ieee(uint32_t crc, std::span<const uint8_t> buf) {
  return g_ops.load(std::memory_order_relaxed)->crc(crc, buf.data(), buf.size());
}

uint32_t icrc_compute(L3Kind kind, std::span<const uint8_t> l3) { return icrc_compute(kind, l3, {}); }

uint32_t icrc_compute(L3Kind kind, std::span<const uint8_t> l3, std::span<const std::span<const uint8_t>> rest) {
  size_t n = kLrhOnes.size() + l3.size();
  for (const std::span<const uint8_t> s : rest) n += s.size();
  return g_ops.load(std::memory_order_relaxed)->icrc(kind, n, l3, rest);
}

}  // namespace uroce::wire
