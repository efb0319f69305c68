// Text forms of link and network addresses for the apps' options and output:
// "aa:bb:cc:dd:ee:ff" MACs and IPv4 / IPv6 addresses as GIDs. Control path.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <uroce/addr.h>

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

}  // namespace uroce::apps
