// uroce-netpeer: a DpdkPort plus a NetStack in a poll loop, for tests/net/
// net_kernel.py: the Linux kernel on the other end of a veth pings the stack
// (IPv4 and IPv6) and the stack resolves the kernel's addresses (ARP and NS).
//
// Usage: uroce-netpeer [EAL args] -- --dev SPEC [--mac M] --addr IP[%VLAN]...
//        [--resolve IP[%VLAN]...] [--seconds S]
//   --addr     an address of ours (GID table entry, RoCEv2), untagged or on VLAN
//   --resolve  a peer address to resolve from our first address of the same
//              family on the same VLAN; prints "resolve ip=... vlan=... status=... mac=..."
//   --seconds  run at most S seconds (default 30); SIGTERM/SIGINT stop earlier
// Prints "ready" once the port is up, and the NetStack counters at the end.
// Exit status: 0 ran, 1 setup failed, 2 usage.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <rte_mbuf.h>

#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/eal_args.h"
#include "stack/net/net_stack.h"

namespace {

using namespace uroce;

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct Addr {
  std::string text;
  Gid gid;
  uint16_t vlan = net::kNoVlan;
};

bool parse_addr(const std::string& s, Addr* a) {
  const size_t pct = s.find('%');
  a->text = s;
  if (pct != std::string::npos) a->vlan = uint16_t(std::strtoul(s.c_str() + pct + 1, nullptr, 10));
  auto g = net::parse_gid(s.substr(0, pct).c_str());
  if (!g) return false;
  a->gid = *g;
  return true;
}

bool parse_mac(const std::string& s, MacAddr* m) {
  unsigned b[6];
  if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) return false;
  for (int i = 0; i < 6; ++i) m->b[i] = uint8_t(b[i]);
  return true;
}

std::string mac_str(const MacAddr& m) {
  char buf[18];
  std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", m.b[0], m.b[1], m.b[2], m.b[3], m.b[4], m.b[5]);
  return buf;
}

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

}  // namespace

int main(int argc, char** argv) {
  const auto split = dpdk::split_eal_args(argc, argv);
  std::string dev;
  std::optional<MacAddr> mac;
  std::vector<Addr> addrs, targets;
  double seconds = 30;
  for (size_t i = 0; i < split.app.size(); ++i) {
    const std::string& a = split.app[i];
    const bool has_val = i + 1 < split.app.size();
    if (a == "--help") {
      std::puts("usage: uroce-netpeer [EAL args] -- --dev SPEC [--mac M] --addr IP[%VLAN]... "
                "[--resolve IP[%VLAN]...] [--seconds S (30)]");
      return 0;
    }
    if (!has_val) {
      std::fprintf(stderr, "missing value for %s\n", a.c_str());
      return 2;
    }
    const std::string v = split.app[++i];
    Addr ad;
    MacAddr m;
    if (a == "--dev") {
      dev = v;
    } else if (a == "--mac" && parse_mac(v, &m)) {
      mac = m;
    } else if (a == "--addr" && parse_addr(v, &ad)) {
      addrs.push_back(ad);
    } else if (a == "--resolve" && parse_addr(v, &ad)) {
      targets.push_back(ad);
    } else if (a == "--seconds") {
      seconds = std::strtod(v.c_str(), nullptr);
    } else {
      std::fprintf(stderr, "bad argument %s %s\n", a.c_str(), v.c_str());
      return 2;
    }
  }
  if (dev.empty() || addrs.empty()) {
    std::fprintf(stderr, "--dev and --addr are required\n");
    return 2;
  }
  if (Status s = dpdk::init_eal_from_args(split); !s.ok()) {
    std::printf("EAL: %s\n", s.message());
    return 1;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  dpdk::DpdkPortConfig cfg;
  cfg.device = dev;
  cfg.mac = mac;
  cfg.mtu = 1500;
  auto port = dpdk::DpdkPort::open(cfg);
  if (!port.ok()) {
    std::printf("open failed: %s\n", port.status().message());
    return 1;
  }
  dpdk::DpdkQueue& q = (*port)->queue(0);
  auto created = net::NetStack::create(net::NetConfig{});
  if (!created.ok()) return 1;
  net::NetStack& ns = **created;
  for (const Addr& a : addrs) {
    auto r = ns.gids().add({a.gid, net::GidType::kRoceV2, a.vlan, q.mac()});
    if (!r.ok()) {
      std::printf("gid %s: %s\n", a.text.c_str(), r.status().message());
      return 1;
    }
  }
  // Source GID per target: our first address of the same family on its VLAN.
  std::vector<int> sgid(targets.size(), -1);
  std::vector<bool> done(targets.size(), false);
  for (size_t t = 0; t < targets.size(); ++t) {
    for (uint8_t i = 0; i < net::GidTable::kSize && sgid[t] < 0; ++i) {
      const net::GidEntry* g = ns.gids().at(i);
      if (g && g->vlan_id == targets[t].vlan && g->gid.is_ipv4_mapped() == targets[t].gid.is_ipv4_mapped()) {
        sgid[t] = i;
      }
    }
  }
  std::printf("ready mac=%s\n", mac_str(q.mac()).c_str());
  std::fflush(stdout);

  const uint64_t end = now_ns() + uint64_t(seconds * 1e9);
  rte_mbuf* rx[dpdk::kBurstSize];
  net::TxStage tx(q.tx_pool(), uint16_t(2 * dpdk::kBurstSize));
  uint64_t not_handled = 0;
  while (!g_stop && now_ns() < end) {
    const uint64_t now = now_ns();
    const uint16_t n = q.rx_burst(rx, dpdk::kBurstSize);
    for (uint16_t i = 0; i < n; ++i) {
      if (!ns.handle(rx[i], now, tx)) ++not_handled;  // the engine would parse it as RoCE
      rte_pktmbuf_free(rx[i]);
    }
    for (size_t t = 0; t < targets.size(); ++t) {
      if (done[t]) continue;
      if (sgid[t] < 0) {
        std::printf("resolve ip=%s status=no_source\n", targets[t].text.c_str());
        done[t] = true;
        continue;
      }
      const net::Resolution r = ns.resolve(targets[t].gid, uint8_t(sgid[t]), now);
      if (r.status == net::ResolveStatus::kPending) continue;
      std::printf("resolve ip=%s status=%s mac=%s\n", targets[t].text.c_str(),
                  r.status == net::ResolveStatus::kResolved ? "resolved" : "failed", mac_str(r.mac).c_str());
      std::fflush(stdout);
      done[t] = true;
    }
    ns.poll(now, tx);
    tx.flush(q);
  }
  std::printf("counters not_handled=%lu", not_handled);
  for (size_t i = 0; i < size_t(net::NetCounter::kCount); ++i) {
    if (ns.counters().v[i]) std::printf(" %s=%lu", std::string(net::kNetCounterNames[i]).c_str(), ns.counters().v[i]);
  }
  std::printf("\n");
  return 0;
}
