#include "proto_convert/node.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/utf8.h"

namespace berth::proto_convert {
namespace {

// How much of an unknown health value the detail quotes: enough to
// recognise it, not a way to store an agent's arbitrary text.
constexpr std::size_t kMaxQuotedHealth = 64;

}  // namespace

WireHealth HealthFromWire(std::string_view health, std::string_view detail) {
  if (health == model::HealthName(model::Health::kHealthy)) {
    return {model::Health::kHealthy, std::string(detail), true};
  }
  if (health == model::HealthName(model::Health::kUnhealthy)) {
    return {model::Health::kUnhealthy, std::string(detail), true};
  }
  const std::string quoted =
      health.empty()
          ? std::string("no health")
          : fmt::format("health '{}'{}", EscapeInvalidUtf8(health.substr(0, kMaxQuotedHealth)),
                        health.size() > kMaxQuotedHealth ? "..." : "");
  std::string why = fmt::format(
      "the agent reported {}, which berthd does not know (it knows healthy and unhealthy); no "
      "work is placed on this GPU until the agent reports healthy (check the agent's version)",
      quoted);
  if (!detail.empty()) why += fmt::format("; the agent's detail: {}", detail);
  return {model::Health::kUnhealthy, std::move(why), false};
}

void HealthChangeToProto(const model::Gpu& gpu, v1::GpuHealthChanged* out) {
  out->set_index(gpu.index);
  out->set_uuid(gpu.uuid);
  out->set_health(model::HealthName(gpu.health));
  out->set_health_detail(gpu.health_detail);
}

void NodeToProto(const model::NodeInfo& node, v1::NodeInfo* out) {
  out->set_name(node.name);
  out->set_hostname(node.hostname);
  out->set_address(node.address);
  for (const auto& [k, v] : node.labels) (*out->mutable_labels())[k] = v;
  for (const auto& t : node.taints) {
    auto* taint = out->add_taints();
    taint->set_key(t.key);
    taint->set_value(t.value);
    taint->set_effect(t.effect);
  }
  out->set_cpus(node.cpus);
  out->set_memory_bytes(node.memory_bytes);
  out->set_driver_version(node.driver_version);
  out->set_cuda_version(node.cuda_version);
  out->set_gpu_provider(node.gpu_provider);
  out->set_agent_version(node.agent_version);
  out->set_container_runtime(node.container_runtime);
  auto* c = out->mutable_confinement();
  c->set_mode(node.confinement.mode);
  c->set_cgroup(node.confinement.cgroup);
  for (const auto& x : node.confinement.controllers) c->add_controllers(x);
  for (const auto& x : node.confinement.missing) c->add_missing(x);
  for (const auto& g : node.gpus) {
    auto* gpu = out->add_gpus();
    gpu->set_index(g.index);
    gpu->set_uuid(g.uuid);
    gpu->set_model(g.model);
    gpu->set_memory_bytes(g.memory_bytes);
    gpu->set_health(model::HealthName(g.health));
    gpu->set_health_detail(g.health_detail);
    gpu->set_numa_node(g.numa_node);
    gpu->set_pci_bus_id(g.pci_bus_id);
    gpu->set_nvlink_island(g.nvlink_island);
    gpu->set_sharing(g.sharing);
    for (const auto& p : g.nvlink_peers) {
      auto* peer = gpu->add_nvlink_peers();
      peer->set_index(p.index);
      peer->set_links(p.links);
    }
  }
}

model::NodeInfo NodeFromProto(const v1::NodeInfo& in) {
  model::NodeInfo node;
  node.name = in.name();
  node.hostname = in.hostname();
  node.address = in.address();
  node.labels = {in.labels().begin(), in.labels().end()};
  for (const auto& t : in.taints()) node.taints.push_back({t.key(), t.value(), t.effect()});
  node.cpus = in.cpus();
  node.memory_bytes = in.memory_bytes();
  node.driver_version = in.driver_version();
  node.cuda_version = in.cuda_version();
  node.gpu_provider = in.gpu_provider();
  node.agent_version = in.agent_version();
  node.container_runtime = in.container_runtime();
  node.confinement.mode = in.confinement().mode();
  node.confinement.cgroup = in.confinement().cgroup();
  node.confinement.controllers.assign(in.confinement().controllers().begin(),
                                      in.confinement().controllers().end());
  node.confinement.missing.assign(in.confinement().missing().begin(),
                                  in.confinement().missing().end());
  for (const auto& g : in.gpus()) {
    model::Gpu gpu;
    gpu.index = g.index();
    gpu.uuid = g.uuid();
    gpu.model = g.model();
    gpu.memory_bytes = g.memory_bytes();
    WireHealth health = HealthFromWire(g.health(), g.health_detail());
    gpu.health = health.health;
    gpu.health_detail = std::move(health.detail);
    gpu.numa_node = g.numa_node();
    gpu.pci_bus_id = g.pci_bus_id();
    gpu.nvlink_island = g.nvlink_island();
    gpu.sharing = g.sharing();
    for (const auto& p : g.nvlink_peers()) gpu.nvlink_peers.push_back({p.index(), p.links()});
    node.gpus.push_back(std::move(gpu));
  }
  std::sort(node.gpus.begin(), node.gpus.end(),
            [](const model::Gpu& a, const model::Gpu& b) { return a.index < b.index; });
  return node;
}

}  // namespace berth::proto_convert
