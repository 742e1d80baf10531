// libFuzzer target: REST request decoding. The bytes are read as a request
// ("METHOD PATH?QUERY" line, header lines, a blank line, the body) and pushed
// through what berthd runs before and in its handlers: route matching, every
// declared route's query checks, the matched route's body parser, the rate
// limit key and secret redaction.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/rate_limit.h"
#include "api/redact.h"
#include "api/request_decode.h"

namespace {

using namespace berth::server;

constexpr berth::TimeMs kNow = 1'700'000'000'000;

std::string_view NextLine(std::string_view& rest) {
  auto nl = rest.find('\n');
  std::string_view line = rest.substr(0, nl);
  rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): bytes as text
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::string_view request_line = NextLine(rest);
  auto space = request_line.find(' ');
  std::string_view method = request_line.substr(0, space);
  std::string_view target =
      space == std::string_view::npos ? std::string_view() : request_line.substr(space + 1);
  auto question = target.find('?');
  std::string_view path = target.substr(0, question);
  std::string_view query =
      question == std::string_view::npos ? std::string_view() : target.substr(question + 1);

  std::string authorization;
  std::string remote = "127.0.0.1";
  for (std::string_view line = NextLine(rest); !line.empty(); line = NextLine(rest)) {
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (name == "Authorization") authorization = value;
    if (name == "X-Remote") remote = value;
  }
  std::string_view body = rest;

  const QueryParams params = ParseQueryString(query);
  for (const auto& route : RouteRules()) {
    auto st = CheckQuery(route, params, kNow);
    if (!st && st.error().field.empty()) std::abort();  // errors name the parameter
  }
  if (const RouteRule* route = MatchRoute(method, path); route != nullptr) {
    (void)CheckQuery(*route, params, kNow);
    (void)CheckBody(*route, body);
  }

  // Redaction is idempotent and never keeps a token's secret.
  const std::string redacted = RedactSecrets(request_line);
  if (RedactSecrets(redacted) != redacted) std::abort();
  // Before verification a request counts against its source, whatever its
  // token claims.
  if (SourceKey(remote) != "addr:" + remote) std::abort();
  if (auto id = BearerTokenId(authorization); !id.empty()) {
    // A well-formed token redacts to its id and an ellipsis: nothing of the
    // secret is left. (Searching the output for the secret's text would also
    // find an id that happens to start with the same characters.)
    if (RedactSecrets(authorization) != "Bearer berth_" + id + "_\xE2\x80\xA6") std::abort();
  }
  return 0;
}
