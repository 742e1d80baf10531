#include "meter/alerting.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/units.h"
#include "meter/metrics.h"
#include "model/reason.h"

namespace berth::server {

nlohmann::json AlertJson(const store::Alert& a) {
  using nlohmann::json;
  return {{"id", a.id},
          {"kind", model::AlertKindName(a.kind)},
          {"severity", model::AlertSeverityName(a.severity)},
          {"node", a.node},
          {"gpu", a.gpu ? json(*a.gpu) : json(nullptr)},
          {"message", a.message},
          {"raised_ms", a.raised_ms},
          {"resolved_ms", a.resolved_ms ? json(*a.resolved_ms) : json(nullptr)},
          {"resolved_by", a.resolved_by},
          {"rule", a.rule},
          {"subject", a.subject}};
}
namespace {

using nlohmann::json;

// The kinds of alert the engine raises, and so resolves.
bool EngineKind(model::AlertKind kind) {
  return kind == model::AlertKind::kNodeNotReady || kind == model::AlertKind::kQueueWait ||
         kind == model::AlertKind::kIdleAllocation || kind == model::AlertKind::kServiceSlo;
}

// A burn rate in words: "14.2x".
std::string BurnText(std::int64_t milli) {
  return fmt::format("{:.1f}x", static_cast<double>(milli) / 1000.0);
}

// "99.9%" from parts per million.
std::string PercentText(std::uint32_t ppm) {
  return fmt::format("{:g}%", static_cast<double>(ppm) / 10'000.0);
}

}  // namespace

// --- AlertRouter ---

Status AlertRouter::Load() {
  auto active = store_.ActiveAlertRules();
  if (!active) return std::unexpected(active.error());
  std::lock_guard lock(mu_);
  if (!*active) {
    rules_ = model::DefaultAlertRules();
    version_ = 0;
    return Ok();
  }
  auto parsed = model::ParseAlertRules((*active)->yaml);
  if (!parsed) return std::unexpected(parsed.error());
  rules_ = std::move(*parsed);
  version_ = (*active)->version;
  return Ok();
}

Result<std::int64_t> AlertRouter::Apply(const std::string& yaml, const std::string& by,
                                        const std::string& comment, TimeMs now,
                                        std::optional<std::int64_t> base,
                                        const store::AuditOf<std::int64_t>& audit) {
  auto parsed = model::ParseAlertRules(yaml);
  if (!parsed) return std::unexpected(parsed.error());
  BERTH_RETURN_IF_ERROR(model::CheckNewAlertRules(*parsed));
  for (std::size_t i = 0; i < parsed->sinks.size(); ++i) {
    const auto& sink = parsed->sinks[i];
    if (sink.secret_file.empty()) continue;
    auto secret = secrets_.Read(sink.secret_file, fmt::format("sinks[{}].secret_file", i));
    if (!secret) return std::unexpected(secret.error());
  }
  auto version = store_.ApplyAlertRules(yaml, by, comment, now, base, audit);
  if (!version) return std::unexpected(version.error());
  std::lock_guard lock(mu_);
  rules_ = std::move(*parsed);
  version_ = *version;
  return *version;
}

model::AlertRules AlertRouter::Rules() const {
  std::lock_guard lock(mu_);
  return rules_;
}

std::int64_t AlertRouter::version() const {
  std::lock_guard lock(mu_);
  return version_;
}

Result<std::optional<std::int64_t>> AlertRouter::Raise(
    model::AlertRuleKind kind, store::Alert alert, store::AlertDedupe dedupe,
    std::optional<model::AlertSeverity> severity) {
  std::optional<model::AlertRule> rule;
  {
    std::lock_guard lock(mu_);
    if (const auto* r = rules_.FirstEnabled(kind)) rule = *r;
  }
  if (!rule) return std::optional<std::int64_t>();
  return RaiseFor(*rule, std::move(alert), dedupe, severity);
}

Result<std::optional<std::int64_t>> AlertRouter::RaiseFor(
    const model::AlertRule& rule, store::Alert alert, store::AlertDedupe dedupe,
    std::optional<model::AlertSeverity> severity) {
  alert.rule = rule.name;
  alert.kind = model::AlertKindOfRule(rule.kind);
  alert.severity = severity.value_or(rule.severity);
  alert.sinks = rule.sinks;
  auto id = store_.RaiseAlertOnce(alert, dedupe);
  if (!id) return std::unexpected(id.error());
  if (*id) {
    store::Publish(store_.change_feed(), store::Topic::kAlert, std::to_string(**id), {}, {},
                   "open");
    spdlog::warn("alert {} raised ({}, {}): {}", **id, alert.rule,
                 model::AlertSeverityName(alert.severity), alert.message);
    if (metrics_ != nullptr) metrics_->CountAlertRaised(alert.kind);
  }
  return *id;
}

std::optional<SloBurn> BurnOf(const ServiceSloFigures& f) {
  if (f.requests < model::kSloAlertMinRequests) return std::nullopt;
  const double budget = 1.0 - static_cast<double>(f.availability_ppm) / 1e6;
  // A 100% target has no budget: any failure burns it "infinitely" fast.
  constexpr double kNoBudget = 1e15;
  auto rate = [&](double bad_share) {
    if (bad_share <= 0) return std::int64_t{0};
    const double burn = budget > 0 ? bad_share / budget : kNoBudget;
    return static_cast<std::int64_t>(std::min(burn, kNoBudget) * 1000.0 + 0.5);
  };
  SloBurn b;
  b.availability_milli = rate(static_cast<double>(f.errors) / static_cast<double>(f.requests));
  if (f.latency_p95_ms > 0 && f.windows > 0) {
    b.latency_milli = rate(static_cast<double>(f.windows_missed) / static_cast<double>(f.windows));
  }
  return b;
}

// --- AlertEngine ---

AlertEngine::~AlertEngine() {
  Stop();
}

Status AlertEngine::Evaluate(TimeMs now) {
  const model::AlertRules rules = router_.Rules();
  auto open = store_.ListAlerts(true);
  if (!open) return std::unexpected(open.error());
  // rule name -> subject -> open alert id
  std::map<std::string, std::map<std::string, std::int64_t>> open_by_rule;
  for (const auto& a : *open) {
    if (!a.rule.empty()) open_by_rule[a.rule][a.subject] = a.id;
  }
  std::optional<std::vector<store::NodeRecord>> nodes;
  std::optional<std::vector<store::JobRecord>> pending;
  std::set<std::string> in_force;

  for (const auto& rule : rules.rules) {
    if (!rule.enabled) continue;
    if (rule.kind == model::AlertRuleKind::kGpuHealth ||
        rule.kind == model::AlertRuleKind::kBudget) {
      continue;
    }
    in_force.insert(rule.name);
    std::map<std::string, store::Alert> firing;  // subject -> alert to raise
    switch (rule.kind) {
      case model::AlertRuleKind::kNodeNotReady: {
        if (!nodes) {
          auto n = store_.ListNodes();
          if (!n) return std::unexpected(n.error());
          nodes = std::move(*n);
        }
        for (const auto& n : *nodes) {
          if (n.state != model::NodeState::kNotReady) continue;
          const TimeMs down = now - n.state_changed_ms;
          if (down < rule.for_ms) continue;
          store::Alert a;
          a.node = n.info.name;
          a.subject = n.info.name;
          a.raised_ms = now;
          a.message = fmt::format(
              "node {} has been NotReady for {} (since {}): its agent stopped heartbeating; it "
              "gets no new work and its runs are declared lost after the node-lost grace",
              n.info.name, FormatDurationMs(down), FormatTimeMs(n.state_changed_ms));
          firing.emplace(a.subject, std::move(a));
        }
        break;
      }
      case model::AlertRuleKind::kQueueWait: {
        if (!pending) {
          auto p = store_.PendingJobs();
          if (!p) return std::unexpected(p.error());
          pending = std::move(*p);
        }
        std::map<std::string, const store::JobRecord*> oldest;  // queue path -> job
        for (const auto& j : *pending) {
          const std::string path = fmt::format("{}/{}", j.spec.tenant, j.spec.queue);
          if (rule.queue != "*" && rule.queue != path) continue;
          auto [it, added] = oldest.emplace(path, &j);
          if (!added &&
              (j.submitted_at_ms < it->second->submitted_at_ms ||
               (j.submitted_at_ms == it->second->submitted_at_ms && j.id < it->second->id))) {
            it->second = &j;
          }
        }
        for (const auto& [path, job] : oldest) {
          const TimeMs wait = now - job->submitted_at_ms;
          if (wait < rule.threshold_ms) continue;
          store::Alert a;
          a.subject = path;
          a.raised_ms = now;
          a.message =
              fmt::format("queue {}: job {} has waited {} (threshold {}), reason {}", path, job->id,
                          FormatDurationMs(wait), FormatDurationMs(rule.threshold_ms),
                          model::ReasonCodeName(job->reason.code));
          firing.emplace(a.subject, std::move(a));
        }
        break;
      }
      case model::AlertRuleKind::kIdleAllocation: {
        if (!idle_) break;
        auto idle = idle_(now, rule);
        if (!idle) {
          // Without an answer nothing is raised or resolved this pass.
          spdlog::error("alerts: rule {}: could not read idle allocations: {}", rule.name,
                        idle.error().message);
          in_force.erase(rule.name);
          continue;
        }
        for (const auto& i : *idle) {
          if (now - i.idle_since_ms < rule.window_ms) continue;
          store::Alert a;
          a.node = i.node;
          a.subject = i.run_id;
          a.raised_ms = now;
          a.message = fmt::format(
              "job {} (tenant {}) run {} on {} GPUs [{}] has used under {}% of its GPUs for {} "
              "(since {})",
              i.job_id, i.tenant, i.run_id, i.node, fmt::join(i.gpus, ","), rule.threshold_percent,
              FormatDurationMs(now - i.idle_since_ms), FormatTimeMs(i.idle_since_ms));
          firing.emplace(a.subject, std::move(a));
        }
        break;
      }
      case model::AlertRuleKind::kServiceSlo: {
        if (!slo_) break;
        auto figures = slo_(now, rule.window_ms);
        if (!figures) {
          spdlog::error("alerts: rule {}: could not read the services' SLO figures: {}", rule.name,
                        figures.error().message);
          in_force.erase(rule.name);
          continue;
        }
        for (const auto& f : *figures) {
          const std::string subject = f.tenant + "/" + f.service;
          if (rule.service != "*" && rule.service != subject) continue;
          const auto burn = BurnOf(f);
          if (!burn) continue;
          std::vector<std::string> why;
          if (burn->availability_milli >= rule.burn_milli) {
            why.push_back(fmt::format("{} of {} requests answered 5xx against availability {}",
                                      f.errors, f.requests, PercentText(f.availability_ppm)));
          }
          if (f.latency_p95_ms > 0 && burn->latency_milli >= rule.burn_milli) {
            why.push_back(fmt::format("p95 above {} ms in {} of {} windows against {}",
                                      f.latency_p95_ms, f.windows_missed, f.windows,
                                      PercentText(f.availability_ppm)));
          }
          if (why.empty()) continue;
          store::Alert a;
          a.subject = subject;
          a.raised_ms = now;
          a.message = fmt::format(
              "service {} burns its error budget {} (threshold {}) over the last {}: {}", subject,
              BurnText(std::max(burn->availability_milli, burn->latency_milli)),
              BurnText(rule.burn_milli), FormatDurationMs(rule.window_ms), fmt::join(why, "; "));
          firing.emplace(a.subject, std::move(a));
        }
        break;
      }
      default:
        break;
    }
    auto& opened = open_by_rule[rule.name];
    for (auto& [subject, alert] : firing) {
      if (opened.contains(subject)) continue;
      auto id = router_.RaiseFor(rule, std::move(alert), store::AlertDedupe::kOpen);
      if (!id) return std::unexpected(id.error());
    }
    for (const auto& [subject, id] : opened) {
      if (firing.contains(subject)) continue;
      auto done = store_.ResolveAlert(id, "berth", now);
      if (!done) return std::unexpected(done.error());
      if (*done) {
        store::Publish(store_.change_feed(), store::Topic::kAlert, std::to_string(id), {}, {},
                       "resolved");
      }
    }
  }
  // Alerts of rules no longer in force (removed or disabled) are resolved.
  for (const auto& a : *open) {
    if (a.rule.empty() || !EngineKind(a.kind) || in_force.contains(a.rule)) continue;
    bool known_but_failing = false;
    for (const auto& r : rules.rules) {
      if (r.name == a.rule && r.enabled &&
          (r.kind == model::AlertRuleKind::kIdleAllocation ||
           r.kind == model::AlertRuleKind::kServiceSlo)) {
        known_but_failing = true;  // its source failed this pass: leave it
      }
    }
    if (known_but_failing) continue;
    auto done = store_.ResolveAlert(a.id, "berth", now);
    if (!done) return std::unexpected(done.error());
    if (*done) {
      store::Publish(store_.change_feed(), store::Topic::kAlert, std::to_string(a.id), {}, {},
                     "resolved");
    }
  }
  return Ok();
}

void AlertEngine::Start(std::chrono::milliseconds interval) {
  thread_ = std::thread([this, interval] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      if (auto s = Evaluate(clock_.NowMs()); !s) {
        spdlog::error("alerts: evaluation failed: {}", s.error().message);
      }
      lock.lock();
      cv_.wait_for(lock, interval, [this] { return stop_; });
    }
  });
}

void AlertEngine::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// --- AlertDeliverer ---

AlertDeliverer::~AlertDeliverer() {
  Stop();
}

TimeMs AlertDeliverer::Backoff(std::int32_t attempts, const Options& options) {
  TimeMs wait = options.first_backoff_ms;
  for (std::int32_t i = 1; i < attempts && wait < options.max_backoff_ms; ++i) wait *= 2;
  return std::min(wait, options.max_backoff_ms);
}

std::string AlertDeliverer::Payload(const store::AlertDelivery& delivery, const store::Alert& alert,
                                    const Options& options) {
  json body{{"event", delivery.event},
            {"alert", AlertJson(alert)},
            {"delivery", {{"id", delivery.id}, {"sink", delivery.sink}}},
            {"berth", {{"version", options.version}, {"server", options.server}}}};
  return body.dump();
}

std::string AlertDeliverer::Post(const model::AlertSink& sink, const std::string& body) {
  const auto scheme_end = sink.url.find("://");
  const auto path_start = sink.url.find('/', scheme_end + 3);
  const std::string base =
      path_start == std::string::npos ? sink.url : sink.url.substr(0, path_start);
  const std::string path = path_start == std::string::npos ? "/" : sink.url.substr(path_start);
  httplib::Client client(base);
  if (!client.is_valid()) return fmt::format("cannot reach {}: not a usable URL", base);
  const auto secs = static_cast<time_t>(sink.timeout_ms / 1000);
  const auto usecs = static_cast<time_t>((sink.timeout_ms % 1000) * 1000);
  client.set_connection_timeout(secs, usecs);
  client.set_read_timeout(secs, usecs);
  client.set_write_timeout(secs, usecs);
  httplib::Headers headers;
  if (!sink.secret_file.empty()) {
    // Checked again at each delivery: rules applied before these checks
    // existed, and a secret directory changed since the apply, send nothing
    // they should not.
    if (sink.url.starts_with("http://") && !sink.send_secret_over_http) {
      return fmt::format(
          "not sent: {} is plain http and the sink has a secret_file; use an https:// URL, or set "
          "send_secret_over_http: true on sink {} (berth alert rules apply)",
          sink.url, sink.name);
    }
    auto secret = router_.secrets().Read(sink.secret_file, "secret_file");
    if (!secret) {
      return fmt::format("not sent: {}: {}", secret.error().field, secret.error().message);
    }
    headers.emplace(sink.header, sink.header == "Authorization" ? "Bearer " + *secret : *secret);
  }
  auto res = client.Post(path, headers, body, "application/json");
  if (!res) return fmt::format("POST {}: {}", sink.url, httplib::to_string(res.error()));
  if (res->status < 200 || res->status >= 300) {
    return fmt::format("POST {}: HTTP {}", sink.url, res->status);
  }
  return {};
}

Result<int> AlertDeliverer::DeliverDue(TimeMs now) {
  auto due = store_.DueDeliveries(now, 100);
  if (!due) return std::unexpected(due.error());
  const model::AlertRules rules = router_.Rules();
  int attempted = 0;
  for (const auto& d : *due) {
    std::string error;
    auto alert = store_.GetAlert(d.alert_id);
    const model::AlertSink* sink = rules.FindSink(d.sink);
    if (!alert) {
      error = alert.error().message;
    } else if (sink == nullptr) {
      error = fmt::format("sink {} is not in the alert rules in force", d.sink);
    } else {
      error = Post(*sink, Payload(d, *alert, options_));
    }
    ++attempted;
    const std::int32_t attempts = d.attempts + 1;
    std::optional<TimeMs> next;
    std::string result = "delivered";
    if (!error.empty()) {
      if (attempts < options_.max_attempts) {
        next = clock_.NowMs() + Backoff(attempts, options_);
        result = "retry";
        spdlog::warn("alerts: delivery {} of alert {} to {} failed (attempt {}): {}", d.id,
                     d.alert_id, d.sink, attempts, error);
      } else {
        result = "failed";
        spdlog::error("alerts: gave up delivering alert {} to {} after {} attempts: {}", d.alert_id,
                      d.sink, attempts, error);
      }
    }
    BERTH_RETURN_IF_ERROR(store_.RecordDeliveryAttempt(d.id, error, next, clock_.NowMs()));
    if (metrics_ != nullptr) metrics_->CountAlertDelivery(d.sink, result);
  }
  return attempted;
}

void AlertDeliverer::Start(std::chrono::milliseconds poll) {
  thread_ = std::thread([this, poll] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      if (auto n = DeliverDue(clock_.NowMs()); !n) {
        spdlog::error("alerts: delivering webhooks failed: {}", n.error().message);
      }
      lock.lock();
      cv_.wait_for(lock, poll, [this] { return stop_; });
    }
  });
}

void AlertDeliverer::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

IdleSource TelemetryIdleSource(store::MeterStore& runs, store::TelemetryStore& telemetry) {
  return [&runs, &telemetry](TimeMs now,
                             const model::AlertRule& rule) -> Result<std::vector<IdleAllocation>> {
    std::vector<IdleAllocation> out;
    // Telemetry is kept per minute: the window starts on the minute that
    // holds now - window, so that its first bucket counts whole and an idle
    // stretch can reach the full window (from now - window itself, the first
    // bucket found started after it, and no run was ever idle long enough).
    const TimeMs window = std::max<std::int64_t>(rule.window_ms, 60'000);
    const TimeMs from = (now - window) / 60'000 * 60'000;
    auto active = runs.UsageRuns(now, now + 1, "", model::TenantScope::All());
    if (!active) return std::unexpected(active.error());
    std::vector<std::string> ids;
    for (const auto& r : *active) {
      if (!r.finished_ms && r.started_ms <= from) ids.push_back(r.run_id);
    }
    if (ids.empty()) return out;
    auto summaries = telemetry.RunSummaries(ids, from, now);
    if (!summaries) return std::unexpected(summaries.error());
    for (const auto& r : *active) {
      auto it = summaries->find(r.run_id);
      if (it == summaries->end() || it->second.samples == 0) continue;
      if (static_cast<std::int64_t>(it->second.util_max) >= rule.threshold_percent) continue;
      out.push_back(IdleAllocation{.job_id = r.job_id,
                                   .run_id = r.run_id,
                                   .tenant = r.tenant,
                                   .node = r.node,
                                   .gpus = r.gpu_indices,
                                   .idle_since_ms = it->second.first_ms});
    }
    return out;
  };
}

}  // namespace berth::server
