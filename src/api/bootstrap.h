// The first start's platform admin and its token file (docs/security.md,
// "The first start"). The token is durable in <data-dir>/bootstrap-token
// before the identity store knows it, so a crash at any instant of the first
// start never leaves an admin whose token nobody has:
//
//   1. PrepareBootstrap   mint a token in memory (nothing written)
//   2. WriteTokenFile     temp file 0600, fsync, rename, fsync of the directory
//   3. CommitBootstrap    the identity and the token's hash, one transaction
//
// Killed before 3, the store holds no identity (or, for a reset, the admin
// as it was) and the file at most a token the store does not know: the next
// start finds the store empty and runs the steps again, replacing the file.
// After 3 the file holds the token. BootstrapAdmin runs all three; the steps
// are public so a test can stop between them and start again.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "store/identity_store.h"

namespace berth::server {

// The identity the first start creates.
inline constexpr std::string_view kBootstrapAdmin = "admin";

// Step 1: nullopt when there is nothing to do (identities exist and no
// `reset`), else the admin to commit and its new token.
struct BootstrapPlan {
  store::Identity admin;
  store::IssuedToken token;
  bool reset = false;
};
[[nodiscard]] Result<std::optional<BootstrapPlan>> PrepareBootstrap(
    store::IdentityStore& identities, TimeMs now, bool reset);

// Step 2: `text` in `path`, readable by its owner only, atomically and
// durably.
[[nodiscard]] Status WriteTokenFile(const std::filesystem::path& path, std::string_view text);

// Step 3.
[[nodiscard]] Status CommitBootstrap(store::IdentityStore& identities, const BootstrapPlan& plan);

// At the first start (no identity yet): creates `admin`, a platform admin,
// and a token for it in `token_file` (mode 0600). Returns whether it did.
// With `reset`, also when identities exist: `admin` is created, re-enabled
// and made platform admin as needed, and gets a new token (recovery for an
// operator who has the data directory).
[[nodiscard]] Result<bool> BootstrapAdmin(store::IdentityStore& identities,
                                          const std::filesystem::path& token_file, TimeMs now,
                                          bool reset);

}  // namespace berth::server
