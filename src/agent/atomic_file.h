// Crash-safe small-file I/O for the run directories. The shim and the runner
// communicate only through files that may be read at any moment and must
// survive a power cut, so every write is write-tmp, fsync, rename, fsync-dir.
// Only libc and the standard library: berth-shim links this file too.
#pragma once

#include <optional>
#include <string>

namespace berth::agent {

// Replaces `path` with `content` atomically and durably. Returns 0 on success,
// else the errno of the step that failed.
int WriteFileAtomic(const std::string& path, const std::string& content);

// Whole-file read; nullopt when the file does not exist or cannot be read.
std::optional<std::string> ReadWholeFile(const std::string& path);

// fsync on a directory, so a rename or mkdir inside it is durable.
int SyncDirectory(const std::string& dir);

// The directory part of `path` ("." when there is none).
std::string DirName(const std::string& path);

}  // namespace berth::agent
