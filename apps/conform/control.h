// The control channel between `uroce conform` (the tester) and the target
// helper: one message of kMsgBytes each way, text padded with NULs,
// "VERB key=value key=value ...", so that a helper written against any
// libibverbs speaks it in a few lines of C (docs/CONFORMANCE.md):
//   tester: setup mac=M ip=A.B.C.D qpn=N psn=N recvs=N break=NAME
//                 [type=rc|ud timeout=14 retry_cnt=7 rnr_retry=7]
//   helper: ready mac=M ip=A.B.C.D qpn=N psn=N rkey=N va=N len=N recv_len=N mtu=N rnr_timer=N qkey=N
//                 [cm_port=N]   (an rdma_cm listener on that TCP port; 0 or absent: none)
//                 [ro_rkey=N pd2_rkey=N]   (the region again: remote read only; every right but in another PD)
//                 [cc=dcqcn|timely|none|unknown]   (the target's congestion control; absent: unknown)
//           | refused reason=TEXT_WITHOUT_SPACES   (the target cannot do what the case needs)
//           | error reason=TEXT_WITHOUT_SPACES     (a bad message, a verbs call that failed)
//   tester: state            helper: state qp=RTS wc=0,5,... [creq=N]   (IBV_WC_* codes, in order;
//                                  creq: connection requests the listener's consumer got since setup)
//   tester: post op=send|write|read len=N count=N [rkey=N va=N]   (signaled WRs on the target's QP)
//   helper: posted count=N
//   tester: quit             (the helper exits)
// Numbers are decimal or 0x-hex. Control path.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <uroce/addr.h>

namespace uroce::apps::conform {

inline constexpr size_t kMsgBytes = 256;

struct Msg {
  std::string verb;
  std::map<std::string, std::string, std::less<>> kv;

  /// The value of key ("" if absent).
  std::string_view get(std::string_view key) const;
  /// The value of key as a number; nullopt if absent or not a number.
  std::optional<uint64_t> num(std::string_view key) const;
};

/// The IPv4 address of an IPv4-mapped GID as "A.B.C.D" (the messages' ip=).
std::string ipv4_text(const Gid& g);

/// Parses the text of a message (up to its first NUL).
Msg parse_msg(std::span<const char> bytes);

/// Builds a message: verb then the pairs in order. Returns "" if it would
/// not fit in kMsgBytes (with its NUL).
std::string format_msg(std::string_view verb, std::initializer_list<std::pair<std::string_view, std::string>> kv);

}  // namespace uroce::apps::conform
