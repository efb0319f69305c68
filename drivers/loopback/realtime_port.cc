// The loopback driver: named in-memory fabrics of this process in real time,
// and the IoPort on one of their ports (realtime_port.h).
#include "drivers/loopback/realtime_port.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include <uroce/eal.h>

namespace uroce::loopback {

/// A fabric and the lock every burst on one of its ports takes. After each
/// locked step it publishes when the fabric next has something to do and how
/// many frames wait in each port's RX ring, so that an rx_burst with nothing
/// to receive returns without the lock: two threads polling their ports
/// otherwise hand the mutex back and forth, and an unfair mutex lets one of
/// them starve the other for a scheduler tick.
class RealTimeFabric {
 public:
  /// Ports of one fabric that publish their RX backlog (more may join; they
  /// take the lock on every poll).
  static constexpr uint32_t kPublishedPorts = 64;

  RealTimeFabric(std::string name, std::unique_ptr<Fabric> fabric)
      : name_(std::move(name)), fabric_(std::move(fabric)), epoch_(std::chrono::steady_clock::now()) {}

  const std::string& name() const { return name_; }
  std::mutex& mu() { return mu_; }
  uint64_t now_ns() const {
    return uint64_t(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - epoch_).count());
  }
  /// The fabric with its time moved to now; call with mu() held.
  Fabric& at_now() {
    fabric_->advance(now_ns());
    return *fabric_;
  }
  /// Publishes the fabric's state after a step; call with mu() held.
  void publish() {
    next_event_ns_.store(fabric_->next_event_ns(), std::memory_order_release);
    for (uint32_t i = 0; i < std::min(fabric_->num_ports(), kPublishedPorts); ++i) {
      rx_pending_[i].store(fabric_->port(i).rx_pending(), std::memory_order_release);
    }
  }
  /// True if port i has nothing to receive now: nothing in its RX ring and
  /// nothing due in the fabric. Lock-free.
  bool idle(uint32_t i) const {
    return i < kPublishedPorts && rx_pending_[i].load(std::memory_order_acquire) == 0 &&
           now_ns() < next_event_ns_.load(std::memory_order_acquire);
  }

 private:
  std::string name_;
  std::mutex mu_;
  std::unique_ptr<Fabric> fabric_;
  std::chrono::steady_clock::time_point epoch_;
  std::atomic<uint64_t> next_event_ns_{0};
  std::array<std::atomic<uint32_t>, kPublishedPorts> rx_pending_{};
};

namespace {

// The process's fabrics by name; an entry whose fabric is gone is replaced.
std::mutex g_fabrics_mu;
std::map<std::string, std::weak_ptr<RealTimeFabric>, std::less<>> g_fabrics;

// Call with g_fabrics_mu held.
Result<std::shared_ptr<RealTimeFabric>> create_locked(const std::string& name, const FabricConfig& cfg) {
  if (auto it = g_fabrics.find(name); it != g_fabrics.end() && !it->second.expired()) {
    return Status(StatusCode::kBusy, "a loopback fabric of that name exists already");
  }
  auto f = Fabric::create(cfg);
  if (!f.ok()) return f.status();
  auto rt = std::make_shared<RealTimeFabric>(name, std::move(f).value());
  g_fabrics[name] = rt;
  return rt;
}

class RealTimePort final : public drivers::IoPort, public PacketIo {
 public:
  RealTimePort(std::shared_ptr<RealTimeFabric> fabric, Port* port)
      : fabric_(std::move(fabric)),
        port_(port),
        info_{.name = "loopback:" + fabric_->name() + "/" + std::to_string(port->index()),
              .driver = "loopback",
              .mtu = port->config().mtu,
              .mac = port->mac()} {}

  uint16_t rx_burst(rte_mbuf** out, uint16_t n) override {
    if (fabric_->idle(port_->index())) return 0;
    std::lock_guard lock(fabric_->mu());
    fabric_->at_now();
    const uint16_t got = port_->rx_burst(out, n);
    fabric_->publish();
    return got;
  }
  uint16_t tx_burst(rte_mbuf** in, uint16_t n) override {
    std::lock_guard lock(fabric_->mu());
    fabric_->at_now();
    const uint16_t sent = port_->tx_burst(in, n);
    fabric_->publish();
    return sent;
  }
  rte_mempool* tx_pool() override { return port_->tx_pool(); }
  IoCaps caps() const override { return port_->caps(); }
  MacAddr mac() const override { return port_->mac(); }

  PacketIo& io() override { return *this; }
  const drivers::IoPortInfo& info() const override { return info_; }
  Result<PortStats> stats() const override {
    std::lock_guard lock(fabric_->mu());
    const PortCounters& c = port_->counters();
    return PortStats{.rx_packets = c.get(PortCounter::rx_frames),
                              .tx_packets = c.get(PortCounter::tx_frames),
                              .rx_bytes = c.get(PortCounter::rx_bytes),
                              .tx_bytes = c.get(PortCounter::tx_bytes),
                              .rx_missed = c.get(PortCounter::drop_rx_ring_full)};
  }
  Status stop_capture() override { return {}; }

 private:
  std::shared_ptr<RealTimeFabric> fabric_;
  Port* port_;  // lives as long as the fabric
  drivers::IoPortInfo info_;
};

/// "FABRIC,key=value,..." read into name, port config and (if given) seed.
struct Spec {
  std::string name;
  PortConfig port;
  std::optional<uint64_t> seed;
};

bool read_number(std::string_view text, double& v) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && end == text.data() + text.size();
}

// The one way a spec key is wrong; Status messages are literals.
Status bad_spec() {
  return Status(StatusCode::kInvalidArgument,
                "loopback device spec: FABRIC[,rate_gbps=R,delay_us=D,loss=P,duplicate=P,corrupt=P,reorder=P,"
                "jitter_us=J,seed=S] with R > 0, D, J >= 0 and P in [0, 1]");
}

Result<Spec> parse_spec(std::string_view s) {
  Spec spec;
  const size_t comma = s.find(',');
  spec.name = std::string(s.substr(0, comma));
  if (spec.name.empty() || spec.name.find('=') != std::string::npos) return bad_spec();
  s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
  while (!s.empty()) {
    const size_t next = s.find(',');
    const std::string_view item = s.substr(0, next);
    s = next == std::string_view::npos ? std::string_view() : s.substr(next + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return bad_spec();
    const std::string_view key = item.substr(0, eq);
    const std::string_view text = item.substr(eq + 1);
    if (key == "seed") {
      uint64_t v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size()) return bad_spec();
      spec.seed = v;
      continue;
    }
    double v = 0;
    if (!read_number(text, v) || v < 0) return bad_spec();
    LinkConfig& link = spec.port.link;
    FaultConfig& faults = spec.port.faults;
    if (key == "rate_gbps" && v > 0) {
      link.rate_bps = uint64_t(v * 1e9);
    } else if (key == "delay_us") {
      link.prop_delay_ns = uint64_t(v * 1e3);
    } else if (key == "jitter_us") {
      faults.jitter_ns = uint64_t(v * 1e3);
    } else if (v > 1) {
      return bad_spec();
    } else if (key == "loss") {
      faults.loss = v;
    } else if (key == "duplicate") {
      faults.duplicate = v;
    } else if (key == "corrupt") {
      faults.corrupt = v;
    } else if (key == "reorder") {
      faults.reorder = v;
    } else {
      return bad_spec();
    }
  }
  return spec;
}

}  // namespace

Result<std::shared_ptr<RealTimeFabric>> create_fabric(const std::string& name, const FabricConfig& cfg) {
  std::lock_guard lock(g_fabrics_mu);
  return create_locked(name, cfg);
}

Status close_capture(RealTimeFabric& fabric) {
  std::lock_guard lock(fabric.mu());
  return fabric.at_now().close_capture();
}

Result<std::unique_ptr<drivers::IoPort>> open_io_port(const drivers::IoConfig& cfg) {
  auto spec = parse_spec(cfg.device);
  if (!spec.ok()) return spec.status();
  if (!cfg.pcap_path.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "a loopback port has no capture of its own: the fabric captures every frame (create_fabric)");
  }
  std::shared_ptr<RealTimeFabric> rt;
  {
    std::lock_guard lock(g_fabrics_mu);
    if (auto it = g_fabrics.find(spec->name); it != g_fabrics.end()) rt = it->second.lock();
    if (rt && spec->seed) {
      return Status(StatusCode::kInvalidArgument, "seed= is for the port that creates the loopback fabric");
    }
    if (!rt) {
      auto made = create_locked(spec->name, FabricConfig{.seed = spec->seed.value_or(1)});
      if (!made.ok()) return made.status();
      rt = *made;
    }
  }
  // The largest frame one kFrameRoomBytes mbuf holds: Ethernet and VLAN headers after the IP datagram.
  constexpr uint16_t kMaxMtu = kFrameRoomBytes - 18;
  spec->port.mtu = std::min(cfg.mtu, kMaxMtu);
  std::lock_guard lock(rt->mu());
  Fabric& fabric = rt->at_now();
  rt->publish();
  const MacAddr mac = cfg.mac.value_or(MacAddr{{0x02, 0, 0, 0xfa, 0, uint8_t(fabric.num_ports() + 1)}});
  auto port = fabric.add_port(mac, spec->port);
  if (!port.ok()) return port.status();
  return std::unique_ptr<drivers::IoPort>(new RealTimePort(rt, *port));
}

}  // namespace uroce::loopback
