// The traffic the fabric tests send: RoCEv2 frames tagged in their PSN, a
// fabric and ports built with checks, a run until the fabric is idle, and
// the seeded faulty run that fabric_test.cc and leaf_spine_test.cc both
// replay. For tests/unit/loopback only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "drivers/loopback/fabric.h"
#include "stack/wire/packet.h"

namespace uroce::loopback::testing_traffic {

constexpr MacAddr kMacA{{0x02, 0, 0, 0, 0, 0xa}};
constexpr MacAddr kMacB{{0x02, 0, 0, 0, 0, 0xb}};
constexpr MacAddr kMacC{{0x02, 0, 0, 0, 0, 0xc}};
constexpr MacAddr kBroadcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

/// Builds a RoCEv2/IPv4 RC SEND ONLY frame from src to dst carrying `tag` in
/// the PSN and a payload of `payload` bytes (pattern derived from the tag).
inline rte_mbuf* make_frame(rte_mempool* pool, MacAddr src, MacAddr dst, uint32_t tag, uint32_t payload,
                     uint8_t traffic_class = 0, wire::L3Kind l3 = wire::L3Kind::kIpv4) {
  wire::PacketDesc d;
  d.dst_mac = dst;
  d.src_mac = src;
  d.l3 = l3;
  d.traffic_class = traffic_class;
  const uint8_t sip[4] = {10, 0, 0, src.b[5]};
  const uint8_t dip[4] = {10, 0, 0, dst.b[5]};
  d.sgid = Gid::from_ipv4(sip);
  d.dgid = Gid::from_ipv4(dip);
  if (l3 == wire::L3Kind::kIpv6) {
    d.sgid.raw[0] = d.dgid.raw[0] = 0xfe;
    d.sgid.raw[1] = d.dgid.raw[1] = 0x80;
  }
  d.udp_sport = uint16_t(0xc000 | (tag & 0x3fff));
  d.opcode = wire::kRcSendOnly;
  d.dest_qp = 0x11;
  d.psn = tag & wire::kBthPsnMask;
  d.payload_len = payload;
  d.pad = wire::pad_for(payload);
  std::vector<uint8_t> body(payload);
  for (uint32_t i = 0; i < payload; ++i) body[i] = uint8_t(tag * 7 + i);
  const size_t len = wire::frame_len(d);
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (m == nullptr) return nullptr;
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, uint16_t(len)));
  EXPECT_EQ(wire::build(d, body, {p, len}), len);
  return m;
}

inline std::span<const uint8_t> bytes(const rte_mbuf* m) {
  return {rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m)};
}

/// The tag make_frame put into the PSN.
inline uint32_t tag_of(const rte_mbuf* m) {
  wire::PacketDesc d;
  wire::parse(bytes(m), d, {.verify_icrc = false});
  return d.psn;
}

inline std::unique_ptr<Fabric> make_fabric(const FabricConfig& cfg = {}) {
  auto f = Fabric::create(cfg);
  EXPECT_TRUE(f.ok()) << f.status().message();
  return std::move(f).value();
}

inline Port& add(Fabric& f, MacAddr mac, const PortConfig& cfg = {}) {
  auto p = f.add_port(mac, cfg);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return **p;
}

/// Sends one frame, asserting the port takes it (freeing it if not).
inline void send(Port& from, rte_mbuf* m) {
  ASSERT_NE(m, nullptr);
  const uint16_t n = from.tx_burst(&m, 1);
  if (n != 1) rte_pktmbuf_free(m);
  ASSERT_EQ(n, 1) << "NIC queue full";
}

struct Received {
  uint64_t time_ns;
  uint32_t tag;
  std::vector<uint8_t> data;
};

/// Runs the fabric event by event until idle, draining `to` after each event.
inline std::vector<Received> run_until_idle(Fabric& f, Port& to) {
  std::vector<Received> out;
  rte_mbuf* burst[32];
  for (bool more = true; more;) {
    more = f.next_event_ns() != Fabric::kNever;
    if (more) f.advance(f.next_event_ns());
    for (uint16_t n; (n = to.rx_burst(burst, 32)) != 0;) {
      for (uint16_t i = 0; i < n; ++i) {
        const auto b = bytes(burst[i]);
        out.push_back({f.now_ns(), tag_of(burst[i]), {b.begin(), b.end()}});
        rte_pktmbuf_free(burst[i]);
      }
    }
  }
  return out;
}

struct Trace {
  std::vector<Received> rx;
  PortCounters counters;
};

/// The traffic of SameSeedSameFaultSequence; leaves > 0: on a leaf/spine
/// fabric with both ports on leaf 0.
inline Trace faulty_run(uint64_t seed, uint32_t leaves = 0) {
  FabricConfig fc{.seed = seed};
  fc.topology.leaves = leaves;
  fc.topology.spines = 4;
  auto f = make_fabric(fc);
  PortConfig pc;
  pc.faults = {.loss = 0.05, .duplicate = 0.05, .corrupt = 0.05, .reorder = 0.1, .reorder_delay_ns = 5000,
               .jitter_ns = 300};
  Port& a = add(*f, kMacA);
  Port& b = add(*f, kMacB, pc);
  Trace t;
  for (uint32_t i = 0; i < 2000; ++i) {
    send(a, make_frame(a.tx_pool(), kMacA, kMacB, i, 100 + i % 900));
    if (i % 16 == 15) {
      auto got = run_until_idle(*f, b);
      t.rx.insert(t.rx.end(), got.begin(), got.end());
    }
  }
  auto got = run_until_idle(*f, b);
  t.rx.insert(t.rx.end(), got.begin(), got.end());
  t.counters = b.counters();
  return t;
}

}  // namespace uroce::loopback::testing_traffic
