// Connecting an app's existing RC QPs through the RDMA CM (include/uroce/cm.h)
// instead of hand-exchanged QPNs and PSNs: perftest's -R. The client opens
// one rdma_cm id per QP to the server's address and port (retrying while the
// server is not listening yet, as perftest's client does), the server listens
// on the port and accepts the requests in arrival order, QP i for the i-th.
// Disconnect sends DREQ on every id and waits for the connections to end.
// Control path; every wait calls the caller's pump (the engine poll).
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <uroce/cm.h>
#include <uroce/verbs.h>

namespace uroce::apps {

class CmLink {
 public:
  /// pump: one engine poll; stop: the app's signal flag.
  CmLink(Context* ctx, std::function<void()> pump, const volatile std::sig_atomic_t* stop)
      : ctx_(ctx), pump_(std::move(pump)), stop_(stop) {}
  ~CmLink();
  CmLink(const CmLink&) = delete;
  CmLink& operator=(const CmLink&) = delete;

  /// Connects qps (all in INIT): as the server (listening on our address
  /// `server`, port included) or as the client (to `server`). Returns once
  /// every QP is connected (RTS), or false with err set after timeout_s.
  bool connect(const std::vector<Qp*>& qps, const SockAddr& server, bool is_server, const CmConnParam& param,
               uint32_t timeout_s, std::string& err);
  /// DREQ on every connection, then waits up to timeout_s for all of them
  /// to end (the peer's DREQ ends one as well). True if all ended.
  bool disconnect(uint32_t timeout_s);

 private:
  bool wait(const std::function<bool()>& done, uint32_t timeout_s, const char* what, std::string& err);
  bool handle(const CmEvent& ev, std::string& err);

  Context* ctx_;
  std::function<void()> pump_;
  const volatile std::sig_atomic_t* stop_;
  std::vector<Qp*> qps_;
  std::vector<CmId*> ids_;   // per QP, once it has one
  CmId* listen_id_ = nullptr;
  CmConnParam param_;
  uint32_t established_ = 0, disconnected_ = 0;
  bool retry_ = false;  // client: a REJ / unreachable: try again
};

}  // namespace uroce::apps
