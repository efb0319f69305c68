// The out-of-band TCP channel (oob.h). Control path.
#include "apps/common/oob.h"

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

#include <uroce/wr.h>

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
  if (listen_fd_ >= 0) ::close(listen_fd_);
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

CmChannel::~CmChannel() {
  if (id_) (void)cm_destroy_id(id_);  // and its QP
  if (mr_) (void)dereg_mr(mr_);
  if (scq_) (void)destroy_cq(scq_);
  if (rcq_) (void)destroy_cq(rcq_);
}

bool CmChannel::post_one_recv() {
  Sge sge{uint64_t(uintptr_t(recv_buf())), uint32_t(kMaxMessage), mr_->lkey};
  RecvWr wr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return post_recv(id_ ? id_->qp : nullptr, &wr, nullptr).ok();
}

bool CmChannel::make_qp(CmId* id, std::string& err) {
  if (!mr_) {
    auto scq = create_cq(ep_.ctx(), 4);
    auto rcq = create_cq(ep_.ctx(), 4);
    if (!scq.ok() || !rcq.ok()) {
      err = "cannot allocate the rdma_cm channel's CQs";
      return false;
    }
    scq_ = *scq;
    rcq_ = *rcq;
    auto mr = reg_mr(ep_.pd(), buf_, sizeof(buf_), kAccessLocalWrite);
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
  if (Status s = cm_create_qp(id, ep_.pd(), ia); !s.ok()) {
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

bool CmChannel::open(const CmPeer& peer, std::string& err) {
  CmConnParam param;
  param.responder_resources = 0;  // perftest's comm QP does SENDs only
  param.initiator_depth = 0;
  CmId* id = ep_.cm_connect_rc(peer, param, [this](CmId* i, std::string& e) { return make_qp(i, e); }, err);
  if (!id) {
    id_ = nullptr;  // cm_connect_rc destroyed the ids (and their QPs) it gave up on
    return false;
  }
  id_ = id;
  return true;
}

bool CmChannel::send_wait(const void* p, size_t n, uint32_t timeout_s, std::string& err) {
  if (n > kMaxMessage) {
    err = "a message of " + std::to_string(n) + " bytes does not fit perftest's " + std::to_string(kMaxMessage) +
          "-byte receive";
    return false;
  }
  std::memcpy(send_buf(), p, n);
  Sge sge{uint64_t(uintptr_t(send_buf())), uint32_t(n), mr_->lkey};
  SendWr wr = send_wr(0, &sge);
  wr.signaled();
  if (Status s = post_send(id_->qp, &wr, nullptr); !s.ok()) {
    err = std::string("post_send: ") + s.message();
    return false;
  }
  Wc wc;
  if (!ep_.wait_wc(scq_, wc, Deadline(timeout_s), "the send's completion", err)) return false;
  if (wc.status != WcStatus::kSuccess) {
    err = std::string("send completion: ") + wc_status_str(wc.status);
    return false;
  }
  return true;
}

bool CmChannel::recv_wait(void* out, size_t n, uint32_t timeout_s, std::string& err) {
  Wc wc;
  if (!ep_.wait_wc(rcq_, wc, Deadline(timeout_s), "a message", err)) return false;
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

void CmChannel::disconnect(uint32_t timeout_ms) {
  if (id_) ep_.cm_disconnect_all({&id_, 1}, timeout_ms);
}

}  // namespace uroce::apps
