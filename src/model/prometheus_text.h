// Reading one metric out of a replica's Prometheus text exposition
// (docs/services.md, "The metric signal"): what the autoscaler's `metric`
// signal scrapes from each ready replica, e.g. vLLM's
// vllm:num_requests_waiting. The text is the replica's, so a tenant's:
// bounded, and any sample of the metric that is not a finite number is an
// error that names it. Other metrics' lines are skipped unread.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "common/status.h"

namespace berth::model {

// The most of a replica's /metrics body berthd reads.
inline constexpr std::size_t kMaxMetricsBytes = std::size_t{4} << 20;  // 4 MiB

// The sum of every sample of `name` (any labels) in `text`; nullopt when
// the text has none. `name` must be a valid metric name
// ([a-zA-Z_:][a-zA-Z0-9_:]*).
Result<std::optional<double>> SumPrometheusMetric(std::string_view text, std::string_view name);

// Whether `name` is a valid Prometheus metric name.
bool IsPrometheusMetricName(std::string_view name);

}  // namespace berth::model
