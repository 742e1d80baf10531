// The guard in front of every handler (docs/security.md "The authorization
// layer"): Api::Route authenticates, checks the route's Rule, computes the
// request's tenant scope once (Authorizer::ScopeOf) and runs the handler
// with it; Api::Audited appends a mutating handler's audit record before
// its answer leaves; denials are recorded here too.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/api.h"
#include "api/api_util.h"
#include "api/redact.h"

namespace berth::server {

using nlohmann::json;

Api::ScopedHandler Api::Audited(std::string action, AuditedHandler handler) {
  return AuditedRun(
      std::move(action),
      [this, handler](const http::Request& req, http::Response& res, AuditNote& note,
                      const model::TenantScope&) { (this->*handler)(req, res, note); });
}

Api::ScopedHandler Api::Audited(std::string action, ScopedAuditedHandler handler) {
  return AuditedRun(std::move(action),
                    [this, handler](const http::Request& req, http::Response& res, AuditNote& note,
                                    const model::TenantScope& scope) {
                      (this->*handler)(req, res, note, scope);
                    });
}

Api::ScopedHandler Api::AuditedRun(std::string action, AuditedBody body) {
  return [this, action = std::move(action), body = std::move(body)](
             const http::Request& req, http::Response& res, const model::TenantScope& scope) {
    AuditNote note;
    note.action = action;
    body(req, res, note, scope);
    CountIntervention(action, req, res);
    if (audit_ == nullptr || note.skip) return;
    // Committed with the change: a failure after it (the answer could not
    // be made) still gets its own record below.
    if (note.recorded && res.status < 400) return;
    note.object = RedactSecrets(note.object);
    auto entry = audit_->Append(MakeAuditEntry(note, req, res, clock_.NowMs()));
    // The change itself is already committed; failing the request now would
    // tell the caller it did not happen. The error log is the trace left.
    if (!entry) {
      spdlog::error("audit: could not record {} on {} (request {}): {}", note.action, note.object,
                    res.get_header_value("X-Request-Id"), RedactSecrets(entry.error().message));
    }
  };
}

void Api::Route(http::Server& http, std::string_view method, const std::string& pattern, Rule rule,
                http::Handler handler) {
  Route(http, method, pattern, std::move(rule),
        ScopedHandler(
            [handler = std::move(handler)](const http::Request& req, http::Response& res,
                                           const model::TenantScope&) { handler(req, res); }));
}

void Api::Route(http::Server& http, std::string_view method, const std::string& pattern, Rule rule,
                ScopedHandler handler) {
  routes_.push_back(RouteInfo{std::string(method), pattern, rule.access,
                              static_cast<bool>(rule.tenant_of), rule.need});
  auto guarded = [this, rule = std::move(rule), handler = std::move(handler)](
                     const http::Request& req, http::Response& res) {
    if (rule.access == Access::kPublic) return handler(req, res, model::TenantScope());
    auto caller = auth_.Authenticate(req);
    if (!caller) {
      ReplyError(res, caller.error());
      if (caller.error().code == Code::kUnauthenticated) {
        res.set_header("WWW-Authenticate", R"(Bearer realm="berth")");
      }
      if (caller.error().code == Code::kResourceExhausted) res.set_header("Retry-After", "1");
      return RecordDenial(rule, req, res, "", "");
    }
    if (limiter_ != nullptr && !Admit(*limiter_, "token:" + caller->token_id, res)) return;
    CallerScope in_scope(*caller);
    // Whose rows this request may list: computed here, once, and handed to
    // the handler, which passes it to the store's queries.
    const model::TenantScope tenants = Authorizer::ScopeOf(*caller);
    if (caller->scope != Scope::kFull) {
      // A job token or a metrics-reader: the route must admit it
      // (api_gate.cc), and then its roles (none) are not asked.
      if (AdmitScoped(rule, *caller, req, res)) handler(req, res, tenants);
      return;
    }
    if (rule.access == Access::kPlatformAdmin && !caller->platform_admin) {
      ReplyError(res, Error{Code::kPermissionDenied,
                            fmt::format("{} {} needs a platform-admin; {} is not one", req.method,
                                        req.path, caller->name),
                            {}});
      return RecordDenial(rule, req, res, "", "");
    }
    if (rule.tenant_of) {
      // No such object, or a malformed id: the handler answers as it would
      // for anyone. An object of a tenant the caller cannot see gets the
      // same 404.
      auto owner = rule.tenant_of(req);
      if (!owner && !rule.handler_answers_missing) {
        ReplyError(res, owner.error());
        return RecordDenial(rule, req, res, "", "");
      }
      if (owner) {
        if (auto st = auth_.Check(*caller, owner->tenant, rule.need, owner->object); !st) {
          ReplyError(res, st.error());
          return RecordDenial(rule, req, res, owner->tenant, owner->audit_object);
        }
      }
    }
    handler(req, res, tenants);
  };
  if (method == "GET") {
    http.Get(pattern, std::move(guarded));
  } else if (method == "DELETE") {
    http.Delete(pattern, std::move(guarded));
  } else {
    http.Post(pattern, std::move(guarded));
  }
}

void Api::RecordDenial(const Rule& rule, const http::Request& req, const http::Response& res,
                       std::string tenant, std::string object) {
  if (audit_ == nullptr) return;
  if (res.status == 401 || res.status == 429) {
    // Refused authentications (and verifications over a source's budget):
    // one record per source and minute, and the count of the rest
    // (RefusalCounter).
    auto v = refusals_.Note(req.remote_addr, clock_.NowMs());
    if (v.suppressed > 0) {
      AuditNote summary;
      summary.action = "auth.refused";
      summary.object = "source/" + req.remote_addr;
      summary.after = json{{"refused", v.suppressed}, {"since_ms", v.since_ms}};
      if (auto e = audit_->Append(MakeAuditEntry(summary, req, res, clock_.NowMs())); !e) {
        spdlog::error("audit: could not record refused authentications: {}", e.error().message);
      }
    }
    if (!v.record) return;
  }
  AuditNote note;
  note.action = rule.action.empty() ? fmt::format("{} {}", req.method, req.path) : rule.action;
  note.object = object.empty() ? req.path : std::move(object);
  note.tenant = std::move(tenant);
  auto entry = audit_->Append(MakeAuditEntry(note, req, res, clock_.NowMs()));
  if (!entry) {
    spdlog::error("audit: could not record a denied {} (request {}): {}", note.action,
                  res.get_header_value("X-Request-Id"), entry.error().message);
  }
}

}  // namespace berth::server
