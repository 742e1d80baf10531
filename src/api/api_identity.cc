// Identities, tenant memberships and API tokens over REST (docs/security.md).
// The guard has already authenticated the caller and checked each route's
// rule; what depends on the target (whose token, which tenants) is asked of
// the Authorizer here.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

#include "api/api.h"
#include "api/api_util.h"
#include "common/units.h"

namespace berth::server {
namespace {

using nlohmann::json;

constexpr TimeMs kDefaultTokenTtlMs = 90LL * 24 * 3'600'000;
constexpr TimeMs kMaxTokenTtlMs = 400LL * 24 * 3'600'000;

json Opt(const std::optional<TimeMs>& v) {
  return v ? json(*v) : json(nullptr);
}

json TenantsJson(const std::map<std::string, store::Role>& tenants) {
  json out = json::object();
  for (const auto& [t, r] : tenants) out[t] = store::RoleName(r);
  return out;
}

json IdentityJson(const store::Identity& id) {
  return json{{"name", id.name},
              {"kind", id.kind},
              {"platform_admin", id.platform_admin},
              {"metrics_reader", id.metrics_reader},
              {"disabled", id.disabled},
              {"created_ms", id.created_ms},
              {"created_by", id.created_by},
              {"tenants", TenantsJson(id.tenants)}};
}

// Never the hash: a token's secret exists only in the creator's hands.
json TokenJson(const store::TokenRecord& t) {
  return json{{"id", t.id},
              {"identity", t.identity},
              {"description", t.description},
              {"created_ms", t.created_ms},
              {"created_by", t.created_by},
              {"expires_ms", Opt(t.expires_ms)},
              {"revoked_ms", Opt(t.revoked_ms)},
              {"revoked_by", t.revoked_by}};
}

// A JSON object body whose keys are all in `allowed`; errors name the field.
Result<json> ObjectBody(const http::Request& req, std::initializer_list<std::string_view> allowed) {
  auto body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return InvalidField("body", "the body must be a JSON object");
  }
  for (const auto& [key, value] : body.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string names;
      for (auto a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
      return InvalidField(key, fmt::format("unknown field '{}'; the fields are {}", key, names));
    }
  }
  return body;
}

Result<std::string> StringField(const json& body, std::string_view key, bool required) {
  auto it = body.find(std::string(key));
  if (it == body.end() || it->is_null()) {
    if (required) return InvalidField(std::string(key), fmt::format("{} is required", key));
    return std::string();
  }
  if (!it->is_string()) {
    return InvalidField(std::string(key), fmt::format("{} must be a string", key));
  }
  return it->get<std::string>();
}

// Whether `caller` may act for `target` (create or revoke its tokens): itself,
// a platform admin, or a tenant-admin of every tenant of a service account
// that is not a platform admin.
bool MayActFor(const Caller& caller, const store::Identity& target) {
  if (caller.platform_admin || caller.name == target.name) return true;
  if (target.kind != "service" || target.platform_admin || target.tenants.empty()) return false;
  for (const auto& [tenant, role] : target.tenants) {
    if (!caller.CanManage(tenant)) return false;
  }
  return true;
}

}  // namespace

void Api::WhoAmI(const http::Request&, http::Response& res) {
  const Caller& c = CurrentCaller();
  auto token = auth_.identities().GetToken(c.token_id);
  if (!token) return ReplyError(res, token.error());
  Reply(res, 200,
        json{{"name", c.name},
             {"kind", c.kind},
             {"platform_admin", c.platform_admin},
             {"tenants", TenantsJson(c.tenants)},
             {"token", *token ? TokenJson(**token) : json(nullptr)}});
}

void Api::Login(const http::Request& req, http::Response& res, AuditNote& note) {
  const Caller& c = CurrentCaller();
  note.object = "identity/" + c.name;
  note.after = json{{"token", c.token_id}};
  WhoAmI(req, res);
}

namespace {

// The console's cookie: HttpOnly (no script reads it), Secure, SameSite=Strict
// (no other site's page sends it), for the whole API's origin.
std::string ConsoleCookie(std::string_view value, TimeMs max_age_ms) {
  return fmt::format("{}={}; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age={}", kConsoleCookie,
                     value, std::max<TimeMs>(0, max_age_ms / 1000));
}

// The caller as the console's session routes answer it: who, and its
// session (null for a bearer caller).
json ConsoleCallerJson(const Caller& c) {
  json session = nullptr;
  if (c.console) {
    session = json{{"csrf", c.console_csrf},
                   {"csrf_header", kConsoleCsrfHeader},
                   {"expires_at_ms", c.console_expires_ms}};
  }
  return json{{"name", c.name},
              {"kind", c.kind},
              {"platform_admin", c.platform_admin},
              {"tenants", TenantsJson(c.tenants)},
              {"console", std::move(session)}};
}

}  // namespace

void Api::StartConsoleSession(const http::Request&, http::Response& res, AuditNote& note) {
  const Caller& c = CurrentCaller();
  note.object = "identity/" + c.name;
  note.after = json{{"token", c.token_id}};
  if (c.console) {
    return ReplyError(res, Error{Code::kFailedPrecondition,
                                 "already signed in to the console; sign out first "
                                 "(DELETE /v1/console/session)",
                                 {}});
  }
  auto issued = auth_.StartConsoleSession(c);
  if (!issued) return ReplyError(res, issued.error());
  note.after["expires_at_ms"] = issued->expires_ms;
  res.set_header("Set-Cookie", ConsoleCookie(issued->secret, issued->expires_ms - clock_.NowMs()));
  res.set_header("Cache-Control", "no-store");
  Caller signed_in = c;
  signed_in.console = true;
  signed_in.console_csrf = issued->csrf;
  signed_in.console_expires_ms = issued->expires_ms;
  Reply(res, 201, ConsoleCallerJson(signed_in));
}

void Api::GetConsoleSession(const http::Request&, http::Response& res) {
  const Caller& c = CurrentCaller();
  res.set_header("Cache-Control", "no-store");
  Reply(res, 200, ConsoleCallerJson(c));
}

void Api::EndConsoleSession(const http::Request&, http::Response& res, AuditNote& note) {
  const Caller& c = CurrentCaller();
  note.object = "identity/" + c.name;
  if (auto st = auth_.EndConsoleSession(c); !st && st.error().code != Code::kNotFound) {
    return ReplyError(res, st.error());
  }
  note.after = json{{"signed_out", c.console}};
  // The browser forgets the cookie either way.
  res.set_header("Set-Cookie", ConsoleCookie("", 0));
  Reply(res, 200, json{{"signed_out", c.console}});
}

void Api::ListIdentities(const http::Request& req, http::Response& res) {
  const Caller& c = CurrentCaller();
  // A tenant-admin sees the members of the tenants it administers, and only
  // their roles there.
  std::vector<std::string> managed;
  for (const auto& [tenant, role] : c.tenants) {
    if (role == store::Role::kTenantAdmin) managed.push_back(tenant);
  }
  if (!c.platform_admin && managed.empty()) {
    return ReplyError(res, Error{Code::kPermissionDenied,
                                 fmt::format("{} administers no tenant; listing identities needs a "
                                             "tenant-admin or platform-admin (berth whoami shows "
                                             "your roles)",
                                             c.name),
                                 {}});
  }
  store::IdentityPage page;
  if (req.has_param("after")) {
    auto after = DecodeCursor(CursorKind::kIdentities, req.get_param_value("after"));
    if (!after) return ReplyError(res, after.error());
    page.after = *after;
  }
  auto limit = PageLimitParam(req);
  if (!limit) return ReplyError(res, limit.error());
  // One row more than the page says whether another page follows.
  page.limit = *limit + 1;
  // Whose identities a page may hold is the caller's, whatever the cursor:
  // the store filters by the tenants it administers before the limit.
  page.tenants = c.platform_admin ? model::TenantScope::All() : model::TenantScope::Of(managed);
  auto all = auth_.identities().ListIdentities(page);
  if (!all) return ReplyError(res, all.error());
  const bool more = all->size() > *limit;
  if (more) all->resize(*limit);
  json list = json::array();
  for (auto id : *all) {
    if (!c.platform_admin) {
      std::erase_if(id.tenants, [&](const auto& kv) { return !c.CanManage(kv.first); });
    }
    list.push_back(IdentityJson(id));
  }
  json body{{"identities", std::move(list)}};
  if (more) body["next"] = EncodeCursor(CursorKind::kIdentities, all->back().name);
  Reply(res, 200, body);
}

void Api::CreateIdentity(const http::Request& req, http::Response& res, AuditNote& note) {
  note.object = "identity";
  const Caller& c = CurrentCaller();
  auto body = ObjectBody(req, {"name", "kind", "platform_admin", "metrics_reader", "tenants"});
  if (!body) return ReplyError(res, body.error());
  store::Identity id;
  auto name = StringField(*body, "name", true);
  if (!name) return ReplyError(res, name.error());
  id.name = *name;
  note.object = "identity/" + id.name;
  auto kind = StringField(*body, "kind", false);
  if (!kind) return ReplyError(res, kind.error());
  if (!kind->empty()) id.kind = *kind;
  if (body->contains("platform_admin")) {
    if (!(*body)["platform_admin"].is_boolean()) {
      return ReplyError(res, Error{Code::kInvalidArgument, "platform_admin must be true or false",
                                   "platform_admin"});
    }
    id.platform_admin = (*body)["platform_admin"].get<bool>();
  }
  if (body->contains("metrics_reader")) {
    if (!(*body)["metrics_reader"].is_boolean()) {
      return ReplyError(res, Error{Code::kInvalidArgument, "metrics_reader must be true or false",
                                   "metrics_reader"});
    }
    id.metrics_reader = (*body)["metrics_reader"].get<bool>();
  }
  auto active = controller_.ActivePolicy();
  if (!active) return ReplyError(res, active.error());
  if (body->contains("tenants")) {
    const json& tenants = (*body)["tenants"];
    if (!tenants.is_object()) {
      return ReplyError(res, Error{Code::kInvalidArgument,
                                   "tenants must map tenant names to roles, e.g. "
                                   "{\"vision\": \"member\"}",
                                   "tenants"});
    }
    for (const auto& [tenant, role] : tenants.items()) {
      const std::string field = "tenants." + tenant;
      auto parsed = role.is_string() ? store::ParseRole(role.get<std::string>()) : std::nullopt;
      if (!parsed) {
        return ReplyError(
            res, Error{Code::kInvalidArgument, "a role is viewer, member or tenant-admin", field});
      }
      bool known = false;
      for (const auto& q : (*active)->policy.queues) known |= q.tenant == tenant;
      if (!known) {
        return ReplyError(res, Error{Code::kInvalidArgument,
                                     fmt::format("the policy has no tenant '{}'; berth policy "
                                                 "lists the tenants",
                                                 tenant),
                                     field});
      }
      if (auto st = Authorizer::CheckNamed(c, tenant, Need::kManage); !st) {
        return ReplyError(res, st.error());
      }
      id.tenants[tenant] = *parsed;
    }
  }
  // What /metrics shows (every node, queue and tenant's usage) is the
  // platform's: only a platform-admin makes a reader of it.
  if (!c.platform_admin && id.metrics_reader) {
    return ReplyError(
        res, Error{Code::kPermissionDenied, "only a platform-admin can make a metrics-reader",
                   "metrics_reader"});
  }
  if (!c.platform_admin && (id.platform_admin || id.tenants.empty())) {
    return ReplyError(
        res, Error{Code::kPermissionDenied,
                   id.platform_admin ? "only a platform-admin can make a platform-admin"
                                     : "a tenant-admin creates identities with a role in a tenant "
                                       "it administers; add tenants: {TENANT: member}",
                   id.platform_admin ? "platform_admin" : "tenants"});
  }
  id.created_ms = clock_.NowMs();
  id.created_by = c.name;
  if (id.tenants.size() == 1) note.tenant = id.tenants.begin()->first;
  auto created = auth_.identities().CreateIdentity(
      id, RecordInChange<store::Identity>(
              note, req, res, clock_.NowMs(),
              [](AuditNote& n, const store::Identity& made) { n.after = IdentityJson(made); }));
  if (!created) return ReplyError(res, created.error());
  Reply(res, 201, IdentityJson(*created));
}

void Api::SetIdentityFlag(const http::Request& req, http::Response& res, AuditNote& note) {
  const std::string name = req.matches[1];
  const std::string action = req.matches[2];
  note.object = "identity/" + name;
  note.action = "identity." + action;
  auto before = auth_.identities().GetIdentity(name);
  if (!before) return ReplyError(res, before.error());
  if (!*before) {
    return ReplyError(res, Error{Code::kNotFound, fmt::format("identity {} not found", name), {}});
  }
  note.before = IdentityJson(**before);
  if ((*before)->metrics_reader && action == "grant-platform-admin") {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 fmt::format("{} is a metrics-reader, which reads /metrics and "
                                             "nothing else; create another identity instead",
                                             name),
                                 "identity"});
  }
  if (name == CurrentCaller().name && (action == "disable" || action == "revoke-platform-admin")) {
    return ReplyError(res, Error{Code::kFailedPrecondition,
                                 "you cannot lock yourself out; ask another platform-admin",
                                 {}});
  }
  auto record = RecordInChange<store::Identity>(
      note, req, res, clock_.NowMs(),
      [](AuditNote& n, const store::Identity& made) { n.after = IdentityJson(made); });
  store::IdentityStore& ids = auth_.identities();
  Status st = action == "disable"                ? ids.SetDisabled(name, true, record)
              : action == "enable"               ? ids.SetDisabled(name, false, record)
              : action == "grant-platform-admin" ? ids.SetPlatformAdmin(name, true, record)
                                                 : ids.SetPlatformAdmin(name, false, record);
  if (!st) return ReplyError(res, st.error());
  auth_.ForgetIdentity(name);
  auto after = ids.GetIdentity(name);
  if (!after || !*after) return ReplyError(res, Error{Code::kInternal, "identity vanished", {}});
  Reply(res, 200, IdentityJson(**after));
}

void Api::ListMembers(const http::Request& req, http::Response& res) {
  const std::string tenant = req.matches[1];
  auto all = auth_.identities().ListIdentities();
  if (!all) return ReplyError(res, all.error());
  json list = json::array();
  for (const auto& id : *all) {
    auto it = id.tenants.find(tenant);
    if (it == id.tenants.end()) continue;
    list.push_back(json{{"identity", id.name},
                        {"kind", id.kind},
                        {"role", store::RoleName(it->second)},
                        {"disabled", id.disabled}});
  }
  Reply(res, 200, json{{"tenant", tenant}, {"members", list}});
}

void Api::SetMember(const http::Request& req, http::Response& res, AuditNote& note) {
  const std::string tenant = req.matches[1];
  note.tenant = tenant;
  note.object = "tenant/" + tenant;
  auto body = ObjectBody(req, {"identity", "role"});
  if (!body) return ReplyError(res, body.error());
  auto name = StringField(*body, "identity", true);
  if (!name) return ReplyError(res, name.error());
  auto role_text = StringField(*body, "role", true);
  if (!role_text) return ReplyError(res, role_text.error());
  auto role = store::ParseRole(*role_text);
  if (!role) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 fmt::format("'{}' is not a role; use viewer, member or "
                                             "tenant-admin",
                                             *role_text),
                                 "role"});
  }
  note.object = fmt::format("tenant/{}/member/{}", tenant, *name);
  auto before = auth_.identities().GetIdentity(*name);
  if (!before) return ReplyError(res, before.error());
  if (!*before) {
    return ReplyError(res, Error{Code::kNotFound, fmt::format("identity {} not found", *name), {}});
  }
  if ((*before)->metrics_reader) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 fmt::format("{} is a metrics-reader, which reads /metrics and "
                                             "nothing else; it takes no role in a tenant",
                                             *name),
                                 "identity"});
  }
  auto old = (*before)->tenants.find(tenant);
  note.before =
      json{{"role",
            old == (*before)->tenants.end() ? json(nullptr) : json(store::RoleName(old->second))}};
  if (auto st = auth_.identities().SetRole(
          *name, tenant, *role,
          RecordInChange<>(note, req, res, clock_.NowMs(),
                           [role = *role](AuditNote& n) {
                             n.after = json{{"role", store::RoleName(role)}};
                           }));
      !st) {
    return ReplyError(res, st.error());
  }
  auth_.ForgetIdentity(*name);
  Reply(res, 200, json{{"tenant", tenant}, {"identity", *name}, {"role", store::RoleName(*role)}});
}

void Api::RemoveMember(const http::Request& req, http::Response& res, AuditNote& note) {
  const std::string tenant = req.matches[1];
  const std::string name = req.matches[2];
  note.tenant = tenant;
  note.object = fmt::format("tenant/{}/member/{}", tenant, name);
  auto before = auth_.identities().GetIdentity(name);
  if (!before) return ReplyError(res, before.error());
  if (!*before || !(*before)->tenants.contains(tenant)) {
    return ReplyError(
        res,
        Error{Code::kNotFound, fmt::format("{} is not a member of tenant {}", name, tenant), {}});
  }
  note.before = json{{"role", store::RoleName((*before)->tenants.at(tenant))}};
  if (auto st = auth_.identities().SetRole(name, tenant, std::nullopt,
                                           RecordInChange<>(note, req, res, clock_.NowMs(),
                                                            [](AuditNote& n) {
                                                              n.after = json{{"role", nullptr}};
                                                            }));
      !st) {
    return ReplyError(res, st.error());
  }
  auth_.ForgetIdentity(name);
  Reply(res, 200, json{{"tenant", tenant}, {"identity", name}, {"removed", true}});
}

void Api::ListTokens(const http::Request& req, http::Response& res) {
  const Caller& c = CurrentCaller();
  std::string identity = req.has_param("identity") ? req.get_param_value("identity") : c.name;
  if (identity != c.name) {
    auto target = auth_.identities().GetIdentity(identity);
    if (!target) return ReplyError(res, target.error());
    if (!*target || !MayActFor(c, **target)) {
      return ReplyError(
          res, Error{Code::kNotFound, fmt::format("identity {} not found", identity), "identity"});
    }
  }
  store::TokenPage page;
  if (req.has_param("after")) {
    // "<created_ms>:<id>" of the page's last token.
    const std::string& cursor = req.get_param_value("after");
    auto key = DecodeCursor(CursorKind::kTokens, cursor);
    if (!key) return ReplyError(res, key.error());
    const auto colon = key->find(':');
    std::int64_t ms = 0;
    const char* end = key->data() + (colon == std::string::npos ? key->size() : colon);
    auto [p, ec] = std::from_chars(key->data(), end, ms);
    if (colon == std::string::npos || ec != std::errc() || p != end || colon + 1 == key->size()) {
      return ReplyError(res, DecodeCursor(CursorKind::kTokens, "").error());
    }
    page.after_created_ms = ms;
    page.after_id = key->substr(colon + 1);
  }
  auto limit = PageLimitParam(req);
  if (!limit) return ReplyError(res, limit.error());
  page.limit = *limit + 1;
  // The identity was checked above; a cursor only moves where the page
  // starts within that identity's tokens.
  auto tokens = auth_.identities().ListTokens(identity, page);
  if (!tokens) return ReplyError(res, tokens.error());
  const bool more = tokens->size() > *limit;
  if (more) tokens->resize(*limit);
  json list = json::array();
  for (const auto& t : *tokens) list.push_back(TokenJson(t));
  json body{{"tokens", std::move(list)}};
  if (more) {
    body["next"] = EncodeCursor(CursorKind::kTokens,
                                fmt::format("{}:{}", tokens->back().created_ms, tokens->back().id));
  }
  Reply(res, 200, body);
}

void Api::CreateToken(const http::Request& req, http::Response& res, AuditNote& note) {
  const Caller& c = CurrentCaller();
  note.object = "token";
  auto body = ObjectBody(req, {"identity", "ttl", "description"});
  if (!body) return ReplyError(res, body.error());
  auto identity = StringField(*body, "identity", false);
  if (!identity) return ReplyError(res, identity.error());
  if (identity->empty()) *identity = c.name;
  auto description = StringField(*body, "description", false);
  if (!description) return ReplyError(res, description.error());
  if (description->size() > 256) {
    return ReplyError(res, Error{Code::kInvalidArgument,
                                 "description is longer than 256 characters", "description"});
  }
  auto ttl_text = StringField(*body, "ttl", false);
  if (!ttl_text) return ReplyError(res, ttl_text.error());
  TimeMs ttl = kDefaultTokenTtlMs;
  if (!ttl_text->empty()) {
    auto parsed = ParseDurationMs(*ttl_text);
    if (!parsed || *parsed <= 0 || *parsed > kMaxTokenTtlMs) {
      return ReplyError(res, Error{Code::kInvalidArgument,
                                   fmt::format("ttl '{}' must be a duration from 1s to 400d, "
                                               "e.g. 30d or 12h",
                                               *ttl_text),
                                   "ttl"});
    }
    ttl = *parsed;
  }
  auto target = auth_.identities().GetIdentity(*identity);
  if (!target) return ReplyError(res, target.error());
  if (!*target || !MayActFor(c, **target)) {
    // Whether an identity exists is not for everyone to learn.
    return ReplyError(
        res, Error{Code::kNotFound, fmt::format("identity {} not found", *identity), "identity"});
  }
  if ((*target)->tenants.size() == 1) note.tenant = (*target)->tenants.begin()->first;
  // The tightest tokens_per_identity of the identity's tenants bounds it
  // (an identity in no tenant, a platform admin's, has none).
  std::optional<model::EffectiveLimit> limit;
  if (!(*target)->tenants.empty()) {
    auto active = controller_.ActivePolicy();
    if (!active) return ReplyError(res, active.error());
    for (const auto& [tenant, role] : (*target)->tenants) {
      auto l = model::LimitOf((*active)->policy, tenant, &model::Limits::tokens_per_identity);
      if (!limit || l.value < limit->value) limit = std::move(l);
    }
  }
  const TimeMs now = clock_.NowMs();
  auto issued = auth_.identities().CreateToken(
      *identity, *description, now + ttl, c.name, now, limit ? &*limit : nullptr,
      RecordInChange<store::TokenRecord>(note, req, res, now,
                                         [](AuditNote& n, const store::TokenRecord& made) {
                                           n.object = "token/" + made.id;
                                           n.after = TokenJson(made);
                                         }));
  if (!issued) return ReplyError(res, issued.error());
  json out = TokenJson(issued->record);
  out["token"] = issued->token;
  out["note"] = "this is the only time the token is shown; store it now (berth login)";
  Reply(res, 201, out);
}

void Api::RevokeToken(const http::Request& req, http::Response& res, AuditNote& note) {
  const Caller& c = CurrentCaller();
  const std::string id = req.matches[1];
  note.object = "token/" + id;
  auto token = auth_.identities().GetToken(id);
  if (!token) return ReplyError(res, token.error());
  std::optional<store::Identity> owner;
  if (*token) {
    auto o = auth_.identities().GetIdentity((*token)->identity);
    if (!o) return ReplyError(res, o.error());
    if (*o) owner = **o;
  }
  if (!*token || !owner || !MayActFor(c, *owner)) {
    return ReplyError(res, Error{Code::kNotFound, fmt::format("token {} not found", id), {}});
  }
  if (owner->tenants.size() == 1) note.tenant = owner->tenants.begin()->first;
  note.before = TokenJson(**token);
  if (auto st = auth_.identities().RevokeToken(
          id, c.name, clock_.NowMs(),
          RecordInChange<store::TokenRecord>(
              note, req, res, clock_.NowMs(),
              [](AuditNote& n, const store::TokenRecord& made) { n.after = TokenJson(made); }));
      !st) {
    return ReplyError(res, st.error());
  }
  auth_.ForgetToken(id);
  auto after = auth_.identities().GetToken(id);
  if (!after || !*after) return ReplyError(res, Error{Code::kInternal, "token vanished", {}});
  Reply(res, 200, TokenJson(**after));
}

}  // namespace berth::server
