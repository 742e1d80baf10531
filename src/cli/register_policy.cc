// berth policy show|versions|apply|diff|rollback|preview, and berth history
// export (the job history berth-sim replays policies against).
#include <optional>
#include <string>

#include "cli/api_error.h"
#include "cli/registry.h"

namespace berth::cli {
namespace {

struct PolicyFlags {
  std::int64_t version = 0;
  std::int64_t diff_to = 0;
  bool yaml = false;
  std::string comment;
  std::string path;
  std::string text;
  std::int64_t base = 0;
  std::string preview_window = "7d";
  std::string prices_path;
  std::string prices_query;
  std::string history_since = "7d";
  std::string history_until;
  std::string history_file;
};

void RegisterShowAndApply(CommandRegistry& r, CLI::App* policy, PolicyFlags& f) {
  auto* show = policy->add_subcommand("show", "the active policy, or one version");
  auto* show_version =
      show->add_option("VERSION", f.version, "a version number")->check(CLI::PositiveNumber);
  show->add_flag("--yaml", f.yaml, "print the YAML exactly as applied");
  r.OnRun(show, [&f, show_version](ApiClient& api, const Output& out) {
    return ShowPolicy(api, show_version->count() > 0 ? std::optional(f.version) : std::nullopt,
                      f.yaml, out);
  });

  auto* versions = policy->add_subcommand("versions", "every version, oldest first");
  r.OnRun(versions, [](ApiClient& api, const Output& out) { return ListPolicyVersions(api, out); });

  auto* apply = policy->add_subcommand("apply", "make a policy file the new version");
  apply->add_option("FILE", f.path, "policy YAML; - reads stdin")->required();
  apply->add_option("--comment", f.comment, "why, for the version list");
  AddBase(apply, f.base);
  r.ReadsDocument(apply, f.path, "policy", f.text);
  r.OnRun(apply, [&f](ApiClient& api, const Output& out) {
    return ApplyPolicy(api, f.text, f.comment, f.base, out);
  });
}

void RegisterDiffAndRollback(CommandRegistry& r, CLI::App* policy, PolicyFlags& f) {
  auto* diff = policy->add_subcommand(
      "diff",
      "what changed: no versions, the active one against the one before; A, A against "
      "the active one; A B, A against B; -f FILE, the active one against FILE");
  auto* from_opt =
      diff->add_option("A", f.version, "the older version")->check(CLI::PositiveNumber);
  auto* to_opt = diff->add_option("B", f.diff_to, "the newer version")->check(CLI::PositiveNumber);
  auto* file_opt = diff->add_option(
      "-f,--file", f.path, "preview a policy file against the active one (applies nothing)");
  file_opt->excludes(from_opt)->excludes(to_opt);
  r.OnCheck(diff, [&r, &f, file_opt] {
    if (file_opt->count() == 0) return kExitOk;
    auto read = ReadDocument(f.path, r.env().in, "policy");
    if (!read) return r.Fail(kExitError, FormatError(read.error()));
    f.text = std::move(*read);
    return kExitOk;
  });
  r.OnRun(diff, [&f, file_opt, from_opt, to_opt](ApiClient& api, const Output& out) {
    if (file_opt->count() > 0) return PreviewPolicy(api, f.text, out);
    return DiffPolicy(api, from_opt->count() > 0 ? std::optional(f.version) : std::nullopt,
                      to_opt->count() > 0 ? std::optional(f.diff_to) : std::nullopt, out);
  });

  auto* rollback =
      policy->add_subcommand("rollback", "apply an older version's text again, as a new version");
  rollback->add_option("VERSION", f.version, "the version to restore")
      ->required()
      ->check(CLI::PositiveNumber);
  rollback->add_option("--comment", f.comment, "why (default: rollback to vN)");
  r.OnRun(rollback, [&f](ApiClient& api, const Output& out) {
    return RollbackPolicy(api, f.version, f.comment, out);
  });
}

void RegisterPreview(CommandRegistry& r, CLI::App* policy, PolicyFlags& f) {
  auto* preview = policy->add_subcommand(
      "preview",
      "replay the recent job history under the active policy and under FILE, and compare per "
      "tenant: wait, completion time, GPU-hours, cost (applies nothing)");
  preview->add_option("FILE", f.path, "proposed policy YAML; - reads stdin")->required();
  preview->add_option("--window", f.preview_window, "how far back to replay (e.g. 7d, 12h)")
      ->capture_default_str();
  preview->add_option("--prices", f.prices_path,
                      "YAML price file: GPU model -> price per GPU-hour, 'default' for the "
                      "rest (without it cost is unpriced)");
  r.OnCheck(preview, [&r, &f] {
    auto read = ReadDocument(f.path, r.env().in, "policy");
    if (!read) return r.Fail(kExitError, FormatError(read.error()));
    f.text = std::move(*read);
    if (!f.prices_path.empty()) {
      auto prices = ReadDocument(f.prices_path, r.env().in, "price file");
      if (!prices) return r.Fail(kExitError, FormatError(prices.error()));
      auto query = PricesQuery(*prices);
      if (!query) return r.Fail(kExitUsage, FormatError(query.error()));
      f.prices_query = std::move(*query);
    }
    return kExitOk;
  });
  r.OnRun(preview, [&f](ApiClient& api, const Output& out) {
    return PreviewPolicyChange(api, f.text, f.preview_window, f.prices_query,
                               f.path == "-" ? "" : f.path, out);
  });
}

void RegisterHistory(CommandRegistry& r, PolicyFlags& f) {
  auto* history = r.app().add_subcommand("history", "Berth's own job history, for berth-sim");
  history->require_subcommand(1);
  auto* history_export = history->add_subcommand(
      "export",
      "write the jobs submitted in a window, with every run, the nodes and the policy, as JSON "
      "(replay it with berth-sim --history FILE)");
  history_export
      ->add_option("--since", f.history_since,
                   "start of the window: a duration back from now (7d) or epoch milliseconds")
      ->capture_default_str();
  history_export->add_option("--until", f.history_until,
                             "end of the window (exclusive), as --since; default now");
  // The export is always JSON, so here -o names the file (as curl's does).
  history_export->add_option("-o,--output", f.history_file, "write to FILE instead of stdout");
  r.OnRun(history_export, [&f](ApiClient& api, const Output& out) {
    return ExportHistory(api, f.history_since, f.history_until, f.history_file, out);
  });
}

}  // namespace

void RegisterPolicyCommands(CommandRegistry& registry) {
  auto& flags = registry.Keep<PolicyFlags>();
  auto* policy = registry.app().add_subcommand(
      "policy", "show, apply, diff and roll back the scheduling policy (docs/policy.md)");
  policy->require_subcommand(1);
  RegisterShowAndApply(registry, policy, flags);
  RegisterDiffAndRollback(registry, policy, flags);
  RegisterPreview(registry, policy, flags);
  RegisterHistory(registry, flags);
}

}  // namespace berth::cli
