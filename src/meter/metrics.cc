#include "meter/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include "model/job.h"
#include "model/reason.h"

namespace berth::server {

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    return fmt::format("{}", static_cast<std::int64_t>(v));
  }
  return fmt::format("{}", v);
}

void HistogramData::Observe(double v) {
  auto it = std::lower_bound(bounds.begin(), bounds.end(), v);
  ++counts[static_cast<std::size_t>(it - bounds.begin())];
  sum += v;
  ++count;
}

void MetricsWriter::Family(std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, EscapeHelp(help),
                 name, type);
}

void MetricsWriter::Labels(const MetricLabels& labels, std::string_view extra_name,
                           std::string_view extra_value) {
  if (labels.empty() && extra_name.empty()) return;
  out_ += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out_ += ',';
    first = false;
    out_ += k;
    out_ += "=\"";
    out_ += EscapeLabelValue(v);
    out_ += '"';
  }
  if (!extra_name.empty()) {
    if (!first) out_ += ',';
    out_ += extra_name;
    out_ += "=\"";
    out_ += extra_value;
    out_ += '"';
  }
  out_ += '}';
}

void MetricsWriter::Sample(std::string_view name, const MetricLabels& labels, double value) {
  out_ += name;
  Labels(labels);
  out_ += ' ';
  out_ += FormatValue(value);
  out_ += '\n';
}

void MetricsWriter::Histogram(std::string_view name, const MetricLabels& labels,
                              const HistogramData& h) {
  const std::string bucket = fmt::format("{}_bucket", name);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= h.bounds.size(); ++i) {
    cumulative += i < h.counts.size() ? h.counts[i] : 0;
    out_ += bucket;
    Labels(labels, "le", i < h.bounds.size() ? FormatValue(h.bounds[i]) : std::string_view("+Inf"));
    fmt::format_to(std::back_inserter(out_), " {}\n", cumulative);
  }
  out_ += name;
  out_ += "_sum";
  Labels(labels);
  fmt::format_to(std::back_inserter(out_), " {}\n", FormatValue(h.sum));
  out_ += name;
  out_ += "_count";
  Labels(labels);
  fmt::format_to(std::back_inserter(out_), " {}\n", h.count);
}

// --- in-memory counters ---

const std::vector<double>& ServerMetrics::QueueWaitBounds() {
  // From a second to a day: interactive jobs start in seconds, training
  // jobs behind a full cluster wait hours.
  static const std::vector<double> b = {1,   5,    15,   30,   60,    120,   300,
                                        600, 1800, 3600, 7200, 14400, 28800, 86400};
  return b;
}

const std::vector<double>& ServerMetrics::CycleBounds() {
  static const std::vector<double> b = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                        0.1,   0.25,   0.5,   1,    2.5,   5};
  return b;
}

void ServerMetrics::ObserveQueueWait(const std::string& tenant, const std::string& queue,
                                     double seconds) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = queue_wait_.try_emplace({tenant, queue}, QueueWaitBounds());
  it->second.Observe(seconds);
}

void ServerMetrics::CountOutcome(const std::string& tenant, const std::string& outcome,
                                 const std::string& failure_class) {
  std::lock_guard lock(mu_);
  ++outcomes_[{tenant, outcome, failure_class}];
}

void ServerMetrics::CountPreemption(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++preemptions_[reason];
}

void ServerMetrics::CountAdminIntervention(const std::string& action) {
  std::lock_guard lock(mu_);
  ++interventions_[action];
}

void ServerMetrics::ObserveCycle(double seconds, std::uint64_t placements) {
  std::lock_guard lock(mu_);
  cycle_.Observe(seconds);
  placements_ += placements;
}

void ServerMetrics::CountHints(std::uint64_t verified, std::uint64_t refuted) {
  std::lock_guard lock(mu_);
  hints_verified_ += verified;
  hints_refuted_ += refuted;
}

void ServerMetrics::CountAlertRaised(model::AlertKind kind) {
  std::lock_guard lock(mu_);
  // By name: the samples render in the order they always did.
  ++alerts_raised_[std::string(model::AlertKindName(kind))];
}

void ServerMetrics::CountAlertDelivery(const std::string& sink, const std::string& result) {
  std::lock_guard lock(mu_);
  ++alert_deliveries_[{sink, result}];
}

void ServerMetrics::Render(MetricsWriter& w) const {
  std::lock_guard lock(mu_);
  w.Family("berth_alerts_raised_total", "counter", "Alerts raised since berthd started, by kind.");
  for (const auto& [kind, n] : alerts_raised_) {
    w.Sample("berth_alerts_raised_total", {{"kind", kind}}, static_cast<double>(n));
  }
  w.Family("berth_alert_deliveries_total", "counter",
           "Webhook delivery attempts since berthd started, by sink and result (delivered, "
           "retry, failed).");
  for (const auto& [key, n] : alert_deliveries_) {
    w.Sample("berth_alert_deliveries_total", {{"sink", key.first}, {"result", key.second}},
             static_cast<double>(n));
  }
  w.Family("berth_queue_wait_seconds", "histogram",
           "Seconds from a job's submission to its placement, per queue.");
  for (const auto& [key, h] : queue_wait_) {
    w.Histogram("berth_queue_wait_seconds", {{"tenant", key.first}, {"queue", key.second}}, h);
  }
  w.Family("berth_job_outcomes_total", "counter",
           "Jobs that reached a terminal state since berthd started, by outcome and failure "
           "class.");
  for (const auto& [key, n] : outcomes_) {
    w.Sample("berth_job_outcomes_total",
             {{"tenant", key[0]}, {"outcome", key[1]}, {"failure_class", key[2]}},
             static_cast<double>(n));
  }
  // Every reason is written, zero or not, so rate() has a series from the start.
  w.Family("berth_preemptions_total", "counter",
           "Running jobs stopped to make room for another: preempt, reclaim, move.");
  for (std::string_view reason : {"preempt", "reclaim", "move"}) {
    auto it = preemptions_.find(std::string(reason));
    w.Sample("berth_preemptions_total", {{"reason", reason}},
             it == preemptions_.end() ? 0.0 : static_cast<double>(it->second));
  }
  w.Family("berth_admin_interventions_total", "counter",
           "Operators' changes that succeeded: cordons, drains, policy changes, cancels by a "
           "platform admin.");
  for (const auto& [action, n] : interventions_) {
    w.Sample("berth_admin_interventions_total", {{"action", action}}, static_cast<double>(n));
  }
  w.Family("berth_scheduler_cycle_seconds", "histogram",
           "Duration of scheduling passes that had pending jobs to consider.");
  w.Histogram("berth_scheduler_cycle_seconds", {}, cycle_);
  w.Family("berth_scheduler_placements_total", "counter",
           "Jobs placed by the scheduler since berthd started.");
  w.Sample("berth_scheduler_placements_total", {}, static_cast<double>(placements_));
  w.Family("berth_scheduler_hints_checked_total", "counter",
           "\"Would run now if\" hints checked by running the scheduling cycle again with the "
           "change: verified (shown) or refuted (dropped).");
  w.Sample("berth_scheduler_hints_checked_total", {{"outcome", "verified"}},
           static_cast<double>(hints_verified_));
  w.Sample("berth_scheduler_hints_checked_total", {{"outcome", "refuted"}},
           static_cast<double>(hints_refuted_));
}

}  // namespace berth::server
