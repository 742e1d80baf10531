#include "api/bootstrap.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace berth::server {
namespace {

Status FileError(const std::filesystem::path& path, std::string_view step, int err) {
  return Fail(Code::kUnavailable,
              fmt::format("cannot write {} ({}): {}", path.string(), step, std::strerror(err)));
}

}  // namespace

Result<std::optional<BootstrapPlan>> PrepareBootstrap(store::IdentityStore& identities, TimeMs now,
                                                      bool reset) {
  auto empty = identities.Empty();
  if (!empty) return std::unexpected(empty.error());
  if (!*empty && !reset) return std::optional<BootstrapPlan>();
  BootstrapPlan plan;
  plan.reset = reset;
  plan.admin.name = std::string(kBootstrapAdmin);
  plan.admin.kind = "user";
  plan.admin.platform_admin = true;
  plan.admin.created_ms = now;
  plan.admin.created_by = "berthd (first start)";
  auto token = store::MintToken(
      kBootstrapAdmin, reset ? "bootstrap (reset by the operator)" : "bootstrap", "berthd", now);
  if (!token) return std::unexpected(token.error());
  plan.token = std::move(*token);
  return std::optional<BootstrapPlan>(std::move(plan));
}

Status WriteTokenFile(const std::filesystem::path& path, std::string_view text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  ::unlink(tmp.c_str());  // a crash's leftover
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return FileError(tmp, "create", errno);
  std::string_view rest = text;
  while (!rest.empty()) {
    ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return FileError(tmp, "write", err);
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return FileError(tmp, "fsync", err);
  }
  if (::close(fd) != 0) return FileError(tmp, "close", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return FileError(path, "rename", errno);
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return FileError(path, "open its directory", errno);
  const int err = ::fsync(dfd) == 0 ? 0 : errno;
  ::close(dfd);
  if (err != 0) return FileError(path, "fsync its directory", err);
  return Ok();
}

Status CommitBootstrap(store::IdentityStore& identities, const BootstrapPlan& plan) {
  return identities.InstallAdminToken(plan.admin, plan.token.record);
}

Result<bool> BootstrapAdmin(store::IdentityStore& identities,
                            const std::filesystem::path& token_file, TimeMs now, bool reset) {
  // A token id already taken (48 random bits) is drawn again.
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto plan = PrepareBootstrap(identities, now, reset);
    if (!plan) return std::unexpected(plan.error());
    if (!*plan) return false;
    BERTH_RETURN_IF_ERROR(WriteTokenFile(token_file, (*plan)->token.token + "\n"));
    auto committed = CommitBootstrap(identities, **plan);
    if (committed) return true;
    if (committed.error().code != Code::kAlreadyExists) return std::unexpected(committed.error());
  }
  return Fail(Code::kInternal, "could not draw an unused token id for the bootstrap admin");
}

}  // namespace berth::server
