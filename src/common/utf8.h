// Whether bytes are valid UTF-8 (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF), and a printable form of bytes that are not. What
// reaches a protobuf `string` field or a JSON document must pass.
#pragma once

#include <string>
#include <string_view>

namespace berth {

bool ValidUtf8(std::string_view s);

// `s` with every byte that is not part of a valid UTF-8 sequence written as
// \xNN, so the result is valid UTF-8 and says which bytes were there.
std::string EscapeInvalidUtf8(std::string_view s);

}  // namespace berth
