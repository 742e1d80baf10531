// RenderNodes, RenderGpus and GpuHolder: the cluster views.
#include <fmt/format.h>

#include <algorithm>
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

// "Ready", or "Ready,Cordoned" / "Ready,Draining" when an admin holds it.
std::string NodeState(const json& node) {
  std::string state = Text(node, "state");
  const json* cordon = Field(node, "cordon");
  if (cordon == nullptr || !cordon->is_object()) return state;
  return state + (Text(*cordon, "kind") == "drain" ? ",Draining" : ",Cordoned");
}

// "-", or "cordoned by berth: Xid 79 ..." for a GPU (or its node) on hold.
std::string CordonText(const json& obj) {
  const json* cordon = Field(obj, "cordon");
  if (cordon == nullptr || !cordon->is_object()) return "-";
  std::string reason = Text(*cordon, "reason");
  return Truncate(OneLine(fmt::format(
                      "{} by {}{}", Text(*cordon, "kind") == "drain" ? "draining" : "cordoned",
                      Text(*cordon, "by"), reason.empty() || reason == "-" ? "" : ": " + reason)),
                  kHealthWidth);
}

// Milli-GPUs as GPUs: 250 -> "0.25", 1000 -> "1".
std::string GpuAmount(std::int64_t milli) {
  std::string out = fmt::format("{}.{:03}", milli / 1000, milli % 1000);
  while (out.back() == '0') out.pop_back();
  if (out.back() == '.') out.pop_back();
  return out;
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

// A sharing GPU: "0.5 used, 40Gi free"; a GPU outside sharing mode: "-".
std::string GpuSharing(const json& gpu) {
  const json* s = Field(gpu, "sharing");
  if (s == nullptr || !s->is_object()) return "-";
  return fmt::format("{} used, {} free", GpuAmount(Int(*s, "used_mgpu").value_or(0)),
                     Memory(*s, "free_memory_bytes"));
}

// The jobs holding a GPU: the whole-GPU holder, or each slice's holder with
// its share ("12 infer/r0 0.25; 13 chat/r1 0.5").
std::string GpuHolders(const json& gpu) {
  const json* s = Field(gpu, "sharing");
  if (s == nullptr || !s->is_object() || Array(*s, "holders").empty()) return GpuHolder(gpu);
  std::string out;
  for (const auto& h : Array(*s, "holders")) {
    out += fmt::format("{}{} {}/r{} {}", out.empty() ? "" : "; ", IntText(h, "id"), Text(h, "name"),
                       IntText(h, "replica"), GpuAmount(Int(h, "gpu_share_mgpu").value_or(0)));
  }
  return out;
}

namespace {

// "enforced (v1)", "single-user", with a "!" when something is not
// confined there (berth node NAME says what); "-" for an agent that does
// not say.
std::string ConfinementText(const json& node) {
  const json* c = Field(node, "confinement");
  if (c == nullptr || !c->is_object() || Text(*c, "mode") == "-") return "-";
  std::string out = Text(*c, "mode");
  if (out == "enforced") out += " (" + Text(*c, "cgroup") + ")";
  if (!Array(*c, "missing").empty()) out += " !";
  return out;
}

}  // namespace

std::string RenderNodes(const json& response, std::int64_t now_ms) {
  const json& nodes = Array(response, "nodes");
  if (nodes.empty()) return "No nodes registered.\n";
  Table table({"NAME", "STATE", "GPUS(FREE/TOTAL)", "MODELS", "CPUS", "MEMORY", "PROVIDER",
               "CONFINEMENT", "HEARTBEAT"});
  for (const auto& node : nodes) {
    table.AddRow({Text(node, "name"), NodeState(node),
                  IntText(node, "gpus_free") + "/" + IntText(node, "gpus_total"),
                  Join(Array(node, "models"), ","), IntText(node, "cpus"),
                  Memory(node, "memory_bytes"), Text(node, "gpu_provider"), ConfinementText(node),
                  AgeSince(now_ms, Int(node, "last_heartbeat_ms"))});
  }
  return table.Render();
}

std::string RenderGpus(const json& response) {
  const json& gpus = Array(response, "gpus");
  if (gpus.empty()) return "No GPUs registered.\n";
  // The CORDON column appears only when something is cordoned.
  const bool cordons =
      std::any_of(gpus.begin(), gpus.end(), [](const json& g) { return CordonText(g) != "-"; });
  Table table =
      cordons ? Table({"NODE", "INDEX", "MODEL", "MEMORY", "HEALTH", "CORDON", "SHARING", "JOB"})
              : Table({"NODE", "INDEX", "MODEL", "MEMORY", "HEALTH", "SHARING", "JOB"});
  for (const auto& gpu : gpus) {
    std::vector<std::string> row{Text(gpu, "node"), IntText(gpu, "index"), Text(gpu, "model"),
                                 Memory(gpu, "memory_bytes"), Health(gpu)};
    if (cordons) row.push_back(CordonText(gpu));
    row.push_back(GpuSharing(gpu));
    row.push_back(GpuHolders(gpu));
    table.AddRow(row);
  }
  return table.Render();
}

std::string RenderNode(const json& node, std::int64_t now_ms) {
  std::string out = fmt::format("Node {}: {}\n", Text(node, "name"), NodeState(node));
  if (const json* cordon = Field(node, "cordon"); cordon != nullptr && cordon->is_object()) {
    out += fmt::format("  {}\n", CordonText(node));
  }
  out += fmt::format("  GPUs {} free of {}, provider {}, heartbeat {}\n",
                     IntText(node, "gpus_free"), IntText(node, "gpus_total"),
                     Text(node, "gpu_provider"), AgeSince(now_ms, Int(node, "last_heartbeat_ms")));
  if (const json* c = Field(node, "confinement"); c != nullptr && c->is_object()) {
    out += fmt::format("  Confinement: {}, cgroup {} ({})\n", Text(*c, "mode"), Text(*c, "cgroup"),
                       Join(Array(*c, "controllers"), ", "));
    for (const auto& gap : Array(*c, "missing")) {
      out += fmt::format("  ! {}\n", gap.is_string() ? gap.get<std::string>() : gap.dump());
    }
  }
  out += "\n";
  out += RenderGpus(node);
  const json& events = Array(node, "events");
  if (!events.empty()) {
    out += "\nEvents:\n";
    Table table({"AGE", "EVENT", "MESSAGE"});
    for (const auto& e : events) {
      table.AddRow(
          {AgeSince(now_ms, Int(e, "time_ms")), Text(e, "event"), OneLine(Text(e, "message"))});
    }
    out += table.Render();
  }
  return out;
}

std::string RenderAlerts(const json& response, std::int64_t now_ms) {
  const json& alerts = Array(response, "alerts");
  if (alerts.empty()) return "No open alerts.\n";
  Table table({"ID", "AGE", "SEVERITY", "KIND", "NODE", "GPU", "STATUS", "MESSAGE"});
  for (const auto& a : alerts) {
    auto resolved = Int(a, "resolved_ms");
    table.AddRow({IntText(a, "id"), AgeSince(now_ms, Int(a, "raised_ms")), Text(a, "severity"),
                  Text(a, "kind"), Text(a, "node"), IntText(a, "gpu"),
                  resolved ? "resolved by " + Text(a, "resolved_by") : "open",
                  OneLine(Text(a, "message"))});
  }
  return table.Render();
}

}  // namespace berth::cli
