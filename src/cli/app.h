// The `berth` command line: parses arguments, picks the server, runs one
// command and maps its outcome to an exit code and a one-line error. main()
// only hands over the process's streams and environment, so tests can run
// the whole CLI in-process.
#pragma once

#include <filesystem>
#include <istream>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/clock.h"

namespace berth::cli {

// Exit codes, documented in docs/cli.md.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;        // berthd refused or failed the request
inline constexpr int kExitUsage = 2;        // bad command line
inline constexpr int kExitUnavailable = 3;  // berthd unreachable or answered 503

// berthd serves HTTPS unless started with --plain-http.
inline constexpr const char* kDefaultServer = "https://127.0.0.1:7460";

struct Environment {
  std::istream& in;  // `berth submit -`
  std::ostream& out;
  std::ostream& err;
  std::optional<std::string> server;  // $BERTH_SERVER
  const Clock& clock;
  // $BERTH_TOKEN: the API token, ahead of the config file's.
  std::optional<std::string> token = std::nullopt;
  // $BERTH_CONFIG, else $XDG_CONFIG_HOME/berth/config.json, else
  // $HOME/.config/berth/config.json; empty: none (berth login cannot save).
  std::filesystem::path config_path = {};
  // The user's locale ($LC_ALL, else $LC_MESSAGES, else $LANG): `berth why`
  // speaks Simplified Chinese when it starts with "zh".
  std::optional<std::string> locale = std::nullopt;
  // $BERTH_CA: the CA file to trust for an https server (--ca wins).
  std::optional<std::string> ca = std::nullopt;
  // What berthd gives every run (docs/jobs.md, "Checkpoints"): its job token
  // ($BERTH_JOB_TOKEN), the API's URL ($BERTH_API_URL), the CA to trust
  // ($BERTH_CA_PEM, the certificate itself) and its job's id
  // ($BERTH_JOB_ID). Used when neither $BERTH_TOKEN nor a login is there.
  std::optional<std::string> job_token = std::nullopt;
  std::optional<std::string> api_url = std::nullopt;
  std::optional<std::string> ca_pem = std::nullopt;
  std::optional<std::string> job_id = std::nullopt;
};

// `args` is the full argv, program name first.
int RunCli(const std::vector<std::string>& args, const Environment& env);

// Every command `berth` can run by its full name ("policy show"; "audit"
// and "audit verify"), and whether something is registered to run it:
// false is a command a group added without an action.
std::map<std::string, bool> CommandTable();

}  // namespace berth::cli
