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
  const bool all = req.get_param_value("all") == "true" || req.get_param_value("all") == "1";
  // Parsed once; a kind no alert can have matches none, as it always did.
  const std::string kind_param = req.get_param_value("kind");
  const std::optional<model::AlertKind> kind =
      kind_param.empty() ? std::nullopt : model::ParseAlertKind(kind_param);
  auto alerts = store_.ListAlerts(!all);
  if (!alerts) return ReplyError(res, alerts.error());
  json list = json::array();
  for (const auto& a : *alerts) {
    if (!kind_param.empty() && a.kind != kind) continue;
    list.push_back(AlertJson(a));
  }
  Reply(res, 200, json{{"alerts", list}});
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
  auto resolved = store_.ResolveAlert(id, Actor(req), clock_.NowMs());
  if (!resolved) return ReplyError(res, resolved.error());
  auto alert = store_.GetAlert(id);
  if (!alert) return ReplyError(res, alert.error());
  if (!*resolved) {
    note.skip = true;
    return ReplyError(
        res,
        Error{Code::kFailedPrecondition,
              fmt::format("alert {} was resolved already, by {}", id, alert->resolved_by), "id"});
  }
  note.after = json{{"rule", alert->rule}, {"subject", alert->subject}};
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
      alerts_->Apply(req.body, Actor(req), req.get_param_value("comment"), clock_.NowMs(), *base);
  if (!version) return ReplyError(res, version.error());
  note.object = fmt::format("alert-rules/v{}", *version);
  note.after = json{{"version", *version}};
  json body = model::AlertRulesJson(alerts_->Rules());
  body["version"] = *version;
  Reply(res, 201, body);
}

void Api::ListAlertDeliveries(const http::Request& req, http::Response& res) {
  std::size_t limit = 100;
  if (req.has_param("limit")) limit = std::stoul(req.get_param_value("limit"));
  auto list = store_.ListDeliveries(limit);
  if (!list) return ReplyError(res, list.error());
  json out = json::array();
  for (const auto& d : *list) out.push_back(DeliveryJson(d));
  Reply(res, 200, json{{"deliveries", out}});
}

}  // namespace berth::server
