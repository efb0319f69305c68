// The GID table of uroce0 as Linux lays out a RoCE device's (ib_core's
// roce_gid_mgmt): for each address, the link-local GID of the MAC, then
// UROCE_IP, then UROCE_IP6, one RoCEv1 entry and then one RoCEv2 entry.
// provider.cc fills the table so; `uroce run --device-files` writes the
// same types as sysfs's gid_attrs/types, which UCX reads (device_files.cc).
#pragma once

#include <cstdint>
#include <iterator>

#include "stack/net/gid_table.h"

namespace uroce::ibv {

/// The types of an address's entries, in table order.
inline constexpr net::GidType kGidTypesPerAddress[] = {net::GidType::kRoceV1, net::GidType::kRoceV2};

/// The type of GID table entry `index`.
constexpr net::GidType gid_type_at(uint32_t index) {
  return kGidTypesPerAddress[index % std::size(kGidTypesPerAddress)];
}

}  // namespace uroce::ibv
