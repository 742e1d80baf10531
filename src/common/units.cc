#include "common/units.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <ctime>
#include <limits>

namespace berth {
namespace {

bool MulOverflows(std::uint64_t a, std::uint64_t b) {
  return b != 0 && a > std::numeric_limits<std::uint64_t>::max() / b;
}

}  // namespace

Result<std::uint64_t> ParseBytes(std::string_view text) {
  return ParseBytes(text, std::numeric_limits<std::uint64_t>::max());
}

Result<std::uint64_t> ParseBytes(std::string_view text, std::uint64_t max) {
  const auto too_large = [&] {
    if (max == std::numeric_limits<std::uint64_t>::max()) {
      return Fail(Code::kInvalidArgument, fmt::format("size '{}' is too large", text));
    }
    return Fail(Code::kInvalidArgument,
                fmt::format("size '{}' is out of range: at most {}", text, FormatBytes(max)));
  };
  if (text.empty()) return Fail(Code::kInvalidArgument, "empty size; write e.g. 80Gi or 512Mi");
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range) return too_large();
  if (ec != std::errc() || ptr == text.data()) {
    return Fail(Code::kInvalidArgument,
                fmt::format("'{}' is not a size; write an integer with an optional unit "
                            "Ki, Mi, Gi, Ti (1024-based) or K, M, G, T (1000-based)",
                            text));
  }
  std::string_view suffix(ptr, static_cast<std::size_t>(end - ptr));
  struct Unit {
    std::string_view name;
    std::uint64_t factor;
  };
  static constexpr std::array<Unit, 14> kUnits{{{"", 1},
                                                {"B", 1},
                                                {"KiB", 1ULL << 10},
                                                {"MiB", 1ULL << 20},
                                                {"GiB", 1ULL << 30},
                                                {"TiB", 1ULL << 40},
                                                {"Ki", 1ULL << 10},
                                                {"Mi", 1ULL << 20},
                                                {"Gi", 1ULL << 30},
                                                {"Ti", 1ULL << 40},
                                                {"K", 1000ULL},
                                                {"M", 1000ULL * 1000},
                                                {"G", 1000ULL * 1000 * 1000},
                                                {"T", 1000ULL * 1000 * 1000 * 1000}}};
  for (const auto& unit : kUnits) {
    if (suffix == unit.name) {
      if (MulOverflows(value, unit.factor) || value * unit.factor > max) return too_large();
      return value * unit.factor;
    }
  }
  if (suffix.size() == 2 && suffix[1] == 'B') {  // "80GB": vendors mean either
    return Fail(Code::kInvalidArgument,
                fmt::format("'{}' is ambiguous; write {}{}i (1024-based) or {}{} (1000-based)",
                            text, value, suffix[0], value, suffix[0]));
  }
  return Fail(Code::kInvalidArgument,
              fmt::format("unknown size unit '{}' in '{}'; use Ki, Mi, Gi, Ti (or KiB, MiB, "
                          "GiB, TiB), K, M, G or T",
                          suffix, text));
}

Result<std::int64_t> ParseDurationMs(std::string_view text) {
  return ParseDurationMs(text, std::numeric_limits<std::int64_t>::max());
}

Result<std::int64_t> ParseDurationMs(std::string_view text, std::int64_t max_ms) {
  const auto too_long = [&] {
    if (max_ms == std::numeric_limits<std::int64_t>::max()) {
      return Fail(Code::kInvalidArgument, fmt::format("duration '{}' is too long", text));
    }
    return Fail(Code::kInvalidArgument, fmt::format("duration '{}' is out of range: at most {}",
                                                    text, FormatDurationMs(max_ms)));
  };
  if (text.empty()) return Fail(Code::kInvalidArgument, "empty duration; write e.g. 12h or 90m");
  std::int64_t total = 0;
  std::string_view rest = text;
  while (!rest.empty()) {
    std::int64_t value = 0;
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec == std::errc::result_out_of_range && rest.front() != '-') return too_long();
    if (ec != std::errc() || ptr == rest.data() || value < 0) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("'{}' is not a duration; write e.g. 12h, 90m, 30s or 1h30m", text));
    }
    rest.remove_prefix(static_cast<std::size_t>(ptr - rest.data()));
    std::int64_t factor = 0;
    if (rest.starts_with("ms")) {
      factor = 1;
      rest.remove_prefix(2);
    } else if (rest.starts_with("s")) {
      factor = 1000;
      rest.remove_prefix(1);
    } else if (rest.starts_with("m")) {
      factor = 60'000;
      rest.remove_prefix(1);
    } else if (rest.starts_with("h")) {
      factor = 3'600'000;
      rest.remove_prefix(1);
    } else if (rest.starts_with("d")) {
      factor = 86'400'000;
      rest.remove_prefix(1);
    } else {
      return Fail(
          Code::kInvalidArgument,
          fmt::format("duration '{}' needs a unit after each number: ms, s, m, h or d", text));
    }
    if (value > max_ms / factor || value * factor > max_ms - total) return too_long();
    total += value * factor;
  }
  return total;
}

std::string FormatBytes(std::uint64_t bytes) {
  static constexpr std::array<std::string_view, 5> kNames{"", "Ki", "Mi", "Gi", "Ti"};
  std::size_t unit = 0;
  while (unit + 1 < kNames.size() && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return fmt::format("{}{}", bytes, kNames[unit]);
}

std::string FormatDurationMs(std::int64_t ms) {
  if (ms == 0) return "0s";
  if (ms % 1000 != 0) return fmt::format("{}ms", ms);
  std::int64_t s = ms / 1000;
  std::string out;
  if (s >= 3600) {
    out += fmt::format("{}h", s / 3600);
    s %= 3600;
  }
  if (s >= 60) {
    out += fmt::format("{}m", s / 60);
    s %= 60;
  }
  if (s > 0) out += fmt::format("{}s", s);
  return out;
}

std::string FormatTimeMs(std::int64_t unix_ms) {
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", buf.data(), unix_ms % 1000);
}

}  // namespace berth
