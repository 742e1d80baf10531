// GET /v1/audit and GET /v1/audit/verify: the audit trail read back and
// checked (store/audit_log.h). Apart from api.cc so the trail's endpoints
// change without touching the job and policy handlers.
#include <fmt/format.h>

#include <charconv>

#include "common/units.h"
#include "server/api.h"
#include "server/render.h"

namespace berth::server {
namespace {

using nlohmann::json;

void ReplyJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void ReplyFailure(httplib::Response& res, const Error& e) {
  ReplyJson(res, HttpStatus(e.code), ErrorJson(e));
}

Error NoAuditLog() {
  return Error{Code::kUnavailable, "this berthd keeps no audit log", {}};
}

// Milliseconds since the epoch (digits only), or a duration back from `now`
// ("1h", "7d"). The CLI turns RFC 3339 times into milliseconds.
Result<TimeMs> AuditTime(const std::string& s, const std::string& field, TimeMs now) {
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) {
    TimeMs v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && p == s.data() + s.size()) return v;
  }
  auto d = ParseDurationMs(s);
  if (!d || *d < 0) {
    return InvalidField(field, fmt::format("'{}' is neither milliseconds since the epoch nor a "
                                           "duration back from now such as 1h or 7d",
                                           s));
  }
  return now - *d;
}

}  // namespace

void Api::ListAudit(const httplib::Request& req, httplib::Response& res) {
  if (audit_ == nullptr) return ReplyFailure(res, NoAuditLog());
  const TimeMs now = clock_.NowMs();
  store::AuditFilter filter;
  for (const char* name : {"since", "until"}) {
    if (!req.has_param(name)) continue;
    auto t = AuditTime(req.get_param_value(name), name, now);
    if (!t) return ReplyFailure(res, t.error());
    (std::string_view(name) == "since" ? filter.since : filter.until) = *t;
  }
  filter.actor = req.get_param_value("actor");
  filter.tenant = req.get_param_value("tenant");
  filter.action = req.get_param_value("action");
  if (req.has_param("limit")) {
    const auto& s = req.get_param_value("limit");
    std::size_t limit = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), limit);
    if (ec != std::errc() || p != s.data() + s.size() || limit == 0 || limit > 10000) {
      return ReplyFailure(res, Error{Code::kInvalidArgument, "limit must be 1 to 10000", "limit"});
    }
    filter.limit = limit;
  }
  auto records = audit_->Query(filter);
  if (!records) return ReplyFailure(res, records.error());
  json list = json::array();
  for (const auto& e : *records) list.push_back(AuditEntryJson(e));
  ReplyJson(res, 200, json{{"records", list}});
}

void Api::VerifyAudit(const httplib::Request&, httplib::Response& res) {
  if (audit_ == nullptr) return ReplyFailure(res, NoAuditLog());
  auto verdict = audit_->Verify();
  if (!verdict) return ReplyFailure(res, verdict.error());
  // 200 either way: the check ran; `ok` is its answer.
  ReplyJson(res, 200, AuditVerdictJson(*verdict));
}

}  // namespace berth::server
