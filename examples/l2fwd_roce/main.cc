/* SPDX-License-Identifier: BSD-3-Clause
 *
 * l2fwd_roce: an application that forwards its own packets and carries uroce
 * on the same port, in the style of DPDK's l2fwd (MAC-swapping reflector).
 *
 * The uroce engine owns the port's RX queue: each poll() takes a burst,
 * handles the RoCE frames (and answers ARP / IPv6 ND / ICMP echo for its
 * GIDs) and keeps every other frame for the application, which takes them
 * with rx_non_roce() (DeviceConfig::app_rx_ring) and sends frames of its own
 * with the queue's tx_burst, on the same lcore: run-to-completion, no locks.
 *
 *   server: reflects every non-RoCE frame back to its sender (swapping the
 *           Ethernet addresses, as l2fwd does with --mac-updating) while it is
 *           the target of the client's RDMA WRITEs.
 *   client: sends --frames frames of its own (EtherType 0x88B5, IEEE 802
 *           local experimental, carrying a sequence number) interleaved with
 *           --writes RDMA WRITEs, and counts the reflected frames it gets back
 *           through rx_non_roce() and the WRITE completions.
 *
 * Usage: l2fwd_roce [EAL args] -- --role server|client --socket PATH [--frames N] [--writes N]
 * See README.md.
 */
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
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

constexpr uint16_t kEtherTypeExperimental = 0x88B5;
constexpr uint16_t kBurst = 32;
constexpr uint32_t kWriteBytes = 4096;

void usage() {
  std::printf(
      "usage: l2fwd_roce [EAL args] -- --role server|client --socket PATH [--frames N] [--writes N]\n"
      "  --role      server (reflects frames, RDMA WRITE target) or client (sends both)\n"
      "  --socket    memif control socket path; PATH.oob is the out-of-band socket\n"
      "  --frames    client: own frames to send, default 1000\n"
      "  --writes    client: RDMA WRITEs of %u bytes to post, default 100\n",
      kWriteBytes);
}

/* Server: swaps source and destination MAC (l2fwd's MAC updating, pointed
 * back at the sender) and sends the burst out again; frees what the port
 * refuses. Returns the number sent. */
uint16_t reflect(PacketIo& io, rte_mbuf** m, uint16_t n) {
  for (uint16_t i = 0; i < n; ++i) {
    auto* eth = rte_pktmbuf_mtod(m[i], rte_ether_hdr*);
    std::swap(eth->src_addr, eth->dst_addr);
  }
  const uint16_t sent = io.tx_burst(m, n);
  for (uint16_t i = sent; i < n; ++i) rte_pktmbuf_free(m[i]);
  return sent;
}

/* Client: one frame of its own, 60 bytes, sequence number in the payload. */
rte_mbuf* own_frame(PacketIo& io, const uint8_t dst[6], uint32_t seq) {
  rte_mbuf* m = rte_pktmbuf_alloc(io.tx_pool());
  if (!m) return nullptr;
  char* p = rte_pktmbuf_append(m, 60);
  if (!p) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  std::memset(p, 0, 60);
  auto* eth = reinterpret_cast<rte_ether_hdr*>(p);
  std::memcpy(eth->dst_addr.addr_bytes, dst, 6);
  std::memcpy(eth->src_addr.addr_bytes, io.mac().b, 6);
  eth->ether_type = rte_cpu_to_be_16(kEtherTypeExperimental);
  std::memcpy(eth + 1, &seq, sizeof seq);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  const auto split = dpdk::split_eal_args(argc, argv);
  std::string role, sock;
  uint32_t frames = 1000, writes = 100;
  for (size_t i = 0; i < split.app.size(); ++i) {
    const std::string& a = split.app[i];
    const bool has_value = i + 1 < split.app.size();
    if (a == "--role" && has_value) role = split.app[++i];
    else if (a == "--socket" && has_value) sock = split.app[++i];
    else if (a == "--frames" && has_value) frames = uint32_t(std::strtoul(split.app[++i].c_str(), nullptr, 0));
    else if (a == "--writes" && has_value) writes = uint32_t(std::strtoul(split.app[++i].c_str(), nullptr, 0));
    else if (a == "--help" || a == "-h") return usage(), 0;
    else return usage(), 2;
  }
  if ((role != "server" && role != "client") || sock.empty()) return usage(), 2;
  const bool server = role == "server";
  example::check(dpdk::init_eal_from_args(split), "EAL");
  std::printf("l2fwd_roce %s: uroce %s\n", role.c_str(), UROCE_VERSION_STRING);

  const std::string oob_path = sock + ".oob";
  if (!server && !example::oob_wait(oob_path)) return std::fprintf(stderr, "no server on %s\n", oob_path.c_str()), 1;
  dpdk::DpdkPortConfig pc;
  pc.device = "net_memif0,role=" + role + ",socket=" + sock + ",socket-abstract=no";
  pc.link_timeout_ms = server ? 0 : 20000;
  auto port = example::must(dpdk::DpdkPort::open(pc), "port");
  const int listen_fd = server ? example::oob_listen(oob_path) : -1;
  example::check(port->wait_link(20000), "memif link");
  PacketIo& io = port->queue(0);

  DeviceConfig dc;
  const uint8_t ip[4] = {10, 0, 0, uint8_t(server ? 1 : 2)};
  dc.gid = Gid::from_ipv4(ip);
  dc.app_rx_ring = 1024;  // keep non-RoCE frames for rx_non_roce() instead of dropping them
  ContextPtr ctx = example::must(open_device(io, dc), "open_device");
  Pd* pd = example::must(alloc_pd(ctx.get()), "alloc_pd");
  Cq* cq = example::must(create_cq(ctx.get(), 256), "create_cq");
  std::vector<uint8_t> buf(kWriteBytes, server ? 0 : 0x5a);
  Mr* mr = example::must(reg_mr(pd, buf.data(), buf.size(), kAccessLocalWrite | kAccessRemoteWrite), "reg_mr");
  QpInitAttr ia;
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.cap.max_send_wr = 128;
  ia.cap.max_recv_wr = 16;
  Qp* qp = example::must(create_qp(pd, ia), "create_qp");
  example::PeerInfo mine{}, peer{};
  mine.qpn = qp->qp_num;
  mine.psn = server ? 0x10 : 0x20;
  mine.rkey = mr->rkey;
  mine.length = kWriteBytes;
  mine.addr = reinterpret_cast<uintptr_t>(buf.data());
  std::memcpy(mine.mac, io.mac().b, 6);
  std::memcpy(mine.gid, dc.gid.raw, 16);
  const int oob = example::exchange(listen_fd, oob_path, &mine, &peer);
  if (oob < 0) return 1;
  example::check(example::connect_rc(qp, mine, peer, Mtu::k1024), "connect QP");

  dpdk::TscClock clock;
  rte_mbuf* burst[kBurst];
  int rc = 0;
  if (server) {
    uint64_t reflected = 0;
    while (!example::poll_done(oob)) {
      poll(ctx.get(), clock.now_ns());                           // RoCE in and out
      const uint16_t n = rx_non_roce(ctx.get(), burst, kBurst);  // the rest is ours
      if (n) reflected += reflect(io, burst, n);
    }
    const Counters& c = query_counters(ctx.get());
    std::printf("server: reflected %llu frames of the application; uroce: %llu RDMA WRITE packets received, %llu ACKs sent\n",
                (unsigned long long)reflected, (unsigned long long)c.get(Counter::rcvd_pkts) - c.get(Counter::rx_to_app),
                (unsigned long long)c.get(Counter::ack_sent));
  } else {
    Sge sge{reinterpret_cast<uintptr_t>(buf.data()), kWriteBytes, mr->lkey};
    SendWr wr = write_wr(0, &sge, peer.addr, peer.rkey).signaled();
    uint32_t sent = 0, posted = 0, completed = 0, failed = 0;
    std::vector<uint8_t> seen(frames, 0);
    uint32_t back = 0;
    const uint64_t deadline = clock.now_ns() + 20'000'000'000ull;
    while ((back < frames || completed < writes) && clock.now_ns() < deadline) {
      if (sent < frames) {  // a frame of our own, on the same queue the engine uses
        if (rte_mbuf* m = own_frame(io, peer.mac, sent)) {
          if (io.tx_burst(&m, 1) == 1) ++sent;
          else rte_pktmbuf_free(m);
        }
      }
      if (posted < writes && posted - completed < 64) {  // and an RDMA WRITE
        wr.wr_id = posted;
        SendWr* bad = nullptr;
        if (post_send(qp, &wr, &bad).ok()) ++posted;
      }
      poll(ctx.get(), clock.now_ns());
      Wc wc[16];
      for (int k = poll_cq(cq, 16, wc), j = 0; j < k; ++j) {
        ++completed;
        failed += wc[j].status != WcStatus::kSuccess;
      }
      for (uint16_t n = rx_non_roce(ctx.get(), burst, kBurst), j = 0; j < n; ++j) {
        const auto* eth = rte_pktmbuf_mtod(burst[j], const rte_ether_hdr*);
        uint32_t seq = 0;
        std::memcpy(&seq, eth + 1, sizeof seq);
        if (eth->ether_type == rte_cpu_to_be_16(kEtherTypeExperimental) && seq < frames && !seen[seq]) {
          seen[seq] = 1;
          ++back;
        }
        rte_pktmbuf_free(burst[j]);
      }
    }
    std::printf("client: %u/%u own frames came back through rx_non_roce(); %u/%u RDMA WRITEs completed, %u failed\n",
                back, frames, completed - failed, writes, failed);
    rc = back == frames && completed == writes && failed == 0 ? 0 : 1;
    if (!example::client_done(oob)) rc = 1;
  }
  close(oob);
  example::check(destroy_qp(qp), "destroy_qp");
  example::check(dereg_mr(mr), "dereg_mr");
  example::check(destroy_cq(cq), "destroy_cq");
  example::check(dealloc_pd(pd), "dealloc_pd");
  ctx.reset();
  port.reset();
  return rc;
}
