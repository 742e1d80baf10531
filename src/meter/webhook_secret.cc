#include "meter/webhook_secret.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace berth::server {
namespace {

namespace fs = std::filesystem;

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// Whether `inner` is `outer` itself or below it (both canonical).
bool Within(const fs::path& outer, const fs::path& inner) {
  auto rel = inner.lexically_relative(outer);
  return !rel.empty() && *rel.begin() != ".." && rel != ".";
}

}  // namespace

WebhookSecrets::WebhookSecrets(fs::path dir) {
  if (!dir.empty()) dir_ = fs::absolute(dir).lexically_normal();
  // "/a/b/" normalizes to "/a/b/": drop the empty last part.
  if (!dir_.empty() && !dir_.has_filename()) dir_ = dir_.parent_path();
}

Result<std::string> WebhookSecrets::Read(std::string_view secret_file,
                                         const std::string& field) const {
  const std::string put_it =
      dir_.empty() ? std::string()
                   : fmt::format("put the secret in {} (0600) and name it there", dir_.string());
  if (dir_.empty()) {
    return InvalidField(field,
                        "this berthd reads no webhook secrets: start it with "
                        "--webhook-secret-dir DIR, or remove secret_file");
  }
  const fs::path named(secret_file);
  // Refused as written: nothing outside the directory is even looked at.
  for (const auto& part : named.relative_path()) {
    if (part == ".." || part == ".") {
      return InvalidField(field, fmt::format("'{}' has a '{}' in it; name a file in the webhook "
                                             "secret directory {} without . or ..",
                                             secret_file, part.string(), dir_.string()));
    }
  }
  fs::path rel = named;
  if (named.is_absolute()) {
    if (!Within(dir_, named.lexically_normal()) || named.lexically_normal() == dir_) {
      return InvalidField(field, fmt::format("{} is outside the webhook secret directory {}; {}",
                                             secret_file, dir_.string(), put_it));
    }
    rel = named.lexically_normal().lexically_relative(dir_);
  }
  if (rel.empty() || !rel.has_filename()) {
    return InvalidField(field, fmt::format("'{}' names no file; {}", secret_file, put_it));
  }
  std::error_code ec;
  const fs::path root = fs::canonical(dir_, ec);
  if (ec) {
    return InvalidField(field, fmt::format("the webhook secret directory {} cannot be read ({}); "
                                           "create it (0700) and put the secret there",
                                           dir_.string(), ec.message()));
  }
  const fs::path real = fs::canonical(root / rel, ec);
  if (ec) {
    return InvalidField(field, fmt::format("{} cannot be read ({}); {}", (dir_ / rel).string(),
                                           ec.message(), put_it));
  }
  if (!Within(root, real) || real == root) {
    return InvalidField(field,
                        fmt::format("{} leads out of the webhook secret directory {} (to "
                                    "{}) through a symbolic link; {}",
                                    (dir_ / rel).string(), dir_.string(), real.string(), put_it));
  }
  // O_NOFOLLOW: the resolved path must still be the file it was a moment
  // ago, not a link swapped in since; O_NONBLOCK: a fifo cannot hang us.
  int fd = ::open(real.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    return InvalidField(field, fmt::format("{} cannot be read ({}); {}", (dir_ / rel).string(),
                                           std::strerror(errno), put_it));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidField(field,
                        fmt::format("{} is not a regular file; {}", (dir_ / rel).string(), put_it));
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxWebhookSecretBytes) {
    ::close(fd);
    return InvalidField(field,
                        fmt::format("{} holds {} bytes; a secret is a token of at most {} "
                                    "bytes, sent as a header",
                                    (dir_ / rel).string(), st.st_size, kMaxWebhookSecretBytes));
  }
  std::string text(kMaxWebhookSecretBytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(std::min(got, kMaxWebhookSecretBytes));
  std::string secret = Trim(std::move(text));
  if (secret.empty()) {
    return InvalidField(field,
                        fmt::format("{} is empty; write the token into it", (dir_ / rel).string()));
  }
  const bool control = std::any_of(secret.begin(), secret.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t') || u == 0x7f;
  });
  if (control) {
    return InvalidField(field, fmt::format("{} holds a line break or another control character; "
                                           "a secret is one token, sent as a header",
                                           (dir_ / rel).string()));
  }
  return secret;
}

}  // namespace berth::server
