#include "stack/wire/icrc.h"

#include <isa-l/crc.h>

#include <array>
#include <cstring>

#include "stack/wire/headers.h"

namespace uroce::wire {
namespace {

// CRC state after the 8 bytes of 0xFF that replace the LRH (A17.3.3).
const uint32_t kLrhSeed = [] {
  const std::array<uint8_t, 8> ones = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  return crc32_gzip_refl(0, ones.data(), ones.size());
}();

}  // namespace

uint32_t crc32_ieee(uint32_t crc, std::span<const uint8_t> buf) {
  return crc32_gzip_refl(crc, buf.data(), buf.size());
}

uint32_t icrc_compute(L3Kind kind, std::span<const uint8_t> l3) {
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
  const uint32_t crc = crc32_gzip_refl(kLrhSeed, hdr.data(), masked);
  return crc32_gzip_refl(crc, l3.data() + masked, l3.size() - masked);
}

}  // namespace uroce::wire
