#include "cli/poc_model_server.h"

#include <fmt/format.h>

#include <system_error>

namespace berth::cli::poc {

std::string ModelServerUnreachable(const std::filesystem::path& path) {
  if (!path.is_absolute()) return {};
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::is_regular_file(status)) return {};
  const std::string fix = fmt::format(
      "copy it where every uid may run it (install -m 0755 {} /usr/local/bin/) and pass "
      "--model-server /usr/local/bin/{}",
      path.string(), path.filename().string());
  // Every directory from the root down must let others search it.
  std::filesystem::path dir;
  const std::filesystem::path parent = path.parent_path();
  for (const auto& part : parent) {
    dir /= part;
    const auto perms = std::filesystem::status(dir, ec).permissions();
    if (ec) return {};
    if ((perms & std::filesystem::perms::others_exec) == std::filesystem::perms::none) {
      return fmt::format(
          "the model server {} is inside {}, which other users may not enter (mode {:04o}): a "
          "service replica runs as its tenant's uid and cannot start it; {}",
          path.string(), dir.string(), static_cast<unsigned>(perms) & 07777U, fix);
    }
  }
  const auto perms = status.permissions();
  if ((perms & std::filesystem::perms::others_exec) == std::filesystem::perms::none) {
    return fmt::format(
        "the model server {} may not be executed by other users (mode {:04o}): a service replica "
        "runs as its tenant's uid and cannot start it; {}",
        path.string(), static_cast<unsigned>(perms) & 07777U, fix);
  }
  return {};
}

}  // namespace berth::cli::poc
