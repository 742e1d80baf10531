// Crash points for fault trials. A test that must show what a crash at one
// exact place leaves behind (half a transaction, a file renamed but not
// synced) names that place in the environment of the process it starts:
//
//   BERTH_FAILPOINTS=plan.after_evictions berthd ...
//
// and the process kills itself with SIGKILL when it reaches it: no
// destructor, no flush, no commit runs, exactly as under kill -9. Unset (as
// in production) a failpoint costs one load of a flag.
#pragma once

#include <string_view>

namespace berth {

// SIGKILLs this process when BERTH_FAILPOINTS (a comma-separated list, read
// once) names `name`.
void Failpoint(std::string_view name);

// Whether BERTH_FAILPOINTS names `name`: for the one switch that breaks a
// guarantee on purpose, `fence.off` (berthd neither installs the database's
// write fence nor steps down when it loses the lease), so that the fault
// trials can show their checker catches a control plane without its fence.
bool FailpointArmed(std::string_view name);

}  // namespace berth
