// The berth CLI executable: everything but the process boundary is in
// berth_cli (see app.h).
#include <cstdlib>
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
  std::optional<std::string> user;
  const char* login = std::getenv("USER");  // NOLINT(concurrency-mt-unsafe)
  if (login != nullptr && *login != '\0') user = login;
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
  return berth::cli::RunCli(args,
                            {std::cin, std::cout, std::cerr, server, clock, user, locale, ca});
}
