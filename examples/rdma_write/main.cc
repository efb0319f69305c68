/* SPDX-License-Identifier: BSD-3-Clause
 *
 * rdma_write: one RDMA WRITE between two processes on a DPDK net_memif link,
 * run-to-completion (the lcore that posts also polls the engine).
 *
 *   server: registers a buffer the peer may write, tells the client where it
 *           is (QPN, PSN, R_Key, address), then polls the engine (which ACKs
 *           the WRITE) until the client says it is done, and checks the bytes.
 *   client: registers a source buffer, posts one signaled RDMA WRITE of it to
 *           the server's buffer, polls the engine until the completion comes.
 *
 * Usage: rdma_write [EAL args] -- --role server|client --socket PATH [--bytes N]
 * See README.md.
 */
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <uroce/dpdk/dpdk_io.h>
#include <uroce/dpdk/eal_args.h>
#include <uroce/dpdk/tsc_clock.h>
#include <uroce/verbs.h>
#include <uroce/version.h>
#include <uroce/wr.h>

#include "../common/rc_connect.h"

using namespace uroce;

namespace {

uint8_t pattern(size_t i) { return uint8_t(i * 7 + 1); }

void usage() {
  std::printf(
      "usage: rdma_write [EAL args] -- --role server|client --socket PATH [--bytes N]\n"
      "  --role      server (the target of the WRITE) or client (posts it)\n"
      "  --socket    memif control socket path; PATH.oob is the out-of-band socket\n"
      "  --bytes     message size, default 65536\n");
}

}  // namespace

int main(int argc, char** argv) {
  /* DPDK convention: EAL arguments before "--", ours after it. */
  const auto split = dpdk::split_eal_args(argc, argv);
  std::string role, sock;
  uint32_t bytes = 65536;
  for (size_t i = 0; i < split.app.size(); ++i) {
    const std::string& a = split.app[i];
    const bool has_value = i + 1 < split.app.size();
    if (a == "--role" && has_value) role = split.app[++i];
    else if (a == "--socket" && has_value) sock = split.app[++i];
    else if (a == "--bytes" && has_value) bytes = uint32_t(std::strtoul(split.app[++i].c_str(), nullptr, 0));
    else if (a == "--help" || a == "-h") return usage(), 0;
    else return usage(), 2;
  }
  if ((role != "server" && role != "client") || sock.empty() || bytes == 0) return usage(), 2;
  const bool server = role == "server";
  example::check(dpdk::init_eal_from_args(split), "EAL");
  std::printf("rdma_write %s: uroce %s, %u bytes\n", role.c_str(), UROCE_VERSION_STRING, bytes);

  /* The port: one end of a memif link, one queue pair, polled by this lcore. */
  /* Start-up order: the server opens its memif port (listening) and then the
   * out-of-band socket; the client waits for that socket before it opens its port. */
  const std::string oob_path = sock + ".oob";
  if (!server && !example::oob_wait(oob_path)) return std::fprintf(stderr, "no server on %s\n", oob_path.c_str()), 1;
  dpdk::DpdkPortConfig pc;
  pc.device = "net_memif0,role=" + role + ",socket=" + sock + ",socket-abstract=no";
  pc.link_timeout_ms = server ? 0 : 20000;
  auto port = example::must(dpdk::DpdkPort::open(pc), "port");
  const int listen_fd = server ? example::oob_listen(oob_path) : -1;
  example::check(port->wait_link(20000), "memif link");

  /* The device: its address (GID index 0) and the verbs objects. */
  DeviceConfig dc;
  const uint8_t ip[4] = {10, 0, 0, uint8_t(server ? 1 : 2)};
  dc.gid = Gid::from_ipv4(ip);
  ContextPtr ctx = example::must(open_device(port->queue(0), dc), "open_device");
  Pd* pd = example::must(alloc_pd(ctx.get()), "alloc_pd");
  Cq* cq = example::must(create_cq(ctx.get(), 16), "create_cq");
  std::vector<uint8_t> buf(bytes, 0);
  if (!server) {
    for (size_t i = 0; i < bytes; ++i) buf[i] = pattern(i);
  }
  Mr* mr = example::must(reg_mr(pd, buf.data(), bytes, kAccessLocalWrite | kAccessRemoteWrite), "reg_mr");
  QpInitAttr ia;
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.cap.max_send_wr = 16;
  ia.cap.max_recv_wr = 16;
  ia.qp_type = QpType::kRc;
  Qp* qp = example::must(create_qp(pd, ia), "create_qp");

  /* Out of band: QPN, first PSN, the buffer, MAC and GID. */
  example::PeerInfo mine{}, peer{};
  mine.qpn = qp->qp_num;
  mine.psn = server ? 0x000100 : 0x000200;
  mine.rkey = mr->rkey;
  mine.length = bytes;
  mine.addr = reinterpret_cast<uintptr_t>(buf.data());
  std::memcpy(mine.mac, port->info().mac.b, 6);
  std::memcpy(mine.gid, dc.gid.raw, 16);
  const int oob = example::exchange(listen_fd, oob_path, &mine, &peer);
  if (oob < 0) return 1;
  example::check(example::connect_rc(qp, mine, peer, Mtu::k1024), "connect QP");
  std::printf("%s: QPN 0x%06x connected to QPN 0x%06x\n", role.c_str(), qp->qp_num, peer.qpn);

  dpdk::TscClock clock;
  int rc = 0;
  if (server) {
    /* Run to completion: poll the engine (it places the WRITE and ACKs it)
     * until the client's "done" byte arrives. */
    while (!example::poll_done(oob)) poll(ctx.get(), clock.now_ns());
    size_t bad = 0;
    for (size_t i = 0; i < bytes; ++i) bad += buf[i] != pattern(i);
    std::printf("server: %u bytes written by the peer, %s\n", bytes, bad ? "MISMATCH" : "verified");
    rc = bad ? 1 : 0;
  } else {
    Sge sge{reinterpret_cast<uintptr_t>(buf.data()), bytes, mr->lkey};
    SendWr wr = write_wr(1, &sge, peer.addr, peer.rkey).signaled();
    SendWr* bad_wr = nullptr;
    const uint64_t t0 = clock.now_ns();
    example::check(post_send(qp, &wr, &bad_wr), "post_send");
    Wc wc{};
    while (poll_cq(cq, 1, &wc) == 0) poll(ctx.get(), clock.now_ns());
    const double us = double(clock.now_ns() - t0) / 1e3;
    std::printf("client: RDMA WRITE of %u bytes: %s in %.1f us\n", bytes, wc_status_str(wc.status), us);
    rc = wc.status == WcStatus::kSuccess ? 0 : 1;
    if (!example::client_done(oob)) rc = 1;
  }
  const Counters& c = query_counters(ctx.get());
  std::printf("%s: sent_pkts %llu rcvd_pkts %llu ack_sent %llu retransmits %llu\n", role.c_str(),
              (unsigned long long)c.get(Counter::sent_pkts), (unsigned long long)c.get(Counter::rcvd_pkts),
              (unsigned long long)c.get(Counter::ack_sent), (unsigned long long)c.get(Counter::retransmits));
  close(oob);
  example::check(destroy_qp(qp), "destroy_qp");
  example::check(dereg_mr(mr), "dereg_mr");
  example::check(destroy_cq(cq), "destroy_cq");
  example::check(dealloc_pd(pd), "dealloc_pd");
  ctx.reset();
  port.reset();
  return rc;
}
