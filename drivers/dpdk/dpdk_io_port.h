// The dpdk driver as drivers/registry.h opens it: one queue pair of a
// DpdkPort (dpdk_io.h) behind the driver-neutral IoPort. Control path.
#pragma once

#include <memory>

#include "drivers/io_port.h"

namespace uroce::dpdk {

/// Opens, configures and starts the rte_ethdev port cfg.device names, with
/// one queue pair (DpdkPort::open's errors). EAL must be up.
Result<std::unique_ptr<drivers::IoPort>> open_io_port(const drivers::IoConfig& cfg);

}  // namespace uroce::dpdk
