// In-memory fabric, data path: tx_burst/rx_burst, the event loop behind
// advance(), switching, egress queues (tail drop, RED/ECN) and seeded faults.
// Frames stay rte_mbufs throughout. No allocation per frame beyond mbufs.
#include <algorithm>
#include <cstring>
#include <optional>

#include <rte_mbuf.h>

#include "drivers/loopback/fabric.h"
#include "stack/wire/checksum.h"
#include "stack/wire/headers.h"
#include "stack/wire/locate.h"

namespace uroce::loopback {
namespace {

bool event_after(const auto& a, const auto& b) {
  return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.seq > b.seq;
}

/// Byte at offset off of a (possibly chained) mbuf, or null past its end.
uint8_t* byte_at(rte_mbuf* m, uint32_t off) {
  for (; m != nullptr; m = m->next) {
    if (off < m->data_len) return rte_pktmbuf_mtod_offset(m, uint8_t*, off);
    off -= m->data_len;
  }
  return nullptr;
}

uint16_t read_be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }

// Bit ranges [begin, end) of a frame, numbered from the MSB of byte 0.
struct BitRanges {
  struct Range {
    uint32_t begin;
    uint32_t end;
  };
  std::array<Range, 8> r{};
  uint32_t n = 0;
  uint64_t total = 0;
  void add_bytes(uint32_t b0, uint32_t b1) { add_bits(b0 * 8, b1 * 8); }
  void add_bits(uint32_t b0, uint32_t b1) {
    if (b1 <= b0 || n == r.size()) return;
    r[n++] = {b0, b1};
    total += b1 - b0;
  }
  uint32_t pick(uint64_t k) const {
    for (uint32_t i = 0; i < n; ++i) {
      if (k < r[i].end - r[i].begin) return r[i].begin + uint32_t(k);
      k -= r[i].end - r[i].begin;
    }
    return 0;
  }
};

// The bits of a frame that some receive check covers (CorruptScope::kDetectable):
// see the enum's documentation. `h` holds the first bytes of the frame.
BitRanges detectable_bits(const uint8_t* h, uint32_t hlen, uint32_t len) {
  BitRanges br;
  const std::optional<wire::FrameLayout> loc = wire::locate_headers({h, hlen});
  if (!loc) {
    // No Ethernet header, or a cut-off 802.1Q tag: any byte (after the Ethernet header).
    br.add_bytes(hlen < sizeof(wire::EthHdr) ? 0 : uint32_t(sizeof(wire::EthHdr)), len);
    return br;
  }
  const uint32_t l3 = loc->l3_off;
  uint32_t transport = 0;  // UDP header (RoCEv2) or BTH (RoCEv1)
  uint32_t end = len;
  bool udp = true;
  if (!loc->has_l3) {
    br.add_bytes(l3, len);  // not IP: any byte after the Ethernet header
    return br;
  }
  if (loc->l3 == wire::L3Kind::kIpv4) {
    br.add_bytes(l3, l3 + sizeof(wire::Ipv4Hdr));  // all covered by the header checksum
    transport = l3 + sizeof(wire::Ipv4Hdr);
    end = std::min<uint32_t>(len, l3 + read_be16(h + l3 + 2));
  } else {
    br.add_bits(l3 * 8, l3 * 8 + 4);          // version; TC and flow label are masked
    br.add_bytes(l3 + 4, l3 + 7);             // payload length, next header; hop limit masked
    br.add_bytes(l3 + 8, l3 + 40);            // addresses
    transport = l3 + sizeof(wire::Ipv6Hdr);
    end = std::min<uint32_t>(len, transport + read_be16(h + l3 + 4));
    udp = loc->l3 == wire::L3Kind::kIpv6;
  }
  uint32_t bth = transport;
  if (udp) {
    br.add_bytes(transport, transport + 6);  // ports, length; the checksum is not checked
    bth = transport + sizeof(wire::UdpHdr);
  }
  br.add_bytes(bth, bth + 4);    // opcode, flags, P_Key
  br.add_bytes(bth + 5, end);    // byte 4 (FECN, BECN, resv6) is masked from the ICRC
  return br;
}

// Sets CE on an ECN-capable IP frame (RFC 3168). Returns whether it marked.
bool mark_ce(rte_mbuf* m) {
  auto* h = rte_pktmbuf_mtod(m, uint8_t*);
  const std::optional<wire::FrameLayout> loc = wire::locate_headers({h, m->data_len});
  if (!loc || !loc->has_l3) return false;
  if (loc->l3 == wire::L3Kind::kIpv4) {
    uint8_t* ip = h + loc->l3_off;
    if ((ip[1] & 3) == 0 || (ip[1] & 3) == 3) return false;
    ip[1] |= 3;
    ip[10] = ip[11] = 0;
    const uint16_t c = wire::csum_finish(wire::csum_partial({ip, sizeof(wire::Ipv4Hdr)}));
    ip[10] = uint8_t(c >> 8);
    ip[11] = uint8_t(c);
    return true;
  }
  if (loc->l3 == wire::L3Kind::kIpv6) {
    // Traffic class spans byte 0 (low nibble) and byte 1 (high nibble); ECN is
    // its low two bits: bits 5..4 of byte 1.
    uint8_t* ip = h + loc->l3_off;
    const uint8_t ecn = (ip[1] >> 4) & 3;
    if (ecn == 0 || ecn == 3) return false;
    ip[1] |= 0x30;
    return true;
  }
  return false;
}

}  // namespace

// ---------------------------------------------------------------- host side

uint16_t Port::rx_burst(rte_mbuf** out, uint16_t n) {
  const uint32_t mask = uint32_t(rx_ring_.size() - 1);
  uint16_t i = 0;
  for (; i < n && rx_head_ != rx_tail_; ++i) out[i] = rx_ring_[rx_head_++ & mask];
  return i;
}

uint16_t Port::tx_burst(rte_mbuf** in, uint16_t n) {
  Fabric& f = *fabric_;
  const uint64_t now = f.now_ns_;
  const uint64_t max_len = uint64_t(cfg_.mtu) + sizeof(wire::EthHdr) + 4;  // room for a VLAN tag
  uint16_t i = 0;
  for (; i < n; ++i) {
    rte_mbuf* m = in[i];
    const uint32_t len = rte_pktmbuf_pkt_len(m);
    if (len > max_len) {
      counters_.inc(PortCounter::tx_oversize);
      break;
    }
    uint64_t start = std::max(now, up_busy_until_ns_);
    if (start >= pause_from_ns_ && start < pause_until_ns_) start = pause_until_ns_;  // PFC pause
    const uint64_t backlog = (start - now) * cfg_.link.rate_bps / 8'000'000'000ull;
    if (backlog + len > cfg_.link.tx_queue_bytes && start > now) {
      counters_.inc(PortCounter::tx_queue_full);
      break;
    }
    counters_.inc(PortCounter::tx_frames);
    counters_.inc(PortCounter::tx_bytes, len);
    if (!up_) {  // a NIC with its link down drops what it is given
      counters_.inc(PortCounter::drop_link_down);
      rte_pktmbuf_free(m);
      continue;
    }
    up_busy_until_ns_ = start + serialization_ns(cfg_.link, len);
    f.push(up_busy_until_ns_ + cfg_.link.prop_delay_ns, Fabric::EventKind::kAtSwitch, index_, m);
  }
  return i;
}

// ---------------------------------------------------------------- event loop

void Fabric::push(uint64_t time_ns, EventKind kind, uint32_t port, rte_mbuf* m, uint32_t path) {
  events_.push_back(Event{time_ns, seq_++, m, port, path, kind});
  std::push_heap(events_.begin(), events_.end(), [](const Event& a, const Event& b) { return event_after(a, b); });
  if (m != nullptr) ++in_flight_;
}

void Fabric::advance(uint64_t now_ns) {
  while (!events_.empty() && events_.front().time_ns <= now_ns) {
    std::pop_heap(events_.begin(), events_.end(), [](const Event& a, const Event& b) { return event_after(a, b); });
    const Event ev = events_.back();
    events_.pop_back();
    if (ev.m != nullptr) --in_flight_;
    now_ns_ = std::max(now_ns_, ev.time_ns);
    handle(ev);
  }
  now_ns_ = std::max(now_ns_, now_ns);
}

void Fabric::handle(const Event& ev) {
  Port& p = *ports_[ev.port];
  switch (ev.kind) {
    case EventKind::kAtSwitch:
      at_switch(ev.port, ev.m, ev.time_ns);
      return;
    case EventKind::kDeliver:
      deliver(p, ev.m);
      return;
    case EventKind::kLinkUp:
      p.up_ = true;
      return;
    case EventKind::kLinkDown:
      p.up_ = false;
      return;
    case EventKind::kAtSpine:  // on to the destination leaf over the same spine
      if (paths_[ev.path].blackhole) {
        paths_[ev.path].up.counters.inc(PathCounter::drop_blackhole);
        rte_pktmbuf_free(ev.m);
        return;
      }
      send_on_path(path_index(p.leaf_, ev.path % cfg_.topology.spines), PathDir::kDown, ev.m, ev.time_ns, ev.port,
                   EventKind::kAtLeaf);
      return;
    case EventKind::kAtLeaf:
      if (paths_[ev.path].blackhole) {
        paths_[ev.path].down.counters.inc(PathCounter::drop_blackhole);
        rte_pktmbuf_free(ev.m);
        return;
      }
      egress(p, ev.m, ev.time_ns);
      return;
    case EventKind::kBlackholeOn:
      paths_[ev.path].blackhole = true;
      return;
    case EventKind::kBlackholeOff:
      paths_[ev.path].blackhole = false;
      return;
  }
}

// ---------------------------------------------------------------- leaf/spine

uint32_t Fabric::ecmp_spine(const rte_mbuf* m) const {
  if (spines() <= 1) return 0;
  uint8_t head[128];
  const uint32_t hlen = std::min<uint32_t>(rte_pktmbuf_pkt_len(m), sizeof(head));
  const auto* h = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, hlen, head));
  // The 5-tuple: source and destination IP, protocol, UDP ports; without UDP, the MACs.
  uint64_t x = cfg_.seed;
  auto fold = [&x](const uint8_t* b, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) x = splitmix64_mix(x ^ b[i]);
  };
  const std::optional<wire::FrameLayout> loc = wire::locate_headers({h, hlen});
  if (loc && loc->has_udp) {
    const uint8_t* ip = h + loc->l3_off;
    if (loc->l3 == wire::L3Kind::kIpv4) {
      fold(ip + 12, 8);  // source, destination
    } else {
      fold(ip + 8, 32);
    }
    fold(&loc->l4_proto, 1);
    fold(h + loc->l4_off, 4);  // source port, destination port
  } else {
    fold(h, std::min<uint32_t>(hlen, 12));
  }
  return uint32_t(scale(x, spines()));
}

void Fabric::send_on_path(uint32_t pi, PathDir dir, rte_mbuf* m, uint64_t t, uint32_t dst, EventKind then) {
  Path& p = paths_[pi];
  PathLane& lane = dir == PathDir::kUp ? p.up : p.down;
  if (p.blackhole) {
    lane.counters.inc(PathCounter::drop_blackhole);
    rte_pktmbuf_free(m);
    return;
  }
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  const uint64_t start = std::max(t, lane.busy_until_ns);
  const uint64_t backlog = (start - t) * p.cfg.rate_bps / 8'000'000'000ull;
  if (backlog + len > p.cfg.buffer_bytes) {
    lane.counters.inc(PathCounter::drop_buffer);
    rte_pktmbuf_free(m);
    return;
  }
  lane.busy_until_ns = start + serialization_ns(p.cfg.rate_bps, p.cfg.overhead_bytes, len);
  lane.counters.inc(PathCounter::frames);
  lane.counters.inc(PathCounter::bytes, len);
  // One draw per frame whatever the loss, so a loss rate does not move later draws.
  if (p.rng.uniform01() < p.cfg.loss) {
    lane.counters.inc(PathCounter::drop_loss);
    rte_pktmbuf_free(m);
    return;
  }
  push(lane.busy_until_ns + p.cfg.prop_delay_ns, then, dst, m, pi);
}

// ---------------------------------------------------------------- switch

void Fabric::capture(const rte_mbuf* m, uint64_t t) {
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  if (m->nb_segs == 1) {
    pcap_.write({rte_pktmbuf_mtod(m, const uint8_t*), len}, t);
    return;
  }
  scratch_.resize(len);
  const void* p = rte_pktmbuf_read(m, 0, len, scratch_.data());
  pcap_.write({static_cast<const uint8_t*>(p), len}, t);
}

void Fabric::at_switch(uint32_t src, rte_mbuf* m, uint64_t t) {
  Port& sp = *ports_[src];
  const FrameEvent fe{t, frames_seen_++, src};
  if (!sp.up_) {  // the link went down while the frame was on it
    sp.counters_.inc(PortCounter::drop_link_down);
    rte_pktmbuf_free(m);
    return;
  }
  if (hook_ != nullptr && hook_(hook_user_, fe, m) == HookVerdict::kDrop) {
    sp.counters_.inc(PortCounter::drop_hook);
    rte_pktmbuf_free(m);
    return;
  }
  if (pcap_.is_open()) capture(m, t);

  MacAddr dst;
  if (rte_pktmbuf_data_len(m) < sizeof(dst.b)) {
    sp.counters_.inc(PortCounter::drop_unknown_dst);
    rte_pktmbuf_free(m);
    return;
  }
  std::memcpy(dst.b, rte_pktmbuf_mtod(m, const uint8_t*), sizeof(dst.b));
  if (!(dst.b[0] & 1)) {  // unicast: no learning, the ports are known
    for (auto& p : ports_) {
      if (p->mac_ == dst) {
        if (p->leaf_ != sp.leaf_) {  // two tiers, another leaf: up the ECMP path
          const uint32_t spine = ecmp_spine(m);
          send_on_path(path_index(sp.leaf_, spine), PathDir::kUp, m, t, p->index_, EventKind::kAtSpine);
          return;
        }
        egress(*p, m, t);
        if (p->cfg_.link.pfc.enabled) pfc_check(*p, sp, t);
        return;
      }
    }
    sp.counters_.inc(PortCounter::drop_unknown_dst);
    rte_pktmbuf_free(m);
    return;
  }
  // Broadcast or multicast: flood to every other port; the last gets the original.
  Port* last = nullptr;
  for (auto& p : ports_) {
    if (p->index_ == src) continue;
    if (last != nullptr) {
      rte_mbuf* c = rte_pktmbuf_copy(m, copy_pool_, 0, UINT32_MAX);
      if (c == nullptr) {
        last->counters_.inc(PortCounter::drop_no_mbuf);
      } else {
        egress(*last, c, t);
      }
    }
    last = p.get();
  }
  if (last != nullptr) {
    egress(*last, m, t);
  } else {
    rte_pktmbuf_free(m);
  }
}

uint64_t Fabric::enqueue_downlink(Port& dst, rte_mbuf* m, uint64_t t) {
  const LinkConfig& link = dst.cfg_.link;
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  const uint64_t start = std::max(t, dst.down_busy_until_ns_);
  const uint64_t backlog = (start - t) * link.rate_bps / 8'000'000'000ull;
  if (backlog + len > link.buffer_bytes) {
    dst.counters_.inc(PortCounter::drop_buffer);
    rte_pktmbuf_free(m);
    return 0;
  }
  if (link.red.enabled && backlog > link.red.kmin_bytes) {
    const double p = backlog >= link.red.kmax_bytes
                         ? 1.0
                         : link.red.pmax * double(backlog - link.red.kmin_bytes) /
                               double(link.red.kmax_bytes - link.red.kmin_bytes);
    if (dst.rng_.chance(p) && mark_ce(m)) dst.counters_.inc(PortCounter::ecn_marked);
  }
  dst.down_busy_until_ns_ = start + serialization_ns(link, len);
  return dst.down_busy_until_ns_;
}

void Fabric::pfc_check(Port& dst, Port& src, uint64_t t) {
  const LinkConfig& link = dst.cfg_.link;
  if (dst.down_busy_until_ns_ <= t) return;
  const uint64_t backlog = (dst.down_busy_until_ns_ - t) * link.rate_bps / 8'000'000'000ull;
  if (backlog <= link.pfc.xoff_bytes) return;
  const uint64_t to_xon = backlog > link.pfc.xon_bytes ? backlog - link.pfc.xon_bytes : 0;
  const uint64_t drain_ns = to_xon * 8'000'000'000ull / link.rate_bps;
  const uint64_t arrive = t + src.cfg_.link.prop_delay_ns;
  if (arrive >= src.pause_until_ns_) {  // a new pause, not an extension of one in force
    src.pause_from_ns_ = arrive;
    src.counters_.inc(PortCounter::pfc_pause_rx);
  }
  src.pause_until_ns_ = std::max(src.pause_until_ns_, t + drain_ns + src.cfg_.link.prop_delay_ns);
}

void Fabric::egress(Port& dst, rte_mbuf* m, uint64_t t) {
  if (!dst.up_) {
    dst.counters_.inc(PortCounter::drop_link_down);
    rte_pktmbuf_free(m);
    return;
  }
  // Seven draws per frame copy, whatever is enabled, so that one fault kind
  // does not shift another's sequence.
  const FaultConfig& fc = dst.cfg_.faults;
  Rng& rng = dst.rng_;
  const double u_loss = rng.uniform01();
  const double u_dup = rng.uniform01();
  const double u_corrupt = rng.uniform01();
  const double u_reorder = rng.uniform01();
  const uint64_t r_hold = rng.next();
  const uint64_t r_jitter = rng.next();
  const uint64_t r_bit = rng.next();

  rte_mbuf* dup = nullptr;
  if (u_dup < fc.duplicate) {
    dup = rte_pktmbuf_copy(m, copy_pool_, 0, UINT32_MAX);
    if (dup == nullptr) dst.counters_.inc(PortCounter::drop_no_mbuf);
  }
  const uint64_t sent = enqueue_downlink(dst, m, t);
  if (sent != 0) {
    const LinkConfig& link = dst.cfg_.link;
    uint64_t arrival = sent + link.prop_delay_ns;
    if (u_loss < fc.loss) {
      dst.counters_.inc(PortCounter::fault_loss);
      rte_pktmbuf_free(m);
    } else {
      if (u_corrupt < fc.corrupt) {
        const uint32_t len = rte_pktmbuf_pkt_len(m);
        BitRanges br;
        if (fc.corrupt_scope == CorruptScope::kDetectable) {
          uint8_t head[128];
          const uint32_t hlen = std::min<uint32_t>(len, sizeof(head));
          const auto* h = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, hlen, head));
          br = detectable_bits(h, hlen, len);
        } else {
          br.add_bytes(0, len);
        }
        if (br.total != 0) {
          const uint32_t bit = br.pick(scale(r_bit, br.total));
          *byte_at(m, bit / 8) ^= uint8_t(0x80 >> (bit % 8));
          dst.counters_.inc(PortCounter::fault_corrupt);
        }
      }
      if (fc.jitter_ns != 0) {
        const uint64_t j = scale(r_jitter, fc.jitter_ns + 1);
        if (j != 0) dst.counters_.inc(PortCounter::fault_jitter);
        arrival = std::max(arrival + j, dst.down_fifo_arrival_ns_);
      }
      if (u_reorder < fc.reorder && fc.reorder_delay_ns != 0) {
        dst.counters_.inc(PortCounter::fault_reorder);
        arrival += 1 + scale(r_hold, fc.reorder_delay_ns);
      } else {
        dst.down_fifo_arrival_ns_ = std::max(dst.down_fifo_arrival_ns_, arrival);
      }
      push(arrival, EventKind::kDeliver, dst.index_, m);
    }
  }
  if (dup != nullptr) {
    const uint64_t dsent = enqueue_downlink(dst, dup, t);
    if (dsent != 0) {
      dst.counters_.inc(PortCounter::fault_duplicate);
      const uint64_t arrival = std::max(dsent + dst.cfg_.link.prop_delay_ns, dst.down_fifo_arrival_ns_);
      dst.down_fifo_arrival_ns_ = arrival;
      push(arrival, EventKind::kDeliver, dst.index_, dup);
    }
  }
}

void Fabric::deliver(Port& dst, rte_mbuf* m) {
  if (!dst.up_) {
    dst.counters_.inc(PortCounter::drop_link_down);
    rte_pktmbuf_free(m);
    return;
  }
  if (dst.rx_tail_ - dst.rx_head_ == dst.rx_ring_.size()) {
    dst.counters_.inc(PortCounter::drop_rx_ring_full);
    rte_pktmbuf_free(m);
    return;
  }
  dst.counters_.inc(PortCounter::rx_frames);
  dst.counters_.inc(PortCounter::rx_bytes, rte_pktmbuf_pkt_len(m));
  dst.rx_ring_[dst.rx_tail_++ & (dst.rx_ring_.size() - 1)] = m;
}

}  // namespace uroce::loopback
