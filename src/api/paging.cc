#include "api/paging.h"

#include <fmt/format.h>

#include <charconv>

namespace berth::server {
namespace {

Error BadCursor(std::string_view cursor) {
  return Error{Code::kInvalidArgument,
               fmt::format("'{}' is not a cursor of this list; pass the `next` of the page "
                           "before unchanged, or leave `after` out to start at the first page",
                           cursor.size() > 64 ? cursor.substr(0, 64) : cursor),
               "after"};
}

}  // namespace

std::string EncodeCursor(CursorKind kind, std::string_view key) {
  return fmt::format("{}{}", static_cast<char>(kind), key);
}

Result<std::string> DecodeCursor(CursorKind kind, std::string_view cursor) {
  if (cursor.size() < 2 || cursor.front() != static_cast<char>(kind)) {
    return std::unexpected(BadCursor(cursor));
  }
  return std::string(cursor.substr(1));
}

Result<std::int64_t> DecodeIdCursor(CursorKind kind, std::string_view cursor) {
  auto key = DecodeCursor(kind, cursor);
  if (!key) return std::unexpected(key.error());
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(key->data(), key->data() + key->size(), v);
  if (ec != std::errc() || p != key->data() + key->size() || v <= 0) {
    return std::unexpected(BadCursor(cursor));
  }
  return v;
}

}  // namespace berth::server
