// In-memory fabric, control path: creating the fabric and its ports (mempools,
// RX rings, per-port fault streams), link state, fault settings, teardown.
// The per-frame path is in fabric_datapath.cc.
#include "drivers/loopback/fabric.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <stdexcept>

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "drivers/loopback/pool_shelf.h"

namespace uroce::loopback {
namespace {

uint32_t next_fabric_id() {
  static uint32_t id = 0;
  return id++;
}

bool is_multicast(const MacAddr& mac) { return mac.b[0] & 1; }

}  // namespace

uint64_t serialization_ns(uint64_t rate_bps, uint16_t overhead_bytes, uint32_t len) {
  const uint64_t bytes = uint64_t(std::max<uint32_t>(len, 60)) + overhead_bytes;
  return (bytes * 8 * 1'000'000'000ull + rate_bps - 1) / rate_bps;
}

Port::Port(Fabric* fabric, uint32_t index, MacAddr mac, const PortConfig& cfg)
    : fabric_(fabric),
      index_(index),
      mac_(mac),
      cfg_(cfg),
      rng_(derive_seed(fabric->cfg_.seed, index)),
      rx_ring_(cfg.rx_ring_size, nullptr) {}

Fabric::Fabric(const FabricConfig& cfg) : cfg_(cfg), id_(next_fabric_id()) {}

Result<std::unique_ptr<Fabric>> Fabric::create(const FabricConfig& cfg) {
  std::unique_ptr<Fabric> f(new Fabric(cfg));
  char name[32];
  std::snprintf(name, sizeof(name), "lb%u_copy", f->id_);
  auto pool = take_frame_pool(name, std::max<uint32_t>(cfg.copy_pool_size, 64));
  if (!pool.ok()) return pool.status();
  f->copy_pool_ = *pool;
  if (!cfg.pcap_path.empty()) {
    if (Status s = f->pcap_.open(cfg.pcap_path); !s.ok()) return s;
  }
  const Topology& topo = cfg.topology;
  if (topo.leaves != 0) {
    if (topo.spines == 0 || topo.spines > 256) {
      return Status(StatusCode::kInvalidArgument, "topology: spines must be 1 .. 256");
    }
    if (topo.path.rate_bps == 0) return Status(StatusCode::kInvalidArgument, "topology: path rate is zero");
    const uint32_t n = topo.leaves * topo.spines;
    f->paths_.reserve(n);
    // Streams above 2^32: the ports' streams (derive_seed(seed, index)) stay what they were.
    for (uint32_t i = 0; i < n; ++i) f->paths_.push_back(Path{topo.path, Rng(derive_seed(cfg.seed, (1ull << 32) + i)), false, {}, {}});
  }
  f->events_.reserve(4096);
  return f;
}

Result<Port*> Fabric::add_port(MacAddr mac, const PortConfig& cfg) {
  if (is_multicast(mac)) return Status(StatusCode::kInvalidArgument, "port MAC is multicast");
  for (const auto& p : ports_) {
    if (p->mac_ == mac) return Status(StatusCode::kInvalidArgument, "port MAC already in use");
  }
  if (!std::has_single_bit(cfg.rx_ring_size)) {
    return Status(StatusCode::kInvalidArgument, "rx_ring_size is not a power of two");
  }
  if (cfg.link.rate_bps == 0) return Status(StatusCode::kInvalidArgument, "link rate is zero");
  if (cfg.leaf != 0 && cfg.leaf >= cfg_.topology.leaves) {
    return Status(StatusCode::kInvalidArgument, "port leaf is not a leaf of the topology");
  }
  const uint32_t index = uint32_t(ports_.size());
  std::unique_ptr<Port> p(new Port(this, index, mac, cfg));
  p->leaf_ = cfg.leaf;
  char name[32];
  std::snprintf(name, sizeof(name), "lb%u_p%u", id_, index);
  auto pool = take_frame_pool(name, std::max<uint32_t>(cfg.pool_size, 64));
  if (!pool.ok()) return pool.status();
  p->pool_ = *pool;
  ports_.push_back(std::move(p));
  return ports_.back().get();
}

Fabric::~Fabric() {
  for (const Event& ev : events_) rte_pktmbuf_free(ev.m);  // null for link events
  for (auto& p : ports_) {
    while (p->rx_head_ != p->rx_tail_) {
      rte_pktmbuf_free(p->rx_ring_[p->rx_head_++ & (p->rx_ring_.size() - 1)]);
    }
  }
  (void)pcap_.close();  // whoever wants the capture's fate calls close_capture() first
  for (auto& p : ports_) give_back_frame_pool(p->pool_);
  give_back_frame_pool(copy_pool_);
}

void Fabric::set_link(uint32_t port, bool up) { ports_.at(port)->up_ = up; }

void Fabric::schedule_link(uint32_t port, uint64_t at_ns, bool up) {
  (void)ports_.at(port);
  push(std::max(at_ns, now_ns_), up ? EventKind::kLinkUp : EventKind::kLinkDown, port, nullptr);
}

void Fabric::set_faults(uint32_t port, const FaultConfig& faults) { ports_.at(port)->cfg_.faults = faults; }

uint32_t Fabric::path_index(uint32_t leaf, uint32_t spine) const {
  // A bad index is a bug of the caller, as with set_link's ports_.at().
  if (leaf >= leaves() || spine >= spines()) throw std::out_of_range("fabric: no such leaf or spine");
  return leaf * cfg_.topology.spines + spine;
}

void Fabric::set_path(uint32_t leaf, uint32_t spine, const PathConfig& cfg) {
  if (cfg.rate_bps == 0) throw std::invalid_argument("fabric: path rate is zero");
  paths_[path_index(leaf, spine)].cfg = cfg;
}

void Fabric::schedule_blackhole(uint32_t leaf, uint32_t spine, uint64_t at_ns, bool on) {
  push(std::max(at_ns, now_ns_), on ? EventKind::kBlackholeOn : EventKind::kBlackholeOff, 0, nullptr,
       path_index(leaf, spine));
}

const PathCounters& Fabric::path_counters(uint32_t leaf, uint32_t spine, PathDir dir) const {
  const Path& p = paths_[path_index(leaf, spine)];
  return dir == PathDir::kUp ? p.up.counters : p.down.counters;
}

uint64_t Fabric::queue_bytes(uint32_t i) const {
  const Port& p = *ports_[i];
  if (p.down_busy_until_ns_ <= now_ns_) return 0;
  return (p.down_busy_until_ns_ - now_ns_) * p.cfg_.link.rate_bps / 8'000'000'000ull;
}

PortCounters Fabric::totals() const {
  PortCounters t;
  for (const auto& p : ports_) t += p->counters_;
  return t;
}

}  // namespace uroce::loopback
