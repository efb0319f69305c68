// Loopback: two QPs of the same device connected to each other through the
// device's own GID, in one process, as rxe and ConnectX allow (test suites
// and applications that run both ends in one process rely on it). Built
// against rdma-core's headers and library like any verbs program and run
// under `uroce run` on a port that delivers nothing (net_null): every byte
// that arrives came through uroce's loop back to its own MAC. RC on the
// RoCEv2 and the RoCEv1 IPv4 GID (SEND, WRITE, READ, fetch and add, each
// checked byte for byte), and UD with the reply's AH made from the receive's
// GRH (ibv_create_ah_from_wc). Prints one line per check; exits 1 if any fails.
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "verbs_util.h"  // beside this file: built like any verbs program, without uroce's include paths

namespace {

using uroce::verbs_test::format;
using uroce::verbs_test::verdict;

void check(bool ok, const char* what, int gid) { uroce::verbs_test::check(ok, format("%s (GID %d)", what, gid)); }

constexpr size_t kBuf = 1 << 16;
constexpr uint32_t kUdQkey = 0x11111111;

struct Dev {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf);
  ibv_mr* mr = nullptr;
};

/// The completion of wr_id on cq (its status), or -1 after 2 s. Both ends'
/// completions share the CQ: those of other WRs are kept for their turn.
int wait_wc(ibv_cq* cq, uint64_t wr_id, ibv_wc* out = nullptr) {
  static std::vector<ibv_wc> early;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    for (size_t i = 0; i < early.size(); ++i) {
      if (early[i].wr_id != wr_id) continue;
      const ibv_wc wc = early[i];
      early.erase(early.begin() + long(i));
      if (out) *out = wc;
      return wc.status;
    }
    if (std::chrono::steady_clock::now() >= end) return -1;
    ibv_wc wc;
    if (ibv_poll_cq(cq, 1, &wc) == 1) early.push_back(wc);
  }
}

ibv_qp* make_qp(Dev& d, ibv_qp_type type) {
  ibv_qp_init_attr ia{};
  ia.send_cq = d.cq;
  ia.recv_cq = d.cq;
  ia.cap = {16, 16, 1, 1, 0};
  ia.qp_type = type;
  ia.sq_sig_all = 1;
  return ibv_create_qp(d.pd, &ia);
}

ibv_ah_attr av_to_self(Dev& d, int gid) {
  ibv_ah_attr av{};
  av.is_global = 1;
  av.port_num = 1;
  av.grh.sgid_index = uint8_t(gid);
  av.grh.hop_limit = 64;
  (void)ibv_query_gid(d.ctx, 1, gid, &av.grh.dgid);
  return av;
}

/// a and b, RC, connected to each other on GID index gid: 0 or an errno.
int connect_rc(Dev& d, ibv_qp* a, ibv_qp* b, int gid) {
  for (auto [q, peer] : {std::pair{a, b}, std::pair{b, a}}) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    if (int e = ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return e;
    at = {};
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = IBV_MTU_1024;
    at.dest_qp_num = peer->qp_num;
    at.rq_psn = 100;
    at.max_dest_rd_atomic = 1;
    at.min_rnr_timer = 1;
    at.ah_attr = av_to_self(d, gid);
    if (int e = ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
      return e;
    }
    at = {};
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 100;
    at.timeout = 14;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 1;
    if (int e = ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                          IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)) {
      return e;
    }
  }
  return 0;
}

int post(ibv_qp* q, ibv_wr_opcode op, uint64_t wr_id, ibv_sge sge, uint64_t raddr = 0, uint32_t rkey = 0) {
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic = {raddr, 5, 0, rkey};
  } else {
    wr.wr.rdma = {raddr, rkey};
  }
  return ibv_post_send(q, &wr, &bad);
}

int post_recv(ibv_qp* q, uint64_t wr_id, ibv_sge sge) {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(q, &wr, &bad);
}

void fill(uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = uint8_t(seed + i * 7);
}

// RC between two QPs of the device on GID index gid: each operation's data
// checked at its destination.
void rc(Dev& d, int gid) {
  ibv_qp* a = make_qp(d, IBV_QPT_RC);
  ibv_qp* b = make_qp(d, IBV_QPT_RC);
  check(a && b && connect_rc(d, a, b, gid) == 0, "RC: two QPs connected to the device's own GID", gid);
  if (!a || !b) return;
  uint8_t* base = d.buf.data();
  const uint32_t lkey = d.mr->lkey;
  const uint32_t rkey = d.mr->rkey;
  auto sge = [&](size_t off, uint32_t len) { return ibv_sge{uintptr_t(base + off), len, lkey}; };
  auto addr = [&](size_t off) { return uint64_t(uintptr_t(base + off)); };
  std::memset(base, 0, kBuf);

  // SEND of 3000 bytes (three packets at MTU 1024) from [0, 3000) into [8192, ...).
  fill(base, 3000, uint8_t(gid));
  ibv_wc wc{};
  check(post_recv(b, 1, sge(8192, 4096)) == 0 && post(a, IBV_WR_SEND, 2, sge(0, 3000)) == 0 &&
            wait_wc(d.cq, 2) == IBV_WC_SUCCESS && wait_wc(d.cq, 1, &wc) == IBV_WC_SUCCESS && wc.byte_len == 3000 &&
            std::memcmp(base, base + 8192, 3000) == 0,
        "RC SEND 3000 B: the receive has every byte", gid);
  // WRITE [16384, +2000) to [24576, ...).
  fill(base + 16384, 2000, uint8_t(gid + 1));
  check(post(a, IBV_WR_RDMA_WRITE, 3, sge(16384, 2000), addr(24576), rkey) == 0 && wait_wc(d.cq, 3) == IBV_WC_SUCCESS &&
            std::memcmp(base + 16384, base + 24576, 2000) == 0,
        "RC WRITE 2000 B: the target region has every byte", gid);
  // READ [24576, +2000) back into [32768, ...).
  check(post(a, IBV_WR_RDMA_READ, 4, sge(32768, 2000), addr(24576), rkey) == 0 && wait_wc(d.cq, 4) == IBV_WC_SUCCESS &&
            std::memcmp(base + 16384, base + 32768, 2000) == 0,
        "RC READ 2000 B: the local region has every byte", gid);
  // Fetch and add 5 on [40960]: the original value comes back, the target grows.
  uint64_t v = 1000;
  std::memcpy(base + 40960, &v, 8);
  uint64_t old = 0, now = 0;
  const bool faa = post(a, IBV_WR_ATOMIC_FETCH_AND_ADD, 5, sge(40968, 8), addr(40960), rkey) == 0 &&
                   wait_wc(d.cq, 5) == IBV_WC_SUCCESS;
  std::memcpy(&old, base + 40968, 8);
  std::memcpy(&now, base + 40960, 8);
  check(faa && old == 1000 && now == 1005, "RC fetch and add: original 1000 returned, target 1005", gid);
  check(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0, "RC QPs destroyed", gid);
}

// UD: a to b through an AH to the device's own GID, then b's reply through
// an AH made from the receive (ibv_create_ah_from_wc).
void ud(Dev& d, int gid) {
  ibv_qp* a = make_qp(d, IBV_QPT_UD);
  ibv_qp* b = make_qp(d, IBV_QPT_UD);
  bool up = a && b;
  for (ibv_qp* q : {a, b}) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qkey = kUdQkey;
    up = up && ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0;
    at.qp_state = IBV_QPS_RTR;
    up = up && ibv_modify_qp(q, &at, IBV_QP_STATE) == 0;
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 1;
    up = up && ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0;
  }
  ibv_ah_attr av = av_to_self(d, gid);
  ibv_ah* ah = up ? ibv_create_ah(d.pd, &av) : nullptr;
  check(ah != nullptr, "UD: two QPs and an AH to the device's own GID", gid);
  if (!ah) return;
  uint8_t* base = d.buf.data();
  auto sge = [&](size_t off, uint32_t len) { return ibv_sge{uintptr_t(base + off), len, d.mr->lkey}; };
  auto send = [&](ibv_qp* q, ibv_ah* to, uint32_t qpn, uint64_t wr_id, size_t off) {
    ibv_sge s = sge(off, 512);
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.wr.ud = {to, qpn, kUdQkey};
    return ibv_post_send(q, &wr, &bad);
  };
  std::memset(base, 0, kBuf);
  fill(base, 512, uint8_t(gid + 2));
  ibv_wc wc{};
  const bool there = post_recv(b, 6, sge(8192, 40 + 512)) == 0 && send(a, ah, b->qp_num, 7, 0) == 0 &&
                     wait_wc(d.cq, 7) == IBV_WC_SUCCESS && wait_wc(d.cq, 6, &wc) == IBV_WC_SUCCESS &&
                     wc.byte_len == 40 + 512 && wc.src_qp == a->qp_num && std::memcmp(base, base + 8192 + 40, 512) == 0;
  check(there, "UD SEND 512 B: the receive has the GRH and every byte", gid);
  ibv_ah* back = there ? ibv_create_ah_from_wc(d.pd, &wc, reinterpret_cast<ibv_grh*>(base + 8192), 1) : nullptr;
  fill(base + 16384, 512, uint8_t(gid + 3));
  check(back && post_recv(a, 8, sge(24576, 40 + 512)) == 0 && send(b, back, wc.src_qp, 9, 16384) == 0 &&
            wait_wc(d.cq, 9) == IBV_WC_SUCCESS && wait_wc(d.cq, 8) == IBV_WC_SUCCESS &&
            std::memcmp(base + 16384, base + 24576 + 40, 512) == 0,
        "UD reply through ibv_create_ah_from_wc: back to the sender, every byte", gid);
  if (back) (void)ibv_destroy_ah(back);
  check(ibv_destroy_ah(ah) == 0 && ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0, "UD QPs and AH destroyed", gid);
}

}  // namespace

int main() {
  Dev d;
  d.ctx = uroce::verbs_test::open_first_device();
  d.pd = d.ctx ? ibv_alloc_pd(d.ctx) : nullptr;
  d.cq = d.ctx ? ibv_create_cq(d.ctx, 64, nullptr, nullptr, 0) : nullptr;
  d.mr = d.pd ? ibv_reg_mr(d.pd, d.buf.data(), kBuf,
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                               IBV_ACCESS_REMOTE_ATOMIC)
               : nullptr;
  if (!d.mr || !d.cq) {
    std::printf("FAIL setup: no device, PD, CQ or MR\n");
    return 1;
  }
  // GID 3: ::ffff:IPv4, RoCE v2; 2: the same address, RoCE v1 (docs/VERBS.md's table).
  for (int gid : {3, 2}) {
    rc(d, gid);
    ud(d, gid);
  }
  const bool down = ibv_destroy_cq(d.cq) == 0 && ibv_dereg_mr(d.mr) == 0 && ibv_dealloc_pd(d.pd) == 0 &&
                    ibv_close_device(d.ctx) == 0;
  check(down, "CQ, MR, PD and device released", 0);
  return verdict();
}
