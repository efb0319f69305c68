// CRC-32 (IEEE 802.3 polynomial, reflected: the CRC the RoCE ICRC is built on,
// IBA 7.8.1 and A17.3.3) throughput of every implementation we could use, and
// the cost of a whole ICRC with each, to choose the one in stack/wire/icrc.cc.
//
//   crc32/<impl>/<bytes>            plain CRC of a buffer, seed 0
//   icrc/<impl>/<payload bytes>     ICRC of a RoCEv2/IPv4 RC SEND Only frame
//   crc/<kernel>/<bytes>            wire::crc32_ieee under each CRC kernel
//   icrc/<kernel>/<payload bytes>   wire::icrc_compute under each CRC kernel
//
// The kernel rows (kernel: sse, pclmul, avx2, avx2-fold, avx512, generic, as
// UROCE_CRC_KERNEL names them; wire::set_crc_kernel selects each for its
// row) put every kernel side by side in one run, at 64, 256, 1024, 4096 and
// 9000 bytes; a kernel the CPU lacks gives a row that says so (skipped).
// The icrc/<kernel> rows are labelled with the path the kernel took at that
// length: fold (the 128-bit fold), wide (the fold with 256-bit rows), isal.
//
// Implementations: a byte-at-a-time table loop (the floor), zlib crc32(),
// ISA-L crc32_gzip_refl() (what icrc.cc uses for long frames) and DPDK
// rte_net_crc_calc() with each of its algorithms. rte_net_crc_calc() takes no seed, so it cannot chain
// from the masked header copy into the payload in place (DESIGN rule 12); the
// icrc/dpdk_*_copy rows measure the only way to use it: copy the 8 bytes of
// ones, the masked headers and the whole payload into one buffer, then CRC that.
// The ICRC rows besides icrc/uroce_icrc_compute (the shipped function, which
// gathers and folds with its own PCLMULQDQ kernel where the ICRC covers at
// most wire::kIcrcFoldMaxBytes, label "fold", and uses ISA-L above, "isal"):
//   isal_prefolded_vzeroupper  ISA-L from the pre-folded ones over the masked
//                            headers, then the payload in place, VZEROUPPER:
//                            icrc.cc's path above kIcrcFoldMaxBytes, and its
//                            only path for every length before the fold
//   isal_chained             ISA-L chained in place, as icrc.cc did before it
//                            cleared the AVX-512 upper state (VZEROUPPER)
//   isal_chained_vzeroupper  the same with VZEROUPPER, ones not pre-folded
//   isal_copy_vzeroupper     ISA-L over a copy, like the DPDK rows: one call
//   zlib_chained             zlib chained in place
//
// Before timing anything, main() checks that every implementation returns the
// same CRC and every ICRC variant the same ICRC, and exits 1 if not, so the
// figures are only ever for correct code.
//
// rte_net_crc needs EAL (it reads the max SIMD bitwidth). EAL runs with
//   --no-huge --no-pci --no-shconf --no-telemetry -m 256 --log-level=1 -l 0
//   --force-max-simd-bitwidth=512
// Without the last flag EAL caps SIMD at 256 bits and rte_net_crc_set_alg
// (RTE_NET_CRC_AVX512) silently falls back to SSE4.2; the rows are labelled
// with the algorithm that actually ran. Arguments that Google Benchmark does
// not recognise are appended to the EAL arguments, so
// `crc_bench --force-max-simd-bitwidth=256` shows that fallback.
#include <benchmark/benchmark.h>
#include <rte_cpuflags.h>
#include <rte_eal.h>
#include <rte_net_crc.h>
#include <zlib.h>

#include <isa-l/crc.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stack/wire/headers.h"
#include "stack/wire/icrc.h"
#include "stack/wire/opcodes.h"
#include "stack/wire/packet.h"

// DPDK 22.11's rte_vect.h declares this without extern "C" (and marks it
// experimental), so declare it here with C linkage instead of including it.
extern "C" uint16_t rte_vect_get_max_simd_bitwidth(void);

namespace {

namespace wire = uroce::wire;

constexpr std::array<size_t, 4> kSizes = {64, 256, 1024, 4096};
constexpr std::array<size_t, 5> kKernelSizes = {64, 256, 1024, 4096, 9000};
constexpr uint16_t kSimd512 = 512;  // RTE_VECT_SIMD_512

// ---------------------------------------------------------------------------
// Plain CRC-32 implementations, all with zlib's convention: crc(0, buf) is
// the CRC of buf, and crc(crc(0, a), b) == crc(0, a ‖ b) where chainable.

constexpr std::array<uint32_t, 256> kCrcTable = [] {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}();

uint32_t crc_table(uint32_t crc, const uint8_t* p, size_t n) {
  crc = ~crc;
  while (n--) crc = kCrcTable[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t crc_zlib(uint32_t crc, const uint8_t* p, size_t n) { return uint32_t(crc32(crc, p, uInt(n))); }

uint32_t crc_isal(uint32_t crc, const uint8_t* p, size_t n) { return crc32_gzip_refl(crc, p, n); }

// ISA-L's AVX-512 kernel returns without VZEROUPPER, and SSE code (all of
// uroce: DPDK's pkg-config adds -march=corei7) runs slowly while the upper
// ZMM state is dirty. The *_vzeroupper rows clear it after each CRC; every
// benchmark clears it before its loop, so no row pays for the one before it.
#if defined(__x86_64__)
__attribute__((target("avx"))) void zero_upper() { _mm256_zeroupper(); }
const bool kHasAvx = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx") != 0;
}();
#endif

void clear_upper_simd_state() {
#if defined(__x86_64__)
  if (kHasAvx) zero_upper();
#endif
}

uint32_t crc_isal_vzeroupper(uint32_t crc, const uint8_t* p, size_t n) {
  crc = crc32_gzip_refl(crc, p, n);
  clear_upper_simd_state();
  return crc;
}

using ChainedCrc = uint32_t (*)(uint32_t, const uint8_t*, size_t);

struct DpdkAlg {
  const char* name;
  rte_net_crc_alg alg;
};
constexpr std::array<DpdkAlg, 3> kDpdkAlgs = {{
    {"dpdk_scalar", RTE_NET_CRC_SCALAR},
    {"dpdk_sse42", RTE_NET_CRC_SSE42},
    {"dpdk_avx512", RTE_NET_CRC_AVX512},
}};

// The algorithm rte_net_crc_set_alg(want) really installs (lib/net/rte_net_crc.c
// in DPDK 22.11): AVX512 needs the CPU flags and a 512-bit SIMD cap, else it
// falls through to SSE4.2, which needs PCLMULQDQ, else scalar.
rte_net_crc_alg dpdk_effective_alg(rte_net_crc_alg want) {
  const bool avx512 = rte_cpu_get_flag_enabled(RTE_CPUFLAG_AVX512F) &&
                      rte_cpu_get_flag_enabled(RTE_CPUFLAG_AVX512BW) &&
                      rte_cpu_get_flag_enabled(RTE_CPUFLAG_AVX512DQ) &&
                      rte_cpu_get_flag_enabled(RTE_CPUFLAG_AVX512VL) &&
                      rte_cpu_get_flag_enabled(RTE_CPUFLAG_VPCLMULQDQ) &&
                      rte_vect_get_max_simd_bitwidth() >= kSimd512;
  const bool sse42 = rte_cpu_get_flag_enabled(RTE_CPUFLAG_PCLMULQDQ);
  if (want == RTE_NET_CRC_AVX512 && !avx512) want = RTE_NET_CRC_SSE42;
  if (want == RTE_NET_CRC_SSE42 && !sse42) want = RTE_NET_CRC_SCALAR;
  return want;
}

const char* dpdk_alg_name(rte_net_crc_alg a) {
  switch (a) {
    case RTE_NET_CRC_SCALAR: return "scalar";
    case RTE_NET_CRC_SSE42: return "sse42";
    case RTE_NET_CRC_NEON: return "neon";
    case RTE_NET_CRC_AVX512: return "avx512";
  }
  return "?";
}

// Label for a DPDK row: empty when the requested algorithm ran.
std::string dpdk_label(rte_net_crc_alg want) {
  const rte_net_crc_alg got = dpdk_effective_alg(want);
  return got == want ? std::string() : std::string("fell back to ") + dpdk_alg_name(got);
}

uint32_t crc_dpdk(const uint8_t* p, size_t n) { return rte_net_crc_calc(p, uint32_t(n), RTE_NET_CRC32_ETH); }

// 64-byte-aligned random bytes, so no row is penalised by a split first line.
std::vector<uint8_t> g_storage;
const uint8_t* g_data = nullptr;

void init_data() {
  g_storage.resize(16384 + 64);
  uint32_t x = 0x12345678;
  for (auto& b : g_storage) {
    x = x * 1664525u + 1013904223u;
    b = uint8_t(x >> 24);
  }
  const auto addr = reinterpret_cast<uintptr_t>(g_storage.data());
  g_data = g_storage.data() + ((64 - addr % 64) % 64);
}

void bm_crc_chained(benchmark::State& state, ChainedCrc fn) {
  clear_upper_simd_state();
  const size_t n = size_t(state.range(0));
  for (auto _ : state) {
    uint32_t crc = fn(0, g_data, n);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n));
}

void bm_crc_dpdk(benchmark::State& state, rte_net_crc_alg alg) {
  clear_upper_simd_state();
  rte_net_crc_set_alg(alg);  // global: benchmarks run one at a time
  state.SetLabel(dpdk_label(alg));
  const size_t n = size_t(state.range(0));
  for (auto _ : state) {
    uint32_t crc = crc_dpdk(g_data, n);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n));
}

// ---------------------------------------------------------------------------
// ICRC variants over a RoCEv2/IPv4 RC SEND Only frame.

constexpr size_t kEthLen = sizeof(wire::EthHdr);
constexpr size_t kMaskedLen = sizeof(wire::Ipv4Hdr) + sizeof(wire::UdpHdr) + sizeof(wire::Bth);

// Frame bytes the ICRC covers: the IP header up to the last byte before the ICRC.
struct IcrcFrame {
  std::vector<uint8_t> bytes;
  std::span<const uint8_t> l3;
};

IcrcFrame make_frame(size_t payload_len) {
  wire::PacketDesc d;
  const uint8_t src[4] = {192, 168, 1, 1};
  const uint8_t dst[4] = {192, 168, 1, 2};
  d.sgid = wire::Gid::from_ipv4(src);
  d.dgid = wire::Gid::from_ipv4(dst);
  d.opcode = wire::kRcSendOnly;
  d.udp_sport = 0xc000;
  d.dest_qp = 0x11;
  d.psn = 0x123456;
  d.payload_len = uint32_t(payload_len);
  d.pad = wire::pad_for(d.payload_len);
  IcrcFrame f;
  f.bytes.resize(wire::frame_len(d));
  const std::span<const uint8_t> payload(g_data, payload_len);
  if (wire::build(d, payload, f.bytes) == 0) return f;
  const size_t end = wire::header_len(d) + d.payload_len + d.pad;
  f.l3 = std::span<const uint8_t>(f.bytes).subspan(kEthLen, end - kEthLen);
  return f;
}

const uint8_t kOnes[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// A whole ICRC with a chainable CRC: from `ones` (the CRC of the 8 bytes of
// ones, or 0 to compute it here), masked header copy, payload in place. The
// steps of wire::icrc_compute's ISA-L path for IPv4, with the CRC function swapped.
uint32_t icrc_chained(ChainedCrc fn, std::span<const uint8_t> l3, std::optional<uint32_t> ones = {}) {
  std::array<uint8_t, kMaskedLen> hdr;
  std::memcpy(hdr.data(), l3.data(), hdr.size());
  auto* ip = reinterpret_cast<wire::Ipv4Hdr*>(hdr.data());
  ip->tos = 0xff;
  ip->ttl = 0xff;
  ip->checksum.set(0xffff);
  reinterpret_cast<wire::UdpHdr*>(hdr.data() + sizeof(wire::Ipv4Hdr))->checksum.set(0xffff);
  hdr[sizeof(wire::Ipv4Hdr) + sizeof(wire::UdpHdr) + 4] = 0xff;  // BTH FECN, BECN, resv6
  uint32_t crc = ones ? *ones : fn(0, kOnes, sizeof(kOnes));
  crc = fn(crc, hdr.data(), hdr.size());
  return fn(crc, l3.data() + kMaskedLen, l3.size() - kMaskedLen);
}

// The ICRC input made contiguous: 8 bytes of ones, then l3 copied and masked.
// Returns the number of bytes to CRC.
size_t copy_masked(std::span<const uint8_t> l3, uint8_t* scratch) {
  std::memset(scratch, 0xff, 8);
  std::memcpy(scratch + 8, l3.data(), l3.size());
  auto* ip = reinterpret_cast<wire::Ipv4Hdr*>(scratch + 8);
  ip->tos = 0xff;
  ip->ttl = 0xff;
  ip->checksum.set(0xffff);
  reinterpret_cast<wire::UdpHdr*>(scratch + 8 + sizeof(wire::Ipv4Hdr))->checksum.set(0xffff);
  scratch[8 + sizeof(wire::Ipv4Hdr) + sizeof(wire::UdpHdr) + 4] = 0xff;
  return 8 + l3.size();
}

// A whole ICRC with an unseedable CRC: everything copied into one buffer.
uint32_t icrc_copy_dpdk(std::span<const uint8_t> l3, uint8_t* scratch) {
  return crc_dpdk(scratch, copy_masked(l3, scratch));
}

// The same copy with ISA-L: one CRC call instead of two dependent ones.
uint32_t icrc_copy_isal(std::span<const uint8_t> l3, uint8_t* scratch) {
  return crc_isal_vzeroupper(0, scratch, copy_masked(l3, scratch));
}

std::vector<uint8_t> g_scratch;  // for icrc_copy_dpdk; sized once in main

// The path icrc_compute takes under kernel k for an ICRC covering n bytes.
const char* icrc_path(wire::CrcKernel k, size_t n) {
  switch (k) {
    case wire::CrcKernel::kPclmul: return "fold";
    case wire::CrcKernel::kAvx2:
    case wire::CrcKernel::kAvx2Fold: return n >= wire::kIcrcWideMinBytes ? "wide" : "fold";
    case wire::CrcKernel::kAvx512:
      return n < wire::kIcrcWideMinBytes ? "fold" : n <= wire::kIcrcWideMaxBytes ? "wide" : "isal";
    case wire::CrcKernel::kSse: return n <= wire::kIcrcFoldMaxBytes ? "fold" : "isal";
    case wire::CrcKernel::kAuto:
    case wire::CrcKernel::kGeneric: return "isal";
  }
  return "?";
}

// The kernel start-up chose (UROCE_CRC_KERNEL, or the best): the kernel of
// every row but the crc/<kernel> and icrc/<kernel> ones, which restore it.
wire::CrcKernel g_startup_kernel = wire::CrcKernel::kAuto;

void restore_kernel() { (void)wire::set_crc_kernel(g_startup_kernel); }

void bm_icrc_uroce(benchmark::State& state) {
  clear_upper_simd_state();
  restore_kernel();
  const IcrcFrame f = make_frame(size_t(state.range(0)));
  state.SetLabel(std::string(wire::crc_kernel_name(wire::crc_kernel())) + ": " +
                 icrc_path(wire::crc_kernel(), 8 + f.l3.size()));
  for (auto _ : state) {
    uint32_t crc = wire::icrc_compute(wire::L3Kind::kIpv4, f.l3);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(f.l3.size()));
}

void bm_icrc_chained(benchmark::State& state, ChainedCrc fn) {
  clear_upper_simd_state();
  const IcrcFrame f = make_frame(size_t(state.range(0)));
  for (auto _ : state) {
    uint32_t crc = icrc_chained(fn, f.l3);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(f.l3.size()));
}

void bm_icrc_isal_prefolded(benchmark::State& state) {
  clear_upper_simd_state();
  const IcrcFrame f = make_frame(size_t(state.range(0)));
  const uint32_t ones = crc_isal_vzeroupper(0, kOnes, sizeof(kOnes));
  for (auto _ : state) {
    uint32_t crc = icrc_chained(crc_isal_vzeroupper, f.l3, ones);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(f.l3.size()));
}

void bm_icrc_copy_isal(benchmark::State& state) {
  clear_upper_simd_state();
  const IcrcFrame f = make_frame(size_t(state.range(0)));
  for (auto _ : state) {
    uint32_t crc = icrc_copy_isal(f.l3, g_scratch.data());
    benchmark::DoNotOptimize(crc);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(f.l3.size()));
}

void bm_icrc_copy_dpdk(benchmark::State& state, rte_net_crc_alg alg) {
  clear_upper_simd_state();
  rte_net_crc_set_alg(alg);
  state.SetLabel(dpdk_label(alg));
  const IcrcFrame f = make_frame(size_t(state.range(0)));
  for (auto _ : state) {
    uint32_t crc = icrc_copy_dpdk(f.l3, g_scratch.data());
    benchmark::DoNotOptimize(crc);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(f.l3.size()));
}

// Selects kernel k for one row, or marks the row skipped: false then.
bool use_kernel(benchmark::State& state, wire::CrcKernel k) {
  if (!wire::set_crc_kernel(k).ok()) {
    state.SkipWithError((std::string("this CPU lacks the ") + std::string(wire::crc_kernel_name(k)) +
                         " kernel").c_str());
    return false;
  }
  return true;
}

void bm_crc_kernel(benchmark::State& state, wire::CrcKernel k) {
  clear_upper_simd_state();
  if (!use_kernel(state, k)) return;
  const std::span<const uint8_t> b(g_data, size_t(state.range(0)));
  for (auto _ : state) {
    uint32_t crc = wire::crc32_ieee(0, b);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(b.size()));
  restore_kernel();
}

void bm_icrc_kernel(benchmark::State& state, wire::CrcKernel k) {
  clear_upper_simd_state();
  if (!use_kernel(state, k)) return;
  const IcrcFrame f = make_frame(size_t(state.range(0)));
  state.SetLabel(icrc_path(k, 8 + f.l3.size()));
  for (auto _ : state) {
    uint32_t crc = wire::icrc_compute(wire::L3Kind::kIpv4, f.l3);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(f.l3.size()));
  restore_kernel();
}

// ---------------------------------------------------------------------------

// Every implementation must agree before any is timed.
bool self_check() {
  bool ok = true;
  for (size_t n : {size_t(1), size_t(3), size_t(64), size_t(100), size_t(1024), size_t(4096)}) {
    const uint32_t want = crc_table(0, g_data, n);
    const auto check = [&](const char* what, uint32_t got) {
      if (got != want) {
        std::fprintf(stderr, "crc_bench: %s(%zu bytes) = %08x, table loop = %08x\n", what, n, got, want);
        ok = false;
      }
    };
    check("zlib", crc_zlib(0, g_data, n));
    check("isal", crc_isal(0, g_data, n));
    check("isal chained", crc_isal(crc_isal(0, g_data, n / 2), g_data + n / 2, n - n / 2));
    for (const wire::CrcKernel k : wire::kCrcKernels) {
      if (!wire::set_crc_kernel(k).ok()) continue;
      check(wire::crc_kernel_name(k).data(), wire::crc32_ieee(0, {g_data, n}));
    }
    restore_kernel();
    for (const DpdkAlg& a : kDpdkAlgs) {
      rte_net_crc_set_alg(a.alg);
      check(a.name, crc_dpdk(g_data, n));
    }
  }
  for (size_t n : kKernelSizes) {
    const IcrcFrame f = make_frame(n);
    if (f.l3.empty()) {
      std::fprintf(stderr, "crc_bench: wire::build failed for a %zu-byte payload\n", n);
      return false;
    }
    const uint32_t want = wire::icrc_compute(wire::L3Kind::kIpv4, f.l3);
    // The frame carries the ICRC little-endian right after f.l3.
    const uint8_t* p = f.l3.data() + f.l3.size();
    const uint32_t carried = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    const auto check = [&](const char* what, uint32_t got) {
      if (got != want) {
        std::fprintf(stderr, "crc_bench: ICRC %s(%zu-byte payload) = %08x, icrc_compute = %08x\n", what, n,
                     got, want);
        ok = false;
      }
    };
    check("carried in frame", carried);
    check("table chained", icrc_chained(crc_table, f.l3));
    check("zlib chained", icrc_chained(crc_zlib, f.l3));
    check("isal chained", icrc_chained(crc_isal, f.l3));
    check("isal chained + vzeroupper", icrc_chained(crc_isal_vzeroupper, f.l3));
    check("isal prefolded + vzeroupper", icrc_chained(crc_isal_vzeroupper, f.l3, crc_isal(0, kOnes, sizeof(kOnes))));
    check("isal copy", icrc_copy_isal(f.l3, g_scratch.data()));
    for (const wire::CrcKernel k : wire::kCrcKernels) {
      if (!wire::set_crc_kernel(k).ok()) continue;
      check(wire::crc_kernel_name(k).data(), wire::icrc_compute(wire::L3Kind::kIpv4, f.l3));
    }
    restore_kernel();
    for (const DpdkAlg& a : kDpdkAlgs) {
      rte_net_crc_set_alg(a.alg);
      check(a.name, icrc_copy_dpdk(f.l3, g_scratch.data()));
    }
  }
  return ok;
}

void register_benchmarks() {
  const auto sizes = [](benchmark::internal::Benchmark* b) {
    for (size_t n : kSizes) b->Arg(int64_t(n));
  };
  sizes(benchmark::RegisterBenchmark("crc32/table_bytewise", bm_crc_chained, crc_table));
  sizes(benchmark::RegisterBenchmark("crc32/zlib", bm_crc_chained, crc_zlib));
  sizes(benchmark::RegisterBenchmark("crc32/isal_gzip_refl", bm_crc_chained, crc_isal));
  for (const DpdkAlg& a : kDpdkAlgs) {
    sizes(benchmark::RegisterBenchmark((std::string("crc32/") + a.name).c_str(), bm_crc_dpdk, a.alg));
  }
  sizes(benchmark::RegisterBenchmark("icrc/uroce_icrc_compute", bm_icrc_uroce));
  for (const wire::CrcKernel k : wire::kCrcKernels) {
    const std::string name(wire::crc_kernel_name(k));
    for (const size_t n : kKernelSizes) {
      benchmark::RegisterBenchmark(("crc/" + name).c_str(), bm_crc_kernel, k)->Arg(int64_t(n));
    }
  }
  for (const wire::CrcKernel k : wire::kCrcKernels) {
    const std::string name(wire::crc_kernel_name(k));
    for (const size_t n : kKernelSizes) {
      benchmark::RegisterBenchmark(("icrc/" + name).c_str(), bm_icrc_kernel, k)->Arg(int64_t(n));
    }
  }
  sizes(benchmark::RegisterBenchmark("icrc/isal_prefolded_vzeroupper", bm_icrc_isal_prefolded));
  sizes(benchmark::RegisterBenchmark("icrc/isal_chained", bm_icrc_chained, crc_isal));
  sizes(benchmark::RegisterBenchmark("icrc/isal_chained_vzeroupper", bm_icrc_chained, crc_isal_vzeroupper));
  sizes(benchmark::RegisterBenchmark("icrc/isal_copy_vzeroupper", bm_icrc_copy_isal));
  sizes(benchmark::RegisterBenchmark("icrc/zlib_chained", bm_icrc_chained, crc_zlib));
  for (const DpdkAlg& a : kDpdkAlgs) {
    if (a.alg == RTE_NET_CRC_SCALAR) continue;  // no faster than zlib, which chains
    sizes(benchmark::RegisterBenchmark((std::string("icrc/") + a.name + "_copy").c_str(), bm_icrc_copy_dpdk,
                                       a.alg));
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);  // removes the --benchmark_* flags

  std::vector<std::string> eal_args = {
      argv[0], "--no-huge", "--no-pci", "--no-shconf", "--no-telemetry", "-m", "256", "--log-level=1", "-l", "0",
  };
  const std::string_view simd_flag = "--force-max-simd-bitwidth";
  bool simd_given = false;  // EAL rejects the flag twice
  for (int i = 1; i < argc; ++i) {
    eal_args.emplace_back(argv[i]);
    simd_given |= std::string_view(argv[i]).starts_with(simd_flag);
  }
  if (!simd_given) eal_args.emplace_back(std::string(simd_flag) + "=512");
  std::vector<char*> eal_argv;
  for (auto& s : eal_args) eal_argv.push_back(s.data());
  if (rte_eal_init(int(eal_argv.size()), eal_argv.data()) < 0) {
    std::fprintf(stderr, "crc_bench: rte_eal_init failed\n");
    return 1;
  }

  g_startup_kernel = wire::crc_kernel();
  init_data();
  g_scratch.resize(8 + 16384);
  int rc = 0;
  if (!self_check()) {
    rc = 1;
  } else {
    register_benchmarks();
    benchmark::AddCustomContext("dpdk_max_simd_bitwidth", std::to_string(rte_vect_get_max_simd_bitwidth()));
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  }
  rte_eal_cleanup();
  return rc;
}
