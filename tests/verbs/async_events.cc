// Asynchronous events (ibv_get_async_event(3)) from a verbs program built
// against rdma-core's headers and library, run under `uroce run` on a port
// that delivers nothing (tests/verbs/meson.build): no peer is needed. A UD
// QP that completes into a CQ too small for it gives the CQ error and then
// the QP fatal event (IBA 11.4.2.1, 11.6.3.1), each naming the program's own
// object; an RC QP on an SRQ moved to ERR gives Last WQE Reached (IBA
// 10.2.9.5), one without an SRQ nothing; ibv_modify_srq arms the SRQ limit
// and ibv_query_srq reads it (firing it needs a peer: the stack's unit test
// does). The context's async_fd works as a
// kernel one: poll() says readable while an event waits, a non-blocking fd
// with none gives EAGAIN, ibv_destroy_* waits until every event got was
// acked (also one another thread gets while the QP is destroyed), and
// destroying an object drops its events not yet got. Prints one
// line per check; exits 1 if any fails.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "verbs_util.h"  // beside this file: built like any verbs program, without uroce's include paths

namespace {

using uroce::verbs_test::check;
using uroce::verbs_test::to_state;
using uroce::verbs_test::ud_qp;
using uroce::verbs_test::verdict;

bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

void set_nonblocking(int fd, bool on) {
  const int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/// ibv_get_async_event on a non-blocking fd: 0 or the errno.
int try_get(ibv_context* ctx, ibv_async_event& ev) {
  set_nonblocking(ctx->async_fd, true);
  errno = 0;
  const int r = ibv_get_async_event(ctx, &ev) ? errno : 0;
  set_nonblocking(ctx->async_fd, false);
  return r;
}

}  // namespace

int main() {
  ibv_context* ctx = uroce::verbs_test::open_first_device();
  ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
  static char buf[4096];
  ibv_mr* mr = pd ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) : nullptr;
  if (!mr) {
    std::printf("FAIL setup: %s\n", std::strerror(errno));
    return 1;
  }
  ibv_async_event ev{};
  check(try_get(ctx, ev) == EAGAIN, "no event yet: a non-blocking async_fd gives EAGAIN");
  check(!readable(ctx->async_fd, 0), "no event yet: poll() on async_fd says not readable");

  // A UD QP whose sends complete into a CQ one entry too small: the
  // completion that finds it full raises the CQ error, then the QP fatal.
  ibv_cq* small = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  ibv_qp* ud = small ? ud_qp(pd, small, uint32_t(small->cqe) + 1) : nullptr;
  const bool up = ud != nullptr;
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.port_num = 1;
  aa.grh.hop_limit = 64;
  const uint8_t ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0, 9};  // fe80::ff:fe00:9, no ARP
  std::memcpy(aa.grh.dgid.raw, ll, 16);
  ibv_ah* ah = ibv_create_ah(pd, &aa);
  if (!up || !ah) {
    std::printf("FAIL setup of the UD QP: %s\n", std::strerror(errno));
    return 1;
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 64, mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.wr.ud = {ah, 2, 0x11111111};
  for (int i = 0; i <= small->cqe; ++i) {
    wr.wr_id = uint64_t(i);
    (void)ibv_post_send(ud, &wr, &bad);
  }
  check(readable(ctx->async_fd, 2000), "CQ overrun: poll() on async_fd says readable");
  check(ibv_get_async_event(ctx, &ev) == 0 && ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == small,
        "first event: IBV_EVENT_CQ_ERR, element.cq the program's CQ");
  ibv_async_event cq_ev = ev;
  check(ibv_get_async_event(ctx, &ev) == 0 && ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == ud,
        "second event: IBV_EVENT_QP_FATAL, element.qp the program's QP");
  ibv_ack_async_event(&ev);
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  check(ibv_query_qp(ud, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_ERR, "the QP is in ERR");
  check(try_get(ctx, ev) == EAGAIN, "no third event (the CQ error comes once)");
  check(ibv_destroy_qp(ud) == 0, "destroy_qp after its event was acked");

  // ibv_destroy_cq waits for the ack of the event the program got.
  const auto t0 = std::chrono::steady_clock::now();
  std::thread acker([&cq_ev] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ibv_ack_async_event(&cq_ev);
  });
  const int destroyed = ibv_destroy_cq(small);
  const auto waited = std::chrono::steady_clock::now() - t0;
  acker.join();
  const long waited_ms = long(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count());
  std::printf("     destroy_cq returned %d after %ld ms (the ack came at 200 ms)\n", destroyed, waited_ms);
  check(destroyed == 0 && waited_ms >= 150, "destroy_cq waits for the ack of its event, then succeeds");

  // An RC QP on an SRQ moved to ERR by the program: Last WQE Reached only.
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 8;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd, &sa);
  ibv_srq_attr sq{};
  sq.srq_limit = 2;
  check(srq && ibv_modify_srq(srq, &sq, IBV_SRQ_LIMIT) == 0 && ibv_query_srq(srq, &sq) == 0 && sq.srq_limit == 2 &&
            sq.max_wr >= 8,
        "modify_srq arms the SRQ limit, query_srq reads it back");
  sq.srq_limit = 1000;
  check(srq && ibv_modify_srq(srq, &sq, IBV_SRQ_LIMIT) == EINVAL, "modify_srq: a limit above max_wr is EINVAL");
  sq.max_wr = 64;
  check(srq && ibv_modify_srq(srq, &sq, IBV_SRQ_MAX_WR) == EOPNOTSUPP, "modify_srq: resize is EOPNOTSUPP");
  ibv_qp_init_attr ra{};
  ra.send_cq = cq;
  ra.recv_cq = cq;
  ra.srq = srq;
  ra.cap = {4, 0, 1, 1, 0};
  ra.qp_type = IBV_QPT_RC;
  ibv_qp* rc = srq ? ibv_create_qp(pd, &ra) : nullptr;
  ibv_qp_attr ri{};
  ri.port_num = 1;
  const bool init = rc && !to_state(rc, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, ri);
  check(init && try_get(ctx, ev) == EAGAIN, "RC QP on an SRQ in INIT: no event");
  check(init && to_state(rc, IBV_QPS_ERR, 0) == 0 && readable(ctx->async_fd, 2000) &&
            ibv_get_async_event(ctx, &ev) == 0 && ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED &&
            ev.element.qp == rc,
        "to ERR: IBV_EVENT_QP_LAST_WQE_REACHED, element.qp the program's QP");
  if (rc) ibv_ack_async_event(&ev);
  check(try_get(ctx, ev) == EAGAIN, "and no error event for a modify_qp to ERR");
  ibv_qp* plain = nullptr;
  if (cq) {
    ibv_qp_init_attr pa = ra;
    pa.srq = nullptr;
    pa.cap.max_recv_wr = 4;
    plain = ibv_create_qp(pd, &pa);
  }
  check(plain && to_state(plain, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, ri) == 0 &&
            to_state(plain, IBV_QPS_ERR, 0) == 0 && try_get(ctx, ev) == EAGAIN,
        "a QP without an SRQ moved to ERR by the program: no event");
  // An event nobody got goes with its QP: RESET, INIT and ERR again, destroy.
  const bool again = rc && !to_state(rc, IBV_QPS_RESET, 0) &&
                     !to_state(rc, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, ri) &&
                     !to_state(rc, IBV_QPS_ERR, 0) && readable(ctx->async_fd, 2000);
  check(again && ibv_destroy_qp(rc) == 0 && !readable(ctx->async_fd, 0) && try_get(ctx, ev) == EAGAIN,
        "destroy_qp drops its event not yet got (async_fd no longer readable)");

  // A thread that takes the events as they come (UCX's async thread) while
  // this one moves RC QPs on the SRQ to ERR and destroys them at once: each
  // Last WQE Reached it got must be acked before ibv_destroy_qp returns, the
  // QP's memory with it (the thread holds each event 50 us, as a handler
  // works on it).
  std::atomic<ibv_qp*> held{nullptr};
  std::atomic<bool> stop{false};
  std::atomic<int> got{0};
  std::thread taker([&] {
    while (!stop.load()) {
      ibv_async_event e{};
      if (!readable(ctx->async_fd, 5) || try_get(ctx, e) != 0) continue;
      held.store(e.element.qp);
      got.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      held.store(nullptr);
      ibv_ack_async_event(&e);
    }
  });
  constexpr int kRounds = 2000;
  int made = 0;
  int early = 0;
  for (int i = 0; i < kRounds && srq; ++i) {
    ibv_qp* q = ibv_create_qp(pd, &ra);
    if (!q || to_state(q, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, ri) ||
        to_state(q, IBV_QPS_ERR, 0)) {
      break;
    }
    for (int spin = i % 64; spin > 0; --spin) std::atomic_signal_fence(std::memory_order_seq_cst);  // vary the race
    if (ibv_destroy_qp(q) != 0) break;
    early += held.load() == q;
    ++made;
  }
  stop.store(true);
  taker.join();
  std::printf("     %d QPs destroyed, %d of their events got by the thread, %d still held after destroy_qp\n", made,
              got.load(), early);
  check(made == kRounds && got.load() > 0 && early == 0,
        "destroy_qp returns only after the events another thread got about the QP were acked");

  int down = plain ? ibv_destroy_qp(plain) : -1;
  down |= srq ? ibv_destroy_srq(srq) : -1;
  down |= cq ? ibv_destroy_cq(cq) : -1;
  down |= ibv_destroy_ah(ah) | ibv_dereg_mr(mr) | ibv_dealloc_pd(pd) | ibv_close_device(ctx);
  check(down == 0, "everything made here released");
  return verdict();
}
