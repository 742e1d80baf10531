// berth poc run|suite|check: the acceptance suite a platform team runs
// before trusting Berth, and its evidence report (docs/poc.md).
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <ranges>
#include <thread>

#include "cli/api_error.h"
#include "cli/poc_report.h"
#include "cli/poc_run.h"
#include "cli/poc_suite.h"
#include "cli/registry.h"

namespace berth::cli {
namespace {

struct PocFlags {
  std::string suite_path;
  std::string suite_text;
  std::string out_dir;
  std::string allow_on;
  std::vector<std::string> cases;  // --case: run only these
  poc::Suite suite;
};

// Reads --suite (or takes the compiled-in default) and parses it; exit 1
// with the field and the fix when it is not a suite.
int PocLoadSuite(CommandRegistry& r, PocFlags& f) {
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

Status PocRun(CommandRegistry& r, PocFlags& f, ApiClient& api, const Output& out,
              const Connection& conn) {
  // The cluster is the server address the CLI is pointed at, as it was
  // given (--server, $BERTH_SERVER or berth login's): the run submits work
  // and changes the policy, so it must be named on purpose.
  if (f.allow_on != conn.server) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("berth poc run submits jobs, makes identities and applies a policy "
                            "version; it runs only on the cluster --allow-on names, and this "
                            "berth is pointed at '{}' (--allow-on '{}'): pass --allow-on {} to "
                            "run there",
                            conn.server, f.allow_on, conn.server));
  }
  const Environment& env = r.env();
  std::string token = env.token.value_or("");
  if (token.empty()) {
    auto config = LoadConfig(env.config_path);
    if (config) token = config->token;
  }
  if (token.empty()) {
    return Fail(Code::kUnauthenticated,
                "berth poc run needs a platform admin's token: berth login first (or set "
                "BERTH_TOKEN)");
  }
  api.set_token(token);
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
  out.out << fmt::format("berth poc run {}: suite {} {} ({} cases) on {}\n", options.run,
                         f.suite.name, f.suite.version, f.suite.cases.size(), conn.server)
          << std::flush;
  auto report = poc::RunSuite(api, f.suite, options);
  if (!report) return std::unexpected(report.error());
  poc::ScoreReport(*report);
  const std::filesystem::path dir(f.out_dir);
  BERTH_RETURN_IF_ERROR(PocWrite(dir / "report.json", report->dump(2) + "\n"));
  BERTH_RETURN_IF_ERROR(PocWrite(dir / "report.md", poc::RenderMarkdown(*report)));
  BERTH_RETURN_IF_ERROR(PocWrite(dir / "report.html", poc::RenderHtml(*report)));
  const auto failed = (*report)["summary"]["failed"].get<int>();
  out.out << fmt::format(
      "{} passed, {} failed, {} skipped; report in {}\n", (*report)["summary"]["passed"].get<int>(),
      failed, (*report)["summary"]["skipped"].get<int>(), (dir / "report.html").string());
  const auto& problems = (*report)["cleanup"]["problems"];
  if (!problems.empty()) {
    return Fail(Code::kInternal, fmt::format("cleanup left something behind: {}; see {}",
                                             problems.dump(), (dir / "report.md").string()));
  }
  if (failed > 0) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("{} case(s) failed; see {}", failed, (dir / "report.md").string()));
  }
  return Ok();
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
  run->add_option("--allow-on", f.allow_on,
                  "the cluster it may run on: the server address as berth uses it (it submits "
                  "work)")
      ->required();
  run->add_option("--case", f.cases,
                  "run only this case (repeat for more; the suite's setup and cleanup still run)");
  registry.OnCheck(run, [&registry, &f] { return PocLoadSuite(registry, f); });
  registry.OnLogin(run, [&registry, &f](ApiClient& api, const Output& out, const Connection& c) {
    return PocRun(registry, f, api, out, c);
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
