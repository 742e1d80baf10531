// Whether bytes are valid UTF-8 (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF), and a printable form of bytes that are not. What
// reaches a protobuf `string` field or a JSON document must pass.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace berth {

bool ValidUtf8(std::string_view s);

// The offset of the first byte of `s` that does not start a valid UTF-8
// sequence; nullopt when `s` is valid UTF-8.
std::optional<std::size_t> FirstInvalidUtf8(std::string_view s);

// Refuses text that is not valid UTF-8: kInvalidArgument naming `field` (its
// own odd bytes escaped, so the error itself can be written as JSON), the
// first odd byte and its offset in `s`.
Status CheckUtf8(std::string_view s, std::string_view field);

// `s` with every byte that is not part of a valid UTF-8 sequence written as
// \xNN, so the result is valid UTF-8 and says which bytes were there.
std::string EscapeInvalidUtf8(std::string_view s);

}  // namespace berth
