#include "model/job.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <set>

#include "common/units.h"
#include "model/yaml_object.h"

namespace berth::model {
namespace {

constexpr std::array<std::string_view, 23> kJobFields{
    "name",        "tenant",        "queue",       "command",   "args",     "env",
    "secret_env",  "working_dir",   "replicas",    "resources", "priority", "max_runtime",
    "preemptible", "node_selector", "tolerations", "pool",      "topology", "checkpoint",
    "retry",       "image",         "load",        "mounts",    "array"};
constexpr std::array<std::string_view, 2> kMountFields{"path", "read_only"};
constexpr std::array<std::string_view, 6> kLoadFields{"pattern", "utilization", "idle_utilization",
                                                      "memory",  "period",      "idle_after"};
constexpr std::array<std::string_view, 4> kCheckpointFields{"dir", "grace", "signal", "file"};
constexpr std::array<std::string_view, 3> kRetryFields{"max_attempts", "backoff", "on"};
constexpr std::array<std::string_view, 4> kStopSignals{"SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2"};
constexpr std::array<std::string_view, 3> kTolerationFields{"key", "value", "effect"};
constexpr std::array<std::string_view, 2> kTopologyFields{"one_node", "nvlink_island"};
constexpr std::size_t kMaxSelectorEntries = 64;
constexpr std::size_t kMaxTolerations = 64;
constexpr std::array<std::string_view, 6> kResourceFields{"gpus", "gpu_model", "gpu_memory",
                                                          "cpu",  "memory",    "gpu_share"};

bool ValidEnvKey(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A field given twice is refused, not resolved: YAML and JSON readers
// disagree on which copy wins, and a check made on one copy must hold for
// the copy Berth uses (model/yaml_object.h refuses it in a fixed-key map).
Status DuplicateField(const std::string& field) {
  return InvalidField(field, fmt::format("field '{}' is given twice; give it once", field));
}

Result<std::string> ScalarString(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) return InvalidField(field, "must be a string");
  return node.Scalar();
}

// A whole number from lo to hi. `out_of_range(text)` is the message for
// any other number, also one too long for 64 bits (given as written).
Result<std::int64_t> BoundedInt(const YAML::Node& node, const std::string& field, std::int64_t lo,
                                std::int64_t hi, auto out_of_range) {
  if (!node.IsScalar()) return InvalidField(field, "must be an integer");
  const auto& s = node.Scalar();
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ptr != s.data() + s.size() || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return InvalidField(field, fmt::format("'{}' is not an integer", s));
  }
  if (ec == std::errc::result_out_of_range || v < lo || v > hi) {
    return InvalidField(field, out_of_range(s));
  }
  return v;
}

// A size of at most kMaxMemoryBytes; errors name the field and the range.
Result<std::uint64_t> SizeField(const YAML::Node& node, const std::string& field) {
  auto text = ScalarString(node, field);
  if (!text) return std::unexpected(text.error());
  auto bytes = ParseBytes(*text, kMaxMemoryBytes);
  if (!bytes) return InvalidField(field, bytes.error().message);
  return *bytes;
}

// CPU in cores: "16", "0.5", or millicores "500m".
Result<std::uint32_t> ParseCpu(const YAML::Node& node) {
  const std::string field = "resources.cpu";
  auto text = ScalarString(node, field);
  if (!text) return std::unexpected(text.error());
  std::string_view s = *text;
  auto bad = [&] {
    return InvalidField(field, fmt::format("'{}' is not a CPU amount; write cores (16, 0.5) or "
                                           "millicores (500m), at most 4096 cores",
                                           s));
  };
  std::uint64_t millis = 0;
  if (s.ends_with("m")) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size() - 1, millis);
    if (ec != std::errc() || p != s.data() + s.size() - 1) return bad();
  } else {
    auto dot = s.find('.');
    std::string_view whole = s.substr(0, dot);
    std::uint64_t cores = 0;
    auto [p, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), cores);
    if (ec != std::errc() || p != whole.data() + whole.size() || whole.empty()) return bad();
    // Checked before multiplying: 18446744073709552 cores would wrap to 0.384.
    if (cores > kMaxCpuMillis / 1000) return bad();
    millis = cores * 1000;
    if (dot != std::string_view::npos) {
      std::string_view frac = s.substr(dot + 1);
      if (frac.empty() || frac.size() > 3) return bad();
      std::uint64_t f = 0;
      auto [fp, fec] = std::from_chars(frac.data(), frac.data() + frac.size(), f);
      if (fec != std::errc() || fp != frac.data() + frac.size()) return bad();
      for (std::size_t i = frac.size(); i < 3; ++i) f *= 10;
      millis += f;
    }
  }
  if (millis > kMaxCpuMillis) return bad();
  return static_cast<std::uint32_t>(millis);
}

Result<std::vector<std::string>> StringList(const YAML::Node& node, const std::string& field) {
  if (!node.IsSequence()) {
    return InvalidField(field, "must be a list of strings, e.g. [\"python3\", \"train.py\"]");
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar()) {
      return InvalidField(fmt::format("{}[{}]", field, i), "must be a string");
    }
    out.push_back(node[i].Scalar());
  }
  return out;
}

// A slice of one GPU: a fraction ("0.25", 0 < x < 1, at most 3 decimals)
// or a memory size ("20Gi").
Status ParseGpuShare(const YAML::Node& node, Resources& r) {
  const std::string field = "resources.gpu_share";
  auto text = ScalarString(node, field);
  if (!text) return std::unexpected(text.error());
  std::string_view s = *text;
  const bool numeric = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == '.';
  });
  if (numeric && (s[0] == '0' || s[0] == '.')) {
    auto bad = [&] {
      return InvalidField(field, fmt::format("'{}' is not a share of one GPU; write a fraction "
                                             "above 0 and below 1 with at most 3 decimals "
                                             "(0.25), or a memory size (20Gi)",
                                             s));
    };
    std::string_view frac = s.starts_with("0.")  ? s.substr(2)
                            : s.starts_with(".") ? s.substr(1)
                                                 : "";
    if (frac.empty() || frac.size() > 3) return bad();
    std::uint32_t f = 0;
    auto [p, ec] = std::from_chars(frac.data(), frac.data() + frac.size(), f);
    if (ec != std::errc() || p != frac.data() + frac.size()) return bad();
    for (std::size_t i = frac.size(); i < 3; ++i) f *= 10;
    if (f == 0) return bad();
    r.gpu_share_millis = f;
    return Ok();
  }
  if (numeric) {
    return InvalidField(field, fmt::format("'{}' is a whole GPU or more; use resources.gpus for "
                                           "whole GPUs, and gpu_share for less than one",
                                           s));
  }
  auto bytes = ParseBytes(s, kMaxMemoryBytes);
  if (!bytes) {
    return InvalidField(field, fmt::format("'{}' is neither a fraction of one GPU (0.25) nor a "
                                           "memory size (20Gi): {}",
                                           s, bytes.error().message));
  }
  if (*bytes == 0) return InvalidField(field, "a memory slice must be larger than zero");
  r.gpu_share_bytes = *bytes;
  return Ok();
}

Status ParseResources(const YAML::Node& node, Resources& r) {
  BERTH_RETURN_IF_ERROR(
      YamlObject::Read(node, "resources", kResourceFields, "must be a mapping, e.g. {gpus: 1}"));
  if (auto n = node["gpus"]) {
    auto v = BoundedInt(n, "resources.gpus", 0, kMaxGpusPerReplica, [](std::string_view s) {
      return fmt::format("{} GPUs per replica is not allowed; use 0 to {}", s, kMaxGpusPerReplica);
    });
    if (!v) return std::unexpected(v.error());
    r.gpus = static_cast<std::uint32_t>(*v);
  }
  if (auto n = node["gpu_model"]) {
    auto v = ScalarString(n, "resources.gpu_model");
    if (!v) return std::unexpected(v.error());
    if (v->empty() || v->size() > 64) {
      return InvalidField("resources.gpu_model", "must be a model name such as H100-80GB");
    }
    r.gpu_model = *v;
  }
  if (auto n = node["gpu_memory"]) {
    auto bytes = SizeField(n, "resources.gpu_memory");
    if (!bytes) return std::unexpected(bytes.error());
    r.gpu_memory_bytes = *bytes;
  }
  if (auto n = node["cpu"]) {
    auto v = ParseCpu(n);
    if (!v) return std::unexpected(v.error());
    r.cpu_millis = *v;
  }
  if (auto n = node["memory"]) {
    auto bytes = SizeField(n, "resources.memory");
    if (!bytes) return std::unexpected(bytes.error());
    r.memory_bytes = *bytes;
  }
  if (auto n = node["gpu_share"]) {
    BERTH_RETURN_IF_ERROR(ParseGpuShare(n, r));
    if (r.gpus > 0) {
      return InvalidField("resources.gpu_share",
                          fmt::format("cannot be combined with gpus: {}; a replica takes either "
                                      "whole GPUs (gpus) or a slice of one GPU (gpu_share), so "
                                      "remove one of them",
                                      r.gpus));
    }
  }
  if ((!r.gpu_model.empty() || r.gpu_memory_bytes > 0) && r.gpus == 0 && !IsSlice(r)) {
    return InvalidField("resources.gpus",
                        "gpu_model and gpu_memory need at least one GPU; set resources.gpus");
  }
  return Ok();
}

Status ParsePlacement(const YAML::Node& root, JobSpec& spec);
Status ParseRetryAndImage(const YAML::Node& root, JobSpec& spec);
Status ParseLoad(const YAML::Node& node, LoadProfile& load);

// An env variable a job (or an array element's parameter set) may set.
Status CheckEnvEntry(const std::string& field, const std::string& key, const YAML::Node& value) {
  if (!ValidEnvKey(key)) {
    return InvalidField(field,
                        "variable names use letters, digits and '_' and do not start "
                        "with a digit");
  }
  if (key.starts_with("BERTH_") || key == "CUDA_VISIBLE_DEVICES" ||
      key == "NVIDIA_VISIBLE_DEVICES") {
    return InvalidField(field, "is set by Berth for every job and cannot be overridden");
  }
  if (!value.IsScalar()) return InvalidField(field, "must be a string value");
  return Ok();
}

Result<std::uint32_t> ArrayBound(std::string_view s) {
  std::uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) {
    return InvalidField("array", fmt::format("'{}' is not a whole number", s));
  }
  return v;
}

Status ParseArray(const YAML::Node& node, JobSpec& spec) {
  constexpr std::string_view kForms =
      "use a count (array: 100), an inclusive range of indices (array: 0-9999) or a list of "
      "parameter sets (array: [{LR: \"0.1\"}, {LR: \"0.01\"}])";
  JobArray a;
  if (node.IsScalar()) {
    const std::string text = node.Scalar();
    if (auto dash = text.find('-'); dash != std::string::npos) {
      auto lo = ArrayBound(std::string_view(text).substr(0, dash));
      if (!lo) return InvalidField("array", fmt::format("'{}': {}", text, kForms));
      auto hi = ArrayBound(std::string_view(text).substr(dash + 1));
      if (!hi) return InvalidField("array", fmt::format("'{}': {}", text, kForms));
      if (*hi < *lo) {
        return InvalidField("array",
                            fmt::format("'{}' ends before it starts; write low-high", text));
      }
      if (*hi - *lo >= kMaxArrayElements) {
        return InvalidField("array",
                            fmt::format("'{}' has {} elements; at most {} are allowed", text,
                                        std::uint64_t{*hi} - *lo + 1, kMaxArrayElements));
      }
      a.first = *lo;
      a.count = *hi - *lo + 1;
    } else {
      auto n = ArrayBound(text);
      if (!n) return InvalidField("array", fmt::format("'{}': {}", text, kForms));
      if (*n == 0 || *n > kMaxArrayElements) {
        return InvalidField(
            "array", fmt::format("{} elements is not allowed; use 1 to {}", *n, kMaxArrayElements));
      }
      a.count = *n;
    }
  } else if (node.IsSequence()) {
    if (node.size() == 0 || node.size() > kMaxArrayElements) {
      return InvalidField("array", fmt::format("has {} parameter sets; give 1 to {}", node.size(),
                                               kMaxArrayElements));
    }
    for (std::size_t i = 0; i < node.size(); ++i) {
      const std::string f = fmt::format("array[{}]", i);
      const YAML::Node& set = node[i];
      if (!set.IsMap()) return InvalidField(f, "must be a mapping of NAME: value (env to add)");
      if (set.size() + spec.env.size() > kMaxEnvEntries) {
        return InvalidField(
            f, fmt::format("with env, at most {} variables are allowed", kMaxEnvEntries));
      }
      std::map<std::string, std::string> env;
      for (auto it = set.begin(); it != set.end(); ++it) {
        auto key = it->first.as<std::string>();
        const std::string field = f + "." + key;
        BERTH_RETURN_IF_ERROR(CheckEnvEntry(field, key, it->second));
        if (env.contains(key)) return DuplicateField(field);
        env[key] = it->second.Scalar();
      }
      a.params.push_back(std::move(env));
    }
    a.count = static_cast<std::uint32_t>(a.params.size());
  } else {
    return InvalidField("array", std::string(kForms));
  }
  spec.array = std::move(a);
  return Ok();
}

// `secret_env: [NAME, ...]`: names of env entries (of `env` or of an
// array's parameter sets) whose values the API never shows. Parsed after
// both, so a name is checked against what the job will really have.
Status ParseSecretEnv(const YAML::Node& node, JobSpec& spec) {
  if (!node.IsSequence()) {
    return InvalidField("secret_env",
                        "must be a list of env names whose values are secret, e.g. [HF_TOKEN]");
  }
  if (node.size() > kMaxEnvEntries) {
    return InvalidField("secret_env", fmt::format("at most {} names are allowed", kMaxEnvEntries));
  }
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string f = fmt::format("secret_env[{}]", i);
    if (!node[i].IsScalar()) return InvalidField(f, "must be the name of an env variable");
    const std::string key = node[i].Scalar();
    if (!ValidEnvKey(key)) {
      return InvalidField(f, fmt::format("'{}' is not an env variable name (letters, digits and "
                                         "'_', not starting with a digit)",
                                         key));
    }
    bool named = spec.env.contains(key);
    if (spec.array) {
      for (const auto& set : spec.array->params) named = named || set.contains(key);
    }
    if (!named) {
      return InvalidField(
          f, fmt::format("'{}' is not set in env{}; name a variable the job sets", key,
                         spec.array && !spec.array->params.empty() ? " or a parameter set" : ""));
    }
    if (!spec.secret_env.insert(key).second) {
      return InvalidField(f, fmt::format("names '{}' twice; name it once", key));
    }
  }
  return Ok();
}

Status ParseInto(const YAML::Node& root, JobSpec& spec) {
  BERTH_RETURN_IF_ERROR(YamlObject::Read(
      root, "", kJobFields, "a job spec must be a YAML mapping with at least name and command"));

  auto name = root["name"];
  if (!name) return InvalidField("name", "is required: a short name for the job, e.g. resnet50");
  auto name_s = ScalarString(name, "name");
  if (!name_s) return std::unexpected(name_s.error());
  if (name_s->size() > kMaxNameLength) {
    return InvalidField("name", fmt::format("is {} characters long; at most {} are allowed",
                                            name_s->size(), kMaxNameLength));
  }
  if (!IsValidName(*name_s)) {
    return InvalidField("name",
                        "must use lower-case letters, digits, '-', '_' or '.', and start and end "
                        "with a letter or digit");
  }
  spec.name = *name_s;

  for (auto [key, target] : {std::pair{"tenant", &spec.tenant}, std::pair{"queue", &spec.queue}}) {
    if (auto n = root[key]) {
      auto v = ScalarString(n, key);
      if (!v) return std::unexpected(v.error());
      // A queue may be nested: "training/nlp" is the queue <tenant>/training/nlp
      // of the policy (docs/policy.md). Each part is a name of its own.
      bool nested = std::string_view(key) == "queue";
      bool valid = !v->empty();
      for (std::size_t start = 0; valid && start <= v->size();) {
        std::size_t slash = nested ? v->find('/', start) : v->npos;
        std::string part = v->substr(start, slash == v->npos ? v->npos : slash - start);
        valid = part.size() <= kMaxNameLength && IsValidName(part);
        start = slash == v->npos ? v->size() + 1 : slash + 1;
      }
      if (!valid) {
        return InvalidField(key,
                            fmt::format("'{}' is not a valid {} name (lower-case letters, "
                                        "digits, '-', '_', '.'; at most {} characters{})",
                                        *v, key, kMaxNameLength,
                                        nested ? " per part; a nested queue is parent/child" : ""));
      }
      *target = *v;
    }
  }

  auto command = root["command"];
  if (!command) {
    return InvalidField("command",
                        "is required: the program and its arguments as a list, "
                        "e.g. [\"python3\", \"train.py\"]");
  }
  auto cmd = StringList(command, "command");
  if (!cmd) return std::unexpected(cmd.error());
  if (cmd->empty() || (*cmd)[0].empty()) {
    return InvalidField("command", "must name a program to run");
  }
  spec.command = std::move(*cmd);
  if (auto n = root["args"]) {
    auto args = StringList(n, "args");
    if (!args) return std::unexpected(args.error());
    spec.command.insert(spec.command.end(), args->begin(), args->end());
  }
  if (spec.command.size() > kMaxCommandArgs) {
    return InvalidField("command", fmt::format("has {} arguments; at most {} are allowed",
                                               spec.command.size(), kMaxCommandArgs));
  }

  if (auto n = root["env"]) {
    if (!n.IsMap()) return InvalidField("env", "must be a mapping of NAME: value");
    if (n.size() > kMaxEnvEntries) {
      return InvalidField("env", fmt::format("at most {} variables are allowed", kMaxEnvEntries));
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      auto key = it->first.as<std::string>();
      std::string field = "env." + key;
      BERTH_RETURN_IF_ERROR(CheckEnvEntry(field, key, it->second));
      if (spec.env.contains(key)) return DuplicateField(field);
      spec.env[key] = it->second.Scalar();
    }
  }

  if (auto n = root["working_dir"]) {
    auto v = ScalarString(n, "working_dir");
    if (!v) return std::unexpected(v.error());
    if (!v->starts_with("/")) {
      return InvalidField("working_dir", "must be an absolute path");
    }
    spec.working_dir = *v;
  }

  if (auto n = root["replicas"]) {
    auto v = BoundedInt(n, "replicas", 1, kMaxReplicas, [](std::string_view s) {
      return fmt::format("{} is not allowed; use 1 to {}", s, kMaxReplicas);
    });
    if (!v) return std::unexpected(v.error());
    spec.replicas = static_cast<std::uint32_t>(*v);
  }

  if (auto n = root["resources"]) BERTH_RETURN_IF_ERROR(ParseResources(n, spec.resources));

  if (auto n = root["priority"]) {
    auto v = ScalarString(n, "priority");
    if (!v) return std::unexpected(v.error());
    auto p = ParsePriority(*v);
    if (!p) {
      return InvalidField("priority", fmt::format("'{}' is not a priority; use low, normal, high "
                                                  "or critical",
                                                  *v));
    }
    spec.priority = *p;
  }

  if (auto n = root["max_runtime"]) {
    auto v = ScalarString(n, "max_runtime");
    if (!v) return std::unexpected(v.error());
    auto ms = ParseDurationMs(*v, kMaxDurationMs);
    if (!ms) return InvalidField("max_runtime", ms.error().message);
    if (*ms <= 0) return InvalidField("max_runtime", "must be longer than zero; omit it for none");
    spec.max_runtime_ms = *ms;
  }
  if (auto n = root["array"]) BERTH_RETURN_IF_ERROR(ParseArray(n, spec));
  if (auto n = root["secret_env"]) BERTH_RETURN_IF_ERROR(ParseSecretEnv(n, spec));
  return ParsePlacement(root, spec);
}

Result<bool> ScalarBool(const YAML::Node& node, const std::string& field) {
  if (node.IsScalar() && (node.Scalar() == "true" || node.Scalar() == "false")) {
    return node.Scalar() == "true";
  }
  return InvalidField(field, "must be true or false");
}

// The optional placement fields: preemptible, node_selector, tolerations,
// pool, topology.
Status ParsePlacement(const YAML::Node& root, JobSpec& spec) {
  if (auto n = root["preemptible"]) {
    auto v = ScalarBool(n, "preemptible");
    if (!v) return std::unexpected(v.error());
    spec.preemptible = *v;
  }
  if (auto n = root["node_selector"]) {
    if (!n.IsMap()) return InvalidField("node_selector", "must be a mapping of label: value");
    if (n.size() > kMaxSelectorEntries) {
      return InvalidField("node_selector",
                          fmt::format("at most {} labels are allowed", kMaxSelectorEntries));
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar() || it->first.Scalar().empty() || !it->second.IsScalar()) {
        return InvalidField("node_selector", "labels and values must be non-empty strings");
      }
      if (spec.node_selector.contains(it->first.Scalar())) {
        return DuplicateField("node_selector." + it->first.Scalar());
      }
      spec.node_selector[it->first.Scalar()] = it->second.Scalar();
    }
  }
  if (auto n = root["tolerations"]) {
    if (!n.IsSequence()) {
      return InvalidField("tolerations", "must be a list of {key, value, effect}");
    }
    if (n.size() > kMaxTolerations) {
      return InvalidField("tolerations",
                          fmt::format("at most {} tolerations are allowed", kMaxTolerations));
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
      std::string f = fmt::format("tolerations[{}]", i);
      BERTH_RETURN_IF_ERROR(
          YamlObject::Read(n[i], f, kTolerationFields, "must be a mapping {key, value, effect}"));
      Toleration t;
      if (!n[i]["key"]) return InvalidField(f + ".key", "is required");
      auto key = ScalarString(n[i]["key"], f + ".key");
      if (!key) return std::unexpected(key.error());
      if (key->empty()) return InvalidField(f + ".key", "must not be empty");
      t.key = *key;
      if (auto v = n[i]["value"]) {
        auto s = ScalarString(v, f + ".value");
        if (!s) return std::unexpected(s.error());
        t.value = *s;
      }
      if (auto v = n[i]["effect"]) {
        auto s = ScalarString(v, f + ".effect");
        if (!s) return std::unexpected(s.error());
        if (*s != "NoSchedule" && *s != "PreferNoSchedule") {
          return InvalidField(f + ".effect",
                              fmt::format("'{}' is not NoSchedule or PreferNoSchedule", *s));
        }
        t.effect = *s;
      }
      spec.tolerations.push_back(std::move(t));
    }
  }
  if (auto n = root["pool"]) {
    auto v = ScalarString(n, "pool");
    if (!v) return std::unexpected(v.error());
    if (v->size() > kMaxNameLength || !IsValidName(*v)) {
      return InvalidField("pool", fmt::format("'{}' is not a valid pool name", *v));
    }
    spec.pool = *v;
  }
  if (auto n = root["topology"]) {
    BERTH_RETURN_IF_ERROR(YamlObject::Read(n, "topology", kTopologyFields,
                                           "must be a mapping, e.g. {one_node: true}"));
    if (auto v = n["one_node"]) {
      auto b = ScalarBool(v, "topology.one_node");
      if (!b) return std::unexpected(b.error());
      spec.topology.one_node = *b;
    }
    if (auto v = n["nvlink_island"]) {
      auto s = ScalarString(v, "topology.nvlink_island");
      if (!s) return std::unexpected(s.error());
      if (*s == "none") {
        spec.topology.nvlink_island = NvlinkIsland::kNone;
      } else if (*s == "prefer") {
        spec.topology.nvlink_island = NvlinkIsland::kPrefer;
      } else if (*s == "require") {
        spec.topology.nvlink_island = NvlinkIsland::kRequire;
      } else {
        return InvalidField("topology.nvlink_island",
                            fmt::format("'{}' is not none, prefer or require", *s));
      }
    }
    if (spec.topology.nvlink_island != NvlinkIsland::kNone && spec.resources.gpus == 0) {
      return InvalidField("topology.nvlink_island", "needs resources.gpus of at least 1");
    }
  }
  if (auto n = root["checkpoint"]) {
    BERTH_RETURN_IF_ERROR(YamlObject::Read(n, "checkpoint", kCheckpointFields,
                                           "must be a mapping, e.g. {dir: /ckpt/run1, grace: 2m}"));
    spec.checkpoint.enabled = true;
    if (auto v = n["dir"]) {
      auto s = ScalarString(v, "checkpoint.dir");
      if (!s) return std::unexpected(s.error());
      if (s->empty() || s->front() != '/') {
        return InvalidField("checkpoint.dir", "must be an absolute path, e.g. /ckpt/run1");
      }
      spec.checkpoint.dir = *s;
    }
    if (auto v = n["grace"]) {
      auto s = ScalarString(v, "checkpoint.grace");
      if (!s) return std::unexpected(s.error());
      auto ms = ParseDurationMs(*s);
      if (!ms) return InvalidField("checkpoint.grace", ms.error().message);
      if (*ms <= 0 || *ms > kMaxCheckpointGraceMs) {
        return InvalidField("checkpoint.grace", "must be between 1s and 1h, e.g. 2m");
      }
      spec.checkpoint.grace_ms = *ms;
    }
    if (auto v = n["signal"]) {
      auto s = ScalarString(v, "checkpoint.signal");
      if (!s) return std::unexpected(s.error());
      if (std::find(kStopSignals.begin(), kStopSignals.end(), *s) == kStopSignals.end()) {
        return InvalidField(
            "checkpoint.signal",
            fmt::format("'{}' is not one of SIGTERM, SIGINT, SIGUSR1, SIGUSR2", *s));
      }
      spec.checkpoint.signal = *s;
    }
    if (auto v = n["file"]) {
      auto s = ScalarString(v, "checkpoint.file");
      if (!s) return std::unexpected(s.error());
      if (s->empty() || s->front() != '/') {
        return InvalidField("checkpoint.file",
                            "must be an absolute path the job touches after each checkpoint, "
                            "e.g. /ckpt/run1/latest");
      }
      spec.checkpoint.file = *s;
    }
  }
  return ParseRetryAndImage(root, spec);
}

Status ParseRetryAndImage(const YAML::Node& root, JobSpec& spec) {
  if (auto n = root["retry"]) {
    BERTH_RETURN_IF_ERROR(
        YamlObject::Read(n, "retry", kRetryFields,
                         "must be a mapping, e.g. {max_attempts: 3, backoff: 30s, on: "
                         "[node_lost, gpu_hardware]}"));
    if (auto v = n["max_attempts"]) {
      auto s = ScalarString(v, "retry.max_attempts");
      if (!s) return std::unexpected(s.error());
      std::uint32_t k = 0;
      auto [ptr, ec] = std::from_chars(s->data(), s->data() + s->size(), k);
      if (ec != std::errc{} || ptr != s->data() + s->size() || k < 1 || k > kMaxRetryAttempts) {
        return InvalidField(
            "retry.max_attempts",
            fmt::format("must be a whole number from 1 (no retry) to {}", kMaxRetryAttempts));
      }
      spec.retry.max_attempts = k;
    }
    if (auto v = n["backoff"]) {
      auto s = ScalarString(v, "retry.backoff");
      if (!s) return std::unexpected(s.error());
      auto ms = ParseDurationMs(*s);
      if (!ms) return InvalidField("retry.backoff", ms.error().message);
      if (*ms < 0 || *ms > kMaxRetryBackoffMs) {
        return InvalidField("retry.backoff", "must be between 0s and 1h, e.g. 30s");
      }
      spec.retry.backoff_ms = *ms;
    }
    if (auto v = n["on"]) {
      if (!v.IsSequence()) {
        return InvalidField("retry.on", "must be a list of failure classes, e.g. [node_lost]");
      }
      spec.retry.on.clear();
      for (std::size_t i = 0; i < v.size(); ++i) {
        auto s = ScalarString(v[i], fmt::format("retry.on[{}]", i));
        if (!s) return std::unexpected(s.error());
        if (std::find(kRetryableClasses.begin(), kRetryableClasses.end(), *s) ==
            kRetryableClasses.end()) {
          std::string known;
          for (auto c : kRetryableClasses)
            known += fmt::format("{}{}", known.empty() ? "" : ", ", c);
          return InvalidField(
              fmt::format("retry.on[{}]", i),
              fmt::format("'{}' is not a failure class that can retry; one of {}", *s, known));
        }
        if (std::find(spec.retry.on.begin(), spec.retry.on.end(), *s) == spec.retry.on.end()) {
          spec.retry.on.push_back(*s);
        }
      }
    }
  }
  if (auto n = root["image"]) {
    auto s = ScalarString(n, "image");
    if (!s) return std::unexpected(s.error());
    if (s->empty() || s->size() > 512 ||
        std::any_of(s->begin(), s->end(), [](char c) { return c <= ' ' || c == 0x7f; })) {
      return InvalidField("image",
                          "must be an OCI image reference without spaces, e.g. "
                          "docker.io/pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime");
    }
    spec.image = *s;
  }
  if (auto n = root["load"]) BERTH_RETURN_IF_ERROR(ParseLoad(n, spec.load));
  if (auto n = root["mounts"]) {
    if (!n.IsSequence()) return InvalidField("mounts", "must be a list of {path, read_only}");
    if (n.size() > kMaxMounts) {
      return InvalidField("mounts", fmt::format("at most {} mounts", kMaxMounts));
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
      const std::string f = fmt::format("mounts[{}]", i);
      BERTH_RETURN_IF_ERROR(
          YamlObject::Read(n[i], f, kMountFields, "must be a mapping {path, read_only}"));
      Mount m;
      auto p = n[i]["path"] ? ScalarString(n[i]["path"], f + ".path")
                            : InvalidField(f + ".path", "is required");
      if (!p) return std::unexpected(p.error());
      if (p->empty() || p->front() != '/' || p->find(':') != std::string::npos ||
          p->find(',') != std::string::npos) {
        return InvalidField(f + ".path", "must be an absolute path without ':' or ','");
      }
      m.path = *p;
      if (auto ro = n[i]["read_only"]) {
        auto b = ScalarString(ro, f + ".read_only");
        if (!b) return std::unexpected(b.error());
        if (*b != "true" && *b != "false") {
          return InvalidField(f + ".read_only", "must be true or false");
        }
        m.read_only = *b == "true";
      }
      spec.mounts.push_back(std::move(m));
    }
  }
  return Ok();
}

// A percentage 0-100: "85", 85 or "85%".
Result<std::uint32_t> ParsePercent(const YAML::Node& node, const std::string& field,
                                   std::string_view example) {
  auto bad = [&](std::string_view got) {
    return InvalidField(field, fmt::format("'{}' is not a percentage; write a whole number from "
                                           "0 to 100, e.g. {}",
                                           got, example));
  };
  if (!node.IsScalar()) return bad("(not a scalar)");
  std::string_view s = node.Scalar();
  std::string_view digits = s.ends_with("%") ? s.substr(0, s.size() - 1) : s;
  std::uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc{} || ptr != digits.data() + digits.size() || v > 100) {
    return bad(s);
  }
  return v;
}

// A duration for load.period and load.idle_after; "0" alone is allowed.
Result<std::int64_t> ParseLoadDuration(const YAML::Node& node, const std::string& field) {
  auto s = ScalarString(node, field);
  if (!s) return std::unexpected(s.error());
  if (*s == "0") return std::int64_t{0};
  auto ms = ParseDurationMs(*s, kMaxDurationMs);
  if (!ms) return InvalidField(field, ms.error().message);
  return *ms;
}

// The `load:` block: how the simulated GPU provider loads the job's GPUs.
Status ParseLoad(const YAML::Node& node, LoadProfile& load) {
  BERTH_RETURN_IF_ERROR(
      YamlObject::Read(node, "load", kLoadFields,
                       "must be a mapping, e.g. {pattern: periodic, utilization: 85, period: 2m}"));
  if (auto v = node["pattern"]) {
    auto s = ScalarString(v, "load.pattern");
    if (!s) return std::unexpected(s.error());
    auto pattern = ParseLoadPattern(*s);
    if (!pattern) {
      return InvalidField(
          "load.pattern",
          fmt::format("'{}' is not a load pattern; use steady, periodic or idle", *s));
    }
    load.pattern = *pattern;
  }
  if (auto v = node["utilization"]) {
    auto p = ParsePercent(v, "load.utilization", "85");
    if (!p) return std::unexpected(p.error());
    load.util_pct = *p;
  }
  if (auto v = node["idle_utilization"]) {
    auto p = ParsePercent(v, "load.idle_utilization", "0");
    if (!p) return std::unexpected(p.error());
    load.idle_util_pct = *p;
  }
  if (auto v = node["memory"]) {
    auto p = ParsePercent(v, "load.memory", "60%");
    if (!p) return std::unexpected(p.error());
    load.memory_pct = *p;
  }
  if (auto v = node["period"]) {
    if (load.pattern != LoadPattern::kPeriodic) {
      return InvalidField("load.period",
                          "applies only to pattern: periodic; set pattern: periodic or remove "
                          "period");
    }
    auto ms = ParseLoadDuration(v, "load.period");
    if (!ms) return std::unexpected(ms.error());
    if (*ms < kMinLoadPeriodMs || *ms > kMaxLoadPeriodMs) {
      return InvalidField("load.period", "must be between 1s and 24h, e.g. 2m");
    }
    load.period_ms = *ms;
  }
  if (auto v = node["idle_after"]) {
    auto ms = ParseLoadDuration(v, "load.idle_after");
    if (!ms) return std::unexpected(ms.error());
    load.idle_after_ms = *ms;
  }
  return Ok();
}

}  // namespace

Result<JobSpec> ParseJobSpec(std::string_view text) {
  JobSpec spec;
  BERTH_RETURN_IF_ERROR(ReadDocument(
      text, kMaxSpecBytes, "spec", [&](const YAML::Node& root) { return ParseInto(root, spec); }));
  return spec;
}

}  // namespace berth::model
