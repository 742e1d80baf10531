#include "cli/poc_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "cli/json_view.h"
#include "cli/poc_burst.h"
#include "cli/poc_cleanup.h"
#include "cli/poc_http.h"
#include "cli/poc_meter.h"
#include "cli/poc_runner.h"
#include "cli/version.h"
#include "common/units.h"

namespace berth::cli::poc::runner {
namespace {

// How much of an answer a request step keeps to judge; logs can be long.
constexpr std::size_t kPocMaxBody = std::size_t{1} << 20;
// How much of an answer the report quotes.
constexpr std::size_t kPocQuote = 300;

PocAnswer PocFromError(const Error& e) {
  PocAnswer a;
  a.status = HttpStatus(e.code);
  a.doc = json{{"error", {{"code", CodeName(e.code)}, {"field", e.field}, {"message", e.message}}}};
  a.body = a.doc.dump();
  return a;
}

// The run ids of a job's placement, sorted and comma-joined ("" for none).
std::string PocRunIds(const json& job) {
  std::vector<std::string> ids;
  for (const auto& p : Array(job, "placement")) ids.push_back(Text(p, "run_id"));
  std::sort(ids.begin(), ids.end());
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ",") + id;
  return out;
}

}  // namespace

bool PocTerminal(const std::string& state) {
  return state == "Succeeded" || state == "Failed" || state == "Cancelled";
}

std::string PocQuote(std::string_view text) {
  if (text.size() <= kPocQuote) return std::string(text);
  return std::string(text.substr(0, kPocQuote)) + "...";
}

PocAnswer PocGet(ApiClient& api, const std::string& path) {
  std::string body;
  auto st = api.Stream(
      path,
      [&body](std::string_view piece) {
        body.append(piece.substr(0, kPocMaxBody - std::min(kPocMaxBody, body.size())));
        return true;
      },
      false);
  if (!st) return PocFromError(st.error());
  PocAnswer a;
  a.status = 200;
  a.body = std::move(body);
  a.doc = json::parse(a.body, nullptr, false);
  if (a.doc.is_discarded()) a.doc = json();
  return a;
}

PocAnswer PocPost(ApiClient& api, const std::string& path, const std::string& body,
                  const std::string& content_type) {
  auto r = api.Post(path, body, content_type);
  if (!r) return PocFromError(r.error());
  PocAnswer a;
  a.status = 200;
  a.doc = std::move(*r);
  a.body = a.doc.dump();
  return a;
}

bool PocStatusMatches(int expected, int actual) {
  return expected / 100 == 2 ? actual / 100 == 2 : expected == actual;
}

std::string PocStatusText(int status) {
  return status / 100 == 2 ? "2xx" : std::to_string(status);
}

std::string PocHealthText(const PocHealth& h) {
  if (!h.error.empty()) return fmt::format("{}: no answer ({})", h.url, PocQuote(h.error));
  if (h.role == "leader") return fmt::format("{}: leader at term {}", h.url, h.term);
  if (h.role == "standby") {
    return fmt::format("{}: standby of {} at term {}", h.url,
                       h.leader.empty() ? std::string("no leader yet") : h.leader, h.term);
  }
  return fmt::format("{}: role '{}' (a single berthd, no leadership)", h.url,
                     h.role.empty() ? "-" : h.role);
}

std::string PocHealthList(const std::vector<PocHealth>& seen) {
  std::string out;
  for (const auto& h : seen) out += (out.empty() ? "" : "; ") + PocHealthText(h);
  return out;
}

// The index of the address that answers as leader, if one does.
std::optional<std::size_t> PocLeaderOf(const std::vector<PocHealth>& seen) {
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (seen[i].error.empty() && seen[i].role == "leader") return i;
  }
  return std::nullopt;
}

Status PocRunner::Preflight() {
  auto me = admin_.Get("/v1/whoami");
  if (!me) return std::unexpected(me.error());
  if (!Bool(*me, "platform_admin")) {
    return Fail(Code::kPermissionDenied,
                fmt::format("berth poc run needs a platform admin's token (it sets up tenants, "
                            "identities and a policy version); {} is not one: berth login as a "
                            "platform admin",
                            Text(*me, "name")));
  }
  admin_name_ = Text(*me, "name");
  auto policy = admin_.Get("/v1/policy");
  if (!policy) return std::unexpected(policy.error());
  policy_before_ = Int(*policy, "version").value_or(0);
  return Ok();
}

json PocRunner::Fingerprint() {
  json env;
  env["cluster"] = opt_.cluster;
  env["server"] = admin_.url().text;
  env["cli_version"] = std::string(Version());
  auto openapi = admin_.Get("/v1/openapi.json");
  env["api_version"] = openapi ? Text(*openapi, "info.version") : "-";
  auto health = PocGet(admin_, "/healthz");
  env["role"] = Text(health.doc, "role");
  env["berthd_version"] = Text(health.doc, "version");
  auto nodes = admin_.Get("/v1/nodes");
  if (nodes) nodes_ = Array(*nodes, "nodes");
  auto gpus = admin_.Get("/v1/gpus");
  if (gpus) gpus_ = Array(*gpus, "gpus");
  std::int64_t ready = 0;
  std::map<std::string, std::int64_t> drivers;  // "driver D, CUDA C (provider)" -> nodes
  for (const auto& n : nodes_) {
    ready += Text(n, "state") == "Ready" ? 1 : 0;
    drivers[fmt::format("driver {}, CUDA {} ({})", Text(n, "driver_version"),
                        Text(n, "cuda_version"), Text(n, "gpu_provider"))] += 1;
  }
  env["drivers"] = drivers;
  std::map<std::string, std::int64_t> models;
  std::int64_t healthy = 0;
  for (const auto& g : gpus_) {
    models[Text(g, "model")] += 1;
    healthy += Text(g, "health") == "healthy" ? 1 : 0;
  }
  env["nodes"] = nodes_.size();
  env["nodes_ready"] = ready;
  env["gpus"] = gpus_.size();
  env["gpus_healthy"] = healthy;
  env["gpu_models"] = models;
  env["policy_version_before"] = policy_before_;
  auto prices = admin_.Get("/v1/prices");
  env["price_version"] = prices ? Int(*prices, "version").value_or(0) : 0;
  const std::string gateway_problem = ReadGateway();
  env["gateway"] = gateway_url_.empty() ? json() : json(gateway_url_);
  if (!gateway_problem.empty()) env["gateway_problem"] = gateway_problem;
  env["suite"] = {{"name", suite_.name}, {"version", suite_.version}, {"sha256", suite_.sha256}};
  return env;
}

Status PocRunner::Setup() {
  if (!suite_.tenants.empty() || !suite_.policy.empty()) {
    auto policy = admin_.Get("/v1/policy");
    if (!policy) return std::unexpected(policy.error());
    YAML::Node doc;
    try {
      doc = YAML::Load(Text(*policy, "yaml") == "-" ? "" : Text(*policy, "yaml"));
      if (!doc.IsMap()) doc = YAML::Node(YAML::NodeType::Map);
      if (!doc["queues"]) {
        // A policy without queues keeps default/default; keep it with ours.
        doc["queues"].push_back(YAML::Load("{name: default, children: [{name: default}]}"));
      }
      if (!suite_.policy.empty()) {
        for (const auto& kv : YAML::Load(suite_.policy)) {
          doc[kv.first.as<std::string>()] = kv.second;
        }
      }
      for (const auto& t : suite_.tenants) {
        const std::string real = fmt::format("{}-{}", opt_.run, t.name);
        YAML::Node q = t.body.empty() ? YAML::Node(YAML::NodeType::Map) : YAML::Load(t.body);
        q["name"] = real;
        // A tenant's storage grants live in the policy's tenants section.
        if (q["storage"]) {
          doc["tenants"][real]["storage"] = q["storage"];
          q.remove("storage");
        }
        doc["queues"].push_back(q);
        tenants_[t.name] = real;
      }
    } catch (const YAML::Exception& e) {
      return Fail(Code::kInternal,
                  fmt::format("the active policy could not be extended: {}", e.msg));
    }
    YAML::Emitter out;
    out << doc;
    auto applied =
        admin_.Post("/v1/policy" + QueryString({{"comment", RunPolicyComment(opt_.run)},
                                                {"base_version", std::to_string(policy_before_)}}),
                    out.c_str(), "application/yaml");
    if (!applied) {
      tenants_.clear();
      return Fail(applied.error().code,
                  fmt::format("the suite's tenants could not be applied as a policy: {}",
                              applied.error().message),
                  applied.error().field);
    }
    policy_during_ = Int(*applied, "version").value_or(0);
  }
  for (const auto& id : suite_.identities) {
    const std::string real = fmt::format("{}-{}", opt_.run, id.name);
    json tenants = json::object();
    for (const auto& [t, role] : id.roles) tenants[tenants_.at(t)] = role;
    json body{{"name", real}, {"kind", "user"}, {"tenants", tenants}};
    auto made = admin_.Post("/v1/identities", body.dump(), "application/json");
    if (!made) {
      return Fail(made.error().code,
                  fmt::format("identity {} could not be made: {}", real, made.error().message),
                  made.error().field);
    }
    identities_[id.name] = real;
    json tok{{"identity", real}, {"ttl", "1d"}, {"description", "berth poc run " + opt_.run}};
    auto token = admin_.Post("/v1/tokens", tok.dump(), "application/json");
    if (!token) {
      return Fail(token.error().code,
                  fmt::format("a token for {} could not be made: {}", real, token.error().message));
    }
    tokens_.emplace_back(Text(*token, "id"), real);
    tokens_of_[id.name] = Text(*token, "token");
    clients_[id.name] = std::make_unique<ApiClient>(opt_.client_for(Text(*token, "token")));
  }
  return Ok();
}

std::vector<std::string> PocRunner::Unmet(const Case& c) {
  const Preconditions& p = c.preconditions;
  std::vector<std::string> unmet;
  std::int64_t ready = 0;
  for (const auto& n : nodes_) ready += Text(n, "state") == "Ready" ? 1 : 0;
  if (p.nodes && ready < *p.nodes) {
    unmet.push_back(
        fmt::format("nodes: {} Ready node(s) needed, the API shows {}", *p.nodes, ready));
  }
  std::int64_t healthy = 0;
  bool model = false;
  for (const auto& g : gpus_) {
    if (Text(g, "health") != "healthy") continue;
    ++healthy;
    model = model || (p.gpu_model && Text(g, "model") == *p.gpu_model);
  }
  if (p.gpus && healthy < *p.gpus) {
    unmet.push_back(
        fmt::format("gpus: {} healthy GPU(s) needed, the API shows {}", *p.gpus, healthy));
  }
  if (p.gpu_model && !model) {
    unmet.push_back(fmt::format("gpu_model: no healthy {} GPU in GET /v1/gpus", *p.gpu_model));
  }
  // A container case needs one Ready node with podman: the scheduler places
  // a job with an image only on such a node.
  if (p.podman) {
    std::vector<std::string> without;
    for (const auto& n : nodes_) {
      if (Text(n, "state") == "Ready" && Text(n, "container_runtime") != "podman") {
        without.push_back(Text(n, "name"));
      }
    }
    if (ready == 0 || std::ssize(without) == ready) {
      unmet.push_back(fmt::format(
          "podman: {} (container_runtime in GET /v1/nodes; berth-agent reports podman when it "
          "finds it on its PATH)",
          ready == 0 ? std::string("no Ready node")
                     : fmt::format("none of the {} Ready node(s) reports a container runtime: {}",
                                   ready, fmt::join(without, ", "))));
    }
  }
  // The gateway as the API shows it (GET /v1/services), read again for
  // each case that needs it: one that went down since is unmet.
  if (p.gateway) {
    if (auto problem = ReadGateway(); !problem.empty()) {
      unmet.push_back("gateway: " + problem);
    }
  }
  if (!p.alert_sink.empty()) {
    auto rules = admin_.Get("/v1/alert-rules");
    std::set<std::string> sinks;
    bool routed = false;
    if (rules) {
      for (const auto& sink : Array(*rules, "sinks")) sinks.insert(Text(sink, "name"));
      for (const auto& rule : Array(*rules, "rules")) {
        if (Text(rule, "kind") != p.alert_sink || !Bool(rule, "enabled")) continue;
        for (const auto& sink : Array(rule, "sinks")) {
          routed = routed || (sink.is_string() && sinks.contains(sink.get<std::string>()));
        }
      }
    }
    if (!routed) {
      unmet.push_back(fmt::format("alert_sink: {}",
                                  rules ? fmt::format("no enabled {} rule in GET /v1/alert-rules "
                                                      "sends to a sink (berth alert rules show)",
                                                      p.alert_sink)
                                        : "GET /v1/alert-rules: " + rules.error().message));
    }
  }
  // A standby counts only where the run can see it: the server list holds
  // the leader and a standby of that leader at the same term.
  if (p.standby) {
    const std::size_t given = admin_.urls().size();
    if (given < 2) {
      unmet.push_back(fmt::format(
          "standby: 1 address given (--server {}); give every berthd's address, comma-separated",
          admin_.urls().empty() ? std::string("-") : admin_.urls()[0].text));
    } else {
      const auto seen = Health();
      const auto lead = PocLeaderOf(seen);
      bool standby = false;
      for (std::size_t i = 0; lead && i < seen.size(); ++i) {
        standby =
            standby || (i != *lead && seen[i].error.empty() && seen[i].role == "standby" &&
                        seen[i].leader == seen[*lead].leader && seen[i].term == seen[*lead].term);
      }
      if (!lead || !standby) {
        unmet.push_back(fmt::format(
            "standby: {} of the {} addresses given (--server) on GET /healthz; seen: {}",
            !lead ? "no berthd answers as leader"
                  : "none answers as a standby of the leader at its term",
            given, PocHealthList(seen)));
      } else if (opt_.failover_command.empty() &&
                 std::any_of(c.steps.begin(), c.steps.end(),
                             [](const Step& s) { return s.kind == StepKind::kFailover; })) {
        unmet.push_back(fmt::format(
            "standby: present ({}), but no --failover-command was given to stop the leader; pass "
            "--failover-command CMD (BERTH_POC_LEADER names the leader's address)",
            PocHealthList(seen)));
      }
    }
  }
  return unmet;
}

PocStepResult PocRunner::Judge(const Step& step, const PocAnswer& a, const std::string& what,
                               const std::map<std::string, std::string>& jobs) {
  PocStepResult r;
  const int want = step.status.value_or(200);
  r.expected = fmt::format("{} answers {}", what, PocStatusText(want));
  r.actual = fmt::format("{}: {}", PocStatusText(a.status), PocQuote(a.body));
  if (!PocStatusMatches(want, a.status)) {
    r.ok = false;
    return r;
  }
  for (const auto& text : step.contains) {
    auto t = Expand(text, jobs);
    const std::string needle = t ? *t : text;
    r.expected += fmt::format(", containing '{}'", needle);
    if (a.body.find(needle) == std::string::npos) r.ok = false;
  }
  for (const auto& text : step.not_contains) {
    auto t = Expand(text, jobs);
    const std::string needle = t ? *t : text;
    r.expected += fmt::format(", not containing '{}'", needle);
    if (a.body.find(needle) != std::string::npos) r.ok = false;
  }
  return r;
}

PocStepResult PocRunner::PickBound(const Step& step, const PocAnswer& a,
                                   const std::map<std::string, std::string>& jobs, PocStepResult r,
                                   std::string& picked) {
  std::vector<BindWhere> wanted;
  std::string conditions;
  for (const auto& w : step.bind_where) {
    auto v = Expand(w.value, jobs);
    wanted.push_back({w.field, v ? *v : w.value, w.prefix});
    conditions += fmt::format("{}{} {} '{}'", conditions.empty() ? "" : ", ", w.field,
                              w.prefix ? "starting with" : "=", wanted.back().value);
  }
  r.expected +=
      fmt::format(", with an item of {}{} whose {} is bound to {}", step.bind_from,
                  conditions.empty() ? "" : " where " + conditions, step.bind_field, step.bind);
  std::string why;
  auto value = PickBoundValue(a.doc, step.bind_from, wanted, step.bind_field, why);
  if (!value) {
    r.ok = false;
    r.actual += " (" + why + ")";
    return r;
  }
  picked = *value;
  r.actual +=
      fmt::format(" ({} {} of the matching item bound to {})", step.bind_field, picked, step.bind);
  return r;
}

PocAnswer PocRunner::RequestOnce(const Step& step, const std::string& path,
                                 const std::string& body) {
  return step.method == "POST"
             ? PocPost(ClientOf(step.as), path, body,
                       body.starts_with("{") ? "application/json" : "application/yaml")
             : PocGet(ClientOf(step.as), path);
}

PocStepResult PocRunner::RunStep(const Step& step, std::map<std::string, std::string>& jobs,
                                 json& evidence) {
  auto job_id = [&jobs](const std::string& bound) { return jobs.at(bound); };
  switch (step.kind) {
    case StepKind::kSubmit: {
      // ${gpus} is a number: unquoted, so `replicas: "${gpus}"` reads as one.
      std::string text = step.spec;
      for (const char* quoted : {"'${gpus}'", "\"${gpus}\""}) {
        for (auto at = text.find(quoted); at != std::string::npos; at = text.find(quoted)) {
          text.replace(at, std::string_view(quoted).size(), "${gpus}");
        }
      }
      auto spec = Expand(text, jobs);
      if (!spec) return {false, "a job spec", spec.error().message};
      auto a = PocPost(ClientOf(step.as), "/v1/jobs", *spec, "application/yaml");
      evidence["requests"].push_back({{"as", ActorName(step.as)},
                                      {"request", "POST /v1/jobs"},
                                      {"status", PocStatusText(a.status)}});
      if (a.ok() && a.doc.contains("id")) {
        const auto id = a.doc["id"].get<std::uint64_t>();
        jobs_.push_back(id);
        evidence["jobs"].push_back(id);
        if (!step.bind.empty()) jobs[step.bind] = std::to_string(id);
      }
      Step judged = step;
      if (step.contains.empty() && step.not_contains.empty() && !step.status) judged.status = 200;
      auto r = Judge(judged, a, fmt::format("POST /v1/jobs as {}", ActorName(step.as)), jobs);
      if (a.ok() && !step.bind.empty()) r.actual = fmt::format("job {} submitted", jobs[step.bind]);
      return r;
    }
    case StepKind::kWait: {
      const std::string id = job_id(step.job);
      std::string states;
      for (const auto& s : step.states) states += (states.empty() ? "" : " or ") + s;
      PocStepResult r{
          false,
          fmt::format("job {} ({}) is {}{} within {}", id, step.job, states,
                      step.reason_code.empty() ? "" : " with reason " + step.reason_code,
                      FormatDurationMs(step.within_ms)),
          ""};
      const TimeMs deadline = Now() + step.within_ms;
      while (true) {
        auto job = admin_.Get("/v1/jobs/" + id);
        if (job) {
          const std::string state = Text(*job, "state");
          r.actual = fmt::format("{} ({}): {}", state, Text(*job, "reason.code"),
                                 PocQuote(Text(*job, "reason.message")));
          const bool code_ok =
              step.reason_code.empty() || Text(*job, "reason.code") == step.reason_code;
          if (code_ok &&
              std::find(step.states.begin(), step.states.end(), state) != step.states.end()) {
            r.ok = true;
            // What an expect's same_run compares with.
            jobs["runs." + step.job] = PocRunIds(*job);
            return r;
          }
          if (PocTerminal(state)) return r;  // it will not change any more
        } else {
          r.actual = PocQuote(job.error().message);
        }
        if (Now() >= deadline) {
          r.actual += fmt::format(" (after {})", FormatDurationMs(step.within_ms));
          return r;
        }
        if (Interrupted()) {
          r.actual += fmt::format(" (the wait was cut short by {})", SignalName());
          return r;
        }
        opt_.sleep(opt_.poll_ms);
      }
    }
    case StepKind::kExpect: {
      const std::string id = job_id(step.job);
      auto a = PocGet(ClientOf(step.as), "/v1/jobs/" + id);
      evidence["requests"].push_back({{"as", ActorName(step.as)},
                                      {"request", "GET /v1/jobs/" + id},
                                      {"status", PocStatusText(a.status)}});
      PocStepResult r;
      std::vector<std::string> want;
      std::vector<std::string> got;
      auto check = [&](std::string_view what, const std::string& expected,
                       const std::string& actual) {
        want.push_back(fmt::format("{} {}", what, expected));
        got.push_back(fmt::format("{} {}", what, actual));
        if (expected != actual) r.ok = false;
      };
      if (!step.state.empty()) check("state", step.state, Text(a.doc, "state"));
      if (!step.failure_class.empty()) {
        check("failure class", step.failure_class, Text(a.doc, "failure.class"));
      }
      if (!step.reason_code.empty()) check("reason", step.reason_code, Text(a.doc, "reason.code"));
      if (step.failures) {
        check("failures", std::to_string(*step.failures), IntText(a.doc, "failures"));
      }
      if (step.same_run) {
        const auto seen = jobs.find("runs." + step.job);
        const std::string before = seen == jobs.end() ? "" : seen->second;
        check("runs", before.empty() ? "(none seen)" : before,
              a.ok() ? PocRunIds(a.doc) : std::string("-"));
      }
      auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
        return s;
      };
      r.expected = fmt::format("job {} ({}): {}", id, step.job, join(want));
      r.actual = a.ok() ? join(got) : fmt::format("{}: {}", a.status, PocQuote(a.body));
      if (!a.ok()) r.ok = false;
      return r;
    }
    case StepKind::kCancel: {
      const std::string id = job_id(step.job);
      const std::string path = fmt::format("/v1/jobs/{}/cancel", id);
      auto a = PocPost(ClientOf(step.as), path, "", "application/json");
      evidence["requests"].push_back({{"as", ActorName(step.as)},
                                      {"request", "POST " + path},
                                      {"status", PocStatusText(a.status)}});
      Step judged = step;
      judged.status = 200;
      return Judge(judged, a, fmt::format("POST {} as {}", path, ActorName(step.as)), jobs);
    }
    case StepKind::kRequest: {
      auto path = Expand(step.path, jobs);
      if (!path) return {false, step.path, path.error().message};
      auto body = Expand(step.body, jobs);
      if (!body) return {false, step.body, body.error().message};
      const std::string what = fmt::format("{} {} as {}", step.method, *path, ActorName(step.as));
      const TimeMs deadline = Now() + step.within_ms;
      PocAnswer a;
      PocStepResult r;
      std::string picked;  // bind: {from: ...}'s value
      while (true) {
        a = RequestOnce(step, *path, *body);
        r = Judge(step, a, what, jobs);
        if (r.ok && !step.bind_from.empty()) r = PickBound(step, a, jobs, std::move(r), picked);
        // Only a read is asked again: a POST is sent once.
        if (r.ok || step.method != "GET" || Now() >= deadline || Interrupted()) break;
        opt_.sleep(opt_.poll_ms);
      }
      if (step.within_ms > 0) {
        r.expected += fmt::format(" within {}", FormatDurationMs(step.within_ms));
      }
      evidence["requests"].push_back({{"as", ActorName(step.as)},
                                      {"request", step.method + " " + *path},
                                      {"status", PocStatusText(a.status)}});
      if (r.ok && !step.bind_from.empty()) {
        jobs["ref." + step.bind] = picked;
      } else if (r.ok && !step.bind.empty()) {
        const json* id = Field(a.doc, step.bind_field);
        if (id == nullptr || id->is_null()) {
          r.ok = false;
          r.actual += fmt::format(" (no {} to bind)", step.bind_field);
        } else {
          jobs["ref." + step.bind] = id->is_string() ? id->get<std::string>() : id->dump();
        }
      }
      // A service the case applied: deleted when the case ends.
      if (a.ok() && step.method == "POST" && *path == "/v1/services") {
        std::pair<std::string, std::string> made{Text(a.doc, "tenant"), Text(a.doc, "name")};
        if (std::find(case_services_.begin(), case_services_.end(), made) == case_services_.end()) {
          case_services_.push_back(made);
          services_.push_back(made);
        }
        evidence["services"].push_back(made.first + "/" + made.second);
      }
      // An approved quota request is a policy version the run made: the
      // cleanup's rollback covers it.
      if (r.ok && step.method == "POST" && path->starts_with("/v1/quota-requests/") &&
          path->substr(0, path->find('?')).ends_with("/approve")) {
        if (auto v = Int(a.doc, "policy_version"); v && policy_during_ > 0) policy_during_ = *v;
      }
      return r;
    }
    case StepKind::kFailover:
      return Failover(step, evidence);
    case StepKind::kMetered: {
      // What the job shows, its usage records and the price table in
      // force, all read as the runner (a platform admin).
      const std::string id = job_id(step.job);
      const std::string paths[] = {"/v1/jobs/" + id, "/v1/usage/records?job=" + id, "/v1/prices"};
      PocAnswer answers[3];
      for (std::size_t i = 0; i < 3; ++i) {
        answers[i] = PocGet(admin_, paths[i]);
        evidence["requests"].push_back({{"as", admin_name_},
                                        {"request", "GET " + paths[i]},
                                        {"status", PocStatusText(answers[i].status)}});
        if (!answers[i].ok()) {
          return {
              false, fmt::format("GET {} answers 200", paths[i]),
              fmt::format("{}: {}", PocStatusText(answers[i].status), PocQuote(answers[i].body))};
        }
      }
      auto m = JudgeMetering(answers[0].doc, answers[1].doc, answers[2].doc, step.metered_gpus);
      return {m.ok, fmt::format("job {} ({}): {}", id, step.job, m.expected), m.actual};
    }
    case StepKind::kHttp:
      return HttpStep(step, jobs, evidence);
    case StepKind::kHttpLoad:
      return HttpLoad(step, jobs, evidence);
    case StepKind::kBurst:
      return RunBurst(step, jobs, evidence);
    case StepKind::kExpectBurst:
      return ExpectBurst(step);
    case StepKind::kAudit: {
      auto object = Expand(step.object, jobs);
      if (!object) return {false, step.object, object.error().message};
      const std::string actor = step.actor.empty() ? "" : ActorName(step.actor);
      const std::string path = "/v1/audit" + QueryString({{"action", step.action},
                                                          {"actor", actor},
                                                          {"since", std::to_string(started_ms_)}});
      auto a = PocGet(admin_, path);
      evidence["requests"].push_back(
          {{"as", admin_name_}, {"request", "GET " + path}, {"status", PocStatusText(a.status)}});
      PocStepResult r;
      r.expected =
          fmt::format("an audit record of {}{}{} with outcome ok", step.action,
                      object->empty() ? "" : " on " + *object, actor.empty() ? "" : " by " + actor);
      std::vector<std::int64_t> seqs;
      for (const auto& rec : Array(a.doc, "records")) {
        if (!object->empty() && Text(rec, "object") != *object) continue;
        if (Text(rec, "outcome") != "ok") continue;
        seqs.push_back(Int(rec, "seq").value_or(0));
      }
      for (auto s : seqs) evidence["audit_records"].push_back(s);
      r.ok = a.ok() && !seqs.empty();
      r.actual = !a.ok()        ? fmt::format("{}: {}", a.status, PocQuote(a.body))
                 : seqs.empty() ? "no such record"
                                : fmt::format("record(s) {}", json(seqs).dump());
      return r;
    }
  }
  return {false, "a known step", "unknown step"};
}

json PocRunner::Sample(const std::string& bound, std::uint64_t id, const Case& c,
                       const Result<json>& listed) const {
  json s{{"name", bound}, {"job_id", id}};
  auto job = admin_.Get(fmt::format("/v1/jobs/{}", id));
  if (!job) {
    s["error"] = job.error().message;
    return s;
  }
  s["job_name"] = Text(*job, "name");
  s["tenant"] = Text(*job, "tenant");
  s["queue"] = Text(*job, "queue");
  s["user"] = Text(*job, "submitted_by");
  s["state"] = Text(*job, "state");
  const json* res = Field(*job, "spec.resources");
  s["resources"] = res != nullptr ? *res : json::object();
  s["replicas"] = Int(*job, "spec.replicas").value_or(1);
  auto submitted = Int(*job, "submitted_at_ms");
  auto started = Int(*job, "started_at_ms");
  auto finished = Int(*job, "finished_at_ms");
  s["queueing_ms"] = submitted && started ? json(*started - *submitted) : json();
  s["run_ms"] = started && finished ? json(*finished - *started) : json();
  const json* failure = Field(*job, "failure");
  s["failure"] = failure != nullptr ? json{{"class", Text(*failure, "class")},
                                           {"message", PocQuote(Text(*failure, "message"))}}
                                    : json();
  s["reason"] = PocQuote(Text(*job, "reason.message"));
  s["failures"] = Int(*job, "failures").value_or(0);
  // Error states: what each attempt of each replica ended with, when it
  // was not a clean exit.
  json errors = json::array();
  std::set<std::string> run_ids;
  for (const auto& p : Array(*job, "placement")) {
    run_ids.insert(Text(p, "run_id"));
    std::vector<std::string> what;
    if (auto code = Int(p, "exit_code"); code && *code != 0) {
      what.push_back(fmt::format("exit {}", *code));
    }
    if (const json* sig = Field(p, "signal"); sig != nullptr && !sig->is_null()) {
      what.push_back("signal " + ValueText(*sig));
    }
    for (const char* key : {"stopped_for", "start_error"}) {
      if (auto t = Text(p, key); t != "-" && !t.empty())
        what.push_back(fmt::format("{} {}", key, t));
    }
    if (what.empty()) continue;
    std::string line = fmt::format("run {} on {}:", Text(p, "run_id"), Text(p, "node"));
    for (const auto& w : what) line += " " + w;
    errors.push_back(PocQuote(line));
  }
  s["error_states"] = std::move(errors);
  // GPU utilization and memory: the job's telemetry summary and, from its
  // series, the lowest bucket mean (the metric snapshot kept as evidence).
  const json* util = Field(*job, "utilization");
  if (util != nullptr && util->is_object()) {
    json t{{"samples", Int(*util, "samples").value_or(0)},
           {"mean_util_pct", (*util)["avg_util_pct"]},
           {"max_util_pct", (*util)["max_util_pct"]},
           {"peak_memory_bytes", (*util)["max_memory_used_bytes"]},
           {"memory_total_bytes", (*util)["memory_total_bytes"]},
           {"idle_fraction", (*util)["idle_fraction"]}};
    auto series = admin_.Get(fmt::format("/v1/jobs/{}/telemetry", id));
    if (series) {
      std::optional<double> lowest;
      for (const auto& g : Array(*series, "gpus")) {
        for (const auto& b : Array(g, "buckets")) {
          const json* avg = Field(b, "avg_util_pct");
          if (avg == nullptr || !avg->is_number()) continue;
          lowest = std::min(lowest.value_or(avg->get<double>()), avg->get<double>());
        }
      }
      t["min_util_pct"] = lowest ? json(*lowest) : json();
    }
    s["telemetry"] = std::move(t);
  } else {
    s["telemetry"] = json();
  }
  // Alerts naming one of its runs or the job itself, and its tenant's
  // alerts raised while its case ran (the samples are read at its end): a
  // budget's alert may come before the job, from a budget the case set over
  // what the tenant had already used, or after it, once its run is metered.
  json alerts = json::array();
  if (listed) {
    const std::string job_word = fmt::format("job {}", id);
    for (const auto& a : Array(*listed, "alerts")) {
      const std::string subject = Text(a, "subject");
      const std::string message = Text(a, "message");
      bool ours = run_ids.contains(subject) || message.find(job_word + " ") != std::string::npos ||
                  message.find(job_word + ",") != std::string::npos;
      // A tenant's alert (a budget's: subject tenant/month/percent) raised
      // during the case.
      const auto raised = Int(a, "raised_ms");
      ours = ours || (subject.starts_with(Text(*job, "tenant") + "/") && raised &&
                      *raised >= case_began_ms_);
      for (const auto& r : run_ids) ours = ours || message.find(r) != std::string::npos;
      if (!ours) continue;
      alerts.push_back({{"id", a["id"]},
                        {"kind", Text(a, "kind")},
                        {"severity", Text(a, "severity")},
                        {"message", PocQuote(message)}});
    }
  }
  s["alerts"] = std::move(alerts);
  std::vector<std::string> expected;
  for (const auto& step : c.steps) {
    if (step.job != bound) continue;
    if (step.kind == StepKind::kWait) {
      std::string states;
      for (const auto& st : step.states) states += (states.empty() ? "" : " or ") + st;
      expected.push_back(fmt::format("{} within {}", states, FormatDurationMs(step.within_ms)));
    } else if (step.kind == StepKind::kExpect) {
      std::string e = step.state;
      if (!step.failure_class.empty()) e += " class " + step.failure_class;
      if (!step.reason_code.empty()) e += " reason " + step.reason_code;
      if (step.failures) e += fmt::format(" after {} failure(s)", *step.failures);
      expected.push_back(e);
    } else if (step.kind == StepKind::kCancel) {
      expected.push_back("cancelled on request");
    }
  }
  std::string text;
  for (const auto& e : expected) text += (text.empty() ? "" : "; ") + e;
  s["expected"] = text;
  return s;
}

namespace {

// What the report says of case `c` whatever happens to it: its identity,
// weight and risk, and empty steps, samples and evidence.
json PocCaseHeader(const Case& c) {
  return {
      {"id", c.id},
      {"group", c.group},
      {"title", c.title},
      {"capability", c.capability},
      {"perspective", c.perspective},
      {"weight", c.weight},
      {"risk", RiskName(c.risk)},
      {"if_it_fails", RiskConclusion(c.risk)},
      {"retest", c.retest},
      {"steps", json::array()},
      {"samples", json::array()},
      {"evidence",
       {{"jobs", json::array()}, {"requests", json::array()}, {"audit_records", json::array()}}}};
}

}  // namespace

json PocRunner::RunCase(const Case& c) {
  json out = PocCaseHeader(c);
  const TimeMs began = Now();
  case_began_ms_ = began;
  case_services_.clear();
  auto unmet = Unmet(c);
  if (!unmet.empty()) {
    out["verdict"] = "skipped";
    out["unmet"] = unmet;
    std::string why;
    for (const auto& u : unmet) why += (why.empty() ? "" : "; ") + u;
    out["reason"] = "precondition not met: " + why;
    return out;
  }
  std::map<std::string, std::string> jobs;
  bursts_.clear();
  std::string verdict = "pass";
  std::string reason;
  for (std::size_t i = 0; i < c.steps.size(); ++i) {
    const Step& step = c.steps[i];
    if (Interrupted()) {
      // Stopped between steps: the case is neither passed nor failed.
      verdict = "interrupted";
      reason = fmt::format("interrupted by {} before {}: not judged", SignalName(), step.field);
      break;
    }
    auto r = RunStep(step, jobs, out["evidence"]);
    out["steps"].push_back({{"step", step.field},
                            {"kind", StepKindName(step.kind)},
                            {"ok", r.ok},
                            {"expected", r.expected},
                            {"actual", r.actual}});
    // A step the signal cut short (or one after which steps remain) judges
    // nothing: the case is interrupted, not failed.
    if (Interrupted() && (!r.ok || i + 1 < c.steps.size())) {
      verdict = "interrupted";
      reason = fmt::format("interrupted by {} during {}: not judged", SignalName(), step.field);
      break;
    }
    if (!r.ok) {
      verdict = "fail";
      reason = fmt::format("{}: expected {}; got {}", step.field, r.expected, r.actual);
      break;
    }
  }
  const auto listed_alerts = admin_.Get("/v1/alerts?all=true");
  for (const auto& [bound, id] : jobs) {
    if (bound.starts_with("ref.") || bound.starts_with("runs.")) continue;
    out["samples"].push_back(Sample(bound, std::stoull(id), c, listed_alerts));
  }
  EndCaseServices(c, listed_alerts, out);
  // A burst is one sample of aggregate figures; its job ids stay in the
  // evidence (report.json only).
  for (const auto& [name, burst] : bursts_) {
    out["samples"].push_back(BurstSample(name, burst.parts, burst.jobs, burst.expected, opt_.scale,
                                         burst.settled, Now(), tenants_));
  }
  // A case leaves nothing running for the next one (a failed case may stop
  // before its own cancel steps): its live jobs are cancelled now.
  std::vector<std::uint64_t> mine;
  for (const auto& id : out["evidence"]["jobs"]) mine.push_back(id.get<std::uint64_t>());
  // A burst's jobs last seen ended need no look: hundreds of them would
  // spend the admin's --rate-limit on GETs.
  for (const auto& [name, burst] : bursts_) {
    for (const auto& j : burst.jobs) {
      if (PocTerminal(j.state)) continue;
      mine.push_back(j.id);
      jobs_.push_back(j.id);
    }
  }
  json ended{
      {"jobs_cancelled", json::array()}, {"jobs_already_ended", 0}, {"problems", json::array()}};
  CancelLive(mine, ended);
  if (!ended["jobs_cancelled"].empty() || !ended["problems"].empty()) {
    out["cleanup"]["jobs_cancelled"] = ended["jobs_cancelled"];
    out["cleanup"]["problems"] = ended["problems"];
  }
  out["verdict"] = verdict;
  out["reason"] = reason;
  out["duration_ms"] = Now() - began;
  return out;
}

json PocRunner::NotRun(const Case& c) const {
  json out = PocCaseHeader(c);
  out["verdict"] = "not_run";
  out["reason"] = fmt::format("not run: the run was interrupted by {} before it", SignalName());
  out["duration_ms"] = 0;
  return out;
}

void PocRunner::CancelLive(const std::vector<std::uint64_t>& ids, json& c) {
  CancelJobs(admin_, ids, {opt_.clock, opt_.sleep, opt_.poll_ms}, c);
}

json PocRunner::Cleanup() {
  RunLeftovers made;
  made.run = opt_.run;
  made.jobs = jobs_;
  made.services = services_;
  made.tokens = tokens_;
  for (const auto& [name, real] : tenants_) made.tenants.push_back(real);
  for (const auto& [name, real] : identities_) made.identities.push_back(real);
  made.policy_during = policy_during_;
  made.policy_before = policy_before_;
  return CleanUpRun(admin_, made, {opt_.clock, opt_.sleep, opt_.poll_ms});
}

Result<json> PocRunner::Run() {
  started_ms_ = Now();
  BERTH_RETURN_IF_ERROR(Preflight());
  json report;
  report["environment"] = Fingerprint();
  auto setup = Setup();
  if (!setup) {
    auto cleanup = Cleanup();
    Error e = setup.error();
    if (!cleanup["problems"].empty()) {
      e.message += fmt::format(" (and cleaning up: {})", cleanup["problems"].dump());
    }
    return std::unexpected(e);
  }
  report["environment"]["policy_version_during"] = policy_during_;
  json cases = json::array();
  std::string stopped_in;  // the case the signal interrupted
  std::int64_t not_run = 0;
  for (const auto& c : suite_.cases) {
    if (!opt_.only_cases.empty() && !opt_.only_cases.contains(c.id)) continue;
    if (Interrupted()) {
      cases.push_back(NotRun(c));
      ++not_run;
      continue;
    }
    json result = RunCase(c);
    if (Text(result, "verdict") == "interrupted") stopped_in = c.id;
    if (opt_.progress) {
      opt_.progress(fmt::format("{:<8} {}/{}{}", Text(result, "verdict"), c.group, c.id,
                                result["reason"].get<std::string>().empty()
                                    ? ""
                                    : ": " + result["reason"].get<std::string>()));
    }
    cases.push_back(std::move(result));
  }
  report["cases"] = std::move(cases);
  if (Interrupted()) {
    report["interrupted"] = {{"signal", SignalName()},
                             {"case", stopped_in.empty() ? json(nullptr) : json(stopped_in)},
                             {"not_run", not_run}};
  }
  // Cleanup runs whole even after a signal: it is what the signal asks for.
  report["cleanup"] = Cleanup();
  report["run"] = {{"id", opt_.run},       {"admin", admin_name_}, {"started_ms", started_ms_},
                   {"finished_ms", Now()}, {"tenants", tenants_},  {"identities", identities_}};
  report["run"]["scale"] = opt_.scale;
  report["groups"] = json::array();
  for (const auto& g : suite_.groups) {
    report["groups"].push_back({{"id", g.id}, {"title", g.title}});
  }
  return report;
}

}  // namespace berth::cli::poc::runner

namespace berth::cli::poc {

using nlohmann::json;

std::optional<std::string> PickBoundValue(const json& answer, const std::string& from,
                                          const std::vector<BindWhere>& where,
                                          const std::string& field, std::string& why) {
  const json* list = Field(answer, from);
  if (list == nullptr || !list->is_array()) {
    why = fmt::format("the answer has no list {}", from);
    return std::nullopt;
  }
  for (const auto& item : *list) {
    const bool match = std::all_of(where.begin(), where.end(), [&item](const BindWhere& w) {
      const json* f = Field(item, w.field);
      if (f == nullptr) return false;
      const std::string text = ValueText(*f);
      return w.prefix ? text.starts_with(w.value) : text == w.value;
    });
    if (!match) continue;
    const json* got = Field(item, field);
    if (got == nullptr) {
      why = fmt::format("the matching item has no {}", field);
      return std::nullopt;
    }
    return ValueText(*got);
  }
  why = fmt::format("no item of {} matched, of {}", from, list->size());
  return std::nullopt;
}

std::string RunPrefix(TimeMs now_ms) {
  static constexpr std::string_view kDigits = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string out;
  auto v = static_cast<std::uint64_t>(std::max<TimeMs>(now_ms, 0));
  do {
    out.insert(out.begin(), kDigits[v % 36]);
    v /= 36;
  } while (v > 0);
  return "poc-" + out;
}

Result<json> RunSuite(ApiClient& admin, const Suite& suite, const RunOptions& options) {
  runner::PocRunner runner(admin, suite, options);
  return runner.Run();
}

}  // namespace berth::cli::poc