/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Helpers shared by the uroce examples (as DPDK's examples/common): the
 * out-of-band exchange of connection parameters over a UNIX-domain socket
 * (the role TCP plays in ibv_rc_pingpong) and the RESET -> INIT -> RTR -> RTS
 * transitions of an RC queue pair (IBA 10.3.1, the attributes of Table 91).
 * Header-only; control path only.
 */
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <uroce/verbs.h>

namespace example {

/* What each side tells the other before the first RoCE frame: its QP, the
 * PSN it starts sending with, the memory the peer may target, and its address. */
struct PeerInfo {
  uint32_t qpn;
  uint32_t psn;
  uint32_t rkey;
  uint32_t length;
  uint64_t addr;
  uint8_t mac[6];
  uint8_t gid[16];
};

/* Server: listens for the out-of-band connection on the UNIX socket at path.
 * Call it after opening the memif port: a client waits for this socket
 * before it opens its own port, so it never probes memif before the server
 * listens (DPDK 22.11's memif client does not retry a refused connect). */
inline int oob_listen(const std::string& path) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
  const int ls = socket(AF_UNIX, SOCK_STREAM, 0);
  unlink(path.c_str());
  if (ls < 0 || bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(ls, 1) != 0) {
    std::perror("oob_listen");
    return -1;
  }
  return ls;
}

/* Client: waits up to timeout_s for the server's out-of-band socket to appear. */
inline bool oob_wait(const std::string& path, int timeout_s = 20) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

/* Exchanges n PeerInfo records with the peer: the server accepts one client
 * on listen_fd (from oob_listen), the client connects to path. Each side sends
 * mine[0..n) and receives peer[0..n). Returns the connected socket (kept open
 * for a "done" byte later) or -1. */
inline int exchange(int listen_fd, const std::string& path, const PeerInfo* mine, PeerInfo* peer, size_t n = 1) {
  int fd = -1;
  if (listen_fd >= 0) {
    fd = accept(listen_fd, nullptr, nullptr);
    close(listen_fd);
    unlink(path.c_str());
  } else {
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      close(fd);
      fd = -1;
    }
  }
  if (fd < 0) {
    std::fprintf(stderr, "exchange: no peer on %s\n", path.c_str());
    return -1;
  }
  const ssize_t len = ssize_t(n * sizeof(PeerInfo));
  if (send(fd, mine, size_t(len), 0) != len || recv(fd, peer, size_t(len), MSG_WAITALL) != len) {
    std::fprintf(stderr, "exchange: the peer went away\n");
    close(fd);
    return -1;
  }
  return fd;
}

/* The end of a run, before either side closes its memif port. DPDK 22.11's
 * memif unmaps the shared rings when the peer disconnects, unsynchronised with
 * a local rx_burst in progress, so neither side may still be polling when the
 * other closes: the client stops polling and sends "done"; the server, which
 * polls until it sees "done" (poll_done), stops polling and answers "bye";
 * only then do both close. */
inline bool poll_done(int fd) {
  char b = 0;
  if (recv(fd, &b, 1, MSG_DONTWAIT) != 1) return false;
  (void)!send(fd, &b, 1, 0);  // "bye"; if the client is gone, it is not polling either
  return true;
}
inline bool client_done(int fd) {
  char b = 1;
  return send(fd, &b, 1, 0) == 1 && recv(fd, &b, 1, MSG_WAITALL) == 1;
}

/* Moves an RC QP from RESET to RTS, connected to peer: INIT (port, P_Key
 * index, remote access), RTR (path: destination QPN, MAC/GID, path MTU, the
 * peer's first PSN; responder resources and RNR timer), RTS (our first PSN,
 * ACK timeout, retry counts, outstanding READ/atomic). */
inline uroce::Status connect_rc(uroce::Qp* qp, const PeerInfo& mine, const PeerInfo& peer, uroce::Mtu mtu) {
  using namespace uroce;
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  if (Status s = modify_qp(qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags); !s.ok()) return s;

  a = {};
  a.qp_state = QpState::kRtr;
  a.path_mtu = mtu;
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn;
  std::memcpy(a.ah_attr.dgid.raw, peer.gid, 16);
  std::memcpy(a.ah_attr.dmac.b, peer.mac, 6);
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = 1;
  if (Status s = modify_qp(qp, a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic |
                                      kQpMinRnrTimer);
      !s.ok()) {
    return s;
  }

  a = {};
  a.qp_state = QpState::kRts;
  a.sq_psn = mine.psn;
  a.timeout = 14;  /* 4.096 us * 2^14 = 67 ms local ACK timeout */
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 16;
  return modify_qp(qp, a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic);
}

/* Fails the program with the status's message. */
inline void check(const uroce::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s (%s)\n", what, s.message(), uroce::status_code_name(s.code()).data());
    std::exit(1);
  }
}
template <typename T>
T must(uroce::Result<T> r, const char* what) {
  check(r.status(), what);
  return std::move(r).value();
}

}  // namespace example
