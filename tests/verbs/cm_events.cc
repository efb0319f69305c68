// rdma_cm events as librdmacm hands them out (rdma_get_cm_event(3),
// rdma_destroy_id(3), rdma_migrate_id(3)), from a program built against
// rdma-core's headers and library, run under `uroce run` on a port that
// delivers nothing (tests/verbs/meson.build): every id is on the device's
// own address, so no peer is needed. An event got stays readable until it is
// acked: rdma_destroy_id and rdma_migrate_id wait for the acks of the id's
// events got, a connect request counting against its listener; an event
// not yet got goes with its id at once; a synchronous id acks the event it
// keeps. Prints one line per check; exits 1 if any fails.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

#include "verbs_util.h"  // beside this file: built like any verbs program, without uroce's include paths

namespace {

using uroce::verbs_test::check;
using uroce::verbs_test::verdict;

constexpr const char* kIp = "10.78.0.1";  // the port's address (meson.build)
constexpr uint16_t kPort = 7471;
constexpr int kTimeoutMs = 2000;

sockaddr* own_address(sockaddr_in& a) {
  std::memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(kPort);
  inet_pton(AF_INET, kIp, &a.sin_addr);
  return reinterpret_cast<sockaddr*>(&a);
}

/// The next event on ch if it is `want` within kTimeoutMs, else nullptr (printed).
rdma_cm_event* next_event(rdma_event_channel* ch, rdma_cm_event_type want) {
  pollfd p{ch->fd, POLLIN, 0};
  rdma_cm_event* e = nullptr;
  if (poll(&p, 1, kTimeoutMs) != 1 || rdma_get_cm_event(ch, &e)) {
    std::printf("     no event (want %s)\n", rdma_event_str(want));
    return nullptr;
  }
  if (e->event == want) return e;
  std::printf("     %s (status %d), want %s\n", rdma_event_str(e->event), e->status, rdma_event_str(want));
  rdma_ack_cm_event(e);
  return nullptr;
}

/// Runs call in a thread while the program holds ev: true if the call was
/// still waiting 200 ms later and, once ev is acked, returned 0.
bool waits_for_ack(const std::function<int()>& call, rdma_cm_event* ev) {
  std::atomic<bool> done{false};
  int rc = -1;
  std::thread t([&] {
    rc = call();
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const bool waited = !done;
  rdma_ack_cm_event(ev);
  t.join();
  return waited && rc == 0;
}

/// A new id on ch with its address resolved to the device's own and that
/// event got (not acked): the id, or nullptr (printed).
rdma_cm_id* resolved_id(rdma_event_channel* ch, rdma_cm_event** ev) {
  rdma_cm_id* id = nullptr;
  sockaddr_in dst;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) ||
      rdma_resolve_addr(id, nullptr, own_address(dst), kTimeoutMs)) {
    std::printf("     rdma_create_id or rdma_resolve_addr: %s\n", std::strerror(errno));
    return nullptr;
  }
  *ev = next_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
  return *ev ? id : nullptr;
}

void destroy_waits_for_ack(rdma_event_channel* ch) {
  rdma_cm_event* ev = nullptr;
  rdma_cm_id* id = resolved_id(ch, &ev);
  check(id != nullptr, "an id's address resolves to the device's own");
  if (!id) return;
  check(waits_for_ack([id] { return rdma_destroy_id(id); }, ev),
        "rdma_destroy_id waits until the id's event got is acked, then returns 0");
}

void migrate_waits_for_ack(rdma_event_channel* ch) {
  rdma_cm_event* ev = nullptr;
  rdma_cm_id* id = resolved_id(ch, &ev);
  rdma_event_channel* to = rdma_create_event_channel();
  if (!id || !to) {
    check(false, "an id and a second event channel");
    return;
  }
  check(waits_for_ack([id, to] { return rdma_migrate_id(id, to); }, ev),
        "rdma_migrate_id waits until the id's event got on the old channel is acked, then returns 0");
  check(id->channel == to, "the id is on the new channel");
  check(rdma_resolve_route(id, kTimeoutMs) == 0, "rdma_resolve_route after the move");
  rdma_cm_event* route = next_event(to, RDMA_CM_EVENT_ROUTE_RESOLVED);
  check(route && route->id == id, "its next event comes on the new channel");
  if (route) rdma_ack_cm_event(route);
  check(rdma_destroy_id(id) == 0, "rdma_destroy_id with every event acked");
  rdma_destroy_event_channel(to);
}

// A connect request counts against its listener, not the new id it brings.
void listener_waits_for_request_ack(rdma_event_channel* ch) {
  rdma_cm_id* listener = nullptr;
  sockaddr_in a;
  if (rdma_create_id(ch, &listener, nullptr, RDMA_PS_TCP) || rdma_bind_addr(listener, own_address(a)) ||
      rdma_listen(listener, 4)) {
    check(false, "a listener on the device's own address");
    return;
  }
  rdma_cm_event* ev = nullptr;
  rdma_cm_id* client = resolved_id(ch, &ev);
  if (!client) {
    check(false, "a client id");
    return;
  }
  rdma_ack_cm_event(ev);
  ibv_pd* pd = ibv_alloc_pd(client->verbs);
  ibv_qp_init_attr qa{};
  qa.cap = {4, 4, 1, 1, 0};
  qa.qp_type = IBV_QPT_RC;
  rdma_conn_param cp{};
  cp.retry_count = 1;
  rdma_cm_event* route = nullptr;
  const bool connecting = rdma_resolve_route(client, kTimeoutMs) == 0 &&
                          (route = next_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED)) != nullptr &&
                          rdma_ack_cm_event(route) == 0 && pd && rdma_create_qp(client, pd, &qa) == 0 &&
                          rdma_connect(client, &cp) == 0;
  check(connecting, "a client connects to the listener (route, QP, rdma_connect)");
  rdma_cm_event* req = connecting ? next_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST) : nullptr;
  check(req && req->listen_id == listener && req->id != listener, "the listener gets the connect request, with a new id");
  if (req) {
    rdma_cm_id* child = req->id;
    check(waits_for_ack([listener] { return rdma_destroy_id(listener); }, req),
          "rdma_destroy_id of the listener waits until its connect request is acked");
    check(rdma_destroy_id(child) == 0, "rdma_destroy_id of the request's id (rejects it)");
  } else {
    rdma_destroy_id(listener);
  }
  rdma_destroy_qp(client);
  check(rdma_destroy_id(client) == 0, "rdma_destroy_id of the client, its events not got dropped");
  if (pd) ibv_dealloc_pd(pd);
}

void event_not_got_goes_with_id(rdma_event_channel* ch) {
  rdma_cm_id* id = nullptr;
  sockaddr_in dst;
  pollfd p{ch->fd, POLLIN, 0};
  const bool pending = rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) == 0 &&
                       rdma_resolve_addr(id, nullptr, own_address(dst), kTimeoutMs) == 0 &&
                       poll(&p, 1, kTimeoutMs) == 1;
  check(pending, "an event waits on the channel, not got");
  if (!id) return;
  check(rdma_destroy_id(id) == 0, "rdma_destroy_id returns at once");
  check(poll(&p, 1, 0) == 0, "the channel's fd is no longer readable: the event went with its id");
}

void sync_id_acks_its_event() {
  rdma_cm_id* id = nullptr;
  sockaddr_in dst;
  const bool ok = rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP) == 0 &&
                  rdma_resolve_addr(id, nullptr, own_address(dst), kTimeoutMs) == 0;
  check(ok && id->event && id->event->event == RDMA_CM_EVENT_ADDR_RESOLVED,
        "a synchronous id keeps the event of rdma_resolve_addr in id->event");
  if (id) check(rdma_destroy_id(id) == 0, "rdma_destroy_id of a synchronous id acks the event it keeps");
}

}  // namespace

int main() {
  rdma_event_channel* ch = rdma_create_event_channel();
  check(ch != nullptr, "rdma_create_event_channel");
  if (!ch) return 1;
  destroy_waits_for_ack(ch);
  migrate_waits_for_ack(ch);
  listener_waits_for_request_ack(ch);
  event_not_got_goes_with_id(ch);
  sync_id_acks_its_event();
  rdma_destroy_event_channel(ch);
  return verdict();
}
