#include "api/request_decode.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <regex>

#include "api/paging.h"
#include "common/units.h"
#include "common/utf8.h"
#include "model/job.h"
#include "model/outputs.h"
#include "model/policy.h"
#include "model/service.h"

namespace berth::server {
namespace {

// berthd's HTTP server refuses a request target longer than this before
// routing (414, http/server.cc); longer paths never reach a handler.
// The cap also keeps libstdc++'s recursive regex matcher off deep stacks.
constexpr std::size_t kMaxPathBytes = 8192;

// The paged lists' most rows per page (paging.h), and a cursor's length.
constexpr std::int64_t kMaxPage = static_cast<std::int64_t>(kMaxPageRows);
constexpr std::size_t kMaxCursor = 256;

ParamRule Text(std::string_view name, std::size_t max_len = 1024) {
  return ParamRule{name, ParamKind::kText, 0, 0, max_len};
}
ParamRule Int(std::string_view name, std::int64_t min, std::int64_t max) {
  return ParamRule{name, ParamKind::kInt, min, max, 0};
}
ParamRule Bool(std::string_view name) {
  return ParamRule{name, ParamKind::kBool, 0, 0, 0};
}
ParamRule Time(std::string_view name) {
  return ParamRule{name, ParamKind::kTime, 0, 0, 0};
}
ParamRule Duration(std::string_view name) {
  return ParamRule{name, ParamKind::kDuration, 0, 0, 0};
}

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();

std::vector<RouteRule> BuildRules() {
  // Keep in step with Api::Register (api.cc); tests/unit/server/
  // request_decode_test.cc checks every registered route has a rule.
  return {
      {"GET", "/healthz", {}, BodyKind::kNone},
      {"GET", "/readyz", {}, BodyKind::kNone},
      {"GET", "/v1/openapi.json", {}, BodyKind::kNone},
      {"POST", "/v1/jobs", {}, BodyKind::kJobSpec},
      {"GET",
       "/v1/jobs",
       {Text("state"), Text("tenant"), Text("queue"), Int("array", 1, kMaxInt),
        Int("limit", 1, kMaxPage), Text("after", kMaxCursor), Bool("full")},
       BodyKind::kNone},
      {"GET", "/v1/events", {Text("topics", 64), Text("after", 64)}, BodyKind::kNone},
      {"GET", R"(/v1/jobs/([^/]+))", {}, BodyKind::kNone},
      {"POST", R"(/v1/jobs/([^/]+)/cancel)", {}, BodyKind::kNone},
      {"POST", R"(/v1/arrays/([^/]+)/cancel)", {}, BodyKind::kNone},
      {"POST", R"(/v1/jobs/([^/]+)/checkpoint)", {Int("at_ms", 1, kMaxInt)}, BodyKind::kNone},
      {"GET",
       R"(/v1/jobs/([^/]+)/logs)",
       {Int("replica", 0, model::kMaxReplicas - 1), Bool("follow")},
       BodyKind::kNone},
      {"GET", R"(/v1/jobs/([^/]+)/why)", {Text("lang", 16)}, BodyKind::kNone},
      {"GET",
       R"(/v1/jobs/([^/]+)/outputs)",
       {Int("replica", 0, model::kMaxReplicas - 1),
        Int("attempt", 0, std::numeric_limits<std::uint32_t>::max()),
        Text("path", model::kMaxOutputPath)},
       BodyKind::kNone},
      {"GET",
       R"(/v1/jobs/([^/]+)/outputs/content)",
       {Int("replica", 0, model::kMaxReplicas - 1),
        Int("attempt", 0, std::numeric_limits<std::uint32_t>::max()),
        Text("path", model::kMaxOutputPath)},
       BodyKind::kNone},
      {"GET",
       R"(/v1/jobs/([^/]+)/telemetry)",
       {Time("from"), Time("to"), Text("step", 32)},
       BodyKind::kNone},
      {"GET",
       R"(/v1/gpus/([^/]+)/telemetry)",
       {Time("from"), Time("to"), Text("step", 32)},
       BodyKind::kNone},
      {"GET", "/v1/nodes", {}, BodyKind::kNone},
      {"GET", "/v1/gpus", {}, BodyKind::kNone},
      {"GET", R"(/v1/nodes/([^/]+))", {}, BodyKind::kNone},
      {"DELETE", R"(/v1/nodes/([^/]+))", {}, BodyKind::kNone},
      {"POST", R"(/v1/nodes/([^/]+)/(cordon|drain|uncordon))", {Text("reason")}, BodyKind::kNone},
      {"POST",
       R"(/v1/nodes/([^/]+)/gpus/([^/]+)/(cordon|uncordon))",
       {Text("reason")},
       BodyKind::kNone},
      {"GET",
       "/v1/alerts",
       {Bool("all"), Text("kind", 32), Int("limit", 1, kMaxPage), Text("after", kMaxCursor)},
       BodyKind::kNone},
      {"POST", R"(/v1/alerts/([^/]+)/resolve)", {}, BodyKind::kNone},
      {"GET", "/v1/alert-rules", {}, BodyKind::kNone},
      {"POST",
       "/v1/alert-rules",
       {Text("comment"), Int("base_version", 1, kMaxInt)},
       BodyKind::kNone},
      {"GET",
       "/v1/alert-deliveries",
       {Int("limit", 1, kMaxPage), Text("after", kMaxCursor)},
       BodyKind::kNone},
      {"GET", "/v1/policy", {}, BodyKind::kNone},
      {"POST",
       "/v1/policy",
       {Bool("dry_run"), Text("comment"), Int("base_version", 1, kMaxInt)},
       BodyKind::kPolicy},
      {"GET", "/v1/policy/versions", {}, BodyKind::kNone},
      {"GET", R"(/v1/policy/versions/([^/]+))", {}, BodyKind::kNone},
      {"POST", "/v1/policy/rollback", {Int("to", 1, kMaxInt), Text("comment")}, BodyKind::kNone},
      {"GET", "/v1/policy/diff", {Int("from", 1, kMaxInt), Int("to", 1, kMaxInt)}, BodyKind::kNone},
      {"POST", "/v1/policy/preview", {Duration("window"), Text("prices")}, BodyKind::kPolicy},
      {"GET", "/v1/history", {Time("since"), Time("until")}, BodyKind::kNone},
      {"GET", "/metrics", {}, BodyKind::kNone},
      {"GET",
       "/v1/audit",
       {Time("since"), Time("until"), Text("actor"), Text("tenant"), Text("action"),
        Int("limit", 1, kMaxPage), Text("after", kMaxCursor)},
       BodyKind::kNone},
      {"GET", "/v1/audit/verify", {}, BodyKind::kNone},
      {"POST", "/v1/quota-requests", {}, BodyKind::kNone},
      {"GET",
       "/v1/quota-requests",
       {Text("state", 32), Text("tenant"), Int("limit", 1, kMaxPage), Text("after", kMaxCursor)},
       BodyKind::kNone},
      {"GET", R"(/v1/quota-requests/([^/]+))", {}, BodyKind::kNone},
      {"POST", "/v1/services", {}, BodyKind::kServiceSpec},
      {"GET",
       "/v1/services",
       {Text("tenant"), Text("kind", 16), Int("limit", 1, kMaxPage), Text("after", kMaxCursor)},
       BodyKind::kNone},
      {"GET", R"(/v1/services/([^/]+)/([^/]+))", {}, BodyKind::kNone},
      {"GET", R"(/v1/services/([^/]+)/([^/]+)/access)", {}, BodyKind::kNone},
      {"DELETE", R"(/v1/services/([^/]+)/([^/]+))", {}, BodyKind::kNone},
      {"POST",
       R"(/v1/services/([^/]+)/([^/]+)/scale)",
       {Int("min", 0, model::kMaxServiceReplicas), Int("max", 1, model::kMaxServiceReplicas)},
       BodyKind::kNone},
      {"POST", R"(/v1/services/([^/]+)/([^/]+)/rollback)", {}, BodyKind::kNone},
      {"POST", R"(/v1/services/([^/]+)/([^/]+)/rollout/resume)", {}, BodyKind::kNone},
      {"POST", R"(/v1/quota-requests/([^/]+)/approve)", {Text("comment")}, BodyKind::kNone},
      {"POST", R"(/v1/quota-requests/([^/]+)/reject)", {Text("comment")}, BodyKind::kNone},
      {"POST", R"(/v1/quota-requests/([^/]+)/withdraw)", {}, BodyKind::kNone},
      {"GET", "/v1/whoami", {}, BodyKind::kNone},
      {"POST", "/v1/login", {}, BodyKind::kNone},
      {"POST", "/v1/console/session", {}, BodyKind::kNone},
      {"GET", "/v1/console/session", {}, BodyKind::kNone},
      {"DELETE", "/v1/console/session", {}, BodyKind::kNone},
      {"GET",
       "/v1/identities",
       {Int("limit", 1, kMaxPage), Text("after", kMaxCursor)},
       BodyKind::kNone},
      {"POST", "/v1/identities", {}, BodyKind::kNone},
      {"POST",
       R"(/v1/identities/([^/]+)/(disable|enable|grant-platform-admin|revoke-platform-admin))",
       {},
       BodyKind::kNone},
      {"GET", R"(/v1/tenants/([^/]+)/members)", {}, BodyKind::kNone},
      {"POST", R"(/v1/tenants/([^/]+)/members)", {}, BodyKind::kNone},
      {"POST", R"(/v1/tenants/([^/]+)/members/([^/]+)/remove)", {}, BodyKind::kNone},
      {"GET",
       "/v1/tokens",
       {Text("identity"), Int("limit", 1, kMaxPage), Text("after", kMaxCursor)},
       BodyKind::kNone},
      {"POST", "/v1/tokens", {}, BodyKind::kNone},
      {"POST", R"(/v1/tokens/([^/]+)/revoke)", {}, BodyKind::kNone},
      {"GET", "/v1/prices", {Int("version", 1, kMaxInt)}, BodyKind::kNone},
      {"POST", "/v1/prices", {Text("comment"), Int("base_version", 1, kMaxInt)}, BodyKind::kNone},
      {"GET",
       "/v1/usage",
       {Text("by", 256), Time("from"), Time("to"), Text("tenant")},
       BodyKind::kNone},
      {"GET",
       "/v1/usage/records",
       {Time("from"), Time("to"), Text("tenant"), Int("offset", 0, kMaxInt),
        Int("limit", 1, kMaxPage), Text("after", kMaxCursor), Int("job", 1, kMaxInt)},
       BodyKind::kNone},
      {"GET", "/v1/budgets", {}, BodyKind::kNone},
      {"GET", "/v1/queues", {Text("tenant")}, BodyKind::kNone},
      {"GET", "/v1/reports/ops", {Time("from"), Time("to")}, BodyKind::kNone},
      {"POST", R"(/v1/budgets/([^/]+))", {}, BodyKind::kNone},
      {"DELETE", R"(/v1/budgets/([^/]+))", {}, BodyKind::kNone},
  };
}

struct CompiledRoute {
  const RouteRule* rule;
  std::regex re;
};

const std::vector<CompiledRoute>& Compiled() {
  static const std::vector<CompiledRoute> compiled = [] {
    std::vector<CompiledRoute> out;
    for (const auto& r : RouteRules()) out.push_back({&r, std::regex(std::string(r.pattern))});
    return out;
  }();
  return compiled;
}

std::string AcceptedNames(const RouteRule& route) {
  if (route.params.empty()) return "it takes no query parameters";
  std::string out = "accepted: ";
  for (std::size_t i = 0; i < route.params.size(); ++i) {
    if (i > 0) out += ", ";
    out += route.params[i].name;
  }
  return out;
}

// The value as it may appear in an error: bounded, so a megabyte of query
// string is not echoed back.
std::string Shown(std::string_view s) {
  constexpr std::size_t kMaxShown = 64;
  if (s.size() <= kMaxShown) return std::string(s);
  return fmt::format("{}... ({} bytes)", s.substr(0, kMaxShown), s.size());
}

Status CheckValue(const ParamRule& rule, std::string_view value, TimeMs now) {
  const std::string field(rule.name);
  switch (rule.kind) {
    case ParamKind::kText:
      if (value.size() > rule.max_len) {
        return InvalidField(field, fmt::format("is {} bytes long; at most {} are allowed",
                                               value.size(), rule.max_len));
      }
      return Ok();
    case ParamKind::kInt: {
      auto v = ParseIntParam(value, field, rule.min, rule.max);
      if (!v) return std::unexpected(v.error());
      return Ok();
    }
    case ParamKind::kBool: {
      auto v = ParseBoolParam(value, field);
      if (!v) return std::unexpected(v.error());
      return Ok();
    }
    case ParamKind::kTime: {
      auto v = ParseTimeParam(value, field, now);
      if (!v) return std::unexpected(v.error());
      return Ok();
    }
    case ParamKind::kDuration: {
      auto d = ParseDurationMs(value);
      if (!d || *d <= 0) {
        return InvalidField(
            field, fmt::format("'{}' is not a positive duration such as 7d or 12h", Shown(value)));
      }
      return Ok();
    }
  }
  return Ok();
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string UrlDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && HexDigit(s[i + 1]) >= 0 &&
               HexDigit(s[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

const std::vector<RouteRule>& RouteRules() {
  static const std::vector<RouteRule> rules = BuildRules();
  return rules;
}

const RouteRule* MatchRoute(std::string_view method, std::string_view path) {
  if (path.size() > kMaxPathBytes) return nullptr;
  const std::string p(path);
  for (const auto& c : Compiled()) {
    if (c.rule->method == method && std::regex_match(p, c.re)) return c.rule;
  }
  return nullptr;
}

Status CheckRequestText(const std::string& path, const QueryParams& params) {
  constexpr std::string_view kFix = "is not valid UTF-8; send UTF-8 text, percent-encoded";
  if (!ValidUtf8(path)) return InvalidField("path", fmt::format("the request path {}", kFix));
  for (const auto& [name, value] : params) {
    if (!ValidUtf8(name)) {
      return InvalidField("query", fmt::format("a query parameter's name {}", kFix));
    }
    if (!ValidUtf8(value)) {
      return InvalidField(name, fmt::format("query parameter '{}' {}", name, kFix));
    }
  }
  return {};
}

Status CheckQuery(const RouteRule& route, const QueryParams& params, TimeMs now) {
  for (auto it = params.begin(); it != params.end(); it = params.upper_bound(it->first)) {
    const std::string& name = it->first;
    auto rule = std::find_if(route.params.begin(), route.params.end(),
                             [&](const ParamRule& r) { return r.name == name; });
    if (name.empty()) {
      // "?=x" or "?a&&=b": no name to report, so the error names the query.
      return InvalidField("query", fmt::format("a query parameter has no name (value '{}'); {}",
                                               Shown(it->second), AcceptedNames(route)));
    }
    if (rule == route.params.end()) {
      return InvalidField(Shown(name),
                          fmt::format("unknown query parameter '{}' for {} {}; {}", Shown(name),
                                      route.method, route.pattern, AcceptedNames(route)));
    }
    if (auto n = params.count(name); n > 1) {
      return InvalidField(
          name, fmt::format("query parameter '{}' is given {} times; give it once", name, n));
    }
    BERTH_RETURN_IF_ERROR(CheckValue(*rule, it->second, now));
  }
  return Ok();
}

Status CheckBody(const RouteRule& route, std::string_view body) {
  switch (route.body) {
    case BodyKind::kNone:
      return Ok();
    case BodyKind::kJobSpec: {
      auto spec = model::ParseJobSpec(body);
      if (!spec) return std::unexpected(spec.error());
      return Ok();
    }
    case BodyKind::kServiceSpec: {
      auto spec = model::ParseServiceSpec(body);
      if (!spec) return std::unexpected(spec.error());
      return Ok();
    }
    case BodyKind::kPolicy: {
      auto policy = model::ParsePolicy(body);
      if (!policy) return std::unexpected(policy.error());
      return Ok();
    }
  }
  return Ok();
}

Result<TimeMs> ParseTimeParam(std::string_view s, std::string_view field, TimeMs now) {
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos) {
    TimeMs v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && p == s.data() + s.size()) return v;
  }
  auto d = ParseDurationMs(s);
  if (!d || *d < 0) {
    return InvalidField(std::string(field),
                        fmt::format("'{}' is neither milliseconds since the epoch nor a "
                                    "duration back from now such as 7d or 12h",
                                    Shown(s)));
  }
  return now - *d;
}

Result<std::int64_t> ParseIntParam(std::string_view s, std::string_view field, std::int64_t min,
                                   std::int64_t max) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v < min || v > max) {
    std::string range = max == kMaxInt ? fmt::format("an integer of at least {}", min)
                                       : fmt::format("an integer from {} to {}", min, max);
    return InvalidField(std::string(field),
                        fmt::format("{} must be {}, not '{}'", field, range, Shown(s)));
  }
  return v;
}

Result<bool> ParseBoolParam(std::string_view s, std::string_view field) {
  if (s == "true" || s == "1") return true;
  if (s == "false" || s == "0") return false;
  return InvalidField(std::string(field),
                      fmt::format("{} must be true or false, not '{}'", field, Shown(s)));
}

QueryParams ParseQueryString(std::string_view query) {
  QueryParams out;
  std::size_t start = 0;
  while (start <= query.size()) {
    auto end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    auto pair = query.substr(start, end - start);
    if (!pair.empty()) {
      auto eq = pair.find('=');
      if (eq == std::string_view::npos) {
        out.emplace(UrlDecode(pair), std::string());
      } else {
        out.emplace(UrlDecode(pair.substr(0, eq)), UrlDecode(pair.substr(eq + 1)));
      }
    }
    start = end + 1;
  }
  return out;
}

}  // namespace berth::server
