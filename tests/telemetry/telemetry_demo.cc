// A running uroce process for the telemetry test (tests/telemetry/telemetry_test.py):
// two devices in one process, each on one end of a net_memif link, with an RC QP
// pair between them. It runs RDMA WRITEs (and one READ) to completion, prints
// what it knows (QPNs, PSNs, counters) as "key=value" lines and "READY", then
// keeps polling both devices, so the QPs stay in RTS and telemetry can be
// read, until its standard input closes.
//
// Usage: uroce-telemetry-demo [EAL args] -- SOCKET_PATH WRITES
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <uroce/cc.h>
#include <uroce/verbs.h>
#include <uroce/wr.h>

#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/eal_args.h"
#include "drivers/dpdk/tsc_clock.h"

using namespace uroce;

namespace {

[[noreturn]] void die(const char* what, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", what, s.message());
  std::exit(1);
}
template <typename T>
T must(Result<T> r, const char* what) {
  if (!r.ok()) die(what, r.status());
  return std::move(r).value();
}

struct Side {
  std::unique_ptr<dpdk::DpdkPort> port;
  ContextPtr ctx;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Mr* mr = nullptr;
  Qp* qp = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 16);
  Gid gid;
};

void open_side(Side& s, const std::string& spec, uint8_t ip_last, bool wait_link) {
  dpdk::DpdkPortConfig pc;
  pc.device = spec;
  pc.link_timeout_ms = wait_link ? 10000 : 0;
  s.port = must(dpdk::DpdkPort::open(pc), "port");
  DeviceConfig dc;
  const uint8_t ip[4] = {10, 0, 0, ip_last};
  s.gid = dc.gid = Gid::from_ipv4(ip);
  dc.cc.algorithm = CcAlgorithm::kDcqcn;  // DCQCN state in /uroce/cc (no CNP here: the link marks nothing)
  dc.ecn = true;
  s.ctx = must(open_device(s.port->queue(0), dc), "open_device");
  s.pd = must(alloc_pd(s.ctx.get()), "alloc_pd");
  s.cq = must(create_cq(s.ctx.get(), 64), "create_cq");
  s.mr = must(reg_mr(s.pd, s.buf.data(), s.buf.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead),
              "reg_mr");
  QpInitAttr ia;
  ia.send_cq = s.cq;
  ia.recv_cq = s.cq;
  ia.cap.max_send_wr = 64;
  ia.cap.max_recv_wr = 16;
  s.qp = must(create_qp(s.pd, ia), "create_qp");
}

void connect(Side& s, const Side& peer, uint32_t my_psn, uint32_t peer_psn) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
  if (Status st = modify_qp(s.qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags); !st.ok()) die("INIT", st);
  a = {};
  a.qp_state = QpState::kRtr;
  a.path_mtu = Mtu::k1024;
  a.dest_qp_num = peer.qp->qp_num;
  a.rq_psn = peer_psn;
  a.ah_attr.dgid = peer.gid;
  a.ah_attr.dmac = peer.port->info().mac;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 1;
  if (Status st = modify_qp(s.qp, a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer);
      !st.ok()) {
    die("RTR", st);
  }
  a = {};
  a.qp_state = QpState::kRts;
  a.sq_psn = my_psn;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  if (Status st = modify_qp(s.qp, a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic);
      !st.ok()) {
    die("RTS", st);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto split = dpdk::split_eal_args(argc, argv);
  if (split.app.size() != 2) {
    std::fprintf(stderr, "usage: uroce-telemetry-demo [EAL args] -- SOCKET_PATH WRITES\n");
    return 2;
  }
  if (Status st = dpdk::init_eal_from_args(split); !st.ok()) die("EAL", st);
  const std::string sock = split.app[0];
  const uint32_t writes = uint32_t(std::strtoul(split.app[1].c_str(), nullptr, 0));
  Side a, b;
  open_side(a, "net_memif0,role=server,socket=" + sock + ",socket-abstract=no", 1, false);
  open_side(b, "net_memif1,role=client,socket=" + sock + ",socket-abstract=no", 2, true);
  if (Status st = a.port->wait_link(10000); !st.ok()) die("link", st);
  constexpr uint32_t kPsnA = 0x00abc0, kPsnB = 0xfffff0;  // B's PSNs wrap through 0xffffff
  connect(a, b, kPsnA, kPsnB);
  connect(b, a, kPsnB, kPsnA);

  dpdk::TscClock clock;
  auto pump = [&] {
    poll(a.ctx.get(), clock.now_ns());
    poll(b.ctx.get(), clock.now_ns());
  };
  // B writes 4 KiB (4 packets at MTU 1024) `writes` times into A, then reads 2 KiB back.
  for (uint32_t i = 0; i <= writes; ++i) {
    const bool read = i == writes;
    Sge sge{reinterpret_cast<uintptr_t>(b.buf.data()), read ? 2048u : 4096u, b.mr->lkey};
    const uint64_t remote = reinterpret_cast<uintptr_t>(a.buf.data());
    SendWr wr = (read ? read_wr(i, &sge, remote, a.mr->rkey) : write_wr(i, &sge, remote, a.mr->rkey)).signaled();
    SendWr* bad = nullptr;
    if (Status st = post_send(b.qp, &wr, &bad); !st.ok()) die("post_send", st);
    Wc wc{};
    while (poll_cq(b.cq, 1, &wc) == 0) pump();
    if (wc.status != WcStatus::kSuccess) {
      std::fprintf(stderr, "completion %u: %s\n", i, wc_status_str(wc.status));
      return 1;
    }
  }
  for (int i = 0; i < 1000; ++i) pump();  // let the last ACKs settle
  std::printf("pid=%d\nqpn_a=%u\nqpn_b=%u\npsn_a=%u\npsn_b=%u\n", int(getpid()), a.qp->qp_num, b.qp->qp_num, kPsnA,
              kPsnB);
  std::printf("a_rcvd_pkts=%llu\nb_sent_pkts=%llu\n",
              (unsigned long long)query_counters(a.ctx.get()).get(Counter::rcvd_pkts),
              (unsigned long long)query_counters(b.ctx.get()).get(Counter::sent_pkts));
  std::printf("READY\n");
  std::fflush(stdout);
  pollfd pfd{0, POLLIN, 0};
  while (::poll(&pfd, 1, 0) == 0) pump();
  return 0;
}
