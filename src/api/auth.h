// The one authorization layer of the REST API (docs/security.md). Every route
// is registered with a Rule; the Guard in front of its handler authenticates
// the bearer token, checks the rule, and only then runs the handler with the
// caller in scope. Handlers never compare tenants themselves: for a tenant
// named in a request body they ask Authorizer::CheckNamed; for lists the
// guard computes the request's tenant scope once (Authorizer::ScopeOf) and
// hands it to the handler, which passes it to the store query (or, for
// names inside an object, the renderer).
//
// Other tenants' objects answer 404 ("no job 12"), exactly as if they did not
// exist, so ids and names of other teams' work never leak. A caller who can
// see an object but lacks the role to change it gets 403 naming the role.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "api/rate_limit.h"
#include "common/clock.h"
#include "common/status.h"
#include "http/message.h"
#include "model/tenant_scope.h"
#include "store/identity_store.h"

namespace berth::server {

// What a verified credential may reach at most. An identity's token is
// narrowed by its roles; the two scoped credentials are narrowed first by the
// route table: a Rule says whether it admits them (Rule::own_job,
// Rule::metrics), and every other route answers them 403.
enum class Scope {
  kFull,     // an identity's token: its roles decide
  kJob,      // a job token (job_token.h): its own job's checkpoint and state
  kMetrics,  // a metrics-reader identity's token: GET /metrics
};

struct Caller {
  std::string name;      // the identity; "job/12 run 12.0.1" for a job token; "" when none
  std::string kind;      // "user", "service" or "job"
  std::string token_id;  // the token's public id
  bool platform_admin = false;
  std::map<std::string, store::Role> tenants;  // empty for a job token
  Scope scope = Scope::kFull;
  // For a job token: the one job (and run) it speaks for, and the job's
  // tenant (for audit records).
  std::int64_t job_id = 0;
  std::string run_id;
  std::string job_tenant;

  // Signed in through a console session (an HttpOnly cookie) rather than a
  // bearer token: its CSRF token and end, and the session's id hash.
  bool console = false;
  std::string console_csrf;
  TimeMs console_expires_ms = 0;
  std::string console_id_hash;

  bool authenticated() const { return !name.empty(); }
  std::optional<store::Role> RoleIn(std::string_view tenant) const;
  bool CanRead(std::string_view tenant) const;
  bool CanWrite(std::string_view tenant) const;   // member or tenant-admin
  bool CanManage(std::string_view tenant) const;  // tenant-admin
};

// What a route needs of its caller.
enum class Access {
  kPublic,         // no token: /healthz, /v1/openapi.json
  kAuthenticated,  // any valid token; the handler narrows by its scope or CheckNamed
  kPlatformAdmin,  // the cluster's own state: nodes, policy, prices, identities
};

// For a route about one tenant's object: how much of the tenant it needs.
enum class Need { kRead, kWrite, kManage };

std::string_view AccessName(Access a);  // "public", "authenticated", "platform-admin"
std::string_view NeedName(Need n);      // "read", "write", "manage"

// The object a request names and the tenant that owns it.
struct Owner {
  std::string object;  // "job 12", as a not-found message names it
  std::string tenant;
  std::string audit_object;  // "job/12", as audit records name it
  std::int64_t job_id = 0;   // for a job: its id (a job token's own job or not)
};
// Finds the owner of the object a request names (job 12 -> "vision"). An
// error (no such object, a malformed id) lets the handler answer as it
// would for anyone: the same 404 or 400 every caller gets.
using TenantOf = std::function<Result<Owner>(const http::Request&)>;

struct Rule {
  Access access = Access::kAuthenticated;
  // Set for routes about one object of a tenant; the guard checks `need`.
  TenantOf tenant_of;
  Need need = Need::kRead;
  // The audit action a denial is recorded under ("job.cancel", "job.read").
  std::string action;
  // When tenant_of fails: false answers its error at once (a tenant that is
  // not in the policy); true lets the handler answer (a job id).
  bool handler_answers_missing = true;
  // Whether a job token may call this route for its own job (tenant_of
  // must then name a job): its checkpoint and its state. Any other job
  // answers 404, as another tenant's does.
  bool own_job = false;
  // Whether a metrics-reader's token may call this route (GET /metrics).
  bool metrics = false;
};

// How long a verified token is trusted before its hash is checked again.
// Revocation and role changes clear the cache at once.
inline constexpr TimeMs kTokenCacheMs = 60'000;
// A wrong secret for a real token id is remembered this long, so sending it
// again costs a hash, not another Argon2 verification.
inline constexpr TimeMs kRefusedSecretMs = 10'000;
// Argon2 verifications (a real token id whose secret is not cached) per
// source address: per second, and at once. Over it: 429 until it refills.
// One costs about 40 ms of a core (19 MiB, two passes); a client verifies
// its token once per kTokenCacheMs, so a source needs few.
inline constexpr std::int64_t kVerifyPerSecondPerSource = 5;
inline constexpr std::int64_t kVerifyBurstPerSource = 20;

// Console sessions (docs/security.md "Console sessions"): the cookie that
// carries the session's secret, the header every change from the console
// repeats its CSRF token in, and how long a session lasts at most (never
// past its token's own expiry).
inline constexpr std::string_view kConsoleCookie = "berth_session";
inline constexpr std::string_view kConsoleCsrfHeader = "X-Berth-CSRF";
inline constexpr TimeMs kConsoleSessionMs = 12LL * 3600 * 1000;
// A console session as issued: the only moment its secret exists outside
// the browser's cookie.
struct IssuedConsoleSession {
  std::string secret;
  std::string csrf;
  TimeMs expires_ms = 0;
};

// Whether the run a job token names may still use it: found and not exited,
// with its job's tenant. Set by berthd from the store (the run's record).
struct JobRunState {
  bool active = false;
  std::string tenant;
};
using JobRunLookup = std::function<Result<std::optional<JobRunState>>(const std::string& run_id)>;

class JobTokenKey;

class Authorizer {
 public:
  Authorizer(store::IdentityStore& identities, const Clock& clock)
      : identities_(identities),
        clock_(clock),
        verify_limiter_({kVerifyPerSecondPerSource, kVerifyBurstPerSource, 10000}, clock) {}

  // The caller behind the request's `Authorization: Bearer` token, or
  // Unauthenticated saying what is wrong (none, malformed, unknown, expired,
  // revoked, disabled), or ResourceExhausted when the request's source has
  // used its Argon2 verifications. Never echoes the token's secret.
  Result<Caller> Authenticate(const http::Request& req);
  // Whether `caller` may act on an object of `tenant`: ok, NotFound (a
  // tenant it cannot see; `object` names it as the caller would) or
  // PermissionDenied (it sees the tenant but lacks the role).
  Status Check(const Caller& caller, std::string_view tenant, Need need,
               std::string_view object) const;
  // For a tenant the caller names itself (a submission's spec, a request
  // body): PermissionDenied naming the role it lacks. Tenant names are not
  // secret (the policy lists them), so this is 403, never 404.
  static Status CheckNamed(const Caller& caller, std::string_view tenant, Need need);
  // The tenants whose objects `caller` may list: every tenant for a
  // platform admin, its memberships for anyone else, none for a job token,
  // a metrics-reader or an anonymous caller. The guard computes it once per
  // request (Api::Route) and hands it to the handler.
  static model::TenantScope ScopeOf(const Caller& caller);

  // Job tokens (job_token.h) are verified with `key` and admitted while
  // `lookup` says their run is active. Unset: every job token is refused.
  void set_job_tokens(const JobTokenKey* key, JobRunLookup lookup) {
    job_key_ = key;
    job_runs_ = std::move(lookup);
  }

  // A console session for `caller`, who signed in with its bearer token:
  // the same identity and roles, bound to that token, for at most
  // kConsoleSessionMs.
  Result<IssuedConsoleSession> StartConsoleSession(const Caller& caller);
  // Signs the caller's console session out (nothing for a bearer caller).
  Status EndConsoleSession(const Caller& caller);

  // Forget cached verdicts (after a revocation or a change of role).
  void ForgetToken(std::string_view token_id);
  void ForgetIdentity(std::string_view name);

  store::IdentityStore& identities() { return identities_; }

 private:
  struct Cached {
    std::string secret_digest;  // SHA-256 of the presented secret
    Caller caller;
    TimeMs verified_ms = 0;
    std::optional<TimeMs> expires_ms;
  };

  Result<Caller> AuthenticateJob(std::string_view token);
  Result<Caller> AuthenticateConsole(const http::Request& req, std::string_view secret);
  struct CachedSession {
    Caller caller;
    TimeMs verified_ms = 0;
  };
  // By the SHA-256 of the session's secret; cleared with ForgetToken and
  // ForgetIdentity as cache_ is.
  std::unordered_map<std::string, CachedSession> sessions_;

  store::IdentityStore& identities_;
  const Clock& clock_;
  const JobTokenKey* job_key_ = nullptr;
  JobRunLookup job_runs_;
  std::mutex mu_;
  std::unordered_map<std::string, Cached> cache_;  // by token id
  struct Refused {
    TimeMs at_ms = 0;
    std::string message;
  };
  // "<id>:<sha256 of the secret>" -> when and why it was refused.
  std::unordered_map<std::string, Refused> refused_;
  RateLimiter verify_limiter_;  // by source address
};

// The caller of the request this thread is serving (set by the guard for the
// handler's duration); an unauthenticated Caller outside a guarded handler.
const Caller& CurrentCaller();

class CallerScope {
 public:
  explicit CallerScope(const Caller& caller);
  ~CallerScope();
  CallerScope(const CallerScope&) = delete;
  CallerScope& operator=(const CallerScope&) = delete;

 private:
  const Caller* previous_;
};

// The token id of a request's bearer token, for rate limits and logs
// ("" when there is none).
std::string TokenIdOf(const http::Request& req);

}  // namespace berth::server
