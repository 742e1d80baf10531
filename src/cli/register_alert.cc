// berth alerts, and berth alert resolve ID | rules show | rules apply FILE |
// deliveries.
#include <string>

#include "cli/registry.h"

namespace berth::cli {
namespace {

struct AlertFlags {
  bool all = false;
  std::string kind;
  std::int64_t id = 0;
  std::string rules_path;
  std::string rules_text;
  std::string rules_comment;
  std::int64_t rules_base = 0;
  std::uint64_t deliveries_limit = 100;
};

void RegisterRules(CommandRegistry& registry, CLI::App* alert, AlertFlags& f) {
  auto* rules = alert->add_subcommand("rules", "the alert rules in force");
  rules->require_subcommand(1);
  auto* show = rules->add_subcommand("show", "the rules in force");
  registry.OnRun(show, [](ApiClient& api, const Output& out) { return ShowAlertRules(api, out); });
  auto* apply =
      rules->add_subcommand("apply", "make a rules file the new version, in force at once");
  apply->add_option("FILE", f.rules_path, "alert rules YAML; - reads stdin")->required();
  apply->add_option("--comment", f.rules_comment, "why, for the audit");
  AddBase(apply, f.rules_base);
  registry.ReadsDocument(apply, f.rules_path, "alert rules", f.rules_text);
  registry.OnRun(apply, [&f](ApiClient& api, const Output& out) {
    return ApplyAlertRules(api, f.rules_text, f.rules_comment, f.rules_base, out);
  });
}

}  // namespace

void RegisterAlertCommands(CommandRegistry& registry) {
  auto& f = registry.Keep<AlertFlags>();
  auto* alerts = registry.app().add_subcommand("alerts", "open alerts, oldest first");
  alerts->add_flag("--all", f.all, "resolved ones too");
  alerts->add_option("--kind", f.kind,
                     "only this kind: gpu_hardware, node_not_ready, queue_wait, budget, "
                     "idle_allocation");
  registry.OnRun(alerts, [&f](ApiClient& api, const Output& out) {
    return ListAlerts(api, f.all, f.kind, out);
  });

  auto* alert =
      registry.app().add_subcommand("alert", "resolve alerts, their rules and webhook deliveries");
  alert->require_subcommand(1);
  auto* resolve = alert->add_subcommand("resolve", "resolve an open alert by hand");
  resolve->add_option("ID", f.id, "the alert's id (berth alerts)")
      ->required()
      ->check(CLI::PositiveNumber);
  registry.OnRun(resolve,
                 [&f](ApiClient& api, const Output& out) { return ResolveAlert(api, f.id, out); });
  RegisterRules(registry, alert, f);
  auto* deliveries =
      alert->add_subcommand("deliveries", "recent webhook deliveries: pending, delivered, failed");
  deliveries->add_option("--limit", f.deliveries_limit,
                         "the newest N deliveries, fetched page after page (default 100; 0: all)");
  registry.OnRun(deliveries, [&f](ApiClient& api, const Output& out) {
    return ListAlertDeliveries(api, f.deliveries_limit, out);
  });
}

}  // namespace berth::cli
