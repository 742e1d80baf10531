// RenderNodes, RenderGpus and GpuHolder: the cluster views.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/render.h"
#include "cli/table.h"

namespace berth::cli {
namespace {

using nlohmann::json;

// Health detail is a driver message (XID text) that can run long.
constexpr std::size_t kHealthWidth = 40;

std::string Memory(const json& obj, std::string_view path) {
  auto bytes = Int(obj, path);
  return bytes && *bytes >= 0 ? FormatMemory(static_cast<std::uint64_t>(*bytes)) : "-";
}

std::string Health(const json& gpu) {
  std::string health = Text(gpu, "health");
  std::string detail = Text(gpu, "health_detail");
  if (detail == "-" || detail.empty() || health == "Healthy") return health;
  return Truncate(OneLine(fmt::format("{} ({})", health, detail)), kHealthWidth);
}

}  // namespace

std::string GpuHolder(const json& gpu) {
  const json* job = Field(gpu, "job");
  if (job == nullptr) return "-";
  if (!job->is_object()) return ValueText(*job);
  auto id = Int(*job, "id");
  std::string name = Text(*job, "name");
  auto replica = Int(*job, "replica");
  std::string out = id ? std::to_string(*id) : "";
  if (name != "-") out += (out.empty() ? "" : " ") + name;
  if (replica) out += fmt::format("/r{}", *replica);
  if (!out.empty()) return out;
  // A holder berthd will not name still must not read as a free GPU.
  std::string tenant = Text(*job, "tenant");
  return tenant != "-" ? tenant : "(held)";
}

std::string RenderNodes(const json& response, std::int64_t now_ms) {
  const json& nodes = Array(response, "nodes");
  if (nodes.empty()) return "No nodes registered.\n";
  Table table(
      {"NAME", "STATE", "GPUS(FREE/TOTAL)", "MODELS", "CPUS", "MEMORY", "PROVIDER", "HEARTBEAT"});
  for (const auto& node : nodes) {
    table.AddRow({Text(node, "name"), Text(node, "state"),
                  IntText(node, "gpus_free") + "/" + IntText(node, "gpus_total"),
                  Join(Array(node, "models"), ","), IntText(node, "cpus"),
                  Memory(node, "memory_bytes"), Text(node, "gpu_provider"),
                  AgeSince(now_ms, Int(node, "last_heartbeat_ms"))});
  }
  return table.Render();
}

std::string RenderGpus(const json& response) {
  const json& gpus = Array(response, "gpus");
  if (gpus.empty()) return "No GPUs registered.\n";
  Table table({"NODE", "INDEX", "MODEL", "MEMORY", "HEALTH", "JOB"});
  for (const auto& gpu : gpus) {
    table.AddRow({Text(gpu, "node"), IntText(gpu, "index"), Text(gpu, "model"),
                  Memory(gpu, "memory_bytes"), Health(gpu), GpuHolder(gpu)});
  }
  return table.Render();
}

}  // namespace berth::cli
