// /v1/quota-requests: a tenant asks for a different quota on one of its
// queues; a platform admin approves it (a new policy version, undone by a
// policy rollback) or rejects it; the filer may withdraw it. Apart from
// api.cc so these endpoints change without touching the job and policy
// handlers.
//
// Who may call what (docs/security.md): the routes' rules in Api::Register
// cover approve, reject (platform-admin), one request and withdraw (its
// tenant's roles); filing asks the Authorizer for the queue's tenant here,
// and the list keeps the caller's visible tenants.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "api/api.h"
#include "api/api_util.h"
#include "api/quota_request_decode.h"
#include "api/render.h"
#include "model/policy.h"

namespace berth::server {
namespace {

using nlohmann::json;

Result<std::int64_t> PathRequestId(const http::Request& req) {
  const std::string& s = req.matches[1];
  std::int64_t id = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  if (ec != std::errc() || p != s.data() + s.size() || id <= 0) {
    return InvalidField("id", fmt::format("'{}' is not a quota request id; ids are positive "
                                          "integers (see GET /v1/quota-requests)",
                                          s));
  }
  return id;
}

json Amount(const store::QuotaRequest& r, const std::optional<std::int64_t>& v) {
  if (!v) return nullptr;
  auto key = model::ParseResourceKey(r.resource);
  if (!key) return *v;
  return model::FormatQuotaAmount(key->kind, *v);
}

json QuotaRequestJson(const store::QuotaRequest& r) {
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  return json{{"id", r.id},
              {"tenant", r.tenant},
              {"queue", r.queue},
              {"resource", r.resource},
              {"guaranteed", Amount(r, r.guaranteed)},
              {"borrow_limit", Amount(r, r.borrow_limit)},
              {"weight", opt(r.weight)},
              {"lending_limit", Amount(r, r.lending_limit)},
              {"reason", r.reason},
              {"state", store::QuotaRequestStateName(r.state)},
              {"filed_by", r.filed_by},
              {"filed_ms", r.filed_ms},
              {"decided_by", r.decided_by},
              {"decided_ms", opt(r.decided_ms)},
              {"comment", r.decision_comment},
              {"policy_version", opt(r.policy_version)}};
}

// What an audit record keeps of a request: enough to read the change.
json QuotaRequestSummary(const store::QuotaRequest& r) {
  json j = QuotaRequestJson(r);
  for (const char* k : {"id", "tenant", "filed_by", "filed_ms", "decided_by", "decided_ms"}) {
    j.erase(k);
  }
  return j;
}

// The request the path names, noted in the audit record as it was before
// the change (object, tenant, before).
Result<store::QuotaRequest> RequestBefore(store::PolicyStore& store, const http::Request& req,
                                          AuditNote& note) {
  note.object = "quota-request";
  auto id = PathRequestId(req);
  if (!id) return std::unexpected(id.error());
  note.object = fmt::format("quota-request/{}", *id);
  auto before = store.GetQuotaRequest(*id);
  if (!before) return std::unexpected(before.error());
  note.tenant = before->tenant;
  note.before = QuotaRequestSummary(*before);
  return before;
}

// A decision's record: the request as the decision left it.
void NoteDecided(AuditNote& n, const store::QuotaRequest& /*before*/,
                 const store::QuotaRequest& after) {
  n.after = QuotaRequestSummary(after);
}

}  // namespace

void Api::FileQuotaRequest(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = "quota-request";
  auto request = ParseQuotaRequestBody(req.body);
  if (!request) return ReplyError(res, request.error());
  note.tenant = request->queue.substr(0, request->queue.find('/'));
  note.after = QuotaRequestSummary(*request);
  if (auto st = Authorizer::CheckNamed(CurrentCaller(), note.tenant, Need::kManage); !st) {
    return ReplyError(res, st.error());
  }
  auto filed = store_.FileQuotaRequest(
      *request, Actor(req), clock_.NowMs(),
      RecordInChange<store::QuotaRequest>(note, req, res, clock_.NowMs(),
                                          [](AuditNote& n, const store::QuotaRequest& made) {
                                            n.object = fmt::format("quota-request/{}", made.id);
                                            n.tenant = made.tenant;
                                            n.after = QuotaRequestSummary(made);
                                          }));
  if (!filed) return ReplyError(res, filed.error());
  res.set_header("Location", fmt::format("/v1/quota-requests/{}", filed->id));
  Reply(res, 201, QuotaRequestJson(*filed));
}

void Api::ListQuotaRequests(const http::Request& req, http::Response& res,
                            const model::TenantScope& scope) {
  store::QuotaRequestFilter filter;
  if (std::string s = req.get_param_value("state"); !s.empty()) {
    filter.state = store::ParseQuotaRequestState(s);
    if (!filter.state) {
      return ReplyError(res, Error{Code::kInvalidArgument,
                                   fmt::format("'{}' is not a quota request state; states are "
                                               "Pending, Approved, Rejected, Withdrawn",
                                               s),
                                   "state"});
    }
  }
  filter.tenant = req.get_param_value("tenant");
  auto after = AfterIdParam(req, CursorKind::kQuotaRequests);
  if (!after) return ReplyError(res, after.error());
  filter.before_id = *after;
  auto limit = PageLimitParam(req);
  if (!limit) return ReplyError(res, limit.error());
  // Newest first; one past the page says an older page follows.
  filter.limit = *limit + 1;
  filter.tenants = scope;
  auto list = store_.ListQuotaRequests(filter);
  if (!list) return ReplyError(res, list.error());
  const bool more = list->size() > *limit;
  if (more) list->pop_back();
  json out = json::array();
  for (const auto& r : *list) out.push_back(QuotaRequestJson(r));
  json body{{"requests", std::move(out)}};
  if (more)
    body["next"] = EncodeCursor(CursorKind::kQuotaRequests, std::to_string(list->back().id));
  Reply(res, 200, body);
}

TenantOf Api::QuotaRequestTenant() {
  return [this](const http::Request& req) -> Result<Owner> {
    auto id = PathRequestId(req);
    if (!id) return std::unexpected(id.error());
    auto r = store_.GetQuotaRequest(*id);
    if (!r) return std::unexpected(r.error());
    return Owner{fmt::format("quota request {}", *id), r->tenant,
                 fmt::format("quota-request/{}", *id)};
  };
}

void Api::GetQuotaRequest(const http::Request& req, http::Response& res) {
  auto id = PathRequestId(req);
  if (!id) return ReplyError(res, id.error());
  auto r = store_.GetQuotaRequest(*id);
  if (!r) return ReplyError(res, r.error());
  Reply(res, 200, QuotaRequestJson(*r));
}

void Api::ApproveQuotaRequest(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = "quota-request";
  auto id = PathRequestId(req);
  if (!id) return ReplyError(res, id.error());
  note.object = fmt::format("quota-request/{}", *id);
  if (auto before = store_.GetQuotaRequest(*id); before) {
    note.tenant = before->tenant;
    note.before = QuotaRequestSummary(*before);
  }
  if (auto active = controller_.ActivePolicy(); active) {
    if (note.before.is_object()) note.before["active_policy_version"] = (*active)->version;
  }
  auto approved =
      controller_.ApproveQuotaRequest(*id, Actor(req), req.get_param_value("comment"),
                                      RecordInChange<store::QuotaRequest, store::QuotaRequest>(
                                          note, req, res, clock_.NowMs(), NoteDecided));
  if (!approved) return ReplyError(res, approved.error());
  res.set_header("Location",
                 fmt::format("/v1/policy/versions/{}", approved->policy_version.value_or(0)));
  Reply(res, 200, QuotaRequestJson(*approved));
}

void Api::RejectQuotaRequest(const http::Request& req, http::Response& res, AuditNote& note) {
  auto before = RequestBefore(store_, req, note);
  if (!before) return ReplyError(res, before.error());
  std::string comment = req.get_param_value("comment");
  if (comment.find_first_not_of(" \t\r\n") == std::string::npos) {
    return ReplyError(
        res, Error{Code::kInvalidArgument,
                   "is required: tell the tenant why, e.g. ?comment=no%20capacity", "comment"});
  }
  auto rejected =
      store_.RejectQuotaRequest(before->id, Actor(req), comment, clock_.NowMs(),
                                RecordInChange<store::QuotaRequest, store::QuotaRequest>(
                                    note, req, res, clock_.NowMs(), NoteDecided));
  if (!rejected) return ReplyError(res, rejected.error());
  Reply(res, 200, QuotaRequestJson(*rejected));
}

void Api::WithdrawQuotaRequest(const http::Request& req, http::Response& res, AuditNote& note) {
  auto before = RequestBefore(store_, req, note);
  if (!before) return ReplyError(res, before.error());
  auto withdrawn =
      store_.WithdrawQuotaRequest(before->id, Actor(req), clock_.NowMs(),
                                  RecordInChange<store::QuotaRequest, store::QuotaRequest>(
                                      note, req, res, clock_.NowMs(), NoteDecided));
  if (!withdrawn) return ReplyError(res, withdrawn.error());
  Reply(res, 200, QuotaRequestJson(*withdrawn));
}

}  // namespace berth::server
