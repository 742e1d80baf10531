// GET /v1/jobs: the job list, newest first, in pages (paging.h). Each job
// is a summary (what `berth jobs` shows) unless `full=true` asks for the
// spec and placement too; the store reads it on its read connection, so a
// long list never holds up a submission. Apart from api.cc so the list's
// paging changes without touching the other job handlers.
#include <fmt/format.h>

#include <charconv>

#include "api/api.h"
#include "api/api_util.h"
#include "api/paging.h"
#include "api/render.h"
#include "api/request_decode.h"
#include "model/job.h"

namespace berth::server {
namespace {

using nlohmann::json;

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    auto end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

void Api::ListJobs(const http::Request& req, http::Response& res, const model::TenantScope& scope) {
  store::JobFilter filter;
  if (req.has_param("state")) {
    for (const auto& s : SplitCommas(req.get_param_value("state"))) {
      auto state = model::ParseJobState(s);
      if (!state) {
        return ReplyError(res, Error{Code::kInvalidArgument,
                                     fmt::format("unknown state '{}'; use Pending, Scheduled, "
                                                 "Running, Succeeded, Failed or Cancelled",
                                                 s),
                                     "state"});
      }
      filter.states.push_back(*state);
    }
  }
  filter.tenant = req.get_param_value("tenant");
  filter.queue = req.get_param_value("queue");
  if (req.has_param("array")) {
    const std::string& a = req.get_param_value("array");
    std::int64_t array = 0;
    auto [p, ec] = std::from_chars(a.data(), a.data() + a.size(), array);
    if (ec != std::errc() || p != a.data() + a.size() || array <= 0) {
      return ReplyError(
          res, Error{Code::kInvalidArgument,
                     fmt::format("'{}' is not an array id; an array's id is its first job's id", a),
                     "array"});
    }
    filter.array_id = array;
  }
  bool full = false;
  if (req.has_param("full")) {
    auto f = ParseBoolParam(req.get_param_value("full"), "full");
    if (!f) return ReplyError(res, f.error());
    full = *f;
  }
  if (req.has_param("after")) {
    auto after = DecodeIdCursor(CursorKind::kJobs, req.get_param_value("after"));
    if (!after) return ReplyError(res, after.error());
    filter.after_id = *after;
  }
  // The one authorization layer decides whose jobs any page may hold; a
  // cursor only says where the page starts.
  filter.tenants = scope;
  auto limit = PageLimitParam(req);
  if (!limit) return ReplyError(res, limit.error());
  // One row more than the page says whether another page follows.
  filter.limit = *limit + 1;
  filter.with_runs = full;
  auto jobs = store_.ListJobs(filter);
  if (!jobs) return ReplyError(res, jobs.error());
  const bool more = jobs->size() > *limit;
  if (more) jobs->resize(*limit);
  json list = json::array();
  const Caller& caller = CurrentCaller();
  for (const auto& j : *jobs) {
    list.push_back(full ? JobJson(j, false, EnvViewOf(caller, j), JobRefsOf(caller))
                        : JobSummaryJson(j, JobRefsOf(caller)));
  }
  json body{{"jobs", std::move(list)}};
  if (more) body["next"] = EncodeCursor(CursorKind::kJobs, std::to_string(jobs->back().id));
  Reply(res, 200, body);
}

}  // namespace berth::server
