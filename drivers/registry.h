// The driver registry: the one way the tools and the verbs library open a
// port, by the driver's name (as Seastar picks its network stack by name):
//   "dpdk"      any rte_ethdev port (drivers/dpdk/dpdk_io_port.h): a NIC, memif,
//               af_packet, af_xdp, tap, ring, null; EAL must be up
//   "loopback"  a port on an in-memory fabric of this process, in real time
//               (drivers/loopback/realtime_port.h): the switch, links and
//               seeded faults of `uroce sim` under threads that each drive a
//               port; EAL must be up (the fabric's frames are rte_mbufs)
// The stack sees only the PacketIo (io()); which driver is behind it shows
// only in IoPortInfo. Control path.
#pragma once

#include <array>
#include <memory>
#include <string_view>

#include "drivers/io_port.h"

namespace uroce::drivers {

inline constexpr std::array<std::string_view, 2> kDriverNames = {"dpdk", "loopback"};

/// Opens a port of the driver named driver from cfg. kNotFound for a name not
/// in kDriverNames; otherwise the driver's own errors.
Result<std::unique_ptr<IoPort>> make_packet_io(std::string_view driver, const IoConfig& cfg);

}  // namespace uroce::drivers
