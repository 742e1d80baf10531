// What every request passes before its handler: the caller's rate limit,
// then the route's declared query parameters. Apart from api.cc so limits
// and decoding change without touching the handlers.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "api/api.h"
#include "api/api_util.h"
#include "api/request_decode.h"

namespace berth::server {

bool Api::Admit(RateLimiter& limiter, const std::string& key, http::Response& res) const {
  auto decision = limiter.Admit(key);
  if (decision.allowed) return true;
  const auto& c = limiter.config();
  const std::int64_t retry_s = std::max<std::int64_t>(1, (decision.retry_after_ms + 999) / 1000);
  res.set_header("Retry-After", std::to_string(retry_s));
  const bool source = key.starts_with("addr:");
  ReplyError(
      res,
      Error{Code::kResourceExhausted,
            fmt::format(
                "rate limit exceeded: at most {} requests per second (bursts of {}) "
                "per {}; retry after {} s. Operators set it with berthd "
                "--rate-limit and --rate-burst{}",
                c.per_second, c.burst, source ? "source address" : "token", retry_s,
                source ? fmt::format(" (a source gets {} times a token's)", kSourceFactor) : ""),
            "rate_limit"});
  return false;
}

bool Api::Gate(const http::Request& req, http::Response& res) {
  if (req.path == "/healthz" || req.path == "/readyz") return false;  // probes are never limited
  // Before anything is verified: the source address. A token's own limit
  // applies once it is verified (the guard in Api::Route).
  if (source_limiter_ != nullptr && !Admit(*source_limiter_, SourceKey(req.remote_addr), res)) {
    return true;
  }
  // Nothing that is not text goes further: no handler stores it, no 404
  // echoes it, and no later read of the audit trail trips on it.
  if (auto st = CheckRequestText(req.path, req.params); !st) {
    ReplyError(res, st.error());
    return true;
  }
  // An unknown route is left to the router, which answers 404.
  const RouteRule* route = MatchRoute(req.method, req.path);
  if (route == nullptr) return false;
  if (auto st = CheckQuery(*route, req.params, clock_.NowMs()); !st) {
    ReplyError(res, st.error());
    return true;
  }
  return false;
}

}  // namespace berth::server

namespace berth::server {

bool Api::AdmitScoped(const Rule& rule, const Caller& caller, const http::Request& req,
                      http::Response& res) {
  const bool job = caller.scope == Scope::kJob;
  if (!(job ? rule.own_job : rule.metrics)) {
    // 403 before any object is looked up: the answer is the same whether
    // the object exists or not.
    ReplyError(res, Error{Code::kPermissionDenied,
                          job ? fmt::format("{} {}: a job token may only read its own job (GET "
                                            "/v1/jobs/{}, /why) and report its checkpoint (POST "
                                            "/v1/jobs/{}/checkpoint)",
                                            req.method, req.path, caller.job_id, caller.job_id)
                              : fmt::format("{} {}: {} is a metrics-reader; it may GET /metrics "
                                            "and nothing else",
                                            req.method, req.path, caller.name),
                          {}});
    RecordDenial(rule, req, res, caller.job_tenant, "");
    return false;
  }
  if (!job) return true;
  // Its own job only; any other job answers as another tenant's does.
  auto owner = rule.tenant_of(req);
  if (!owner) {
    ReplyError(res, owner.error());  // a malformed id (400) or no such job (404)
    RecordDenial(rule, req, res, caller.job_tenant, "");
    return false;
  }
  if (owner->job_id != caller.job_id) {
    ReplyError(res, Error{Code::kNotFound, fmt::format("{} not found", owner->object), {}});
    RecordDenial(rule, req, res, caller.job_tenant, owner->audit_object);
    return false;
  }
  return true;
}

}  // namespace berth::server
