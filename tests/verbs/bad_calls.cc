// A verbs program that makes bad calls, built against rdma-core's headers
// and library like any other, run under `uroce run` (tests/verbs/meson.build):
// each call must fail with the errno that the spec and rxe give, and nothing
// may crash. Prints one line per case; exits 1 if any case is wrong.
#include <infiniband/verbs.h>

#include <fcntl.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "verbs_util.h"  // beside this file: built like any verbs program, without uroce's include paths

namespace {

using uroce::verbs_test::check;
using uroce::verbs_test::expect_errno;
using uroce::verbs_test::format;
using uroce::verbs_test::to_state;
using uroce::verbs_test::ud_qp;
using uroce::verbs_test::verdict;

void expect_wc(const char* what, int got, ibv_wc_status want) {
  check(got == int(want),
        format("%s: got %s, want %s", what, got < 0 ? "no completion" : ibv_wc_status_str(ibv_wc_status(got)),
               ibv_wc_status_str(want)));
}

/// The status of wr_id's completion on cq; -1 if none comes within 2 s.
int wc_status(ibv_cq* cq, uint64_t wr_id) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  ibv_wc wc;
  while (std::chrono::steady_clock::now() < end) {
    if (ibv_poll_cq(cq, 1, &wc) == 1 && wc.wr_id == wr_id) return wc.status;
  }
  return -1;
}

}  // namespace

int main() {
  ibv_context* ctx = uroce::verbs_test::open_first_device();
  if (!ctx) {
    std::printf("FAIL no device\n");
    return 1;
  }
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
  expect_errno("reg_mr remote write without local write", ibv_reg_mr(pd, buf, 64, IBV_ACCESS_REMOTE_WRITE) ? 0 : errno,
               EINVAL);
  errno = 0;
  expect_errno("reg_dmabuf_mr", ibv_reg_dmabuf_mr(pd, 0, 64, 0, -1, IBV_ACCESS_LOCAL_WRITE) ? 0 : errno, EOPNOTSUPP);
  expect_errno("dealloc_pd with an MR", ibv_dealloc_pd(pd), EBUSY);
  errno = 0;
  expect_errno("create_cq with 0 entries", ibv_create_cq(ctx, 0, nullptr, nullptr, 0) ? 0 : errno, EINVAL);

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
  expect_errno("modify RESET to RTS", to_state(rc, IBV_QPS_RTS, 0), EINVAL);
  expect_errno("modify RESET to INIT without the port",
               to_state(rc, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS), EINVAL);
  expect_errno("modify RESET to INIT with a Q_Key on RC",
               to_state(rc, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY, [] {
                 ibv_qp_attr a{};
                 a.port_num = 1;
                 return a;
               }()),
               EINVAL);
  expect_errno("modify with an alternate path", to_state(rc, IBV_QPS_INIT, IBV_QP_ALT_PATH), EINVAL);
  ibv_recv_wr rwr{};
  ibv_recv_wr* bad_r = nullptr;
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 64, mr->lkey};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  expect_errno("post_recv in RESET", ibv_post_recv(ud, &rwr, &bad_r), EINVAL);

  // A UD QP needs no peer: INIT, RTR, RTS.
  ibv_qp_attr a{};
  a.port_num = 1;
  a.qkey = 0x11111111;
  expect_errno("UD to INIT", to_state(ud, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, a), 0);
  expect_errno("UD to RTR", to_state(ud, IBV_QPS_RTR, 0), 0);
  a.sq_psn = 1;
  expect_errno("UD to RTS", to_state(ud, IBV_QPS_RTS, IBV_QP_SQ_PSN, a), 0);

  // An overfull RQ: one more receive than the capacity the QP reported.
  std::vector<ibv_recv_wr> rs(ia.cap.max_recv_wr + 1, rwr);
  for (size_t i = 0; i + 1 < rs.size(); ++i) rs[i].next = &rs[i + 1];
  expect_errno("post_recv beyond the RQ", ibv_post_recv(ud, rs.data(), &bad_r), ENOMEM);
  expect_errno("post_recv: bad_wr is the first one not posted", bad_r == &rs.back() ? 0 : -1, 0);

  // A send without an AH, and a chain longer than the SQ.
  ibv_send_wr swr{};
  ibv_send_wr* bad_s = nullptr;
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  expect_errno("UD post_send without an AH", ibv_post_send(ud, &swr, &bad_s), EINVAL);
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.port_num = 1;
  aa.grh.hop_limit = 64;
  const uint8_t ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0, 9};  // fe80::ff:fe00:9, no ARP needed
  std::memcpy(aa.grh.dgid.raw, ll, 16);
  ibv_ah* ah = ibv_create_ah(pd, &aa);
  aa.is_global = 0;
  errno = 0;
  expect_errno("create_ah without a GRH (RoCE needs one)", ibv_create_ah(pd, &aa) ? 0 : errno, EINVAL);
  if (ah) {
    swr.wr.ud = {ah, 2, 0x11111111};
    std::vector<ibv_send_wr> ss(ia.cap.max_send_wr + 1, swr);
    for (size_t i = 0; i + 1 < ss.size(); ++i) ss[i].next = &ss[i + 1];
    expect_errno("post_send beyond the SQ", ibv_post_send(ud, ss.data(), &bad_s), ENOMEM);
    swr.opcode = IBV_WR_RDMA_WRITE;
    expect_errno("RDMA WRITE on a UD QP", ibv_post_send(ud, &swr, &bad_s), EINVAL);
    swr.opcode = IBV_WR_SEND;
    swr.num_sge = 2;
    expect_errno("more SGEs than max_send_sge", ibv_post_send(ud, &swr, &bad_s), EINVAL);

    // A bad lkey is found when the send is executed, not when posted: the
    // WR completes with a local protection error (IBA 10.6.3.2; rxe too).
    ibv_cq* cq2 = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ibv_qp* ud2 = cq2 ? ud_qp(pd, cq2, 4) : nullptr;
    ibv_sge bad_key{reinterpret_cast<uintptr_t>(buf), 64, mr->lkey ^ 0x5a5a00};
    swr.sg_list = &bad_key;
    swr.num_sge = 1;
    swr.wr_id = 77;
    expect_errno("post_send with a bad lkey", ud2 ? ibv_post_send(ud2, &swr, &bad_s) : -1, 0);
    expect_wc("its completion", ud2 ? wc_status(cq2, 77) : -1, IBV_WC_LOC_PROT_ERR);

    // An overfull CQ: one completion more than it holds puts the QP in ERR
    // (IBA 11.4.2.1: CQ overrun), and nothing in the CQ is overwritten.
    ibv_cq* small = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
    ibv_qp* ud3 = small ? ud_qp(pd, small, uint32_t(small->cqe) + 1) : nullptr;
    swr.sg_list = &sge;
    int posted = 0;
    for (int i = 0; ud3 && i <= small->cqe; ++i) {
      swr.wr_id = uint64_t(i);
      posted += ibv_post_send(ud3, &swr, &bad_s) == 0;
    }
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (ud3 && std::chrono::steady_clock::now() < end && qa.qp_state != IBV_QPS_ERR) {
      (void)ibv_query_qp(ud3, &qa, IBV_QP_STATE, &qi);
    }
    expect_errno("overfull CQ: the QP goes to ERR",
                 ud3 && posted == small->cqe + 1 && qa.qp_state == IBV_QPS_ERR ? 0 : -1, 0);
    expect_wc("overfull CQ: the first completion is still there", small ? wc_status(small, 0) : -1, IBV_WC_SUCCESS);
    // Everything made here goes again (the ASan build checks nothing leaks):
    // a QP before its CQ, as the verbs require.
    int down = 0;
    for (ibv_qp* q : {ud2, ud3}) down |= q ? ibv_destroy_qp(q) : 0;
    for (ibv_cq* c : {cq2, small}) down |= c ? ibv_destroy_cq(c) : 0;
    expect_errno("destroy the QPs, then their CQs, and the AH", down | ibv_destroy_ah(ah), 0);
  } else {
    expect_errno("create_ah to a link-local GID", errno, 0);
  }

  // Completion channels: a channel with a CQ on it cannot go; a non-blocking
  // fd with no event gives EAGAIN, as a kernel channel's read does.
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ibv_cq* ecq = ch ? ibv_create_cq(ctx, 16, nullptr, ch, 0) : nullptr;
  expect_errno("req_notify_cq", ecq ? ibv_req_notify_cq(ecq, 0) : -1, 0);
  expect_errno("destroy_comp_channel with a CQ on it", ch ? ibv_destroy_comp_channel(ch) : -1, EBUSY);
  ibv_cq* got = nullptr;
  void* got_ctx = nullptr;
  errno = 0;
  if (ch) fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
  expect_errno("get_cq_event with none, non-blocking", ch && ibv_get_cq_event(ch, &got, &got_ctx) == -1 ? errno : 0,
               EAGAIN);
  errno = 0;
  expect_errno("create_cq on comp_vector 1 (there is one)", ibv_create_cq(ctx, 16, nullptr, ch, 1) ? 0 : errno, EINVAL);
  expect_errno("destroy_cq", ecq ? ibv_destroy_cq(ecq) : -1, 0);
  expect_errno("destroy_comp_channel", ch ? ibv_destroy_comp_channel(ch) : -1, 0);

  expect_errno("destroy_cq while a QP completes into it", ibv_destroy_cq(cq), EBUSY);
  expect_errno("destroy the last QPs", ibv_destroy_qp(ud) | ibv_destroy_qp(rc), 0);
  expect_errno("destroy the CQ, MR and PD, close the device",
               ibv_destroy_cq(cq) | ibv_dereg_mr(mr) | ibv_dealloc_pd(pd) | ibv_close_device(ctx), 0);

  return verdict();
}
