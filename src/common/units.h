// Parsing and printing of the quantities users write in specs: byte sizes
// ("80Gi", "512Mi", "16G") and durations ("12h", "90m", "30s", "1h30m").
// Quantities are integers (bytes, milliseconds): no floating point in the
// scheduler's arithmetic.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace berth {

// Accepts a plain integer (bytes) or an integer with one of the suffixes
// Ki Mi Gi Ti (powers of 1024) or K M G T (powers of 1000).
Result<std::uint64_t> ParseBytes(std::string_view text);
// The same, refusing sizes above `max` (and those too large for 64 bits)
// with a message that names `max` ("... is out of range: at most 1024Ti").
Result<std::uint64_t> ParseBytes(std::string_view text, std::uint64_t max);

// Accepts sequences of <integer><unit> with units ms, s, m, h, d ("1h30m").
Result<std::int64_t> ParseDurationMs(std::string_view text);
// The same, refusing durations above `max_ms` with a message that names it.
Result<std::int64_t> ParseDurationMs(std::string_view text, std::int64_t max_ms);

// "80Gi", "512Mi", "123" — the shortest exact binary form.
std::string FormatBytes(std::uint64_t bytes);
// "12h", "1h30m", "45s", "250ms".
std::string FormatDurationMs(std::int64_t ms);
// ISO 8601 UTC with milliseconds: "2026-11-29T19:28:11.123Z".
std::string FormatTimeMs(std::int64_t unix_ms);

}  // namespace berth
