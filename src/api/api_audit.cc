// GET /v1/audit and GET /v1/audit/verify: the audit trail read back and
// checked (store/audit_log.h). Apart from api.cc so the trail's endpoints
// change without touching the job and policy handlers.
#include <fmt/format.h>

#include <charconv>

#include "api/api.h"
#include "api/api_util.h"
#include "api/paging.h"
#include "api/render.h"
#include "common/units.h"

namespace berth::server {
namespace {

using nlohmann::json;

Error NoAuditLog() {
  return Error{Code::kUnavailable, "this berthd keeps no audit log", {}};
}

}  // namespace

void Api::ListAudit(const http::Request& req, http::Response& res,
                    const model::TenantScope& scope) {
  if (audit_ == nullptr) return ReplyError(res, NoAuditLog());
  const TimeMs now = clock_.NowMs();
  store::AuditFilter filter;
  for (const char* name : {"since", "until"}) {
    if (!req.has_param(name)) continue;
    auto t = TimeParam(req.get_param_value(name), name, now);
    if (!t) return ReplyError(res, t.error());
    (std::string_view(name) == "since" ? filter.since : filter.until) = *t;
  }
  filter.actor = req.get_param_value("actor");
  filter.tenant = req.get_param_value("tenant");
  // A tenant-admin reads its tenant's records; the whole trail is the
  // platform admins'.
  if (const Caller& caller = CurrentCaller(); !caller.platform_admin) {
    if (filter.tenant.empty()) {
      return ReplyError(res, Error{Code::kPermissionDenied,
                                   fmt::format("{} may read the audit records of a tenant it "
                                               "administers only; add tenant=NAME (berth audit "
                                               "--tenant NAME)",
                                               caller.name),
                                   "tenant"});
    }
    if (auto st = Authorizer::CheckNamed(caller, filter.tenant, Need::kManage); !st) {
      return ReplyError(res, st.error());
    }
  }
  // The query takes the scope as well, so no record of a tenant outside it
  // can reach the answer whatever the checks above become.
  filter.tenants = scope;
  filter.action = req.get_param_value("action");
  if (req.has_param("after")) {
    auto after = DecodeIdCursor(CursorKind::kAudit, req.get_param_value("after"));
    if (!after) return ReplyError(res, after.error());
    filter.after_seq = *after;
  }
  auto limit = PageLimitParam(req);
  if (!limit) return ReplyError(res, limit.error());
  // The newest limit + 1 matches, oldest first: a first one past the page
  // says an older page follows.
  filter.limit = *limit + 1;
  auto records = audit_->Query(filter);
  if (!records) return ReplyError(res, records.error());
  const bool more = records->size() > *limit;
  if (more) records->erase(records->begin());
  json list = json::array();
  for (const auto& e : *records) list.push_back(AuditEntryJson(e));
  json body{{"records", std::move(list)}};
  if (more) body["next"] = EncodeCursor(CursorKind::kAudit, std::to_string(records->front().seq));
  Reply(res, 200, body);
}

void Api::VerifyAudit(const http::Request&, http::Response& res) {
  if (audit_ == nullptr) return ReplyError(res, NoAuditLog());
  auto verdict = audit_->Verify();
  if (!verdict) return ReplyError(res, verdict.error());
  // 200 either way: the check ran; `ok` is its answer.
  Reply(res, 200, AuditVerdictJson(*verdict));
}

}  // namespace berth::server
