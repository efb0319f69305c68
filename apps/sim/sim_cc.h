// `uroce sim --scenario S`: congestion-control scenarios on the in-memory
// fabric (apps/sim/sim_cc.cc). The options are declared with the rest of
// `uroce sim`'s in apps/sim/sim.cc (kSimOptions), one table for the command.
#pragma once

#include "apps/common/args.h"

namespace uroce::apps {

/// Runs the scenario args names (--scenario is not "faults"). Returns the
/// process exit code: 0, or 1 if an --expect-* target is missed or set-up fails.
int run_cc_scenario(const Args& args);

}  // namespace uroce::apps
