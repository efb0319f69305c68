// Address handles (IBA 10.2.2.2) as the UD requester reads them.
#pragma once

#include <uroce/verbs.h>

#include "stack/net/gid_table.h"

namespace uroce::transport {

/// An address handle and the GID table entry it sends from, copied at
/// create_ah (as ib_core pins an AH's sgid_attr): the data path never looks
/// the table up, and a later change of the table does not touch the AH.
struct AhImpl : Ah {
  net::GidEntry sgid;
};

}  // namespace uroce::transport
