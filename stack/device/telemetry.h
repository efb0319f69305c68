// DPDK telemetry for uroce (the /uroce/* commands of dpdk-telemetry.py and
// `uroce stat`). Every device (Context) registers itself at open_device and
// leaves at close_device; the commands, registered once per process, read
// the registered devices from DPDK's telemetry thread.
//
// Threading: the telemetry thread reads while the engine lcores run. It holds
// telemetry_mutex() while it reads, and so do open_device/close_device and
// create_qp/destroy_qp (control path, where a lock is allowed), so no device
// or QP is freed under it; the engine's data path takes no lock. Fields the
// data path writes (PSNs, counters) are read without synchronisation, as
// DPDK's own ethdev statistics are: each value is one aligned load, a reply
// is a snapshot whose fields may be a poll apart.
#pragma once

#include <mutex>

namespace uroce {

struct Context;

/// The lock described above.
std::mutex& telemetry_mutex();
/// Adds ctx to the devices the commands report (and registers the commands
/// with DPDK on first use). Called by open_device with telemetry_mutex() not held.
void telemetry_add(Context* ctx);
/// Removes ctx; afterwards no command reads it. Called by close_device.
void telemetry_remove(Context* ctx);

}  // namespace uroce
