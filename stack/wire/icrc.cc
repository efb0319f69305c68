#include "stack/wire/icrc.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

// crc32_gzip_refl, leaving the SIMD state clean.
uint32_t isal_crc32(uint32_t crc, const uint8_t* p, size_t n) {
  crc = crc32_gzip_refl(crc, p, n);
#if defined(__x86_64__)
  if (kCpuHasAvx) zero_upper_simd();
#endif
  return crc;
}

// ISA-L over the spans in order, in place.
uint32_t isal_crc32(uint32_t crc, std::span<const std::span<const uint8_t>> spans) {
  for (const std::span<const uint8_t> s : spans) crc = crc32_gzip_refl(crc, s.data(), s.size());
#if defined(__x86_64__)
  if (kCpuHasAvx) zero_upper_simd();
#endif
  return crc;
}

// A17.3.3: the 8 bytes of 0xFF that stand in for the LRH.
constexpr std::array<uint8_t, 8> kLrhOnes = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// CRC state after the 8 bytes of ones.
const uint32_t kLrhSeed = isal_crc32(0, kLrhOnes.data(), kLrhOnes.size());

// Sets the variant fields of the headers at the start of `hdr` to ones
// (A17.3.3; A16 for the GRH) and returns the length of the L3, UDP and BTH
// headers, the part that is masked.
size_t mask_headers(L3Kind kind, uint8_t* hdr) {
  size_t bth_at;
  if (kind == L3Kind::kIpv4) {
    bth_at = sizeof(Ipv4Hdr) + sizeof(UdpHdr);
    auto* ip = reinterpret_cast<Ipv4Hdr*>(hdr);
    ip->tos = 0xff;
    ip->ttl = 0xff;
    ip->checksum.set(0xffff);
  } else {
    bth_at = sizeof(Ipv6Hdr) + (kind == L3Kind::kIpv6 ? sizeof(UdpHdr) : 0);
    auto* ip = reinterpret_cast<Ipv6Hdr*>(hdr);
    ip->ver_tc_flow.set(ip->ver_tc_flow.get() | 0x0fffffff);
    ip->hop_limit = 0xff;
  }
  if (kind != L3Kind::kGrh) reinterpret_cast<UdpHdr*>(hdr + bth_at - sizeof(UdpHdr))->checksum.set(0xffff);
  hdr[bth_at + 4] = 0xff;  // FECN, BECN, resv6
  return bth_at + sizeof(Bth);
}

#if defined(__x86_64__)
// ---------------------------------------------------------------------------
// The short path: carry-less multiplication folding (Gopal et al., Intel,
// "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
// Instruction", 2009), derived here for the reflected CRC.
//
// Notation. A CRC input of n bytes is the polynomial M(x) over GF(2) whose
// highest coefficient (x^(8n-1)) is bit 0 of byte 0: the reflected bit
// order of IEEE 802.3 and zlib. Without its initial and final inversion the
// CRC is R = M(x)·x^32 mod P(x), held reflected in 32 bits (bit i is the
// coefficient of x^(31-i)). A 128-bit register loaded from 16 bytes holds a
// polynomial the same way (bit i is x^(127-i)), and each 64-bit half on its
// own likewise (bit i is x^(63-i)). PCLMULQDQ of two such 64-bit halves A
// and B gives A·B·x as a 128-bit register: reflected product of 63-degree
// operands, aligned to 127 degrees.
//
// Folding. Keep an accumulator X(x) of 128 bits with CRC(input so far) =
// X·x^32 mod P. The next 16 bytes C extend the input: X' = X·x^128 + C.
// With X = H·x^64 + L, X·x^128 = H·x^192 + L·x^128, and any polynomial
// congruent modulo P does as well, so X' = H·(x^192 mod P) + L·(x^128 mod P)
// + C: two PCLMULQDQs and two XORs, at most 96 bits, independent of the
// length so far. Four accumulators over interleaved 16-byte blocks fold by
// x^512 each, independently, and are joined at the end.

// IEEE 802.3 CRC-32 polynomial (IBA 7.8.1): x^32 + x^26 + x^23 + x^22 + x^16 +
// x^12 + x^11 + x^10 + x^8 + x^7 + x^5 + x^4 + x^2 + x + 1; bit k is x^k.
constexpr uint64_t kPoly = 0x1'04c1'1db7;

// The low `bits` bits of v in reverse order.
constexpr uint64_t reflect(uint64_t v, int bits) {
  uint64_t r = 0;
  for (int i = 0; i < bits; ++i) r |= ((v >> i) & 1) << (bits - 1 - i);
  return r;
}

// x^n mod P, reflected in 32 bits: start from x^0 (bit 31) and multiply by
// x n times; multiplying by x shifts right by one, and an x^32 that leaves
// bit 0 is replaced by P - x^32 (reflected: zlib's 0xedb88320).
constexpr uint32_t xpow_mod(unsigned n) {
  const auto p = uint32_t(reflect(kPoly, 32));
  uint32_t r = 0x8000'0000;
  for (unsigned i = 0; i < n; ++i) r = (r >> 1) ^ ((r & 1) ? p : 0);
  return r;
}

// The 64-bit operand that multiplies a 64-bit half by x^e modulo P: the
// half holding x^(e-1) mod P at its 32 lowest degrees (bits 32..63), so that
// the extra x of PCLMULQDQ makes it x^e. The product has at most 96 bits.
constexpr uint64_t times_xpow(unsigned e) { return uint64_t(xpow_mod(e - 1)) << 32; }

// floor(x^64 / P), the Barrett constant (33 bits, bit k is x^k): long
// division, bringing down the 65 coefficients of x^64 one at a time.
constexpr uint64_t barrett_mu() {
  uint64_t rem = 0;
  uint64_t q = 0;
  for (int d = 64; d >= 0; --d) {
    rem = (rem << 1) | (d == 64 ? 1 : 0);
    q <<= 1;
    if (rem & (uint64_t(1) << 32)) {
      rem ^= kPoly;
      q |= 1;
    }
  }
  return q;
}

// The pair that folds a 128-bit accumulator forward by x^e: the low half
// (the higher degrees, H) by x^(e+64), the high half (L) by x^e.
__attribute__((target("pclmul"))) __m128i fold_pair(unsigned e) {
  return _mm_set_epi64x(int64_t(times_xpow(e)), int64_t(times_xpow(e + 64)));
}

__attribute__((target("pclmul"))) inline __m128i fold(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

// R = M(x)·x^32 mod P of the n bytes at b (n a positive multiple of 64,
// b 16-byte aligned), reflected. No initial or final inversion.
__attribute__((target("pclmul"))) uint32_t fold_remainder(const uint8_t* b, size_t n) {
  const auto* v = reinterpret_cast<const __m128i*>(b);
  __m128i x0 = _mm_load_si128(v);
  __m128i x1 = _mm_load_si128(v + 1);
  __m128i x2 = _mm_load_si128(v + 2);
  __m128i x3 = _mm_load_si128(v + 3);
  const __m128i k512 = fold_pair(512);
  for (size_t i = 4; i < n / 16; i += 4) {
    x0 = _mm_xor_si128(fold(x0, k512), _mm_load_si128(v + i));
    x1 = _mm_xor_si128(fold(x1, k512), _mm_load_si128(v + i + 1));
    x2 = _mm_xor_si128(fold(x2, k512), _mm_load_si128(v + i + 2));
    x3 = _mm_xor_si128(fold(x3, k512), _mm_load_si128(v + i + 3));
  }
  // Join the lanes: X = x0·x^384 + x1·x^256 + x2·x^128 + x3.
  __m128i x = _mm_xor_si128(_mm_xor_si128(fold(x0, fold_pair(384)), fold(x1, fold_pair(256))),
                            _mm_xor_si128(fold(x2, fold_pair(128)), x3));

  // R = X·x^32 mod P, from 128 bits to 32.
  // (a) X·x^32 = H·x^96 + L·x^32 ≡ Z: H·(x^96 mod P) has at most 96 bits
  //     (bits 32..127), and L·x^32 is L moved to bits 32..95.
  const __m128i k96_64 = _mm_set_epi64x(int64_t(times_xpow(64)), int64_t(times_xpow(96)));
  const __m128i z = _mm_xor_si128(_mm_clmulepi64_si128(x, k96_64, 0x00), _mm_slli_si128(_mm_srli_si128(x, 8), 4));
  // (b) Z = Zh·x^64 + Zl with Zh of 32 bits (bits 32..63; bits 0..31 are
  //     zero): U = Zh·(x^64 mod P) + Zl, at most 64 bits, in bits 64..127.
  const __m128i u = _mm_xor_si128(_mm_clmulepi64_si128(z, k96_64, 0x10), z);
  // (c) Barrett: with U = Uh·x^32 + Ul, Q = floor(Uh·mu / x^32) is
  //     floor(U / P), and R = U - Q·P = Ul + (Q·P mod x^32). With the 64-bit
  //     operands mu·x^31 and P·x^31 (each 33 bits reflected), Q lands in bits
  //     0..31 of the first product (Ul·mu cannot reach them), and Q·P mod x^32
  //     in bits 32..63 of the second.
  const __m128i mu_p =
      _mm_set_epi64x(int64_t(reflect(kPoly, 33)), int64_t(reflect(barrett_mu(), 33)));
  const __m128i q = _mm_and_si128(_mm_clmulepi64_si128(u, mu_p, 0x01), _mm_set_epi32(0, 0, 0, -1));
  const __m128i qp = _mm_clmulepi64_si128(q, mu_p, 0x10);
  return uint32_t(_mm_extract_epi32(u, 3)) ^ uint32_t(_mm_extract_epi32(qp, 1));
}

const bool kCpuHasPclmul = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("pclmul") != 0;
}();

// The bytes of a short CRC input gathered into one aligned stack buffer, so
// that one folding pass covers them. They end on a 64-byte boundary; zeros
// lead them (leading zeros leave M(x), hence the CRC, unchanged).
class FoldBuffer {
 public:
  /// Makes room for n bytes, 4 <= n <= kIcrcFoldMaxBytes.
  explicit FoldBuffer(size_t n) : start_((kBlock - n % kBlock) % kBlock), at_(start_) {
    std::memset(buf_.data(), 0, kBlock);
  }
  /// Copies s after the bytes so far; returns where its copy is.
  uint8_t* append(std::span<const uint8_t> s) {
    uint8_t* p = buf_.data() + at_;
    std::memcpy(p, s.data(), s.size());
    at_ += s.size();
    return p;
  }
  /// zlib's crc32(crc, bytes): the register starts as ~crc, which is the
  /// same as XORing ~crc into the first 4 bytes and starting from 0.
  uint32_t crc32(uint32_t crc) {
    uint8_t* p = buf_.data() + start_;
    uint32_t first;
    std::memcpy(&first, p, 4);
    first ^= ~crc;
    std::memcpy(p, &first, 4);
    return ~fold_remainder(buf_.data(), at_);
  }

 private:
  static constexpr size_t kBlock = 64;  // four 16-byte lanes
  static_assert(kIcrcFoldMaxBytes % kBlock == 0);
  size_t start_;
  size_t at_;
  alignas(kBlock) std::array<uint8_t, kIcrcFoldMaxBytes> buf_;
};

bool use_fold(size_t n) { return n >= 4 && n <= kIcrcFoldMaxBytes && kCpuHasPclmul; }
#else
bool use_fold(size_t) { return false; }
#endif

}  // namespace

uint32_t crc32_ieee(uint32_t crc, std::span<const uint8_t> buf) {
  const std::span<const uint8_t> one[1] = {buf};
  return crc32_ieee(crc, one);
}

uint32_t crc32_ieee(uint32_t crc, std::span<const std::span<const uint8_t>> spans) {
  size_t n = 0;
  for (const std::span<const uint8_t> s : spans) n += s.size();
#if defined(__x86_64__)
  if (use_fold(n)) {
    FoldBuffer b(n);
    for (const std::span<const uint8_t> s : spans) b.append(s);
    return b.crc32(crc);
  }
#endif
  return isal_crc32(crc, spans);
}

uint32_t icrc_compute(L3Kind kind, std::span<const uint8_t> l3) { return icrc_compute(kind, l3, {}); }

uint32_t icrc_compute(L3Kind kind, std::span<const uint8_t> l3, std::span<const std::span<const uint8_t>> rest) {
  size_t n = kLrhOnes.size() + l3.size();
  for (const std::span<const uint8_t> s : rest) n += s.size();
#if defined(__x86_64__)
  if (use_fold(n)) {
    // One pass over a copy: the ones, the headers masked in the copy, the rest.
    FoldBuffer b(n);
    b.append(kLrhOnes);
    mask_headers(kind, b.append(l3));
    for (const std::span<const uint8_t> s : rest) b.append(s);
    return b.crc32(0);
  }
#endif
  // Longer frames: ISA-L, from the folded ones over a masked copy of the
  // headers, then over the rest in place.
  std::array<uint8_t, sizeof(Ipv6Hdr) + sizeof(UdpHdr) + sizeof(Bth)> hdr;
  std::memcpy(hdr.data(), l3.data(), std::min(hdr.size(), l3.size()));
  const size_t masked = mask_headers(kind, hdr.data());
  uint32_t crc = crc32_gzip_refl(kLrhSeed, hdr.data(), masked);
  crc = crc32_gzip_refl(crc, l3.data() + masked, l3.size() - masked);
  return isal_crc32(crc, rest);
}

}  // namespace uroce::wire
