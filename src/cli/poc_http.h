// `berth poc`'s http step: one request to a service through berthd's
// gateway (a URL outside berthd's API), showing an identity's token, with
// the HTTP status exactly as answered (the API client maps errors to
// codes).
#pragma once

#include <cstdint>
#include <string>

namespace berth::cli::poc {

struct HttpCallAnswer {
  int status = 0;     // 0: no answer (error says why)
  std::string body;   // at most 1 MiB of it
  std::string error;  // transport failure, in words
};

// `method` GET or POST `url` (http:// or https://, trusting the system's
// CAs), with `Authorization: Bearer token` when token is not empty, waiting
// at most `timeout_ms` for the answer. A POST body is JSON when it starts
// with '{', else text.
HttpCallAnswer CallUrl(const std::string& method, const std::string& url, const std::string& token,
                       const std::string& body, std::int64_t timeout_ms);

}  // namespace berth::cli::poc
