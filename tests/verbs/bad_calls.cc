// A verbs program that makes bad calls, built against rdma-core's headers
// and library like any other, run under `uroce run` (tests/verbs/meson.build):
// each call must fail with the errno that the spec and rxe give, and nothing
// may crash. Prints one line per case; exits 1 if any case is wrong.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

int g_failed = 0;

void expect(const char* what, int got, int want) {
  const bool ok = got == want;
  std::printf("%s %s: got %d (%s), want %d (%s)\n", ok ? "ok  " : "FAIL", what, got, std::strerror(got), want,
              std::strerror(want));
  g_failed += !ok;
}

int to_state(ibv_qp* qp, ibv_qp_state s, int mask, ibv_qp_attr a = {}) {
  a.qp_state = s;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | mask);
}

}  // namespace

int main() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) {
    std::printf("FAIL no device\n");
    return 1;
  }
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  static char buf[4096];
  ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  if (!ctx || !pd || !mr || !cq) {
    std::printf("FAIL setup: %s\n", std::strerror(errno));
    return 1;
  }

  // Memory registration (IBA 10.6.3.1: remote write or atomic needs local write).
  errno = 0;
  expect("reg_mr remote write without local write", ibv_reg_mr(pd, buf, 64, IBV_ACCESS_REMOTE_WRITE) ? 0 : errno,
         EINVAL);
  errno = 0;
  expect("reg_dmabuf_mr", ibv_reg_dmabuf_mr(pd, 0, 64, 0, -1, IBV_ACCESS_LOCAL_WRITE) ? 0 : errno, EOPNOTSUPP);
  expect("dealloc_pd with an MR", ibv_dealloc_pd(pd), EBUSY);
  errno = 0;
  expect("create_cq with 0 entries", ibv_create_cq(ctx, 0, nullptr, nullptr, 0) ? 0 : errno, EINVAL);

  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.cap = {4, 4, 1, 1, 0};
  ia.qp_type = IBV_QPT_UD;
  ibv_qp* ud = ibv_create_qp(pd, &ia);
  ia.qp_type = IBV_QPT_RC;
  ibv_qp* rc = ibv_create_qp(pd, &ia);
  if (!ud || !rc) {
    std::printf("FAIL create_qp: %s\n", std::strerror(errno));
    return 1;
  }
  // Transitions and attribute masks (IBA 11.2.5.2 Table 91; the kernel's ib_modify_qp_is_ok).
  expect("modify RESET to RTS", to_state(rc, IBV_QPS_RTS, 0), EINVAL);
  expect("modify RESET to INIT without the port", to_state(rc, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS),
         EINVAL);
  expect("modify RESET to INIT with a Q_Key on RC",
         to_state(rc, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY, [] {
           ibv_qp_attr a{};
           a.port_num = 1;
           return a;
         }()),
         EINVAL);
  expect("modify with an alternate path", to_state(rc, IBV_QPS_INIT, IBV_QP_ALT_PATH), EINVAL);
  ibv_recv_wr rwr{};
  ibv_recv_wr* bad_r = nullptr;
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 64, mr->lkey};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  expect("post_recv in RESET", ibv_post_recv(ud, &rwr, &bad_r), EINVAL);

  // A UD QP needs no peer: INIT, RTR, RTS.
  ibv_qp_attr a{};
  a.port_num = 1;
  a.qkey = 0x11111111;
  expect("UD to INIT", to_state(ud, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, a), 0);
  expect("UD to RTR", to_state(ud, IBV_QPS_RTR, 0), 0);
  a.sq_psn = 1;
  expect("UD to RTS", to_state(ud, IBV_QPS_RTS, IBV_QP_SQ_PSN, a), 0);

  // An overfull RQ: one more receive than the capacity the QP reported.
  std::vector<ibv_recv_wr> rs(ia.cap.max_recv_wr + 1, rwr);
  for (size_t i = 0; i + 1 < rs.size(); ++i) rs[i].next = &rs[i + 1];
  expect("post_recv beyond the RQ", ibv_post_recv(ud, rs.data(), &bad_r), ENOMEM);
  expect("post_recv: bad_wr is the first one not posted", bad_r == &rs.back() ? 0 : -1, 0);

  // A send without an AH, and a chain longer than the SQ.
  ibv_send_wr swr{};
  ibv_send_wr* bad_s = nullptr;
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  expect("UD post_send without an AH", ibv_post_send(ud, &swr, &bad_s), EINVAL);
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.port_num = 1;
  aa.grh.hop_limit = 64;
  const uint8_t ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0, 9};  // fe80::ff:fe00:9, no ARP needed
  std::memcpy(aa.grh.dgid.raw, ll, 16);
  ibv_ah* ah = ibv_create_ah(pd, &aa);
  aa.is_global = 0;
  errno = 0;
  expect("create_ah without a GRH (RoCE needs one)", ibv_create_ah(pd, &aa) ? 0 : errno, EINVAL);
  if (ah) {
    swr.wr.ud = {ah, 2, 0x11111111};
    std::vector<ibv_send_wr> ss(ia.cap.max_send_wr + 1, swr);
    for (size_t i = 0; i + 1 < ss.size(); ++i) ss[i].next = &ss[i + 1];
    expect("post_send beyond the SQ", ibv_post_send(ud, ss.data(), &bad_s), ENOMEM);
    swr.opcode = IBV_WR_RDMA_WRITE;
    expect("RDMA WRITE on a UD QP", ibv_post_send(ud, &swr, &bad_s), EINVAL);
    swr.opcode = IBV_WR_SEND;
    swr.num_sge = 2;
    expect("more SGEs than max_send_sge", ibv_post_send(ud, &swr, &bad_s), EINVAL);
  } else {
    expect("create_ah to a link-local GID", errno, 0);
  }

  std::printf("%d wrong\n", g_failed);
  return g_failed ? 1 : 0;
}
