// The cases of the target's UD QP (docs/CONFORMANCE.md).
#include "apps/conform/checks.h"
#include "apps/conform/conform.h"

namespace uroce::apps::conform {

namespace {

/// A UD SEND Only of 64 bytes to the target's QP with Q_Key qkey.
void ud_send(Tester& t, uint32_t qkey) {
  wire::PacketDesc d = t.req(wire::kUdSendOnly);
  d.ack_req = false;
  d.deth_qkey = qkey;
  d.deth_src_qp = t.our_qpn();
  t.send(d, pattern(64, 20));
}

// Receive: a UD SEND whose Q_Key is not the QP's, then one with the right Q_Key.
// Expect: the first dropped with no receive used; the second completes one receive.
Outcome bad_qkey_dropped(Tester& t) {
  ud_send(t, t.target().qkey ^ 1);
  (void)t.collect(0);
  TargetState st;
  std::string err;
  if (!t.state(st, err)) return error(err);
  if (!st.completions.empty()) return deviates("the wrong Q_Key completed " + completions_text(st.completions));
  ud_send(t, t.target().qkey);
  if (!t.wait_completions(1, st, err)) return error(err);
  if (st.completions.size() != 1 || st.completions[0] != WcStatus::kSuccess) {
    return deviates("nothing for the wrong Q_Key, but the right one completed " + completions_text(st.completions));
  }
  return conforms("nothing for the wrong Q_Key; the right one completed one receive");
}

constexpr Case kCases[] = {
    {.name = "ud.bad_qkey_dropped", .group = "ud",
     .rule = "IBA 9.6 (Q_Key check), C10-15: a UD datagram whose Q_Key is not the QP's is dropped silently",
     .expect = "no receive completes for a datagram with a wrong Q_Key; one does for the right Q_Key",
     .setup = {.recvs = 4, .type = "ud"}, .brk = Break::kRxAnyQkey, .run = bad_qkey_dropped},
};

}  // namespace

std::span<const Case> ud_cases() { return kCases; }

}  // namespace uroce::apps::conform
