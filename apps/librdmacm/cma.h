// librdmacm.so.1 on uroce's connection manager (include/uroce/cm.h): the
// rdma-core structs handed to programs, each wrapping its uroce object, and
// what the calls share. The stack and the device live once, in uroce's
// libibverbs.so.1 (its UROCE_PRIVATE_1 symbols); this library adds the
// librdmacm ABI on top.
//
// Events: the CM queues its events inside engine steps; after each step
// (Provider::set_after_step) pump() moves them to the event channel of their
// id (a ReadyQueue on the channel's fd), so a program can poll() the fd, and
// rdma_get_cm_event hands them out in order. An id made without a
// channel is synchronous, as in librdmacm: it gets a channel of its own, and
// each call that ends in an event waits for it and returns its outcome.
// As in librdmacm, each event got counts against an id (its own, or for a
// connect request the listener's) until it is acked, and rdma_destroy_id and
// rdma_migrate_id wait until the id's events got were acked: a program may
// read an event until it acks it.
#pragma once

#include <sys/socket.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <uroce/cm.h>

#include "apps/libibverbs/ready_queue.h"

namespace uroce::rdmacm {

struct IdW;

/// An event as the program gets it; the private data lives in raw.
struct EventW {
  rdma_cm_event ev;
  CmEvent raw;
  IdW* counted_on = nullptr;  // the id whose events it counts in (a connect request's listener)
};

/// struct rdma_event_channel: events of its ids not yet taken, counted on
/// its fd (an eventfd).
struct ChannelW {
  rdma_event_channel ch;
  ibv::ReadyQueue<EventW*> ready;
};

/// struct rdma_cm_id and the uroce id behind it.
struct IdW {
  rdma_cm_id id;
  CmId* obj = nullptr;
  std::unique_ptr<ChannelW> own_channel;  // a synchronous id's (id.channel points to it)
  ibv_sa_path_rec path{};                 // id.route.path_rec once the route is resolved
  // rdma_create_ep on a passive id: the QP each rdma_get_request makes.
  bool has_request_qp = false;
  ibv_qp_init_attr request_qp{};
  // Its events got (the device lock held to change it) and acked (ack_mutex).
  uint32_t events_got = 0;
  std::mutex ack_mutex;
  std::condition_variable acked;
  uint32_t events_acked = 0;
};

inline IdW& wrap(rdma_cm_id* id) { return *reinterpret_cast<IdW*>(id); }
inline ChannelW& wrap(rdma_event_channel* ch) { return *reinterpret_cast<ChannelW*>(ch); }

/// The one device context every id uses (rdma_get_devices' one entry), and
/// its default PD; nullptr if the device does not open.
ibv_context* device();
ibv_pd* default_pd();

/// Sets errno to e and returns -1, librdmacm's failure.
int fail(int e);
/// -1 with errno for a failed uroce call, else 0.
int result(const Status& s);

/// An IPv4 or IPv6 socket address as a uroce one; false for another family.
bool to_sock(const sockaddr* sa, SockAddr& out);
/// A uroce address as a socket address (IPv4-mapped GIDs as AF_INET).
void to_sockaddr(const SockAddr& a, sockaddr_storage& out);

/// A synchronous id's call that ends in an event: waits for the id's next
/// event and keeps it in id.event (acked by the next such call or by
/// rdma_destroy_id). 0 if it is `want` with status 0, else -1 with errno as
/// librdmacm sets it (ECONNREFUSED for a reject, the event's errno otherwise).
int wait_sync(IdW& id, rdma_cm_event_type want);

/// A fresh wrapper for a uroce id (user_context pointing back at it).
IdW* new_id(CmId* obj, rdma_event_channel* channel, void* context, rdma_port_space ps);

}  // namespace uroce::rdmacm
