// The librdmacm calls around an id: its QP, SRQ and CQs (rdma_create_qp
// makes the CQs a program leaves out, with completion channels, so that
// rdma_verbs.h's rdma_get_send_comp / rdma_get_recv_comp can wait on them),
// the attributes of a QP the program moves itself (rdma_init_qp_attr,
// rdma_establish), address lookup (rdma_getaddrinfo), the synchronous endpoints of
// rdma_create_ep / rdma_get_request, devices and options, and what uroce
// does not do (multicast, ECE, rsockets): each of those fails with
// EOPNOTSUPP (ENOSYS for rsockets), never a silent success.
#include <netdb.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "apps/libibverbs/abi.h"
#include "apps/libibverbs/provider.h"
#include "apps/librdmacm/cma.h"

namespace uroce::rdmacm {
namespace {

using ibv::Guard;
using ibv::Provider;

// The CQs (each with its completion channel) that attr leaves out.
int make_cqs(rdma_cm_id* id, ibv_qp_init_attr& attr) {
  auto make = [&](ibv_comp_channel** ch, ibv_cq** cq, uint32_t depth) {
    *ch = ibv_create_comp_channel(id->verbs);
    *cq = *ch ? ibv_create_cq(id->verbs, int(std::max(depth, 1u)), id, *ch, 0) : nullptr;
    return *cq != nullptr;
  };
  if (!attr.send_cq && !make(&id->send_cq_channel, &id->send_cq, attr.cap.max_send_wr)) return -1;
  if (!attr.recv_cq && !make(&id->recv_cq_channel, &id->recv_cq, attr.cap.max_recv_wr)) return -1;
  if (!attr.send_cq) attr.send_cq = id->send_cq;
  if (!attr.recv_cq) attr.recv_cq = id->recv_cq;
  return 0;
}

/// Gives id the QP qp (or destroys qp and fails).
int attach(rdma_cm_id* id, ibv_qp* qp, ibv_pd* pd) {
  if (!qp) return -1;  // errno from ibv_create_qp
  {
    Guard g(Provider::get()->lock());
    Status s = cm_attach_qp(wrap(id).obj, ibv::wrap_of<ibv::QpW>(qp)->obj);
    if (s.ok()) {
      id->qp = qp;
      id->pd = pd;
      qp->state = ibv_qp_state(ibv::wrap_of<ibv::QpW>(qp)->obj->state);
      return 0;
    }
    errno = ibv::errno_of(s);
  }
  const int e = errno;
  (void)ibv_destroy_qp(qp);
  return fail(e);
}

sockaddr* copy_addr(const sockaddr* sa, socklen_t len) {
  auto* out = static_cast<sockaddr*>(std::malloc(sizeof(sockaddr_storage)));
  if (out) {
    std::memset(out, 0, sizeof(sockaddr_storage));
    std::memcpy(out, sa, std::min<size_t>(len, sizeof(sockaddr_storage)));
  }
  return out;
}

socklen_t addr_len(const sockaddr* sa) {
  return sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

}  // namespace
}  // namespace uroce::rdmacm

using namespace uroce;
using namespace uroce::rdmacm;

extern "C" {

// ---------------------------------------------------------------- QP, SRQ

int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  if (!id || !attr || !id->verbs) return fail(EINVAL);
  ibv_pd* pd = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) && attr->pd ? attr->pd : id->pd ? id->pd : default_pd();
  if (!pd) return fail(ENOMEM);
  // ibv_qp_init_attr is the start of ibv_qp_init_attr_ex (verbs.h).
  auto& base = reinterpret_cast<ibv_qp_init_attr&>(*attr);
  if (attr->srq == nullptr) attr->srq = id->srq;
  if (make_cqs(id, base)) return -1;
  ibv_qp* qp = nullptr;
  if (attr->comp_mask & ~uint32_t(IBV_QP_INIT_ATTR_PD)) {
    attr->pd = pd;
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    qp = ibv_create_qp_ex(id->verbs, attr);
  } else {
    qp = ibv_create_qp(pd, &base);
  }
  return attach(id, qp, pd);
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (!id || !attr) return fail(EINVAL);
  ibv_qp_init_attr_ex ex{};
  std::memcpy(&ex, attr, sizeof *attr);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;
  const int rc = rdma_create_qp_ex(id, &ex);
  std::memcpy(attr, &ex, sizeof *attr);  // the CQs made and the capacities allocated, as librdmacm returns them
  return rc;
}

void rdma_destroy_qp(rdma_cm_id* id) {
  if (!id || !id->qp) return;
  {
    Guard g(Provider::get()->lock());
    (void)cm_detach_qp(wrap(id).obj);
  }
  (void)ibv_destroy_qp(id->qp);
  id->qp = nullptr;
}

int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (!id || !attr) return fail(EINVAL);
  if (attr->comp_mask & ~uint32_t(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE)) return fail(EOPNOTSUPP);
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC) return fail(EOPNOTSUPP);
  ibv_pd* pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd : id->pd ? id->pd : default_pd();
  ibv_srq_init_attr base{attr->srq_context, attr->attr};
  ibv_srq* srq = pd ? ibv_create_srq(pd, &base) : nullptr;
  if (!srq) return -1;
  id->srq = srq;
  id->pd = pd;
  return 0;
}

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!attr) return fail(EINVAL);
  ibv_srq_init_attr_ex ex{};
  ex.srq_context = attr->srq_context;
  ex.attr = attr->attr;
  ex.comp_mask = IBV_SRQ_INIT_ATTR_PD;
  ex.pd = pd;
  return rdma_create_srq_ex(id, &ex);
}

void rdma_destroy_srq(rdma_cm_id* id) {
  if (!id || !id->srq) return;
  (void)ibv_destroy_srq(id->srq);
  id->srq = nullptr;
}

// A QP the program moves itself (rping -q): the attributes of each state,
// and on the active side the RTU once it is in RTS.
int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (!id || !qp_attr || !qp_attr_mask) return fail(EINVAL);
  QpAttr at;
  at.qp_state = QpState(qp_attr->qp_state);
  uint32_t mask = 0;
  {
    Guard g(Provider::get()->lock());
    if (Status s = cm_init_qp_attr(wrap(id).obj, at, mask); !s.ok()) return result(s);
  }
  ibv::ibv_qp_attr_of(at, *qp_attr);
  *qp_attr_mask = int(mask);  // uroce's kQp* bits are verbs.h's IBV_QP_*
  return 0;
}

int rdma_establish(rdma_cm_id* id) {
  if (!id || id->qp) return fail(EINVAL);  // an id's own QP is established with the connection
  Guard g(Provider::get()->lock());
  return result(cm_establish(wrap(id).obj));
}

// ---------------------------------------------------------------- addresses

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo** res) {
  if ((!node && !service && !hints) || !res) return fail(EINVAL);
  const int flags = hints ? hints->ai_flags : 0;
  if (flags & ~(RAI_PASSIVE | RAI_NUMERICHOST | RAI_NOROUTE | RAI_FAMILY)) return fail(EINVAL);
  addrinfo* ai = nullptr;
  if (node || service) {
    addrinfo h{};
    h.ai_family = hints && hints->ai_family ? hints->ai_family : AF_UNSPEC;
    h.ai_socktype = SOCK_STREAM;
    h.ai_flags = ((flags & RAI_NUMERICHOST) ? AI_NUMERICHOST : 0) | ((flags & RAI_PASSIVE) ? AI_PASSIVE : 0);
    if (int rc = getaddrinfo(node, service, &h, &ai); rc != 0) return fail(rc == EAI_SYSTEM ? errno : EADDRNOTAVAIL);
  }
  auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (!r) {
    if (ai) freeaddrinfo(ai);
    return fail(ENOMEM);
  }
  r->ai_flags = flags;
  r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
  r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type
                                             : (r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC);
  if (ai) {
    r->ai_family = ai->ai_family;
    sockaddr** mine = (flags & RAI_PASSIVE) ? &r->ai_src_addr : &r->ai_dst_addr;
    socklen_t* mine_len = (flags & RAI_PASSIVE) ? &r->ai_src_len : &r->ai_dst_len;
    *mine = copy_addr(ai->ai_addr, ai->ai_addrlen);
    *mine_len = ai->ai_addrlen;
    freeaddrinfo(ai);
  } else {
    // Neither node nor service: the hints' own destination, as rdma-core
    // gives it (libfabric's verbs provider asks so for the peer address a
    // program got out of band: fi_pingpong's client, ofi_rxm's connections).
    r->ai_family = hints->ai_family;
    if (hints->ai_dst_addr) {
      r->ai_dst_addr = copy_addr(hints->ai_dst_addr, hints->ai_dst_len);
      r->ai_dst_len = addr_len(hints->ai_dst_addr);
    }
  }
  if (!r->ai_src_addr && hints && hints->ai_src_addr) {
    r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
    r->ai_src_len = addr_len(hints->ai_src_addr);
  }
  *res = r;
  return 0;
}

void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_route);
    std::free(res->ai_connect);
    std::free(res);
    res = next;
  }
}

// ---------------------------------------------------------------- synchronous endpoints

int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!id || !res) return fail(EINVAL);
  rdma_cm_id* cm = nullptr;
  if (rdma_create_id(nullptr, &cm, nullptr, rdma_port_space(res->ai_port_space))) return -1;
  cm->qp_type = ibv_qp_type(res->ai_qp_type);
  if (qp_init_attr) qp_init_attr->qp_type = cm->qp_type;  // the QP follows the address (librdmacm does so)
  int rc = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    rc = rdma_bind_addr(cm, res->ai_src_addr);
    if (!rc && qp_init_attr) {  // each rdma_get_request makes its id's QP from these
      wrap(cm).has_request_qp = true;
      wrap(cm).request_qp = *qp_init_attr;
      cm->pd = pd;
    }
  } else {
    rc = rdma_resolve_addr(cm, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (!rc && !(res->ai_flags & RAI_NOROUTE)) rc = rdma_resolve_route(cm, 2000);
    if (!rc && qp_init_attr) rc = rdma_create_qp(cm, pd, qp_init_attr);
  }
  if (rc) {
    const int e = errno;
    (void)rdma_destroy_id(cm);
    return fail(e);
  }
  *id = cm;
  return 0;
}

void rdma_destroy_ep(rdma_cm_id* id) {
  if (!id) return;
  rdma_destroy_qp(id);
  rdma_destroy_srq(id);
  (void)rdma_destroy_id(id);
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  if (!listen || !id || !wrap(listen).own_channel) return fail(EINVAL);  // a synchronous listener only
  IdW& l = wrap(listen);
  if (wait_sync(l, RDMA_CM_EVENT_CONNECT_REQUEST)) return -1;
  rdma_cm_event* e = listen->event;
  listen->event = nullptr;
  rdma_cm_id* child = e->id;
  child->event = e;  // the request's private data stays readable from the new id
  if (l.has_request_qp) {
    ibv_qp_init_attr attr = l.request_qp;
    if (rdma_create_qp(child, listen->pd, &attr)) {
      const int err = errno;
      (void)rdma_reject(child, nullptr, 0);
      (void)rdma_destroy_id(child);
      return fail(err);
    }
  }
  *id = child;
  return 0;
}

// ---------------------------------------------------------------- devices, options

ibv_context** rdma_get_devices(int* num_devices) {
  auto** list = static_cast<ibv_context**>(std::calloc(2, sizeof(ibv_context*)));
  if (!list) return nullptr;
  list[0] = device();
  if (num_devices) *num_devices = list[0] ? 1 : 0;
  return list;
}

void rdma_free_devices(ibv_context** list) { std::free(list); }

int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
  if (!id || !optval) return fail(EINVAL);
  if (level != RDMA_OPTION_ID) return fail(EOPNOTSUPP);  // RDMA_OPTION_IB_PATH: RoCE has no SA paths
  switch (optname) {
    case RDMA_OPTION_ID_REUSEADDR:  // uroce never holds a port after its id goes: reuse always works
      return optlen == sizeof(int) ? 0 : fail(EINVAL);
    case RDMA_OPTION_ID_TOS: {
      if (optlen != sizeof(uint8_t)) return fail(EINVAL);
      Guard g(Provider::get()->lock());
      wrap(id).obj->route.traffic_class = *static_cast<uint8_t*>(optval);
      return 0;
    }
    default:
      return fail(EOPNOTSUPP);  // AFONLY, ACK_TIMEOUT: not in uroce's CM
  }
}

// ---------------------------------------------------------------- not in uroce (docs/VERBS.md)

int rdma_notify(rdma_cm_id*, ibv_event_type) { return fail(EOPNOTSUPP); }
int rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) { return fail(EOPNOTSUPP); }
int rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) { return fail(EOPNOTSUPP); }
int rdma_leave_multicast(rdma_cm_id*, sockaddr*) { return fail(EOPNOTSUPP); }
int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) { return fail(EOPNOTSUPP); }
int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) { return fail(EOPNOTSUPP); }
int rdma_reject_ece(rdma_cm_id*, const void*, uint8_t) { return fail(EOPNOTSUPP); }

}  // extern "C"

// rsockets (rdma/rsocket.h): sockets over RDMA, not built on uroce. Each
// fails as a call the library does not have: -1 with ENOSYS.
#define UROCE_RSOCKET(name)    \
  extern "C" long name() {     \
    errno = ENOSYS;            \
    return -1;                 \
  }
#define UROCE_RSOCKETS(X)                                                                                       \
  X(rsocket) X(rbind) X(rlisten) X(raccept) X(rconnect) X(rshutdown) X(rclose) X(rrecv) X(rrecvfrom) X(rrecvmsg) \
  X(rsend) X(rsendto) X(rsendmsg) X(rread) X(rreadv) X(rwrite) X(rwritev) X(rpoll) X(rselect) X(rgetpeername)    \
  X(rgetsockname) X(rsetsockopt) X(rgetsockopt) X(rfcntl) X(riomap) X(riounmap) X(riowrite)
UROCE_RSOCKETS(UROCE_RSOCKET)
