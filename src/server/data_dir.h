// berthd's data directory and who may enter it (docs/security.md). Every
// file berthd keeps there (the database, the audit chain, tokens, the CA
// key, job logs) is berthd's alone: files 0600, directories 0700, and the
// process umask 077 so nothing created later is looser. The one exception
// is the way to the embedded agents' work directories: with embedded agents
// the data directory and agents/ are 0711, so a job may pass through to its
// own working directory but can list and open nothing else.
#pragma once

#include <filesystem>

#include "common/status.h"

namespace berth::server {

// Creates `dir` if needed and tightens it and its top-level entries as
// above; `embedded_agents` opens the pass-through to agents/.
Status SecureDataDir(const std::filesystem::path& dir, bool embedded_agents);

}  // namespace berth::server
