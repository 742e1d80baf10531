#include "api/auth.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "control/job_token.h"

namespace berth::server {
namespace {

thread_local const Caller* current_caller = nullptr;

const Caller& Anonymous() {
  static const Caller anonymous;
  return anonymous;
}

std::string Sha256Hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &len, EVP_sha256(), nullptr);
  static constexpr std::string_view kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kDigits[digest[i] >> 4]);
    out.push_back(kDigits[digest[i] & 0xf]);
  }
  return out;
}

std::string_view BearerOf(const http::Request& req) {
  auto it = req.headers.find("Authorization");
  if (it == req.headers.end()) return {};
  std::string_view v = it->second;
  constexpr std::string_view kBearer = "Bearer ";
  if (!v.starts_with(kBearer)) return {};
  v.remove_prefix(kBearer.size());
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  return v;
}

Error Unauthenticated(std::string message) {
  return Error{Code::kUnauthenticated, std::move(message), "Authorization"};
}

// The value of cookie `name` in the request's Cookie header, "" when absent.
std::string_view CookieOf(const http::Request& req, std::string_view name) {
  auto it = req.headers.find("Cookie");
  if (it == req.headers.end()) return {};
  std::string_view rest = it->second;
  while (!rest.empty()) {
    const auto semi = rest.find(';');
    std::string_view pair = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    const auto eq = pair.find('=');
    if (eq != std::string_view::npos && pair.substr(0, eq) == name) return pair.substr(eq + 1);
  }
  return {};
}

// Equal without an early exit: how much of a CSRF token matched does not
// show in the answer's timing.
bool SameSecret(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// The caller a valid token of `identity` speaks for.
Caller CallerOf(const store::Identity& identity, const store::TokenRecord& token) {
  Caller caller;
  caller.name = identity.name;
  caller.kind = identity.kind;
  caller.token_id = token.id;
  caller.platform_admin = identity.platform_admin;
  caller.tenants = identity.tenants;
  if (identity.metrics_reader) {
    // GET /metrics and nothing else, whatever else the identity was given.
    caller.scope = Scope::kMetrics;
    caller.platform_admin = false;
    caller.tenants.clear();
  }
  return caller;
}

}  // namespace

std::optional<store::Role> Caller::RoleIn(std::string_view tenant) const {
  auto it = tenants.find(std::string(tenant));
  if (it == tenants.end()) return std::nullopt;
  return it->second;
}

bool Caller::CanRead(std::string_view tenant) const {
  return platform_admin || RoleIn(tenant).has_value();
}

bool Caller::CanWrite(std::string_view tenant) const {
  if (platform_admin) return true;
  auto role = RoleIn(tenant);
  return role && *role >= store::Role::kMember;
}

bool Caller::CanManage(std::string_view tenant) const {
  if (platform_admin) return true;
  auto role = RoleIn(tenant);
  return role && *role == store::Role::kTenantAdmin;
}

std::string_view AccessName(Access a) {
  switch (a) {
    case Access::kPublic:
      return "public";
    case Access::kAuthenticated:
      return "authenticated";
    case Access::kPlatformAdmin:
      return "platform-admin";
  }
  return "platform-admin";
}

std::string_view NeedName(Need n) {
  switch (n) {
    case Need::kRead:
      return "read";
    case Need::kWrite:
      return "write";
    case Need::kManage:
      return "manage";
  }
  return "manage";
}

std::string TokenIdOf(const http::Request& req) {
  auto parts = store::SplitToken(BearerOf(req));
  return parts ? parts->id : std::string();
}

Result<Caller> Authorizer::AuthenticateJob(std::string_view token) {
  if (job_key_ == nullptr || !job_runs_) {
    return std::unexpected(
        Unauthenticated("this berthd issues no job tokens; use an identity's token"));
  }
  // An HMAC, not Argon2: cheap to check, so no verification budget; the
  // store is asked only about tokens this berthd made.
  auto claim = job_key_->Verify(token);
  if (!claim) return std::unexpected(claim.error());
  auto run = job_runs_(claim->run_id);
  if (!run) return std::unexpected(run.error());
  if (!*run || !(*run)->active) {
    return std::unexpected(Unauthenticated(
        fmt::format("job token {} belonged to run {}, which has ended; a job token works only "
                    "while its run runs",
                    claim->token_id, claim->run_id)));
  }
  Caller caller;
  caller.name = fmt::format("job/{} run {}", claim->job_id, claim->run_id);
  caller.kind = "job";
  caller.token_id = claim->token_id;
  caller.scope = Scope::kJob;
  caller.job_id = claim->job_id;
  caller.run_id = claim->run_id;
  caller.job_tenant = (*run)->tenant;
  return caller;
}

Result<Caller> Authorizer::Authenticate(const http::Request& req) {
  std::string_view token = BearerOf(req);
  if (token.empty()) {
    // The console's cookie, when there is no bearer token (a bearer token
    // wins: the CLI's requests never carry the cookie).
    if (auto secret = CookieOf(req, kConsoleCookie); !secret.empty()) {
      return AuthenticateConsole(req, secret);
    }
    return std::unexpected(
        Unauthenticated("this request needs an API token: send 'Authorization: Bearer <token>' "
                        "(berth login stores one for the CLI)"));
  }
  if (IsJobTokenShaped(token)) return AuthenticateJob(token);
  auto parts = store::SplitToken(token);
  if (!parts) {
    return std::unexpected(Unauthenticated(
        "the bearer token is not a Berth token (berth_<id>_<secret>); check you copied all of it"));
  }
  const TimeMs now = clock_.NowMs();
  const std::string digest = Sha256Hex(parts->secret);
  {
    std::lock_guard lock(mu_);
    auto it = cache_.find(parts->id);
    if (it != cache_.end() && it->second.secret_digest == digest &&
        now - it->second.verified_ms < kTokenCacheMs &&
        (!it->second.expires_ms || now < *it->second.expires_ms)) {
      return it->second.caller;
    }
  }
  // One message for an unknown id and a wrong secret: neither says which.
  const std::string invalid = fmt::format(
      "token {} is not valid; log in again with a current token (berth login)", parts->id);
  // A refusal after Argon2 (a wrong secret, a revoked or expired token, a
  // disabled identity) is remembered briefly per secret, so sending the
  // same token again costs a hash, not another verification.
  const std::string refused_key = std::string(parts->id) + ":" + digest;
  {
    std::lock_guard lock(mu_);
    if (auto it = refused_.find(refused_key);
        it != refused_.end() && now - it->second.at_ms < kRefusedSecretMs) {
      return std::unexpected(Unauthenticated(it->second.message));
    }
  }
  auto refuse = [&](std::string message) {
    std::lock_guard lock(mu_);
    if (refused_.size() >= 10000) {
      std::erase_if(refused_,
                    [&](const auto& kv) { return now - kv.second.at_ms >= kRefusedSecretMs; });
      if (refused_.size() >= 10000) refused_.clear();
    }
    refused_[refused_key] = Refused{now, message};
    return std::unexpected(Unauthenticated(std::move(message)));
  };
  auto record = identities_.GetToken(parts->id);
  if (!record) return std::unexpected(record.error());
  if (!*record) return std::unexpected(Unauthenticated(invalid));
  // A real id with a secret not seen: the Argon2 verification is the
  // server's one expensive step, so each source gets only so many.
  if (auto admitted = verify_limiter_.Admit("addr:" + req.remote_addr); !admitted.allowed) {
    return Fail(Code::kResourceExhausted,
                fmt::format("too many token verifications from {}: at most {} per second "
                            "(bursts of {}) per source address; retry after {} ms",
                            req.remote_addr, kVerifyPerSecondPerSource, kVerifyBurstPerSource,
                            admitted.retry_after_ms),
                "authorization");
  }
  if (!store::VerifySecret((*record)->hash, parts->secret)) return refuse(invalid);
  const auto& t = **record;
  if (t.revoked_ms) {
    return refuse(fmt::format("token {} was revoked by {}; ask for a new one (berth token create)",
                              t.id, t.revoked_by));
  }
  if (t.expires_ms && now >= *t.expires_ms) {
    return refuse(
        fmt::format("token {} expired; create a new one (berth token create --ttl ...)", t.id));
  }
  auto identity = identities_.GetIdentity(t.identity);
  if (!identity) return std::unexpected(identity.error());
  if (!*identity || (*identity)->disabled) {
    return refuse(fmt::format("identity '{}' of token {} is disabled; ask a platform admin",
                              t.identity, t.id));
  }
  Caller caller = CallerOf(**identity, t);
  std::lock_guard lock(mu_);
  cache_[t.id] = Cached{digest, caller, now, t.expires_ms};
  return caller;
}

Result<Caller> Authorizer::AuthenticateConsole(const http::Request& req, std::string_view secret) {
  const TimeMs now = clock_.NowMs();
  const std::string digest = Sha256Hex(secret);
  std::optional<Caller> found;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(digest);
    if (it != sessions_.end() && now - it->second.verified_ms < kTokenCacheMs &&
        now < it->second.caller.console_expires_ms) {
      found = it->second.caller;
    }
  }
  if (!found) {
    auto session = identities_.GetConsoleSession(digest);
    if (!session) return std::unexpected(session.error());
    if (!*session || (*session)->ended_ms || now >= (*session)->expires_ms) {
      return std::unexpected(Unauthenticated(
          !*session              ? "this console session is not known; sign in again"
          : (*session)->ended_ms ? "this console session was signed out; sign in again"
                                 : "this console session expired; sign in again"));
    }
    const auto& s = **session;
    auto record = identities_.GetToken(s.token_id);
    if (!record) return std::unexpected(record.error());
    if (!*record || (*record)->revoked_ms ||
        ((*record)->expires_ms && now >= *(*record)->expires_ms)) {
      return std::unexpected(Unauthenticated(
          fmt::format("token {}, which this console session was signed in with, was revoked or "
                      "expired; sign in again with a current token",
                      s.token_id)));
    }
    auto identity = identities_.GetIdentity((*record)->identity);
    if (!identity) return std::unexpected(identity.error());
    if (!*identity || (*identity)->disabled) {
      return std::unexpected(Unauthenticated(
          fmt::format("identity '{}' is disabled; ask a platform admin", (*record)->identity)));
    }
    Caller caller = CallerOf(**identity, **record);
    caller.console = true;
    caller.console_csrf = s.csrf;
    caller.console_expires_ms = s.expires_ms;
    caller.console_id_hash = digest;
    std::lock_guard lock(mu_);
    if (sessions_.size() >= 10000) sessions_.clear();
    sessions_[digest] = CachedSession{caller, now};
    found = std::move(caller);
  }
  // A change (anything but a read) must repeat the session's CSRF token in a
  // header: a page of another site can make the browser send the cookie, but
  // cannot read the token to send it.
  if (req.method != "GET" && req.method != "HEAD") {
    auto it = req.headers.find(std::string(kConsoleCsrfHeader));
    if (it == req.headers.end() || !SameSecret(it->second, found->console_csrf)) {
      return Fail(Code::kPermissionDenied,
                  fmt::format("{} {} from a console session needs the session's CSRF token in "
                              "the {} header (GET /v1/console/session gives it to the console)",
                              req.method, req.path, kConsoleCsrfHeader),
                  std::string(kConsoleCsrfHeader));
    }
  }
  return *found;
}

Result<IssuedConsoleSession> Authorizer::StartConsoleSession(const Caller& caller) {
  if (caller.scope != Scope::kFull || caller.token_id.empty()) {
    return Fail(Code::kPermissionDenied,
                "a console session is for an identity's token, not a job or metrics token", {});
  }
  auto token = identities_.GetToken(caller.token_id);
  if (!token) return std::unexpected(token.error());
  if (!*token) return std::unexpected(Unauthenticated("the token is not known"));
  auto secret = store::RandomHex(32);
  if (!secret) return std::unexpected(secret.error());
  auto csrf = store::RandomHex(32);
  if (!csrf) return std::unexpected(csrf.error());
  const TimeMs now = clock_.NowMs();
  store::ConsoleSession s;
  s.id_hash = Sha256Hex(*secret);
  s.token_id = caller.token_id;
  s.csrf = *csrf;
  s.created_ms = now;
  s.expires_ms = now + kConsoleSessionMs;
  if ((*token)->expires_ms) s.expires_ms = std::min(s.expires_ms, *(*token)->expires_ms);
  BERTH_RETURN_IF_ERROR(identities_.CreateConsoleSession(s));
  return IssuedConsoleSession{*secret, *csrf, s.expires_ms};
}

Status Authorizer::EndConsoleSession(const Caller& caller) {
  if (!caller.console) return Ok();
  {
    std::lock_guard lock(mu_);
    sessions_.erase(caller.console_id_hash);
  }
  return identities_.EndConsoleSession(caller.console_id_hash, clock_.NowMs());
}

Status Authorizer::Check(const Caller& caller, std::string_view tenant, Need need,
                         std::string_view object) const {
  if (!caller.CanRead(tenant)) {
    // The same answer as for an object that does not exist.
    return Fail(Code::kNotFound, fmt::format("{} not found", object));
  }
  return CheckNamed(caller, tenant, need);
}

Status Authorizer::CheckNamed(const Caller& caller, std::string_view tenant, Need need) {
  bool ok = need == Need::kRead    ? caller.CanRead(tenant)
            : need == Need::kWrite ? caller.CanWrite(tenant)
                                   : caller.CanManage(tenant);
  if (ok) return {};
  auto role = caller.RoleIn(tenant);
  return Fail(
      Code::kPermissionDenied,
      fmt::format("{} is {} of tenant {}; this needs {} (ask a tenant-admin of {} or a "
                  "platform-admin)",
                  caller.name, role ? fmt::format("a {}", store::RoleName(*role)) : "not a member",
                  tenant,
                  need == Need::kRead    ? "membership"
                  : need == Need::kWrite ? "the role member or tenant-admin"
                                         : "the role tenant-admin",
                  tenant),
      "tenant");
}

model::TenantScope Authorizer::ScopeOf(const Caller& caller) {
  if (caller.platform_admin) return model::TenantScope::All();
  std::vector<std::string> tenants;
  for (const auto& [tenant, role] : caller.tenants) tenants.push_back(tenant);
  return model::TenantScope::Of(std::move(tenants));
}

void Authorizer::ForgetToken(std::string_view token_id) {
  std::lock_guard lock(mu_);
  cache_.erase(std::string(token_id));
  std::erase_if(sessions_, [&](const auto& kv) { return kv.second.caller.token_id == token_id; });
}

void Authorizer::ForgetIdentity(std::string_view name) {
  std::lock_guard lock(mu_);
  std::erase_if(cache_, [&](const auto& kv) { return kv.second.caller.name == name; });
  std::erase_if(sessions_, [&](const auto& kv) { return kv.second.caller.name == name; });
  // An identity enabled again is trusted at once, not after a remembered
  // refusal lapses.
  refused_.clear();
}

const Caller& CurrentCaller() {
  return current_caller != nullptr ? *current_caller : Anonymous();
}

CallerScope::CallerScope(const Caller& caller) : previous_(current_caller) {
  current_caller = &caller;
}

CallerScope::~CallerScope() {
  current_caller = previous_;
}

}  // namespace berth::server
