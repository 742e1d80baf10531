#include "cli/format.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <ctime>
#include <string_view>

#include "common/units.h"

namespace berth::cli {

std::string FormatUtc(std::int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string FormatAge(std::int64_t elapsed_ms) {
  std::int64_t s = elapsed_ms < 0 ? 0 : elapsed_ms / 1000;
  auto pair = [](std::int64_t big, char big_unit, std::int64_t small, char small_unit) {
    return small == 0 ? fmt::format("{}{}", big, big_unit)
                      : fmt::format("{}{}{}{}", big, big_unit, small, small_unit);
  };
  if (s < 60) return fmt::format("{}s", s);
  std::int64_t m = s / 60;
  if (m < 10) return pair(m, 'm', s % 60, 's');
  if (m < 60) return fmt::format("{}m", m);
  std::int64_t h = m / 60;
  if (h < 8) return pair(h, 'h', m % 60, 'm');
  if (h < 48) return fmt::format("{}h", h);
  std::int64_t d = h / 24;
  if (d < 8) return pair(d, 'd', h % 24, 'h');
  return fmt::format("{}d", d);
}

std::string AgeSince(std::int64_t now_ms, std::optional<std::int64_t> then_ms) {
  return then_ms ? FormatAge(now_ms - *then_ms) : "-";
}

std::string FormatMemory(std::uint64_t bytes) {
  // Exact forms are only kept while short: "80Gi" yes, "123456" bytes no.
  std::string exact = FormatBytes(bytes);
  if (bytes < 1024 || (exact.ends_with('i') && exact.size() <= 6)) return exact;
  static constexpr std::array<std::string_view, 5> kUnits{"", "Ki", "Mi", "Gi", "Ti"};
  std::size_t unit = 0;
  double value = static_cast<double>(bytes);
  while (unit + 1 < kUnits.size() && value >= 1024.0) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f}{}", value, kUnits[unit]);
}

std::string FormatCpuMillis(std::int64_t millis) {
  if (millis % 1000 == 0) return std::to_string(millis / 1000);
  return fmt::format("{}m", millis);
}

std::string FormatExit(std::optional<std::int64_t> exit_code, std::optional<std::int64_t> signal) {
  if (signal && *signal != 0) {
    // sigabbrev_np is thread-safe, unlike strsignal; it knows no real-time signals.
    const char* name =
        *signal > 0 && *signal < 65 ? sigabbrev_np(static_cast<int>(*signal)) : nullptr;
    return name != nullptr ? fmt::format("SIG{}", name) : fmt::format("signal {}", *signal);
  }
  return exit_code ? std::to_string(*exit_code) : "-";
}

std::string ShellJoin(const std::vector<std::string>& argv) {
  constexpr std::string_view kSafe =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%";
  std::string out;
  for (const auto& word : argv) {
    if (!out.empty()) out += ' ';
    if (!word.empty() && word.find_first_not_of(kSafe) == std::string::npos) {
      out += word;
      continue;
    }
    out += '\'';
    for (char c : word) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

}  // namespace berth::cli
