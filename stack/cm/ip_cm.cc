// rdma_cm private-data header (Annex A11; Linux cma.c struct cma_hdr).
#include "stack/cm/ip_cm.h"

#include <cstring>

namespace uroce::cm {

CmError decode_cma_hdr(std::span<const uint8_t> private_data, CmaHdrDesc& out) {
  if (private_data.size() < sizeof(CmaHdr)) return CmError::kShort;
  const auto& h = *reinterpret_cast<const CmaHdr*>(private_data.data());
  if (h.cma_version != kCmaVersion) return CmError::kBadCmaVersion;
  const uint8_t v = uint8_t(h.ip_version >> kCmaIpVersionShift);
  if (v != 4 && v != 6) return CmError::kBadCmaIpVersion;
  out.ip_version = v;
  out.src_port = h.src_port.get();
  std::memcpy(out.src_addr.data(), h.src_addr, 16);
  std::memcpy(out.dst_addr.data(), h.dst_addr, 16);
  return CmError::kOk;
}

CmError encode_cma_hdr(const CmaHdrDesc& d, std::span<uint8_t> out) {
  if (out.size() < sizeof(CmaHdr)) return CmError::kShort;
  if (d.ip_version != 4 && d.ip_version != 6) return CmError::kFieldRange;
  CmaHdr h;
  h.cma_version = kCmaVersion;
  h.ip_version = uint8_t(d.ip_version << kCmaIpVersionShift);
  h.src_port.set(d.src_port);
  std::memcpy(h.src_addr, d.src_addr.data(), 16);
  std::memcpy(h.dst_addr, d.dst_addr.data(), 16);
  std::memcpy(out.data(), &h, sizeof(h));
  return CmError::kOk;
}

CmaHdrDesc cma_hdr_ipv4(const uint8_t src[4], uint16_t src_port, const uint8_t dst[4]) {
  CmaHdrDesc d;
  d.ip_version = 4;
  d.src_port = src_port;
  std::memcpy(d.src_addr.data() + kCmaIpv4AddrOffset, src, 4);
  std::memcpy(d.dst_addr.data() + kCmaIpv4AddrOffset, dst, 4);
  return d;
}

}  // namespace uroce::cm
