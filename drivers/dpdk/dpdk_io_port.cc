// The dpdk driver behind IoPort: a DpdkPort with one queue pair.
#include "drivers/dpdk/dpdk_io_port.h"

#include <utility>

#include "drivers/dpdk/dpdk_io.h"

namespace uroce::dpdk {
namespace {

class DpdkIoPort final : public drivers::IoPort {
 public:
  explicit DpdkIoPort(std::unique_ptr<DpdkPort> port)
      : port_(std::move(port)),
        info_{.name = port_->info().name, .driver = port_->info().driver, .mtu = port_->info().mtu,
              .mac = port_->info().mac} {}

  PacketIo& io() override { return port_->queue(0); }
  const drivers::IoPortInfo& info() const override { return info_; }
  Result<PortStats> stats() const override { return port_->stats(); }
  Status stop_capture() override { return port_->stop_capture(); }
  void warm_up() override { port_->warm_up(); }
  void shut_down() override { port_->shut_down(); }

 private:
  std::unique_ptr<DpdkPort> port_;
  drivers::IoPortInfo info_;
};

}  // namespace

Result<std::unique_ptr<drivers::IoPort>> open_io_port(const drivers::IoConfig& cfg) {
  DpdkPortConfig pc;
  pc.device = cfg.device;
  pc.mtu = cfg.mtu;
  if (cfg.port_takes_mac) {
    pc.mac = cfg.mac;
  } else {
    pc.promiscuous = true;
  }
  pc.link_timeout_ms = cfg.link_timeout_ms;
  pc.pcap_path = cfg.pcap_path;
  auto port = DpdkPort::open(pc);
  if (!port.ok()) return port.status();
  return std::unique_ptr<drivers::IoPort>(new DpdkIoPort(std::move(port).value()));
}

}  // namespace uroce::dpdk
