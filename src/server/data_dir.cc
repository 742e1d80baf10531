#include "server/data_dir.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace berth::server {

namespace fs = std::filesystem;

Status SecureDataDir(const fs::path& dir, bool embedded_agents) {
  ::umask(077);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return Fail(Code::kInternal, fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  auto set = [](const fs::path& p, mode_t mode) -> Status {
    if (::chmod(p.c_str(), mode) != 0) {
      return Fail(Code::kInternal,
                  fmt::format("cannot chmod {:o} {}: {}", mode, p.string(), std::strerror(errno)));
    }
    return Ok();
  };
  BERTH_RETURN_IF_ERROR(set(dir, embedded_agents ? 0711 : 0700));
  const fs::path agents = dir / "agents";
  if (embedded_agents) {
    fs::create_directories(agents, ec);
    BERTH_RETURN_IF_ERROR(set(agents, 0711));
  }
  // What an older berthd left readable is tightened once, at start; the
  // umask keeps it so.
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (embedded_agents && entry.path() == agents) continue;
      BERTH_RETURN_IF_ERROR(set(entry.path(), 0700));
    } else if (S_ISREG(st.st_mode) && (st.st_mode & 077) != 0) {
      BERTH_RETURN_IF_ERROR(set(entry.path(), st.st_mode & 0700));
    }
  }
  if (ec)
    return Fail(Code::kInternal, fmt::format("cannot list {}: {}", dir.string(), ec.message()));
  return Ok();
}

}  // namespace berth::server
