// GET /metrics' scrape-time families: GPUs, nodes, jobs, pending reasons and
// telemetry from what the store and the controller hold when the scrape
// arrives, then the counters berthd keeps (meter/metrics.h), the API
// server's and the store's own.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/controller.h"
#include "http/server.h"
#include "meter/metrics.h"
#include "model/policy.h"
#include "model/telemetry.h"
#include "store/store.h"

namespace berth::server {

// What a scrape reads from the store and the controller.
struct ClusterView {
  const std::vector<NodeStatus>* nodes = nullptr;
  // Jobs holding GPUs (Scheduled, Running) with their runs.
  const std::vector<store::JobRecord>* holders = nullptr;
  const std::vector<store::JobRecord>* pending = nullptr;
  const model::Policy* policy = nullptr;                   // for pools; null: every pool ""
  const std::vector<store::Alert>* open_alerts = nullptr;  // null: no alert gauge
  // The newest telemetry sample of each GPU (TelemetryStore::Latest) and the
  // store's counters; null: berthd keeps no telemetry, and the DCGM gauges
  // and berth_telemetry_* counters are not written.
  const std::vector<model::GpuSample>* samples = nullptr;
  std::int64_t telemetry_samples = 0;
  std::int64_t telemetry_late = 0;
};

// The whole /metrics document: the cluster's gauges, then `counters`.
std::string RenderMetrics(const ClusterView& view, const ServerMetrics& counters);

// The API server's connections, streams and refusals (berth_http_*).
std::string RenderHttpMetrics(const http::ServerStats& s);
// This berthd's part in the control plane, from the role Api::set_leadership
// gives ({"role": "leader", "term": N, "leading_since": MS}; empty: single).
std::string RenderLeadershipMetrics(const nlohmann::json& role);
// Group commit's counters (store::CommitStats).
std::string RenderStoreMetrics(const store::CommitStats& s);

}  // namespace berth::server
