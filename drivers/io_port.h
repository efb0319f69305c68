// What every packet driver hands out: a port, opened from one IoConfig, that
// gives the stack its PacketIo and the tools what every port has (name,
// driver, MTU, MAC, frames it lost, its capture). drivers/registry.h opens one
// by the driver's name; each driver implements IoPort in its own folder.
// Control path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <uroce/addr.h>
#include <uroce/packet_io.h>
#include <uroce/status.h>

namespace uroce::drivers {

struct IoConfig {
  /// The driver's device spec. dpdk: an EAL device spec, or the name or id of
  /// a port EAL probed already. loopback: "FABRIC[,key=value...]"
  /// (drivers/loopback/realtime_port.h).
  std::string device;
  uint16_t mtu = kRoceJumboMtu;  ///< wanted Ethernet MTU; clipped to what the port allows
  /// The MAC the stack uses (unset: the port's own).
  std::optional<MacAddr> mac;
  /// The port takes mac as its own. false: a port that has a MAC of its own
  /// keeps it and runs promiscuous, the stack answering for mac in software
  /// (on af_packet setting a MAC would change the kernel interface's). A
  /// loopback port has none of its own and always takes mac.
  bool port_takes_mac = false;
  uint32_t link_timeout_ms = 5000;  ///< wait this long for link up when opening; 0: do not wait
  std::string pcap_path;            ///< non-empty: capture every frame of the port from the start
};

struct IoPortInfo {
  std::string name;    ///< e.g. "net_memif0", "0000:03:00.0", "loopback:lab/1"
  std::string driver;  ///< e.g. "net_memif", "loopback"
  uint16_t mtu = 0;    ///< MTU in effect
  MacAddr mac;         ///< the port's MAC in effect
};

class IoPort {
 public:
  virtual ~IoPort() = default;
  /// What the device polls: one rx/tx queue of the port.
  virtual PacketIo& io() = 0;
  virtual const IoPortInfo& info() const = 0;
  /// The port's counters (a driver fills those it counts; the rest stay 0).
  virtual Result<PortStats> stats() const = 0;
  /// Ends IoConfig::pcap_path's capture: kDataLoss if it could not all be
  /// written. OK without a capture.
  virtual Status stop_capture() = 0;
  /// For a port opened without waiting for its link (link_timeout_ms 0),
  /// called from time to time off the data path: the first call that finds
  /// the link up does what the open would have done then, so that the first
  /// frames pay no start-up cost (memif: faults its shared regions in); the
  /// others do nothing. Safe beside the data path.
  virtual void warm_up() {}
  /// Takes the port's link down for good, as a process's exit would (a
  /// memif peer sees it go), keeping io() and its pool valid memory until
  /// the port is destroyed, for threads that may still reach them; the
  /// caller moves no frame after. A port with nothing outside the process
  /// to tell (loopback) does nothing.
  virtual void shut_down() {}
};

}  // namespace uroce::drivers
