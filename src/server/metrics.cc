#include "server/metrics.h"

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
}

// --- scrape-time gauges ---

namespace {

bool Matches(const std::map<std::string, std::string>& labels,
             const std::map<std::string, std::string>& selector) {
  for (const auto& [k, v] : selector) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  return true;
}

std::string PoolOf(const model::NodeInfo& info, const model::Policy* policy) {
  if (policy == nullptr) return "";
  for (const auto& p : policy->pools) {
    if (Matches(info.labels, p.selector)) return p.name;
  }
  return "";
}

// Who holds one GPU: job ids, tenants and queues (more than one when runs
// share the card), comma-joined.
struct Occupant {
  std::string job;
  std::string tenant;
  std::string queue;
};

void Append(std::string& list, const std::string& item) {
  if (item.empty()) return;
  // Slices of one card are usually one tenant's: name it once.
  std::size_t pos = 0;
  while (pos <= list.size()) {
    auto end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    if (list.compare(pos, end - pos, item) == 0) return;
    pos = end + 1;
  }
  if (!list.empty()) list += ',';
  list += item;
}

// Per-GPU telemetry under the DCGM exporter's names, so dashboards built on
// dcgm-exporter keep working (docs/metrics.md). Units as DCGM: MiB, W.
struct DcgmGauge {
  std::string_view name;
  std::string_view help;
  double (*value)(const model::GpuSample&);
};

constexpr double kMiB = 1024.0 * 1024.0;

const std::array<DcgmGauge, 9>& DcgmGauges() {
  static const std::array<DcgmGauge, 9> gauges = {{
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).",
       [](const model::GpuSample& s) { return static_cast<double>(s.util_pct); }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).",
       [](const model::GpuSample& s) { return static_cast<double>(s.mem_util_pct); }},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).",
       [](const model::GpuSample& s) {
         return std::floor(static_cast<double>(s.memory_used_bytes) / kMiB);
       }},
      {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).",
       [](const model::GpuSample& s) {
         const auto free = s.memory_total_bytes > s.memory_used_bytes
                               ? s.memory_total_bytes - s.memory_used_bytes
                               : 0;
         return std::floor(static_cast<double>(free) / kMiB);
       }},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).",
       [](const model::GpuSample& s) { return static_cast<double>(s.temperature_c); }},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).",
       [](const model::GpuSample& s) { return static_cast<double>(s.power_mw) / 1000.0; }},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
       "Total number of single-bit volatile ECC errors (since the GPU's last reset).",
       [](const model::GpuSample& s) { return static_cast<double>(s.ecc_sbe_total); }},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
       "Total number of double-bit volatile ECC errors (since the GPU's last reset).",
       [](const model::GpuSample& s) { return static_cast<double>(s.ecc_dbe_total); }},
      {"DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered (0: none).",
       [](const model::GpuSample& s) { return static_cast<double>(s.last_xid); }},
  }};
  return gauges;
}

constexpr std::array<std::string_view, 4> kGpuStates = {"free", "allocated", "unhealthy",
                                                        "cordoned"};

}  // namespace

std::string RenderMetrics(const ClusterView& view, const ServerMetrics& counters) {
  MetricsWriter w;
  // (node, gpu index) -> its occupants.
  std::map<std::pair<std::string_view, std::uint32_t>, Occupant> occupied;
  if (view.holders != nullptr) {
    for (const auto& job : *view.holders) {
      const std::string id = std::to_string(job.id);
      for (const auto& r : job.runs) {
        if (r.state == model::RunState::kExited) continue;
        for (auto idx : r.gpu_indices) {
          Occupant& o = occupied[{r.node, idx}];
          Append(o.job, id);
          Append(o.tenant, job.spec.tenant);
          Append(o.queue, job.spec.queue);
        }
      }
    }
  }

  // berth_gpus{pool,model,state}: every combination seen, each state written.
  std::map<std::pair<std::string, std::string>, std::array<std::uint64_t, 4>> by_pool_model;
  std::map<std::string, std::uint64_t> nodes_by_state = {{"Ready", 0}, {"NotReady", 0}};
  w.Family("berth_gpu_info", "gauge",
           "One per GPU (value 1): where it is and who holds it; job, tenant and queue are "
           "empty when it is free. Hostname and UUID repeat node and uuid under the DCGM "
           "exporter's names.");
  if (view.nodes != nullptr) {
    for (const auto& n : *view.nodes) {
      const auto& info = n.record.info;
      ++nodes_by_state[model::NodeStateName(n.record.state)];
      const std::string pool = PoolOf(info, view.policy);
      for (const auto& g : info.gpus) {
        auto occ = occupied.find({info.name, g.index});
        const Occupant* o = occ == occupied.end() ? nullptr : &occ->second;
        std::size_t state = 0;
        if (g.health != model::Health::kHealthy) {
          state = 2;
        } else if (o != nullptr) {
          state = 1;
        } else if (n.record.cordon || n.record.gpu_cordons.contains(g.index)) {
          state = 3;
        }
        auto [it, inserted] = by_pool_model.try_emplace({pool, g.model});
        ++it->second[state];
        const std::string index = std::to_string(g.index);
        static const std::string kEmpty;
        w.Sample("berth_gpu_info",
                 {{"node", info.name},
                  {"gpu", index},
                  {"uuid", g.uuid},
                  {"model", g.model},
                  {"pool", pool},
                  {"state", kGpuStates[state]},
                  {"job", o ? o->job : kEmpty},
                  {"tenant", o ? o->tenant : kEmpty},
                  {"queue", o ? o->queue : kEmpty},
                  {"Hostname", info.hostname.empty() ? info.name : info.hostname},
                  {"UUID", g.uuid}},
                 1);
      }
    }
  }
  if (view.samples != nullptr) {
    // Where each GPU is: its model and host name, from the inventory.
    std::map<std::string_view, std::pair<std::string_view, std::string_view>> where;
    if (view.nodes != nullptr) {
      for (const auto& n : *view.nodes) {
        const auto& info = n.record.info;
        for (const auto& g : info.gpus) {
          where[g.uuid] = {g.model, info.hostname.empty() ? info.name : info.hostname};
        }
      }
    }
    // One label set per sample, written under every family.
    struct Labeled {
      std::string index;
      std::string device;
      MetricLabels labels;
    };
    std::vector<Labeled> labeled(view.samples->size());
    static const std::string kEmpty;
    for (std::size_t i = 0; i < view.samples->size(); ++i) {
      const auto& s = (*view.samples)[i];
      Labeled& l = labeled[i];
      l.index = std::to_string(s.gpu);
      l.device = "nvidia" + l.index;
      auto at = where.find(s.uuid);
      auto occ = occupied.find({s.node, s.gpu});
      const Occupant* o = occ == occupied.end() ? nullptr : &occ->second;
      l.labels = {{"gpu", l.index},
                  {"UUID", s.uuid},
                  {"device", l.device},
                  {"model", at == where.end() ? std::string_view() : at->second.first},
                  {"Hostname", at == where.end() ? std::string_view(s.node) : at->second.second},
                  {"job", o ? o->job : kEmpty},
                  {"tenant", o ? o->tenant : kEmpty},
                  {"queue", o ? o->queue : kEmpty}};
    }
    for (const auto& gauge : DcgmGauges()) {
      w.Family(gauge.name, "gauge", gauge.help);
      for (std::size_t i = 0; i < view.samples->size(); ++i) {
        w.Sample(gauge.name, labeled[i].labels, gauge.value((*view.samples)[i]));
      }
    }
    w.Family("berth_telemetry_samples_total", "counter",
             "GPU telemetry samples berthd accepted since it started.");
    w.Sample("berth_telemetry_samples_total", {}, static_cast<double>(view.telemetry_samples));
    w.Family("berth_telemetry_late_samples_total", "counter",
             "GPU telemetry samples dropped because their minute was already written.");
    w.Sample("berth_telemetry_late_samples_total", {}, static_cast<double>(view.telemetry_late));
  }
  w.Family("berth_gpus", "gauge",
           "GPUs by pool, model and state (free, allocated, unhealthy, cordoned).");
  for (const auto& [key, counts] : by_pool_model) {
    for (std::size_t s = 0; s < kGpuStates.size(); ++s) {
      w.Sample("berth_gpus", {{"pool", key.first}, {"model", key.second}, {"state", kGpuStates[s]}},
               static_cast<double>(counts[s]));
    }
  }
  w.Family("berth_nodes", "gauge", "Nodes by state (Ready, NotReady).");
  for (const auto& [state, count] : nodes_by_state) {
    w.Sample("berth_nodes", {{"state", state}}, static_cast<double>(count));
  }

  // Jobs not yet finished, by state; finished ones are counted by
  // berth_job_outcomes_total.
  std::map<std::string_view, std::uint64_t> jobs_by_state = {
      {model::JobStateName(model::JobState::kPending), 0},
      {model::JobStateName(model::JobState::kScheduled), 0},
      {model::JobStateName(model::JobState::kRunning), 0}};
  std::map<std::vector<std::string>, std::uint64_t> pending_by_reason;
  if (view.holders != nullptr) {
    for (const auto& job : *view.holders) ++jobs_by_state[model::JobStateName(job.state)];
  }
  if (view.pending != nullptr) {
    for (const auto& job : *view.pending) {
      ++jobs_by_state[model::JobStateName(job.state)];
      ++pending_by_reason[{job.spec.tenant, job.spec.queue,
                           std::string(model::ReasonCodeName(job.reason.code))}];
    }
  }
  w.Family("berth_jobs", "gauge", "Jobs not yet finished, by state (Pending, Scheduled, Running).");
  for (const auto& [state, count] : jobs_by_state) {
    w.Sample("berth_jobs", {{"state", state}}, static_cast<double>(count));
  }
  w.Family("berth_pending_jobs", "gauge", "Pending jobs by queue and reason code.");
  for (const auto& [key, count] : pending_by_reason) {
    w.Sample("berth_pending_jobs", {{"tenant", key[0]}, {"queue", key[1]}, {"reason", key[2]}},
             static_cast<double>(count));
  }
  if (view.open_alerts != nullptr) {
    std::map<std::pair<std::string, std::string>, std::uint64_t> open;
    for (const auto& a : *view.open_alerts) {
      ++open[{std::string(model::AlertKindName(a.kind)),
              std::string(model::AlertSeverityName(a.severity))}];
    }
    w.Family("berth_alerts_open", "gauge", "Open alerts by kind and severity.");
    for (const auto& [key, count] : open) {
      w.Sample("berth_alerts_open", {{"kind", key.first}, {"severity", key.second}},
               static_cast<double>(count));
    }
  }
  counters.Render(w);
  return w.Take();
}

std::string RenderStoreMetrics(const store::CommitStats& s) {
  MetricsWriter w;
  w.Family("berth_store_submit_commits_total", "counter",
           "Transactions that stored submissions (group commit: one sync each).");
  w.Sample("berth_store_submit_commits_total", {}, static_cast<double>(s.commits));
  w.Family("berth_store_submissions_committed_total", "counter",
           "Submissions stored (a job array counts once).");
  w.Sample("berth_store_submissions_committed_total", {}, static_cast<double>(s.submissions));
  return w.Take();
}

std::string RenderHttpMetrics(const http::ServerStats& s) {
  MetricsWriter w;
  auto d = [](std::uint64_t v) { return static_cast<double>(v); };
  w.Family("berth_http_connections", "gauge", "Open API connections.");
  w.Sample("berth_http_connections", {}, d(s.open));
  w.Family("berth_http_streams", "gauge", "Streamed API answers in progress (followed logs).");
  w.Sample("berth_http_streams", {}, d(s.streams_open));
  w.Family("berth_http_connections_accepted_total", "counter", "API connections accepted.");
  w.Sample("berth_http_connections_accepted_total", {}, d(s.accepted));
  w.Family("berth_http_requests_total", "counter", "API requests read whole.");
  w.Sample("berth_http_requests_total", {}, d(s.requests));
  w.Family("berth_http_refused_total", "counter",
           "Connections and requests the API server refused itself, by reason.");
  const std::pair<const char*, std::uint64_t> reasons[] = {
      {"connections_per_source", s.refused_source_connections},
      {"connections", s.refused_connections},
      {"header_too_large", s.header_too_large},
      {"body_too_large", s.body_too_large},
      {"bad_request", s.bad_requests},
      {"timeout", s.timeouts},
      {"tls_handshake", s.tls_failures},
  };
  for (const auto& [reason, n] : reasons) {
    w.Sample("berth_http_refused_total", {{"reason", reason}}, d(n));
  }
  return w.Take();
}

}  // namespace berth::server
