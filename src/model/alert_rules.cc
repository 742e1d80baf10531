#include "model/alert_rules.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "common/units.h"
#include "model/yaml_object.h"

namespace berth::model {
namespace {

constexpr std::string_view kAlertRuleKinds =
    "gpu_health, node_not_ready, queue_wait, budget, idle_allocation, service_slo";

constexpr std::string_view kRootFields[] = {"sinks", "rules"};
constexpr std::string_view kSinkFields[] = {
    "name", "type", "url", "secret_file", "send_secret_over_http", "header", "timeout"};
constexpr std::string_view kRuleFields[] = {"name", "kind",  "severity",  "enabled", "sinks",
                                            "for",  "queue", "threshold", "window",  "service"};

Result<std::string> Text(const YAML::Node& n, const std::string& field, std::string_view hint) {
  if (!n.IsScalar() || n.Scalar().empty()) {
    return InvalidField(field, fmt::format("must be {}", hint));
  }
  return n.Scalar();
}

Result<std::int64_t> Duration(const YAML::Node& n, const std::string& field,
                              std::string_view example) {
  if (!n.IsScalar()) {
    return InvalidField(field, fmt::format("must be a duration, e.g. {}", example));
  }
  auto ms = ParseDurationMs(n.Scalar());
  if (!ms || *ms <= 0) {
    return InvalidField(
        field, fmt::format("'{}' is not a positive duration; write e.g. {}", n.Scalar(), example));
  }
  return *ms;
}

Result<AlertSink> ParseSink(const YAML::Node& s, const std::string& path) {
  BERTH_RETURN_IF_ERROR(
      YamlObject::Read(s, path, kSinkFields, "must be a map {name, type: webhook, url, ...}"));
  AlertSink sink;
  if (!s["name"]) return InvalidField(path + ".name", "is required: the name rules refer to");
  auto name = Text(s["name"], path + ".name", "a name, e.g. ops-pager");
  if (!name) return std::unexpected(name.error());
  sink.name = *name;
  if (s["type"]) {
    if (!s["type"].IsScalar() || s["type"].Scalar() != "webhook") {
      return InvalidField(path + ".type", "must be webhook (the only sink type)");
    }
  }
  if (!s["url"]) {
    return InvalidField(path + ".url", "is required: where to POST, e.g. https://hooks.example/x");
  }
  auto url = Text(s["url"], path + ".url", "an http:// or https:// URL");
  if (!url) return std::unexpected(url.error());
  const bool http = url->starts_with("http://") && url->size() > 7;
  const bool https = url->starts_with("https://") && url->size() > 8;
  if (!http && !https) {
    return InvalidField(path + ".url", fmt::format("'{}' is not an http:// or https:// URL", *url));
  }
  sink.url = *url;
  if (s["secret_file"]) {
    auto f = Text(s["secret_file"], path + ".secret_file",
                  "the name of a file in berthd's webhook secret directory, e.g. pager.token");
    if (!f) return std::unexpected(f.error());
    // Where it may be (berthd's --webhook-secret-dir) is checked when the
    // rules are applied (meter/webhook_secret.h); a `..` never is.
    for (const auto& part : std::filesystem::path(*f)) {
      if (part == "..") {
        return InvalidField(path + ".secret_file",
                            fmt::format("'{}' has a '..' in it; name a file in berthd's webhook "
                                        "secret directory (berthd --webhook-secret-dir)",
                                        *f));
      }
    }
    sink.secret_file = *f;
  }
  if (s["send_secret_over_http"]) {
    const auto& b = s["send_secret_over_http"];
    if (!b.IsScalar() || (b.Scalar() != "true" && b.Scalar() != "false")) {
      return InvalidField(path + ".send_secret_over_http", "must be true or false");
    }
    sink.send_secret_over_http = b.Scalar() == "true";
  }
  if (s["header"]) {
    auto h = Text(s["header"], path + ".header", "an HTTP header name, e.g. X-Token");
    if (!h) return std::unexpected(h.error());
    if (h->find_first_of(": \r\n") != std::string::npos) {
      return InvalidField(path + ".header", "must be a header name without ':' or spaces");
    }
    sink.header = *h;
  }
  if (s["timeout"]) {
    auto t = Duration(s["timeout"], path + ".timeout", "5s");
    if (!t) return std::unexpected(t.error());
    if (*t > 60'000) return InvalidField(path + ".timeout", "must be at most 60s");
    sink.timeout_ms = *t;
  }
  return sink;
}

Result<AlertRule> ParseRule(const YAML::Node& r, const std::string& path) {
  BERTH_RETURN_IF_ERROR(
      YamlObject::Read(r, path, kRuleFields, "must be a map {name, kind, severity, ...}"));
  AlertRule rule;
  if (!r["name"]) return InvalidField(path + ".name", "is required: a name for the rule");
  auto name = Text(r["name"], path + ".name", "a name, e.g. nodes-down");
  if (!name) return std::unexpected(name.error());
  rule.name = *name;
  if (!r["kind"]) {
    return InvalidField(path + ".kind", fmt::format("is required: one of {}", kAlertRuleKinds));
  }
  auto kind = r["kind"].IsScalar() ? ParseAlertRuleKind(r["kind"].Scalar()) : std::nullopt;
  if (!kind) return InvalidField(path + ".kind", fmt::format("must be one of {}", kAlertRuleKinds));
  rule.kind = *kind;
  if (r["severity"]) {
    const auto& s = r["severity"];
    auto severity = s.IsScalar() ? ParseAlertSeverity(s.Scalar()) : std::nullopt;
    if (!severity || *severity == AlertSeverity::kUnknown) {
      return InvalidField(path + ".severity", "must be critical, warning or info");
    }
    rule.severity = *severity;
  }
  if (r["enabled"]) {
    const auto& e = r["enabled"];
    if (!e.IsScalar() || (e.Scalar() != "true" && e.Scalar() != "false")) {
      return InvalidField(path + ".enabled", "must be true or false");
    }
    rule.enabled = e.Scalar() == "true";
  }
  if (r["sinks"]) {
    const auto& s = r["sinks"];
    if (!s.IsSequence()) return InvalidField(path + ".sinks", "must be a list of sink names");
    for (std::size_t i = 0; i < s.size(); ++i) {
      auto n = Text(s[i], fmt::format("{}.sinks[{}]", path, i), "a sink name");
      if (!n) return std::unexpected(n.error());
      rule.sinks.push_back(*n);
    }
  }
  auto forbid = [&](std::string_view key) -> Status {
    if (r[std::string(key)]) {
      return InvalidField(fmt::format("{}.{}", path, key),
                          fmt::format("does not apply to kind {}", AlertRuleKindName(rule.kind)));
    }
    return Ok();
  };
  switch (rule.kind) {
    case AlertRuleKind::kGpuHealth:
    case AlertRuleKind::kBudget:
      for (auto k : {"for", "queue", "threshold", "window", "service"}) {
        BERTH_RETURN_IF_ERROR(forbid(k));
      }
      break;
    case AlertRuleKind::kServiceSlo: {
      for (auto k : {"for", "queue"}) BERTH_RETURN_IF_ERROR(forbid(k));
      if (r["service"]) {
        auto s = Text(r["service"], path + ".service", "a service (tenant/name) or \"*\"");
        if (!s) return std::unexpected(s.error());
        if (*s != "*" &&
            (s->find('/') == std::string::npos || s->front() == '/' || s->back() == '/')) {
          return InvalidField(path + ".service",
                              fmt::format("'{}' is not a service; write tenant/name or \"*\"", *s));
        }
        rule.service = *s;
      }
      rule.burn_milli = 10'000;
      if (r["threshold"]) {
        const auto& t = r["threshold"];
        double v = 0;
        bool number = t.IsScalar();
        if (number) {
          try {
            v = t.as<double>();
          } catch (const YAML::Exception&) {
            number = false;
          }
        }
        if (!number || !(v >= 1.0) || v > 1'000'000.0) {
          return InvalidField(path + ".threshold",
                              "must be an error-budget burn rate from 1 to 1000000, e.g. 10 (the "
                              "budget spent 10 times as fast as the SLO allows)");
        }
        rule.burn_milli = static_cast<std::int64_t>(v * 1000.0 + 0.5);
      }
      rule.window_ms = 300'000;
      if (r["window"]) {
        auto d = Duration(r["window"], path + ".window", "5m");
        if (!d) return std::unexpected(d.error());
        if (*d < 10'000 || *d > kMaxSloAlertWindowMs) {
          return InvalidField(path + ".window",
                              "must be from 10s to 1h (berthd keeps an hour of each service's "
                              "SLO windows), e.g. 5m");
        }
        rule.window_ms = *d;
      }
      break;
    }
    case AlertRuleKind::kNodeNotReady: {
      for (auto k : {"queue", "threshold", "window", "service"}) BERTH_RETURN_IF_ERROR(forbid(k));
      rule.for_ms = 120'000;
      if (r["for"]) {
        auto d = Duration(r["for"], path + ".for", "2m");
        if (!d) return std::unexpected(d.error());
        rule.for_ms = *d;
      }
      break;
    }
    case AlertRuleKind::kQueueWait: {
      for (auto k : {"for", "window", "service"}) BERTH_RETURN_IF_ERROR(forbid(k));
      if (r["queue"]) {
        auto q = Text(r["queue"], path + ".queue", "a queue path (tenant/queue) or \"*\"");
        if (!q) return std::unexpected(q.error());
        if (*q != "*" && q->find('/') == std::string::npos) {
          return InvalidField(
              path + ".queue",
              fmt::format("'{}' is not a queue path; write tenant/queue or \"*\"", *q));
        }
        rule.queue = *q;
      }
      if (!r["threshold"]) {
        return InvalidField(path + ".threshold",
                            "is required: the longest acceptable wait, e.g. 30m");
      }
      auto d = Duration(r["threshold"], path + ".threshold", "30m");
      if (!d) return std::unexpected(d.error());
      rule.threshold_ms = *d;
      break;
    }
    case AlertRuleKind::kIdleAllocation: {
      for (auto k : {"for", "queue", "service"}) BERTH_RETURN_IF_ERROR(forbid(k));
      rule.threshold_percent = 5;
      if (r["threshold"]) {
        const auto& t = r["threshold"];
        std::int64_t v = -1;
        if (t.IsScalar()) {
          try {
            v = t.as<std::int64_t>();
          } catch (const YAML::Exception&) {
            v = -1;
          }
        }
        if (v < 1 || v > 100) {
          return InvalidField(path + ".threshold",
                              "must be a utilization percentage from 1 to 100, e.g. 5");
        }
        rule.threshold_percent = v;
      }
      rule.window_ms = 30 * 60'000;
      if (r["window"]) {
        auto d = Duration(r["window"], path + ".window", "30m");
        if (!d) return std::unexpected(d.error());
        rule.window_ms = *d;
      }
      break;
    }
  }
  return rule;
}

Result<AlertRules> RulesFrom(const YAML::Node& root) {
  BERTH_RETURN_IF_ERROR(YamlObject::Read(
      root, "", kRootFields, "alert rules are a map with `rules` and optional `sinks`"));
  AlertRules out;
  if (auto sinks = root["sinks"]) {
    if (!sinks.IsSequence()) return InvalidField("sinks", "must be a list of webhooks");
    std::set<std::string> names;
    for (std::size_t i = 0; i < sinks.size(); ++i) {
      const auto path = fmt::format("sinks[{}]", i);
      auto s = ParseSink(sinks[i], path);
      if (!s) return std::unexpected(s.error());
      if (!names.insert(s->name).second) {
        return InvalidField(path + ".name", fmt::format("sink {} is defined twice", s->name));
      }
      out.sinks.push_back(std::move(*s));
    }
  }
  auto rules = root["rules"];
  if (!rules) return InvalidField("rules", "is required: a list of rules");
  if (!rules.IsSequence()) return InvalidField("rules", "must be a list of rules");
  std::set<std::string> names;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const auto path = fmt::format("rules[{}]", i);
    auto r = ParseRule(rules[i], path);
    if (!r) return std::unexpected(r.error());
    if (!names.insert(r->name).second) {
      return InvalidField(path + ".name", fmt::format("rule {} is defined twice", r->name));
    }
    for (std::size_t k = 0; k < r->sinks.size(); ++k) {
      if (out.FindSink(r->sinks[k]) == nullptr) {
        return InvalidField(fmt::format("{}.sinks[{}]", path, k),
                            fmt::format("no sink named {}; define it under `sinks`", r->sinks[k]));
      }
    }
    out.rules.push_back(std::move(*r));
  }
  return out;
}

}  // namespace

std::string_view AlertRuleKindName(AlertRuleKind kind) {
  switch (kind) {
    case AlertRuleKind::kGpuHealth:
      return "gpu_health";
    case AlertRuleKind::kNodeNotReady:
      return "node_not_ready";
    case AlertRuleKind::kQueueWait:
      return "queue_wait";
    case AlertRuleKind::kBudget:
      return "budget";
    case AlertRuleKind::kIdleAllocation:
      return "idle_allocation";
    case AlertRuleKind::kServiceSlo:
      return "service_slo";
  }
  return "gpu_health";
}

std::optional<AlertRuleKind> ParseAlertRuleKind(std::string_view name) {
  for (auto k :
       {AlertRuleKind::kGpuHealth, AlertRuleKind::kNodeNotReady, AlertRuleKind::kQueueWait,
        AlertRuleKind::kBudget, AlertRuleKind::kIdleAllocation, AlertRuleKind::kServiceSlo}) {
    if (AlertRuleKindName(k) == name) return k;
  }
  return std::nullopt;
}

AlertKind AlertKindOfRule(AlertRuleKind kind) {
  switch (kind) {
    case AlertRuleKind::kGpuHealth:
      return AlertKind::kGpuHardware;
    case AlertRuleKind::kNodeNotReady:
      return AlertKind::kNodeNotReady;
    case AlertRuleKind::kQueueWait:
      return AlertKind::kQueueWait;
    case AlertRuleKind::kBudget:
      return AlertKind::kBudget;
    case AlertRuleKind::kIdleAllocation:
      return AlertKind::kIdleAllocation;
    case AlertRuleKind::kServiceSlo:
      return AlertKind::kServiceSlo;
  }
  return AlertKind::kUnknown;
}

const AlertSink* AlertRules::FindSink(std::string_view name) const {
  for (const auto& s : sinks) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const AlertRule* AlertRules::FirstEnabled(AlertRuleKind kind) const {
  for (const auto& r : rules) {
    if (r.kind == kind && r.enabled) return &r;
  }
  return nullptr;
}

std::string DefaultAlertRulesYaml() {
  return R"(# The alert rules berthd runs until `berth alert rules apply` sets others.
rules:
  - name: gpu-health
    kind: gpu_health
    severity: critical
  - name: node-not-ready
    kind: node_not_ready
    severity: warning
    for: 2m
  - name: budget
    kind: budget
    severity: warning
  - name: queue-wait
    kind: queue_wait
    severity: warning
    enabled: false
    queue: "*"
    threshold: 30m
  - name: idle-allocation
    kind: idle_allocation
    severity: info
    enabled: false
    threshold: 5
    window: 30m
  - name: service-slo
    kind: service_slo
    severity: warning
    service: "*"
    threshold: 10
    window: 5m
)";
}

AlertRules DefaultAlertRules() {
  auto rules = ParseAlertRules(DefaultAlertRulesYaml());
  return rules ? *rules : AlertRules{};
}

Status CheckNewAlertRules(const AlertRules& rules) {
  for (std::size_t i = 0; i < rules.sinks.size(); ++i) {
    const AlertSink& s = rules.sinks[i];
    const bool plain = s.url.starts_with("http://");
    if (!s.secret_file.empty() && plain && !s.send_secret_over_http) {
      return InvalidField(
          fmt::format("sinks[{}].url", i),
          fmt::format("{} is plain http, and the sink sends the secret in {}: anyone on the way "
                      "could read it; use an https:// URL, or set send_secret_over_http: true "
                      "on the sink to send it in the clear anyway",
                      s.url, s.secret_file));
    }
    if (s.send_secret_over_http && (!plain || s.secret_file.empty())) {
      return InvalidField(fmt::format("sinks[{}].send_secret_over_http", i),
                          plain ? "has no effect: the sink has no secret_file; remove it"
                                : "has no effect: the sink's URL is https, so its secret is "
                                  "never sent in the clear; remove it");
    }
  }
  for (std::size_t i = 0; i < rules.rules.size(); ++i) {
    const AlertRule& r = rules.rules[i];
    if (r.kind == AlertRuleKind::kIdleAllocation && r.window_ms < 60'000) {
      return InvalidField(fmt::format("rules[{}].window", i),
                          "must be at least 1m: GPU telemetry is kept per minute, so a shorter "
                          "window cannot be told from a partly sampled minute; e.g. 30m");
    }
  }
  return Ok();
}

Result<AlertRules> ParseAlertRules(std::string_view yaml) {
  AlertRules rules;
  BERTH_RETURN_IF_ERROR(ReadDocument(yaml, 0, "alert rules", [&](const YAML::Node& root) -> Status {
    auto r = RulesFrom(root);
    if (!r) return std::unexpected(r.error());
    rules = std::move(*r);
    return Ok();
  }));
  return rules;
}

nlohmann::json AlertRulesJson(const AlertRules& rules) {
  nlohmann::json sinks = nlohmann::json::array();
  for (const auto& s : rules.sinks) {
    sinks.push_back({{"name", s.name},
                     {"type", "webhook"},
                     {"url", s.url},
                     {"secret_file", s.secret_file},
                     {"send_secret_over_http", s.send_secret_over_http},
                     {"header", s.header},
                     {"timeout_ms", s.timeout_ms}});
  }
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : rules.rules) {
    nlohmann::json j{{"name", r.name},
                     {"kind", AlertRuleKindName(r.kind)},
                     {"severity", AlertSeverityName(r.severity)},
                     {"enabled", r.enabled},
                     {"sinks", r.sinks}};
    switch (r.kind) {
      case AlertRuleKind::kNodeNotReady:
        j["for_ms"] = r.for_ms;
        break;
      case AlertRuleKind::kQueueWait:
        j["queue"] = r.queue;
        j["threshold_ms"] = r.threshold_ms;
        break;
      case AlertRuleKind::kIdleAllocation:
        j["threshold_percent"] = r.threshold_percent;
        j["window_ms"] = r.window_ms;
        break;
      case AlertRuleKind::kServiceSlo:
        j["service"] = r.service;
        j["threshold"] = static_cast<double>(r.burn_milli) / 1000.0;
        j["window_ms"] = r.window_ms;
        break;
      default:
        break;
    }
    list.push_back(std::move(j));
  }
  return {{"sinks", sinks}, {"rules", list}};
}

}  // namespace berth::model
