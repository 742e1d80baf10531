// A run's log as berthd keeps it: the bytes the agent ships at absolute
// offsets, bounded by a size limit. Past the limit berthd keeps the head (the
// first quarter of the limit: how the job started, its configuration) and a
// rolling tail (the latest output, up to the limit), and readers see one
// marker line between them that says how many bytes were dropped.
//
// Offsets stay absolute whatever was dropped: the agent resends chunks after
// reconnections and resumes from Received(), so a chunk that lands in the
// dropped middle is simply ignored, and Received() counts every byte ever
// received rather than the file's size.
//
// On disk, next to the log path P (Controller::LogPath):
//   P or P.<gen>   the bytes kept: absolute [0, head) then [head+dropped, ...)
//   P.index        {"gen", "head", "dropped"}, absent until the first trim
// A trim writes the next generation's file, then replaces P.index
// atomically (the commit), then deletes the old file: a berthd killed at any
// instant finds one consistent pair. Readers retry when a trim removes the
// file they were about to open.
//
// Writers must be serialised by the caller (the controller holds a mutex);
// readers may run concurrently with a writer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"

namespace berth::server {

// Writes `data` at absolute `offset`, then trims the log if it is more than a
// quarter past `limit` (0: no limit). The slack keeps trims rare: each one
// copies up to `limit` bytes.
[[nodiscard]] Status WriteRunLog(const std::filesystem::path& path, std::uint64_t offset,
                                 std::string_view data, std::uint64_t limit);

// Makes every byte of the log received so far durable: fsyncs the current
// generation's file, then the run's directory and the one above it (the
// file's and the job directory's entries), so a power cut afterwards loses
// none of it. A log that was never written (a silent run) is nothing to
// sync. Called once per run end, before its exit is recorded and
// acknowledged (Controller::OnRunExited), never per chunk: chunks are only
// written, and until the exit is acknowledged the agent keeps its own copy
// and resends whatever berthd lost from RunLogReceived(). Returns the bytes
// received. Safe beside a writer of another run; the caller makes sure no
// chunk of this run is written meanwhile (they arrive on the stream that
// carries the exit).
[[nodiscard]] Result<std::uint64_t> SyncRunLog(const std::filesystem::path& path);

// How many bytes of the log berthd has received (absolute), for the agent's
// resume offset. 0 when there is no log.
std::uint64_t RunLogReceived(const std::filesystem::path& path);

// What a reader sees from absolute offset `from`: at most `max` bytes of
// kept output, or, where `from` falls in the dropped middle, the marker line
// alone. `next` is where to continue; empty `data` means the end for now.
struct RunLogSlice {
  std::string data;
  std::uint64_t next = 0;
};
RunLogSlice ReadRunLog(const std::filesystem::path& path, std::uint64_t from, std::size_t max,
                       std::uint64_t limit);

// The last `bytes` bytes of the log as readers see it (the marker included
// when the tail reaches back into the dropped middle).
std::string RunLogTail(const std::filesystem::path& path, std::size_t bytes, std::uint64_t limit);

// Everything a reader sees (head, marker, tail); for tests and small logs.
std::string ReadWholeRunLog(const std::filesystem::path& path, std::uint64_t limit);

}  // namespace berth::server
