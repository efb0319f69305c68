// CmLink: the apps' RDMA CM connection of existing QPs (perftest -R).
#include "apps/cm_link.h"

#include <chrono>

namespace uroce::apps {

CmLink::~CmLink() {
  for (CmId* id : ids_) {
    if (id) (void)cm_destroy_id(id);  // the QPs stay the app's
  }
  if (listen_id_) (void)cm_destroy_id(listen_id_);
}

bool CmLink::wait(const std::function<bool()>& done, uint32_t timeout_s, const char* what, std::string& err) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (!done()) {
    if (stop_ && *stop_) {
      err = "interrupted";
      return false;
    }
    if (std::chrono::steady_clock::now() > end) {
      err = std::string("RDMA CM: timed out after ") + std::to_string(timeout_s) + " s waiting for " + what;
      return false;
    }
    pump_();
    CmEvent ev;
    while (cm_get_event(ctx_, &ev)) {
      if (!handle(ev, err)) return false;
    }
  }
  return true;
}

bool CmLink::handle(const CmEvent& ev, std::string& err) {
  switch (ev.event) {
    case CmEventType::kAddrResolved:
      if (Status s = cm_resolve_route(ev.id, 2000); !s.ok()) return err = s.message(), false;
      return true;
    case CmEventType::kRouteResolved:
      if (Status s = cm_connect(ev.id, param_); !s.ok()) return err = std::string("rdma_connect: ") + s.message(), false;
      return true;
    case CmEventType::kConnectRequest: {
      const size_t i = ids_.size();
      if (i >= qps_.size()) {  // more requests than QPs
        (void)cm_reject(ev.id, nullptr, 0);
        (void)cm_destroy_id(ev.id);
        return true;
      }
      ids_.push_back(ev.id);
      if (Status s = cm_use_qp(ev.id, qps_[i]); !s.ok()) return err = s.message(), false;
      if (Status s = cm_accept(ev.id, param_); !s.ok()) return err = std::string("rdma_accept: ") + s.message(), false;
      return true;
    }
    case CmEventType::kEstablished:
      ++established_;
      return true;
    case CmEventType::kDisconnected:
      ++disconnected_;
      return true;
    case CmEventType::kRejected:
    case CmEventType::kUnreachable:
    case CmEventType::kAddrError:
    case CmEventType::kRouteError:
    case CmEventType::kConnectError:
      if (listen_id_) {  // server: one request failed; the client will try again
        for (CmId*& id : ids_) {
          if (id == ev.id) {
            (void)cm_destroy_id(id);
            id = nullptr;
          }
        }
        std::erase(ids_, nullptr);
        return true;
      }
      retry_ = true;
      return true;
    case CmEventType::kConnectResponse:
    case CmEventType::kDeviceRemoval:
    case CmEventType::kMulticastJoin:
    case CmEventType::kMulticastError:
    case CmEventType::kAddrChange:
    case CmEventType::kTimewaitExit:
      return true;
  }
  return true;
}

bool CmLink::connect(const std::vector<Qp*>& qps, const SockAddr& server, bool is_server, const CmConnParam& param,
                     uint32_t timeout_s, std::string& err) {
  qps_ = qps;
  param_ = param;
  const auto n = uint32_t(qps.size());
  if (is_server) {
    auto l = cm_create_id(ctx_, nullptr, CmPortSpace::kTcp);
    if (!l.ok()) return err = l.status().message(), false;
    listen_id_ = *l;
    if (Status s = cm_bind_addr(listen_id_, server); !s.ok()) return err = std::string("rdma_bind_addr: ") + s.message(), false;
    if (Status s = cm_listen(listen_id_, int(n)); !s.ok()) return err = std::string("rdma_listen: ") + s.message(), false;
    return wait([&] { return established_ == n; }, timeout_s, "the client's connections", err);
  }
  // Client: all QPs at once; on a REJ (no listener yet) or no answer, start over.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    for (CmId* id : ids_) (void)cm_destroy_id(id);
    ids_.clear();
    established_ = 0;
    retry_ = false;
    for (Qp* qp : qps_) {
      auto id = cm_create_id(ctx_, nullptr, CmPortSpace::kTcp);
      if (!id.ok()) return err = id.status().message(), false;
      ids_.push_back(*id);
      if (Status s = cm_use_qp(*id, qp); !s.ok()) return err = s.message(), false;
      if (Status s = cm_resolve_addr(*id, nullptr, server, 2000); !s.ok()) {
        return err = std::string("rdma_resolve_addr: ") + s.message(), false;
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return err = "RDMA CM: no server within " + std::to_string(timeout_s) + " s", false;
    if (!wait([&] { return established_ == n || retry_; }, uint32_t(left.count()), "the connections", err)) return false;
    if (established_ == n) return true;
    // A QP that went to ERR on the failed attempt is reset to INIT for the next.
    for (Qp* qp : qps_) {
      if (qp->state == QpState::kInit) continue;
      QpAttr a;
      QpInitAttr ia;
      if (Status s = query_qp(qp, &a, &ia); !s.ok()) return err = s.message(), false;
      QpAttr r;
      r.qp_state = QpState::kReset;
      a.qp_state = QpState::kInit;
      if (Status s = modify_qp(qp, r, kQpState); !s.ok()) return err = s.message(), false;
      if (Status s = modify_qp(qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags); !s.ok()) {
        return err = std::string("QP back to INIT: ") + s.message(), false;
      }
    }
    const auto pause = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (std::chrono::steady_clock::now() < pause) pump_();  // perftest waits 100 ms between tries
  }
}

bool CmLink::disconnect(uint32_t timeout_s) {
  for (CmId* id : ids_) (void)cm_disconnect(id);
  std::string err;
  return wait([&] { return disconnected_ >= ids_.size(); }, timeout_s, "the disconnects", err);
}

}  // namespace uroce::apps
