#include "cli/app.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "cli/api_error.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "cli/version.h"

namespace berth::cli {
namespace {

// A command runs against a client, except `version`, which needs no server.
using Action = std::function<Status(ApiClient&, const Output&)>;

int PrintError(const Environment& env, int code, std::string_view message) {
  env.err << "berth: " << OneLine(message) << '\n';
  return code;
}

int ExitCodeFor(const Error& error) {
  return error.code == Code::kUnavailable ? kExitUnavailable : kExitError;
}

// Reads a document (`what`: "job spec", "policy") from a file or, for "-",
// from stdin.
Result<std::string> ReadSpec(const std::string& path, std::istream& in,
                             std::string_view what = "job spec") {
  std::ostringstream text;
  if (path == "-") {
    text << in.rdbuf();
    if (in.bad()) {
      return berth::Fail(Code::kInvalidArgument,
                         fmt::format("cannot read the {} from stdin", what));
    }
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return berth::Fail(Code::kInvalidArgument,
                         fmt::format("cannot read {} '{}': it is a directory", what, path));
    }
    std::ifstream file(path, std::ios::binary);
    if (!file) {
      char buf[128];
      return berth::Fail(Code::kInvalidArgument, fmt::format("cannot read {} '{}': {}", what, path,
                                                             strerror_r(errno, buf, sizeof(buf))));
    }
    text << file.rdbuf();
  }
  std::string spec = std::move(text).str();
  if (spec.find_first_not_of(" \t\r\n") == std::string::npos) {
    return berth::Fail(Code::kInvalidArgument,
                       fmt::format("{} '{}' is empty", what, path == "-" ? "<stdin>" : path));
  }
  return spec;
}

// Options every job command takes a positional job ID with.
CLI::Option* AddJobId(CLI::App* cmd, std::uint64_t& id) {
  return cmd->add_option("ID", id, "job id")->required();
}

}  // namespace

int RunCli(const std::vector<std::string>& args, const Environment& env) {
  CLI::App app{"berth: the command-line client of the Berth GPU cluster scheduler.", "berth"};
  // Global flags may follow the command: `berth jobs -o json`.
  app.fallthrough();
  app.require_subcommand(1);
  std::string server_flag;
  std::string output_flag = "table";
  app.add_option("--server", server_flag,
                 fmt::format("berthd URL (default: $BERTH_SERVER, else {})", kDefaultServer));
  std::string ca_flag;
  app.add_option("--ca", ca_flag,
                 "PEM CA file to trust for an https server, e.g. <data-dir>/tls/ca.pem "
                 "(default: $BERTH_CA, else the system trust store)");
  app.add_option("-o,--output", output_flag,
                 "output format: table or json (csv: berth audit, usage; markdown, html: berth "
                 "report ops)")
      ->check(CLI::IsMember({"table", "json", "csv", "markdown", "html"}));
  app.set_version_flag("--version", fmt::format("berth {}", Version()));
  // Subcommands inherit the footer, so `berth jobs --help` names the globals too.
  app.footer(
      "Global options go before or after the command: --server URL, --ca FILE, -o/--output "
      "table|json.\n"
      "Exit codes: 0 ok, 1 request failed, 2 usage error, 3 berthd unreachable or unavailable.");

  std::map<const CLI::App*, Action> actions;
  std::map<const CLI::App*, std::function<int()>> checks;  // usage checks after parsing
  const CLI::App* version_cmd = nullptr;

  std::string spec_path;
  auto* submit = app.add_subcommand("submit", "submit a job spec (YAML or JSON)");
  submit->add_option("FILE", spec_path, "job spec file; - reads stdin")->required();
  std::string spec;
  checks[submit] = [&] {
    auto read = ReadSpec(spec_path, env.in);
    if (!read) return PrintError(env, kExitError, FormatError(read.error()));
    spec = std::move(*read);
    return kExitOk;
  };
  actions[submit] = [&](ApiClient& api, const Output& out) { return SubmitJob(api, spec, out); };

  JobFilter filter;
  std::string states_flag;
  auto* jobs = app.add_subcommand("jobs", "list jobs, newest first");
  jobs->add_option("--state", states_flag,
                   "only jobs in these states, comma-separated (e.g. Pending,Running)");
  jobs->add_option("--queue", filter.queue, "only jobs in this queue");
  jobs->add_option("--tenant", filter.tenant, "only jobs of this tenant");
  jobs->add_option("--array", filter.array, "only the elements of this job array (its id)")
      ->check(CLI::PositiveNumber);
  jobs->add_option("--limit", filter.limit,
                   "the newest N jobs (default: every job, fetched page after page)")
      ->check(CLI::PositiveNumber);
  jobs->add_flag("--full", filter.full, "each job's whole spec and placement (with -o json)");
  checks[jobs] = [&] {
    auto states = NormalizeStates(states_flag);
    if (!states) return PrintError(env, kExitUsage, FormatError(states.error()));
    filter.states = *states;
    return kExitOk;
  };
  actions[jobs] = [&](ApiClient& api, const Output& out) { return ListJobs(api, filter, out); };

  std::uint64_t job_id = 0;
  auto* job = app.add_subcommand("job", "show one job: spec, state, placement and timeline");
  AddJobId(job, job_id);
  actions[job] = [&](ApiClient& api, const Output& out) { return ShowJob(api, job_id, out); };

  std::string lang_flag;
  auto* why = app.add_subcommand(
      "why", "why a job is pending, failed or was evicted: the reason in words and numbers");
  AddJobId(why, job_id);
  why->add_option("--lang", lang_flag,
                  "en (English) or zh (Simplified Chinese); default: zh when the locale "
                  "($LC_ALL, $LC_MESSAGES or $LANG) starts with zh, else en")
      ->check(CLI::IsMember({"en", "zh"}));
  actions[why] = [&](ApiClient& api, const Output& out) {
    std::string lang = lang_flag;
    if (lang.empty()) lang = env.locale && env.locale->starts_with("zh") ? "zh" : "en";
    return ExplainJob(api, job_id, lang, out);
  };

  bool cancel_array = false;
  auto* cancel = app.add_subcommand("cancel", "cancel a job, or every element of a job array");
  AddJobId(cancel, job_id);
  cancel->add_flag("--array", cancel_array,
                   "ID is a job array's id: cancel every element that has not finished");
  actions[cancel] = [&](ApiClient& api, const Output& out) {
    return cancel_array ? CancelArray(api, job_id, out) : CancelJob(api, job_id, out);
  };

  // Run from inside a job: ID defaults to $BERTH_JOB_ID, and the job's own
  // token is used when there is no other (see below).
  std::uint64_t checkpoint_job = 0;
  std::int64_t checkpoint_at = 0;
  auto* checkpoint = app.add_subcommand(
      "checkpoint",
      "report that a running job saved a checkpoint (inside a job: no login needed, "
      "$BERTH_JOB_TOKEN is used)");
  checkpoint->add_option("ID", checkpoint_job, "job id (default: $BERTH_JOB_ID)")
      ->check(CLI::PositiveNumber);
  auto* at_opt = checkpoint->add_option("--at", checkpoint_at,
                                        "when it was saved, unix milliseconds (default: now)");
  checks[checkpoint] = [&] {
    if (checkpoint_job == 0 && env.job_id) {
      const std::string& text = *env.job_id;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), checkpoint_job);
      if (ec != std::errc() || p != text.data() + text.size()) checkpoint_job = 0;
    }
    if (checkpoint_job == 0) {
      return PrintError(
          env, kExitUsage,
          "berth checkpoint: give the job's ID (inside a job, $BERTH_JOB_ID is used)");
    }
    return kExitOk;
  };
  actions[checkpoint] = [&](ApiClient& api, const Output& out) {
    return ReportCheckpoint(
        api, checkpoint_job,
        at_opt->count() > 0 ? std::optional<std::int64_t>(checkpoint_at) : std::nullopt, out);
  };

  int replica = 0;
  bool follow = false;
  auto* logs = app.add_subcommand("logs", "print a job's output");
  AddJobId(logs, job_id);
  auto* replica_opt = logs->add_option("--replica", replica, "only this replica (default: all)")
                          ->check(CLI::NonNegativeNumber);
  logs->add_flag("-f,--follow", follow, "keep printing until the job ends");
  actions[logs] = [&](ApiClient& api, const Output& out) {
    std::optional<int> only = replica_opt->count() > 0 ? std::optional<int>(replica) : std::nullopt;
    return StreamLogs(api, job_id, only, follow, out.out);
  };

  std::uint32_t out_replica = 0;
  std::uint32_t out_attempt = 0;
  std::string out_path;
  auto* outputs = app.add_subcommand(
      "outputs", "list what a job's run left in its output directory (BERTH_OUTPUT_DIR)");
  AddJobId(outputs, job_id);
  outputs->add_option("PATH", out_path, "a directory or file below it (default: all of it)");
  auto add_source = [&](CLI::App* cmd) {
    cmd->add_option("--replica", out_replica, "the replica's outputs (default: 0)")
        ->check(CLI::NonNegativeNumber);
    return cmd
        ->add_option("--attempt", out_attempt,
                     "this attempt's (default: the latest attempt that started)")
        ->check(CLI::NonNegativeNumber);
  };
  auto* outputs_attempt = add_source(outputs);
  auto source_of = [&](const CLI::Option* attempt_opt) {
    OutputSource src;
    src.replica = out_replica;
    if (attempt_opt->count() > 0) src.attempt = out_attempt;
    return src;
  };
  actions[outputs] = [&](ApiClient& api, const Output& out) {
    return ListOutputs(api, job_id, source_of(outputs_attempt), out_path, out);
  };

  std::string cp_from;
  std::string cp_to;
  bool cp_recursive = false;
  auto* cp = app.add_subcommand("cp", "download a job's outputs: berth cp JOB:PATH [DEST]");
  cp->add_option("SOURCE", cp_from, "JOB:PATH below the job's output directory (JOB: for all)")
      ->required();
  cp->add_option("DEST", cp_to, "a file, or a directory to copy into (default: .)");
  cp->add_flag("-r,--recursive", cp_recursive, "copy a directory and everything below it");
  auto* cp_attempt = add_source(cp);
  actions[cp] = [&](ApiClient& api, const Output& out) -> Status {
    auto source = ParseCopySource(cp_from);
    if (!source) return std::unexpected(source.error());
    return CopyOutputs(api, *source, source_of(cp_attempt), cp_to, cp_recursive, out);
  };

  auto* nodes = app.add_subcommand("nodes", "list nodes and their GPUs");
  actions[nodes] = [&](ApiClient& api, const Output& out) { return ListNodes(api, out); };

  auto* gpus = app.add_subcommand("gpus", "list every GPU and the job holding it");
  actions[gpus] = [&](ApiClient& api, const Output& out) { return ListGpus(api, out); };

  std::string node_name;
  auto* node_cmd = app.add_subcommand("node", "show one node: state, cordon, GPUs and events");
  node_cmd->add_option("node", node_name, "node name")->required();
  actions[node_cmd] = [&](ApiClient& api, const Output& out) {
    return ShowNode(api, node_name, out);
  };

  std::string cordon_target;
  std::string cordon_reason;
  for (const char* action : {"cordon", "drain", "uncordon"}) {
    const std::string what =
        std::string(action) == "cordon"
            ? "place nothing new on a node or one GPU (NODE or NODE/GPU); running jobs continue"
        : std::string(action) == "drain"
            ? "cordon a node and stop its jobs, which are queued again elsewhere"
            : "lift a cordon or drain from a node or one GPU (NODE or NODE/GPU)";
    auto* cmd = app.add_subcommand(action, what);
    cmd->add_option("target", cordon_target, "NODE or NODE/GPU-INDEX")->required();
    if (std::string(action) != "uncordon") {
      cmd->add_option("--reason", cordon_reason, "why, for the node's events and the audit");
    }
    actions[cmd] = [&, action = std::string(action)](ApiClient& api, const Output& out) {
      return CordonTarget(api, action, cordon_target, cordon_reason, out);
    };
  }

  bool all_alerts = false;
  std::string alert_kind;
  auto* alerts = app.add_subcommand("alerts", "open alerts, oldest first");
  alerts->add_flag("--all", all_alerts, "resolved ones too");
  alerts->add_option("--kind", alert_kind,
                     "only this kind: gpu_hardware, node_not_ready, queue_wait, budget, "
                     "idle_allocation");
  actions[alerts] = [&](ApiClient& api, const Output& out) {
    return ListAlerts(api, all_alerts, alert_kind, out);
  };
  // berth alert resolve ID | rules show | rules apply FILE | deliveries
  auto* alert = app.add_subcommand("alert", "resolve alerts, their rules and webhook deliveries");
  alert->require_subcommand(1);
  std::int64_t alert_id = 0;
  auto* alert_resolve = alert->add_subcommand("resolve", "resolve an open alert by hand");
  alert_resolve->add_option("ID", alert_id, "the alert's id (berth alerts)")
      ->required()
      ->check(CLI::PositiveNumber);
  actions[alert_resolve] = [&](ApiClient& api, const Output& out) {
    return ResolveAlert(api, alert_id, out);
  };
  auto* alert_rules = alert->add_subcommand("rules", "the alert rules in force");
  alert_rules->require_subcommand(1);
  auto* alert_rules_show = alert_rules->add_subcommand("show", "the rules in force");
  actions[alert_rules_show] = [&](ApiClient& api, const Output& out) {
    return ShowAlertRules(api, out);
  };
  std::string alert_rules_path;
  std::string alert_rules_text;
  std::string alert_rules_comment;
  auto* alert_rules_apply =
      alert_rules->add_subcommand("apply", "make a rules file the new version, in force at once");
  alert_rules_apply->add_option("FILE", alert_rules_path, "alert rules YAML; - reads stdin")
      ->required();
  alert_rules_apply->add_option("--comment", alert_rules_comment, "why, for the audit");
  std::int64_t alert_rules_base = 0;
  alert_rules_apply
      ->add_option("--base", alert_rules_base,
                   "the version the file was written against: refused (409) if another "
                   "version was applied since")
      ->check(CLI::PositiveNumber);
  checks[alert_rules_apply] = [&] {
    auto read = ReadSpec(alert_rules_path, env.in, "alert rules");
    if (!read) return PrintError(env, kExitError, FormatError(read.error()));
    alert_rules_text = std::move(*read);
    return kExitOk;
  };
  actions[alert_rules_apply] = [&](ApiClient& api, const Output& out) {
    return ApplyAlertRules(api, alert_rules_text, alert_rules_comment, alert_rules_base, out);
  };
  auto* alert_deliveries =
      alert->add_subcommand("deliveries", "recent webhook deliveries: pending, delivered, failed");
  actions[alert_deliveries] = [&](ApiClient& api, const Output& out) {
    return ListAlertDeliveries(api, out);
  };

  // berth policy show|versions|apply|diff|rollback
  auto* policy = app.add_subcommand(
      "policy", "show, apply, diff and roll back the scheduling policy (docs/policy.md)");
  policy->require_subcommand(1);
  std::int64_t policy_version = 0;
  std::int64_t diff_to = 0;
  bool policy_yaml = false;
  std::string policy_comment;
  std::string policy_path;
  std::string policy_text;

  auto* policy_show = policy->add_subcommand("show", "the active policy, or one version");
  auto* show_version = policy_show->add_option("VERSION", policy_version, "a version number")
                           ->check(CLI::PositiveNumber);
  policy_show->add_flag("--yaml", policy_yaml, "print the YAML exactly as applied");
  actions[policy_show] = [&](ApiClient& api, const Output& out) {
    return ShowPolicy(api, show_version->count() > 0 ? std::optional(policy_version) : std::nullopt,
                      policy_yaml, out);
  };

  auto* policy_versions = policy->add_subcommand("versions", "every version, oldest first");
  actions[policy_versions] = [&](ApiClient& api, const Output& out) {
    return ListPolicyVersions(api, out);
  };

  auto* policy_apply = policy->add_subcommand("apply", "make a policy file the new version");
  policy_apply->add_option("FILE", policy_path, "policy YAML; - reads stdin")->required();
  policy_apply->add_option("--comment", policy_comment, "why, for the version list");
  std::int64_t policy_base = 0;
  policy_apply
      ->add_option("--base", policy_base,
                   "the version the file was written against: refused (409) if another "
                   "version was applied since")
      ->check(CLI::PositiveNumber);
  checks[policy_apply] = [&] {
    auto read = ReadSpec(policy_path, env.in, "policy");
    if (!read) return PrintError(env, kExitError, FormatError(read.error()));
    policy_text = std::move(*read);
    return kExitOk;
  };
  actions[policy_apply] = [&](ApiClient& api, const Output& out) {
    return ApplyPolicy(api, policy_text, policy_comment, policy_base, out);
  };

  auto* policy_diff = policy->add_subcommand(
      "diff",
      "what changed: no versions, the active one against the one before; A, A against "
      "the active one; A B, A against B; -f FILE, the active one against FILE");
  auto* diff_from_opt =
      policy_diff->add_option("A", policy_version, "the older version")->check(CLI::PositiveNumber);
  auto* diff_to_opt =
      policy_diff->add_option("B", diff_to, "the newer version")->check(CLI::PositiveNumber);
  auto* diff_file_opt = policy_diff->add_option(
      "-f,--file", policy_path, "preview a policy file against the active one (applies nothing)");
  diff_file_opt->excludes(diff_from_opt)->excludes(diff_to_opt);
  checks[policy_diff] = [&] {
    if (diff_file_opt->count() == 0) return kExitOk;
    auto read = ReadSpec(policy_path, env.in, "policy");
    if (!read) return PrintError(env, kExitError, FormatError(read.error()));
    policy_text = std::move(*read);
    return kExitOk;
  };
  actions[policy_diff] = [&](ApiClient& api, const Output& out) {
    if (diff_file_opt->count() > 0) return PreviewPolicy(api, policy_text, out);
    return DiffPolicy(api,
                      diff_from_opt->count() > 0 ? std::optional(policy_version) : std::nullopt,
                      diff_to_opt->count() > 0 ? std::optional(diff_to) : std::nullopt, out);
  };

  auto* policy_rollback =
      policy->add_subcommand("rollback", "apply an older version's text again, as a new version");
  policy_rollback->add_option("VERSION", policy_version, "the version to restore")
      ->required()
      ->check(CLI::PositiveNumber);
  policy_rollback->add_option("--comment", policy_comment, "why (default: rollback to vN)");
  actions[policy_rollback] = [&](ApiClient& api, const Output& out) {
    return RollbackPolicy(api, policy_version, policy_comment, out);
  };

  std::string preview_window = "7d";
  std::string prices_path;
  std::string prices_query;
  auto* policy_preview = policy->add_subcommand(
      "preview",
      "replay the recent job history under the active policy and under FILE, and compare per "
      "tenant: wait, completion time, GPU-hours, cost (applies nothing)");
  policy_preview->add_option("FILE", policy_path, "proposed policy YAML; - reads stdin")
      ->required();
  policy_preview->add_option("--window", preview_window, "how far back to replay (e.g. 7d, 12h)")
      ->capture_default_str();
  policy_preview->add_option("--prices", prices_path,
                             "YAML price file: GPU model -> price per GPU-hour, 'default' for the "
                             "rest (without it cost is unpriced)");
  checks[policy_preview] = [&] {
    auto read = ReadSpec(policy_path, env.in, "policy");
    if (!read) return PrintError(env, kExitError, FormatError(read.error()));
    policy_text = std::move(*read);
    if (!prices_path.empty()) {
      auto prices = ReadSpec(prices_path, env.in, "price file");
      if (!prices) return PrintError(env, kExitError, FormatError(prices.error()));
      auto query = PricesQuery(*prices);
      if (!query) return PrintError(env, kExitUsage, FormatError(query.error()));
      prices_query = std::move(*query);
    }
    return kExitOk;
  };
  actions[policy_preview] = [&](ApiClient& api, const Output& out) {
    return PreviewPolicyChange(api, policy_text, preview_window, prices_query,
                               policy_path == "-" ? "" : policy_path, out);
  };

  // berth history export
  auto* history = app.add_subcommand("history", "Berth's own job history, for berth-sim");
  history->require_subcommand(1);
  std::string history_since = "7d";
  std::string history_until;
  std::string history_file;
  auto* history_export = history->add_subcommand(
      "export",
      "write the jobs submitted in a window, with every run, the nodes and the policy, as JSON "
      "(replay it with berth-sim --history FILE)");
  history_export
      ->add_option("--since", history_since,
                   "start of the window: a duration back from now (7d) or epoch milliseconds")
      ->capture_default_str();
  history_export->add_option("--until", history_until,
                             "end of the window (exclusive), as --since; default now");
  // The export is always JSON, so here -o names the file (as curl's does).
  history_export->add_option("-o,--output", history_file, "write to FILE instead of stdout");
  actions[history_export] = [&](ApiClient& api, const Output& out) {
    return ExportHistory(api, history_since, history_until, history_file, out);
  };

  // berth audit [verify]
  AuditQuery audit_query;
  auto* audit = app.add_subcommand(
      "audit", "who changed what: the audit trail of API changes and refusals, oldest first");
  audit->require_subcommand(0, 1);
  audit->add_option("--since", audit_query.since,
                    "from: a duration back from now (1h, 7d), an RFC 3339 time or epoch ms");
  audit->add_option("--until", audit_query.until, "until (exclusive), as --since; default now");
  audit->add_option("--actor", audit_query.actor, "only records of this actor");
  audit->add_option("--tenant", audit_query.tenant, "only records about this tenant");
  audit->add_option("--action", audit_query.action,
                    "only this action (job.submit), or a family ending in '.' (job.)");
  audit
      ->add_option("--limit", audit_query.limit,
                   "the newest N records, fetched page after page (default 1000; 0: all)")
      ->check(CLI::NonNegativeNumber);
  checks[audit] = [&] {
    for (auto* t : {&audit_query.since, &audit_query.until}) {
      auto q = AuditTimeQuery(*t, t == &audit_query.since ? "--since" : "--until");
      if (!q) return PrintError(env, kExitUsage, FormatError(q.error()));
      *t = std::move(*q);
    }
    return kExitOk;
  };
  actions[audit] = [&](ApiClient& api, const Output& out) {
    return ListAudit(api, audit_query, out);
  };
  auto* audit_verify = audit->add_subcommand(
      "verify", "recompute the audit chain and name the first edited, missing or reordered record");
  actions[audit_verify] = [&](ApiClient& api, const Output& out) { return VerifyAudit(api, out); };

  // berth login / logout / whoami
  std::string login_token_file;
  std::string login_token;
  auto* login = app.add_subcommand(
      "login", "check an API token with berthd and save it (with --server) to the config file");
  login->add_option("--token-file", login_token_file,
                    "file holding the token (berthd's first start writes "
                    "<data-dir>/bootstrap-token); default: $BERTH_TOKEN, else stdin");
  checks[login] = [&] {
    std::string text;
    if (!login_token_file.empty()) {
      auto read = ReadSpec(login_token_file, env.in, "token file");
      if (!read) return PrintError(env, kExitUsage, FormatError(read.error()));
      text = *read;
    } else if (env.token) {
      text = *env.token;
    } else {
      std::getline(env.in, text);
    }
    auto first = text.find_first_not_of(" \t\r\n");
    auto last = text.find_last_not_of(" \t\r\n");
    if (first == std::string::npos) {
      return PrintError(env, kExitUsage,
                        "no token: pass --token-file FILE, set BERTH_TOKEN, or pipe it in");
    }
    login_token = text.substr(first, last - first + 1);
    if (env.config_path.empty()) {
      return PrintError(env, kExitUsage, "nowhere to save the login: set BERTH_CONFIG or HOME");
    }
    return kExitOk;
  };
  auto* logout = app.add_subcommand("logout", "forget the token saved by berth login");
  auto* whoami = app.add_subcommand("whoami", "who the token is: identity, roles, token expiry");
  actions[whoami] = [&](ApiClient& api, const Output& out) { return WhoAmI(api, out); };

  // berth identity list|create|disable|enable|grant-platform-admin|revoke-platform-admin
  auto* identity = app.add_subcommand("identity", "people and service accounts (admins)");
  identity->require_subcommand(1);
  auto* identity_list = identity->add_subcommand("list", "every identity you may manage");
  actions[identity_list] = [&](ApiClient& api, const Output& out) {
    return ListIdentities(api, out);
  };
  std::string identity_name;
  bool identity_service = false;
  bool identity_admin = false;
  std::vector<std::string> identity_tenants;
  std::map<std::string, std::string> identity_roles;
  auto* identity_create = identity->add_subcommand("create", "create a user or service account");
  identity_create->add_option("NAME", identity_name, "its name")->required();
  identity_create->add_flag("--service", identity_service, "a service account (CI, a bot)");
  identity_create->add_flag("--platform-admin", identity_admin, "make it a platform admin");
  bool identity_metrics = false;
  identity_create->add_flag("--metrics-reader", identity_metrics,
                            "it may GET /metrics and nothing else (Prometheus; with --service, "
                            "no --tenant)");
  identity_create->add_option("--tenant", identity_tenants,
                              "TENANT=ROLE, role viewer, member or tenant-admin (repeatable)");
  checks[identity_create] = [&] {
    for (const auto& t : identity_tenants) {
      auto eq = t.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == t.size()) {
        return PrintError(env, kExitUsage,
                          fmt::format("--tenant '{}': write TENANT=ROLE, e.g. vision=member", t));
      }
      identity_roles[t.substr(0, eq)] = t.substr(eq + 1);
    }
    return kExitOk;
  };
  actions[identity_create] = [&](ApiClient& api, const Output& out) {
    return CreateIdentity(api, identity_name, identity_service, identity_admin, identity_metrics,
                          identity_roles, out);
  };
  for (const char* action :
       {"disable", "enable", "grant-platform-admin", "revoke-platform-admin"}) {
    auto* cmd = identity->add_subcommand(action, fmt::format("{} an identity", action));
    cmd->add_option("NAME", identity_name, "the identity")->required();
    actions[cmd] = [&, action = std::string(action)](ApiClient& api, const Output& out) {
      return UpdateIdentity(api, identity_name, action, out);
    };
  }

  // berth member add|remove|list
  auto* member = app.add_subcommand("member", "who belongs to a tenant, with which role");
  member->require_subcommand(1);
  std::string member_tenant;
  std::string member_identity;
  std::string member_role = "member";
  auto* member_add = member->add_subcommand("add", "give an identity a role in a tenant");
  member_add->add_option("TENANT", member_tenant, "the tenant")->required();
  member_add->add_option("IDENTITY", member_identity, "the identity")->required();
  member_add->add_option("--role", member_role, "viewer, member or tenant-admin")
      ->capture_default_str();
  actions[member_add] = [&](ApiClient& api, const Output& out) {
    return SetMember(api, member_tenant, member_identity, member_role, out);
  };
  auto* member_remove = member->add_subcommand("remove", "take an identity out of a tenant");
  member_remove->add_option("TENANT", member_tenant, "the tenant")->required();
  member_remove->add_option("IDENTITY", member_identity, "the identity")->required();
  actions[member_remove] = [&](ApiClient& api, const Output& out) {
    return RemoveMember(api, member_tenant, member_identity, out);
  };
  auto* member_list = member->add_subcommand("list", "a tenant's members and their roles");
  member_list->add_option("TENANT", member_tenant, "the tenant")->required();
  actions[member_list] = [&](ApiClient& api, const Output& out) {
    return ListMembers(api, member_tenant, out);
  };

  // berth token create|list|revoke
  auto* token = app.add_subcommand("token", "API tokens: create (shown once), list, revoke");
  token->require_subcommand(1);
  std::string token_identity;
  std::string token_ttl;
  std::string token_description;
  std::string token_id;
  auto* token_create = token->add_subcommand("create", "a new token (yours, or --identity's)");
  token_create->add_option("--identity", token_identity, "for this identity (yourself by default)");
  token_create->add_option("--ttl", token_ttl, "lifetime, 1s to 400d (default 90d)");
  token_create->add_option("--description", token_description, "what it is for");
  actions[token_create] = [&](ApiClient& api, const Output& out) {
    return CreateToken(api, token_identity, token_ttl, token_description, out);
  };
  auto* token_list = token->add_subcommand("list", "tokens (never their secrets)");
  token_list->add_option("--identity", token_identity, "another identity's tokens");
  actions[token_list] = [&](ApiClient& api, const Output& out) {
    return ListTokens(api, token_identity, out);
  };
  auto* token_revoke = token->add_subcommand("revoke", "revoke a token at once");
  token_revoke->add_option("ID", token_id, "the token id (berth token list)")->required();
  actions[token_revoke] = [&](ApiClient& api, const Output& out) {
    return RevokeToken(api, token_id, out);
  };

  // berth quota request|requests|show|approve|reject|withdraw
  auto* quota = app.add_subcommand(
      "quota", "ask for a different queue quota, and decide such requests (docs/cli.md)");
  quota->require_subcommand(1);
  QuotaRequestFlags quota_flags;
  std::int64_t quota_id = 0;
  std::string quota_comment;
  std::string quota_state;
  std::string quota_tenant;
  auto* quota_request = quota->add_subcommand(
      "request", "ask for a queue's quota of one resource to change (a platform admin decides)");
  quota_request->add_option("QUEUE", quota_flags.queue, "the queue's path, e.g. vision/training")
      ->required();
  quota_request->add_option("--resource", quota_flags.resource,
                            "gpus (default), gpus/MODEL, gpu_memory, cpu or memory");
  quota_request->add_option("--guaranteed", quota_flags.guaranteed,
                            "the new guarantee, as the policy writes it (16, 0.5, 500m, 80Gi)");
  quota_request->add_option("--borrow-limit", quota_flags.borrow_limit,
                            "how far above the guarantee the queue may borrow");
  quota_request->add_option("--weight", quota_flags.weight, "share of idle capacity (1-1000)");
  quota_request->add_option("--lending-limit", quota_flags.lending_limit,
                            "part of the guarantee never lent to other queues");
  quota_request->add_option("--reason", quota_flags.reason, "why the queue needs it")->required();
  actions[quota_request] = [&](ApiClient& api, const Output& out) {
    return FileQuotaRequest(api, quota_flags, out);
  };
  auto* quota_requests = quota->add_subcommand("requests", "list quota requests, newest first");
  quota_requests->add_option("--state", quota_state, "Pending, Approved, Rejected or Withdrawn");
  quota_requests->add_option("--tenant", quota_tenant, "only this tenant's requests");
  actions[quota_requests] = [&](ApiClient& api, const Output& out) {
    return ListQuotaRequests(api, quota_state, quota_tenant, out);
  };
  auto* quota_show = quota->add_subcommand("show", "one quota request");
  auto* quota_approve = quota->add_subcommand(
      "approve", "make the request's quota a new policy version (berth policy rollback undoes it)");
  auto* quota_reject = quota->add_subcommand("reject", "turn a request down, saying why");
  auto* quota_withdraw = quota->add_subcommand("withdraw", "take back your own pending request");
  for (auto* cmd : {quota_show, quota_approve, quota_reject, quota_withdraw}) {
    cmd->add_option("ID", quota_id, "quota request id")->required()->check(CLI::PositiveNumber);
  }
  quota_approve->add_option("--comment", quota_comment, "a note for the requester");
  quota_reject->add_option("--comment", quota_comment, "why, for the requester")->required();
  actions[quota_show] = [&](ApiClient& api, const Output& out) {
    return ShowQuotaRequest(api, quota_id, out);
  };
  actions[quota_approve] = [&](ApiClient& api, const Output& out) {
    return ApproveQuotaRequest(api, quota_id, quota_comment, out);
  };
  actions[quota_reject] = [&](ApiClient& api, const Output& out) {
    return RejectQuotaRequest(api, quota_id, quota_comment, out);
  };
  actions[quota_withdraw] = [&](ApiClient& api, const Output& out) {
    return WithdrawQuotaRequest(api, quota_id, out);
  };
  // berth usage
  UsageQuery usage_query;
  std::vector<std::string> usage_by;
  auto* usage = app.add_subcommand(
      "usage",
      "allocated GPU-hours, cost and runs per tenant, queue, user, pool, model, node, "
      "day or month (docs/metering.md)");
  usage
      ->add_option("--by", usage_by,
                   "group by tenant|queue|user|pool|model|node|day|month; repeat or use commas "
                   "(default tenant)")
      ->delimiter(',');
  usage->add_option("--from", usage_query.from,
                    "from: a date (2026-11-01, UTC), an RFC 3339 time, a duration back from now "
                    "(7d) or epoch ms; default the start of this month");
  usage->add_option("--to", usage_query.to, "until (exclusive), as --from; default now");
  usage->add_option("--tenant", usage_query.tenant, "only this tenant");
  checks[usage] = [&] {
    for (const auto& b : usage_by) {
      usage_query.by += (usage_query.by.empty() ? "" : ",") + b;
    }
    for (auto* t : {&usage_query.from, &usage_query.to}) {
      auto q = UsageTimeQuery(*t, t == &usage_query.from ? "--from" : "--to");
      if (!q) return PrintError(env, kExitUsage, FormatError(q.error()));
      *t = std::move(*q);
    }
    return kExitOk;
  };
  actions[usage] = [&](ApiClient& api, const Output& out) {
    return ShowUsage(api, usage_query, out);
  };

  // berth report ops
  auto* report = app.add_subcommand("report", "reports over a window (docs/metering.md)");
  report->require_subcommand(1);
  OpsReportArgs ops_args;
  auto* report_ops = report->add_subcommand(
      "ops",
      "the operations report: allocation, utilization, queue wait, failures, evictions, cost "
      "and interventions, overall and per tenant");
  report_ops->add_option("--from", ops_args.from,
                         "from: a date (UTC), an RFC 3339 time, a duration back (7d) or epoch "
                         "ms; default 24 hours ago");
  report_ops->add_option("--to", ops_args.to, "until (exclusive), as --from; default now");
  report_ops->add_option("--out", ops_args.out_file, "write the report to FILE");
  checks[report_ops] = [&] {
    for (auto* t : {&ops_args.from, &ops_args.to}) {
      auto q = UsageTimeQuery(*t, t == &ops_args.from ? "--from" : "--to");
      if (!q) return PrintError(env, kExitUsage, FormatError(q.error()));
      *t = std::move(*q);
    }
    // -o: markdown (also for the default, table), html or json.
    ops_args.format = output_flag == "table" ? "markdown" : output_flag;
    if (ops_args.format == "csv") {
      return PrintError(env, kExitUsage,
                        "-o csv is not a report format; use -o markdown, html or json");
    }
    return kExitOk;
  };
  actions[report_ops] = [&](ApiClient& api, const Output& out) {
    return ShowOpsReport(api, ops_args, out);
  };

  // berth price apply|show
  auto* price = app.add_subcommand("price", "the versioned price table usage is costed with");
  price->require_subcommand(1);
  std::string price_path;
  std::string price_text;
  std::string price_comment;
  auto* price_apply =
      price->add_subcommand("apply", "make a price file the new version, in effect from now");
  price_apply->add_option("FILE", price_path, "price table YAML; - reads stdin")->required();
  price_apply->add_option("--comment", price_comment, "why, for the version list");
  std::int64_t price_base = 0;
  price_apply
      ->add_option("--base", price_base,
                   "the version the file was written against: refused (409) if another "
                   "version was applied since")
      ->check(CLI::PositiveNumber);
  checks[price_apply] = [&] {
    auto read = ReadSpec(price_path, env.in, "price table");
    if (!read) return PrintError(env, kExitError, FormatError(read.error()));
    price_text = std::move(*read);
    return kExitOk;
  };
  actions[price_apply] = [&](ApiClient& api, const Output& out) {
    return ApplyPrices(api, price_text, price_comment, price_base, out);
  };
  std::int64_t price_version = 0;
  auto* price_show = price->add_subcommand("show", "the active price table (or --version N)");
  auto* price_version_opt = price_show->add_option("--version", price_version, "a past version")
                                ->check(CLI::PositiveNumber);
  actions[price_show] = [&](ApiClient& api, const Output& out) {
    return ShowPrices(
        api, price_version_opt->count() > 0 ? std::optional(price_version) : std::nullopt, out);
  };

  // berth budget set|list
  auto* budget = app.add_subcommand("budget", "tenants' monthly budgets, alerts and enforcement");
  budget->require_subcommand(1);
  BudgetArgs budget_args;
  auto* budget_set = budget->add_subcommand(
      "set", "set a tenant's monthly budget (GPU-hours or money) and its alert thresholds");
  budget_set->add_option("TENANT", budget_args.tenant, "a tenant of the policy")->required();
  auto* gh = budget_set->add_option("--gpu-hours", budget_args.gpu_hours, "GPU-hours a month");
  auto* am = budget_set->add_option("--amount", budget_args.amount,
                                    "money a month, in the price table's currency");
  gh->excludes(am);
  budget_set->add_option("--alert", budget_args.alerts,
                         "alert thresholds in percent, e.g. 50,80,100 (default 80,100)");
  budget_set->add_flag("--enforce", budget_args.enforce,
                       "over budget, the tenant's new low-priority jobs wait (OverBudget)");
  checks[budget_set] = [&] {
    if (budget_args.gpu_hours.empty() && budget_args.amount.empty()) {
      return PrintError(env, kExitUsage,
                        "give --gpu-hours N or --amount N (see berth budget set --help)");
    }
    return kExitOk;
  };
  actions[budget_set] = [&](ApiClient& api, const Output& out) {
    return SetBudget(api, budget_args, out);
  };
  auto* budget_list =
      budget->add_subcommand("list", "every budget with this month's use and crossed thresholds");
  actions[budget_list] = [&](ApiClient& api, const Output& out) { return ListBudgets(api, out); };

  version_cmd = app.add_subcommand("version", "print the CLI's version");

  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive as "errors" with exit code 0.
    if (e.get_exit_code() == 0) return app.exit(e, env.out, env.err);
    return PrintError(env, kExitUsage, fmt::format("{} (see berth --help)", e.what()));
  }

  const CLI::App* chosen = app.get_subcommands().front();
  // `berth policy show`: the action belongs to the innermost command.
  while (!chosen->get_subcommands().empty()) chosen = chosen->get_subcommands().front();
  if (output_flag == "csv" && chosen != audit && chosen != usage) {
    return PrintError(env, kExitUsage,
                      "-o csv is only for `berth audit` and `berth usage`; use table or json");
  }
  if ((output_flag == "markdown" || output_flag == "html") && chosen != report_ops) {
    return PrintError(env, kExitUsage,
                      "-o markdown and -o html are only for `berth report ops`; use table or json");
  }
  Output output{env.out,
                output_flag == "json"  ? OutputFormat::kJson
                : output_flag == "csv" ? OutputFormat::kCsv
                                       : OutputFormat::kTable,
                env.clock};
  if (chosen == version_cmd) {
    PrintVersion(output);
    return kExitOk;
  }
  if (auto check = checks.find(chosen); check != checks.end()) {
    if (int code = check->second(); code != kExitOk) return code;
  }

  auto config = LoadConfig(env.config_path);
  if (!config) return PrintError(env, kExitUsage, FormatError(config.error()));
  if (chosen == logout) {
    bool had = !config->token.empty();
    config->token.clear();
    if (had) {
      if (auto st = SaveConfig(env.config_path, *config); !st) {
        return PrintError(env, kExitError, FormatError(st.error()));
      }
    }
    env.out << (had ? "logged out: the token is gone from " : "not logged in: no token in ")
            << env.config_path.string() << '\n';
    return kExitOk;
  }
  // Inside a job with no token of a person's ($BERTH_TOKEN or a login):
  // the job's own, at the URL berthd gave it (docs/jobs.md, "Checkpoints").
  const bool as_job = !env.token && config->token.empty() && env.job_token.has_value();
  // The server: --server, else $BERTH_SERVER, else (as a job) $BERTH_API_URL,
  // else the config file's.
  std::string server = !server_flag.empty()      ? server_flag
                       : env.server              ? *env.server
                       : as_job && env.api_url   ? *env.api_url
                       : !config->server.empty() ? config->server
                                                 : kDefaultServer;
  auto url = ParseServerUrl(server);
  if (!url) return PrintError(env, kExitUsage, FormatError(url.error()));
  ApiClient api(std::move(*url));
  // The CA to trust: --ca, else $BERTH_CA, else the one berth login saved.
  std::string ca = !ca_flag.empty() ? ca_flag : env.ca.value_or(config->ca);
  if (!ca.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(ca, ec)) {
      return PrintError(env, kExitUsage,
                        fmt::format("--ca '{}'{}: no such file; give berthd's CA certificate, "
                                    "e.g. <data-dir>/tls/ca.pem",
                                    ca,
                                    !ca_flag.empty() ? ""
                                    : env.ca         ? " (from BERTH_CA)"
                                                     : " (saved by berth login)"));
    }
    api.set_ca(ca);
  } else if (as_job && env.ca_pem) {
    if (auto st = api.set_ca_pem(*env.ca_pem); !st) {
      return PrintError(env, kExitUsage, FormatError(st.error()));
    }
  }
  // The token: $BERTH_TOKEN, else the config file's (berth login).
  if (chosen == login) {
    api.set_token(login_token);
    std::string saved_ca;
    if (!ca.empty()) saved_ca = std::filesystem::absolute(ca).string();
    CliConfig saved{server, login_token, saved_ca};
    if (auto status = Login(api, env.config_path, saved, output); !status) {
      return PrintError(env, ExitCodeFor(status.error()), FormatError(status.error()));
    }
    return kExitOk;
  }
  if (env.token) {
    api.set_token(*env.token);
  } else if (!config->token.empty()) {
    api.set_token(config->token);
  } else if (as_job) {
    api.set_token(*env.job_token);
  }
  if (auto status = actions.at(chosen)(api, output); !status) {
    return PrintError(env, ExitCodeFor(status.error()), FormatError(status.error()));
  }
  return kExitOk;
}

}  // namespace berth::cli
