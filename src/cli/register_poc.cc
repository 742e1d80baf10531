// berth poc run|rerun|suite|check|observe|cleanup: the acceptance suite a
// platform team runs before trusting Berth, its evidence report, re-testing
// what failed, the daily table after go-live, and cleaning up after a run
// that was killed (docs/poc.md).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <ranges>
#include <thread>

#include "cli/api_error.h"
#include "cli/format.h"
#include "cli/interrupt.h"
#include "cli/json_view.h"
#include "cli/poc_cleanup.h"
#include "cli/poc_model_server.h"
#include "cli/poc_observe.h"
#include "cli/poc_report.h"
#include "cli/poc_rerun.h"
#include "cli/poc_run.h"
#include "cli/poc_suite.h"
#include "cli/registry.h"
#include "common/self_path.h"

namespace berth::cli {
namespace {

using nlohmann::json;

struct PocFlags {
  std::string suite_path;
  std::string suite_text;
  std::string out_dir;
  std::string allow_on;
  std::vector<std::string> cases;  // --case: run only these
  // --failover-command: what stops the leading berthd in a failover step
  // (the operator's, never the suite's); given: whether it was on the line.
  std::string failover_command;
  std::vector<const CLI::Option*> failover_options;
  // --model-server: the model server command a service replica runs
  // (${model_server} in the suite).
  std::string model_server = "berth-model-server";
  // One per command that takes it (run, rerun): the flag was given when
  // any of them saw it.
  std::vector<const CLI::Option*> model_server_options;
  poc::Suite suite;
  // berth poc rerun
  std::string report_path;
  bool failed = false;
  std::vector<std::string> rerun_cases;  // --case of rerun
  std::set<std::string> rerun_only;      // what the rerun selected
  poc::EarlierReport earlier;
  // berth poc observe
  std::int64_t days = 0;
  std::string tenant;
  // berth poc cleanup
  std::string run_id;
  // --scale: bursts' counts and bounds times this
  std::int64_t scale = 1;
};

// --model-server when not given: the berth-model-server installed beside
// this berth (the all-in-one's build/release/bin, or /usr/local/bin on a
// fleet installed the same way on every node), by its absolute path, since
// a job's PATH holds only /usr/local/bin:/usr/bin:/bin; else the bare name.
std::string PocModelServer(const PocFlags& f) {
  if (std::any_of(f.model_server_options.begin(), f.model_server_options.end(),
                  [](const CLI::Option* o) { return o->count() > 0; })) {
    return f.model_server;
  }
  const auto dir = ExecutableDir();
  if (!dir) return f.model_server;
  const auto beside = *dir / "berth-model-server";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(beside, ec) || ec) return f.model_server;
  return beside.string();
}

// Reads --suite (or takes the compiled-in default) and parses it; exit 1
// with the field and the fix when it is not a suite.
int PocLoadSuite(CommandRegistry& r, PocFlags& f) {
  // What stops the leader is only ever the operator's: refused when empty.
  const bool failover_given = std::any_of(f.failover_options.begin(), f.failover_options.end(),
                                          [](const CLI::Option* o) { return o->count() > 0; });
  if (failover_given && f.failover_command.find_first_not_of(" \t\n") == std::string::npos) {
    return r.Fail(kExitError,
                  "--failover-command is empty; give the shell command that stops the leading "
                  "berthd (BERTH_POC_LEADER holds its address), e.g. --failover-command 'ssh cp1 "
                  "systemctl stop berthd', or leave the flag out to skip the failover case");
  }
  if (f.suite_path.empty()) {
    f.suite_text = std::string(poc::DefaultSuiteText());
  } else {
    auto read = ReadDocument(f.suite_path, r.env().in, "suite");
    if (!read) return r.Fail(kExitError, FormatError(read.error()));
    f.suite_text = std::move(*read);
  }
  auto suite = poc::ParseSuite(f.suite_text);
  if (!suite) {
    Error e = suite.error();
    if (!f.suite_path.empty()) e.message += fmt::format(" (in {})", f.suite_path);
    return r.Fail(kExitError, FormatError(e));
  }
  f.suite = std::move(*suite);
  if (!f.cases.empty()) {
    auto cut = poc::SelectCases(f.suite, f.cases);
    if (!cut) return r.Fail(kExitError, FormatError(cut.error()));
    f.suite = std::move(*cut);
  }
  return kExitOk;
}

Status PocWrite(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Fail(Code::kInternal, fmt::format("cannot write {}", path.string()));
  return Ok();
}

// The cluster is the server address the CLI is pointed at, as it was
// given (--server, $BERTH_SERVER or berth login's): run, rerun and cleanup
// submit or cancel work and change the policy, so it must be named on
// purpose. Then the caller's token, which these commands need.
Status PocAllowedOn(CommandRegistry& r, const std::string& command, const std::string& does,
                    const std::string& allow_on, ApiClient& api, const Connection& conn) {
  if (allow_on != conn.server) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("berth poc {} {}; it runs only on the cluster --allow-on names, and "
                            "this berth is pointed at '{}' (--allow-on '{}'): pass --allow-on {} "
                            "to run there",
                            command, does, conn.server, allow_on, conn.server));
  }
  const Environment& env = r.env();
  std::string token = env.token.value_or("");
  if (token.empty()) {
    auto config = LoadConfig(env.config_path);
    if (config) token = config->token;
  }
  if (token.empty()) {
    return Fail(Code::kUnauthenticated,
                fmt::format("berth poc {} needs a platform admin's token: berth login first (or "
                            "set BERTH_TOKEN)",
                            command));
  }
  api.set_token(token);
  return Ok();
}

// `earlier`: the report a rerun re-tests (nullptr for berth poc run).
Status PocRun(CommandRegistry& r, PocFlags& f, ApiClient& api, const Output& out,
              const Connection& conn, const poc::EarlierReport* earlier) {
  std::set<std::string> only;
  if (earlier != nullptr) {
    only = f.rerun_only;
    if (only.empty()) {
      out.out << fmt::format("nothing failed in {} (run {}): nothing to re-run\n", earlier->path,
                             Text(earlier->doc, "run.id"));
      return Ok();
    }
  }
  BERTH_RETURN_IF_ERROR(PocAllowedOn(r, earlier != nullptr ? "rerun" : "run",
                                     "submits jobs, makes identities and applies a policy version",
                                     f.allow_on, api, conn));
  std::error_code ec;
  std::filesystem::create_directories(f.out_dir, ec);
  if (ec) {
    return Fail(Code::kInvalidArgument,
                fmt::format("--out {}: cannot make the directory: {}", f.out_dir, ec.message()),
                "out");
  }
  std::vector<ServerUrl> urls;
  for (auto part : conn.server | std::views::split(',')) {
    auto url = ParseServerUrl(std::string_view(part.begin(), part.end()));
    if (!url) return std::unexpected(url.error());
    urls.push_back(std::move(*url));
  }
  poc::RunOptions options;
  options.run = poc::RunPrefix(out.clock.NowMs());
  options.cluster = conn.server;
  options.clock = &out.clock;
  options.client_for = [urls, ca = conn.ca](const std::string& t) {
    ApiClient client(urls);
    if (!ca.empty()) client.set_ca(ca);
    client.set_token(t);
    return client;
  };
  options.sleep = [](std::int64_t ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  };
  options.progress = [&out](const std::string& line) { out.out << line << '\n' << std::flush; };
  options.only_cases = only;
  options.failover_command = f.failover_command;
  // Ctrl-C or SIGTERM: the run stops after the step in flight, cleans up
  // and writes the report; the command then exits 128 + the signal.
  InstallInterruptHandlers();
  options.interrupted = [] { return InterruptSignal(); };
  options.signal_name = [](int sig) { return InterruptSignalName(sig); };
  options.model_server = PocModelServer(f);
  options.scale = f.scale;
  if (earlier != nullptr) {
    out.out << fmt::format(
                   "berth poc rerun {}: {} case(s) of run {} ({}), suite "
                   "{} {} on {}\n",
                   options.run, only.size(), Text(earlier->doc, "run.id"), earlier->path,
                   f.suite.name, f.suite.version, conn.server)
            << std::flush;
  } else {
    out.out << fmt::format("berth poc run {}: suite {} {} ({} cases) on {}\n", options.run,
                           f.suite.name, f.suite.version, f.suite.cases.size(), conn.server)
            << std::flush;
  }
  // Said before the run, since the inference case would fail on it.
  if (const std::string unreachable = poc::ModelServerUnreachable(options.model_server);
      !unreachable.empty()) {
    out.out << "warning: " << unreachable << '\n' << std::flush;
  }
  auto report = poc::RunSuite(api, f.suite, options);
  if (!report) return std::unexpected(report.error());
  poc::ScoreReport(*report);
  if (earlier != nullptr) poc::MarkRerun(*report, *earlier);
  const std::filesystem::path dir(f.out_dir);
  BERTH_RETURN_IF_ERROR(PocWrite(dir / "report.json", report->dump(2) + "\n"));
  BERTH_RETURN_IF_ERROR(
      PocWrite(dir / "report.md", poc::WithRerunMarkdown(poc::RenderMarkdown(*report), *report)));
  BERTH_RETURN_IF_ERROR(
      PocWrite(dir / "report.html", poc::WithRerunHtml(poc::RenderHtml(*report), *report)));
  const auto failed = (*report)["summary"]["failed"].get<int>();
  out.out << fmt::format(
      "{} passed, {} failed, {} skipped; report in {}\n", (*report)["summary"]["passed"].get<int>(),
      failed, (*report)["summary"]["skipped"].get<int>(), (dir / "report.html").string());
  const auto& problems = (*report)["cleanup"]["problems"];
  if (!problems.empty()) {
    return Fail(Code::kInternal, fmt::format("cleanup left something behind: {}; see {}",
                                             problems.dump(), (dir / "report.md").string()));
  }
  if (const json* stopped = Field(*report, "interrupted"); stopped != nullptr) {
    // The exit status is 128 + the signal (app.cc), whatever the verdicts.
    return Fail(Code::kFailedPrecondition,
                fmt::format("interrupted by {}: {} case(s) not run, what the run made is cleaned "
                            "up; see {}",
                            Text(*stopped, "signal"), IntText(*report, "summary.not_run"),
                            (dir / "report.md").string()));
  }
  if (failed > 0) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("{} case(s) failed; see {}", failed, (dir / "report.md").string()));
  }
  return Ok();
}

Status PocObserve(PocFlags& f, ApiClient& api, const Output& out) {
  auto me = api.Get("/v1/whoami");
  if (!me) return std::unexpected(me.error());
  poc::ObserveMeta meta;
  meta.server = api.url().text;
  meta.caller = Text(*me, "name");
  meta.platform_admin = Bool(*me, "platform_admin");
  meta.tenant = f.tenant;
  meta.generated_ms = out.clock.NowMs();
  if (!f.tenant.empty() && !meta.platform_admin) {
    const json* tenants = Field(*me, "tenants");
    if (tenants == nullptr || !tenants->is_object() || !tenants->contains(f.tenant)) {
      return Fail(Code::kPermissionDenied,
                  fmt::format("--tenant {}: {} is not a member of it, so its operations figures "
                              "are not yours to read (berth whoami lists your tenants)",
                              f.tenant, meta.caller),
                  "tenant");
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(f.out_dir, ec);
  if (ec) {
    return Fail(Code::kInvalidArgument,
                fmt::format("--out {}: cannot make the directory: {}", f.out_dir, ec.message()),
                "out");
  }
  // A window the API refuses as too large (more stored rows than berthd
  // --report-max-rows) leaves its row empty and says so; anything else
  // (no access, no server) stops the command.
  auto fetch = [&api](const poc::ObserveWindow& w) -> Result<poc::ObserveSource> {
    poc::ObserveSource src{w, nullptr, ""};
    auto ops = api.Get("/v1/reports/ops" + QueryString({{"from", std::to_string(w.from)},
                                                        {"to", std::to_string(w.to)}}));
    if (ops) {
      src.ops = std::move(*ops);
    } else if (ops.error().code == Code::kInvalidArgument) {
      src.error = ops.error().message;
    } else {
      return std::unexpected(ops.error());
    }
    return src;
  };
  const auto windows = poc::ObserveDays(meta.generated_ms, static_cast<int>(f.days));
  std::vector<poc::ObserveSource> days;
  for (const auto& w : windows) {
    auto src = fetch(w);
    if (!src) return std::unexpected(src.error());
    days.push_back(std::move(*src));
  }
  poc::ObserveWindow whole{"whole period", windows.front().from, windows.back().to, true};
  auto period = fetch(whole);
  if (!period) return std::unexpected(period.error());
  const json doc = poc::BuildObserve(days, *period, meta);
  const std::filesystem::path dir(f.out_dir);
  BERTH_RETURN_IF_ERROR(PocWrite(dir / "observe.json", doc.dump(2) + "\n"));
  BERTH_RETURN_IF_ERROR(PocWrite(dir / "observe.md", poc::RenderObserveMarkdown(doc)));
  BERTH_RETURN_IF_ERROR(PocWrite(dir / "observe.html", poc::RenderObserveHtml(doc)));
  out.out << fmt::format("berth poc observe: {} UTC day(s) to {}{}; {} in {}\n", f.days,
                         FormatUtc(meta.generated_ms),
                         f.tenant.empty() ? "" : ", tenant " + f.tenant,
                         "observe.json, observe.md, observe.html", dir.string());
  return Ok();
}

Status PocCleanup(CommandRegistry& r, PocFlags& f, ApiClient& api, const Output& out,
                  const Connection& conn) {
  BERTH_RETURN_IF_ERROR(PocAllowedOn(
      r, "cleanup",
      "deletes services, cancels jobs, revokes tokens, disables identities and rolls the policy "
      "back",
      f.allow_on, api, conn));
  auto left = poc::FindLeftovers(api, f.run_id);
  if (!left) return std::unexpected(left.error());
  if (left->empty()) {
    out.out << fmt::format(
        "berth poc cleanup {}: nothing to do (no service or live job of a {}-* tenant, no "
        "enabled {}-* identity or unrevoked token, and the run's policy version is not active)\n",
        f.run_id, f.run_id, f.run_id);
    return Ok();
  }
  const poc::CleanupClock clock{
      &out.clock,
      [](std::int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }, 250};
  const json c = poc::CleanUpRun(api, *left, clock);
  out.out << fmt::format("berth poc cleanup {}:\n", f.run_id);
  for (const auto& svc : Array(c, "services_deleted")) {
    out.out << fmt::format("  deleted service {}\n", ValueText(svc));
  }
  for (const auto& id : Array(c, "jobs_cancelled")) {
    out.out << fmt::format("  cancelled job {}\n", ValueText(id));
  }
  for (const auto& t : Array(c, "tokens_revoked")) {
    out.out << fmt::format("  revoked token {} of {}\n", Text(t, "id"), Text(t, "identity"));
  }
  for (const auto& id : Array(c, "identities_disabled")) {
    out.out << fmt::format("  disabled identity {}\n", ValueText(id));
  }
  if (const json* p = Field(c, "policy"); p != nullptr && p->is_object()) {
    out.out << fmt::format("  rolled the policy back: version {} restored as version {}\n",
                           IntText(*p, "restored"), IntText(*p, "as_version"));
  }
  const json& problems = Array(c, "problems");
  if (!problems.empty()) {
    std::string text;
    for (const auto& p : problems) text += (text.empty() ? "" : "; ") + ValueText(p);
    return Fail(Code::kInternal, fmt::format("cleanup left something behind: {}", text));
  }
  out.out << std::flush;
  return Ok();
}

// The options of a command that submits work to a cluster (run, rerun):
// the cluster it may touch, and how its failover case stops the leader.
void PocAddRunTarget(CLI::App* command, PocFlags& f) {
  command
      ->add_option("--allow-on", f.allow_on,
                   "the cluster it may run on: the server address as berth uses it (it submits "
                   "work)")
      ->required();
  f.failover_options.push_back(command->add_option(
      "--failover-command", f.failover_command,
      "a shell command (/bin/sh -c) that stops the leading berthd, for the failover "
      "case; BERTH_POC_LEADER holds the leader's address (only ever from this flag, "
      "never from a suite)"));
  f.model_server_options.push_back(
      command
          ->add_option("--model-server", f.model_server,
                       "the model server a service case's replica runs (${model_server}): a "
                       "command on every node's job PATH (/usr/local/bin:/usr/bin:/bin), or an "
                       "absolute path every node has (default: the berth-model-server beside "
                       "this berth, by absolute path, when there is one)")
          ->capture_default_str());
  command
      ->add_option("--scale", f.scale,
                   "multiply every burst's job counts, and its expected bounds, by N (1: as "
                   "the suite says; docs/poc.md \"Concurrent load\")")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100}))
      ->capture_default_str();
}

}  // namespace

void RegisterPocCommands(CommandRegistry& registry) {
  auto& f = registry.Keep<PocFlags>();
  auto* poc = registry.app().add_subcommand(
      "poc", "the acceptance suite a platform team runs before trusting Berth (docs/poc.md)");
  poc->require_subcommand(1);

  auto* run = poc->add_subcommand(
      "run", "run a suite against this cluster as real identities; write report.json, .md, .html");
  run->add_option("--suite", f.suite_path, "suite YAML; - reads stdin (default: the built-in one)");
  run->add_option("--out", f.out_dir, "directory for the reports")->required();
  PocAddRunTarget(run, f);
  run->add_option("--case", f.cases,
                  "run only this case (repeat for more; the suite's setup and cleanup still run)");
  registry.OnCheck(run, [&registry, &f] { return PocLoadSuite(registry, f); });
  registry.OnLogin(run, [&registry, &f](ApiClient& api, const Output& out, const Connection& c) {
    return PocRun(registry, f, api, out, c, nullptr);
  });

  auto* rerun = poc->add_subcommand(
      "rerun",
      "re-test only the cases that failed in an earlier report, with the same suite; write "
      "report.json, .md, .html that name the report re-tested");
  rerun->add_option("REPORT", f.report_path, "the earlier run's --out directory or its report.json")
      ->required();
  rerun->add_flag("--failed", f.failed, "re-run the cases that failed (with --case: those too)");
  rerun->add_option("--case", f.rerun_cases,
                    "re-run this case of the report (repeat for more; with --failed: the failed "
                    "ones too)");
  rerun->add_option("--suite", f.suite_path,
                    "the suite that report ran (its SHA-256 must match; default: the built-in "
                    "one)");
  rerun->add_option("--out", f.out_dir, "directory for the new reports")->required();
  PocAddRunTarget(rerun, f);
  registry.OnCheck(rerun, [&registry, &f] {
    if (int code = PocLoadSuite(registry, f); code != kExitOk) return code;
    auto earlier = poc::ReadEarlierReport(f.report_path);
    if (!earlier) return registry.Fail(kExitError, FormatError(earlier.error()));
    f.earlier = std::move(*earlier);
    if (auto same = poc::CheckSameSuite(f.earlier, f.suite, f.suite_path); !same) {
      return registry.Fail(kExitError, FormatError(same.error()));
    }
    auto only = poc::SelectRerunCases(f.earlier.doc, f.failed, f.rerun_cases);
    if (!only) return registry.Fail(kExitUsage, FormatError(only.error()));
    f.rerun_only = std::move(*only);
    return kExitOk;
  });
  registry.OnLogin(rerun, [&registry, &f](ApiClient& api, const Output& out, const Connection& c) {
    return PocRun(registry, f, api, out, c, &f.earlier);
  });

  auto* observe = poc->add_subcommand(
      "observe",
      "the daily table after go-live (jobs, failures, wait, utilization, alerts, interventions, "
      "cost per tenant) over the last N UTC days; write observe.json, .md, .html");
  observe->add_option("--days", f.days, "UTC days back from today, 1 to 90")->required();
  observe->add_option("--out", f.out_dir, "directory for the tables")->required();
  observe->add_option("--tenant", f.tenant, "one tenant's figures (default: every one you see)");
  registry.OnCheck(observe, [&registry, &f] {
    if (auto ok = poc::CheckObserveDays(f.days); !ok) {
      return registry.Fail(kExitUsage, FormatError(ok.error()));
    }
    return kExitOk;
  });
  registry.OnRun(observe,
                 [&f](ApiClient& api, const Output& out) { return PocObserve(f, api, out); });

  auto* cleanup = poc->add_subcommand(
      "cleanup",
      "undo what a killed berth poc run left: cancel its jobs, revoke its tokens, disable its "
      "identities, roll its policy version back");
  cleanup->add_option("RUN_ID", f.run_id, "the run's id (poc-...), as berth poc run printed it")
      ->required();
  cleanup
      ->add_option("--allow-on", f.allow_on,
                   "the cluster it may run on: the server address as berth uses it")
      ->required();
  registry.OnCheck(cleanup, [&registry, &f] {
    if (!poc::IsRunPrefix(f.run_id)) {
      return registry.Fail(kExitUsage,
                           fmt::format("RUN_ID '{}' is not a run id: berth poc run prints it as "
                                       "\"berth poc run poc-...\" (poc- and base-36 digits)",
                                       f.run_id));
    }
    return kExitOk;
  });
  registry.OnLogin(cleanup,
                   [&registry, &f](ApiClient& api, const Output& out, const Connection& c) {
                     return PocCleanup(registry, f, api, out, c);
                   });

  auto* suite = poc->add_subcommand("suite", "print the built-in suite, to adapt");
  registry.OnLocal(suite, [](const Output& out) {
    out.out << poc::DefaultSuiteText();
    return kExitOk;
  });

  auto* check = poc->add_subcommand("check", "check a suite file without running it");
  check->add_option("FILE", f.suite_path, "suite YAML; - reads stdin")->required();
  registry.OnLocal(check, [&registry, &f](const Output& out) {
    if (int code = PocLoadSuite(registry, f); code != kExitOk) return code;
    out.out << fmt::format("suite {} {}: {} groups, {} cases, sha256 {}\n", f.suite.name,
                           f.suite.version, f.suite.groups.size(), f.suite.cases.size(),
                           f.suite.sha256);
    return kExitOk;
  });
}

}  // namespace berth::cli
