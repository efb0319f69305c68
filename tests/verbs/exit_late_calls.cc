// Calls into the device after the library's exit handler, as programs make
// them: a thread the program never joins (Debian's rping leaves its CM
// thread in rdma_get_cm_event while main returns) keeps calling verbs while
// the process exits, and an atexit handler the program registered before it
// opened the device (so it runs after the library's) calls verbs on the
// exiting thread. Both must find a whole device: no crash, no error but
// what a device whose frames no longer move gives. Before, the library's
// exit handler deleted the device, and such calls read freed memory (an
// AddressSanitizer build reports it; the main build crashed now and then:
// docs/VERBS.md, "a flag per owner").
//
// Run under `uroce run` on a port that delivers nothing (net_null, no-rx):
// the thread's UD QP sends to itself through the device's loop. Prints one
// line per check; exits 1 if any fails (from the atexit handler: _exit(1)).
#include <infiniband/verbs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "verbs_util.h"  // beside this file: built like any verbs program, without uroce's include paths

namespace {

using uroce::verbs_test::check;
using uroce::verbs_test::verdict;

constexpr uint32_t kQkey = 0x11111111;  // verbs_test::ud_qp's
constexpr uint32_t kSendDepth = 16;
constexpr uint32_t kRecvDepth = 4;  // verbs_test::ud_qp's
constexpr uint32_t kLen = 256;
constexpr uint32_t kGrh = 40;

struct Late {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_ah* ah = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>((kRecvDepth + 1) * (kGrh + kLen));
  std::atomic<uint64_t> calls{0};     // verbs calls the thread made
  std::atomic<uint64_t> received{0};  // its sends that came back to it
  std::atomic<uint64_t> errors{0};    // calls that failed other than a full queue
};

Late g;  // reachable for the whole run: the thread outlives main

ibv_sge slot(uint32_t i, uint32_t len) {
  return ibv_sge{uintptr_t(g.buf.data() + i * (kGrh + kLen)), len, g.mr->lkey};
}

/// 0, or the errno of a post that a full queue refused (ENOMEM), counted as
/// no error: once the port is shut, sends no longer complete.
void note_post(int rc) {
  if (rc != 0 && rc != ENOMEM) g.errors.fetch_add(1, std::memory_order_relaxed);
}

void post_recv(uint64_t wr_id) {
  ibv_sge s = slot(uint32_t(wr_id), kGrh + kLen);
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &s;
  wr.num_sge = 1;
  note_post(ibv_post_recv(g.qp, &wr, &bad));
}

int post_send() {
  ibv_sge s = slot(kRecvDepth, kLen);
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = 1ull << 32;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.wr.ud = {g.ah, g.qp->qp_num, kQkey};
  return ibv_post_send(g.qp, &wr, &bad);
}

/// The thread the program leaves running: sends to its own QP and takes the
/// completions, for as long as the process lives.
void keep_calling() {
  uint32_t in_flight = 0;
  for (;;) {
    if (in_flight < kSendDepth) {
      const int rc = post_send();
      note_post(rc);
      in_flight += rc == 0;
    }
    ibv_wc wc[8];
    const int n = ibv_poll_cq(g.cq, 8, wc);
    if (n < 0) g.errors.fetch_add(1, std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) g.errors.fetch_add(1, std::memory_order_relaxed);
      if (wc[i].opcode == IBV_WC_RECV) {
        g.received.fetch_add(1, std::memory_order_relaxed);
        post_recv(wc[i].wr_id);
      } else if (in_flight > 0) {
        --in_flight;
      }
    }
    g.calls.fetch_add(2, std::memory_order_relaxed);
  }
}

/// Registered before the device opened, so it runs after the library's exit
/// handler, the thread still calling in.
void after_the_library() {
  if (!g.ah) return;  // main's setup failed, and said so
  const uint64_t before = g.calls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const uint64_t after = g.calls.load();
  std::printf("%llu calls from the thread in 100 ms after the library's exit handler\n",
              static_cast<unsigned long long>(after - before));
  check(after > before, "the thread left running called in after the library's exit handler");
  ibv_port_attr pa{};
  check(ibv_query_port(g.ctx, 1, &pa) == 0, "ibv_query_port on the exiting thread, after the exit handler");
  ibv_wc wc;
  check(ibv_poll_cq(g.cq, 1, &wc) >= 0, "ibv_poll_cq on the exiting thread, after the exit handler");
  const int rc = post_send();
  check(rc == 0 || rc == ENOMEM, "ibv_post_send on the exiting thread, after the exit handler: 0 or a full queue");
  check(g.errors.load() == 0, "no call of the thread failed (a full send queue aside)");
  if (verdict()) _exit(1);
}

}  // namespace

int main() {
  std::atexit(after_the_library);
  g.ctx = uroce::verbs_test::open_first_device();
  g.pd = g.ctx ? ibv_alloc_pd(g.ctx) : nullptr;
  g.cq = g.ctx ? ibv_create_cq(g.ctx, 2 * (kSendDepth + kRecvDepth), nullptr, nullptr, 0) : nullptr;
  g.mr = g.pd ? ibv_reg_mr(g.pd, g.buf.data(), g.buf.size(), IBV_ACCESS_LOCAL_WRITE) : nullptr;
  g.qp = g.mr && g.cq ? uroce::verbs_test::ud_qp(g.pd, g.cq, kSendDepth) : nullptr;
  ibv_ah_attr av{};
  av.is_global = 1;
  av.port_num = 1;
  av.grh.sgid_index = 3;  // ::ffff:IPv4, RoCE v2 (docs/VERBS.md's GID table)
  av.grh.hop_limit = 64;
  if (g.qp && ibv_query_gid(g.ctx, 1, 3, &av.grh.dgid) == 0) g.ah = ibv_create_ah(g.pd, &av);
  if (!g.ah) {
    std::printf("FAIL setup: no device, PD, CQ, MR, QP or AH\n");
    return 1;
  }
  for (uint64_t i = 0; i < kRecvDepth; ++i) post_recv(i);
  std::thread(keep_calling).detach();
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (g.received.load() < 1000 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  check(g.received.load() >= 1000, "the thread's UD sends came back to it (1000) before main returns");
  return 0;  // the thread still calling in
}
