// Counters of the addressing layer (ARP, IPv6 neighbour discovery, ICMP echo,
// neighbour resolution), one per event or drop reason. Declared once in an
// X-macro that makes the enum and the name table, as include/uroce/counters.h
// does for the device counters (which another part of the stack owns); the
// engine can fold these into its own table later.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace uroce::net {

#define UROCE_NET_COUNTERS(X)                                                                 \
  /* ARP, RFC 826 */                                                                          \
  X(arp_req_rcvd)             /* requests for one of our addresses */                         \
  X(arp_reply_rcvd)           /* replies addressed to us */                                   \
  X(arp_reply_sent)                                                                           \
  X(arp_req_sent)             /* resolution requests and re-probes */                         \
  X(arp_garp_sent)            /* gratuitous announcements */                                  \
  X(arp_garp_rcvd)            /* sender IP == target IP */                                    \
  X(arp_not_for_us)           /* request for an address not in the GID table on that VLAN */  \
  X(arp_bad)                  /* not Ethernet/IPv4, bad lengths or opcode */                  \
  X(arp_conflict)             /* another MAC claims one of our addresses */                   \
  /* IPv4 / ICMP, RFC 791 / 792 */                                                            \
  X(ip_bad_header)            /* version, IHL or total length wrong */                        \
  X(ip_bad_checksum)                                                                          \
  X(ip_fragment)              /* fragmented ICMP: not reassembled, dropped */                 \
  X(ip_not_for_us)            /* ICMP to an address not in the GID table on that VLAN */      \
  X(icmp_echo_rcvd)                                                                           \
  X(icmp_echo_replied)                                                                        \
  X(icmp_bad)                 /* shorter than its header */                                   \
  X(icmp_bad_checksum)                                                                        \
  X(icmp_other)               /* ICMP types we do not answer */                               \
  /* IPv6 / ICMPv6 / ND, RFC 8200 / 4443 / 4861 */                                            \
  X(ip6_bad_header)           /* version or payload length wrong */                           \
  X(ip6_not_for_us)           /* echo to an address not ours on that VLAN */                  \
  X(icmp6_bad)                /* shorter than its header */                                   \
  X(icmp6_bad_checksum)                                                                       \
  X(icmp6_echo_rcvd)                                                                          \
  X(icmp6_echo_replied)                                                                       \
  X(icmp6_other)              /* RS, RA, MLD, redirects...: not ours to answer */             \
  X(nd_ns_rcvd)               /* solicitations for one of our addresses */                    \
  X(nd_na_sent)                                                                               \
  X(nd_ns_sent)                                                                               \
  X(nd_na_rcvd)                                                                               \
  X(nd_ns_not_for_us)         /* target not in the GID table on that VLAN */                  \
  X(nd_bad)                   /* RFC 4861 7.1 validity checks failed (hop limit 255, ...) */  \
  X(nd_dad_defended)          /* NS from :: for our address: we answer to ff02::1 */          \
  X(nd_conflict)              /* NA from another node for one of our addresses */             \
  /* L2 */                                                                                    \
  X(l2_not_for_us)            /* destination MAC is neither ours, broadcast nor our mcast */  \
  /* neighbour table */                                                                       \
  X(neigh_resolve_started)    /* resolve() created an incomplete entry */                     \
  X(neigh_resolved)           /* an incomplete entry got its MAC */                           \
  X(neigh_resolve_timeout)    /* all solicitations unanswered: entry failed */                \
  X(neigh_retransmit)         /* a solicitation sent again (backoff) */                       \
  X(neigh_learned)            /* entry created from a peer's request (RFC 826 / 4861 7.2.3) */\
  X(neigh_updated)            /* known entry confirmed or its MAC changed */                  \
  X(neigh_evicted)            /* an entry replaced to make room */                            \
  X(neigh_table_full)         /* no slot could be freed: resolve() fails */                   \
  X(neigh_no_source)          /* resolve() with no usable source GID */                       \
  /* transmit */                                                                              \
  X(tx_burst_full)            /* the caller's burst array was full: reply not sent */         \
  X(tx_pool_empty)            /* no mbuf for a reply */                                       \
  X(tx_too_big)               /* reply would not fit one mbuf */

enum class NetCounter : uint16_t {
#define UROCE_NET_COUNTER_ENUM(name) name,
  UROCE_NET_COUNTERS(UROCE_NET_COUNTER_ENUM)
#undef UROCE_NET_COUNTER_ENUM
      kCount
};

inline constexpr std::array<std::string_view, size_t(NetCounter::kCount)> kNetCounterNames = {
#define UROCE_NET_COUNTER_NAME(name) #name,
    UROCE_NET_COUNTERS(UROCE_NET_COUNTER_NAME)
#undef UROCE_NET_COUNTER_NAME
};

struct NetCounters {
  std::array<uint64_t, size_t(NetCounter::kCount)> v{};
  void inc(NetCounter c, uint64_t n = 1) { v[size_t(c)] += n; }
  uint64_t get(NetCounter c) const { return v[size_t(c)]; }
};

}  // namespace uroce::net
