#include "cli/app.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <ranges>
#include <sstream>

#include "cli/api_error.h"
#include "cli/commands.h"
#include "cli/interrupt.h"
#include "cli/registry.h"
#include "cli/version.h"

namespace berth::cli {
namespace {

int ExitCodeFor(const Error& error) {
  // A command stopped by Ctrl-C or SIGTERM (interrupt.h) exits as a shell
  // expects: 128 + the signal.
  if (const int signal = InterruptSignal(); signal != 0) return 128 + signal;
  return error.code == Code::kUnavailable ? kExitUnavailable : kExitError;
}

// The command groups, in the order `berth --help` lists them. To add a
// command, add it to its group's register_*.cc (or a new group here).
constexpr void (*kGroups[])(CommandRegistry&) = {
    RegisterJobCommands,      RegisterOutputCommands,  RegisterClusterCommands,
    RegisterAlertCommands,    RegisterPolicyCommands,  RegisterAuditCommands,
    RegisterIdentityCommands, RegisterQuotaCommands,   RegisterUsageCommands,
    RegisterReportCommands,   RegisterBillingCommands, RegisterServiceCommands,
    RegisterPocCommands,
};

}  // namespace

void RegisterCommands(CommandRegistry& registry) {
  for (auto* register_group : kGroups) register_group(registry);
  auto* version = registry.app().add_subcommand("version", "print the CLI's version");
  registry.OnLocal(version, [](const Output& out) {
    PrintVersion(out);
    return kExitOk;
  });
}

namespace {

// The global flags, which every command takes.
struct GlobalFlags {
  std::string server;
  std::string ca;
  std::string output = "table";
};

void AddGlobalFlags(CLI::App& app, GlobalFlags& flags) {
  // Global flags may follow the command: `berth jobs -o json`.
  app.fallthrough();
  app.require_subcommand(1);
  app.add_option("--server", flags.server,
                 fmt::format("berthd URL, or every control-plane berthd's as URL,URL,... (the "
                             "CLI follows the leader) (default: $BERTH_SERVER, else {})",
                             kDefaultServer));
  app.add_option("--ca", flags.ca,
                 "PEM CA file to trust for an https server, e.g. <data-dir>/tls/ca.pem "
                 "(default: $BERTH_CA, else the system trust store)");
  app.add_option("-o,--output", flags.output,
                 "output format: table or json (csv: berth audit, usage; markdown, html: berth "
                 "report ops)")
      ->check(CLI::IsMember({"table", "json", "csv", "markdown", "html"}));
  app.set_version_flag("--version", fmt::format("berth {}", Version()));
  // Subcommands inherit the footer, so `berth jobs --help` names the globals too.
  app.footer(
      "Global options go before or after the command: --server URL, --ca FILE, -o/--output "
      "table|json.\n"
      "Exit codes: 0 ok, 1 request failed, 2 usage error, 3 berthd unreachable or unavailable.");
}

// -o csv, markdown and html only where the command registered them.
int CheckFormat(const CommandRegistry& registry, const CommandRegistry::Command& cmd,
                const std::string& format) {
  if (format == "table" || format == "json") return kExitOk;
  if (std::ranges::find(cmd.formats, format) != cmd.formats.end()) return kExitOk;
  if (format == "csv") {
    return registry.Fail(kExitUsage,
                         "-o csv is only for `berth audit` and `berth usage`; use table or json");
  }
  return registry.Fail(
      kExitUsage, "-o markdown and -o html are only for `berth report ops`; use table or json");
}

// Chooses the server, CA and token, then runs the command against berthd.
int Connect(const CommandRegistry& registry, const CommandRegistry::Command& cmd,
            const GlobalFlags& flags, const CliConfig& config, const Output& output) {
  const Environment& env = registry.env();
  // Inside a job with no token of a person's ($BERTH_TOKEN or a login):
  // the job's own, at the URL berthd gave it (docs/jobs.md, "Checkpoints").
  const bool as_job = !env.token && config.token.empty() && env.job_token.has_value();
  // The server: --server, else $BERTH_SERVER, else (as a job) $BERTH_API_URL,
  // else the config file's.
  std::string server = !flags.server.empty()    ? flags.server
                       : env.server             ? *env.server
                       : as_job && env.api_url  ? *env.api_url
                       : !config.server.empty() ? config.server
                                                : kDefaultServer;
  // Several berthd of one control plane: "URL,URL,..." (ApiClient follows
  // the leader).
  std::vector<ServerUrl> urls;
  for (auto part : server | std::views::split(',')) {
    auto url = ParseServerUrl(std::string_view(part.begin(), part.end()));
    if (!url) return registry.Fail(kExitUsage, FormatError(url.error()));
    urls.push_back(std::move(*url));
  }
  ApiClient api(std::move(urls));
  // The CA to trust: --ca, else $BERTH_CA, else the one berth login saved.
  std::string ca = !flags.ca.empty() ? flags.ca : env.ca.value_or(config.ca);
  if (!ca.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(ca, ec)) {
      return registry.Fail(kExitUsage,
                           fmt::format("--ca '{}'{}: no such file; give berthd's CA certificate, "
                                       "e.g. <data-dir>/tls/ca.pem",
                                       ca,
                                       !flags.ca.empty() ? ""
                                       : env.ca          ? " (from BERTH_CA)"
                                                         : " (saved by berth login)"));
    }
    api.set_ca(ca);
  } else if (as_job && env.ca_pem) {
    if (auto st = api.set_ca_pem(*env.ca_pem); !st) {
      return registry.Fail(kExitUsage, FormatError(st.error()));
    }
  }
  Status status;
  if (cmd.login) {
    status = cmd.login(api, output, Connection{server, ca});
  } else {
    // The token: $BERTH_TOKEN, else the config file's (berth login).
    if (env.token) {
      api.set_token(*env.token);
    } else if (!config.token.empty()) {
      api.set_token(config.token);
    } else if (as_job) {
      api.set_token(*env.job_token);
    }
    status = cmd.action(api, output);
  }
  if (!status) return registry.Fail(ExitCodeFor(status.error()), FormatError(status.error()));
  return kExitOk;
}

}  // namespace

int RunCli(const std::vector<std::string>& args, const Environment& env) {
  CLI::App app{"berth: the command-line client of the Berth GPU cluster scheduler.", "berth"};
  GlobalFlags flags;
  AddGlobalFlags(app, flags);
  CommandRegistry registry(app, env, flags.output);
  RegisterCommands(registry);

  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive as "errors" with exit code 0.
    if (e.get_exit_code() == 0) return app.exit(e, env.out, env.err);
    return registry.Fail(kExitUsage, fmt::format("{} (see berth --help)", e.what()));
  }

  const CLI::App* chosen = app.get_subcommands().front();
  // `berth policy show`: the action belongs to the innermost command.
  while (!chosen->get_subcommands().empty()) chosen = chosen->get_subcommands().front();
  const CommandRegistry::Command* cmd = registry.Find(chosen);
  if (cmd == nullptr || !cmd->runnable()) {
    // A group added the command without an action (CommandTable finds it).
    return registry.Fail(kExitError,
                         fmt::format("berth {}: nothing runs this command", chosen->get_name()));
  }
  if (int code = CheckFormat(registry, *cmd, flags.output); code != kExitOk) return code;
  Output output{env.out,
                flags.output == "json"  ? OutputFormat::kJson
                : flags.output == "csv" ? OutputFormat::kCsv
                                        : OutputFormat::kTable,
                env.clock};
  if (cmd->local) return cmd->local(output);
  if (cmd->check) {
    if (int code = cmd->check(); code != kExitOk) return code;
  }
  auto config = LoadConfig(env.config_path);
  if (!config) return registry.Fail(kExitUsage, FormatError(config.error()));
  if (cmd->config) return cmd->config(*config);
  return Connect(registry, *cmd, flags, *config, output);
}

std::map<std::string, bool> CommandTable() {
  std::istringstream in;
  std::ostringstream out;
  SystemClock clock;
  const Environment env{in, out, out, std::nullopt, clock};
  CLI::App app;
  GlobalFlags flags;
  AddGlobalFlags(app, flags);
  CommandRegistry registry(app, env, flags.output);
  RegisterCommands(registry);
  return registry.Table();
}

}  // namespace berth::cli
