// A job's outputs (docs/jobs.md#outputs): the files its run left in
// BERTH_OUTPUT_DIR on the node, which its tenant lists and downloads
// through berthd. A path into them is relative to that directory; berthd
// checks it before it asks the node, and the agent checks it again.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace berth::model {

// How much of a file one request to a node carries, and how many entries a
// listing holds.
inline constexpr std::uint32_t kMaxOutputChunk = 1U << 20;
inline constexpr std::size_t kMaxOutputEntries = 4096;
inline constexpr std::size_t kMaxOutputPath = 4096;

// The components of `path` ("" or "." for the directory itself): relative,
// '/'-separated, empty components ignored. Refused, naming `field`: an
// absolute path, '..' or '.' inside it, NUL bytes, over kMaxOutputPath.
Result<std::vector<std::string>> SplitOutputPath(std::string_view path,
                                                 std::string_view field = "path");

}  // namespace berth::model
