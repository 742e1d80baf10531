#include "model/json.h"

namespace berth::model {

using nlohmann::json;

json ToJson(const Resources& r) {
  return {{"gpus", r.gpus},
          {"gpu_model", r.gpu_model},
          {"gpu_memory_bytes", r.gpu_memory_bytes},
          {"cpu_millis", r.cpu_millis},
          {"memory_bytes", r.memory_bytes},
          {"gpu_share_millis", r.gpu_share_millis},
          {"gpu_share_bytes", r.gpu_share_bytes}};
}

Resources ResourcesFromJson(const json& j) {
  Resources r;
  r.gpus = j.value("gpus", 0U);
  r.gpu_model = j.value("gpu_model", "");
  r.gpu_memory_bytes = j.value("gpu_memory_bytes", std::uint64_t{0});
  r.cpu_millis = j.value("cpu_millis", 0U);
  r.memory_bytes = j.value("memory_bytes", std::uint64_t{0});
  r.gpu_share_millis = j.value("gpu_share_millis", 0U);
  r.gpu_share_bytes = j.value("gpu_share_bytes", std::uint64_t{0});
  return r;
}

json ToJson(const JobSpec& s) {
  json tolerations = json::array();
  for (const auto& t : s.tolerations) {
    tolerations.push_back({{"key", t.key}, {"value", t.value}, {"effect", t.effect}});
  }
  json j{{"name", s.name},
         {"tenant", s.tenant},
         {"queue", s.queue},
         {"command", s.command},
         {"env", s.env},
         {"secret_env", s.secret_env},
         {"working_dir", s.working_dir},
         {"replicas", s.replicas},
         {"resources", ToJson(s.resources)},
         {"priority", PriorityName(s.priority)},
         {"max_runtime_ms", s.max_runtime_ms},
         {"node_selector", s.node_selector},
         {"tolerations", tolerations},
         {"pool", s.pool},
         {"topology",
          {{"one_node", s.topology.one_node},
           {"nvlink_island", NvlinkIslandName(s.topology.nvlink_island)}}}};
  if (s.preemptible) j["preemptible"] = *s.preemptible;
  if (s.checkpoint.enabled) {
    j["checkpoint"] = {{"dir", s.checkpoint.dir},
                       {"grace_ms", s.checkpoint.grace_ms},
                       {"signal", s.checkpoint.signal},
                       {"file", s.checkpoint.file}};
  }
  j["retry"] = {{"max_attempts", s.retry.max_attempts},
                {"backoff_ms", s.retry.backoff_ms},
                {"on", s.retry.on}};
  if (!s.image.empty()) j["image"] = s.image;
  if (!s.mounts.empty()) {
    json mounts = json::array();
    for (const auto& m : s.mounts) mounts.push_back({{"path", m.path}, {"read_only", m.read_only}});
    j["mounts"] = std::move(mounts);
  }
  if (s.array) {
    j["array"] = {{"first", s.array->first}, {"count", s.array->count}};
    if (!s.array->params.empty()) j["array"]["params"] = s.array->params;
  }
  if (s.array_element) {
    j["array_element"] = {{"id", s.array_element->id},
                          {"index", s.array_element->index},
                          {"size", s.array_element->size}};
  }
  if (s.service) {
    j["service"] = {
        {"name", s.service->name}, {"revision", s.service->revision}, {"port", s.service->port}};
    if (s.service->readiness.kind != ProbeKind::kNone) {
      j["service"]["readiness"] = ToJson(s.service->readiness);
    }
    if (s.service->liveness.kind != ProbeKind::kNone) {
      j["service"]["liveness"] = ToJson(s.service->liveness);
    }
  }
  if (s.load != LoadProfile{}) {
    j["load"] = {{"pattern", LoadPatternName(s.load.pattern)},
                 {"util_pct", s.load.util_pct},
                 {"idle_util_pct", s.load.idle_util_pct},
                 {"memory_pct", s.load.memory_pct},
                 {"period_ms", s.load.period_ms},
                 {"idle_after_ms", s.load.idle_after_ms}};
  }
  return j;
}

JobSpec JobSpecFromJson(const json& j) {
  JobSpec s;
  s.name = j.value("name", "");
  s.tenant = j.value("tenant", "default");
  s.queue = j.value("queue", "default");
  s.command = j.value("command", std::vector<std::string>{});
  s.env = j.value("env", std::map<std::string, std::string>{});
  s.secret_env = j.value("secret_env", std::set<std::string>{});
  s.working_dir = j.value("working_dir", "");
  s.replicas = j.value("replicas", 1U);
  if (auto r = j.find("resources"); r != j.end()) s.resources = ResourcesFromJson(*r);
  s.priority = ParsePriority(j.value("priority", "normal")).value_or(Priority::kNormal);
  s.max_runtime_ms = j.value("max_runtime_ms", std::int64_t{0});
  if (auto p = j.find("preemptible"); p != j.end() && p->is_boolean())
    s.preemptible = p->get<bool>();
  s.node_selector = j.value("node_selector", std::map<std::string, std::string>{});
  for (const auto& t : j.value("tolerations", json::array())) {
    s.tolerations.push_back({t.value("key", ""), t.value("value", ""), t.value("effect", "")});
  }
  s.pool = j.value("pool", "");
  if (auto t = j.find("topology"); t != j.end()) {
    s.topology.one_node = t->value("one_node", false);
    auto island = t->value("nvlink_island", "none");
    s.topology.nvlink_island = island == "require"  ? NvlinkIsland::kRequire
                               : island == "prefer" ? NvlinkIsland::kPrefer
                                                    : NvlinkIsland::kNone;
  }
  if (auto c = j.find("checkpoint"); c != j.end() && c->is_object()) {
    s.checkpoint.enabled = true;
    s.checkpoint.dir = c->value("dir", "");
    s.checkpoint.grace_ms = c->value("grace_ms", std::int64_t{0});
    s.checkpoint.signal = c->value("signal", "SIGTERM");
    s.checkpoint.file = c->value("file", "");
  }
  if (auto r = j.find("retry"); r != j.end() && r->is_object()) {
    s.retry.max_attempts = r->value("max_attempts", s.retry.max_attempts);
    s.retry.backoff_ms = r->value("backoff_ms", s.retry.backoff_ms);
    s.retry.on = r->value("on", s.retry.on);
  }
  s.image = j.value("image", "");
  for (const auto& m : j.value("mounts", json::array())) {
    s.mounts.push_back({m.value("path", ""), m.value("read_only", false)});
  }
  if (auto l = j.find("load"); l != j.end() && l->is_object()) {
    s.load.pattern = ParseLoadPattern(l->value("pattern", "steady")).value_or(LoadPattern::kSteady);
    s.load.util_pct = l->value("util_pct", s.load.util_pct);
    s.load.idle_util_pct = l->value("idle_util_pct", s.load.idle_util_pct);
    s.load.memory_pct = l->value("memory_pct", s.load.memory_pct);
    s.load.period_ms = l->value("period_ms", s.load.period_ms);
    s.load.idle_after_ms = l->value("idle_after_ms", s.load.idle_after_ms);
  }
  if (auto a = j.find("array"); a != j.end() && a->is_object()) {
    JobArray arr;
    arr.first = a->value("first", 0U);
    arr.count = a->value("count", 0U);
    arr.params = a->value("params", std::vector<std::map<std::string, std::string>>{});
    s.array = std::move(arr);
  }
  if (auto e = j.find("array_element"); e != j.end() && e->is_object()) {
    s.array_element =
        ArrayElement{e->value("id", std::int64_t{0}), e->value("index", 0U), e->value("size", 0U)};
  }
  if (auto o = j.find("service"); o != j.end() && o->is_object()) {
    s.service = ServiceOwner{o->value("name", std::string{}), o->value("revision", std::int64_t{0}),
                             o->value("port", std::uint32_t{0})};
    if (auto r = o->find("readiness"); r != o->end()) s.service->readiness = ProbeFromJson(*r);
    if (auto l = o->find("liveness"); l != o->end()) s.service->liveness = ProbeFromJson(*l);
  }
  return s;
}

json ToJson(const NodeInfo& n) {
  json gpus = json::array();
  for (const auto& g : n.gpus) {
    json peers = json::array();
    for (const auto& p : g.nvlink_peers) peers.push_back({{"index", p.index}, {"links", p.links}});
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"model", g.model},
                    {"memory_bytes", g.memory_bytes},
                    {"health", HealthName(g.health)},
                    {"health_detail", g.health_detail},
                    {"numa_node", g.numa_node},
                    {"pci_bus_id", g.pci_bus_id},
                    {"nvlink_island", g.nvlink_island},
                    {"sharing", g.sharing},
                    {"nvlink_peers", peers}});
  }
  json taints = json::array();
  for (const auto& t : n.taints) {
    taints.push_back({{"key", t.key}, {"value", t.value}, {"effect", t.effect}});
  }
  return json{{"name", n.name},
              {"hostname", n.hostname},
              {"address", n.address},
              {"labels", n.labels},
              {"taints", taints},
              {"cpus", n.cpus},
              {"memory_bytes", n.memory_bytes},
              {"driver_version", n.driver_version},
              {"cuda_version", n.cuda_version},
              {"gpu_provider", n.gpu_provider},
              {"agent_version", n.agent_version},
              {"container_runtime", n.container_runtime},
              {"confinement",
               {{"mode", n.confinement.mode},
                {"cgroup", n.confinement.cgroup},
                {"controllers", n.confinement.controllers},
                {"missing", n.confinement.missing}}},
              {"gpus", gpus}};
}

NodeInfo NodeInfoFromJson(const json& j) {
  NodeInfo n;
  n.name = j.value("name", "");
  n.hostname = j.value("hostname", "");
  n.address = j.value("address", "");
  n.labels = j.value("labels", std::map<std::string, std::string>{});
  for (const auto& t : j.value("taints", json::array())) {
    n.taints.push_back({t.value("key", ""), t.value("value", ""), t.value("effect", "NoSchedule")});
  }
  n.cpus = j.value("cpus", 0U);
  n.memory_bytes = j.value("memory_bytes", std::uint64_t{0});
  n.driver_version = j.value("driver_version", "");
  n.cuda_version = j.value("cuda_version", "");
  n.gpu_provider = j.value("gpu_provider", "");
  n.agent_version = j.value("agent_version", "");
  n.container_runtime = j.value("container_runtime", "");
  if (auto c = j.find("confinement"); c != j.end() && c->is_object()) {
    n.confinement.mode = c->value("mode", "");
    n.confinement.cgroup = c->value("cgroup", "");
    n.confinement.controllers = c->value("controllers", std::vector<std::string>{});
    n.confinement.missing = c->value("missing", std::vector<std::string>{});
  }
  for (const auto& g : j.value("gpus", json::array())) {
    Gpu gpu;
    gpu.index = g.value("index", 0U);
    gpu.uuid = g.value("uuid", "");
    gpu.model = g.value("model", "");
    gpu.memory_bytes = g.value("memory_bytes", std::uint64_t{0});
    gpu.health = g.value("health", "healthy") == "healthy" ? Health::kHealthy : Health::kUnhealthy;
    gpu.health_detail = g.value("health_detail", "");
    gpu.numa_node = g.value("numa_node", -1);
    gpu.pci_bus_id = g.value("pci_bus_id", "");
    gpu.nvlink_island = g.value("nvlink_island", 0U);
    gpu.sharing = g.value("sharing", false);
    for (const auto& p : g.value("nvlink_peers", json::array())) {
      gpu.nvlink_peers.push_back({p.value("index", 0U), p.value("links", 0U)});
    }
    n.gpus.push_back(std::move(gpu));
  }
  return n;
}

json ToJson(const Reason& r) {
  json counts = json::object();
  for (const auto& [k, v] : r.counts) counts[k] = v;
  return json{{"code", ReasonCodeName(r.code)},
              {"counts", counts},
              {"detail", r.detail},
              {"message", RenderReason(r)}};
}

Reason ReasonFromJson(const json& j) {
  Reason r;
  auto code = j.value("code", "None");
  for (int c = 0; c <= static_cast<int>(kLastReasonCode); ++c) {
    if (ReasonCodeName(static_cast<ReasonCode>(c)) == code) r.code = static_cast<ReasonCode>(c);
  }
  const json counts = j.value("counts", json::object());  // items() must not outlive it
  for (const auto& [k, v] : counts.items()) r.counts[k] = v.get<std::int64_t>();
  r.detail = j.value("detail", "");
  return r;
}

}  // namespace berth::model
