// berth usage, report ops, price apply|show and budget set|list: metering
// (docs/metering.md).
#include <optional>
#include <string>
#include <vector>

#include "cli/api_error.h"
#include "cli/registry.h"

namespace berth::cli {
namespace {

struct UsageFlags {
  UsageQuery query;
  std::vector<std::string> by;
};

struct BillingFlags {
  std::string price_path;
  std::string price_text;
  std::string price_comment;
  std::int64_t price_base = 0;
  std::int64_t price_version = 0;
  BudgetArgs budget;
};

void RegisterPrice(CommandRegistry& r, BillingFlags& f) {
  auto* price = r.app().add_subcommand("price", "the versioned price table usage is costed with");
  price->require_subcommand(1);
  auto* apply =
      price->add_subcommand("apply", "make a price file the new version, in effect from now");
  apply->add_option("FILE", f.price_path, "price table YAML; - reads stdin")->required();
  apply->add_option("--comment", f.price_comment, "why, for the version list");
  AddBase(apply, f.price_base);
  r.ReadsDocument(apply, f.price_path, "price table", f.price_text);
  r.OnRun(apply, [&f](ApiClient& api, const Output& out) {
    return ApplyPrices(api, f.price_text, f.price_comment, f.price_base, out);
  });
  auto* show = price->add_subcommand("show", "the active price table (or --version N)");
  auto* version_opt =
      show->add_option("--version", f.price_version, "a past version")->check(CLI::PositiveNumber);
  r.OnRun(show, [&f, version_opt](ApiClient& api, const Output& out) {
    return ShowPrices(api, version_opt->count() > 0 ? std::optional(f.price_version) : std::nullopt,
                      out);
  });
}

void RegisterBudget(CommandRegistry& r, BillingFlags& f) {
  auto* budget =
      r.app().add_subcommand("budget", "tenants' monthly budgets, alerts and enforcement");
  budget->require_subcommand(1);
  auto* set = budget->add_subcommand(
      "set", "set a tenant's monthly budget (GPU-hours or money) and its alert thresholds");
  set->add_option("TENANT", f.budget.tenant, "a tenant of the policy")->required();
  auto* gh = set->add_option("--gpu-hours", f.budget.gpu_hours, "GPU-hours a month");
  auto* am =
      set->add_option("--amount", f.budget.amount, "money a month, in the price table's currency");
  gh->excludes(am);
  set->add_option("--alert", f.budget.alerts,
                  "alert thresholds in percent, e.g. 50,80,100 (default 80,100)");
  set->add_flag("--enforce", f.budget.enforce,
                "over budget, the tenant's new low-priority jobs wait (OverBudget)");
  r.OnCheck(set, [&r, &f] {
    if (f.budget.gpu_hours.empty() && f.budget.amount.empty()) {
      return r.Fail(kExitUsage, "give --gpu-hours N or --amount N (see berth budget set --help)");
    }
    return kExitOk;
  });
  r.OnRun(set, [&f](ApiClient& api, const Output& out) { return SetBudget(api, f.budget, out); });
  auto* list =
      budget->add_subcommand("list", "every budget with this month's use and crossed thresholds");
  r.OnRun(list, [](ApiClient& api, const Output& out) { return ListBudgets(api, out); });
}

}  // namespace

void RegisterUsageCommands(CommandRegistry& registry) {
  auto& queue_tenant = registry.Keep<std::string>();
  auto* queues = registry.app().add_subcommand(
      "queues", "each queue's GPU guarantee against what its jobs hold now: used, borrowed, idle");
  queues->add_option("--tenant", queue_tenant, "one tenant's queues");
  registry.OnRun(queues, [&queue_tenant](ApiClient& api, const Output& out) {
    return ListQueues(api, queue_tenant, out);
  });
  auto& f = registry.Keep<UsageFlags>();
  auto* usage = registry.app().add_subcommand(
      "usage",
      "allocated GPU-hours, cost and runs per tenant, queue, user, pool, model, node, "
      "day or month (docs/metering.md)");
  usage
      ->add_option("--by", f.by,
                   "group by tenant|queue|user|pool|model|node|day|month|service; repeat or use "
                   "commas "
                   "(default tenant)")
      ->delimiter(',');
  usage->add_option("--from", f.query.from,
                    "from: a date (2026-11-01, UTC), an RFC 3339 time, a duration back from now "
                    "(7d) or epoch ms; default the start of this month");
  usage->add_option("--to", f.query.to, "until (exclusive), as --from; default now");
  usage->add_option("--tenant", f.query.tenant, "only this tenant");
  registry.AllowFormat(usage, "csv");
  registry.OnCheck(usage, [&registry, &f] {
    for (const auto& b : f.by) {
      f.query.by += (f.query.by.empty() ? "" : ",") + b;
    }
    for (auto* t : {&f.query.from, &f.query.to}) {
      auto q = UsageTimeQuery(*t, t == &f.query.from ? "--from" : "--to");
      if (!q) return registry.Fail(kExitUsage, FormatError(q.error()));
      *t = std::move(*q);
    }
    return kExitOk;
  });
  registry.OnRun(usage,
                 [&f](ApiClient& api, const Output& out) { return ShowUsage(api, f.query, out); });
}

void RegisterReportCommands(CommandRegistry& registry) {
  auto& args = registry.Keep<OpsReportArgs>();
  auto* report =
      registry.app().add_subcommand("report", "reports over a window (docs/metering.md)");
  report->require_subcommand(1);
  auto* ops = report->add_subcommand(
      "ops",
      "the operations report: allocation, utilization, queue wait, failures, evictions, cost "
      "and interventions, overall and per tenant");
  ops->add_option("--from", args.from,
                  "from: a date (UTC), an RFC 3339 time, a duration back (7d) or epoch "
                  "ms; default 24 hours ago");
  ops->add_option("--to", args.to, "until (exclusive), as --from; default now");
  ops->add_option("--out", args.out_file, "write the report to FILE");
  registry.AllowFormat(ops, "markdown");
  registry.AllowFormat(ops, "html");
  registry.OnCheck(ops, [&registry, &args] {
    for (auto* t : {&args.from, &args.to}) {
      auto q = UsageTimeQuery(*t, t == &args.from ? "--from" : "--to");
      if (!q) return registry.Fail(kExitUsage, FormatError(q.error()));
      *t = std::move(*q);
    }
    // -o: markdown (also for the default, table), html or json.
    const std::string& format = registry.output_flag();
    args.format = format == "table" ? "markdown" : format;
    if (args.format == "csv") {
      return registry.Fail(kExitUsage,
                           "-o csv is not a report format; use -o markdown, html or json");
    }
    return kExitOk;
  });
  registry.OnRun(
      ops, [&args](ApiClient& api, const Output& out) { return ShowOpsReport(api, args, out); });
}

void RegisterBillingCommands(CommandRegistry& registry) {
  auto& flags = registry.Keep<BillingFlags>();
  RegisterPrice(registry, flags);
  RegisterBudget(registry, flags);
}

}  // namespace berth::cli
