// `berth alerts`, `berth alert resolve|rules|deliveries` over /v1/alerts,
// /v1/alert-rules and /v1/alert-deliveries (docs/cli.md).
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/render.h"
#include "cli/table.h"
#include "common/units.h"

namespace berth::cli {
namespace {

using nlohmann::json;

void PrintOrJson(const Output& output, const json& r, const std::string& human) {
  if (output.format == OutputFormat::kJson) {
    output.out << r.dump(2) << '\n';
  } else {
    output.out << human;
  }
}

std::string RenderRules(const json& r) {
  std::string out = Bool(r, "default")
                        ? "Alert rules: the defaults (none applied; berth alert rules apply FILE)\n"
                        : fmt::format("Alert rules v{} applied by {}\n", IntText(r, "version"),
                                      Text(r, "applied_by"));
  Table rules({"RULE", "KIND", "SEVERITY", "ENABLED", "PARAMETERS", "SINKS"});
  for (const auto& rule : Array(r, "rules")) {
    std::string params;
    if (rule.contains("for_ms")) params = "for " + FormatDurationMs(rule.value("for_ms", 0));
    if (rule.contains("threshold_ms")) {
      params = fmt::format("queue {} over {}", Text(rule, "queue"),
                           FormatDurationMs(rule.value("threshold_ms", 0)));
    }
    if (rule.contains("threshold_percent")) {
      params = fmt::format("under {}% for {}", IntText(rule, "threshold_percent"),
                           FormatDurationMs(rule.value("window_ms", 0)));
    }
    rules.AddRow({Text(rule, "name"), Text(rule, "kind"), Text(rule, "severity"),
                  Bool(rule, "enabled") ? "yes" : "no", params.empty() ? "-" : params,
                  Join(rule.value("sinks", json::array()), ",")});
  }
  out += rules.Render();
  const json& sinks = Array(r, "sinks");
  if (!sinks.empty()) {
    Table t({"SINK", "URL", "TIMEOUT", "TOKEN"});
    for (const auto& s : sinks) {
      t.AddRow({Text(s, "name"), Text(s, "url"), FormatDurationMs(s.value("timeout_ms", 0)),
                Text(s, "secret_file").empty() || Text(s, "secret_file") == "-"
                    ? "-"
                    : fmt::format("{} from {}{}", Text(s, "header"), Text(s, "secret_file"),
                                  Bool(s, "send_secret_over_http") ? " (in the clear)" : "")});
    }
    out += "\n" + t.Render();
  }
  return out;
}

}  // namespace

Status ListAlerts(ApiClient& api, bool all, const std::string& kind, const Output& output) {
  auto list = GetAllPages(api, "/v1/alerts", {{"all", all ? "true" : ""}, {"kind", kind}}, "alerts",
                          0, PageOrder::kPrepend);
  if (!list) return std::unexpected(list.error());
  const json alerts{{"alerts", std::move(*list)}};
  PrintOrJson(output, alerts, RenderAlerts(alerts, output.clock.NowMs()));
  return Ok();
}

Status ResolveAlert(ApiClient& api, std::int64_t id, const Output& output) {
  auto r = api.Post(fmt::format("/v1/alerts/{}/resolve", id), "", "application/json");
  if (!r) return std::unexpected(r.error());
  PrintOrJson(output, *r,
              fmt::format("alert {} resolved; its sinks are told so\n", IntText(*r, "id")));
  return Ok();
}

Status ShowAlertRules(ApiClient& api, const Output& output) {
  auto r = api.Get("/v1/alert-rules");
  if (!r) return std::unexpected(r.error());
  PrintOrJson(output, *r, RenderRules(*r));
  return Ok();
}

Status ApplyAlertRules(ApiClient& api, const std::string& yaml, const std::string& comment,
                       std::int64_t base, const Output& output) {
  auto r = api.Post(
      "/v1/alert-rules" + QueryString({{"comment", comment},
                                       {"base_version", base > 0 ? std::to_string(base) : ""}}),
      yaml, "application/yaml");
  if (!r) return std::unexpected(r.error());
  PrintOrJson(
      output, *r,
      fmt::format("alert rules v{} applied: {} rule(s), {} sink(s), in force now\n",
                  IntText(*r, "version"), Array(*r, "rules").size(), Array(*r, "sinks").size()));
  return Ok();
}

Status ListAlertDeliveries(ApiClient& api, std::uint64_t limit, const Output& output) {
  auto all = GetAllPages(api, "/v1/alert-deliveries", {}, "deliveries", limit, PageOrder::kAppend);
  if (!all) return std::unexpected(all.error());
  const json page{{"deliveries", std::move(*all)}};
  const json& list = Array(page, "deliveries");
  std::string human = "No webhook deliveries.\n";
  if (!list.empty()) {
    Table t({"ID", "ALERT", "SINK", "EVENT", "STATE", "ATTEMPTS", "AGE", "LAST ERROR"});
    for (const auto& d : list) {
      t.AddRow({IntText(d, "id"), IntText(d, "alert_id"), Text(d, "sink"), Text(d, "event"),
                Text(d, "state"), IntText(d, "attempts"),
                AgeSince(output.clock.NowMs(), d.value("created_ms", std::int64_t{0})),
                Text(d, "last_error").empty() ? "-" : Text(d, "last_error")});
    }
    human = t.Render();
  }
  PrintOrJson(output, page, human);
  return Ok();
}

}  // namespace berth::cli
