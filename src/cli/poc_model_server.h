// Whether a service case's replica can run the model server the run names.
// A replica runs as its tenant's uid, not as the operator who started the
// run, so a berth-model-server under a private directory (a build under
// /root, a clone in a 0700 temporary directory) is found but cannot be
// executed there, and the inference case fails with "Permission denied".
// The run says so before it starts (docs/poc.md).
#pragma once

#include <filesystem>
#include <string>

namespace berth::cli::poc {

// Why another uid cannot execute `path` on this machine: the first
// directory on the way that others may not enter, or the file when others
// may not execute it, with the fix; "" when they can, and also when `path`
// is not absolute (a name looked up on the node's PATH) or does not exist
// here (the nodes are other machines, where only the operator can check).
std::string ModelServerUnreachable(const std::filesystem::path& path);

}  // namespace berth::cli::poc
