// What the verbs test programs share: their checks, opening the device,
// moving a QP through its states and bringing a UD QP up, with rdma-core's
// verbs only.
#pragma once

#include <infiniband/verbs.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace uroce::verbs_test {

/// The checks passed and failed so far: the program exits 1 if any failed.
inline int g_ok = 0;
inline int g_failed = 0;

/// printf into a std::string (a check's text with its figures).
__attribute__((format(printf, 1, 2))) inline std::string format(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

/// Prints one line for a check (flushed: a test may fork or _exit) and
/// counts it. Returns ok.
inline bool check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  std::fflush(stdout);
  (ok ? g_ok : g_failed)++;
  return ok;
}

/// A check that a call returned the errno wanted (0 for success), both named.
inline void expect_errno(const std::string& what, int got, int want) {
  check(got == want,
        format("%s: got %d (%s), want %d (%s)", what.c_str(), got, std::strerror(got), want, std::strerror(want)));
}

/// Prints how many checks passed and failed (after "label: " if one is
/// given) and returns the program's exit code: 1 if any failed, else 0.
inline int verdict(const std::string& label = "") {
  std::printf("%s%s%d ok, %d wrong\n", label.c_str(), label.empty() ? "" : ": ", g_ok, g_failed);
  std::fflush(stdout);
  return g_failed ? 1 : 0;
}

/// The first device, opened; nullptr if there is none or it does not open.
inline ibv_context* open_first_device() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = list && n > 0 ? ibv_open_device(list[0]) : nullptr;
  if (list) ibv_free_device_list(list);
  return ctx;
}

/// ibv_modify_qp to state s with the attribute mask bits of mask besides IBV_QP_STATE.
inline int to_state(ibv_qp* qp, ibv_qp_state s, int mask, ibv_qp_attr a = {}) {
  a.qp_state = s;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | mask);
}

/// A UD QP in RTS on pd (Q_Key 0x11111111), every send signaled, completing
/// into cq; nullptr if a step fails.
inline ibv_qp* ud_qp(ibv_pd* pd, ibv_cq* cq, uint32_t max_send_wr) {
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.cap = {max_send_wr, 4, 1, 1, 0};
  ia.qp_type = IBV_QPT_UD;
  ia.sq_sig_all = 1;
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  ibv_qp_attr a{};
  a.port_num = 1;
  a.qkey = 0x11111111;
  a.sq_psn = 1;
  if (!qp || to_state(qp, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, a) ||
      to_state(qp, IBV_QPS_RTR, 0) || to_state(qp, IBV_QPS_RTS, IBV_QP_SQ_PSN, a)) {
    return nullptr;
  }
  return qp;
}

}  // namespace uroce::verbs_test
