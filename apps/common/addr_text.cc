// Text forms of MACs and GIDs (addr_text.h). Control path.
#include "apps/common/addr_text.h"

#include <cstdio>
#include <cstring>

#include <arpa/inet.h>

namespace uroce::apps {

std::optional<MacAddr> parse_mac(std::string_view text) {
  const std::string s(text);
  unsigned b[6];
  char tail = 0;
  if (std::sscanf(s.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6) {
    return std::nullopt;
  }
  MacAddr m;
  for (int i = 0; i < 6; ++i) m.b[i] = uint8_t(b[i]);
  return m;
}

std::string mac_str(const MacAddr& m) {
  char buf[18];
  std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", m.b[0], m.b[1], m.b[2], m.b[3], m.b[4], m.b[5]);
  return buf;
}

std::optional<Gid> parse_ip_gid(std::string_view text, bool want_v6) {
  const std::string s(text);
  if (want_v6) {
    Gid g;
    if (inet_pton(AF_INET6, s.c_str(), g.raw) != 1 || g.is_ipv4_mapped()) return std::nullopt;
    return g;
  }
  uint8_t v4[4];
  if (inet_pton(AF_INET, s.c_str(), v4) != 1) return std::nullopt;
  return Gid::from_ipv4(v4);
}

std::string gid_str(const Gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.raw, buf, sizeof(buf));
  return buf;
}

namespace {

std::string parse_addr_options(const Args& args, OurAddrs& out) {
  if (args.given("ip")) {
    out.gid4 = parse_ip_gid(args.get_str("ip"), false);
    if (!out.gid4) return "--ip is not an IPv4 address";
  }
  if (args.given("ip6")) {
    out.gid6 = parse_ip_gid(args.get_str("ip6"), true);
    if (!out.gid6) return "--ip6 is not an IPv6 address";
  }
  if (args.given("mac")) {
    out.mac = parse_mac(args.get_str("mac"));
    if (!out.mac) return "--mac is not aa:bb:cc:dd:ee:ff";
  }
  return "";
}

}  // namespace

std::string parse_our_addrs(const Args& args, uint8_t gid_idx, std::string_view idx_opt, OurAddrs& out) {
  if (std::string e = parse_addr_options(args, out); !e.empty()) return e;
  if (!out.gid(gid_idx)) {
    return std::string(idx_opt) + (gid_idx == 1 ? " 1 needs --ip6" : " 0 needs --ip (our IPv4 address)");
  }
  return "";
}

std::string parse_our_addrs(const Args& args, OurAddrs& out) {
  if (std::string e = parse_addr_options(args, out); !e.empty()) return e;
  if (!out.gid4 && !out.gid6) return "give our address: --ip and/or --ip6";
  return "";
}

}  // namespace uroce::apps
