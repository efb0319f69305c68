#include "stack/wire/icrc.h"

#include <isa-l/crc.h>

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

// CRC state after the 8 bytes of 0xFF that replace the LRH (A17.3.3).
const uint32_t kLrhSeed = [] {
  const std::array<uint8_t, 8> ones = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  return isal_crc32(0, ones.data(), ones.size());
}();

}  // namespace

uint32_t crc32_ieee(uint32_t crc, std::span<const uint8_t> buf) {
  return isal_crc32(crc, buf.data(), buf.size());
}

uint32_t icrc_compute(L3Kind kind, std::span<const uint8_t> l3) { return icrc_compute(kind, l3, {}); }

uint32_t icrc_compute(L3Kind kind, std::span<const uint8_t> l3, std::span<const std::span<const uint8_t>> rest) {
  std::array<uint8_t, sizeof(Ipv6Hdr) + sizeof(UdpHdr) + sizeof(Bth)> hdr;
  size_t bth_at;
  if (kind == L3Kind::kIpv4) {
    bth_at = sizeof(Ipv4Hdr) + sizeof(UdpHdr);
    std::memcpy(hdr.data(), l3.data(), bth_at + sizeof(Bth));
    auto* ip = reinterpret_cast<Ipv4Hdr*>(hdr.data());
    ip->tos = 0xff;
    ip->ttl = 0xff;
    ip->checksum.set(0xffff);
  } else {
    bth_at = sizeof(Ipv6Hdr) + (kind == L3Kind::kIpv6 ? sizeof(UdpHdr) : 0);
    std::memcpy(hdr.data(), l3.data(), bth_at + sizeof(Bth));
    auto* ip = reinterpret_cast<Ipv6Hdr*>(hdr.data());
    ip->ver_tc_flow.set(ip->ver_tc_flow.get() | 0x0fffffff);
    ip->hop_limit = 0xff;
  }
  if (kind != L3Kind::kGrh) {
    reinterpret_cast<UdpHdr*>(hdr.data() + bth_at - sizeof(UdpHdr))->checksum.set(0xffff);
  }
  hdr[bth_at + 4] = 0xff;  // FECN, BECN, resv6
  const size_t masked = bth_at + sizeof(Bth);
  uint32_t crc = crc32_gzip_refl(kLrhSeed, hdr.data(), masked);
  if (rest.empty()) return isal_crc32(crc, l3.data() + masked, l3.size() - masked);
  crc = crc32_gzip_refl(crc, l3.data() + masked, l3.size() - masked);
  for (size_t i = 0; i + 1 < rest.size(); ++i) crc = crc32_gzip_refl(crc, rest[i].data(), rest[i].size());
  return isal_crc32(crc, rest.back().data(), rest.back().size());
}

}  // namespace uroce::wire
