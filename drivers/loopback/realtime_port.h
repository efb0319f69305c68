// The loopback driver as drivers/registry.h opens it: a port on an in-memory
// fabric (fabric.h) of this process, run in real time, so that code written
// for a DPDK port (the tools' endpoints, a device per thread) runs on the
// fabric's switch, links and seeded faults unchanged.
//
// A fabric is named: every port whose device spec names it joins it, the
// first one creating it; it lives until its last port (and creator handle)
// is gone. Each rx_burst and tx_burst first moves the fabric's virtual time
// to the steady clock's nanoseconds since the fabric was created, under the
// fabric's mutex, so the threads of one process may each drive a port (the
// fabric itself is single-threaded: the mutex makes each burst one step).
//
// Device spec: "FABRIC[,key=value...]", keys for this port's cable and for
// the faults of frames forwarded to it (fabric.h, LinkConfig / FaultConfig):
//   rate_gbps=R    serialization rate (default 100)
//   delay_us=D     one-way propagation delay, host <-> switch (default 0.5)
//   loss=P  duplicate=P  corrupt=P  reorder=P    per-frame probabilities in [0, 1]
//   jitter_us=J    extra delay uniform in [0, J], order kept
//   seed=S         the fabric's fault seed (only where the port creates the fabric)
// A port's MAC is IoConfig::mac, else 02:00:00:fa:00:<port index + 1>. The
// switch forwards by destination MAC, so a port sees its own frames and
// broadcasts whatever IoConfig::port_takes_mac says. A fabric's capture is of
// the whole switch (every frame at ingress): it is given when the fabric is
// created with create_fabric, not per port.
// Control path; the bursts are one lock and one advance each.
#pragma once

#include <memory>
#include <string>

#include "drivers/io_port.h"
#include "drivers/loopback/fabric.h"

namespace uroce::loopback {

class RealTimeFabric;

/// Creates the fabric name with cfg (its seed and capture) for ports to join;
/// it lives while the handle or one of its ports does. kAlreadyExists if the
/// process has a fabric of that name; Fabric::create's errors.
Result<std::shared_ptr<RealTimeFabric>> create_fabric(const std::string& name, const FabricConfig& cfg);
/// Ends the capture of a fabric create_fabric made: kDataLoss if it could not
/// all be written.
Status close_capture(RealTimeFabric& fabric);

/// Opens a port on the fabric cfg.device names (creating the fabric with the
/// spec's seed if the process has none of that name). kInvalidArgument: a
/// bad spec, a pcap_path (capture the whole fabric with create_fabric), a
/// seed for a fabric that exists, a MAC in use; kResourceExhausted: no
/// mempool for the port.
Result<std::unique_ptr<drivers::IoPort>> open_io_port(const drivers::IoConfig& cfg);

}  // namespace uroce::loopback
