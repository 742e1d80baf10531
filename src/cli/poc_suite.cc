#include "cli/poc_suite.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <set>

#include "common/units.h"

namespace berth::cli::poc {
namespace {

// Waits longer than this are a typo, not a plan.
constexpr std::int64_t kPocMaxWaitMs = std::int64_t{3600} * 1000;
constexpr std::int64_t kPocMaxWeight = 100;

std::unexpected<Error> PocBad(const std::string& field, std::string message) {
  return InvalidField(field, std::move(message));
}

std::string PocJoin(const std::vector<std::string_view>& words) {
  std::string out;
  for (auto w : words) {
    if (!out.empty()) out += ", ";
    out += w;
  }
  return out;
}

// Refuses keys other than `allowed` in the mapping at `field`.
Status PocOnlyKeys(const YAML::Node& node, const std::string& field,
                   const std::vector<std::string_view>& allowed) {
  if (!node.IsMap()) {
    return PocBad(field, fmt::format("must be a mapping with {}", PocJoin(allowed)));
  }
  for (const auto& kv : node) {
    const auto key = kv.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return PocBad(field.empty() ? key : field + "." + key,
                    fmt::format("unknown field; use one of {}", PocJoin(allowed)));
    }
  }
  return Ok();
}

std::string PocSub(const std::string& field, std::string_view key) {
  return field.empty() ? std::string(key) : fmt::format("{}.{}", field, key);
}

Result<std::string> PocString(const YAML::Node& parent, const std::string& field,
                              std::string_view key, bool required) {
  const YAML::Node node = parent[std::string(key)];
  if (!node) {
    if (required) return PocBad(PocSub(field, key), "is required");
    return std::string();
  }
  if (!node.IsScalar()) return PocBad(PocSub(field, key), "must be a string");
  return node.as<std::string>();
}

Result<std::int64_t> PocInt(const YAML::Node& node, const std::string& field, std::int64_t lo,
                            std::int64_t hi) {
  std::int64_t value = 0;
  if (!node.IsScalar() || !YAML::convert<std::int64_t>::decode(node, value) || value < lo ||
      value > hi) {
    return PocBad(field, fmt::format("must be a whole number from {} to {}", lo, hi));
  }
  return value;
}

Result<bool> PocBool(const YAML::Node& node, const std::string& field) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
    return PocBad(field, "must be true or false");
  }
  return value;
}

Result<std::vector<std::string>> PocStrings(const YAML::Node& node, const std::string& field) {
  std::vector<std::string> out;
  if (node.IsScalar()) {
    out.push_back(node.as<std::string>());
    return out;
  }
  if (!node.IsSequence()) return PocBad(field, "must be a string or a list of strings");
  for (std::size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar()) return PocBad(fmt::format("{}[{}]", field, i), "must be a string");
    out.push_back(node[i].as<std::string>());
  }
  return out;
}

// A name of lower-case letters, digits and '-': at most 24 for what the
// runner prefixes (tenants, identities, bound jobs), 63 for case and group
// ids.
Status PocShortName(const std::string& name, const std::string& field, std::size_t max = 24) {
  const bool ok =
      !name.empty() && name.size() <= max && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
      });
  if (!ok) return PocBad(field, fmt::format("use 1 to {} of a-z, 0-9 and '-'", max));
  return Ok();
}

std::string PocEmit(const YAML::Node& node) {
  YAML::Emitter out;
  out << node;
  return out.c_str();
}

// Names the state, as berthd spells it.
Status PocState(const std::string& state, const std::string& field) {
  static constexpr std::array<std::string_view, 6> kStates{"Pending",   "Scheduled", "Running",
                                                           "Succeeded", "Failed",    "Cancelled"};
  if (std::find(kStates.begin(), kStates.end(), state) == kStates.end()) {
    return PocBad(field, fmt::format("'{}' is not a job state; use one of Pending, Scheduled, "
                                     "Running, Succeeded, Failed, Cancelled",
                                     state));
  }
  return Ok();
}

// A step's required `states`: job states, each named as berthd spells it.
Result<std::vector<std::string>> PocReadStates(const YAML::Node& n, const std::string& field) {
  if (!n["states"]) return PocBad(PocSub(field, "states"), "is required, e.g. [Succeeded]");
  auto states = PocStrings(n["states"], PocSub(field, "states"));
  if (!states) return std::unexpected(states.error());
  for (std::size_t i = 0; i < states->size(); ++i) {
    BERTH_RETURN_IF_ERROR(PocState((*states)[i], fmt::format("{}.states[{}]", field, i)));
  }
  return states;
}

// What a case's steps may refer to, for the checks that run at parse time.
struct PocScope {
  std::set<std::string> tenants;
  std::set<std::string> identities;
  std::set<std::string> jobs;    // bound by earlier submits of this case
  std::set<std::string> refs;    // bound by earlier requests of this case
  std::set<std::string> waited;  // jobs an earlier wait of this case waits for
  std::set<std::string> bursts;  // bound by earlier bursts of this case
};

// Every ${...} in `text` names something in scope.
Status PocCheckPlaceholders(const std::string& text, const std::string& field,
                            const PocScope& scope) {
  std::size_t at = 0;
  while ((at = text.find("${", at)) != std::string::npos) {
    const auto end = text.find('}', at);
    if (end == std::string::npos) return PocBad(field, "an unclosed '${'; write ${run}");
    const std::string name = text.substr(at + 2, end - at - 2);
    if (name == "run" || name == "gpus" || name == "gateway" || name == "model_server") {
    } else if (name.starts_with("ref.")) {
      if (!scope.refs.contains(name.substr(4))) {
        return PocBad(field, fmt::format("${{{}}} names no answer an earlier request of this case "
                                         "bound (request: {{bind: NAME}})",
                                         name));
      }
    } else if (name.starts_with("tenant.")) {
      if (!scope.tenants.contains(name.substr(7))) {
        return PocBad(field, fmt::format("${{{}}} names no tenant of setup.tenants", name));
      }
    } else if (name.starts_with("job.")) {
      if (!scope.jobs.contains(name.substr(4))) {
        return PocBad(field, fmt::format("${{{}}} names no job an earlier submit of this case "
                                         "bound (submit: {{bind: NAME}})",
                                         name));
      }
    } else {
      return PocBad(field, fmt::format("${{{}}} is not a placeholder; use ${{run}}, ${{gpus}}, "
                                       "${{gateway}}, ${{model_server}}, ${{tenant.NAME}}, "
                                       "${{job.NAME}} or ${{ref.NAME}}",
                                       name));
    }
    at = end + 1;
  }
  return Ok();
}

Result<std::string> PocIdentity(const YAML::Node& n, const std::string& field,
                                const PocScope& scope) {
  auto as = PocString(n, field, "as", false);
  if (!as) return std::unexpected(as.error());
  if (as->empty()) return std::string("admin");
  if (*as != "admin" && !scope.identities.contains(*as)) {
    return PocBad(PocSub(field, "as"),
                  fmt::format("'{}' is no identity of setup.identities (or admin)", *as));
  }
  return *as;
}

Status PocCheckTexts(const Step& step, const std::string& field, const PocScope& scope) {
  for (const auto* list : {&step.contains, &step.not_contains}) {
    for (const auto& text : *list) {
      BERTH_RETURN_IF_ERROR(PocCheckPlaceholders(text, field, scope));
    }
  }
  return Ok();
}

// A request's bind: a name (the answer's `id`), or {name, from, where,
// field}: `field` (default id) of the first item of the answer's list
// `from` whose fields meet `where` (KEY: VALUE equals; KEY: {starts_with:
// TEXT} starts with).
Status PocParseRequestBind(const YAML::Node& n, const std::string& field, const PocScope& scope,
                           Step& step) {
  const YAML::Node b = n["bind"];
  if (!b) return Ok();
  const std::string at = PocSub(field, "bind");
  if (b.IsScalar()) {
    step.bind = b.as<std::string>();
    return Ok();
  }
  if (!b.IsMap()) {
    return PocBad(at,
                  "must be a name (binds the answer's id) or a mapping {name: x, from: LIST, "
                  "where: {FIELD: VALUE}, field: id}");
  }
  BERTH_RETURN_IF_ERROR(PocOnlyKeys(b, at, {"name", "from", "where", "field"}));
  auto name = PocString(b, at, "name", true);
  if (!name) return std::unexpected(name.error());
  step.bind = *name;
  auto from = PocString(b, at, "from", true);
  if (!from) {
    return PocBad(PocSub(at, "from"),
                  "is required: the answer's list to pick from, e.g. from: alerts for "
                  "{\"alerts\": [...]}");
  }
  if (from->empty()) {
    return PocBad(PocSub(at, "from"),
                  "must name the answer's list, e.g. from: alerts; for the answer's own id "
                  "write bind: NAME");
  }
  step.bind_from = *from;
  auto what = PocString(b, at, "field", false);
  if (!what) return std::unexpected(what.error());
  step.bind_field = what->empty() ? "id" : *what;
  const YAML::Node where = b["where"];
  if (!where) return Ok();
  const std::string wat = PocSub(at, "where");
  if (!where.IsMap() || where.size() == 0) {
    return PocBad(wat,
                  "must be a mapping of the item's fields to match, e.g. where: {kind: budget, "
                  "subject: {starts_with: \"${tenant.a}/\"}}; drop where to bind the first item");
  }
  for (const auto& kv : where) {
    const auto key = kv.first.as<std::string>();
    const std::string kat = PocSub(wat, key);
    BindWhere w{key, "", false};
    if (kv.second.IsScalar()) {
      w.value = kv.second.as<std::string>();
    } else if (kv.second.IsMap() && kv.second.size() == 1 && kv.second["starts_with"] &&
               kv.second["starts_with"].IsScalar()) {
      w.value = kv.second["starts_with"].as<std::string>();
      w.prefix = true;
    } else {
      return PocBad(kat,
                    "must be a value the item's field equals, or {starts_with: TEXT}, e.g. "
                    "subject: {starts_with: \"${tenant.a}/\"}");
    }
    BERTH_RETURN_IF_ERROR(PocCheckPlaceholders(w.value, kat, scope));
    step.bind_where.push_back(std::move(w));
  }
  return Ok();
}

Status PocReadExpectations(const YAML::Node& n, const std::string& field, Step& step) {
  if (n["status"]) {
    auto status = PocInt(n["status"], PocSub(field, "status"), 100, 599);
    if (!status) return std::unexpected(status.error());
    step.status = static_cast<int>(*status);
  }
  if (n["contains"]) {
    auto v = PocStrings(n["contains"], PocSub(field, "contains"));
    if (!v) return std::unexpected(v.error());
    step.contains = std::move(*v);
  }
  if (n["not_contains"]) {
    auto v = PocStrings(n["not_contains"], PocSub(field, "not_contains"));
    if (!v) return std::unexpected(v.error());
    step.not_contains = std::move(*v);
  }
  return Ok();
}

Result<std::string> PocBoundJob(const YAML::Node& n, const std::string& field,
                                const PocScope& scope) {
  auto job = PocString(n, field, "job", true);
  if (!job) return job;
  if (!scope.jobs.contains(*job)) {
    return PocBad(PocSub(field, "job"),
                  fmt::format("'{}' is no job an earlier submit of this case bound", *job));
  }
  return job;
}

// A `within` duration from 1ms to 1h.
Result<std::int64_t> PocWithin(const YAML::Node& n, const std::string& field) {
  auto within = PocString(n, field, "within", true);
  if (!within) return std::unexpected(within.error());
  auto ms = ParseDurationMs(*within, kPocMaxWaitMs);
  if (!ms || *ms <= 0) {
    return PocBad(
        PocSub(field, "within"),
        fmt::format("'{}' is not a duration from 1ms to 1h; write e.g. 30s or 2m", *within));
  }
  return *ms;
}

// An `http` step: one request to a service through the gateway, as an
// identity of the setup, whose token it shows as `Authorization: Bearer`.
// Only ${gateway}/...: a suite is data from anyone, and must not make the
// run send its identities' tokens to a host of the suite's choosing. `within` bounds how long the
// one request may take (a request held at zero waits for its replica): 2m by default.
Status PocParseHttpStep(const YAML::Node& n, const std::string& field, const PocScope& scope,
                        Step& step) {
  step.kind = StepKind::kHttp;
  BERTH_RETURN_IF_ERROR(PocOnlyKeys(
      n, field,
      {"as", "get", "post", "body", "status", "contains", "not_contains", "within", "cold_start"}));
  auto as = PocString(n, field, "as", true);
  if (!as) return PocBad(PocSub(field, "as"), "is required: the identity whose token is shown");
  if (!scope.identities.contains(*as)) {
    return PocBad(PocSub(field, "as"),
                  fmt::format("'{}' is no identity of setup.identities (an http step calls as "
                              "one of them, with its token)",
                              *as));
  }
  step.as = *as;
  if (n["get"] && n["post"]) return PocBad(PocSub(field, "post"), "give get or post, not both");
  step.method = n["post"] ? "POST" : "GET";
  const char* key = step.method == "POST" ? "post" : "get";
  auto url = PocString(n, field, key, true);
  if (!url) {
    return PocBad(PocSub(field, "get"),
                  "is required: the URL, e.g. ${gateway}/s/${tenant.a}/NAME/v1/models");
  }
  if (!url->starts_with("${gateway}/")) {
    return PocBad(PocSub(field, key),
                  "must be a URL on the gateway: ${gateway}/s/TENANT/SERVICE/PATH (the run "
                  "shows its identities' tokens to berthd's gateway only)");
  }
  step.path = *url;
  BERTH_RETURN_IF_ERROR(PocCheckPlaceholders(step.path, PocSub(field, key), scope));
  auto body = PocString(n, field, "body", false);
  if (!body) return std::unexpected(body.error());
  step.body = *body;
  BERTH_RETURN_IF_ERROR(PocCheckPlaceholders(step.body, PocSub(field, "body"), scope));
  BERTH_RETURN_IF_ERROR(PocReadExpectations(n, field, step));
  if (!step.status) step.status = 200;
  step.within_ms = 120'000;
  if (n["within"]) {
    auto ms = PocWithin(n, field);
    if (!ms) return std::unexpected(ms.error());
    step.within_ms = *ms;
  }
  if (n["cold_start"]) {
    auto v = PocBool(n["cold_start"], PocSub(field, "cold_start"));
    if (!v) return std::unexpected(v.error());
    if (*v && !n["within"]) {
      return PocBad(PocSub(field, "within"),
                    "is required with cold_start: the cold-start target, e.g. 10s");
    }
    step.cold_start = *v;
  }
  return Ok();
}

// Most calls an http_load keeps in flight, and its longest duration.
constexpr std::int64_t kPocMaxLoadConcurrency = 64;
constexpr std::int64_t kPocMaxLoadMs = std::int64_t{600} * 1000;

// An `http_load` step: the http step's call (the same keys, the same
// ${gateway}-only rule) kept `concurrency` at once in flight for `duration`.
Status PocParseHttpLoadStep(const YAML::Node& n, const std::string& field, const PocScope& scope,
                            Step& step) {
  if (!n.IsMap()) {
    return PocBad(field,
                  "is a mapping: {as, post: ${gateway}/s/TENANT/NAME/PATH, body, concurrency: 4, "
                  "duration: 10s}");
  }
  YAML::Node call(YAML::NodeType::Map);
  for (const auto& kv : n) {
    const auto key = kv.first.as<std::string>();
    if (key == "cold_start") {
      return PocBad(PocSub(field, key),
                    "is for an http step: a load's calls are not one cold start");
    }
    if (key != "concurrency" && key != "duration") call[key] = kv.second;
  }
  BERTH_RETURN_IF_ERROR(PocParseHttpStep(call, field, scope, step));
  step.kind = StepKind::kHttpLoad;
  if (!n["concurrency"]) {
    return PocBad(PocSub(field, "concurrency"),
                  fmt::format("is required: the calls kept in flight at once, 1 to {}",
                              kPocMaxLoadConcurrency));
  }
  auto concurrency =
      PocInt(n["concurrency"], PocSub(field, "concurrency"), 1, kPocMaxLoadConcurrency);
  if (!concurrency) return std::unexpected(concurrency.error());
  step.load_concurrency = *concurrency;
  auto duration = PocString(n, field, "duration", true);
  if (!duration) {
    return PocBad(PocSub(field, "duration"), "is required: how long the load lasts, e.g. 10s");
  }
  auto ms = ParseDurationMs(*duration, kPocMaxLoadMs);
  if (!ms || *ms < 1000) {
    return PocBad(PocSub(field, "duration"),
                  fmt::format("'{}' is not a duration from 1s to 10m; write e.g. 10s", *duration));
  }
  step.load_duration_ms = *ms;
  return Ok();
}

// Most jobs one tenant's part of a burst may ask for at --scale 1.
constexpr std::int64_t kPocMaxBurstCount = 1000;

// burst: {bind, job: TEMPLATE, tenants: [{tenant, as, count, queue, job}]}.
Status PocParseBurst(const YAML::Node& n, const std::string& field, PocScope& scope, Step& step) {
  BERTH_RETURN_IF_ERROR(PocOnlyKeys(n, field, {"bind", "job", "tenants"}));
  auto bind = PocString(n, field, "bind", true);
  if (!bind) return std::unexpected(bind.error());
  BERTH_RETURN_IF_ERROR(PocShortName(*bind, PocSub(field, "bind")));
  if (scope.jobs.contains(*bind) || !scope.bursts.insert(*bind).second) {
    return PocBad(PocSub(field, "bind"),
                  fmt::format("'{}' is bound already in this case; use another name", *bind));
  }
  step.bind = *bind;
  const YAML::Node tmpl = n["job"];
  if (!tmpl || !tmpl.IsMap()) {
    return PocBad(PocSub(field, "job"),
                  "is required: the job template as a mapping (docs/jobs.md), e.g. {command: "
                  "[sleep, \"1\"], resources: {gpus: 1}}");
  }
  for (const char* key : {"tenant", "queue"}) {
    if (tmpl[key]) {
      return PocBad(fmt::format("{}.job.{}", field, key),
                    fmt::format("the burst sets each job's {} from its tenants entry; leave it out "
                                "of the template",
                                key));
    }
  }
  const YAML::Node tenants = n["tenants"];
  if (!tenants || !tenants.IsSequence() || tenants.size() == 0) {
    return PocBad(PocSub(field, "tenants"),
                  "is required: a list of {tenant, as, count, queue}, one per tenant");
  }
  std::set<std::string> seen_tenants;
  std::set<std::string> seen_as;
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    const std::string tf = fmt::format("{}.tenants[{}]", field, i);
    const YAML::Node t = tenants[i];
    BERTH_RETURN_IF_ERROR(PocOnlyKeys(t, tf, {"tenant", "as", "count", "queue", "job"}));
    BurstTenant part;
    auto tenant = PocString(t, tf, "tenant", true);
    if (!tenant) return std::unexpected(tenant.error());
    if (!scope.tenants.contains(*tenant)) {
      return PocBad(PocSub(tf, "tenant"),
                    fmt::format("'{}' is no tenant of setup.tenants", *tenant));
    }
    if (!seen_tenants.insert(*tenant).second) {
      return PocBad(PocSub(tf, "tenant"),
                    fmt::format("'{}' has a part of this burst already; give it one entry with "
                                "the sum of its counts",
                                *tenant));
    }
    part.tenant = *tenant;
    auto as = PocIdentity(t, tf, scope);
    if (!as) return std::unexpected(as.error());
    if (!seen_as.insert(*as).second) {
      return PocBad(PocSub(tf, "as"),
                    fmt::format("'{}' submits for another tenant of this burst already; each "
                                "tenant submits as an identity of its own",
                                *as));
    }
    part.as = *as;
    if (!t["count"]) return PocBad(PocSub(tf, "count"), "is required: how many jobs, e.g. 8");
    auto count = PocInt(t["count"], PocSub(tf, "count"), 1, kPocMaxBurstCount);
    if (!count) return std::unexpected(count.error());
    part.count = *count;
    auto queue = PocString(t, tf, "queue", true);
    if (!queue) return std::unexpected(queue.error());
    YAML::Node spec = YAML::Clone(tmpl);
    if (const YAML::Node shape = t["job"]) {
      if (!shape.IsMap()) {
        return PocBad(PocSub(tf, "job"),
                      "must be a mapping laid over the template, e.g. {resources: {gpus: 2}}");
      }
      for (const auto& kv : shape) {
        const auto key = kv.first.as<std::string>();
        if (key == "tenant" || key == "queue") {
          return PocBad(fmt::format("{}.job.{}", tf, key),
                        fmt::format("give the {} as this entry's own field", key));
        }
        spec[key] = kv.second;
      }
    }
    spec["tenant"] = fmt::format("${{tenant.{}}}", part.tenant);
    spec["queue"] = *queue;
    part.spec = PocEmit(spec);
    // ${burst.index} is the runner's own; the rest must name what is in scope.
    std::string checked = part.spec;
    for (auto at = checked.find("${burst.index}"); at != std::string::npos;
         at = checked.find("${burst.index}")) {
      checked.replace(at, std::string_view("${burst.index}").size(), "1");
    }
    BERTH_RETURN_IF_ERROR(PocCheckPlaceholders(checked, PocSub(tf, "job"), scope));
    step.burst.push_back(std::move(part));
  }
  return Ok();
}

// "25%", "12.5%" or 25: parts per million of a whole.
Result<std::int64_t> PocShare(const YAML::Node& node, const std::string& field) {
  std::string text = node.IsScalar() ? node.as<std::string>() : "";
  if (text.ends_with('%')) text.pop_back();
  double pct = -1;
  try {
    std::size_t used = 0;
    pct = std::stod(text, &used);
    if (used != text.size()) pct = -1;
  } catch (const std::exception&) {
    pct = -1;
  }
  if (!(pct >= 0 && pct <= 100)) {
    return PocBad(field, "must be a share from 0% to 100%, e.g. 20%");
  }
  return static_cast<std::int64_t>(pct * 10000 + 0.5);
}

// expect_burst: {burst, states, within, wait_p50, wait_p95, tenant_max_wait,
// min_share: {TENANT: PCT}, explained}.
Status PocParseBurstExpect(const YAML::Node& n, const std::string& field, const PocScope& scope,
                           Step& step) {
  BERTH_RETURN_IF_ERROR(PocOnlyKeys(n, field,
                                    {"burst", "states", "within", "wait_p50", "wait_p95",
                                     "tenant_max_wait", "min_share", "explained"}));
  auto burst = PocString(n, field, "burst", true);
  if (!burst) return std::unexpected(burst.error());
  if (!scope.bursts.contains(*burst)) {
    return PocBad(PocSub(field, "burst"),
                  fmt::format("'{}' is no burst an earlier step of this case bound (burst: "
                              "{{bind: NAME}})",
                              *burst));
  }
  step.job = *burst;
  BurstExpectation& e = step.burst_expect;
  auto states = PocReadStates(n, field);
  if (!states) return std::unexpected(states.error());
  e.states = std::move(*states);
  auto within = PocWithin(n, field);
  if (!within) return std::unexpected(within.error());
  e.within_ms = *within;
  for (auto [key, out] :
       {std::pair{"wait_p50", &e.p50_wait_ms}, std::pair{"wait_p95", &e.p95_wait_ms},
        std::pair{"tenant_max_wait", &e.tenant_max_wait_ms}}) {
    if (!n[key]) continue;
    auto text = PocString(n, field, key, true);
    if (!text) return std::unexpected(text.error());
    auto ms = ParseDurationMs(*text, kPocMaxWaitMs);
    if (!ms || *ms <= 0) {
      return PocBad(PocSub(field, key),
                    fmt::format("'{}' is not a duration from 1ms to 1h; write e.g. 10s", *text));
    }
    *out = *ms;
  }
  if (e.p50_wait_ms && e.p95_wait_ms && *e.p50_wait_ms > *e.p95_wait_ms) {
    return PocBad(PocSub(field, "wait_p50"),
                  "is above wait_p95; the median wait cannot exceed the 95th percentile");
  }
  if (const YAML::Node shares = n["min_share"]) {
    if (!shares.IsMap()) {
      return PocBad(PocSub(field, "min_share"),
                    "must map the burst's tenants to shares, e.g. {a: 20%}");
    }
    for (const auto& kv : shares) {
      const auto tenant = kv.first.as<std::string>();
      const std::string sf = fmt::format("{}.min_share.{}", field, tenant);
      if (!scope.tenants.contains(tenant)) return PocBad(sf, "names no tenant of setup.tenants");
      auto ppm = PocShare(kv.second, sf);
      if (!ppm) return std::unexpected(ppm.error());
      e.min_share_ppm[tenant] = *ppm;
    }
  }
  if (n["explained"]) {
    auto v = PocBool(n["explained"], PocSub(field, "explained"));
    if (!v) return std::unexpected(v.error());
    e.explained = *v;
  }
  return Ok();
}

Result<Step> PocParseStep(const YAML::Node& node, const std::string& at, PocScope& scope) {
  if (!node.IsMap() || node.size() != 1) {
    return PocBad(at,
                  "a step is a mapping with one key: submit, wait, expect, cancel, request, http, "
                  "http_load, audit, metered, failover, burst or expect_burst");
  }
  const auto kind = node.begin()->first.as<std::string>();
  const YAML::Node n = node.begin()->second;
  const std::string field = PocSub(at, kind);
  Step step;
  step.field = at;
  if (kind == "submit") {
    step.kind = StepKind::kSubmit;
    BERTH_RETURN_IF_ERROR(
        PocOnlyKeys(n, field, {"as", "bind", "job", "status", "contains", "not_contains"}));
    auto as = PocIdentity(n, field, scope);
    if (!as) return std::unexpected(as.error());
    step.as = *as;
    if (!n["job"] || !n["job"].IsMap()) {
      return PocBad(PocSub(field, "job"), "is required: a job spec as a mapping (docs/jobs.md)");
    }
    step.spec = PocEmit(n["job"]);
    BERTH_RETURN_IF_ERROR(PocCheckPlaceholders(step.spec, PocSub(field, "job"), scope));
    BERTH_RETURN_IF_ERROR(PocReadExpectations(n, field, step));
    auto bind = PocString(n, field, "bind", false);
    if (!bind) return std::unexpected(bind.error());
    step.bind = *bind;
    if (!step.bind.empty()) {
      BERTH_RETURN_IF_ERROR(PocShortName(step.bind, PocSub(field, "bind")));
      if (step.status && *step.status / 100 != 2) {
        return PocBad(PocSub(field, "bind"),
                      "a refused submit makes no job to bind; drop bind or status");
      }
      if (!scope.jobs.insert(step.bind).second) {
        return PocBad(
            PocSub(field, "bind"),
            fmt::format("'{}' is bound already in this case; use another name", step.bind));
      }
    }
  } else if (kind == "wait") {
    step.kind = StepKind::kWait;
    BERTH_RETURN_IF_ERROR(PocOnlyKeys(n, field, {"job", "states", "within", "reason_code"}));
    auto code = PocString(n, field, "reason_code", false);
    if (!code) return std::unexpected(code.error());
    step.reason_code = *code;
    auto job = PocBoundJob(n, field, scope);
    if (!job) return std::unexpected(job.error());
    step.job = *job;
    auto states = PocReadStates(n, field);
    if (!states) return std::unexpected(states.error());
    step.states = std::move(*states);
    auto ms = PocWithin(n, field);
    if (!ms) return std::unexpected(ms.error());
    step.within_ms = *ms;
    scope.waited.insert(step.job);
  } else if (kind == "expect") {
    step.kind = StepKind::kExpect;
    BERTH_RETURN_IF_ERROR(PocOnlyKeys(
        n, field, {"as", "job", "state", "failure_class", "reason_code", "failures", "same_run"}));
    auto as = PocIdentity(n, field, scope);
    if (!as) return std::unexpected(as.error());
    step.as = *as;
    auto job = PocBoundJob(n, field, scope);
    if (!job) return std::unexpected(job.error());
    step.job = *job;
    for (auto [key, out] :
         {std::pair{"state", &step.state}, std::pair{"failure_class", &step.failure_class},
          std::pair{"reason_code", &step.reason_code}}) {
      auto v = PocString(n, field, key, false);
      if (!v) return std::unexpected(v.error());
      *out = *v;
    }
    if (!step.state.empty()) BERTH_RETURN_IF_ERROR(PocState(step.state, PocSub(field, "state")));
    if (n["failures"]) {
      auto f = PocInt(n["failures"], PocSub(field, "failures"), 0, 1000);
      if (!f) return std::unexpected(f.error());
      step.failures = *f;
    }
    if (n["same_run"]) {
      auto v = PocBool(n["same_run"], PocSub(field, "same_run"));
      if (!v) return std::unexpected(v.error());
      step.same_run = *v;
      if (step.same_run && !scope.waited.contains(step.job)) {
        return PocBad(PocSub(field, "same_run"),
                      fmt::format("compares the job's runs with those an earlier wait saw; add a "
                                  "wait for '{}' before this step",
                                  step.job));
      }
    }
    if (step.state.empty() && step.failure_class.empty() && step.reason_code.empty() &&
        !step.failures && !step.same_run) {
      return PocBad(field,
                    "expects nothing; give state, failure_class, reason_code, failures or "
                    "same_run");
    }
  } else if (kind == "cancel") {
    step.kind = StepKind::kCancel;
    BERTH_RETURN_IF_ERROR(PocOnlyKeys(n, field, {"as", "job"}));
    auto as = PocIdentity(n, field, scope);
    if (!as) return std::unexpected(as.error());
    step.as = *as;
    auto job = PocBoundJob(n, field, scope);
    if (!job) return std::unexpected(job.error());
    step.job = *job;
  } else if (kind == "request") {
    step.kind = StepKind::kRequest;
    BERTH_RETURN_IF_ERROR(
        PocOnlyKeys(n, field,
                    {"as", "get", "post", "body", "content_type", "status", "contains",
                     "not_contains", "bind", "bind_field", "within"}));
    auto as = PocIdentity(n, field, scope);
    if (!as) return std::unexpected(as.error());
    step.as = *as;
    if (n["get"] && n["post"]) return PocBad(PocSub(field, "post"), "give get or post, not both");
    step.method = n["post"] ? "POST" : "GET";
    auto path = PocString(n, field, step.method == "POST" ? "post" : "get", true);
    if (!path) return PocBad(PocSub(field, "get"), "is required: the API path, e.g. /v1/gpus");
    if (!path->starts_with("/")) {
      return PocBad(PocSub(field, step.method == "POST" ? "post" : "get"),
                    "must be an API path starting with '/', e.g. /v1/gpus");
    }
    step.path = *path;
    BERTH_RETURN_IF_ERROR(PocCheckPlaceholders(step.path, field, scope));
    auto body = PocString(n, field, "body", false);
    if (!body) return std::unexpected(body.error());
    step.body = *body;
    BERTH_RETURN_IF_ERROR(PocCheckPlaceholders(step.body, PocSub(field, "body"), scope));
    BERTH_RETURN_IF_ERROR(PocReadExpectations(n, field, step));
    if (!step.status) step.status = 200;
    if (n["within"]) {
      auto ms = PocWithin(n, field);
      if (!ms) return std::unexpected(ms.error());
      step.within_ms = *ms;
    }
    BERTH_RETURN_IF_ERROR(PocParseRequestBind(n, field, scope, step));
    if (!step.bind.empty()) {
      BERTH_RETURN_IF_ERROR(
          PocShortName(step.bind, PocSub(field, step.bind_from.empty() ? "bind" : "bind.name")));
      if (*step.status / 100 != 2) {
        return PocBad(PocSub(field, "bind"),
                      "a refused request has no id to bind; drop bind or status");
      }
      if (!scope.refs.insert(step.bind).second) {
        return PocBad(
            PocSub(field, "bind"),
            fmt::format("'{}' is bound already in this case; use another name", step.bind));
      }
    }
    auto bind_field = PocString(n, field, "bind_field", false);
    if (!bind_field) return std::unexpected(bind_field.error());
    if (!bind_field->empty() && step.bind.empty()) {
      return PocBad(PocSub(field, "bind_field"), "names the answer's field to bind: give bind too");
    }
    if (!bind_field->empty() && !step.bind_from.empty()) {
      return PocBad(PocSub(field, "bind_field"),
                    "a bind from a list names its field inside it: write bind.field instead");
    }
    if (step.bind_from.empty()) step.bind_field = bind_field->empty() ? "id" : *bind_field;
  } else if (kind == "http") {
    BERTH_RETURN_IF_ERROR(PocParseHttpStep(n, field, scope, step));
  } else if (kind == "http_load") {
    BERTH_RETURN_IF_ERROR(PocParseHttpLoadStep(n, field, scope, step));
  } else if (kind == "audit") {
    step.kind = StepKind::kAudit;
    BERTH_RETURN_IF_ERROR(PocOnlyKeys(n, field, {"action", "object", "actor"}));
    for (auto [key, out, required] :
         {std::tuple{"action", &step.action, true}, std::tuple{"object", &step.object, false},
          std::tuple{"actor", &step.actor, false}}) {
      auto v = PocString(n, field, key, required);
      if (!v) return std::unexpected(v.error());
      *out = *v;
    }
    if (!step.actor.empty() && step.actor != "admin" && !scope.identities.contains(step.actor)) {
      return PocBad(PocSub(field, "actor"),
                    fmt::format("'{}' is no identity of setup.identities (or admin)", step.actor));
    }
    BERTH_RETURN_IF_ERROR(PocCheckPlaceholders(step.object, PocSub(field, "object"), scope));
  } else if (kind == "metered") {
    step.kind = StepKind::kMetered;
    BERTH_RETURN_IF_ERROR(PocOnlyKeys(n, field, {"job", "gpus"}));
    auto job = PocBoundJob(n, field, scope);
    if (!job) return std::unexpected(job.error());
    step.job = *job;
    if (!scope.waited.contains(step.job)) {
      return PocBad(PocSub(field, "job"),
                    fmt::format("'{}' is metered once it has run: wait for it first (wait: "
                                "{{job: {}, states: [Succeeded]}})",
                                step.job, step.job));
    }
    if (!n["gpus"]) {
      return PocBad(PocSub(field, "gpus"), "is required: the GPUs the job asked for, e.g. 1");
    }
    auto gpus = PocInt(n["gpus"], PocSub(field, "gpus"), 1, 1024);
    if (!gpus) return std::unexpected(gpus.error());
    step.metered_gpus = *gpus;
  } else if (kind == "failover") {
    // What stops the leader is the operator's --failover-command, never the
    // suite's: a suite runs no command on the operator's machine.
    step.kind = StepKind::kFailover;
    BERTH_RETURN_IF_ERROR(PocOnlyKeys(n, field, {"within"}));
    auto ms = PocWithin(n, field);
    if (!ms) return std::unexpected(ms.error());
    step.within_ms = *ms;
  } else if (kind == "burst") {
    step.kind = StepKind::kBurst;
    BERTH_RETURN_IF_ERROR(PocParseBurst(n, field, scope, step));
  } else if (kind == "expect_burst") {
    step.kind = StepKind::kExpectBurst;
    BERTH_RETURN_IF_ERROR(PocParseBurstExpect(n, field, scope, step));
  } else {
    return PocBad(
        field,
        "unknown step; use submit, wait, expect, cancel, request, http, http_load, audit, "
        "metered, failover, burst or expect_burst");
  }
  BERTH_RETURN_IF_ERROR(PocCheckTexts(step, field, scope));
  return step;
}

Status PocParsePreconditions(const YAML::Node& n, const std::string& field, Preconditions& p) {
  BERTH_RETURN_IF_ERROR(PocOnlyKeys(
      n, field, {"nodes", "gpus", "gpu_model", "podman", "gateway", "standby", "alert_sink"}));
  if (n["alert_sink"]) {
    auto v = PocString(n, field, "alert_sink", true);
    if (!v) return std::unexpected(v.error());
    static constexpr std::string_view kKinds[] = {"gpu_health", "node_not_ready",  "queue_wait",
                                                  "budget",     "idle_allocation", "service_slo"};
    if (std::find(std::begin(kKinds), std::end(kKinds), *v) == std::end(kKinds)) {
      return PocBad(PocSub(field, "alert_sink"),
                    fmt::format("'{}' is not an alert rule kind; use gpu_health, node_not_ready, "
                                "queue_wait, budget, idle_allocation or service_slo",
                                *v));
    }
    p.alert_sink = *v;
  }
  if (n["nodes"]) {
    auto v = PocInt(n["nodes"], PocSub(field, "nodes"), 1, 100000);
    if (!v) return std::unexpected(v.error());
    p.nodes = *v;
  }
  if (n["gpus"]) {
    auto v = PocInt(n["gpus"], PocSub(field, "gpus"), 1, 1000000);
    if (!v) return std::unexpected(v.error());
    p.gpus = *v;
  }
  if (n["gpu_model"]) {
    auto v = PocString(n, field, "gpu_model", true);
    if (!v) return std::unexpected(v.error());
    p.gpu_model = *v;
  }
  for (auto [key, out] : {std::pair{"podman", &p.podman}, std::pair{"gateway", &p.gateway},
                          std::pair{"standby", &p.standby}}) {
    if (!n[key]) continue;
    auto v = PocBool(n[key], PocSub(field, key));
    if (!v) return std::unexpected(v.error());
    *out = *v;
  }
  return Ok();
}

template <std::size_t N>
Status PocOneOf(const std::string& value, const std::string& field,
                const std::string_view (&allowed)[N]) {
  for (auto a : allowed) {
    if (a == value) return Ok();
  }
  return PocBad(field, fmt::format("'{}' is not one of {}", value,
                                   PocJoin(std::vector<std::string_view>(allowed, allowed + N))));
}

Result<Case> PocParseCase(const YAML::Node& n, const std::string& field, const Group& group,
                          PocScope scope) {
  BERTH_RETURN_IF_ERROR(PocOnlyKeys(n, field,
                                    {"id", "title", "capability", "perspective", "weight", "risk",
                                     "preconditions", "retest", "steps"}));
  Case c;
  c.group = group.id;
  for (auto [key, out] :
       {std::pair{"id", &c.id}, std::pair{"title", &c.title},
        std::pair{"capability", &c.capability}, std::pair{"perspective", &c.perspective},
        std::pair{"retest", &c.retest}}) {
    auto v = PocString(n, field, key, true);
    if (!v) return std::unexpected(v.error());
    *out = *v;
  }
  BERTH_RETURN_IF_ERROR(PocShortName(c.id, PocSub(field, "id"), 63));
  BERTH_RETURN_IF_ERROR(PocOneOf(c.capability, PocSub(field, "capability"), kPocCapabilities));
  BERTH_RETURN_IF_ERROR(PocOneOf(c.perspective, PocSub(field, "perspective"), kPocPerspectives));
  if (n["weight"]) {
    auto w = PocInt(n["weight"], PocSub(field, "weight"), 1, kPocMaxWeight);
    if (!w) return std::unexpected(w.error());
    c.weight = *w;
  }
  auto risk = PocString(n, field, "risk", true);
  if (!risk) return std::unexpected(risk.error());
  if (*risk == "high") {
    c.risk = Risk::kHigh;
  } else if (*risk == "medium") {
    c.risk = Risk::kMedium;
  } else if (*risk == "low") {
    c.risk = Risk::kLow;
  } else {
    return PocBad(PocSub(field, "risk"),
                  fmt::format("'{}' is not a risk; use high (must-fix), medium (limited-launch) "
                              "or low (later-optimization)",
                              *risk));
  }
  if (n["preconditions"]) {
    BERTH_RETURN_IF_ERROR(
        PocParsePreconditions(n["preconditions"], PocSub(field, "preconditions"), c.preconditions));
  }
  const YAML::Node steps = n["steps"];
  if (!steps || !steps.IsSequence() || steps.size() == 0) {
    return PocBad(PocSub(field, "steps"), "is required: a list of at least one step");
  }
  for (std::size_t i = 0; i < steps.size(); ++i) {
    auto step = PocParseStep(steps[i], fmt::format("{}.steps[{}]", field, i), scope);
    if (!step) return std::unexpected(step.error());
    if (step->kind == StepKind::kFailover && !c.preconditions.standby) {
      return PocBad(step->field + ".failover",
                    "a failover needs a standby to take over; add preconditions: {standby: true} "
                    "to the case");
    }
    c.steps.push_back(std::move(*step));
  }
  return c;
}

Status PocParseSetup(const YAML::Node& n, Suite& suite, PocScope& scope) {
  BERTH_RETURN_IF_ERROR(PocOnlyKeys(n, "setup", {"tenants", "identities", "policy"}));
  if (const YAML::Node policy = n["policy"]) {
    if (!policy.IsMap()) {
      return PocBad("setup.policy",
                    "must be a mapping of policy settings, e.g. {reclaim_grace: 0s}");
    }
    for (const char* key : {"queues", "tenants"}) {
      if (policy[key]) {
        return PocBad(fmt::format("setup.policy.{}", key),
                      "the run makes its queues and tenants from setup.tenants; leave it out");
      }
    }
    suite.policy = PocEmit(policy);
  }
  const YAML::Node tenants = n["tenants"];
  if (tenants) {
    if (!tenants.IsSequence()) return PocBad("setup.tenants", "must be a list");
    for (std::size_t i = 0; i < tenants.size(); ++i) {
      const std::string field = fmt::format("setup.tenants[{}]", i);
      if (!tenants[i].IsMap()) return PocBad(field, "must be a mapping with name and queues");
      auto name = PocString(tenants[i], field, "name", true);
      if (!name) return std::unexpected(name.error());
      BERTH_RETURN_IF_ERROR(PocShortName(*name, PocSub(field, "name")));
      if (!scope.tenants.insert(*name).second) {
        return PocBad(PocSub(field, "name"), fmt::format("'{}' is set up twice", *name));
      }
      YAML::Node body = YAML::Clone(tenants[i]);
      body.remove("name");
      suite.tenants.push_back({*name, body.size() == 0 ? std::string() : PocEmit(body)});
    }
  }
  const YAML::Node identities = n["identities"];
  if (identities) {
    if (!identities.IsSequence()) return PocBad("setup.identities", "must be a list");
    for (std::size_t i = 0; i < identities.size(); ++i) {
      const std::string field = fmt::format("setup.identities[{}]", i);
      BERTH_RETURN_IF_ERROR(PocOnlyKeys(identities[i], field, {"name", "tenants"}));
      auto name = PocString(identities[i], field, "name", true);
      if (!name) return std::unexpected(name.error());
      BERTH_RETURN_IF_ERROR(PocShortName(*name, PocSub(field, "name")));
      if (*name == "admin" || !scope.identities.insert(*name).second) {
        return PocBad(PocSub(field, "name"),
                      fmt::format("'{}' is taken (admin is the runner's own)", *name));
      }
      IdentitySetup id{*name, {}};
      const YAML::Node roles = identities[i]["tenants"];
      if (roles) {
        if (!roles.IsMap()) {
          return PocBad(PocSub(field, "tenants"), "must map tenants to roles, e.g. {a: member}");
        }
        for (const auto& kv : roles) {
          const auto tenant = kv.first.as<std::string>();
          const std::string rf = fmt::format("{}.tenants.{}", field, tenant);
          if (!scope.tenants.contains(tenant)) {
            return PocBad(rf, "names no tenant of setup.tenants");
          }
          const auto role = kv.second.IsScalar() ? kv.second.as<std::string>() : "";
          if (role != "viewer" && role != "member" && role != "tenant-admin") {
            return PocBad(rf, "must be viewer, member or tenant-admin");
          }
          id.roles[tenant] = role;
        }
      }
      suite.identities.push_back(std::move(id));
    }
  }
  return Ok();
}

}  // namespace

std::string_view RiskName(Risk risk) {
  switch (risk) {
    case Risk::kHigh:
      return "high";
    case Risk::kMedium:
      return "medium";
    case Risk::kLow:
      return "low";
  }
  return "medium";
}

std::string_view RiskConclusion(Risk risk) {
  switch (risk) {
    case Risk::kHigh:
      return "must-fix";
    case Risk::kMedium:
      return "limited-launch";
    case Risk::kLow:
      return "later-optimization";
  }
  return "limited-launch";
}

std::string_view StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kSubmit:
      return "submit";
    case StepKind::kWait:
      return "wait";
    case StepKind::kExpect:
      return "expect";
    case StepKind::kCancel:
      return "cancel";
    case StepKind::kRequest:
      return "request";
    case StepKind::kAudit:
      return "audit";
    case StepKind::kFailover:
      return "failover";
    case StepKind::kMetered:
      return "metered";
    case StepKind::kHttp:
      return "http";
    case StepKind::kBurst:
      return "burst";
    case StepKind::kExpectBurst:
      return "expect_burst";
    case StepKind::kHttpLoad:
      return "http_load";
  }
  return "request";
}

std::string Sha256Hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

Result<std::string> ExpandPlaceholders(std::string_view text, std::string_view run,
                                       const std::map<std::string, std::string>& tenants,
                                       const std::map<std::string, std::string>& jobs) {
  std::string out;
  std::size_t at = 0;
  while (true) {
    const auto open = text.find("${", at);
    if (open == std::string_view::npos) break;
    const auto close = text.find('}', open);
    if (close == std::string_view::npos) break;
    out.append(text.substr(at, open - at));
    const std::string name(text.substr(open + 2, close - open - 2));
    const std::map<std::string, std::string>* table = nullptr;
    std::string key;
    if (name == "run") {
      out += run;
    } else if (name == "gpus" || name == "gateway" || name == "model_server" ||
               name.starts_with("ref.")) {
      table = &jobs;
      key = name;
    } else if (name.starts_with("tenant.")) {
      table = &tenants;
      key = name.substr(7);
    } else if (name.starts_with("job.")) {
      table = &jobs;
      key = name.substr(4);
    } else {
      return Fail(Code::kInvalidArgument, fmt::format("${{{}}} is not a placeholder", name));
    }
    if (table != nullptr) {
      auto it = table->find(key);
      if (it == table->end()) {
        return Fail(Code::kFailedPrecondition, fmt::format("${{{}}} has no value yet", name));
      }
      out += it->second;
    }
    at = close + 1;
  }
  out.append(text.substr(at));
  return out;
}

Result<Suite> ParseSuite(std::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return PocBad("", fmt::format("the suite is not YAML (line {}, column {}): {}", e.mark.line + 1,
                                  e.mark.column + 1, e.msg));
  }
  if (!root.IsMap()) return PocBad("", "a suite is a mapping with name, version and groups");
  try {
    BERTH_RETURN_IF_ERROR(PocOnlyKeys(root, "", {"name", "version", "setup", "groups"}));
    Suite suite;
    suite.sha256 = Sha256Hex(text);
    auto name = PocString(root, "", "name", true);
    if (!name) return std::unexpected(name.error());
    suite.name = *name;
    auto version = PocString(root, "", "version", true);
    if (!version) return std::unexpected(version.error());
    suite.version = *version;
    PocScope scope;
    if (root["setup"]) BERTH_RETURN_IF_ERROR(PocParseSetup(root["setup"], suite, scope));
    const YAML::Node groups = root["groups"];
    if (!groups || !groups.IsSequence() || groups.size() == 0) {
      return PocBad("groups", "is required: a list of groups, each with id, title and cases");
    }
    std::set<std::string> case_ids;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const std::string gf = fmt::format("groups[{}]", g);
      BERTH_RETURN_IF_ERROR(PocOnlyKeys(groups[g], gf, {"id", "title", "cases"}));
      Group group;
      auto id = PocString(groups[g], gf, "id", true);
      if (!id) return std::unexpected(id.error());
      group.id = *id;
      BERTH_RETURN_IF_ERROR(PocShortName(group.id, PocSub(gf, "id"), 63));
      auto title = PocString(groups[g], gf, "title", false);
      if (!title) return std::unexpected(title.error());
      group.title = title->empty() ? group.id : *title;
      const YAML::Node cases = groups[g]["cases"];
      if (!cases || !cases.IsSequence() || cases.size() == 0) {
        return PocBad(PocSub(gf, "cases"), "is required: a list of at least one case");
      }
      for (std::size_t c = 0; c < cases.size(); ++c) {
        const std::string cf = fmt::format("{}.cases[{}]", gf, c);
        auto parsed = PocParseCase(cases[c], cf, group, scope);
        if (!parsed) return std::unexpected(parsed.error());
        if (!case_ids.insert(parsed->id).second) {
          return PocBad(PocSub(cf, "id"),
                        fmt::format("'{}' is another case's id already", parsed->id));
        }
        suite.cases.push_back(std::move(*parsed));
      }
      suite.groups.push_back(std::move(group));
    }
    return suite;
  } catch (const YAML::Exception& e) {
    return PocBad("",
                  fmt::format("the suite could not be read (line {}): {}", e.mark.line + 1, e.msg));
  }
}

Result<Suite> SelectCases(const Suite& suite, const std::vector<std::string>& ids) {
  std::set<std::string> wanted(ids.begin(), ids.end());
  std::set<std::string> have;
  for (const auto& c : suite.cases) have.insert(c.id);
  for (const auto& id : wanted) {
    if (have.contains(id)) continue;
    std::string list;
    for (const auto& c : suite.cases) list += (list.empty() ? "" : ", ") + c.id;
    return Fail(
        Code::kInvalidArgument,
        fmt::format("--case {}: suite {} has no such case; its cases: {}", id, suite.name, list),
        "case");
  }
  Suite out = suite;
  out.cases.clear();
  out.groups.clear();
  std::set<std::string> groups;
  for (const auto& c : suite.cases) {
    if (!wanted.contains(c.id)) continue;
    out.cases.push_back(c);
    groups.insert(c.group);
  }
  for (const auto& g : suite.groups) {
    if (groups.contains(g.id)) out.groups.push_back(g);
  }
  return out;
}

}  // namespace berth::cli::poc
