// Alerts (docs/operations.md, "Alerts"): the rules in force (AlertRouter),
// the engine that raises and resolves alerts for conditions it can see
// (AlertEngine: nodes NotReady, queue waits, idle allocations), and the
// webhook sink that delivers raised and resolved events from the store's
// outbox (AlertDeliverer). GPU health and budget alerts are raised where
// those events happen, through AlertRouter::Raise, so their rule decides
// their severity and sinks. Everything reads time from the injected Clock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "meter/webhook_secret.h"
#include "model/alert_rules.h"
#include "store/meter_store.h"
#include "store/store.h"
#include "store/telemetry_store.h"

namespace berth::server {

class ServerMetrics;  // metrics.h

// An alert as the API shows it and a webhook delivers it.
nlohmann::json AlertJson(const store::Alert& alert);

// The rules in force, shared by the API (which applies new ones), the
// engine, the deliverer, the controller and the meter. Thread-safe.
class AlertRouter {
 public:
  // `secret_dir`: where sinks' secret_file may be (berthd
  // --webhook-secret-dir); empty: no sink may have a secret.
  explicit AlertRouter(store::Store& store, std::filesystem::path secret_dir = {})
      : store_(store), secrets_(std::move(secret_dir)) {}
  void set_metrics(ServerMetrics* metrics) { metrics_ = metrics; }

  // Loads the newest applied version, or the defaults when none was applied.
  [[nodiscard]] Status Load();
  // Validates, stores and puts in force a new version; returns it. Each
  // sink's secret must be readable from the secret directory now
  // (sinks[i].secret_file) and go only to https unless the sink says so.
  // `base`: refused with base_version unless it is still the newest version.
  // `audit`: the record of the apply, made from the new version and
  // committed with it.
  [[nodiscard]] Result<std::int64_t> Apply(const std::string& yaml, const std::string& by,
                                           const std::string& comment, TimeMs now,
                                           std::optional<std::int64_t> base = std::nullopt,
                                           const store::AuditOf<std::int64_t>& audit = {});
  model::AlertRules Rules() const;
  const WebhookSecrets& secrets() const { return secrets_; }
  // 0: the defaults (none applied).
  std::int64_t version() const;

  // Raises `alert` under the first enabled rule of `kind` (its name, the
  // kind of alert it raises, its severity unless `severity` is given, its
  // sinks), deduplicated per (rule, subject) as `dedupe` says. nullopt: the
  // kind has no enabled rule, or an alert of that rule and subject exists
  // already.
  [[nodiscard]] Result<std::optional<std::int64_t>> Raise(
      model::AlertRuleKind kind, store::Alert alert, store::AlertDedupe dedupe,
      std::optional<model::AlertSeverity> severity = std::nullopt);
  // The same under a given rule (the engine's path).
  [[nodiscard]] Result<std::optional<std::int64_t>> RaiseFor(
      const model::AlertRule& rule, store::Alert alert, store::AlertDedupe dedupe,
      std::optional<model::AlertSeverity> severity = std::nullopt);

 private:
  store::Store& store_;
  const WebhookSecrets secrets_;
  ServerMetrics* metrics_ = nullptr;
  mutable std::mutex mu_;
  model::AlertRules rules_ = model::DefaultAlertRules();
  std::int64_t version_ = 0;
};

// A running allocation whose GPUs stayed under the idle rule's utilization
// threshold since idle_since_ms. GPU telemetry computes these; the engine is
// given a function that answers them.
struct IdleAllocation {
  std::int64_t job_id = 0;
  std::string run_id;
  std::string tenant;
  std::string node;
  std::vector<std::uint32_t> gpus;
  TimeMs idle_since_ms = 0;
};
using IdleSource =
    std::function<Result<std::vector<IdleAllocation>>(TimeMs now, const model::AlertRule& rule)>;

// The idle_allocation rule's input from GPU telemetry: every running run
// that started at least the rule's window ago and whose GPUs read under the
// rule's threshold in every sample of the last window (telemetry's minute
// buckets: the window is rounded to whole minutes). A run with no samples
// in the window is not idle: nothing was measured.
IdleSource TelemetryIdleSource(store::MeterStore& runs, store::TelemetryStore& telemetry);

// A service's SLO figures over a service_slo rule's window: the service
// controller's per-round windows of the gateway's request log
// (control/service_controller.h, SloFigures).
struct ServiceSloFigures {
  std::string tenant;
  std::string service;
  std::int64_t latency_p95_ms = 0;     // the spec's target; 0: none
  std::uint32_t availability_ppm = 0;  // the spec's target
  std::int64_t windows = 0;            // rounds that saw requests
  std::int64_t windows_missed = 0;     // of them, a p95 above the target
  std::int64_t requests = 0;
  std::int64_t errors = 0;  // answered 5xx, the gateway's own 503s included
};
using SloSource =
    std::function<Result<std::vector<ServiceSloFigures>>(TimeMs now, std::int64_t window_ms)>;

// How fast a window spends the error budget (1 - availability), in
// thousandths (1000: exactly at the rate the SLO allows). Availability:
// the share of requests answered 5xx over the budget. Latency: the share of
// windows whose p95 was above the target over the same budget (0 without a
// latency target). nullopt: fewer than kSloAlertMinRequests requests.
struct SloBurn {
  std::int64_t availability_milli = 0;
  std::int64_t latency_milli = 0;
};
std::optional<SloBurn> BurnOf(const ServiceSloFigures& f);

// Evaluates the rules it can see each pass: raises one alert per (rule,
// subject) while its condition holds and resolves it (resolved_by "berth")
// when the condition clears or the rule is disabled or removed.
class AlertEngine {
 public:
  AlertEngine(store::Store& store, AlertRouter& router, const Clock& clock)
      : store_(store), router_(router), clock_(clock) {}
  ~AlertEngine();
  AlertEngine(const AlertEngine&) = delete;
  AlertEngine& operator=(const AlertEngine&) = delete;

  // Without one, idle_allocation rules find nothing idle. Set before Start().
  void set_idle_source(IdleSource source) { idle_ = std::move(source); }
  // Without one, service_slo rules find no service. Set before Start().
  void set_slo_source(SloSource source) { slo_ = std::move(source); }

  // One evaluation at `now` (tests call it with a ManualClock's time).
  [[nodiscard]] Status Evaluate(TimeMs now);
  // Evaluates every `interval` on a thread of its own.
  void Start(std::chrono::milliseconds interval);
  void Stop();

 private:
  store::Store& store_;
  AlertRouter& router_;
  const Clock& clock_;
  IdleSource idle_;
  SloSource slo_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Delivers the outbox (store::AlertDelivery) to the sinks' webhooks on a
// thread of its own: POST {event, alert, berth: {version, server}} as JSON.
// A 2xx answer is delivered; anything else is retried with exponential
// backoff (first_backoff_ms doubling up to max_backoff_ms) until
// max_attempts, then marked failed.
class AlertDeliverer {
 public:
  struct Options {
    std::int32_t max_attempts = 20;
    TimeMs first_backoff_ms = 1000;
    TimeMs max_backoff_ms = 300'000;
    std::string version;  // berthd's
    std::string server;   // the URL berthd's API answers on
  };
  AlertDeliverer(store::Store& store, AlertRouter& router, const Clock& clock, Options options)
      : store_(store), router_(router), clock_(clock), options_(std::move(options)) {}
  ~AlertDeliverer();
  AlertDeliverer(const AlertDeliverer&) = delete;
  AlertDeliverer& operator=(const AlertDeliverer&) = delete;
  void set_metrics(ServerMetrics* metrics) { metrics_ = metrics; }

  // Attempts every delivery due at `now` once; returns how many it attempted.
  [[nodiscard]] Result<int> DeliverDue(TimeMs now);
  // Polls the outbox every `poll` on a thread of its own.
  void Start(std::chrono::milliseconds poll);
  void Stop();

  // The wait before attempt `attempts + 1` after `attempts` failed ones.
  static TimeMs Backoff(std::int32_t attempts, const Options& options);
  // The JSON body of one delivery.
  static std::string Payload(const store::AlertDelivery& delivery, const store::Alert& alert,
                             const Options& options);

 private:
  // "" when delivered, else what went wrong.
  std::string Post(const model::AlertSink& sink, const std::string& body);

  store::Store& store_;
  AlertRouter& router_;
  const Clock& clock_;
  Options options_;
  ServerMetrics* metrics_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace berth::server
