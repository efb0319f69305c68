// Text forms of link and network addresses for the apps' options and output:
// "aa:bb:cc:dd:ee:ff" MACs and IPv4 / IPv6 addresses as GIDs. Control path.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <uroce/addr.h>

#include "apps/common/args.h"

namespace uroce::apps {

/// Parses "aa:bb:cc:dd:ee:ff" (hex, 1-2 digits per byte); nullopt otherwise.
std::optional<MacAddr> parse_mac(std::string_view text);
/// "aa:bb:cc:dd:ee:ff", lowercase.
std::string mac_str(const MacAddr& m);
/// The GID of an IPv4 address (::ffff:a.b.c.d) or of an IPv6 address; nullopt
/// if text is neither (want_v6 selects which family is accepted).
std::optional<Gid> parse_ip_gid(std::string_view text, bool want_v6);
/// A GID as inet_ntop writes it ("::ffff:10.70.0.3", "fd00:70::3").
std::string gid_str(const Gid& g);

/// Our addresses as `uroce pingpong` and `uroce perf` take them: --ip (GID
/// index 0, ::ffff:a.b.c.d), --ip6 (GID index 1) and --mac (the port's if unset).
struct OurAddrs {
  std::optional<Gid> gid4, gid6;
  std::optional<MacAddr> mac;
  /// The GID at index idx (0 or 1), if given.
  const std::optional<Gid>& gid(uint8_t idx) const { return idx == 1 ? gid6 : gid4; }
};
/// Parses --ip / --ip6 / --mac into out and checks that the GID index the
/// user chose (gid_idx, given as option idx_opt, e.g. "-g" or "-x") has its
/// address. Returns "" or the error to print with the command's usage.
std::string parse_our_addrs(const Args& args, uint8_t gid_idx, std::string_view idx_opt, OurAddrs& out);
/// The same for the rdma_cm tools (rping, ucmatose, udaddy), which pick the
/// GID by the peer's address family: at least one of --ip / --ip6.
std::string parse_our_addrs(const Args& args, OurAddrs& out);

}  // namespace uroce::apps
