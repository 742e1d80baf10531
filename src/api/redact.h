// Keeping secrets out of logs and error messages. Berth's API tokens have
// the shape berth_<id>_<secret>: the id names the token (it is what rate
// limits and audit records key on) and may be shown; the secret never is.
#pragma once

#include <string>
#include <string_view>

namespace berth::server {

// `text` with every berth_<id>_<secret> token cut to berth_<id>_…, so a
// request line, header or echoed input can be logged or returned safely.
std::string RedactSecrets(std::string_view text);

// The token id of an `Authorization: Bearer berth_<id>_<secret>` header
// value, or empty when the header is absent or not of that shape.
std::string BearerTokenId(std::string_view authorization);

}  // namespace berth::server
