// uroce perf's out-of-band messages: perftest's QP info, as text over TCP
// and as the binary pingpong_dest over rdma_cm (-R); see perf_exchange.h.
// Control path.
#include "apps/perf/perf_exchange.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "apps/common/addr_text.h"

namespace uroce::apps::perftest {

void format_dest(const Dest& d, char (&msg)[kKeyMsgBytes]) {
  std::memset(msg, 0, sizeof(msg));
  int n = std::snprintf(msg, sizeof(msg), "%04x:%04x:%06x:%06x:%08x:%016llx:", d.lid & 0xffff, d.out_reads & 0xffff,
                        d.qpn & 0xffffff, d.psn & 0xffffff, d.rkey, (unsigned long long)d.vaddr);
  for (int i = 0; i < 16; ++i) n += std::snprintf(msg + n, sizeof(msg) - size_t(n), "%02x:", d.gid.raw[i]);
  std::snprintf(msg + n, sizeof(msg) - size_t(n), "%08x:", d.srqn);
}

bool parse_dest(const char (&msg)[kKeyMsgBytes], Dest& d) {
  std::string text(msg, strnlen(msg, kKeyMsgBytes));
  std::vector<uint64_t> f;
  size_t pos = 0;
  while (pos < text.size() && f.size() < 23) {
    const size_t colon = text.find(':', pos);
    const std::string tok = text.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    if (tok.empty()) return false;
    char* end = nullptr;
    f.push_back(std::strtoull(tok.c_str(), &end, 16));
    if (*end != '\0') return false;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  if (f.size() != 23) return false;
  d.lid = uint32_t(f[0]);
  d.out_reads = uint32_t(f[1]);
  d.qpn = uint32_t(f[2]);
  d.psn = uint32_t(f[3]);
  d.rkey = uint32_t(f[4]);
  d.vaddr = f[5];
  for (int i = 0; i < 16; ++i) d.gid.raw[i] = uint8_t(f[size_t(6 + i)]);
  d.srqn = uint32_t(f[22]);
  return true;
}

namespace {
constexpr uint32_t kExtMarker = 0x55524f00;  // "URO\0"
constexpr uint32_t kExtSr = 1, kExtSpray = 2;
}  // namespace

uint32_t ext_offer(const QpExt& e) {
  const uint32_t bits = (e.selective_repeat ? kExtSr : 0) | (e.paths > 1 ? kExtSpray : 0);
  return bits ? kExtMarker | bits : 0;
}

QpExt agreed_ext(const QpExt& mine, uint32_t peer_srqn) {
  const uint32_t bits = (peer_srqn & 0xffffff00) == kExtMarker ? peer_srqn & ext_offer(mine) & 0xff : 0;
  QpExt e;
  e.selective_repeat = bits & kExtSr;
  if (bits & kExtSpray) {
    e.paths = mine.paths;
    e.path_mode = mine.path_mode;
    e.flowlet_gap_ns = mine.flowlet_gap_ns;
  }
  return e;
}

void format_dest_bin(const Dest& d, uint32_t gid_index, uint8_t (&msg)[kBinDestBytes]) {
  std::memset(msg, 0, sizeof(msg));
  const uint32_t w[5] = {d.lid, d.out_reads, d.qpn, d.psn, d.rkey};
  for (int i = 0; i < 5; ++i) {
    const uint32_t be = __builtin_bswap32(w[i]);
    std::memcpy(msg + 4 * i, &be, 4);
  }
  const uint64_t va = __builtin_bswap64(d.vaddr);
  std::memcpy(msg + 24, &va, 8);
  std::memcpy(msg + 32, d.gid.raw, 16);
  const uint32_t tail[2] = {__builtin_bswap32(d.srqn), __builtin_bswap32(gid_index)};
  std::memcpy(msg + 48, tail, 8);
}
void parse_dest_bin(const uint8_t (&msg)[kBinDestBytes], Dest& d) {
  uint32_t w[5];
  std::memcpy(w, msg, sizeof(w));
  d.lid = __builtin_bswap32(w[0]);
  d.out_reads = __builtin_bswap32(w[1]);
  d.qpn = __builtin_bswap32(w[2]);
  d.psn = __builtin_bswap32(w[3]);
  d.rkey = __builtin_bswap32(w[4]);
  uint64_t va;
  std::memcpy(&va, msg + 24, 8);
  d.vaddr = __builtin_bswap64(va);
  std::memcpy(d.gid.raw, msg + 32, 16);
}

CmPeer cm_peer(const Config& cfg) {
  const std::optional<Gid> ip = parse_ip_gid(cfg.server ? cfg.listen : cfg.host, false);
  const bool any = cfg.server && cfg.listen == "0.0.0.0";
  return CmPeer{.server = cfg.server, .addr = SockAddr{any || !ip ? Gid{} : *ip, cfg.port}, .timeout_s = cfg.timeout_s};
}

}  // namespace uroce::apps::perftest
