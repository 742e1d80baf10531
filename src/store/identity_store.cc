#include "store/identity_store.h"

#include <argon2.h>
#include <fmt/format.h>
#include <openssl/rand.h>

#include <array>
#include <cctype>

#include "store/audit_chain.h"
#include "store/sqlite_scope.h"

namespace berth::store {
namespace {

constexpr std::string_view kIdentitySchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS identities(
  name TEXT PRIMARY KEY, kind TEXT NOT NULL, platform_admin INTEGER NOT NULL DEFAULT 0,
  disabled INTEGER NOT NULL DEFAULT 0, created_ms INTEGER NOT NULL, created_by TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memberships(
  identity TEXT NOT NULL REFERENCES identities(name), tenant TEXT NOT NULL, role TEXT NOT NULL,
  PRIMARY KEY(identity, tenant));
CREATE TABLE IF NOT EXISTS tokens(
  id TEXT PRIMARY KEY, identity TEXT NOT NULL REFERENCES identities(name),
  description TEXT NOT NULL, hash TEXT NOT NULL, created_ms INTEGER NOT NULL,
  created_by TEXT NOT NULL, expires_ms INTEGER, revoked_ms INTEGER,
  revoked_by TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS tokens_by_identity ON tokens(identity);
CREATE TABLE IF NOT EXISTS console_sessions(
  id_hash TEXT PRIMARY KEY, token_id TEXT NOT NULL, csrf TEXT NOT NULL,
  created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL, ended_ms INTEGER);
)sql";

// Argon2id cost: OWASP's minimum for Argon2id (19 MiB, 2 passes, 1 lane).
constexpr std::uint32_t kArgonTime = 2;
constexpr std::uint32_t kArgonMemoryKiB = 19 * 1024;
constexpr std::uint32_t kArgonLanes = 1;
constexpr std::size_t kSaltBytes = 16;
constexpr std::size_t kHashBytes = 32;
constexpr std::size_t kTokenIdBytes = 6;       // 12 hex digits
constexpr std::size_t kTokenSecretBytes = 32;  // 64 hex digits
constexpr std::string_view kTokenPrefix = "berth_";

constexpr std::string_view kTokenColumns =
    "id, identity, description, hash, created_ms, created_by, expires_ms, revoked_ms, revoked_by";

TokenRecord ReadToken(const Statement& st) {
  TokenRecord t;
  t.id = st.Text(0);
  t.identity = st.Text(1);
  t.description = st.Text(2);
  t.hash = st.Text(3);
  t.created_ms = st.Int(4);
  t.created_by = st.Text(5);
  t.expires_ms = st.OptInt(6);
  t.revoked_ms = st.OptInt(7);
  t.revoked_by = st.Text(8);
  return t;
}

bool IsHex(std::string_view s) {
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) ||
        std::isupper(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kMember:
      return "member";
    case Role::kTenantAdmin:
      return "tenant-admin";
  }
  return "viewer";
}

std::optional<Role> ParseRole(std::string_view name) {
  for (Role r : {Role::kViewer, Role::kMember, Role::kTenantAdmin}) {
    if (RoleName(r) == name) return r;
  }
  return std::nullopt;
}

std::optional<TokenParts> SplitToken(std::string_view token) {
  constexpr std::size_t kIdLen = kTokenIdBytes * 2;
  constexpr std::size_t kSecretLen = kTokenSecretBytes * 2;
  if (token.size() != kTokenPrefix.size() + kIdLen + 1 + kSecretLen) return std::nullopt;
  if (!token.starts_with(kTokenPrefix)) return std::nullopt;
  token.remove_prefix(kTokenPrefix.size());
  std::string_view id = token.substr(0, kIdLen);
  if (token[kIdLen] != '_') return std::nullopt;
  std::string_view secret = token.substr(kIdLen + 1);
  if (!IsHex(id) || !IsHex(secret)) return std::nullopt;
  return TokenParts{std::string(id), std::string(secret)};
}

Status ValidateIdentityName(std::string_view name, std::string_view field) {
  bool ok = !name.empty() && name.size() <= 64 && std::isalnum(static_cast<unsigned char>(name[0]));
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '@' &&
        c != '-') {
      ok = false;
    }
  }
  if (ok) return {};
  return InvalidField(std::string(field),
                      fmt::format("'{}' is not a valid name: use 1-64 letters, digits and ._@- , "
                                  "starting with a letter or digit",
                                  name));
}

Result<std::string> RandomHex(std::size_t n) {
  std::string bytes(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(n)) != 1) {
    return Fail(Code::kInternal, "the system's random number generator failed");
  }
  static constexpr std::string_view kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

Result<std::string> HashSecret(std::string_view secret) {
  std::array<unsigned char, kSaltBytes> salt{};
  if (RAND_bytes(salt.data(), static_cast<int>(salt.size())) != 1) {
    return Fail(Code::kInternal, "the system's random number generator failed");
  }
  std::string encoded(argon2_encodedlen(kArgonTime, kArgonMemoryKiB, kArgonLanes, kSaltBytes,
                                        kHashBytes, Argon2_id),
                      '\0');
  int rc =
      argon2id_hash_encoded(kArgonTime, kArgonMemoryKiB, kArgonLanes, secret.data(), secret.size(),
                            salt.data(), salt.size(), kHashBytes, encoded.data(), encoded.size());
  if (rc != ARGON2_OK) {
    return Fail(Code::kInternal,
                fmt::format("hashing a token failed: {}", argon2_error_message(rc)));
  }
  encoded.resize(encoded.find('\0') == std::string::npos ? encoded.size() : encoded.find('\0'));
  return encoded;
}

bool VerifySecret(std::string_view encoded_hash, std::string_view secret) {
  std::string h(encoded_hash);
  return argon2id_verify(h.c_str(), secret.data(), secret.size()) == ARGON2_OK;
}

Result<std::unique_ptr<IdentityStore>> IdentityStore::Open(const StoreLocation& where) {
  auto db = OpenStateDatabase(where);
  if (!db) return std::unexpected(db.error());
  BERTH_RETURN_IF_ERROR(db->Exec(SchemaFor(db->dialect(), kIdentitySchema)));
  if (db->dialect() == Dialect::kPostgres) {
    BERTH_RETURN_IF_ERROR(
        db->Exec("ALTER TABLE identities ADD COLUMN IF NOT EXISTS metrics_reader BIGINT NOT NULL "
                 "DEFAULT 0"));
    BERTH_RETURN_IF_ERROR(EnsureAuditSchema(*db));
    return std::unique_ptr<IdentityStore>(new IdentityStore(std::move(*db), where.audit_head()));
  }
  // Before metrics-reader identities existed. The read ends (its statement
  // goes) before the ALTER: a write on a connection whose read is still open
  // fails at once with "database is locked" when another connection (the
  // job store, registering the embedded agent's node) committed meanwhile.
  std::int64_t has_column = 0;
  {
    auto has = db->Prepare(
        "SELECT COUNT(*) FROM pragma_table_info('identities') WHERE name='metrics_reader'");
    if (!has) return std::unexpected(has.error());
    auto row = has->Step();
    if (!row) return std::unexpected(row.error());
    has_column = has->Int(0);
  }
  if (has_column == 0) {
    BERTH_RETURN_IF_ERROR(
        db->Exec("ALTER TABLE identities ADD COLUMN metrics_reader INTEGER NOT NULL DEFAULT 0;"));
  }
  BERTH_RETURN_IF_ERROR(EnsureAuditSchema(*db));
  return std::unique_ptr<IdentityStore>(new IdentityStore(std::move(*db), where.audit_head()));
}

Result<bool> IdentityStore::Empty() {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare("SELECT COUNT(*) FROM identities");
  if (!st) return std::unexpected(st.error());
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  return st->Int(0) == 0;
}

Result<Identity> IdentityStore::CreateIdentity(const Identity& identity,
                                               const AuditOf<Identity>& audit) {
  BERTH_RETURN_IF_ERROR(ValidateIdentityName(identity.name, "name"));
  if (identity.kind != "user" && identity.kind != "service") {
    return InvalidField(
        "kind", fmt::format("'{}' is not a kind of identity; use user or service", identity.kind));
  }
  if (identity.metrics_reader && (identity.platform_admin || !identity.tenants.empty())) {
    return InvalidField("metrics_reader",
                        "a metrics-reader reads /metrics and nothing else: give it no tenants "
                        "and no platform_admin");
  }
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto existing = LoadIdentity(identity.name);
  if (!existing) return std::unexpected(existing.error());
  if (*existing) {
    return Fail(Code::kAlreadyExists,
                fmt::format("identity '{}' already exists; pick another name", identity.name));
  }
  auto st = db_.Prepare(
      "INSERT INTO identities(name, kind, platform_admin, disabled, created_ms, created_by, "
      "metrics_reader) VALUES(?,?,?,0,?,?,?)");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, identity.name)
                            .Bind(2, identity.kind)
                            .Bind(3, std::int64_t{identity.platform_admin ? 1 : 0})
                            .Bind(4, identity.created_ms)
                            .Bind(5, identity.created_by)
                            .Bind(6, std::int64_t{identity.metrics_reader ? 1 : 0})
                            .Run());
  for (const auto& [tenant, role] : identity.tenants) {
    auto m = db_.Prepare("INSERT INTO memberships(identity, tenant, role) VALUES(?,?,?)");
    if (!m) return std::unexpected(m.error());
    BERTH_RETURN_IF_ERROR(m->Bind(1, identity.name).Bind(2, tenant).Bind(3, RoleName(role)).Run());
  }
  Identity out = identity;
  out.disabled = false;
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, out));
  return out;
}

Result<std::optional<Identity>> IdentityStore::LoadIdentity(std::string_view name) {
  auto st = db_.Prepare(
      "SELECT name, kind, platform_admin, disabled, created_ms, created_by, metrics_reader FROM "
      "identities WHERE name=?");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, name);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<Identity>();
  Identity id;
  id.name = st->Text(0);
  id.kind = st->Text(1);
  id.platform_admin = st->Int(2) != 0;
  id.disabled = st->Int(3) != 0;
  id.created_ms = st->Int(4);
  id.created_by = st->Text(5);
  id.metrics_reader = st->Int(6) != 0;
  auto m = db_.Prepare("SELECT tenant, role FROM memberships WHERE identity=? ORDER BY tenant");
  if (!m) return std::unexpected(m.error());
  m->Bind(1, name);
  for (;;) {
    auto r = m->Step();
    if (!r) return std::unexpected(r.error());
    if (!*r) break;
    if (auto role = ParseRole(m->Text(1))) id.tenants[m->Text(0)] = *role;
  }
  return std::optional<Identity>(std::move(id));
}

Result<std::optional<Identity>> IdentityStore::GetIdentity(std::string_view name) {
  std::lock_guard lock(mu_);
  return LoadIdentity(name);
}

Result<std::vector<Identity>> IdentityStore::ListIdentities() {
  IdentityPage all;
  all.tenants = model::TenantScope::All();
  return ListIdentities(all);
}

Result<std::vector<Identity>> IdentityStore::ListIdentities(const IdentityPage& page) {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  {
    // The tenant filter asks the memberships, before the LIMIT.
    std::string where = page.tenants.all() ? std::string()
                                           : fmt::format(
                                                 " AND EXISTS (SELECT 1 FROM memberships m "
                                                 "WHERE m.identity = identities.name{})",
                                                 ScopeSql(page.tenants, "m.tenant", 3));
    auto st = db_.Prepare(
        fmt::format("SELECT name FROM identities WHERE (?1 = '' OR name > ?1){} ORDER BY name{}",
                    where, page.limit > 0 ? " LIMIT ?2" : ""));
    if (!st) return std::unexpected(st.error());
    st->Bind(1, page.after);
    if (page.limit > 0) st->Bind(2, static_cast<std::int64_t>(page.limit));
    BindScope(*st, 3, page.tenants);
    for (;;) {
      auto row = st->Step();
      if (!row) return std::unexpected(row.error());
      if (!*row) break;
      names.push_back(st->Text(0));
    }
  }
  std::vector<Identity> out;
  for (const auto& n : names) {
    auto id = LoadIdentity(n);
    if (!id) return std::unexpected(id.error());
    if (*id) out.push_back(std::move(**id));
  }
  return out;
}

Status IdentityStore::SetFlag(std::string_view column, std::string_view name, bool value,
                              const AuditOf<Identity>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto st = db_.Prepare(fmt::format("UPDATE identities SET {}=? WHERE name=?", column));
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, std::int64_t{value ? 1 : 0}).Bind(2, name).Run());
  if (db_.Changes() == 0) {
    return Fail(Code::kNotFound, fmt::format("no identity named '{}'", name));
  }
  auto after = LoadIdentity(name);
  if (!after) return std::unexpected(after.error());
  if (!*after) return Fail(Code::kNotFound, fmt::format("no identity named '{}'", name));
  return CommitAudited(tx, db_, audit_head_, audit, **after);
}

Status IdentityStore::SetDisabled(std::string_view name, bool disabled,
                                  const AuditOf<Identity>& audit) {
  return SetFlag("disabled", name, disabled, audit);
}

Status IdentityStore::SetPlatformAdmin(std::string_view name, bool admin,
                                       const AuditOf<Identity>& audit) {
  return SetFlag("platform_admin", name, admin, audit);
}

Status IdentityStore::SetRole(std::string_view name, std::string_view tenant,
                              std::optional<Role> role, const AuditOf<>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto existing = LoadIdentity(name);
  if (!existing) return std::unexpected(existing.error());
  if (!*existing) return Fail(Code::kNotFound, fmt::format("no identity named '{}'", name));
  if (!role) {
    auto st = db_.Prepare("DELETE FROM memberships WHERE identity=? AND tenant=?");
    if (!st) return std::unexpected(st.error());
    BERTH_RETURN_IF_ERROR(st->Bind(1, name).Bind(2, tenant).Run());
  } else {
    auto st = db_.Prepare(
        "INSERT INTO memberships(identity, tenant, role) VALUES(?,?,?) "
        "ON CONFLICT(identity, tenant) DO UPDATE SET role = excluded.role");
    if (!st) return std::unexpected(st.error());
    BERTH_RETURN_IF_ERROR(st->Bind(1, name).Bind(2, tenant).Bind(3, RoleName(*role)).Run());
  }
  return CommitAudited(tx, db_, audit_head_, audit);
}

Result<IssuedToken> IdentityStore::CreateToken(std::string_view identity,
                                               std::string_view description,
                                               std::optional<TimeMs> expires_ms,
                                               std::string_view created_by, TimeMs now,
                                               const model::EffectiveLimit* limit,
                                               const AuditOf<TokenRecord>& audit) {
  if (expires_ms && *expires_ms <= now) {
    return InvalidField("ttl", "a token must expire in the future; give a positive ttl");
  }
  auto secret = RandomHex(kTokenSecretBytes);
  if (!secret) return std::unexpected(secret.error());
  // The slow hash happens outside the lock: other requests keep flowing.
  auto hash = HashSecret(*secret);
  if (!hash) return std::unexpected(hash.error());
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto owner = LoadIdentity(identity);
  if (!owner) return std::unexpected(owner.error());
  if (!*owner) return Fail(Code::kNotFound, fmt::format("no identity named '{}'", identity));
  if (limit != nullptr) {
    // Counted under the lock that the insert holds: concurrent creates
    // cannot pass the limit together.
    auto live = db_.Prepare(
        "SELECT COUNT(*) FROM tokens WHERE identity=? AND revoked_ms IS NULL AND "
        "(expires_ms IS NULL OR expires_ms > ?)");
    if (!live) return std::unexpected(live.error());
    live->Bind(1, identity).Bind(2, now);
    auto row = live->Step();
    if (!row) return std::unexpected(row.error());
    const std::int64_t n = live->Int(0);
    if (n >= limit->value) {
      return Fail(Code::kResourceExhausted,
                  fmt::format("{} has {} live tokens and may hold at most {} (limit "
                              "tokens_per_identity of tenant {}, {}); revoke one first "
                              "(berth token revoke ID)",
                              identity, n, limit->value, limit->tenant, limit->Describe()));
    }
  }
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto id = RandomHex(kTokenIdBytes);
    if (!id) return std::unexpected(id.error());
    auto st = db_.Prepare(
        "INSERT INTO tokens(id, identity, description, hash, created_ms, created_by, "
        "expires_ms) VALUES(?,?,?,?,?,?,?) ON CONFLICT DO NOTHING");
    if (!st) return std::unexpected(st.error());
    BERTH_RETURN_IF_ERROR(st->Bind(1, *id)
                              .Bind(2, identity)
                              .Bind(3, description)
                              .Bind(4, *hash)
                              .Bind(5, now)
                              .Bind(6, created_by)
                              .Bind(7, expires_ms)
                              .Run());
    if (db_.Changes() == 0) continue;  // an id collision: draw again
    IssuedToken out;
    out.record.id = *id;
    out.record.identity = std::string(identity);
    out.record.description = std::string(description);
    out.record.created_ms = now;
    out.record.created_by = std::string(created_by);
    out.record.expires_ms = expires_ms;
    out.record.hash = *hash;
    out.token = fmt::format("{}{}_{}", kTokenPrefix, *id, *secret);
    BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, out.record));
    return out;
  }
  return Fail(Code::kInternal, "could not draw an unused token id");
}

Result<IssuedToken> MintToken(std::string_view identity, std::string_view description,
                              std::string_view created_by, TimeMs now) {
  auto id = RandomHex(kTokenIdBytes);
  if (!id) return std::unexpected(id.error());
  auto secret = RandomHex(kTokenSecretBytes);
  if (!secret) return std::unexpected(secret.error());
  auto hash = HashSecret(*secret);
  if (!hash) return std::unexpected(hash.error());
  IssuedToken out;
  out.record.id = *id;
  out.record.identity = std::string(identity);
  out.record.description = std::string(description);
  out.record.created_ms = now;
  out.record.created_by = std::string(created_by);
  out.record.hash = *hash;
  out.token = fmt::format("{}{}_{}", kTokenPrefix, *id, *secret);
  return out;
}

Status IdentityStore::InstallAdminToken(const Identity& admin, const TokenRecord& token) {
  BERTH_RETURN_IF_ERROR(ValidateIdentityName(admin.name, "name"));
  if (token.identity != admin.name) {
    return Fail(Code::kInvalidArgument, fmt::format("token {} is for '{}', not '{}'", token.id,
                                                    token.identity, admin.name));
  }
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto existing = LoadIdentity(admin.name);
  if (!existing) return std::unexpected(existing.error());
  if (!*existing) {
    auto st = db_.Prepare(
        "INSERT INTO identities(name, kind, platform_admin, disabled, created_ms, created_by) "
        "VALUES(?,?,1,0,?,?)");
    if (!st) return std::unexpected(st.error());
    BERTH_RETURN_IF_ERROR(st->Bind(1, admin.name)
                              .Bind(2, admin.kind)
                              .Bind(3, admin.created_ms)
                              .Bind(4, admin.created_by)
                              .Run());
  } else {
    auto st = db_.Prepare("UPDATE identities SET disabled=0, platform_admin=1 WHERE name=?");
    if (!st) return std::unexpected(st.error());
    BERTH_RETURN_IF_ERROR(st->Bind(1, admin.name).Run());
  }
  auto st = db_.Prepare(
      "INSERT INTO tokens(id, identity, description, hash, created_ms, created_by, "
      "expires_ms) VALUES(?,?,?,?,?,?,?) ON CONFLICT DO NOTHING");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, token.id)
                            .Bind(2, token.identity)
                            .Bind(3, token.description)
                            .Bind(4, token.hash)
                            .Bind(5, token.created_ms)
                            .Bind(6, token.created_by)
                            .Bind(7, token.expires_ms)
                            .Run());
  if (db_.Changes() == 0) {
    return Fail(Code::kAlreadyExists, fmt::format("token id {} is taken", token.id));
  }
  return tx.Commit();
}

Result<std::optional<TokenRecord>> IdentityStore::GetToken(std::string_view id) {
  std::lock_guard lock(mu_);
  return LoadToken(id);
}

Result<std::optional<TokenRecord>> IdentityStore::LoadToken(std::string_view id) {
  auto st = db_.Prepare(fmt::format("SELECT {} FROM tokens WHERE id=?", kTokenColumns));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, id);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<TokenRecord>();
  return std::optional<TokenRecord>(ReadToken(*st));
}

Result<std::vector<TokenRecord>> IdentityStore::ListTokens(std::string_view identity) {
  return ListTokens(identity, TokenPage{});
}

Result<std::vector<TokenRecord>> IdentityStore::ListTokens(std::string_view identity,
                                                           const TokenPage& page) {
  std::lock_guard lock(mu_);
  // Newest first, ties by id: the page after a token is the older ones and
  // those of its millisecond with a greater id.
  auto st = db_.Prepare(fmt::format(
      "SELECT {} FROM tokens WHERE (?1='' OR identity=?1) AND (?2 IS NULL OR created_ms < ?2 OR "
      "(created_ms = ?2 AND id > ?3)) ORDER BY created_ms DESC, id{}",
      kTokenColumns, page.limit > 0 ? " LIMIT ?4" : ""));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, identity);
  if (page.after_created_ms) {
    st->Bind(2, *page.after_created_ms);
  } else {
    st->BindNull(2);
  }
  st->Bind(3, page.after_id);
  if (page.limit > 0) st->Bind(4, static_cast<std::int64_t>(page.limit));
  std::vector<TokenRecord> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    out.push_back(ReadToken(*st));
  }
  return out;
}

Status IdentityStore::RevokeToken(std::string_view id, std::string_view by, TimeMs now,
                                  const AuditOf<TokenRecord>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto st =
      db_.Prepare("UPDATE tokens SET revoked_ms=?, revoked_by=? WHERE id=? AND revoked_ms IS NULL");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, now).Bind(2, by).Bind(3, id).Run());
  if (db_.Changes() == 0) {
    auto check = db_.Prepare("SELECT revoked_ms FROM tokens WHERE id=?");
    if (!check) return std::unexpected(check.error());
    check->Bind(1, id);
    auto row = check->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) return Fail(Code::kNotFound, fmt::format("no token with id '{}'", id));
    return Fail(Code::kFailedPrecondition, fmt::format("token {} is already revoked", id));
  }
  auto after = LoadToken(id);
  if (!after) return std::unexpected(after.error());
  if (!*after) return Fail(Code::kNotFound, fmt::format("no token with id '{}'", id));
  return CommitAudited(tx, db_, audit_head_, audit, **after);
}

Status IdentityStore::CreateConsoleSession(const ConsoleSession& session) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  static constexpr TimeMs kKeepEndedMs = 24LL * 3600 * 1000;
  auto prune = db_.Prepare("DELETE FROM console_sessions WHERE expires_ms < ?1 OR ended_ms < ?1");
  if (!prune) return std::unexpected(prune.error());
  BERTH_RETURN_IF_ERROR(prune->Bind(1, session.created_ms - kKeepEndedMs).Run());
  auto st = db_.Prepare(
      "INSERT INTO console_sessions(id_hash, token_id, csrf, created_ms, expires_ms) "
      "VALUES(?, ?, ?, ?, ?)");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, session.id_hash)
                            .Bind(2, session.token_id)
                            .Bind(3, session.csrf)
                            .Bind(4, session.created_ms)
                            .Bind(5, session.expires_ms)
                            .Run());
  return tx.Commit();
}

Result<std::optional<ConsoleSession>> IdentityStore::GetConsoleSession(std::string_view id_hash) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(
      "SELECT id_hash, token_id, csrf, created_ms, expires_ms, ended_ms FROM console_sessions "
      "WHERE id_hash=?");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, id_hash);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<ConsoleSession>();
  ConsoleSession s;
  s.id_hash = st->Text(0);
  s.token_id = st->Text(1);
  s.csrf = st->Text(2);
  s.created_ms = st->Int(3);
  s.expires_ms = st->Int(4);
  s.ended_ms = st->OptInt(5);
  return std::optional<ConsoleSession>(std::move(s));
}

Status IdentityStore::EndConsoleSession(std::string_view id_hash, TimeMs now) {
  std::lock_guard lock(mu_);
  auto st =
      db_.Prepare("UPDATE console_sessions SET ended_ms=? WHERE id_hash=? AND ended_ms IS NULL");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, now).Bind(2, id_hash).Run());
  if (db_.Changes() == 0) return Fail(Code::kNotFound, "no such console session");
  return Ok();
}

}  // namespace berth::store
