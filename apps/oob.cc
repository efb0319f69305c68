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
