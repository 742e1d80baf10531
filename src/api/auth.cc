#include "api/auth.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <unistd.h>

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
  Caller caller;
  caller.name = (*identity)->name;
  caller.kind = (*identity)->kind;
  caller.token_id = t.id;
  caller.platform_admin = (*identity)->platform_admin;
  caller.tenants = (*identity)->tenants;
  if ((*identity)->metrics_reader) {
    // GET /metrics and nothing else, whatever else the identity was given.
    caller.scope = Scope::kMetrics;
    caller.platform_admin = false;
    caller.tenants.clear();
  }
  std::lock_guard lock(mu_);
  cache_[t.id] = Cached{digest, caller, now, t.expires_ms};
  return caller;
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
}

void Authorizer::ForgetIdentity(std::string_view name) {
  std::lock_guard lock(mu_);
  std::erase_if(cache_, [&](const auto& kv) { return kv.second.caller.name == name; });
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
