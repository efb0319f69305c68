// `uroce sim --scenario loss|reorder|blackhole|balance`: loss recovery and
// multipath on the leaf/spine fabric, go-back-N beside the extension
// (apps/sim/sim_paths.cc). The options are declared with the rest of `uroce
// sim`'s in apps/sim/sim.cc (kSimOptions), one table for the command.
#pragma once

#include "apps/common/args.h"

namespace uroce::apps {

/// Runs the scenario args names (loss, reorder, blackhole or balance).
/// Returns the process exit code: 0; 1 if a set-up fails or an --expect-*
/// target is missed; 2 on a bad combination of options.
int run_path_scenario(const Args& args);

}  // namespace uroce::apps
