// `uroce run --device-files`: a kernel verbs device's /dev and sysfs files
// for one program, in a private mount namespace (device_files.cc says which,
// why and how).
#pragma once

#include <cstdint>

namespace uroce::apps {

/// Moves the calling process into a private mount namespace whose /dev has
/// infiniband/uverbs0 (the kernel's where it has one) and whose /sys/class has
/// infiniband/uroce0/ports/1/gid_attrs/types/0..gid_entries-1, beside
/// everything the system's have. Needs root (CAP_SYS_ADMIN). Returns false
/// after printing the step that failed and its errno to stderr; the
/// namespace may then be half made, so the caller must not go on to
/// run the program.
bool make_device_files(uint32_t gid_entries);

}  // namespace uroce::apps
