// Alerts over REST (docs/api.md): the list with its filters, a manual
// resolve, the versioned alert rules and the webhook outbox. Every route is
// platform-admin (docs/security.md).
#include <fmt/format.h>

#include <charconv>
#include <optional>

#include "api/api.h"
#include "api/api_util.h"
#include "api/render.h"
#include "model/alert_kind.h"

namespace berth::server {
namespace {

using nlohmann::json;

Error NoAlerts() {
  return Error{Code::kUnavailable, "this berthd runs no alert rules", {}};
}

json DeliveryJson(const store::AlertDelivery& d) {
  return {{"id", d.id},
          {"alert_id", d.alert_id},
          {"sink", d.sink},
          {"event", d.event},
          {"attempts", d.attempts},
          {"next_attempt_ms", d.next_attempt_ms},
          {"last_error", d.last_error},
          {"delivered_ms", d.delivered_ms ? json(*d.delivered_ms) : json(nullptr)},
          {"state", d.delivered_ms ? "delivered"
                    : d.failed     ? "failed"
                                   : "pending"},
          {"created_ms", d.created_ms}};
}

}  // namespace

void Api::ListAlerts(const http::Request& req, http::Response& res) {
  store::AlertFilter filter;
  filter.open_only = !(req.get_param_value("all") == "true" || req.get_param_value("all") == "1");
  // A kind no alert can have matches none, as it always did.
  if (const std::string kind = req.get_param_value("kind"); !kind.empty()) {
    filter.kind = model::ParseAlertKind(kind);
    if (!filter.kind) return Reply(res, 200, json{{"alerts", json::array()}});
  }
  auto after = AfterIdParam(req, CursorKind::kAlerts);
  if (!after) return ReplyError(res, after.error());
  filter.before_id = *after;
  auto limit = PageLimitParam(req);
  if (!limit) return ReplyError(res, limit.error());
  // The newest limit + 1 matches, oldest first: a first one past the page
  // says an older page follows.
  filter.limit = *limit + 1;
  auto alerts = store_.FindAlerts(filter);
  if (!alerts) return ReplyError(res, alerts.error());
  const bool more = alerts->size() > *limit;
  if (more) alerts->erase(alerts->begin());
  json list = json::array();
  for (const auto& a : *alerts) list.push_back(AlertJson(a));
  json body{{"alerts", std::move(list)}};
  if (more) body["next"] = EncodeCursor(CursorKind::kAlerts, std::to_string(alerts->front().id));
  Reply(res, 200, body);
}

void Api::ResolveAlert(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = "alert";
  const std::string& s = req.matches[1];
  std::int64_t id = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  if (ec != std::errc() || p != s.data() + s.size() || id <= 0) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 fmt::format("'{}' is not an alert id; ids are positive integers "
                                             "(see GET /v1/alerts)",
                                             s),
                                 "id"});
  }
  note.object = fmt::format("alert/{}", id);
  auto resolved = store_.ResolveAlert(
      id, Actor(req), clock_.NowMs(),
      RecordInChange<store::Alert>(
          note, req, res, clock_.NowMs(), [](AuditNote& n, const store::Alert& alert) {
            n.after = json{{"rule", alert.rule}, {"subject", alert.subject}};
          }));
  if (!resolved) return ReplyError(res, resolved.error());
  if (*resolved) {
    store::Publish(store_.change_feed(), store::Topic::kAlert, std::to_string(id), {}, {},
                   "resolved");
  }
  auto alert = store_.GetAlert(id);
  if (!alert) return ReplyError(res, alert.error());
  if (!*resolved) {
    note.skip = true;
    return ReplyError(
        res,
        Error{Code::kFailedPrecondition,
              fmt::format("alert {} was resolved already, by {}", id, alert->resolved_by), "id"});
  }
  Reply(res, 200, AlertJson(*alert));
}

void Api::GetAlertRules(const http::Request&, http::Response& res) {
  if (alerts_ == nullptr) return ReplyError(res, NoAlerts());
  auto active = store_.ActiveAlertRules();
  if (!active) return ReplyError(res, active.error());
  json body = model::AlertRulesJson(alerts_->Rules());
  if (*active) {
    body["version"] = (*active)->version;
    body["applied_ms"] = (*active)->applied_ms;
    body["applied_by"] = (*active)->applied_by;
    body["comment"] = (*active)->comment;
    body["yaml"] = (*active)->yaml;
    body["default"] = false;
  } else {
    body["version"] = 0;
    body["yaml"] = model::DefaultAlertRulesYaml();
    body["default"] = true;
  }
  Reply(res, 200, body);
}

void Api::ApplyAlertRules(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = "alert-rules";
  if (alerts_ == nullptr) return ReplyError(res, NoAlerts());
  if (req.body.find_first_not_of(" \t\r\n") == std::string::npos) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 "the request body must be an alert rules document (YAML); see "
                                 "docs/operations.md, \"Alerts\"",
                                 "body"});
  }
  note.before = json{{"version", alerts_->version()}};
  auto base = BaseVersion(req);
  if (!base) return ReplyError(res, base.error());
  auto version =
      alerts_->Apply(req.body, Actor(req), req.get_param_value("comment"), clock_.NowMs(), *base,
                     RecordInChange<std::int64_t>(note, req, res, clock_.NowMs(),
                                                  [](AuditNote& n, const std::int64_t& made) {
                                                    n.object = fmt::format("alert-rules/v{}", made);
                                                    n.after = json{{"version", made}};
                                                  }));
  if (!version) return ReplyError(res, version.error());
  json body = model::AlertRulesJson(alerts_->Rules());
  body["version"] = *version;
  Reply(res, 201, body);
}

void Api::ListAlertDeliveries(const http::Request& req, http::Response& res) {
  auto after = AfterIdParam(req, CursorKind::kAlertDeliveries);
  if (!after) return ReplyError(res, after.error());
  auto limit = PageLimitParam(req);
  if (!limit) return ReplyError(res, limit.error());
  // Newest first; one past the page says an older page follows.
  auto list = store_.ListDeliveries(*limit + 1, *after);
  if (!list) return ReplyError(res, list.error());
  const bool more = list->size() > *limit;
  if (more) list->pop_back();
  json out = json::array();
  for (const auto& d : *list) out.push_back(DeliveryJson(d));
  json body{{"deliveries", std::move(out)}};
  if (more)
    body["next"] = EncodeCursor(CursorKind::kAlertDeliveries, std::to_string(list->back().id));
  Reply(res, 200, body);
}

}  // namespace berth::server
