// The out-of-band TCP channel (oob.h). Control path.
#include "apps/oob.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace uroce::apps {

namespace {

bool to_addr(const std::string& host, uint16_t port, sockaddr_in& a, std::string& err) {
  a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    err = "'" + host + "' is not an IPv4 address";
    return false;
  }
  return true;
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

TcpChannel::~TcpChannel() {
  if (fd_ >= 0) ::close(fd_);
}

int TcpChannel::listen_on(const std::string& host, uint16_t port, std::string& err) {
  sockaddr_in a{};
  if (!to_addr(host, port, a, err)) return -1;
  const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ls < 0) {
    err = errno_text("socket");
    return -1;
  }
  const int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(ls, 1) != 0) {
    err = errno_text(("bind/listen " + host + ":" + std::to_string(port)).c_str());
    ::close(ls);
    return -1;
  }
  return ls;
}

bool TcpChannel::try_accept(int ls) {
  pollfd p{ls, POLLIN, 0};
  if (::poll(&p, 1, 1) != 1) return false;
  fd_ = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
  return fd_ >= 0;
}

bool TcpChannel::finish_accept(int ls, const std::string& host, uint16_t port, uint32_t timeout_s, std::string& err) {
  ::close(ls);
  if (fd_ < 0) {
    err = stopped() ? "interrupted"
                    : "no client on " + host + ":" + std::to_string(port) + " within " + std::to_string(timeout_s) + " s";
    return false;
  }
  nodelay();
  return true;
}

int TcpChannel::try_connect(const std::string& host, uint16_t port, std::string& err) {
  sockaddr_in a{};
  if (!to_addr(host, port, a, err)) return -1;
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    err = errno_text("socket");
    return -1;
  }
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    nodelay();
    return 1;
  }
  ::close(fd_);
  fd_ = -1;
  return 0;
}

bool TcpChannel::connect_to(const std::string& host, uint16_t port, uint32_t timeout_s, std::string& err) {
  return connect_to(host, port, timeout_s, [] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }, err);
}

void TcpChannel::nodelay() {
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool TcpChannel::send_bytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (n) {
    const ssize_t w = ::send(fd_, b, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= size_t(w);
  }
  return true;
}

bool TcpChannel::try_recv(void* out, size_t n) {
  while (buf_.size() < n) {
    uint8_t tmp[4096];
    const ssize_t r = ::recv(fd_, tmp, std::min(sizeof(tmp), n - buf_.size()), MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      eof_ = true;
      return false;
    }
    if (r < 0) return false;
    buf_.insert(buf_.end(), tmp, tmp + r);
  }
  std::memcpy(out, buf_.data(), n);
  buf_.erase(buf_.begin(), buf_.begin() + ptrdiff_t(n));
  return true;
}

}  // namespace uroce::apps

// ---------------------------------------------------------------- rdma_cm (perftest -R)

namespace uroce::apps {

namespace {

/// Waits for the next CM event about id (any id if null), pumping; events
/// about other ids are dropped (the CM itself answers the peer's DREQs).
bool next_cm_event(Context* ctx, const CmId* id, std::chrono::steady_clock::time_point end,
                   const std::function<void()>& idle, const volatile std::sig_atomic_t* stop, CmEvent& ev,
                   const char* what, std::string& err) {
  while (true) {
    while (cm_get_event(ctx, &ev)) {
      if (!id || ev.id == id || ev.listen_id == id) return true;
    }
    if (stop && *stop) {
      err = "interrupted";
      return false;
    }
    if (std::chrono::steady_clock::now() > end) {
      err = std::string("no ") + what + " in time";
      return false;
    }
    idle();
  }
}

CmId* accept_one_rc(Context* ctx, const CmPeer& peer, const CmConnParam& param,
                    const std::function<bool(CmId*, std::string&)>& make_qp, const std::function<void()>& idle,
                    const volatile std::sig_atomic_t* stop, std::chrono::steady_clock::time_point end, std::string& err) {
  auto l = cm_create_id(ctx, nullptr, CmPortSpace::kTcp);
  if (!l.ok()) {
    err = std::string("rdma_create_id: ") + l.status().message();
    return nullptr;
  }
  CmId* listen_id = *l;
  CmId* id = nullptr;
  CmEvent ev;
  Status s = cm_bind_addr(listen_id, peer.addr);
  if (s.ok()) s = cm_listen(listen_id, 1);
  if (!s.ok()) {
    err = std::string("rdma_bind_addr / rdma_listen: ") + s.message();
  } else if (next_cm_event(ctx, listen_id, end, idle, stop, ev, "connect request", err)) {
    if (ev.event != CmEventType::kConnectRequest) {
      err = std::string("bad event waiting for connect request: ") + cm_event_str(ev.event);
    } else {
      id = ev.id;
      if (!make_qp(id, err)) {
        (void)cm_reject(id, nullptr, 0);
      } else if (s = cm_accept(id, param); !s.ok()) {
        err = std::string("rdma_accept: ") + s.message();
      } else if (next_cm_event(ctx, id, end, idle, stop, ev, "RTU", err)) {
        if (ev.event == CmEventType::kEstablished) {
          (void)cm_destroy_id(listen_id);
          return id;
        }
        err = std::string("unexpected CM event ") + cm_event_str(ev.event) + " (status " + std::to_string(ev.status) + ")";
      }
    }
  }
  if (id) (void)cm_destroy_id(id);
  (void)cm_destroy_id(listen_id);
  return nullptr;
}

/// One attempt of the client: 1 connected, 0 the server is not there yet, -1 failure.
int connect_once(Context* ctx, const CmPeer& peer, const CmConnParam& param,
                 const std::function<bool(CmId*, std::string&)>& make_qp, const std::function<void()>& idle,
                 const volatile std::sig_atomic_t* stop, std::chrono::steady_clock::time_point end, CmId*& out,
                 std::string& err) {
  auto c = cm_create_id(ctx, nullptr, CmPortSpace::kTcp);
  if (!c.ok()) {
    err = std::string("rdma_create_id: ") + c.status().message();
    return -1;
  }
  CmId* id = *c;
  CmEvent ev;
  int rc = -1;
  if (Status s = cm_resolve_addr(id, nullptr, peer.addr, 2000); !s.ok()) {
    err = std::string("rdma_resolve_addr: ") + s.message();
  } else if (!next_cm_event(ctx, id, end, idle, stop, ev, "address resolution", err)) {
  } else if (ev.event != CmEventType::kAddrResolved) {
    err = std::string("rdma_resolve_addr: ") + cm_event_str(ev.event);
    rc = ev.event == CmEventType::kAddrError ? 0 : -1;
  } else if (s = cm_resolve_route(id, 2000); !s.ok()) {
    err = std::string("rdma_resolve_route: ") + s.message();
  } else if (!next_cm_event(ctx, id, end, idle, stop, ev, "route resolution", err)) {
  } else if (ev.event != CmEventType::kRouteResolved) {
    err = std::string("rdma_resolve_route: ") + cm_event_str(ev.event);
  } else if (!make_qp(id, err)) {
  } else if (s = cm_connect(id, param); !s.ok()) {
    err = std::string("rdma_connect: ") + s.message();
  } else if (!next_cm_event(ctx, id, end, idle, stop, ev, "connection", err)) {
  } else if (ev.event == CmEventType::kEstablished) {
    out = id;
    return 1;
  } else {
    err = std::string("unexpected CM event ") + cm_event_str(ev.event) + " (status " + std::to_string(ev.status) + ")";
    rc = ev.event == CmEventType::kRejected || ev.event == CmEventType::kUnreachable ? 0 : -1;
  }
  (void)cm_destroy_id(id);
  return rc;
}

}  // namespace

CmId* cm_connect_rc(Context* ctx, const CmPeer& peer, const CmConnParam& param,
                    const std::function<bool(CmId*, std::string&)>& make_qp, const std::function<void()>& idle,
                    const volatile std::sig_atomic_t* stop, std::string& err) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(peer.timeout_s);
  if (peer.server) return accept_one_rc(ctx, peer, param, make_qp, idle, stop, end, err);
  while (true) {
    CmId* id = nullptr;
    const int r = connect_once(ctx, peer, param, make_qp, idle, stop, end, id, err);
    if (r > 0) return id;
    if (r < 0 || (stop && *stop)) return nullptr;
    if (std::chrono::steady_clock::now() > end) {
      err = "no rdma_cm server accepted within " + std::to_string(peer.timeout_s) + " s (last attempt: " + err + ")";
      return nullptr;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);  // perftest's retry delay
    while (std::chrono::steady_clock::now() < until) idle();
  }
}

CmChannel::~CmChannel() {
  if (id_) (void)cm_destroy_id(id_);  // and its QP
  if (mr_) (void)dereg_mr(mr_);
  if (scq_) (void)destroy_cq(scq_);
  if (rcq_) (void)destroy_cq(rcq_);
  if (pd_) (void)dealloc_pd(pd_);
}

bool CmChannel::post_one_recv() {
  Sge sge{uint64_t(uintptr_t(recv_buf())), uint32_t(kMaxMessage), mr_->lkey};
  RecvWr wr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return post_recv(id_ ? id_->qp : nullptr, &wr, nullptr).ok();
}

bool CmChannel::make_qp(CmId* id, std::string& err) {
  if (!pd_) {
    auto pd = alloc_pd(ctx_);
    auto scq = create_cq(ctx_, 4);
    auto rcq = create_cq(ctx_, 4);
    if (!pd.ok() || !scq.ok() || !rcq.ok()) {
      err = "cannot allocate the rdma_cm channel's PD / CQs";
      return false;
    }
    pd_ = *pd;
    scq_ = *scq;
    rcq_ = *rcq;
    auto mr = reg_mr(pd_, buf_, sizeof(buf_), kAccessLocalWrite);
    if (!mr.ok()) {
      err = std::string("reg_mr: ") + mr.status().message();
      return false;
    }
    mr_ = *mr;
  }
  // A connection attempt that failed (REJ) left its receive flushed here.
  Wc stale;
  while (poll_cq(rcq_, 1, &stale) == 1 || poll_cq(scq_, 1, &stale) == 1) {
  }
  QpInitAttr ia;
  ia.send_cq = scq_;
  ia.recv_cq = rcq_;
  ia.qp_type = QpType::kRc;
  ia.cap.max_send_wr = 1;
  ia.cap.max_recv_wr = 1;
  if (Status s = cm_create_qp(id, pd_, ia); !s.ok()) {
    err = std::string("rdma_create_qp: ") + s.message();
    return false;
  }
  id_ = id;
  if (!post_one_recv()) {
    err = "Couldn't post the first receive of the rdma_cm channel";
    id_ = nullptr;
    return false;
  }
  return true;
}

bool CmChannel::open(const CmPeer& peer, const std::function<void()>& idle, std::string& err) {
  CmConnParam param;
  param.responder_resources = 0;  // perftest's comm QP does SENDs only
  param.initiator_depth = 0;
  CmId* id = cm_connect_rc(ctx_, peer, param, [this](CmId* i, std::string& e) { return make_qp(i, e); }, idle, stop_, err);
  if (!id) {
    id_ = nullptr;  // cm_connect_rc destroyed the ids (and their QPs) it gave up on
    return false;
  }
  id_ = id;
  return true;
}

bool CmChannel::send_wait(const void* p, size_t n, uint32_t timeout_s, const std::function<void()>& idle,
                          std::string& err) {
  if (n > kMaxMessage) {
    err = "a message of " + std::to_string(n) + " bytes does not fit perftest's " + std::to_string(kMaxMessage) +
          "-byte receive";
    return false;
  }
  std::memcpy(send_buf(), p, n);
  Sge sge{uint64_t(uintptr_t(send_buf())), uint32_t(n), mr_->lkey};
  SendWr wr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = WrOpcode::kSend;
  wr.send_flags = kSendSignaled;
  if (Status s = post_send(id_->qp, &wr, nullptr); !s.ok()) {
    err = std::string("post_send: ") + s.message();
    return false;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  Wc wc;
  while (poll_cq(scq_, 1, &wc) == 0) {
    if (stopped() || std::chrono::steady_clock::now() > end) {
      err = stopped() ? "interrupted" : "the send did not complete within " + std::to_string(timeout_s) + " s";
      return false;
    }
    idle();
  }
  if (wc.status != WcStatus::kSuccess) {
    err = std::string("send completion: ") + wc_status_str(wc.status);
    return false;
  }
  return true;
}

bool CmChannel::recv_wait(void* out, size_t n, uint32_t timeout_s, const std::function<void()>& idle,
                          std::string& err) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  Wc wc;
  while (poll_cq(rcq_, 1, &wc) == 0) {
    if (stopped() || std::chrono::steady_clock::now() > end) {
      err = stopped() ? "interrupted" : "no message within " + std::to_string(timeout_s) + " s";
      return false;
    }
    idle();
  }
  if (wc.status != WcStatus::kSuccess) {
    err = std::string("receive completion: ") + wc_status_str(wc.status);
    return false;
  }
  if (wc.byte_len < n) {
    err = "a message of " + std::to_string(wc.byte_len) + " bytes, " + std::to_string(n) + " expected";
    return false;
  }
  std::memcpy(out, recv_buf(), n);
  if (!post_one_recv()) {
    err = "Couldn't post a receive on the rdma_cm channel";
    return false;
  }
  return true;
}

void CmChannel::disconnect(uint32_t timeout_ms, const std::function<void()>& idle) {
  if (!id_ || !cm_disconnect(id_).ok()) return;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  CmEvent ev;
  std::string ignored;
  while (next_cm_event(ctx_, id_, end, idle, stop_, ev, "DREP", ignored) && ev.event != CmEventType::kDisconnected) {
  }
}

}  // namespace uroce::apps
