// The one rule for names users give things (jobs, tenants, queues, pools,
// priority classes): what can safely appear in paths, env values and tables.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

namespace berth::model {

inline constexpr std::size_t kMaxNameLength = 63;

// 1..63 of lower-case letters, digits, '-', '_' and '.', starting and ending
// with a letter or digit.
inline bool IsValidName(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameLength) return false;
  auto ok_edge = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  auto ok_mid = [&](char c) { return ok_edge(c) || c == '-' || c == '_' || c == '.'; };
  return ok_edge(s.front()) && ok_edge(s.back()) && std::all_of(s.begin(), s.end(), ok_mid);
}

// "a, b, c": for error messages that list what is allowed.
inline std::string JoinNames(const auto& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

}  // namespace berth::model
