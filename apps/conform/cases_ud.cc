// The cases of the target's UD QP (docs/CONFORMANCE.md).
#include "apps/conform/checks.h"
#include "apps/conform/conform.h"

namespace uroce::apps::conform {

namespace {

/// A UD SEND Only of 64 bytes to the target's QP with Q_Key qkey and P_Key pkey.
void ud_send(Tester& t, uint32_t qkey, uint16_t pkey = 0xffff) {
  wire::PacketDesc d = t.req(wire::kUdSendOnly);
  d.pkey = pkey;
  d.ack_req = false;
  d.deth_qkey = qkey;
  d.deth_src_qp = t.our_qpn();
  t.send(d, pattern(64, 20));
}

/// Sends the bad datagram, expects no receive to complete; then the right
/// one (Q_Key and P_Key the QP's), which must complete exactly one.
Outcome bad_then_good(Tester& t, uint32_t qkey, uint16_t pkey, std::string_view what) {
  ud_send(t, qkey, pkey);
  (void)t.collect(0);
  TargetState st;
  std::string err;
  if (!t.state(st, err)) return error(err);
  if (!st.completions.empty()) return deviates("the " + std::string(what) + " completed " + completions_text(st.completions));
  ud_send(t, t.target().qkey);
  if (!t.wait_completions(1, st, err)) return error(err);
  if (st.completions.size() != 1 || st.completions[0] != WcStatus::kSuccess) {
    return deviates("nothing for the " + std::string(what) + ", but the right datagram completed " +
                    completions_text(st.completions));
  }
  return conforms("nothing for the " + std::string(what) + "; the right datagram completed one receive");
}

// Receive: a UD SEND whose Q_Key is not the QP's, then one with the right Q_Key.
// Expect: the first dropped with no receive used; the second completes one receive.
Outcome bad_qkey_dropped(Tester& t) { return bad_then_good(t, t.target().qkey ^ 1, 0xffff, "wrong Q_Key"); }

// Receive: a UD SEND with P_Key 0x7123 (another partition), then one with the default P_Key.
// Expect: the first dropped with no receive used; the second completes one receive.
Outcome bad_pkey_dropped(Tester& t) { return bad_then_good(t, t.target().qkey, 0x7123, "wrong P_Key"); }

constexpr Case kCases[] = {
    {.name = "ud.bad_qkey_dropped", .group = "ud",
     .rule = "IBA 9.6 (Q_Key check), C10-15: a UD datagram whose Q_Key is not the QP's is dropped silently",
     .expect = "no receive completes for a datagram with a wrong Q_Key; one does for the right Q_Key",
     .setup = {.recvs = 4, .type = "ud"}, .brk = Break::kRxAnyQkey, .run = bad_qkey_dropped},
    {.name = "ud.bad_pkey_dropped", .group = "ud",
     .rule = "IBA 9.2.4 (P_Key check), 9.6: a datagram with a P_Key the QP does not hold is dropped silently",
     .expect = "no receive completes for a datagram with P_Key 0x7123; one does for the default P_Key",
     .setup = {.recvs = 4, .type = "ud"}, .brk = Break::kRxAcceptAnyPkey, .run = bad_pkey_dropped},
};

}  // namespace

std::span<const Case> ud_cases() { return kCases; }

}  // namespace uroce::apps::conform
