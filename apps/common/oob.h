// The out-of-band channels of the two-endpoint apps (demo, pingpong, perf), in
// the manner of perftest and rdma-core's *_pingpong: the server listens and
// accepts one client, the client connects (retrying until the server is up),
// then both exchange fixed-size messages. TcpChannel carries them over TCP;
// CmChannel over an RC connection that rdma_cm sets up (perftest -R).
// Control path only; the wait loops call an idle callback (TcpChannel) or
// pump the Endpoint (CmChannel) so that the engine keeps polling (answers ARP,
// retransmits, runs the CM) while they wait.
//
// The stop flag (set by the app's SIGINT/SIGTERM handler) ends every wait.
#pragma once

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <uroce/cm.h>
#include <uroce/verbs.h>

#include "apps/common/endpoint.h"

namespace uroce::apps {

class TcpChannel {
 public:
  /// stop: the app's signal flag; nonzero ends every wait with "interrupted".
  explicit TcpChannel(const volatile std::sig_atomic_t* stop) : stop_(stop) {}
  ~TcpChannel();
  TcpChannel(const TcpChannel&) = delete;
  TcpChannel& operator=(const TcpChannel&) = delete;

  /// Server: listens on host:port now (IPv4 text; "0.0.0.0" for all), before
  /// accept_one, so that a client may connect while the server still opens
  /// its port. A memif server's link comes up only once its client's device
  /// is open, and a stock client under `uroce run` connects its TCP socket
  /// once, right after opening that device, without waiting for the link.
  bool listen(const std::string& host, uint16_t port, std::string& err) {
    listen_fd_ = listen_on(host, port, err);
    return listen_fd_ >= 0;
  }

  /// Server: accepts one client on host:port (listening now unless listen()
  /// did), calling idle() about every millisecond meanwhile. False with err
  /// set on failure, timeout or stop.
  template <typename F>
  bool accept_one(const std::string& host, uint16_t port, uint32_t timeout_s, F&& idle, std::string& err) {
    const int ls = listen_fd_ >= 0 ? std::exchange(listen_fd_, -1) : listen_on(host, port, err);
    if (ls < 0) return false;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (!stopped() && std::chrono::steady_clock::now() < end && !try_accept(ls)) idle();
    return finish_accept(ls, host, port, timeout_s, err);
  }

  /// Client: connects to host:port (IPv4 text), retrying every 20 ms until
  /// timeout_s and calling idle() between tries.
  template <typename F>
  bool connect_to(const std::string& host, uint16_t port, uint32_t timeout_s, F&& idle, std::string& err) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (!stopped() && std::chrono::steady_clock::now() < end) {
      const int r = try_connect(host, port, err);
      if (r > 0) return true;
      if (r < 0) return false;
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
      while (std::chrono::steady_clock::now() < until) idle();
    }
    err = stopped() ? "interrupted" : "no server on " + host + ":" + std::to_string(port) + " within " +
                                          std::to_string(timeout_s) + " s";
    return false;
  }
  /// connect_to without an idle callback (sleeps between tries).
  bool connect_to(const std::string& host, uint16_t port, uint32_t timeout_s, std::string& err);

  /// Writes all n bytes (one send() for small messages, as rdma-core's peers
  /// read each message with one read()). False if the peer is gone.
  bool send_bytes(const void* p, size_t n);
  /// Non-blocking: true once n bytes have arrived (copied to out). Sets eof()
  /// when the peer closed or the socket failed.
  bool try_recv(void* out, size_t n);
  /// Waits for n bytes, calling idle() meanwhile. False with err set on EOF,
  /// timeout or stop.
  template <typename F>
  bool recv_wait(void* out, size_t n, uint32_t timeout_s, F&& idle, std::string& err) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (!try_recv(out, n)) {
      if (eof() || stopped() || std::chrono::steady_clock::now() > end) {
        err = stopped() ? "interrupted"
              : eof()   ? "the peer closed the out-of-band connection"
                        : "out-of-band message timed out after " + std::to_string(timeout_s) + " s";
        return false;
      }
      idle();
    }
    return true;
  }
  bool eof() const { return eof_; }
  /// The connected socket (-1 before accept_one/connect_to succeed), for callers
  /// that move their own data over it (perf_tcp.cc).
  int fd() const { return fd_; }
  /// Bytes received but not yet taken by try_recv.
  size_t buffered() const { return buf_.size(); }

 private:
  bool stopped() const { return stop_ && *stop_; }
  int listen_on(const std::string& host, uint16_t port, std::string& err);
  bool try_accept(int ls);  // polls ls for up to 1 ms
  bool finish_accept(int ls, const std::string& host, uint16_t port, uint32_t timeout_s, std::string& err);
  int try_connect(const std::string& host, uint16_t port, std::string& err);  // 1 ok, 0 retry, -1 error
  void nodelay();

  const volatile std::sig_atomic_t* stop_;
  int listen_fd_ = -1;  // listen() before accept_one
  int fd_ = -1;
  bool eof_ = false;
  std::vector<uint8_t> buf_;
};

/// The out-of-band channel of perftest -R: the same messages as over TCP, each
/// one RC SEND on a QP of its own that rdma_cm connects (perftest 4.5's comm
/// QP: one receive of kMaxMessage bytes posted at a time, reposted after each
/// message, one signaled SEND at a time). Every wait pumps the endpoint.
class CmChannel {
 public:
  /// perftest's receive length: sizeof(struct pingpong_dest), its largest message.
  static constexpr size_t kMaxMessage = 56;

  /// The channel's PD, CQs, MR and QP are ep's; ep must outlive the channel.
  explicit CmChannel(Endpoint& ep) : ep_(ep) {}
  ~CmChannel();
  CmChannel(const CmChannel&) = delete;
  CmChannel& operator=(const CmChannel&) = delete;

  bool open(const CmPeer& peer, std::string& err);
  /// One SEND of n <= kMaxMessage bytes; waits for its completion.
  bool send_wait(const void* p, size_t n, uint32_t timeout_s, std::string& err);
  /// Waits for the next message and copies its first n bytes to out.
  bool recv_wait(void* out, size_t n, uint32_t timeout_s, std::string& err);
  /// rdma_disconnect: DREQ, then waits up to timeout_ms for the DREP.
  void disconnect(uint32_t timeout_ms);

 private:
  bool make_qp(CmId* id, std::string& err);
  bool post_one_recv();

  Endpoint& ep_;
  Cq* scq_ = nullptr;
  Cq* rcq_ = nullptr;
  Mr* mr_ = nullptr;
  CmId* id_ = nullptr;
  uint8_t buf_[2 * kMaxMessage] = {};  // the send slot, then the receive slot (one MR)
  uint8_t* send_buf() { return buf_; }
  uint8_t* recv_buf() { return buf_ + kMaxMessage; }
};

}  // namespace uroce::apps
