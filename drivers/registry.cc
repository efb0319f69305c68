// The driver registry (registry.h): each name to the driver's opener.
#include "drivers/registry.h"

#include "drivers/dpdk/dpdk_io_port.h"
#include "drivers/loopback/realtime_port.h"

namespace uroce::drivers {

Result<std::unique_ptr<IoPort>> make_packet_io(std::string_view driver, const IoConfig& cfg) {
  if (driver == "dpdk") return dpdk::open_io_port(cfg);
  if (driver == "loopback") return loopback::open_io_port(cfg);
  return Status(StatusCode::kNotFound, "no packet driver of that name (dpdk, loopback)");
}

}  // namespace uroce::drivers
