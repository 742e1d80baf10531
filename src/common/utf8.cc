#include "common/utf8.h"

#include <fmt/format.h>

#include <cstdint>

namespace berth {
namespace {

// The length of the valid sequence at `s[i]`, or 0 when it is not one.
std::size_t SequenceAt(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<std::uint8_t>(s[i + k]); };
  const auto cont = [&](std::size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const std::uint8_t lead = b(0);
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return cont(1) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (lead == 0xE0 && b(1) < 0xA0) return 0;  // overlong
    if (lead == 0xED && b(1) > 0x9F) return 0;  // surrogates
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (lead == 0xF0 && b(1) < 0x90) return 0;  // overlong
    if (lead == 0xF4 && b(1) > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

bool ValidUtf8(std::string_view s) {
  return !FirstInvalidUtf8(s).has_value();
}

std::optional<std::size_t> FirstInvalidUtf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = SequenceAt(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

Status CheckUtf8(std::string_view s, std::string_view field) {
  const auto at = FirstInvalidUtf8(s);
  if (!at) return Ok();
  return InvalidField(
      EscapeInvalidUtf8(field),
      fmt::format("is not valid UTF-8 (byte 0x{:02X} at offset {}); send UTF-8 text",
                  static_cast<std::uint8_t>(s[*at]), *at));
}

std::string EscapeInvalidUtf8(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (const std::size_t n = SequenceAt(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    const auto byte = static_cast<std::uint8_t>(s[i]);
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 0xF];
    ++i;
  }
  return out;
}

}  // namespace berth
