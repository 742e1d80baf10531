// Stopping a long command cleanly on Ctrl-C (SIGINT) or SIGTERM: `berth poc
// run` and `rerun` (docs/poc.md "Interrupting a run"). The handler only
// records the signal in an atomic; the command polls it between steps and
// in its waits, cleans up what it made, writes its report and exits
// 128 + the signal (130 for SIGINT, 143 for SIGTERM).
#pragma once

#include <string>

namespace berth::cli {

// Installs the handler for SIGINT and SIGTERM (idempotent).
void InstallInterruptHandlers();

// The signal that asked the command to stop; 0 when none did.
int InterruptSignal();

// "SIGINT", "SIGTERM", else "signal N".
std::string InterruptSignalName(int signal);

}  // namespace berth::cli
