// Telemetry endpoints (docs/api.md, docs/metering.md "Telemetry"): a job's
// per-run utilization summaries and its GPUs' bucket series
// (GET /v1/jobs/{id}/telemetry), one GPU's series (GET
// /v1/gpus/{uuid}/telemetry), and the utilization block of GET /v1/jobs/{id}.
// Windows count a bucket when it overlaps [from, to) for series and when its
// start lies in [from, to) for summaries (store/telemetry_store.h).
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "api/api.h"
#include "api/api_util.h"
#include "common/units.h"

namespace berth::server {
namespace {

using nlohmann::json;

constexpr std::int64_t kMinuteMs = 60'000;
// What a caller sees instead of a run id of a tenant it cannot read.
constexpr std::string_view kAnotherTenant = "another tenant";

Error NoTelemetry() {
  return Error{Code::kUnavailable, "this berthd keeps no GPU telemetry", {}};
}

double Ratio(std::uint64_t sum, std::int64_t n) {
  return n == 0 ? 0.0 : static_cast<double>(sum) / static_cast<double>(n);
}

json BucketJson(const store::GpuBucket& b, std::vector<std::string> run_ids) {
  return json{{"start_ms", b.start_ms},
              {"width_ms", b.width_ms},
              {"run_ids", std::move(run_ids)},
              {"samples", b.samples},
              {"util_sum", b.util_sum},
              {"avg_util_pct", Ratio(static_cast<std::uint64_t>(b.util_sum), b.samples)},
              {"max_util_pct", b.util_max},
              {"avg_mem_util_pct", Ratio(static_cast<std::uint64_t>(b.mem_util_sum), b.samples)},
              {"avg_memory_used_bytes", Ratio(b.memory_used_sum, b.samples)},
              {"max_memory_used_bytes", b.memory_used_max},
              {"memory_total_bytes", b.memory_total_bytes},
              {"max_temperature_c", b.temperature_max_c},
              {"avg_power_w", Ratio(b.power_sum_mw, b.samples) / 1000.0},
              {"ecc_dbe", b.ecc_dbe_max},
              {"last_xid", b.last_xid},
              {"idle_samples", b.idle_samples}};
}

// from and to of a telemetry query (points in time as /v1/usage takes
// them: unix ms or a duration back from now) and step (a duration, whole
// minutes; 0 or absent: as stored).
struct Window {
  TimeMs from = 0;
  TimeMs to = 0;
  std::int64_t step_ms = 0;
};

Result<Window> WindowParams(const http::Request& req, TimeMs default_from, TimeMs now) {
  // `to` defaults past now so the open minute is in the window.
  Window w{default_from, now + kMinuteMs, 0};
  for (const char* name : {"from", "to"}) {
    if (!req.has_param(name)) continue;
    auto t = TimeParam(req.get_param_value(name), name, now);
    if (!t) return std::unexpected(t.error());
    (std::string_view(name) == "from" ? w.from : w.to) = *t;
  }
  if (w.to <= w.from) {
    return InvalidField(
        "to", fmt::format("the window is empty: to ({}) must be after from ({})", w.to, w.from));
  }
  if (req.has_param("step")) {
    const std::string& s = req.get_param_value("step");
    auto step = s == "0" ? Result<std::int64_t>(0) : ParseDurationMs(s);
    if (!step || *step < 0 || *step % kMinuteMs != 0) {
      return InvalidField("step", fmt::format("step '{}' must be whole minutes such as 5m or 1h, "
                                              "or 0 for the stored buckets",
                                              s));
    }
    w.step_ms = *step;
  }
  return w;
}

json WindowJson(const Window& w) {
  return json{{"from_ms", w.from}, {"to_ms", w.to}, {"step_ms", w.step_ms}};
}

// The job id of a run id "JOB.REPLICA.ATTEMPT"; 0 when it is not one.
std::int64_t JobOfRun(std::string_view run_id) {
  std::int64_t id = 0;
  auto [p, ec] = std::from_chars(run_id.data(), run_id.data() + run_id.size(), id);
  return ec == std::errc() && p != run_id.data() + run_id.size() && *p == '.' ? id : 0;
}

json UtilizationJson(const store::UtilSummary& s) {
  if (s.samples == 0) return nullptr;
  return json{{"avg_util_pct", s.AvgUtilPct()},
              {"max_util_pct", s.util_max},
              {"avg_memory_used_bytes", s.AvgMemoryUsedBytes()},
              {"max_memory_used_bytes", s.memory_used_max},
              {"memory_total_bytes", s.memory_total_bytes},
              {"idle_fraction", s.IdleFraction()},
              {"longest_idle_ms", s.longest_idle_ms},
              {"samples", s.samples},
              {"first_ms", s.first_ms},
              {"last_ms", s.last_ms}};
}

}  // namespace

Result<std::map<std::string, store::UtilSummary>> Api::JobRunSummaries(const store::JobRecord& job,
                                                                       TimeMs from, TimeMs to) {
  std::vector<std::string> ids;
  for (const auto& r : job.runs) ids.push_back(r.run_id);
  if (ids.empty()) return std::map<std::string, store::UtilSummary>{};
  return telemetry_->RunSummaries(ids, from, to);
}

json Api::JobUtilization(const store::JobRecord& job) {
  if (telemetry_ == nullptr || job.runs.empty()) return nullptr;
  // Run ids are the job's own, so the whole history is the window.
  auto runs = JobRunSummaries(job, 0, clock_.NowMs() + kMinuteMs);
  if (!runs) return nullptr;
  store::UtilSummary all;
  // The job's runs summed; a stretch of idle is the longest of any run.
  for (const auto& [id, s] : *runs) {
    all.Add(s);
    all.longest_idle_ms = std::max(all.longest_idle_ms, s.longest_idle_ms);
  }
  return UtilizationJson(all);
}

void Api::JobTelemetry(const http::Request& req, http::Response& res) {
  if (telemetry_ == nullptr) return ReplyError(res, NoTelemetry());
  std::int64_t id = 0;
  const std::string& text = req.matches[1];
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || p != text.data() + text.size() || id <= 0) {
    return ReplyError(
        res, Error{Code::kInvalidArgument,
                   fmt::format("'{}' is not a job id; job ids are positive integers", text), "id"});
  }
  auto job = store_.GetJob(id);
  if (!job) return ReplyError(res, job.error());
  const TimeMs now = clock_.NowMs();
  // From the hour it was submitted in, so its first (hour or minute)
  // bucket counts.
  auto window = WindowParams(req, job->submitted_at_ms - job->submitted_at_ms % 3'600'000, now);
  if (!window) return ReplyError(res, window.error());
  auto summaries = JobRunSummaries(*job, window->from, window->to);
  if (!summaries) return ReplyError(res, summaries.error());
  json runs = json::array();
  std::set<std::string> own;
  // GPUs the job held, in the order of its runs: uuid -> (node, index).
  std::vector<std::pair<std::string, std::pair<std::string, std::uint32_t>>> gpus;
  for (const auto& r : job->runs) {
    own.insert(r.run_id);
    auto s = summaries->find(r.run_id);
    runs.push_back(
        {{"run_id", r.run_id},
         {"replica", r.replica},
         {"attempt", r.attempt},
         {"node", r.node},
         {"gpu_uuids", r.gpu_uuids},
         {"utilization", s == summaries->end() ? json(nullptr) : UtilizationJson(s->second)}});
    for (std::size_t i = 0; i < r.gpu_uuids.size(); ++i) {
      const auto& uuid = r.gpu_uuids[i];
      if (std::any_of(gpus.begin(), gpus.end(), [&](const auto& g) { return g.first == uuid; })) {
        continue;
      }
      gpus.push_back({uuid, {r.node, i < r.gpu_indices.size() ? r.gpu_indices[i] : 0}});
    }
  }
  json series = json::array();
  for (const auto& [uuid, where] : gpus) {
    auto history = telemetry_->GpuHistory(uuid, window->from, window->to, window->step_ms);
    if (!history) return ReplyError(res, history.error());
    json buckets = json::array();
    for (const auto& b : *history) {
      // Only the job's own buckets, naming only its own runs: a card shared
      // with other jobs says so without naming them.
      std::vector<std::string> mine;
      for (const auto& r : b.run_ids) {
        if (own.contains(r)) mine.push_back(r);
      }
      if (mine.empty()) continue;
      json jb = BucketJson(b, mine);
      jb["shared"] = mine.size() != b.run_ids.size();
      buckets.push_back(std::move(jb));
    }
    series.push_back(
        {{"uuid", uuid}, {"node", where.first}, {"gpu", where.second}, {"buckets", buckets}});
  }
  json out = WindowJson(*window);
  out["job"] = job->id;
  out["runs"] = runs;
  out["gpus"] = series;
  Reply(res, 200, out);
}

void Api::GpuTelemetry(const http::Request& req, http::Response& res,
                       const model::TenantScope& scope) {
  if (telemetry_ == nullptr) return ReplyError(res, NoTelemetry());
  const std::string uuid = req.matches[1];
  auto nodes = controller_.Nodes();
  if (!nodes) return ReplyError(res, nodes.error());
  const model::NodeInfo* node = nullptr;
  const model::Gpu* gpu = nullptr;
  for (const auto& n : *nodes) {
    for (const auto& g : n.record.info.gpus) {
      if (g.uuid == uuid) {
        node = &n.record.info;
        gpu = &g;
      }
    }
  }
  if (gpu == nullptr) {
    return ReplyError(res, Error{Code::kNotFound,
                                 fmt::format("GPU '{}' is not known; `berth gpus` lists the GPUs "
                                             "and their UUIDs",
                                             uuid),
                                 "uuid"});
  }
  const TimeMs now = clock_.NowMs();
  auto window = WindowParams(req, now - 3'600'000, now);
  if (!window) return ReplyError(res, window.error());
  auto history = telemetry_->GpuHistory(uuid, window->from, window->to, window->step_ms);
  if (!history) return ReplyError(res, history.error());
  std::map<std::int64_t, bool> readable;  // job id -> whether the caller may name its runs
  auto shown = [&](const std::string& run_id) -> std::string {
    const std::int64_t job = JobOfRun(run_id);
    auto [it, inserted] = readable.try_emplace(job, false);
    if (inserted && job > 0) {
      auto tenant = store_.JobTenant(job);
      it->second = tenant && scope.Contains(*tenant);
    }
    return it->second ? run_id : std::string(kAnotherTenant);
  };
  json buckets = json::array();
  for (const auto& b : *history) {
    std::vector<std::string> ids;
    for (const auto& r : b.run_ids) ids.push_back(shown(r));
    buckets.push_back(BucketJson(b, std::move(ids)));
  }
  json out = WindowJson(*window);
  out["uuid"] = uuid;
  out["node"] = node->name;
  out["gpu"] = gpu->index;
  out["model"] = gpu->model;
  out["buckets"] = buckets;
  Reply(res, 200, out);
}

}  // namespace berth::server
