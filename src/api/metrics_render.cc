#include "api/metrics_render.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

#include "model/job.h"
#include "model/reason.h"

namespace berth::server {

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

using Occupants = std::map<std::pair<std::string_view, std::uint32_t>, Occupant>;

// (node, gpu index) -> who holds it.
Occupants OccupantsOf(const ClusterView& view) {
  Occupants occupied;
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
  return occupied;
}

// GPUs by (pool, model) and state (kGpuStates), and nodes by state.
struct GpuTally {
  std::map<std::pair<std::string, std::string>, std::array<std::uint64_t, 4>> by_pool_model;
  std::map<std::string, std::uint64_t> nodes_by_state = {{"Ready", 0}, {"NotReady", 0}};
};

// berth_gpu_info, one sample per GPU; returns the tally for WriteGpuTally.
GpuTally WriteGpuInfo(MetricsWriter& w, const ClusterView& view, const Occupants& occupied) {
  GpuTally tally;
  auto& by_pool_model = tally.by_pool_model;
  auto& nodes_by_state = tally.nodes_by_state;
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
  return tally;
}

// berth_gpus{pool,model,state} (every combination seen, each state written)
// and berth_nodes.
void WriteGpuTally(MetricsWriter& w, const GpuTally& tally) {
  w.Family("berth_gpus", "gauge",
           "GPUs by pool, model and state (free, allocated, unhealthy, cordoned).");
  for (const auto& [key, counts] : tally.by_pool_model) {
    for (std::size_t s = 0; s < kGpuStates.size(); ++s) {
      w.Sample("berth_gpus", {{"pool", key.first}, {"model", key.second}, {"state", kGpuStates[s]}},
               static_cast<double>(counts[s]));
    }
  }
  w.Family("berth_nodes", "gauge", "Nodes by state (Ready, NotReady).");
  for (const auto& [state, count] : tally.nodes_by_state) {
    w.Sample("berth_nodes", {{"state", state}}, static_cast<double>(count));
  }
}

// The DCGM exporter's families from the newest sample of each GPU, and the
// telemetry counters.
void WriteTelemetry(MetricsWriter& w, const ClusterView& view, const Occupants& occupied) {
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
}

void WriteJobs(MetricsWriter& w, const ClusterView& view) {
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
}

}  // namespace

std::string RenderMetrics(const ClusterView& view, const ServerMetrics& counters) {
  MetricsWriter w;
  const Occupants occupied = OccupantsOf(view);
  const GpuTally tally = WriteGpuInfo(w, view, occupied);
  WriteTelemetry(w, view, occupied);
  WriteGpuTally(w, tally);
  WriteJobs(w, view);
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

std::string RenderLeadershipMetrics(const nlohmann::json& role) {
  MetricsWriter w;
  const std::string name = role.is_object() ? role.value("role", "single") : "single";
  const auto number = [&](const char* key) {
    return role.is_object() && role.contains(key) && role[key].is_number() ? role[key].get<double>()
                                                                           : 0.0;
  };
  w.Family("berth_leader", "gauge",
           "1 on the berthd that serves the API, labelled single or leader (standbys serve no "
           "metrics: a series that stops is a berthd that no longer leads).");
  w.Sample("berth_leader", {{"role", name}}, 1);
  w.Family("berth_leader_term", "gauge",
           "The leadership lease's term this berthd leads at; 0 for a single berthd.");
  w.Sample("berth_leader_term", {}, number("term"));
  w.Family("berth_leader_since_seconds", "gauge",
           "When this berthd took the leadership lease, in Unix seconds; 0 for a single berthd.");
  w.Sample("berth_leader_since_seconds", {}, number("leading_since") / 1000.0);
  w.Family("berth_leader_lease_expires_in_seconds", "gauge",
           "How long the leader's lease lasts unless renewed again (it renews every quarter of "
           "--leader-ttl): near 0 or below, the database is not taking its renewals; 0 for a "
           "single berthd.");
  w.Sample("berth_leader_lease_expires_in_seconds", {}, number("lease_expires_in_ms") / 1000.0);
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
