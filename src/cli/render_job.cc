// RenderJob: the `berth job ID` view, laid out like `kubectl describe`.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/render.h"
#include "cli/table.h"
#include "common/units.h"

namespace berth::cli {
namespace {

using nlohmann::json;

// Label column of the key/value block; the longest label is "Tenant/Queue:".
constexpr std::size_t kLabelWidth = 14;

void Line(std::string& out, std::string_view label, std::string_view value) {
  out += fmt::format("{:<{}}{}\n", std::string(label) + ":", kLabelWidth, OneLine(value));
}

std::string Time(const json& obj, std::string_view path, std::int64_t now_ms) {
  auto ms = Int(obj, path);
  if (!ms) return "-";
  return fmt::format("{} ({} ago)", FormatTimeMs(*ms), FormatAge(now_ms - *ms));
}

std::string FirstOf(const json& job, std::string_view key) {
  std::string value = Text(job, key);
  return value != "-" ? value : Text(job, "spec." + std::string(key));
}

// "gpus=4 model=H100-80GB gpu_memory>=80Gi cpu=16 memory=128Gi", the keys of
// the spec's resources block, with what is absent left out.
std::string Resources(const json& spec) {
  std::vector<std::string> parts;
  if (auto v = Int(spec, "resources.gpus")) parts.push_back(fmt::format("gpus={}", *v));
  if (auto v = Int(spec, "resources.gpu_share_millis"); v && *v > 0) {
    parts.push_back(fmt::format("gpu_share=0.{}", fmt::format("{:03}", *v)
                                                      .substr(0, *v % 100 == 0  ? 1
                                                                 : *v % 10 == 0 ? 2
                                                                                : 3)));
  }
  if (auto v = Int(spec, "resources.gpu_share_bytes"); v && *v > 0) {
    parts.push_back("gpu_share=" + FormatMemory(static_cast<std::uint64_t>(*v)));
  }
  if (std::string model = Text(spec, "resources.gpu_model"); model != "-" && !model.empty()) {
    parts.push_back("model=" + model);
  }
  if (auto v = Int(spec, "resources.gpu_memory_bytes"); v && *v > 0) {
    parts.push_back("gpu_memory>=" + FormatMemory(static_cast<std::uint64_t>(*v)));
  }
  if (auto v = Int(spec, "resources.cpu_millis"); v && *v > 0) {
    parts.push_back("cpu=" + FormatCpuMillis(*v));
  }
  if (auto v = Int(spec, "resources.memory_bytes"); v && *v > 0) {
    parts.push_back("memory=" + FormatMemory(static_cast<std::uint64_t>(*v)));
  }
  if (parts.empty()) return "-";
  return fmt::format("{} (per replica)", fmt::join(parts, " "));
}

std::string Command(const json& spec) {
  std::vector<std::string> argv;
  for (const auto& word : Array(spec, "command")) argv.push_back(ValueText(word));
  return argv.empty() ? "-" : ShellJoin(argv);
}

std::string EnvNames(const json& spec) {
  const json* env = Field(spec, "env");
  if (env == nullptr || !env->is_object() || env->empty()) return "";
  std::vector<std::string> names;
  for (const auto& item : env->items()) names.push_back(item.key());
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string StateWithReason(const json& job) {
  std::string state = Text(job, "state");
  std::string code = Text(job, "reason.code");
  std::string message = Text(job, "reason.message");
  if (code == "-" && message == "-") return state;
  if (code == "-") return fmt::format("{} ({})", state, message);
  if (message == "-") return fmt::format("{} ({})", state, code);
  return fmt::format("{} ({}: {})", state, code, message);
}

// A slice of its GPU: " (500 mGPU, 12Gi)"; whole GPUs: "".
std::string Slice(const json& replica) {
  auto m = Int(replica, "gpu_share_mgpu");
  if (!m || *m <= 0) return "";
  return fmt::format(
      " ({} mGPU, {})", *m,
      FormatMemory(static_cast<std::uint64_t>(Int(replica, "gpu_share_bytes").value_or(0))));
}

std::string PlacementTable(const json& job) {
  const json& placement = Array(job, "placement");
  if (placement.empty()) return "Placement:    none\n";
  Table table({"REPLICA", "NODE", "GPUS", "STATE", "PID", "EXIT"});
  for (const auto& replica : placement) {
    table.AddRow({IntText(replica, "replica"), Text(replica, "node"),
                  Join(Array(replica, "gpus"), ",") + Slice(replica), Text(replica, "state"),
                  IntText(replica, "pid"),
                  FormatExit(Int(replica, "exit_code"), Int(replica, "signal"))});
  }
  return "Placement:\n" + table.Render();
}

std::string TimelineTable(const json& job) {
  const json& timeline = Array(job, "timeline");
  if (timeline.empty()) return "Timeline:     none\n";
  Table table({"TIME", "STATE", "EVENT", "MESSAGE"});
  for (const auto& entry : timeline) {
    auto time = Int(entry, "time_ms");
    table.AddRow({time ? FormatTimeMs(*time) : "-", Text(entry, "state"), Text(entry, "event"),
                  Text(entry, "message")});
  }
  return "Timeline:\n" + table.Render();
}

// The "GPU utilization" lines from the job's "utilization" block (berthd's
// telemetry): nothing when the server sends no such key, "no telemetry yet"
// when it is null.
void Utilization(std::string& out, const json& job) {
  if (!job.is_object() || !job.contains("utilization")) return;
  const json& u = job["utilization"];
  if (!u.is_object() || Int(u, "samples").value_or(0) <= 0) {
    Line(out, "GPU util", "no telemetry yet");
    return;
  }
  auto number = [&](const char* key) {
    const json* v = Field(u, key);
    return v != nullptr && v->is_number() ? v->get<double>() : 0.0;
  };
  auto bytes = [&](const char* key) {
    return FormatMemory(static_cast<std::uint64_t>(std::max(0.0, number(key))));
  };
  Line(out, "GPU util",
       fmt::format("avg {:.1f}%, max {}% ({} samples)", number("avg_util_pct"),
                   IntText(u, "max_util_pct"), IntText(u, "samples")));
  Line(out, "GPU memory",
       fmt::format("avg {}, max {} of {}", bytes("avg_memory_used_bytes"),
                   bytes("max_memory_used_bytes"), bytes("memory_total_bytes")));
  const auto longest = Int(u, "longest_idle_ms").value_or(0);
  Line(
      out, "GPU idle",
      fmt::format("{:.0f}% of samples{}", number("idle_fraction") * 100.0,
                  longest > 0 ? fmt::format(" (longest idle stretch {})", FormatDurationMs(longest))
                              : std::string()));
}

}  // namespace

std::string RenderJob(const json& job, std::int64_t now_ms) {
  static const json kNoSpec = json::object();
  const json* spec_field = Field(job, "spec");
  const json& spec = spec_field != nullptr ? *spec_field : kNoSpec;

  std::string out;
  Line(out, "Job", fmt::format("{} ({})", IntText(job, "id"), FirstOf(job, "name")));
  Line(out, "Tenant/Queue", FirstOf(job, "tenant") + "/" + FirstOf(job, "queue"));
  if (job.contains("array") && job["array"].is_object()) {
    Line(out, "Array",
         fmt::format("{}, index {} of {} (berth jobs --array {})", IntText(job, "array.id"),
                     IntText(job, "array.index"), IntText(job, "array.size"),
                     IntText(job, "array.id")));
  }
  Line(out, "State", StateWithReason(job));
  // The scheduling policy version it was placed under (docs/policy.md).
  if (auto policy = Int(job, "policy_version")) Line(out, "Policy", fmt::format("v{}", *policy));
  Line(out, "Exit", FormatExit(Int(job, "exit_code"), Int(job, "signal")));
  if (std::string cls = Text(job, "failure.class"); cls != "-" && !cls.empty()) {
    Line(out, "Failure", cls + ": " + OneLine(Text(job, "failure.message")));
  }
  Line(out, "Command", Command(spec));
  if (std::string dir = Text(spec, "working_dir"); dir != "-" && !dir.empty()) {
    Line(out, "Working dir", dir);
  }
  if (std::string env = EnvNames(spec); !env.empty()) Line(out, "Env", env);
  Line(out, "Replicas", IntText(spec, "replicas"));
  Line(out, "Resources", Resources(spec));
  Line(out, "Priority", Text(spec, "priority"));
  auto max_runtime = Int(spec, "max_runtime_ms");
  Line(out, "Max runtime",
       max_runtime && *max_runtime > 0 ? FormatDurationMs(*max_runtime) : std::string("-"));
  Line(out, "Submitted", Time(job, "submitted_at_ms", now_ms));
  Line(out, "Started", Time(job, "started_at_ms", now_ms));
  Line(out, "Finished", Time(job, "finished_at_ms", now_ms));
  Utilization(out, job);
  out += '\n';
  out += PlacementTable(job);
  out += '\n';
  out += TimelineTable(job);
  return out;
}

}  // namespace berth::cli
