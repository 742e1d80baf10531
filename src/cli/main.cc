// The berth CLI executable: everything but the process boundary is in
// berth_cli (see app.h).
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/app.h"
#include "common/clock.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::optional<std::string> server;
  // Read once at startup, before any thread exists.
  const char* value = std::getenv("BERTH_SERVER");  // NOLINT(concurrency-mt-unsafe)
  if (value != nullptr && *value != '\0') server = value;
  auto env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe)
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
  std::optional<std::string> token = env("BERTH_TOKEN");
  std::filesystem::path config_path;
  if (auto p = env("BERTH_CONFIG")) {
    config_path = *p;
  } else if (auto x = env("XDG_CONFIG_HOME")) {
    config_path = std::filesystem::path(*x) / "berth" / "config.json";
  } else if (auto h = env("HOME")) {
    config_path = std::filesystem::path(*h) / ".config" / "berth" / "config.json";
  }
  std::optional<std::string> locale;
  for (const char* name : {"LC_ALL", "LC_MESSAGES", "LANG"}) {
    const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe)
    if (v != nullptr && *v != '\0') {
      locale = v;
      break;
    }
  }
  std::optional<std::string> ca;
  const char* ca_env = std::getenv("BERTH_CA");  // NOLINT(concurrency-mt-unsafe)
  if (ca_env != nullptr && *ca_env != '\0') ca = ca_env;
  berth::SystemClock clock;
  return berth::cli::RunCli(args, {std::cin, std::cout, std::cerr, server, clock, token,
                                   config_path, locale, ca, env("BERTH_JOB_TOKEN"),
                                   env("BERTH_API_URL"), env("BERTH_CA_PEM"), env("BERTH_JOB_ID")});
}
