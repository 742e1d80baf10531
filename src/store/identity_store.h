// Who may use Berth: identities (people and service accounts), their roles
// in tenants, and their API tokens. Lives in the state database (berth.db) on
// a connection of its own, like the audit log, so the scheduling Store stays
// about scheduling state.
//
// Tokens look like `berth_<id>_<secret>`: the 12-hex-digit id is public (it
// names the token in lists, audit records and rate limits), the 64-hex-digit
// secret is shown once and stored only as an Argon2id hash. Looking a token up
// by its id means one slow hash per check, never a scan.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/policy.h"
#include "model/tenant_scope.h"
#include "store/audit_entry.h"
#include "store/sqlite_db.h"

namespace berth::store {

// A role within one tenant, weakest first. Platform admin is not a tenant
// role: it is a flag on the identity and covers every tenant.
enum class Role { kViewer, kMember, kTenantAdmin };

std::string_view RoleName(Role role);  // "viewer", "member", "tenant-admin"
std::optional<Role> ParseRole(std::string_view name);

struct Identity {
  std::string name;           // "alice", "ci-bot"
  std::string kind = "user";  // "user" or "service"
  bool platform_admin = false;
  bool disabled = false;
  TimeMs created_ms = 0;
  std::string created_by;
  std::map<std::string, Role> tenants;  // tenant -> role
  // May GET /metrics and nothing else (Prometheus): never with tenants or
  // platform_admin. Fixed at creation.
  bool metrics_reader = false;
};

struct TokenRecord {
  std::string id;  // the public part
  std::string identity;
  std::string description;
  TimeMs created_ms = 0;
  std::string created_by;
  std::optional<TimeMs> expires_ms;  // none: until revoked
  std::optional<TimeMs> revoked_ms;
  std::string revoked_by;
  std::string hash;  // Argon2id, encoded; never leaves the store's callers
};

// A token as created: the only moment its secret exists outside the caller.
struct IssuedToken {
  TokenRecord record;
  std::string token;  // berth_<id>_<secret>
};

// The parts of a presented token; nullopt when it does not have the shape.
struct TokenParts {
  std::string id;
  std::string secret;
};
std::optional<TokenParts> SplitToken(std::string_view token);

// Identity names: 1-64 of letters, digits and ._@- , starting with a letter
// or digit. Tenant names follow the policy's rules (checked by the caller).
Status ValidateIdentityName(std::string_view name, std::string_view field);

// One page of the identity list (GET /v1/identities), by name. Keyset
// paging: the names after `after`, so an identity created meanwhile never
// shifts a later page.
struct IdentityPage {
  std::string after;      // "": from the first name
  std::size_t limit = 0;  // rows at most; 0: every row
  // Only identities holding a role in one of these tenants (a
  // tenant-admin's tenants); All() for every identity (a platform admin).
  // Filtered in the query, before the limit, so a page is never short.
  // The default sees nothing, so a scope nobody computed fails closed.
  model::TenantScope tenants;
};

// One page of an identity's tokens (GET /v1/tokens), newest first: the
// tokens after (created_ms, id) in that order.
struct TokenPage {
  std::optional<TimeMs> after_created_ms;  // none: from the newest
  std::string after_id;
  std::size_t limit = 0;  // rows at most; 0: every row
};

// A console sign-in (docs/security.md "Console sessions"): the browser holds
// the session's secret in an HttpOnly cookie; the store keeps only its
// SHA-256, the token it was made from (whose revocation, expiry or
// identity ends it too), the CSRF token the console sends with each change,
// and its bounds.
struct ConsoleSession {
  std::string id_hash;  // SHA-256 hex of the cookie's secret
  std::string token_id;
  std::string csrf;
  TimeMs created_ms = 0;
  TimeMs expires_ms = 0;
  std::optional<TimeMs> ended_ms;  // signed out
};

class IdentityStore {
 public:
  static Result<std::unique_ptr<IdentityStore>> Open(const StoreLocation& where);

  // True until the first identity is created (the bootstrap admin).
  [[nodiscard]] Result<bool> Empty();

  // Each `audit` below, when set, makes the change's audit record from what
  // it made (the identity or token as the change left it), committed with
  // it (store/audit_entry.h).
  [[nodiscard]] Result<Identity> CreateIdentity(const Identity& identity,
                                                const AuditOf<Identity>& audit = {});
  [[nodiscard]] Result<std::optional<Identity>> GetIdentity(std::string_view name);
  [[nodiscard]] Result<std::vector<Identity>> ListIdentities();
  // A page of identities by name (IdentityPage).
  [[nodiscard]] Result<std::vector<Identity>> ListIdentities(const IdentityPage& page);
  [[nodiscard]] Status SetDisabled(std::string_view name, bool disabled,
                                   const AuditOf<Identity>& audit = {});
  [[nodiscard]] Status SetPlatformAdmin(std::string_view name, bool admin,
                                        const AuditOf<Identity>& audit = {});
  // Sets the identity's role in `tenant`, or removes it (nullopt).
  [[nodiscard]] Status SetRole(std::string_view name, std::string_view tenant,
                               std::optional<Role> role, const AuditOf<>& audit = {});

  // A new token for `identity` with a fresh random id and secret. With a
  // `limit`, refused (ResourceExhausted) when the identity already holds
  // that many live tokens (neither revoked nor expired).
  [[nodiscard]] Result<IssuedToken> CreateToken(std::string_view identity,
                                                std::string_view description,
                                                std::optional<TimeMs> expires_ms,
                                                std::string_view created_by, TimeMs now,
                                                const model::EffectiveLimit* limit = nullptr,
                                                const AuditOf<TokenRecord>& audit = {});
  // The bootstrap admin's token (api/bootstrap.h), in one transaction:
  // creates `admin` unless it exists, else enables it and makes it platform
  // admin again, and stores `token` (from MintToken) for it. The caller has
  // put the token somewhere durable first, so no commit ever leaves an
  // identity whose token nobody holds. AlreadyExists when the token's id is
  // taken (mint another).
  [[nodiscard]] Status InstallAdminToken(const Identity& admin, const TokenRecord& token);
  [[nodiscard]] Result<std::optional<TokenRecord>> GetToken(std::string_view id);
  // Every token of `identity` (all tokens when empty), newest first.
  [[nodiscard]] Result<std::vector<TokenRecord>> ListTokens(std::string_view identity);
  // A page of `identity`'s tokens, newest first (TokenPage).
  [[nodiscard]] Result<std::vector<TokenRecord>> ListTokens(std::string_view identity,
                                                            const TokenPage& page);
  [[nodiscard]] Status RevokeToken(std::string_view id, std::string_view by, TimeMs now,
                                   const AuditOf<TokenRecord>& audit = {});

  // Stores a new console session, and drops sessions that ended or expired
  // more than a day before `session.created_ms` (the table stays small).
  [[nodiscard]] Status CreateConsoleSession(const ConsoleSession& session);
  [[nodiscard]] Result<std::optional<ConsoleSession>> GetConsoleSession(std::string_view id_hash);
  // Marks it signed out at `now`; NotFound when there is none.
  [[nodiscard]] Status EndConsoleSession(std::string_view id_hash, TimeMs now);

 private:
  IdentityStore(Database db, std::filesystem::path audit_head)
      : db_(std::move(db)), audit_head_(std::move(audit_head)) {}
  // With mu_ held.
  Result<std::optional<Identity>> LoadIdentity(std::string_view name);
  Result<std::optional<TokenRecord>> LoadToken(std::string_view id);
  // Sets identity `name`'s flag `column` (disabled, platform_admin).
  Status SetFlag(std::string_view column, std::string_view name, bool value,
                 const AuditOf<Identity>& audit);

  std::mutex mu_;
  Database db_;
  std::filesystem::path audit_head_;  // <data_dir>/audit.head
};

// Argon2id over the secret with a random salt; the encoded form carries its
// parameters. Slow on purpose (tens of milliseconds).
Result<std::string> HashSecret(std::string_view secret);
bool VerifySecret(std::string_view encoded_hash, std::string_view secret);

// A new token for `identity` (a fresh random id and secret, its hash)
// that is not stored yet: for a caller that must keep the token durably
// before the store knows it (IdentityStore::InstallAdminToken).
Result<IssuedToken> MintToken(std::string_view identity, std::string_view description,
                              std::string_view created_by, TimeMs now);

// `n` random bytes from the operating system's CSPRNG, as lower-case hex.
Result<std::string> RandomHex(std::size_t n);

}  // namespace berth::store
