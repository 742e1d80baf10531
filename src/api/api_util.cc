#include "api/api_util.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>

#include "api/paging.h"
#include "api/redact.h"
#include "api/render.h"
#include "api/request_decode.h"
#include "common/units.h"

namespace berth::server {

void Reply(http::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void ReplyError(http::Response& res, const Error& e) {
  // Errors echo what the caller sent; a token pasted into a path or a
  // parameter must not come back (or reach a proxy's log) in full.
  Reply(res, HttpStatus(e.code),
        ErrorJson(Error{e.code, RedactSecrets(e.message), RedactSecrets(e.field)}));
}

Result<TimeMs> TimeParam(const std::string& s, const std::string& field, TimeMs now) {
  return ParseTimeParam(s, field, now);
}

Error WindowTooLarge(std::string_view what, TimeMs from, TimeMs to, std::size_t max_rows,
                     std::string_view from_field, std::string_view to_field) {
  // One parameter for the whole window (a duration back from now): shorten it.
  const std::string how =
      from_field == to_field
          ? fmt::format("ask for a shorter {}", from_field)
          : fmt::format(
                "ask for a shorter window (a later {} or an earlier {}) and combine the "
                "answers",
                from_field, to_field);
  return Error{Code::kInvalidArgument,
               fmt::format("the window from {} to {} holds more than {} {}, the most one request "
                           "reads (berthd --report-max-rows {}); {}",
                           FormatTimeMs(from), FormatTimeMs(to), max_rows, what, max_rows, how),
               std::string(from_field)};
}

Result<std::size_t> PageLimitParam(const http::Request& req) {
  if (!req.has_param("limit")) return kDefaultPageRows;
  auto limit = ParseIntParam(req.get_param_value("limit"), "limit", 1,
                             static_cast<std::int64_t>(kMaxPageRows));
  if (!limit) return std::unexpected(limit.error());
  return static_cast<std::size_t>(*limit);
}

Result<std::optional<std::int64_t>> AfterIdParam(const http::Request& req, CursorKind kind) {
  if (!req.has_param("after")) return std::optional<std::int64_t>();
  auto id = DecodeIdCursor(kind, req.get_param_value("after"));
  if (!id) return std::unexpected(id.error());
  return std::optional<std::int64_t>(*id);
}

Result<std::optional<std::int64_t>> BaseVersion(const http::Request& req) {
  if (!req.has_param("base_version")) return std::optional<std::int64_t>();
  auto v = ParseIntParam(req.get_param_value("base_version"), "base_version", 1,
                         std::numeric_limits<std::int64_t>::max());
  if (!v) return std::unexpected(v.error());
  return std::optional<std::int64_t>(*v);
}

EnvView EnvViewOf(const Caller& caller, const store::JobRecord& job) {
  const bool submitter =
      caller.scope == Scope::kFull && caller.authenticated() && caller.name == job.submitted_by;
  return submitter ? EnvView::kSubmitter : EnvView::kOther;
}

JobRefs JobRefsOf(const Caller& caller) {
  return caller.platform_admin ? JobRefs::kShowAll : JobRefs::kHideOtherTenants;
}

Result<std::int64_t> PathId(const http::Request& req) {
  const std::string& s = req.matches[1];
  std::int64_t id = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  if (ec != std::errc() || p != s.data() + s.size() || id <= 0) {
    return InvalidField("id",
                        fmt::format("'{}' is not a job id; job ids are positive integers", s));
  }
  return id;
}

}  // namespace berth::server
