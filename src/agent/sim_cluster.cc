#include "agent/sim_cluster.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "agent/gpu_model.h"
#include "agent/shared_gpus.h"
#include "common/units.h"
#include "common/utf8.h"
#include "model/yaml_utf8.h"

namespace berth::agent {
namespace {

constexpr std::uint32_t kMaxGpus = 64;
// Node and GPU memory: 1 PiB (1024Ti), what berthd accepts in a Register.
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 50;

// A YAML node with the dotted path that names it in errors.
// YAML::Node is a cheap handle; held by value so no reference dangles.
struct At {
  YAML::Node node;
  std::string path;
};

std::unexpected<Error> Bad(const At& at, std::string_view what) {
  int line = at.node.Mark().line;  // -1 for nodes that do not come from text
  std::string where = line >= 0 ? fmt::format(" (line {})", line + 1) : "";
  return InvalidField(at.path, fmt::format("{}{}: {}", at.path, where, what));
}

std::string Describe(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return "nothing";
}

// Visits every key of a map, rejecting keys not in `allowed` and repeats.
template <typename Fn>
Status ForEachField(const At& at, std::initializer_list<std::string_view> allowed, Fn&& fn) {
  if (!at.node.IsMap()) return Bad(at, "must be a map, got " + Describe(at.node));
  std::set<std::string> seen;
  for (const auto& kv : at.node) {
    std::string key = kv.first.Scalar();
    At child{kv.second, at.path.empty() ? key : at.path + "." + key};
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return Bad(child, fmt::format("unknown field '{}'; allowed: {}", key, list));
    }
    if (!seen.insert(key).second) return Bad(child, "field given twice");
    BERTH_RETURN_IF_ERROR(fn(key, child));
  }
  return Ok();
}

Result<std::string> String(const At& at) {
  if (!at.node.IsScalar()) return Bad(at, "must be a string, got " + Describe(at.node));
  return at.node.Scalar();
}

Result<std::int64_t> Integer(const At& at, std::int64_t lo, std::int64_t hi) {
  std::string what = fmt::format("must be an integer {}..{}", lo, hi);
  if (!at.node.IsScalar()) return Bad(at, what + ", got " + Describe(at.node));
  const std::string& s = at.node.Scalar();
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < lo || v > hi) {
    return Bad(at, what + ", got '" + s + "'");
  }
  return v;
}

Result<std::uint64_t> Bytes(const At& at) {
  if (!at.node.IsScalar()) return Bad(at, "must be a size like 80Gi, got " + Describe(at.node));
  auto bytes = ParseBytes(at.node.Scalar(), kMaxBytes);
  if (!bytes) return Bad(at, bytes.error().message);
  if (*bytes == 0) return Bad(at, "must be more than 0");
  return *bytes;
}

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
    if (!ok) return false;
  }
  return std::isalnum(static_cast<unsigned char>(s.front()));
}

Result<model::Taint> ParseTaint(const At& at) {
  model::Taint t;
  bool has_key = false;
  BERTH_RETURN_IF_ERROR(ForEachField(
      at, {"key", "value", "effect"}, [&](const std::string& k, const At& f) -> Status {
        auto s = String(f);
        if (!s) return std::unexpected(s.error());
        if (k == "key") {
          if (s->empty()) return Bad(f, "must not be empty");
          t.key = *s;
          has_key = true;
        } else if (k == "value") {
          t.value = *s;
        } else {
          if (*s != "NoSchedule" && *s != "PreferNoSchedule") {
            return Bad(f, "must be NoSchedule or PreferNoSchedule, got '" + *s + "'");
          }
          t.effect = *s;
        }
        return Ok();
      }));
  if (!has_key) return Bad(at, "a taint needs a key");
  return t;
}

// The GPU group of one node. Islands: absent means one island of all GPUs
// (NVSwitch); listed islands must be disjoint; unlisted GPUs stand alone.
struct GpuSpec {
  std::string model;
  std::uint64_t memory = 0;
  std::int64_t count = 0;
  std::int64_t numa_nodes = 0;  // 0: unknown
  std::optional<At> islands;    // checked once count is known
  std::optional<At> unhealthy;
};

Status ParseGpus(const At& at, const std::string& node_name, model::NodeInfo& node) {
  GpuSpec g;
  bool has_model = false;
  bool has_memory = false;
  bool has_count = false;
  BERTH_RETURN_IF_ERROR(
      ForEachField(at, {"model", "memory", "count", "nvlink_islands", "numa_nodes", "unhealthy"},
                   [&](const std::string& k, const At& f) -> Status {
                     if (k == "model") {
                       auto s = String(f);
                       if (!s) return std::unexpected(s.error());
                       if (s->empty()) return Bad(f, "must not be empty, e.g. H100-80GB");
                       g.model = *s;
                       has_model = true;
                     } else if (k == "memory") {
                       auto b = Bytes(f);
                       if (!b) return std::unexpected(b.error());
                       g.memory = *b;
                       has_memory = true;
                     } else if (k == "count") {
                       auto n = Integer(f, 0, kMaxGpus);
                       if (!n) return std::unexpected(n.error());
                       g.count = *n;
                       has_count = true;
                     } else if (k == "numa_nodes") {
                       auto n = Integer(f, 1, 16);
                       if (!n) return std::unexpected(n.error());
                       g.numa_nodes = *n;
                     } else if (k == "nvlink_islands") {
                       g.islands = f;
                     } else {
                       g.unhealthy = f;
                     }
                     return Ok();
                   }));
  if (!has_count) return Bad(at, "count is required (0..64)");
  if (g.count > 0 && !has_model) return Bad(at, "model is required, e.g. H100-80GB");
  if (g.count > 0 && !has_memory) return Bad(at, "memory is required, e.g. 80Gi");
  const auto count = static_cast<std::uint32_t>(g.count);

  std::vector<model::Gpu> gpus = SimulatedGpus(node_name, g.model, g.memory, count, {});
  for (std::uint32_t i = 0; i < count && g.numa_nodes > 0; ++i) {
    gpus[i].numa_node =
        static_cast<std::int32_t>(i * static_cast<std::uint32_t>(g.numa_nodes) / count);
  }

  std::vector<std::vector<std::uint32_t>> islands;
  if (!g.islands) {
    islands.emplace_back();
    for (std::uint32_t i = 0; i < count; ++i) islands.back().push_back(i);
  } else {
    const At& list = *g.islands;
    if (!list.node.IsSequence()) {
      return Bad(list, "must be a list of GPU index lists, e.g. [[0,1,2,3],[4,5,6,7]]");
    }
    std::set<std::uint32_t> used;
    for (std::size_t k = 0; k < list.node.size(); ++k) {
      At island{list.node[k], fmt::format("{}[{}]", list.path, k)};
      if (!island.node.IsSequence()) return Bad(island, "must be a list of GPU indices");
      islands.emplace_back();
      for (std::size_t m = 0; m < island.node.size(); ++m) {
        At idx{island.node[m], fmt::format("{}[{}]", island.path, m)};
        if (count == 0) return Bad(idx, "names a GPU but count is 0");
        auto v = Integer(idx, 0, count - 1);
        if (!v) return std::unexpected(v.error());
        auto gpu = static_cast<std::uint32_t>(*v);
        if (!used.insert(gpu).second) return Bad(idx, fmt::format("GPU {} is in two islands", gpu));
        islands.back().push_back(gpu);
      }
    }
  }
  LinkIslands(gpus, islands);

  if (g.unhealthy) {
    const At& map = *g.unhealthy;
    if (!map.node.IsMap())
      return Bad(map, "must be a map of GPU index to detail, e.g. {3: Xid 79}");
    for (const auto& kv : map.node) {
      At key{kv.first, fmt::format("{}.{}", map.path, kv.first.Scalar())};
      if (count == 0) return Bad(key, "names a GPU but count is 0");
      auto v = Integer(key, 0, count - 1);
      if (!v) return std::unexpected(v.error());
      auto detail = String(At{kv.second, key.path});
      if (!detail) return std::unexpected(detail.error());
      auto& gpu = gpus[static_cast<std::size_t>(*v)];
      gpu.health = model::Health::kUnhealthy;
      gpu.health_detail = detail->empty() ? "unhealthy" : *detail;
    }
  }
  node.gpus = std::move(gpus);
  return Ok();
}

// shared_gpus: all | [0, 1]: the GPUs in sharing mode.
Status ParseSharedGpusField(const At& at, model::NodeInfo& node) {
  SharedGpus shared;
  if (at.node.IsScalar() && at.node.Scalar() == "all") {
    shared.all = true;
  } else if (at.node.IsSequence()) {
    const auto count = static_cast<std::int64_t>(node.gpus.size());
    for (std::size_t k = 0; k < at.node.size(); ++k) {
      At idx{at.node[k], fmt::format("{}[{}]", at.path, k)};
      if (count == 0) return Bad(idx, "names a GPU but the node has none");
      auto v = Integer(idx, 0, count - 1);
      if (!v) return std::unexpected(v.error());
      shared.indices.insert(static_cast<std::uint32_t>(*v));
    }
  } else {
    return Bad(at, "must be all or a list of GPU indices, e.g. [0, 1]");
  }
  return MarkShared(shared, node.gpus);
}

Result<model::NodeInfo> ParseNode(const At& at) {
  model::NodeInfo node;
  node.driver_version = "sim";
  node.cuda_version = "12.4";
  node.gpu_provider = "simulated";
  // The name comes first: GPU UUIDs are derived from it.
  if (!at.node.IsMap()) return Bad(at, "must be a map, got " + Describe(at.node));
  At name_at{at.node["name"], at.path + ".name"};
  if (!name_at.node.IsDefined()) return Bad(at, "name is required");
  auto name = String(name_at);
  if (!name) return std::unexpected(name.error());
  if (!ValidName(*name)) {
    return Bad(name_at,
               "must be 1..63 letters, digits, '-', '.' or '_', starting with a "
               "letter or digit, got '" +
                   *name + "'");
  }
  node.name = *name;
  node.hostname = *name;
  bool has_cpus = false;
  bool has_memory = false;
  std::optional<At> shared;  // applied once the GPUs are known
  BERTH_RETURN_IF_ERROR(
      ForEachField(at,
                   {"name", "hostname", "labels", "taints", "cpus", "memory", "driver_version",
                    "cuda_version", "gpus", "shared_gpus"},
                   [&](const std::string& k, const At& f) -> Status {
                     if (k == "name") return Ok();
                     if (k == "shared_gpus") {
                       shared = f;
                       return Ok();
                     }
                     if (k == "hostname" || k == "driver_version" || k == "cuda_version") {
                       auto s = String(f);
                       if (!s) return std::unexpected(s.error());
                       (k == "hostname"         ? node.hostname
                        : k == "driver_version" ? node.driver_version
                                                : node.cuda_version) = *s;
                     } else if (k == "labels") {
                       if (!f.node.IsMap()) return Bad(f, "must be a map of label to value");
                       for (const auto& kv : f.node) {
                         At v{kv.second, f.path + "." + kv.first.Scalar()};
                         auto s = String(v);
                         if (!s) return std::unexpected(s.error());
                         if (kv.first.Scalar().empty())
                           return Bad(v, "label keys must not be empty");
                         node.labels[kv.first.Scalar()] = *s;
                       }
                     } else if (k == "taints") {
                       if (!f.node.IsSequence())
                         return Bad(f, "must be a list of {key, value, effect}");
                       for (std::size_t i = 0; i < f.node.size(); ++i) {
                         auto t = ParseTaint(At{f.node[i], fmt::format("{}[{}]", f.path, i)});
                         if (!t) return std::unexpected(t.error());
                         node.taints.push_back(std::move(*t));
                       }
                     } else if (k == "cpus") {
                       auto n = Integer(f, 1, 1 << 20);
                       if (!n) return std::unexpected(n.error());
                       node.cpus = static_cast<std::uint32_t>(*n);
                       has_cpus = true;
                     } else if (k == "memory") {
                       auto b = Bytes(f);
                       if (!b) return std::unexpected(b.error());
                       node.memory_bytes = *b;
                       has_memory = true;
                     } else {
                       return ParseGpus(f, node.name, node);
                     }
                     return Ok();
                   }));
  if (!has_cpus) return Bad(at, "cpus is required, e.g. 64");
  if (!has_memory) return Bad(at, "memory is required, e.g. 512Gi");
  if (shared) BERTH_RETURN_IF_ERROR(ParseSharedGpusField(*shared, node));
  return node;
}

Result<std::vector<model::NodeInfo>> ParseDocument(const YAML::Node& root) {
  At top{root, ""};
  if (!root.IsMap()) return Bad(At{root, "(top level)"}, "must be a map with a 'nodes' list");
  std::vector<model::NodeInfo> nodes;
  bool has_nodes = false;
  BERTH_RETURN_IF_ERROR(
      ForEachField(top, {"nodes"}, [&](const std::string&, const At& f) -> Status {
        has_nodes = true;
        if (!f.node.IsSequence() || f.node.size() == 0) return Bad(f, "must be a non-empty list");
        std::map<std::string, std::size_t> first_seen;
        for (std::size_t i = 0; i < f.node.size(); ++i) {
          At item{f.node[i], fmt::format("nodes[{}]", i)};
          auto node = ParseNode(item);
          if (!node) return std::unexpected(node.error());
          auto [it, inserted] = first_seen.try_emplace(node->name, i);
          if (!inserted) {
            return Bad(
                At{item.node["name"], item.path + ".name"},
                fmt::format("duplicate node name '{}' (also nodes[{}])", node->name, it->second));
          }
          nodes.push_back(std::move(*node));
        }
        return Ok();
      }));
  if (!has_nodes) return InvalidField("nodes", "nodes: required list of nodes is missing");
  return nodes;
}

}  // namespace

Result<std::vector<model::NodeInfo>> ParseSimulatedCluster(std::string_view yaml) {
  // yaml-cpp reports syntax errors (and some lookups) by exception; none may
  // leave this module.
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    BERTH_RETURN_IF_ERROR(model::CheckYamlUtf8(root, yaml.size()));
    return ParseDocument(root);
  } catch (const YAML::Exception& e) {
    return InvalidField("", fmt::format("line {}, column {}: {}", e.mark.line + 1,
                                        e.mark.column + 1, EscapeInvalidUtf8(e.msg)));
  } catch (const std::exception& e) {
    return InvalidField("", EscapeInvalidUtf8(e.what()));
  }
}

Result<std::vector<model::NodeInfo>> LoadSimulatedCluster(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return Fail(Code::kNotFound, "cannot read simulated cluster file " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  auto nodes = ParseSimulatedCluster(text.str());
  if (!nodes) nodes.error().message = path.string() + ": " + nodes.error().message;
  return nodes;
}

std::vector<model::Gpu> SimulatedGpus(std::string_view node_name, std::string_view model,
                                      std::uint64_t memory_bytes, std::uint32_t count,
                                      const std::vector<std::vector<std::uint32_t>>& islands) {
  std::vector<model::Gpu> gpus(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    gpus[i].index = i;
    gpus[i].uuid = fmt::format("SIM-{}-{}", node_name, i);
    gpus[i].model = std::string(model);
    gpus[i].memory_bytes = memory_bytes;
    gpus[i].pci_bus_id = fmt::format("00000000:{:02X}:00.0", i + 1);
  }
  LinkIslands(gpus, islands);
  return gpus;
}

void LinkIslands(std::vector<model::Gpu>& gpus,
                 const std::vector<std::vector<std::uint32_t>>& islands) {
  for (auto& gpu : gpus) gpu.nvlink_peers.clear();
  for (const auto& island : islands) {
    for (auto a : island) {
      for (auto b : island) {
        if (a != b && a < gpus.size()) gpus[a].nvlink_peers.push_back({b, 1});
      }
    }
  }
  AssignNvlinkIslands(gpus);
}

Result<model::NodeInfo> SelectSimulatedNode(const std::vector<model::NodeInfo>& nodes,
                                            std::string_view name) {
  if (name.empty()) {
    if (nodes.size() == 1) return nodes.front();
    return Fail(Code::kInvalidArgument,
                fmt::format("the cluster file has {} nodes; choose one with --simulate-node",
                            nodes.size()));
  }
  std::string names;
  for (const auto& n : nodes) {
    if (n.name == name) return n;
    names += (names.empty() ? "" : ", ") + n.name;
  }
  return Fail(Code::kNotFound,
              fmt::format("no node '{}' in the cluster file; it has: {}", name, names));
}

}  // namespace berth::agent
