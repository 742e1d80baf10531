#include "cli/poc_http.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>

#include "cli/version.h"

namespace berth::cli::poc {
namespace {

constexpr std::size_t kPocHttpMaxBody = std::size_t{1} << 20;

}  // namespace

HttpCallAnswer CallUrl(const std::string& method, const std::string& url, const std::string& token,
                       const std::string& body, std::int64_t timeout_ms) {
  HttpCallAnswer out;
  // scheme://authority, then the path (with its query).
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) {
    out.error = fmt::format("'{}' is not an http(s) URL", url);
    return out;
  }
  const auto path_at = url.find('/', scheme_end + 3);
  const std::string origin = url.substr(0, path_at);
  const std::string path = path_at == std::string::npos ? "/" : url.substr(path_at);
  httplib::Client client(origin);
  if (!client.is_valid()) {
    out.error = fmt::format("'{}' is not a URL this client can call", origin);
    return out;
  }
  const auto timeout = std::chrono::milliseconds(timeout_ms);
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  httplib::Headers headers{{"User-Agent", fmt::format("berth/{} poc", Version())}};
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  auto res = method == "POST"
                 ? client.Post(path, headers, body,
                               body.starts_with("{") ? "application/json" : "text/plain")
                 : client.Get(path, headers);
  if (!res) {
    out.error = fmt::format("{} {}: {}", method, url, httplib::to_string(res.error()));
    return out;
  }
  out.status = res->status;
  out.body = res->body.substr(0, kPocHttpMaxBody);
  return out;
}

}  // namespace berth::cli::poc
