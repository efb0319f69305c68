// Invariant CRC (IBA 7.8.1; RoCEv2 Annex A17.3.3): CRC-32 with the IEEE 802.3
// polynomial (not CRC-32C), reflected, as zlib computes it, over
//   8 bytes of 0xFF standing in for the LRH,
//   the IP header (IPv4: TOS, TTL and checksum as ones; IPv6/GRH: traffic
//   class, flow label and hop limit as ones),
//   the UDP header with its checksum as ones (RoCEv2 only),
//   the BTH with byte 4 (FECN, BECN, resv6) as ones,
//   then everything up to the ICRC, which is stored in little-endian order.
// Several kernels, one result, none copying the payload; one is chosen at
// start-up for the CPU (CrcKernel below). Short frames are folded in one pass
// that reads the headers and the rest in place, masking the headers in
// registers (icrc.cc's own PCLMULQDQ fold). Long frames go to the kernel's
// bulk CRC: ISA-L over a masked copy of the headers then the rest in place,
// or icrc.cc's fold widened to 256-bit VPCLMULQDQ, in the same single pass.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include <uroce/status.h>

namespace uroce::wire {

enum class L3Kind : uint8_t {
  kIpv4,  // RoCEv2 over IPv4
  kIpv6,  // RoCEv2 over IPv6
  kGrh,   // RoCEv1: GRH directly over Ethernet, no UDP
};

/// The most bytes an ICRC covers (the 8 ones included) for which icrc_compute
/// folds with its own 128-bit kernel under CrcKernel::kSse; ISA-L is used
/// above (it was the threshold of kAvx512 too, before the wide fold). Chosen by measurement:
/// docs/PERFORMANCE.md, "A whole ICRC per frame".
inline constexpr size_t kIcrcFoldMaxBytes = 1024;

/// Under CrcKernel::kAvx2: the shortest run of bytes in one span that the
/// 256-bit step folds (shorter ones, and the rest of a run, take the 128-bit
/// fold), the fewest bytes of a CRC that may take it, and of an ICRC (the
/// ones and the longest headers besides). Below, the call into the 256-bit
/// code and the joining of its lanes cost more than they save
/// (docs/PERFORMANCE.md, "CRC kernels per CPU").
inline constexpr size_t kCrcWideMinBytes = 128;
inline constexpr size_t kIcrcWideMinBytes = 8 + 60 + kCrcWideMinBytes;

/// Under CrcKernel::kAvx512: the most bytes an ICRC covers for which
/// icrc_compute takes the wide fold (from kIcrcWideMinBytes); ISA-L's
/// AVX-512 kernel is faster above (docs/PERFORMANCE.md, "CRC kernels per CPU").
inline constexpr size_t kIcrcWideMaxBytes = 2048;

/// The CRC kernels (docs/PERFORMANCE.md, "CRC kernels per CPU"). Each gives
/// the same CRC and ICRC; they differ in speed and in what the CPU needs.
enum class CrcKernel : uint8_t {
  kAuto,    ///< the best this CPU has (the default): kAvx512, else kAvx2 on AMD and kAvx2Fold on
            ///< other CPUs, else kSse
  kSse,     ///< fold up to kIcrcFoldMaxBytes, ISA-L crc32_gzip_refl_by8 (SSE) above; PCLMULQDQ, SSE4.1
  kPclmul,  ///< icrc.cc's 128-bit PCLMULQDQ fold at every length; PCLMULQDQ
  kAvx2,    ///< the fold, widened to four 256-bit VPCLMULQDQ lanes for long runs, where 1,792 bytes of
            ///< each 4,096-byte block (1,664 of a last 3,968-byte one) are XORed onto later bytes, not
            ///< folded; AVX2, VPCLMULQDQ
  kAvx2Fold,  ///< kAvx2 folding every byte (no skipped blocks): faster on the Intel core measured,
              ///< slower on AMD Zen 5 (docs/PERFORMANCE.md); AVX2, VPCLMULQDQ
  kAvx512,  ///< kAvx2's fold up to kIcrcWideMaxBytes, ISA-L crc32_gzip_refl_by16_10 above and for
            ///< every plain CRC; AVX-512 F/BW/DQ/VL, VPCLMULQDQ, AVX2
  kGeneric, ///< ISA-L's own choice (crc32_gzip_refl), for CPUs without PCLMULQDQ; never chosen otherwise
};

/// Every kernel but kAuto, in the enum's order: what tests and benchmarks run.
inline constexpr std::array kCrcKernels = {CrcKernel::kSse,      CrcKernel::kPclmul, CrcKernel::kAvx2,
                                           CrcKernel::kAvx2Fold, CrcKernel::kAvx512, CrcKernel::kGeneric};
static_assert(size_t(kCrcKernels.back()) == kCrcKernels.size(), "kCrcKernels lists every kernel but kAuto");

/// "auto", "sse", "pclmul", "avx2", "avx2-fold", "avx512", "generic": the names
/// UROCE_CRC_KERNEL takes.
std::string_view crc_kernel_name(CrcKernel k);
/// The kernel of that name, nullopt for none.
std::optional<CrcKernel> crc_kernel_from_name(std::string_view name);
/// True where this CPU (and OS) can run the kernel; kAuto and kGeneric always.
bool crc_kernel_supported(CrcKernel k);
/// The kernel kAuto stands for on this CPU.
CrcKernel crc_kernel_best();
/// Makes `k` the kernel of crc32_ieee and icrc_compute (kAuto: the best).
/// kInvalidArgument, leaving the kernel as it was, where the CPU lacks it.
/// Control path: not to be called while another thread computes a CRC.
Status set_crc_kernel(CrcKernel k);
/// The kernel in use, never kAuto. At start-up: UROCE_CRC_KERNEL's (a name
/// above) where that variable is set and not empty, else the best. A name
/// that is not one, or a kernel this CPU lacks, ends the process at start-up
/// with exit status 2 and a message on stderr saying why and what this CPU has.
CrcKernel crc_kernel();
/// What start-up does with UROCE_CRC_KERNEL's value (null: unset): sets the
/// kernel, or prints why not and exits with status 2. For tests.
void apply_crc_kernel_setting(const char* value);

/// CRC-32 (IEEE, reflected, zlib convention) of buf continued from crc;
/// crc32_ieee(0, ...) is the CRC of buf alone. Uses the kernel in use.
uint32_t crc32_ieee(uint32_t crc, std::span<const uint8_t> buf);

/// ICRC of a packet. `l3` runs from the first byte of the IP header (or GRH)
/// to the last byte before the ICRC; for IPv4 the header must be 20 bytes.
/// The caller has checked that `l3` holds at least the L3, UDP and BTH headers.
uint32_t icrc_compute(L3Kind kind, std::span<const uint8_t> l3);
/// The same over a packet held in pieces (a chained mbuf whose payload is
/// registered memory): `l3` runs from the IP header (or GRH) to some point at
/// or after the BTH, then the bytes of each span of `rest` follow in order,
/// up to the last byte before the ICRC. The one
/// implementation: the single-span form is this with `rest` empty.
uint32_t icrc_compute(L3Kind kind, std::span<const uint8_t> l3, std::span<const std::span<const uint8_t>> rest);

}  // namespace uroce::wire
