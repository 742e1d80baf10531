// Short human forms for the CLI's tables: ages ("3m12s"), memory sizes that
// are rarely exact powers of two ("503.7Gi"), CPU millis ("16", "1500m") and
// commands quoted the way a shell would read them back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace berth::cli {

// Two significant units at most, coarser as the age grows, like kubectl:
// "45s", "3m12s", "42m", "5h3m", "20h", "3d4h", "12d". Negative ages (clock
// skew between berthd and this machine) print as "0s".
std::string FormatAge(std::int64_t elapsed_ms);
// A unix-ms time as ISO 8601 in UTC, to the second: "2026-12-06T22:55:48Z".
std::string FormatUtc(std::int64_t unix_ms);

// FormatAge(now - then), or "-" when `then` is unknown.
std::string AgeSince(std::int64_t now_ms, std::optional<std::int64_t> then_ms);

// The exact binary form when there is a short one ("80Gi"), otherwise one
// decimal in the largest unit that keeps the number at least 1 ("503.7Gi").
std::string FormatMemory(std::uint64_t bytes);

// Whole CPUs as a plain number ("16"), fractions in millis ("1500m").
std::string FormatCpuMillis(std::int64_t millis);

// How a process ended: the exit code ("0", "137") or the signal that killed it
// ("SIGKILL"), or "-" while it runs. A signal wins when both are given.
std::string FormatExit(std::optional<std::int64_t> exit_code, std::optional<std::int64_t> signal);

// Joins argv with spaces, single-quoting words a POSIX shell would split.
std::string ShellJoin(const std::vector<std::string>& argv);

}  // namespace berth::cli
