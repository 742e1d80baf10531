#include "common/self_path.h"

#include <system_error>

namespace berth {

std::optional<std::filesystem::path> LinkTargetDir(const std::filesystem::path& link) {
  std::error_code ec;
  std::filesystem::path target = std::filesystem::read_symlink(link, ec);
  if (ec || target.empty()) return std::nullopt;
  // A relative target is relative to the link's own directory.
  if (target.is_relative()) target = link.parent_path() / target;
  return target.parent_path();
}

std::optional<std::filesystem::path> ExecutableDir() {
  return LinkTargetDir("/proc/self/exe");
}

}  // namespace berth
