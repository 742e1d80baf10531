// How `berth`'s command groups join its command line. RunCli (app.cc) builds
// the app and the global flags, then calls each group's Register function
// (register_*.cc), in the order `berth --help` lists them. A group adds its
// subcommands, their flags and, for each command, what runs: an Action
// against berthd, or for login and logout one of the two special kinds. A
// Check runs after parsing and before anything is sent (reading a file,
// cross-flag rules). The flags' variables live in a struct the group asks
// the registry to Keep, so they outlive the parse.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <istream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/api_client.h"
#include "cli/app.h"
#include "cli/commands.h"
#include "common/status.h"

namespace berth::cli {

// The server and CA the command line and environment chose (berth login
// saves them).
struct Connection {
  const std::string& server;
  const std::string& ca;  // "" for the system trust store
};

class CommandRegistry {
 public:
  // Runs against berthd with the caller's token.
  using Action = std::function<Status(ApiClient&, const Output&)>;
  // Runs against berthd with no token set: the command brings its own
  // (berth login).
  using LoginAction = std::function<Status(ApiClient&, const Output&, const Connection&)>;
  // Runs on the config file alone, before a server is chosen (berth
  // logout); returns the exit code.
  using ConfigAction = std::function<int(CliConfig&)>;
  // Runs right after parsing, needing neither the config file nor a
  // server (berth version); returns the exit code.
  using LocalAction = std::function<int(const Output&)>;
  // Runs after parsing, before the config file is read: kExitOk to go on,
  // else the exit code, the reason already printed (Fail).
  using Check = std::function<int()>;

  struct Command {
    Check check;
    Action action;
    LoginAction login;
    ConfigAction config;
    LocalAction local;
    std::vector<std::string> formats;  // -o values beyond table and json

    bool runnable() const { return action || login || config || local; }
  };

  CommandRegistry(CLI::App& app, const Environment& env, const std::string& output_flag)
      : app_(app), env_(env), output_flag_(output_flag) {}

  CLI::App& app() { return app_; }
  const Environment& env() const { return env_; }
  // The -o flag as given; read it in a Check or Action, after parsing.
  const std::string& output_flag() const { return output_flag_; }

  // A T (a group's flag variables) that lives as long as the registry.
  template <class T>
  T& Keep() {
    auto held = std::make_shared<T>();
    T& ref = *held;
    kept_.push_back(std::move(held));
    return ref;
  }

  void OnRun(const CLI::App* cmd, Action action) { commands_[cmd].action = std::move(action); }
  void OnLogin(const CLI::App* cmd, LoginAction action) {
    commands_[cmd].login = std::move(action);
  }
  void OnConfig(const CLI::App* cmd, ConfigAction action) {
    commands_[cmd].config = std::move(action);
  }
  void OnLocal(const CLI::App* cmd, LocalAction action) {
    commands_[cmd].local = std::move(action);
  }
  void OnCheck(const CLI::App* cmd, Check check) { commands_[cmd].check = std::move(check); }
  // `-o format` (csv, markdown, html) is allowed for this command.
  void AllowFormat(const CLI::App* cmd, std::string format) {
    commands_[cmd].formats.push_back(std::move(format));
  }
  // A Check that reads the document at `path` (- for stdin; `what` names it
  // in errors, e.g. "policy") into `text`; exit 1 if it cannot.
  void ReadsDocument(const CLI::App* cmd, const std::string& path, std::string what,
                     std::string& text);

  // Prints "berth: MESSAGE" to stderr and returns `code`.
  int Fail(int code, std::string_view message) const;

  // nullptr for a command nothing registered.
  const Command* Find(const CLI::App* cmd) const;
  // Every command one can run, by full name ("policy show"), and whether
  // something is registered to run it. A group's command needs a
  // subcommand unless it says otherwise (audit runs alone or as audit
  // verify).
  std::map<std::string, bool> Table() const;

 private:
  CLI::App& app_;
  const Environment& env_;
  const std::string& output_flag_;
  std::map<const CLI::App*, Command> commands_;
  std::vector<std::shared_ptr<void>> kept_;
};

// Reads a document (`what`: "job spec", "policy") from a file or, for "-",
// from `in`; an empty one is an error.
Result<std::string> ReadDocument(const std::string& path, std::istream& in, std::string_view what);

// The positional job ID every job command takes.
CLI::Option* AddJobId(CLI::App* cmd, std::uint64_t& id);
// --base N of the versioned documents (policy, price table, alert rules):
// the version the file was written against.
CLI::Option* AddBase(CLI::App* cmd, std::int64_t& base);

// Every group and `berth version` (app.cc).
void RegisterCommands(CommandRegistry& registry);
// Each group, in the order `berth --help` lists them (RegisterCommands
// calls them).
void RegisterJobCommands(CommandRegistry& registry);       // submit jobs job why cancel ...
void RegisterOutputCommands(CommandRegistry& registry);    // outputs cp
void RegisterClusterCommands(CommandRegistry& registry);   // nodes gpus node cordon ...
void RegisterAlertCommands(CommandRegistry& registry);     // alerts alert
void RegisterPolicyCommands(CommandRegistry& registry);    // policy history
void RegisterAuditCommands(CommandRegistry& registry);     // audit
void RegisterIdentityCommands(CommandRegistry& registry);  // login logout whoami identity ...
void RegisterQuotaCommands(CommandRegistry& registry);     // quota
void RegisterUsageCommands(CommandRegistry& registry);     // usage
void RegisterReportCommands(CommandRegistry& registry);    // report
void RegisterBillingCommands(CommandRegistry& registry);
void RegisterServiceCommands(CommandRegistry& registry);  // price budget
void RegisterPocCommands(CommandRegistry& registry);      // poc run|suite|check

}  // namespace berth::cli
