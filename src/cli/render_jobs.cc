// RenderJobs and JobGpus; the single-job view lives in render_job.cc.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/render.h"
#include "cli/table.h"

namespace berth::cli {
namespace {

using nlohmann::json;

// Wide enough for "1/8 nodes have 4 free H100-80GB" style summaries; the full
// text is in `berth job ID`.
constexpr std::size_t kReasonWidth = 60;

// Top-level copies win, the spec is the fallback: berthd may send either.
std::string JobText(const json& job, std::string_view key) {
  std::string value = Text(job, key);
  return value != "-" ? value : Text(job, "spec." + std::string(key));
}

// A number from the summary GET /v1/jobs sends by default, else from the
// spec that full=true and GET /v1/jobs/{id} send.
std::optional<std::int64_t> JobInt(const json& job, std::string_view key) {
  if (auto v = Int(job, key)) return v;
  return Int(job, "spec." + std::string(key));
}

}  // namespace

std::string JobGpus(const json& job) {
  auto gpus = JobInt(job, "resources.gpus");
  std::string replicas = std::to_string(JobInt(job, "replicas").value_or(1));
  // A slice of one GPU per replica: "2x0.25" by share, "2x20Gi" by memory.
  if (auto m = JobInt(job, "resources.gpu_share_millis"); m && *m > 0) {
    std::string share = fmt::format("0.{:03}", *m % 1000);
    while (share.back() == '0') share.pop_back();
    return replicas + "x" + share;
  }
  if (auto b = JobInt(job, "resources.gpu_share_bytes"); b && *b > 0) {
    return replicas + "x" + FormatMemory(static_cast<std::uint64_t>(*b));
  }
  if (!gpus) return "-";
  return replicas + "x" + std::to_string(*gpus);
}

std::string RenderJobs(const json& response, std::int64_t now_ms) {
  const json& jobs = response.is_array() ? response : Array(response, "jobs");
  if (jobs.empty()) return "No jobs found.\n";
  Table table({"ID", "NAME", "TENANT", "QUEUE", "STATE", "GPUS", "AGE", "REASON"});
  for (const auto& job : jobs) {
    std::string reason = Text(job, "reason.message");
    if (reason == "-") reason = Text(job, "reason.code");
    // An array's element: its name with its index, as sweep[3].
    std::string name = JobText(job, "name");
    if (job.contains("array") && job["array"].is_object()) {
      name += "[" + IntText(job, "array.index") + "]";
    }
    table.AddRow({IntText(job, "id"), name, JobText(job, "tenant"), JobText(job, "queue"),
                  Text(job, "state"), JobGpus(job), AgeSince(now_ms, Int(job, "submitted_at_ms")),
                  Truncate(OneLine(reason), kReasonWidth)});
  }
  return table.Render();
}

}  // namespace berth::cli
