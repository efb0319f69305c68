// The constants of the ICRC's carry-less multiplication folds (Gopal et al.,
// Intel, "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
// Instruction", 2009), derived here for the reflected CRC; icrc.cc folds 16
// bytes at a time with them, crc_wide.cc 32.
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
#pragma once

#include <cstdint>

namespace uroce::wire::clmul {

// IEEE 802.3 CRC-32 polynomial (IBA 7.8.1): x^32 + x^26 + x^23 + x^22 + x^16 +
// x^12 + x^11 + x^10 + x^8 + x^7 + x^5 + x^4 + x^2 + x + 1; bit k is x^k.
constexpr uint64_t kPoly = 0x1'04c1'1db7;

// The constants are computed by the compiler (consteval) from kPoly alone.

// The low `bits` bits of v in reverse order.
consteval uint64_t reflect(uint64_t v, int bits) {
  uint64_t r = 0;
  for (int i = 0; i < bits; ++i) r |= ((v >> i) & 1) << (bits - 1 - i);
  return r;
}

// x^n mod P, reflected in 32 bits: start from x^0 (bit 31) and multiply by
// x n times; multiplying by x shifts right by one, and an x^32 that leaves
// bit 0 is replaced by P - x^32 (reflected: zlib's 0xedb88320).
consteval uint32_t xpow_mod(unsigned n) {
  const auto p = uint32_t(reflect(kPoly, 32));
  uint32_t r = 0x8000'0000;
  for (unsigned i = 0; i < n; ++i) r = (r >> 1) ^ ((r & 1) ? p : 0);
  return r;
}

// The 64-bit operand that multiplies a 64-bit half by x^e modulo P: the
// half holding x^(e-1) mod P at its 32 lowest degrees (bits 32..63), so that
// the extra x of PCLMULQDQ makes it x^e. The product has at most 96 bits.
consteval uint64_t times_xpow(unsigned e) { return uint64_t(xpow_mod(e - 1)) << 32; }

// floor(x^64 / P), the Barrett constant (33 bits, bit k is x^k): long
// division, bringing down the 65 coefficients of x^64 one at a time.
consteval uint64_t barrett_mu() {
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

// Two 64-bit PCLMULQDQ operands, as one register holds them.
struct OperandPair {
  uint64_t lo;
  uint64_t hi;
};

// The pair that folds a 128-bit accumulator forward by x^e: the low half
// (the higher degrees, H) by x^(e+64), the high half (L) by x^e.
consteval OperandPair fold_pair(unsigned e) { return {times_xpow(e + 64), times_xpow(e)}; }

constexpr OperandPair kFold1024 = fold_pair(1024);  // one lane past the other seven (256-bit lanes)
constexpr OperandPair kFold512 = fold_pair(512);  // one lane past the other three
constexpr OperandPair kFold384 = fold_pair(384);  // joining lane 0
constexpr OperandPair kFold256 = fold_pair(256);  // lane 1
constexpr OperandPair kFold128 = fold_pair(128);  // lane 2
constexpr OperandPair kReduce = {times_xpow(96), times_xpow(64)};
constexpr OperandPair kBarrett = {reflect(barrett_mu(), 33), reflect(kPoly, 33)};  // mu·x^31, P·x^31

}  // namespace uroce::wire::clmul
