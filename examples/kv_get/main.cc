/* SPDX-License-Identifier: BSD-3-Clause
 *
 * kv_get: key-value GETs over RDMA READ, issued by application threads that
 * post through the engine's queues (uroce::EngineChannel).
 *
 *   server: keeps a table of fixed-size slots {key, value} in registered
 *           memory and does nothing per GET: the RNIC role (here its uroce
 *           engine, polled run-to-completion) answers each RDMA READ.
 *   client: one engine (an EngineGroup of one) polls the port on an EAL worker
 *           lcore (EngineLauncher); --threads application threads (plain
 *           std::threads, not lcores), each with its own RC QP, CQ and
 *           EngineChannel, GET keys by reading their slot with RDMA READ and
 *           check what comes back. The threads never touch the verbs objects:
 *           the channel's lock-free rings carry their work requests to the
 *           engine and the completions back.
 *
 * Usage: kv_get [EAL args] -- --role server|client --socket PATH [--threads T] [--gets G]
 * The client needs two lcores in its EAL arguments (e.g. -l 0-1). See README.md.
 */
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <uroce/dpdk/dpdk_io.h>
#include <uroce/dpdk/eal_args.h>
#include <uroce/dpdk/engine_launcher.h>
#include <uroce/dpdk/tsc_clock.h>
#include <uroce/engine_group.h>
#include <uroce/verbs.h>
#include <uroce/version.h>
#include <uroce/wr.h>

#include "../common/rc_connect.h"

using namespace uroce;

namespace {

constexpr uint32_t kSlots = 1024;  // table size; key k lives in slot k % kSlots
constexpr uint32_t kMaxThreads = 8;

struct Slot {  // 64 bytes: one RDMA READ per GET
  uint64_t key;
  char value[56];
};
static_assert(sizeof(Slot) == 64);

/* The key the server stores in slot s (so that some GETs miss). */
uint64_t stored_key(uint64_t s) { return s + kSlots * (s % 3); }
void value_of(uint64_t key, char* out) { std::snprintf(out, sizeof(Slot::value), "value-of-key-%llu", (unsigned long long)key); }

void usage() {
  std::printf(
      "usage: kv_get [EAL args] -- --role server|client --socket PATH [--threads T] [--gets G]\n"
      "  --role      server (holds the table) or client (GETs with RDMA READ)\n"
      "  --socket    memif control socket path; PATH.oob is the out-of-band socket\n"
      "  --threads   client application threads, 1..%u, default 2\n"
      "  --gets      GETs per thread, default 1000\n",
      kMaxThreads);
}

struct GetStats {
  uint32_t verified = 0;  // the slot read back is the one the server wrote
  uint32_t hits = 0;      // ... and holds the key asked for
};

/* One application thread: GETs keys tid, tid + T, ... by RDMA READ of their
 * slot into its own 64-byte landing area, one at a time, through ch. */
GetStats get_loop(EngineChannel& ch, Qp* qp, uint32_t lkey, Slot* landing, const example::PeerInfo& table,
                  uint32_t tid, uint32_t threads, uint32_t gets) {
  GetStats st;
  for (uint32_t g = 0; g < gets; ++g) {
    const uint64_t key = (uint64_t(g) * threads + tid) % (kSlots * 4);
    Sge sge{reinterpret_cast<uintptr_t>(landing), sizeof(Slot), lkey};
    const SendWr wr = read_wr(key, &sge, table.addr + (key % kSlots) * sizeof(Slot), table.rkey).signaled();
    while (!ch.post_send(qp, wr).ok()) std::this_thread::yield();  // ring full: the engine drains it
    ChannelWc cwc;
    while (ch.poll_cq(&cwc, 1) == 0) std::this_thread::yield();
    if (cwc.wc.status != WcStatus::kSuccess || cwc.wc.wr_id != key) {
      std::fprintf(stderr, "GET %llu: %s\n", (unsigned long long)key, wc_status_str(cwc.wc.status));
      continue;
    }
    char want[sizeof(Slot::value)];
    value_of(stored_key(key % kSlots), want);
    if (landing->key == stored_key(key % kSlots) && std::strcmp(landing->value, want) == 0) {
      ++st.verified;
      st.hits += landing->key == key;  // a miss: the slot holds another key
    }
  }
  return st;
}

}  // namespace

int main(int argc, char** argv) {
  const auto split = dpdk::split_eal_args(argc, argv);
  std::string role, sock;
  uint32_t threads = 2, gets = 1000;
  for (size_t i = 0; i < split.app.size(); ++i) {
    const std::string& a = split.app[i];
    const bool has_value = i + 1 < split.app.size();
    if (a == "--role" && has_value) role = split.app[++i];
    else if (a == "--socket" && has_value) sock = split.app[++i];
    else if (a == "--threads" && has_value) threads = uint32_t(std::strtoul(split.app[++i].c_str(), nullptr, 0));
    else if (a == "--gets" && has_value) gets = uint32_t(std::strtoul(split.app[++i].c_str(), nullptr, 0));
    else if (a == "--help" || a == "-h") return usage(), 0;
    else return usage(), 2;
  }
  if ((role != "server" && role != "client") || sock.empty() || threads == 0 || threads > kMaxThreads) {
    return usage(), 2;
  }
  const bool server = role == "server";
  example::check(dpdk::init_eal_from_args(split), "EAL");
  std::printf("kv_get %s: uroce %s, %u threads x %u GETs\n", role.c_str(), UROCE_VERSION_STRING, threads, gets);

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

  DeviceConfig dc;
  const uint8_t ip[4] = {10, 0, 0, uint8_t(server ? 1 : 2)};
  dc.gid = Gid::from_ipv4(ip);
  /* An engine group of one engine on the port's queue 0. The server polls
   * it itself; the client hands it to an EngineLauncher. */
  PacketIo* queues[1] = {&port->queue(0)};
  auto group = example::must(EngineGroup::open(queues, dc), "EngineGroup::open");
  Context* engine = group->engine(0);
  Pd* pd = example::must(alloc_pd(engine), "alloc_pd");

  /* Server: the table. Client: one 64-byte landing slot per thread. */
  std::vector<Slot> mem(server ? kSlots : threads);
  if (server) {
    for (uint64_t k = 0; k < kSlots; ++k) {
      mem[k].key = stored_key(k);
      value_of(mem[k].key, mem[k].value);
    }
  }
  Mr* mr = example::must(reg_mr(pd, mem.data(), mem.size() * sizeof(Slot), kAccessLocalWrite | kAccessRemoteRead),
                         "reg_mr");

  /* One RC QP (and CQ) per client thread; the server has as many. */
  std::vector<Qp*> qps(threads);
  std::vector<Cq*> cqs(threads);
  std::vector<example::PeerInfo> mine(threads), peer(threads);
  for (uint32_t t = 0; t < threads; ++t) {
    cqs[t] = example::must(create_cq(engine, 64), "create_cq");
    QpInitAttr ia;
    ia.send_cq = cqs[t];
    ia.recv_cq = cqs[t];
    ia.cap.max_send_wr = 64;
    ia.cap.max_recv_wr = 16;
    qps[t] = example::must(group->create_qp(pd, ia), "create_qp");
    mine[t] = {};
    mine[t].qpn = qps[t]->qp_num;
    mine[t].psn = (server ? 0x1000 : 0x2000) + t;
    mine[t].rkey = mr->rkey;
    mine[t].length = uint32_t(mem.size() * sizeof(Slot));
    mine[t].addr = reinterpret_cast<uintptr_t>(mem.data());
    std::memcpy(mine[t].mac, port->info().mac.b, 6);
    std::memcpy(mine[t].gid, dc.gid.raw, 16);
  }
  const int oob = example::exchange(listen_fd, oob_path, mine.data(), peer.data(), threads);
  if (oob < 0) return 1;
  for (uint32_t t = 0; t < threads; ++t) example::check(example::connect_rc(qps[t], mine[t], peer[t], Mtu::k1024), "connect QP");

  int rc = 0;
  if (server) {
    dpdk::TscClock clock;
    while (!example::poll_done(oob)) group->poll(0, clock.now_ns());
    // Every frame the client sends is a READ Request. One that arrives again
    // (the client's ACK timer fired first, e.g. on a busy machine) is a
    // duplicate: answered again from the responder resource, not executed twice.
    const Counters& c = query_counters(engine);
    const uint64_t dups = c.get(Counter::duplicate_request);
    std::printf("server: answered %llu RDMA READ requests (%llu duplicates answered again)\n",
                (unsigned long long)(c.get(Counter::rcvd_pkts) - dups), (unsigned long long)dups);
  } else {
    /* Channels are attached before the engine starts (control path). */
    std::vector<std::unique_ptr<EngineChannel>> chans;
    for (uint32_t t = 0; t < threads; ++t) {
      chans.push_back(std::make_unique<EngineChannel>());
      chans[t]->watch_cq(cqs[t]);
      group->attach(0, *chans[t]);
    }
    dpdk::EngineLauncher launcher(*group);
    example::check(launcher.start(dpdk::EngineLauncher::worker_lcores(1)), "start the engine lcore (EAL needs -l with 2 lcores)");
    std::vector<GetStats> ok(threads);
    std::vector<std::thread> app;
    const uint64_t t0 = launcher.clock().now_ns();
    for (uint32_t t = 0; t < threads; ++t) {
      app.emplace_back([&, t] {
        ok[t] = get_loop(*chans[t], qps[t], mr->lkey, &mem[t], peer[0], t, threads, gets);
      });
    }
    for (auto& th : app) th.join();
    const double secs = double(launcher.clock().now_ns() - t0) / 1e9;
    example::check(launcher.stop(), "engine");
    uint32_t total = 0;
    for (uint32_t t = 0; t < threads; ++t) {
      std::printf("client: thread %u: %u/%u GETs verified (%u hits, %u misses)\n", t, ok[t].verified, gets,
                  ok[t].hits, ok[t].verified - ok[t].hits);
      total += ok[t].verified;
    }
    const EngineStats& st = group->stats(0);
    std::printf("client: %u/%u GETs verified, %.0f GET/s; engine: %llu posts from channels, %llu completions to them\n",
                total, threads * gets, double(threads * gets) / secs, (unsigned long long)st.chan_posts,
                (unsigned long long)st.chan_cqes);
    rc = total == threads * gets ? 0 : 1;
    if (!example::client_done(oob)) rc = 1;
  }
  close(oob);
  for (uint32_t t = 0; t < threads; ++t) {
    example::check(destroy_qp(qps[t]), "destroy_qp");
    example::check(destroy_cq(cqs[t]), "destroy_cq");
  }
  example::check(dereg_mr(mr), "dereg_mr");
  example::check(dealloc_pd(pd), "dealloc_pd");
  group.reset();
  port.reset();
  return rc;
}
