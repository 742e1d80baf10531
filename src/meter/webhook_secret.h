// Where alert sinks' secrets come from (docs/security.md, "Webhook
// secrets"). A sink's secret_file names a file in one directory the operator
// gives berthd (--webhook-secret-dir, default <data-dir>/secrets): its name
// there (`pager.token`) or its absolute path under it. Nothing else is read,
// so a rules document (a platform admin's, or a stolen admin token's) cannot
// make berthd send another of its files, its TLS key say, to a URL of its
// choosing. A `..` in the name is refused as written; a symbolic link is
// followed only while it stays inside the directory (a mounted secret's
// `..data` links do), checked on the resolved path each time it is read.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/alert_rules.h"

namespace berth::server {

// A secret is a token for a header, not a file: at most this many bytes.
inline constexpr std::size_t kMaxWebhookSecretBytes = 4096;

class WebhookSecrets {
 public:
  // `dir` empty: no directory, and every secret_file is refused.
  explicit WebhookSecrets(std::filesystem::path dir);

  const std::filesystem::path& dir() const { return dir_; }

  // The secret `secret_file` names, whitespace trimmed. Errors name `field`
  // (sinks[0].secret_file) and the directory, and say what to do.
  [[nodiscard]] Result<std::string> Read(std::string_view secret_file,
                                         const std::string& field) const;

 private:
  std::filesystem::path dir_;  // absolute, normal
};

}  // namespace berth::server
