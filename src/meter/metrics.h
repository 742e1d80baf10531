// Prometheus metrics for berthd's GET /metrics (docs/metrics.md): a writer of
// the text exposition format 0.0.4, and the counters and histograms the
// control loop, the alert engine and the API update in memory. Counters
// start at zero when berthd starts, as Prometheus expects of a process
// restart. The scrape-time gauges are rendered by api/metrics_render.h.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/alert_kind.h"
#include "model/policy.h"
#include "model/telemetry.h"
#include "store/store.h"

namespace berth::server {

// One sample's labels, in the order they are written.
using MetricLabels = std::vector<std::pair<std::string_view, std::string_view>>;

// A label value as the format wants it: backslash, double quote and newline
// escaped (\\, \", \n).
std::string EscapeLabelValue(std::string_view value);
// HELP text: backslash and newline escaped (quotes stay as they are).
std::string EscapeHelp(std::string_view text);

// Cumulative bucket counts over fixed upper bounds (ascending; +Inf is
// implied), with their sum and count.
struct HistogramData {
  std::vector<double> bounds;
  std::vector<std::uint64_t> counts;  // per bound, not cumulative; size bounds+1 (+Inf last)
  double sum = 0;
  std::uint64_t count = 0;

  explicit HistogramData(std::vector<double> b = {})
      : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void Observe(double v);
};

// Writes one exposition document. Each family is announced once with
// Family() (HELP and TYPE), then its samples follow; the writer does not
// reorder, so a caller writes a family's samples together.
class MetricsWriter {
 public:
  // type: counter, gauge, histogram.
  void Family(std::string_view name, std::string_view type, std::string_view help);
  void Sample(std::string_view name, const MetricLabels& labels, double value);
  // name_bucket{...,le="B"} cumulative, name_sum, name_count.
  void Histogram(std::string_view name, const MetricLabels& labels, const HistogramData& h);
  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Labels(const MetricLabels& labels, std::string_view extra_name = {},
              std::string_view extra_value = {});
  std::string out_;
};

// A number as the format writes it: integers without a fraction, +Inf/-Inf/NaN.
std::string FormatValue(double v);

// What berthd counts as it runs. Every method is thread-safe: the control
// loop and API threads update, scrapes read.
class ServerMetrics {
 public:
  // A job placed: seconds since it was submitted, per tenant/queue.
  void ObserveQueueWait(const std::string& tenant, const std::string& queue, double seconds);
  // A job reached a terminal state: outcome Succeeded|Failed|Cancelled and,
  // for a failure, its class ("" otherwise).
  void CountOutcome(const std::string& tenant, const std::string& outcome,
                    const std::string& failure_class);
  // A running job stopped to make room: preempt, reclaim or move.
  void CountPreemption(const std::string& reason);
  // An operator's change: cordon, drain, uncordon, gpu_cordon, gpu_uncordon,
  // policy_apply, policy_rollback, cancel.
  void CountAdminIntervention(const std::string& action);
  // One scheduling pass that had jobs to look at: its duration and placements.
  void ObserveCycle(double seconds, std::uint64_t placements);
  // "Would run now if" hints checked by running the cycle again
  // (sched/hints.h): borne out and shown, or refuted and dropped.
  void CountHints(std::uint64_t verified, std::uint64_t refuted);
  // An alert raised (meter/alerting.h), by its kind.
  void CountAlertRaised(model::AlertKind kind);
  // One webhook delivery attempt: result delivered, retry or failed.
  void CountAlertDelivery(const std::string& sink, const std::string& result);

  // Appends the in-memory families to `w`.
  void Render(MetricsWriter& w) const;

  // Upper bounds, seconds.
  static const std::vector<double>& QueueWaitBounds();
  static const std::vector<double>& CycleBounds();

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, HistogramData> queue_wait_;
  std::map<std::vector<std::string>, std::uint64_t> outcomes_;  // tenant, outcome, class
  std::map<std::string, std::uint64_t> preemptions_;
  std::map<std::string, std::uint64_t> interventions_;
  HistogramData cycle_{CycleBounds()};
  std::uint64_t placements_ = 0;
  std::uint64_t hints_verified_ = 0;
  std::uint64_t hints_refuted_ = 0;
  std::map<std::string, std::uint64_t> alerts_raised_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> alert_deliveries_;
};

}  // namespace berth::server
