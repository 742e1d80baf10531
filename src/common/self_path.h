// Where the running executable lives, for finding the binaries installed
// beside it (berthd's berth-agent, the agent's berth-shim, the CLI's
// berth-model-server). Read from /proc/self/exe: the real file, whatever
// symbolic link or relative path the process was started through.
#pragma once

#include <filesystem>
#include <optional>

namespace berth {

// The directory of the file `link` (a symbolic link such as
// /proc/self/exe) points to; nullopt when it cannot be read (not a link,
// missing, or /proc not mounted).
std::optional<std::filesystem::path> LinkTargetDir(const std::filesystem::path& link);

// The running executable's directory (LinkTargetDir("/proc/self/exe")).
std::optional<std::filesystem::path> ExecutableDir();

}  // namespace berth
