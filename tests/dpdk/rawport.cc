// uroce-rawport: raw Ethernet frames over a drivers/dpdk port, no transport.
// The processes of tests/dpdk/*.py run it in one of these modes:
//   exchange  send --count frames and receive as many from the peer, checking
//             each one's sequence number and content (memif server/client)
//   arp       ARP request for --target (and with --icmp an ICMP echo) to the
//             Linux kernel on the other end of a veth/tap; check its replies
//   smoke     net_ring: frames come back on every queue, checked; net_null:
//             the bursts work, RSS configures; optional pcap read back
// (The raw memif floor, a frame ping-pong and blast, is `uroce floor`.)
// With --extbuf every frame sent is an mbuf attached to external memory
// (rte_pktmbuf_attach_extbuf): the zero-copy transmit experiment.
//
// Usage: uroce-rawport [EAL args] -- <mode> [--dev SPEC] [options]   (--help)
// Exit status: 0 pass, 1 fail, 2 usage.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#include "drivers/dpdk/dpdk_io.h"
#include "drivers/dpdk/eal_args.h"
#include "stack/wire/checksum.h"
#include "stack/wire/pcap.h"

namespace {

using uroce::MacAddr;
using uroce::dpdk::DpdkPort;
using uroce::dpdk::DpdkPortConfig;
using uroce::dpdk::DpdkQueue;
using uroce::dpdk::kBurstSize;

constexpr uint16_t kEtherTypeTest = 0x88b5;  // IEEE 802 local experimental
constexpr uint16_t kEtherTypeArp = 0x0806;
constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint32_t kMagic = 0x55524f43;      // "UROC"
constexpr size_t kEthHdr = 14;

enum class Kind : uint8_t { kData = 1, kDone = 2 };

// Test payload after the Ethernet header (host byte order: both ends are us).
struct [[gnu::packed]] TestHdr {
  uint32_t magic;
  uint8_t kind;
  uint8_t queue;
  uint16_t len;     // whole frame length
  uint32_t seq;
  uint64_t tsc;
};
constexpr size_t kTestHdrEnd = kEthHdr + sizeof(TestHdr);

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct Options {
  std::string mode;
  std::map<std::string, std::string> kv;
  std::string get(const std::string& k, const std::string& def = "") const {
    auto it = kv.find(k);
    return it == kv.end() ? def : it->second;
  }
  long num(const std::string& k, long def) const {
    auto it = kv.find(k);
    return it == kv.end() ? def : std::strtol(it->second.c_str(), nullptr, 0);
  }
  bool flag(const std::string& k) const { return kv.count(k) != 0; }
};

void usage() {
  std::puts(
      "usage: uroce-rawport [EAL args] -- MODE [options]\n"
      "modes: exchange | arp | smoke\n"
      "  --dev SPEC          device spec (net_memif0,role=server,socket=/tmp/x.sock ...)\n"
      "  --role R            server | client (exchange)                       [client]\n"
      "  --queues N          RX/TX queue pairs                                [1]\n"
      "  --count N           frames per direction / per queue (exchange, smoke) [1000]\n"
      "  --size B            frame bytes incl. Ethernet header                [64]\n"
      "  --mix               exchange: every other frame is 64 bytes          [off]\n"
      "  --mtu M             wanted MTU                                       [4200]\n"
      "  --mac M             MAC to set (kept as the port's if the PMD refuses) [none]\n"
      "  --promisc           enable promiscuous mode                          [off]\n"
      "  --link-timeout-ms T wait for link up                                 [10000]\n"
      "  --timeout-ms T      give up after T ms                               [10000]\n"
      "  --pcap PATH         capture the port to PATH (smoke: read back)      [none]\n"
      "  --extbuf            send frames from external buffers (zero-copy TX) [off]\n"
      "  --ip A --target T   our and the kernel's IPv4 address (arp)\n"
      "  --expect-mac M      the kernel's MAC the ARP reply must carry (arp)  [any]\n"
      "  --icmp              also ping the kernel after ARP (arp)             [off]\n"
      "  --xstats            print the port's xstats at the end               [off]\n");
}

bool parse_mac(const std::string& s, MacAddr* m) {
  unsigned b[6];
  if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) return false;
  for (int i = 0; i < 6; ++i) m->b[i] = uint8_t(b[i]);
  return true;
}

bool parse_ip(const std::string& s, uint8_t ip[4]) {
  unsigned b[4];
  if (std::sscanf(s.c_str(), "%u.%u.%u.%u", &b[0], &b[1], &b[2], &b[3]) != 4) return false;
  for (int i = 0; i < 4; ++i) ip[i] = uint8_t(b[i]);
  return true;
}

std::string mac_str(const MacAddr& m) {
  char buf[18];
  std::snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", m.b[0], m.b[1], m.b[2], m.b[3], m.b[4], m.b[5]);
  return buf;
}

uint64_t now_ms() {
  return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

// ---- external-buffer transmit (zero-copy groundwork) ----------------------
// Each slot is one frame's external buffer with its shared info; the PMD (or
// whoever receives the mbuf, for net_ring) calls ext_free when done with it.
struct ExtSlot {
  alignas(64) uint8_t data[2048];
  rte_mbuf_ext_shared_info shinfo;
  bool busy;
};

struct ExtPool {
  ExtSlot* slots = nullptr;
  uint32_t n = 0;
  uint32_t next = 0;
  rte_iova_t iova = 0;
  uint64_t attached = 0;
  uint64_t freed = 0;
};
ExtPool g_ext;

void ext_free(void* addr, void* opaque) {
  (void)addr;
  auto* slot = static_cast<ExtSlot*>(opaque);
  slot->busy = false;
  ++g_ext.freed;
}

bool ext_init(uint32_t n) {
  g_ext.slots = static_cast<ExtSlot*>(rte_zmalloc("uroce_extbuf", sizeof(ExtSlot) * n, 64));
  g_ext.n = n;
  if (g_ext.slots == nullptr) return false;
  g_ext.iova = rte_malloc_virt2iova(g_ext.slots);
  return true;
}

// ---- frame building ---------------------------------------------------------

uint8_t pattern(uint32_t seq, size_t i) { return uint8_t(seq * 31u + i * 7u + 1u); }

// Allocates a frame of len bytes: a plain pool mbuf, or with --extbuf a data-less
// pool mbuf attached to an external slot. Returns the writable bytes.
rte_mbuf* alloc_frame(rte_mempool* mp, uint16_t len, bool extbuf, uint8_t** data) {
  rte_mbuf* m = rte_pktmbuf_alloc(mp);
  if (m == nullptr) return nullptr;
  if (!extbuf) {
    *data = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, len));
    return m;
  }
  ExtSlot* slot = nullptr;
  for (uint32_t tries = 0; tries < g_ext.n; ++tries) {
    ExtSlot* s = &g_ext.slots[g_ext.next];
    g_ext.next = (g_ext.next + 1) % g_ext.n;
    if (!s->busy) {
      slot = s;
      break;
    }
  }
  if (slot == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  slot->busy = true;
  slot->shinfo.free_cb = ext_free;
  slot->shinfo.fcb_opaque = slot;
  rte_mbuf_ext_refcnt_set(&slot->shinfo, 1);
  // rte_malloc_virt2iova takes the start of an allocation only: offset from it.
  const rte_iova_t iova = g_ext.iova + rte_iova_t(slot->data - reinterpret_cast<uint8_t*>(g_ext.slots));
  rte_pktmbuf_attach_extbuf(m, slot->data, iova, sizeof(slot->data), &slot->shinfo);
  ++g_ext.attached;
  m->data_off = 0;
  *data = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, len));
  return m;
}

void put_eth(uint8_t* p, const MacAddr& dst, const MacAddr& src, uint16_t type) {
  std::memcpy(p, dst.b, 6);
  std::memcpy(p + 6, src.b, 6);
  p[12] = uint8_t(type >> 8);
  p[13] = uint8_t(type);
}

constexpr MacAddr kBroadcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

rte_mbuf* make_test_frame(DpdkQueue& q, uint16_t len, bool extbuf, Kind kind, uint32_t seq) {
  uint8_t* p = nullptr;
  rte_mbuf* m = alloc_frame(q.tx_pool(), len, extbuf, &p);
  if (m == nullptr || p == nullptr) {
    if (m) rte_pktmbuf_free(m);
    return nullptr;
  }
  put_eth(p, kBroadcast, q.mac(), kEtherTypeTest);
  TestHdr h{kMagic, uint8_t(kind), uint8_t(q.queue_id()), len, seq, rte_rdtsc()};
  std::memcpy(p + kEthHdr, &h, sizeof(h));
  for (size_t i = kTestHdrEnd; i < len; ++i) p[i] = pattern(seq, i);
  return m;
}

// Parses a test frame; false if it is not one (other traffic) or corrupt.
bool read_test_frame(const rte_mbuf* m, TestHdr* h, bool* content_ok) {
  if (m->nb_segs != 1 || m->data_len < kTestHdrEnd) return false;
  const uint8_t* p = rte_pktmbuf_mtod(m, const uint8_t*);
  if (((p[12] << 8) | p[13]) != kEtherTypeTest) return false;
  std::memcpy(h, p + kEthHdr, sizeof(*h));
  if (h->magic != kMagic) return false;
  *content_ok = h->len == m->data_len;
  for (size_t i = kTestHdrEnd; *content_ok && i < m->data_len; ++i) *content_ok = p[i] == pattern(h->seq, i);
  return true;
}

// Sends one frame, retrying while the ring is full. False on timeout.
bool send_one(DpdkQueue& q, rte_mbuf* m, uint64_t deadline_ms) {
  while (q.tx_burst(&m, 1) == 0) {
    if (now_ms() > deadline_ms || g_stop) {
      rte_pktmbuf_free(m);
      return false;
    }
  }
  return true;
}

void print_info(const DpdkPort& port) {
  const auto& i = port.info();
  std::printf("port %u name=%s driver=%s queues=%u mtu=%u max_mtu=%u mac=%s mac_applied=%d rss=%d promisc=%d "
              "multiseg=%d\n",
              i.port_id, i.name.c_str(), i.driver.c_str(), i.n_queues, i.mtu, i.max_mtu, mac_str(i.mac).c_str(),
              i.mac_applied, i.rss, i.promiscuous, i.tx_multiseg);
}

void print_stats(const DpdkPort& port, bool xstats) {
  if (auto s = port.stats(); s.ok()) {
    std::printf("stats rx_packets=%lu tx_packets=%lu rx_bytes=%lu tx_bytes=%lu rx_missed=%lu rx_errors=%lu "
                "tx_errors=%lu rx_nombuf=%lu\n",
                s->rx_packets, s->tx_packets, s->rx_bytes, s->tx_bytes, s->rx_missed, s->rx_errors,
                s->tx_errors, s->rx_nombuf);
  }
  if (!xstats) return;
  if (auto xs = port.xstats(); xs.ok()) {
    for (const auto& x : *xs) std::printf("xstat %s=%lu\n", x.name.c_str(), x.value);
  }
}

// ---- exchange ---------------------------------------------------------------
// Both ends send count DATA frames and expect count from the peer, in order.
// Once an end has all of them it sends DONE every ms; it exits when it has all
// frames and the peer's DONE, after lingering 200 ms so the peer sees its DONE.
int run_exchange(DpdkPort& port, const Options& o) {
  DpdkQueue& q = port.queue(0);
  const uint32_t count = uint32_t(o.num("count", 1000));
  const uint16_t size = uint16_t(o.num("size", 64));
  const bool extbuf = o.flag("extbuf");
  const bool mix = o.flag("mix");
  const uint64_t deadline = now_ms() + uint64_t(o.num("timeout-ms", 10000));
  uint32_t sent = 0, received = 0, bad = 0, out_of_order = 0;
  bool peer_done = false;
  uint64_t last_done_ms = 0, finished_ms = 0;
  uroce::PortStats at_finish{};
  rte_mbuf* rx[kBurstSize];
  while (!g_stop) {
    const uint64_t t = now_ms();
    if (t > deadline) break;
    if (sent < count) {
      rte_mbuf* m = make_test_frame(q, mix && (sent & 1) ? uint16_t(64) : size, extbuf, Kind::kData, sent);
      if (m != nullptr) {
        if (q.tx_burst(&m, 1) == 1) {
          ++sent;
        } else {
          rte_pktmbuf_free(m);
        }
      }
    } else if (received == count && t != last_done_ms) {
      rte_mbuf* m = make_test_frame(q, 64, false, Kind::kDone, 0);
      if (m != nullptr && q.tx_burst(&m, 1) == 0) rte_pktmbuf_free(m);
      last_done_ms = t;
    }
    const uint16_t n = q.rx_burst(rx, kBurstSize);
    for (uint16_t i = 0; i < n; ++i) {
      TestHdr h{};
      bool ok = false;
      if (read_test_frame(rx[i], &h, &ok)) {
        if (h.kind == uint8_t(Kind::kDone)) {
          peer_done = true;
        } else if (h.kind == uint8_t(Kind::kData)) {
          if (!ok) ++bad;
          if (h.seq != received) ++out_of_order;
          ++received;
        }
      }
      rte_pktmbuf_free(rx[i]);
    }
    if (sent == count && received >= count && peer_done) {
      if (finished_ms == 0) {
        finished_ms = t;
        // memif clears its queue counters when the peer disconnects: read them now.
        if (auto s = port.stats(); s.ok()) at_finish = *s;
      }
      if (t - finished_ms > 200) break;
    }
  }
  std::printf("exchange sent=%u received=%u expected=%u bad=%u out_of_order=%u peer_done=%d\n", sent, received,
              count, bad, out_of_order, peer_done);
  std::printf("stats_at_finish rx_packets=%lu tx_packets=%lu rx_bytes=%lu tx_bytes=%lu\n", at_finish.rx_packets,
              at_finish.tx_packets, at_finish.rx_bytes, at_finish.tx_bytes);
  print_stats(port, o.flag("xstats"));
  bool pass = sent == count && received == count && bad == 0 && out_of_order == 0 && peer_done;
  if (at_finish.tx_packets < count || at_finish.rx_packets < count) {
    std::printf("FAIL: port stats count fewer frames than were exchanged\n");
    pass = false;
  }
  if (extbuf) {
    std::printf("extbuf attached=%lu freed=%lu\n", g_ext.attached, g_ext.freed);
    pass = pass && g_ext.freed == g_ext.attached;
  }
  return pass ? 0 : 1;
}

// ---- arp / icmp against the Linux kernel ------------------------------------

uint16_t csum16(const uint8_t* p, size_t len) { return uroce::wire::csum_finish(uroce::wire::csum_partial({p, len})); }

rte_mbuf* make_arp_request(DpdkQueue& q, bool extbuf, const uint8_t ip[4], const uint8_t target[4]) {
  uint8_t* p = nullptr;
  rte_mbuf* m = alloc_frame(q.tx_pool(), 60, extbuf, &p);
  if (m == nullptr || p == nullptr) return m;
  std::memset(p, 0, 60);
  put_eth(p, kBroadcast, q.mac(), kEtherTypeArp);
  const uint8_t arp[8] = {0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01};  // Ethernet/IPv4, request
  std::memcpy(p + 14, arp, 8);
  std::memcpy(p + 22, q.mac().b, 6);
  std::memcpy(p + 28, ip, 4);
  std::memcpy(p + 38, target, 4);  // target MAC stays zero
  return m;
}

constexpr size_t kIcmpPayload = 56;

rte_mbuf* make_icmp_echo(DpdkQueue& q, bool extbuf, const MacAddr& dst, const uint8_t ip[4],
                         const uint8_t target[4], uint16_t seq) {
  const uint16_t ip_len = uint16_t(20 + 8 + kIcmpPayload);
  uint8_t* p = nullptr;
  rte_mbuf* m = alloc_frame(q.tx_pool(), uint16_t(kEthHdr + ip_len), extbuf, &p);
  if (m == nullptr || p == nullptr) return m;
  put_eth(p, dst, q.mac(), kEtherTypeIpv4);
  uint8_t* iph = p + kEthHdr;
  std::memset(iph, 0, 20);
  iph[0] = 0x45;
  iph[2] = uint8_t(ip_len >> 8);
  iph[3] = uint8_t(ip_len);
  iph[8] = 64;  // TTL
  iph[9] = 1;   // ICMP
  std::memcpy(iph + 12, ip, 4);
  std::memcpy(iph + 16, target, 4);
  const uint16_t ipc = csum16(iph, 20);
  iph[10] = uint8_t(ipc >> 8);
  iph[11] = uint8_t(ipc);
  uint8_t* ic = iph + 20;
  ic[0] = 8;  // echo request
  ic[1] = 0;
  ic[2] = ic[3] = 0;
  ic[4] = 0x75;  // identifier 0x7572 "ur"
  ic[5] = 0x72;
  ic[6] = uint8_t(seq >> 8);
  ic[7] = uint8_t(seq);
  for (size_t i = 0; i < kIcmpPayload; ++i) ic[8 + i] = pattern(seq, i);
  const uint16_t icc = csum16(ic, 8 + kIcmpPayload);
  ic[2] = uint8_t(icc >> 8);
  ic[3] = uint8_t(icc);
  return m;
}

int run_arp(DpdkPort& port, const Options& o) {
  DpdkQueue& q = port.queue(0);
  uint8_t ip[4], target[4];
  if (!parse_ip(o.get("ip"), ip) || !parse_ip(o.get("target"), target)) {
    std::fprintf(stderr, "arp needs --ip A.B.C.D --target A.B.C.D\n");
    return 2;
  }
  MacAddr expect{};
  const bool check_mac = o.flag("expect-mac");
  if (check_mac && !parse_mac(o.get("expect-mac"), &expect)) {
    std::fprintf(stderr, "bad --expect-mac\n");
    return 2;
  }
  const bool extbuf = o.flag("extbuf");
  const uint64_t deadline = now_ms() + uint64_t(o.num("timeout-ms", 10000));
  rte_mbuf* rx[kBurstSize];
  // 1. ARP: who has target? tell ip (at our MAC). Resent every 200 ms.
  MacAddr kernel_mac{};
  bool have_reply = false;
  uint32_t requests = 0, other_frames = 0;
  uint64_t next_send = 0;
  while (!have_reply && !g_stop && now_ms() < deadline) {
    if (now_ms() >= next_send) {
      rte_mbuf* m = make_arp_request(q, extbuf, ip, target);
      if (m != nullptr && send_one(q, m, deadline)) ++requests;
      next_send = now_ms() + 200;
    }
    const uint16_t n = q.rx_burst(rx, kBurstSize);
    for (uint16_t i = 0; i < n; ++i) {
      const uint8_t* p = rte_pktmbuf_mtod(rx[i], const uint8_t*);
      const bool is_reply = rx[i]->data_len >= 42 && ((p[12] << 8) | p[13]) == kEtherTypeArp && p[20] == 0 &&
                            p[21] == 2 && std::memcmp(p + 28, target, 4) == 0 &&
                            std::memcmp(p + 32, q.mac().b, 6) == 0 && std::memcmp(p + 38, ip, 4) == 0 &&
                            std::memcmp(p, q.mac().b, 6) == 0;
      if (is_reply) {
        std::memcpy(kernel_mac.b, p + 22, 6);
        have_reply = true;
      } else {
        ++other_frames;
      }
      rte_pktmbuf_free(rx[i]);
    }
  }
  std::printf("arp requests=%u reply=%d kernel_mac=%s other_frames=%u\n", requests, have_reply,
              mac_str(kernel_mac).c_str(), other_frames);
  bool pass = have_reply && (!check_mac || kernel_mac == expect);
  if (have_reply && check_mac && !(kernel_mac == expect)) {
    std::printf("FAIL: ARP reply from %s, expected %s\n", mac_str(kernel_mac).c_str(), mac_str(expect).c_str());
  }
  // 2. ICMP echo: the kernel checks our IPv4 and ICMP checksums and echoes the payload.
  if (pass && o.flag("icmp")) {
    const uint16_t pings = uint16_t(o.num("count", 5));
    uint16_t replies = 0;
    for (uint16_t seq = 1; seq <= pings && pass; ++seq) {
      rte_mbuf* m = make_icmp_echo(q, extbuf, kernel_mac, ip, target, seq);
      if (m == nullptr || !send_one(q, m, deadline)) {
        pass = false;
        break;
      }
      bool got = false;
      while (!got && !g_stop && now_ms() < deadline) {
        const uint16_t n = q.rx_burst(rx, kBurstSize);
        for (uint16_t i = 0; i < n; ++i) {
          const uint8_t* p = rte_pktmbuf_mtod(rx[i], const uint8_t*);
          const uint8_t* iph = p + kEthHdr;
          const uint8_t* ic = iph + 20;
          if (rx[i]->data_len >= kEthHdr + 28 + kIcmpPayload && ((p[12] << 8) | p[13]) == kEtherTypeIpv4 &&
              iph[9] == 1 && ic[0] == 0 && ic[4] == 0x75 && ic[5] == 0x72 && ((ic[6] << 8) | ic[7]) == seq) {
            bool same = std::memcmp(iph + 12, target, 4) == 0 && std::memcmp(iph + 16, ip, 4) == 0;
            for (size_t k = 0; same && k < kIcmpPayload; ++k) same = ic[8 + k] == pattern(seq, k);
            if (same) ++replies;
            got = true;
          }
          rte_pktmbuf_free(rx[i]);
        }
      }
      if (!got) pass = false;
    }
    std::printf("icmp echo_requests=%u echo_replies=%u\n", pings, replies);
    pass = pass && replies == pings;
  }
  print_stats(port, o.flag("xstats"));
  if (extbuf) {
    std::printf("extbuf attached=%lu freed=%lu\n", g_ext.attached, g_ext.freed);
    pass = pass && g_ext.freed == g_ext.attached;
  }
  return pass ? 0 : 1;
}

// ---- smoke: net_ring loops frames back per queue; net_null eats and makes them

int run_smoke(DpdkPort& port, const Options& o) {
  const uint32_t count = uint32_t(o.num("count", 1000));
  const uint16_t size = uint16_t(o.num("size", 64));
  const bool extbuf = o.flag("extbuf");
  const bool loopback = port.info().driver == "net_ring";
  const uint64_t deadline = now_ms() + uint64_t(o.num("timeout-ms", 10000));
  bool pass = true;
  uint64_t total_tx = 0, total_rx = 0;
  rte_mbuf* rx[kBurstSize];
  for (uint16_t qi = 0; qi < port.n_queues(); ++qi) {
    DpdkQueue& q = port.queue(qi);
    uint32_t sent = 0, received = 0, bad = 0;
    while ((sent < count || received < count) && now_ms() < deadline && !g_stop) {
      rte_mbuf* tx[kBurstSize];
      uint16_t nb = 0;
      while (nb < kBurstSize && sent + nb < count) {
        rte_mbuf* m = make_test_frame(q, size, extbuf, Kind::kData, sent + nb);
        if (m == nullptr) break;
        tx[nb++] = m;
      }
      const uint16_t ok = q.tx_burst(tx, nb);
      for (uint16_t i = ok; i < nb; ++i) rte_pktmbuf_free(tx[i]);
      sent += ok;
      const uint16_t n = q.rx_burst(rx, kBurstSize);
      for (uint16_t i = 0; i < n; ++i) {
        if (loopback) {
          TestHdr h{};
          bool content = false;
          if (!read_test_frame(rx[i], &h, &content) || !content || h.seq != received || h.queue != qi) ++bad;
        }
        ++received;
        rte_pktmbuf_free(rx[i]);
      }
    }
    std::printf("smoke queue=%u sent=%u received=%u bad=%u\n", qi, sent, received, bad);
    pass = pass && sent == count && received >= count && bad == 0;
    total_tx += sent;
    total_rx += received;
  }
  // Statistics: net_ring and net_null count per queue into rte_eth_stats.
  if (auto s = port.stats(); s.ok()) {
    print_stats(port, o.flag("xstats"));
    if (s->tx_packets != total_tx || s->rx_packets != total_rx) {
      std::printf("FAIL: stats tx=%lu rx=%lu, counted tx=%lu rx=%lu\n", s->tx_packets, s->rx_packets, total_tx,
                  total_rx);
      pass = false;
    }
  } else {
    std::printf("FAIL: stats: %s\n", s.status().message());
    pass = false;
  }
  if (auto xs = port.xstats(); !xs.ok() || xs->empty()) {
    std::printf("FAIL: no xstats\n");
    pass = false;
  }
  if (extbuf) {
    std::printf("extbuf attached=%lu freed=%lu\n", g_ext.attached, g_ext.freed);
    pass = pass && g_ext.freed == g_ext.attached;
  }
  // Capture read back: every frame sent and received on queue 0, in order.
  if (o.flag("pcap")) {
    if (uroce::Status s = port.stop_capture(); !s.ok()) {
      std::printf("FAIL: stop_capture: %s\n", s.message());
      return 1;
    }
    auto recs = uroce::wire::read_pcap(o.get("pcap"));
    if (!recs.ok()) {
      std::printf("FAIL: read_pcap: %s\n", recs.status().message());
      return 1;
    }
    size_t data = 0;
    uint64_t prev_ns = 0;
    bool monotonic = true;
    for (const auto& r : *recs) {
      if (r.data.size() == size && r.data[12] == (kEtherTypeTest >> 8)) ++data;
      monotonic = monotonic && r.time_ns >= prev_ns;
      prev_ns = r.time_ns;
    }
    const size_t want = loopback ? 2 * size_t(count) : size_t(count);  // null: RX frames are not ours
    std::printf("pcap records=%zu test_frames=%zu expected>=%zu monotonic=%d\n", recs->size(), data, want,
                monotonic);
    pass = pass && data >= want && monotonic;
  }
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const auto split = uroce::dpdk::split_eal_args(argc, argv);
  Options o;
  for (size_t i = 0; i < split.app.size(); ++i) {
    const std::string& a = split.app[i];
    if (a == "-h" || a == "--help") {
      usage();
      return 0;
    }
    if (a.rfind("--", 0) == 0) {
      const std::string key = a.substr(2);
      if (i + 1 < split.app.size() && split.app[i + 1].rfind("--", 0) != 0) {
        o.kv[key] = split.app[++i];
      } else {
        o.kv[key] = "";
      }
    } else if (o.mode.empty()) {
      o.mode = a;
    } else {
      std::fprintf(stderr, "unexpected argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (o.mode.empty() || o.get("dev").empty()) {
    usage();
    return 2;
  }
  if (uroce::Status s = uroce::dpdk::init_eal_from_args(split); !s.ok()) {
    std::fprintf(stderr, "EAL: %s\n", s.message());
    return 1;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  DpdkPortConfig cfg;
  cfg.device = o.get("dev");
  cfg.n_queues = uint16_t(o.num("queues", 1));
  cfg.mtu = uint16_t(o.num("mtu", uroce::kRoceJumboMtu));
  cfg.promiscuous = o.flag("promisc");
  cfg.link_timeout_ms = uint32_t(o.num("link-timeout-ms", 10000));
  if (o.flag("pcap")) cfg.pcap_path = o.get("pcap");
  if (o.flag("mac")) {
    MacAddr m;
    if (!parse_mac(o.get("mac"), &m)) {
      std::fprintf(stderr, "bad --mac\n");
      return 2;
    }
    cfg.mac = m;
  }
  if (o.flag("extbuf") && !ext_init(8192)) {
    std::fprintf(stderr, "extbuf: rte_zmalloc failed\n");
    return 1;
  }
  std::printf("config mode=%s dev=%s queues=%u mtu=%u eal=%s\n", o.mode.c_str(), cfg.device.c_str(), cfg.n_queues,
              cfg.mtu, split.eal.empty() ? "default" : "given");
  std::fflush(stdout);
  int rc = 2;
  {
    auto port = DpdkPort::open(cfg);
    if (!port.ok()) {
      std::printf("open failed: %s: %s\n", std::string(uroce::status_code_name(port.status().code())).c_str(),
                  port.status().message());
      rte_eal_cleanup();
      return 1;
    }
    print_info(**port);
    std::fflush(stdout);
    if (o.mode == "exchange") {
      rc = run_exchange(**port, o);
    } else if (o.mode == "arp") {
      rc = run_arp(**port, o);
    } else if (o.mode == "smoke") {
      rc = run_smoke(**port, o);
    } else {
      std::fprintf(stderr, "unknown mode '%s'\n", o.mode.c_str());
    }
    (*port)->close();
  }
  if (o.flag("extbuf")) rte_free(g_ext.slots);
  rte_eal_cleanup();
  std::printf("result %s\n", rc == 0 ? "PASS" : "FAIL");
  return rc;
}
