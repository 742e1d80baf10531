// Reading a run's outputs for berthd (OutputRequest): a directory's entries
// or a slice of a file below the run's output directory. The directory is
// the run identity's and so is everything the job made in it, so what is
// read is only what the identity owns: a path through a symbolic link, or to
// anything someone else owns (a hard link to another's file), is refused.
// The agent reads as root, but never beyond what the job could read itself.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace berth::agent {

struct OutputEntry {
  std::string name;
  std::string type;  // "file", "dir", "other"
  std::uint64_t size = 0;
  std::int64_t modified_ms = 0;
};

struct OutputRead {
  bool is_dir = false;
  std::vector<OutputEntry> entries;  // a directory's, sorted by name
  bool truncated = false;            // more than model::kMaxOutputEntries
  std::uint64_t size = 0;            // a file's
  std::int64_t modified_ms = 0;
  std::string data;  // a file's bytes from `offset`, at most `length`
};

// What lies at `path` (model::SplitOutputPath) below `out_dir`: a listing,
// or up to `length` bytes (at most model::kMaxOutputChunk) from `offset`.
// NotFound for a missing path, InvalidArgument for a link or a special file
// or a bad path, PermissionDenied for something the directory's owner does
// not own.
Result<OutputRead> ReadOutputAt(const std::filesystem::path& out_dir, std::string_view path,
                                std::uint64_t offset, std::uint32_t length);

}  // namespace berth::agent
