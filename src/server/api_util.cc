#include "server/api_util.h"

#include <fmt/format.h>

#include <charconv>

#include "common/units.h"
#include "server/render.h"

namespace berth::server {

void Reply(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void ReplyError(httplib::Response& res, const Error& e) {
  Reply(res, HttpStatus(e.code), ErrorJson(e));
}

Result<TimeMs> TimeParam(const std::string& s, const std::string& field, TimeMs now) {
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) {
    TimeMs v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && p == s.data() + s.size()) return v;
  }
  auto d = ParseDurationMs(s);
  if (!d || *d < 0) {
    return InvalidField(field, fmt::format("'{}' is neither milliseconds since the epoch nor a "
                                           "duration back from now such as 7d or 12h",
                                           s));
  }
  return now - *d;
}

Result<std::size_t> LimitParam(const httplib::Request& req, std::size_t fallback) {
  if (!req.has_param("limit")) return fallback;
  const auto& s = req.get_param_value("limit");
  std::size_t limit = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), limit);
  if (ec != std::errc() || p != s.data() + s.size() || limit == 0 || limit > 10000) {
    return InvalidField("limit", "limit must be 1 to 10000");
  }
  return limit;
}

}  // namespace berth::server
