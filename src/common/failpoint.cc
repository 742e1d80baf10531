#include "common/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>

namespace berth {

namespace {

std::set<std::string, std::less<>> Armed() {
  std::set<std::string, std::less<>> out;
  const char* env = std::getenv("BERTH_FAILPOINTS");  // NOLINT(concurrency-mt-unsafe): read once
  if (env == nullptr) return out;
  std::string_view rest(env);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const auto name = rest.substr(0, comma);
    if (!name.empty()) out.emplace(name);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

bool FailpointArmed(std::string_view name) {
  static const std::set<std::string, std::less<>> armed = Armed();
  return !armed.empty() && armed.contains(name);
}

void Failpoint(std::string_view name) {
  if (FailpointArmed(name)) ::kill(::getpid(), SIGKILL);
}

}  // namespace berth
