// Parsing and validation of the scheduling policy (see docs/scheduling.md
// for the YAML shape), and its lookups. yaml-cpp exceptions stay inside
// this file: every entry point returns a Result. The rules a job is held to
// are in policy_rules.cc, printing in policy_print.cc.
#include "model/policy.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <limits>
#include <set>

#include "common/checked.h"
#include "common/hash.h"
#include "common/units.h"
#include "model/job.h"
#include "model/names.h"
#include "model/policy_limits.h"
#include "model/service.h"
#include "model/yaml_object.h"

namespace berth::model {
namespace {

using policy_internal::kLimitFields;
using policy_internal::kLimitNames;

constexpr std::array<std::string_view, 12> kPolicyFields{
    "usage_half_life", "min_runtime",      "reclaim_grace", "short_first_max_wait",
    "pools",           "priority_classes", "queues",        "backfill",
    "consolidation",   "tenants",          "limits",        "retry"};
constexpr std::array<std::string_view, 4> kTenantFields{"run_as", "storage", "container_network",
                                                        "limits"};

constexpr std::array<std::string_view, 2> kGrantFields{"path", "access"};
constexpr std::array<std::string_view, 5> kRunAsFields{"user", "uid", "gid", "groups",
                                                       "allow_root"};
constexpr std::array<std::string_view, 2> kBackfillFields{"enabled", "max_reservations"};
constexpr std::array<std::string_view, 3> kConsolidationFields{"enabled", "max_moves",
                                                               "max_jobs_per_cycle"};
constexpr std::array<std::string_view, 3> kPoolFields{"name", "selector", "inference_headroom"};
constexpr std::array<std::string_view, 1> kHeadroomFields{"gpus"};
constexpr std::array<std::string_view, 3> kClassFields{"name", "value", "preemptible"};
constexpr std::array<std::string_view, 9> kQueueFields{
    "name",       "kind",        "pools",    "quota",
    "over_quota", "preemptible", "children", "max_session_lifetime",
    "retry"};
constexpr std::array<std::string_view, 1> kRetryCapFields{"max_attempts"};
constexpr std::array<std::string_view, 4> kQuotaFields{"guaranteed", "borrow_limit", "weight",
                                                       "lending_limit"};
constexpr std::array<std::string_view, 3> kQueueKinds{"training", "inference", "interactive"};

// The most of any one amount: a million GPUs, cores, or 2^62 bytes (4 EiB,
// 4194304Ti). A queue's guaranteed plus borrow_limit may pass what 64 bits
// hold only in bytes at these bounds; the quota book adds with saturation
// (common/checked.h), as it does its sums over jobs and queues.
constexpr std::int64_t kMaxMilli = 1'000'000'000;
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 62;
// usage_half_life and min_runtime: 10 years, as a job's max_runtime.
constexpr std::int64_t kMaxPolicyDurationMs = kMaxDurationMs;

Result<std::string> Str(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) return InvalidField(field, "must be a string");
  return node.Scalar();
}

Result<bool> Bool(const YAML::Node& node, const std::string& field) {
  if (node.IsScalar()) {
    if (node.Scalar() == "true") return true;
    if (node.Scalar() == "false") return false;
  }
  return InvalidField(field, "must be true or false");
}

Result<std::int64_t> Int(const YAML::Node& node, const std::string& field, std::int64_t lo,
                         std::int64_t hi) {
  if (!node.IsScalar()) return InvalidField(field, "must be an integer");
  const auto& s = node.Scalar();
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    return InvalidField(field, fmt::format("'{}' is not an integer", s));
  }
  if (v < lo || v > hi) return InvalidField(field, fmt::format("{} is not in {} to {}", v, lo, hi));
  return v;
}

// "16", "0.5", "1.125" → thousandths; "500m" → 500 when `allow_milli`.
std::optional<std::int64_t> ParseMilli(std::string_view s, bool allow_milli) {
  std::int64_t v = 0;
  if (allow_milli && s.ends_with("m")) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size() - 1, v);
    if (ec != std::errc() || p != s.data() + s.size() - 1 || s.size() == 1) return std::nullopt;
    return v <= kMaxMilli ? std::optional(v) : std::nullopt;
  }
  auto dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  if (whole.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), v);
  if (ec != std::errc() || p != whole.data() + whole.size() || v < 0 || v > kMaxMilli / 1000) {
    return std::nullopt;
  }
  v *= 1000;
  if (dot != std::string_view::npos) {
    std::string_view frac = s.substr(dot + 1);
    if (frac.empty() || frac.size() > 3) return std::nullopt;
    std::int64_t f = 0;
    auto [fp, fec] = std::from_chars(frac.data(), frac.data() + frac.size(), f);
    if (fec != std::errc() || fp != frac.data() + frac.size() || f < 0) return std::nullopt;
    for (std::size_t i = frac.size(); i < 3; ++i) f *= 10;
    v += f;
  }
  return v;
}

std::string FormatMilli(std::int64_t v) {
  if (v % 1000 == 0) return std::to_string(v / 1000);
  std::string frac = fmt::format("{:03}", v % 1000);
  while (frac.back() == '0') frac.pop_back();
  return fmt::format("{}.{}", v / 1000, frac);
}

Result<std::int64_t> Amount(ResourceKind kind, const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) return InvalidField(field, "must be an amount");
  const std::string& s = node.Scalar();
  if (s.starts_with("-")) return InvalidField(field, fmt::format("'{}' must not be negative", s));
  switch (kind) {
    case ResourceKind::kGpus:
      if (auto v = ParseMilli(s, false)) return *v;
      return InvalidField(field, fmt::format("'{}' is not a GPU amount; write whole or fractional "
                                             "GPUs (16, 0.5) with at most 3 decimals, from 0 to "
                                             "{}",
                                             s, kMaxMilli / 1000));
    case ResourceKind::kCpu:
      if (auto v = ParseMilli(s, true)) return *v;
      return InvalidField(field, fmt::format("'{}' is not a CPU amount; write cores (16, 0.5) or "
                                             "millicores (500m), from 0 to {} cores",
                                             s, kMaxMilli / 1000));
    case ResourceKind::kGpuMemory:
    case ResourceKind::kMemory: {
      auto b = ParseBytes(s, static_cast<std::uint64_t>(kMaxBytes));
      if (!b) return InvalidField(field, b.error().message);
      return static_cast<std::int64_t>(*b);
    }
  }
  return InvalidField(field, "unknown resource");
}

std::string FormatAmount(ResourceKind kind, std::int64_t v) {
  switch (kind) {
    case ResourceKind::kGpus:
      return FormatMilli(v);
    case ResourceKind::kCpu:
      return v % 1000 == 0 ? std::to_string(v / 1000) : fmt::format("{}m", v);
    case ResourceKind::kGpuMemory:
    case ResourceKind::kMemory:
      return FormatBytes(static_cast<std::uint64_t>(v));
  }
  return std::to_string(v);
}

Result<Quota> ParseQuota(ResourceKind kind, const YAML::Node& node, const std::string& field) {
  Quota q;
  if (node.IsScalar()) {  // shorthand: `gpus: 8` is `gpus: {guaranteed: 8}`
    auto g = Amount(kind, node, field);
    if (!g) return std::unexpected(g.error());
    q.guaranteed = *g;
    return q;
  }
  BERTH_RETURN_IF_ERROR(YamlObject::Read(node, field, kQuotaFields));
  if (auto n = node["guaranteed"]) {
    auto v = Amount(kind, n, FieldPath(field, "guaranteed"));
    if (!v) return std::unexpected(v.error());
    q.guaranteed = *v;
  }
  if (auto n = node["borrow_limit"]) {
    auto v = Amount(kind, n, FieldPath(field, "borrow_limit"));
    if (!v) return std::unexpected(v.error());
    q.borrow_limit = *v;
  }
  if (auto n = node["weight"]) {
    auto v = Int(n, FieldPath(field, "weight"), 1, kMaxWeight);
    if (!v) return std::unexpected(v.error());
    q.weight = *v;
  }
  if (auto n = node["lending_limit"]) {
    auto v = Amount(kind, n, FieldPath(field, "lending_limit"));
    if (!v) return std::unexpected(v.error());
    q.lending_limit = *v;
  }
  if (q.lending_limit > q.guaranteed) {
    return InvalidField(
        FieldPath(field, "lending_limit"),
        fmt::format("{} is more than the guaranteed {}: only guaranteed capacity "
                    "can be kept from lending",
                    FormatAmount(kind, q.lending_limit), FormatAmount(kind, q.guaranteed)));
  }
  return q;
}

Result<std::vector<std::string>> Names(const YAML::Node& node, const std::string& field) {
  if (!node.IsSequence()) return InvalidField(field, "must be a list of names");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    auto v = Str(node[i], fmt::format("{}[{}]", field, i));
    if (!v) return std::unexpected(v.error());
    out.push_back(*v);
  }
  return out;
}

class Parser {
 public:
  explicit Parser(Policy& p) : p_(p) {}

  Status Top(const YAML::Node& root) {
    if (!root.IsMap()) return InvalidField("", "a policy must be a YAML mapping");
    BERTH_RETURN_IF_ERROR(YamlObject::Read(root, "", kPolicyFields));
    for (auto [key, target] : {std::pair{"usage_half_life", &p_.usage_half_life_ms},
                               std::pair{"min_runtime", &p_.min_runtime_ms}}) {
      if (auto n = root[key]) {
        auto s = Str(n, key);
        if (!s) return std::unexpected(s.error());
        auto ms = ParseDurationMs(*s, kMaxPolicyDurationMs);
        if (!ms) return InvalidField(key, ms.error().message);
        *target = *ms;
      }
    }
    if (p_.usage_half_life_ms <= 0) {
      return InvalidField("usage_half_life", "must be longer than zero");
    }
    if (auto n = root["reclaim_grace"]) {
      auto s = Str(n, "reclaim_grace");
      if (!s) return std::unexpected(s.error());
      auto ms = ParseDurationMs(*s, kMaxReclaimGraceMs);
      if (!ms) return InvalidField("reclaim_grace", ms.error().message);
      p_.reclaim_grace_ms = *ms;
    }
    if (auto n = root["short_first_max_wait"]) {
      auto s = Str(n, "short_first_max_wait");
      if (!s) return std::unexpected(s.error());
      auto ms = ParseDurationMs(*s, kMaxPolicyDurationMs);
      if (!ms) return InvalidField("short_first_max_wait", ms.error().message);
      p_.short_first_max_wait_ms = *ms;
    }
    if (auto n = root["retry"]) {
      auto cap = RetryCapSection(n, "retry");
      if (!cap) return std::unexpected(cap.error());
      p_.retry = *cap;
    }
    if (auto n = root["backfill"]) BERTH_RETURN_IF_ERROR(BackfillSection(n));
    if (auto n = root["consolidation"]) BERTH_RETURN_IF_ERROR(ConsolidationSection(n));
    if (auto n = root["pools"]) BERTH_RETURN_IF_ERROR(Pools(n));
    if (auto n = root["priority_classes"]) BERTH_RETURN_IF_ERROR(Classes(n));
    if (auto n = root["queues"]) {
      if (!n.IsSequence()) return InvalidField("queues", "must be a list of queues");
      for (std::size_t i = 0; i < n.size(); ++i) {
        BERTH_RETURN_IF_ERROR(Queue(n[i], "", fmt::format("queues[{}]", i), 1));
      }
    }
    if (auto n = root["tenants"]) BERTH_RETURN_IF_ERROR(Tenants(n));
    if (auto n = root["limits"]) {
      auto limits = LimitsSection(n, "limits");
      if (!limits) return std::unexpected(limits.error());
      p_.limits = *limits;
    }
    return Ok();
  }

 private:
  static Result<Limits> LimitsSection(const YAML::Node& n, const std::string& f) {
    BERTH_RETURN_IF_ERROR(YamlObject::Read(n, f, kLimitNames));
    Limits limits;
    for (const auto& lf : kLimitFields) {
      auto v = n[std::string(lf.name)];
      if (!v) continue;
      const std::string field = FieldPath(f, lf.name);
      if (!lf.bytes) {
        auto i = Int(v, field, lf.lo, lf.hi);
        if (!i) return std::unexpected(i.error());
        limits.*lf.member = *i;
        continue;
      }
      if (!v.IsScalar()) return InvalidField(field, "must be a size such as 1Mi");
      auto b = ParseBytes(v.Scalar(), static_cast<std::uint64_t>(lf.hi));
      if (!b) return InvalidField(field, b.error().message);
      if (*b < static_cast<std::uint64_t>(lf.lo)) {
        return InvalidField(field, fmt::format("{} is below the least allowed, {}", v.Scalar(),
                                               FormatBytes(static_cast<std::uint64_t>(lf.lo))));
      }
      limits.*lf.member = static_cast<std::int64_t>(*b);
    }
    return limits;
  }

  Status Tenants(const YAML::Node& n) {
    if (!n.IsMap()) return InvalidField("tenants", "must map a tenant name to its settings");
    std::set<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar()) return InvalidField("tenants", "tenant names must be strings");
      const std::string name = it->first.Scalar();
      const std::string f = "tenants." + name;
      if (!seen.insert(name).second) {
        return InvalidField(f, fmt::format("field '{}' is given twice; give it once", f));
      }
      // A document without queues gets the default tenant's (ParsePolicy).
      bool has_queue = p_.queues.empty() && name == "default";
      for (const auto& q : p_.queues) {
        has_queue = has_queue || (q.parent.empty() && q.tenant == name);
      }
      if (!has_queue) {
        return InvalidField(f, fmt::format("no queue belongs to tenant '{}'; add its queue under "
                                           "queues first, or remove this entry",
                                           name));
      }
      BERTH_RETURN_IF_ERROR(YamlObject::Read(it->second, f, kTenantFields));
      TenantPolicy t;
      if (auto r = it->second["run_as"]) {
        auto run_as = RunAsSection(r, FieldPath(f, "run_as"));
        if (!run_as) return std::unexpected(run_as.error());
        t.run_as = *run_as;
      }
      if (auto st = it->second["storage"]) {
        const std::string sf = FieldPath(f, "storage");
        if (!st.IsSequence()) return InvalidField(sf, "must be a list of {path, access}");
        if (st.size() > kMaxStorageGrants) {
          return InvalidField(sf, fmt::format("at most {} grants", kMaxStorageGrants));
        }
        for (std::size_t i = 0; i < st.size(); ++i) {
          const std::string gf = fmt::format("{}[{}]", sf, i);
          BERTH_RETURN_IF_ERROR(YamlObject::Read(st[i], gf, kGrantFields));
          StorageGrant g;
          auto path = st[i]["path"] ? Str(st[i]["path"], FieldPath(gf, "path"))
                                    : InvalidField(FieldPath(gf, "path"), "is required");
          if (!path) return std::unexpected(path.error());
          if (path->empty() || path->front() != '/' ||
              std::filesystem::path(*path).lexically_normal().string() != *path ||
              (path->size() > 1 && path->back() == '/')) {
            return InvalidField(FieldPath(gf, "path"),
                                fmt::format("'{}' must be an absolute, normal path such as "
                                            "/data/{} (no ., .., // or trailing /)",
                                            *path, name));
          }
          g.path = *path;
          if (auto a = st[i]["access"]) {
            auto v = Str(a, FieldPath(gf, "access"));
            if (!v) return std::unexpected(v.error());
            if (*v != "read-write" && *v != "read-only") {
              return InvalidField(FieldPath(gf, "access"), "must be read-write or read-only");
            }
            g.writable = *v == "read-write";
          }
          t.storage.push_back(std::move(g));
        }
      }
      if (auto cn = it->second["container_network"]) {
        const std::string nf = FieldPath(f, "container_network");
        auto v = Str(cn, nf);
        if (!v) return std::unexpected(v.error());
        if (*v == "private") {
          t.container_network = ContainerNetwork::kPrivate;
        } else if (*v == "none") {
          t.container_network = ContainerNetwork::kNone;
        } else if (*v == "host") {
          t.container_network = ContainerNetwork::kHost;
        } else {
          return InvalidField(nf, fmt::format("'{}' is none of private (the container's own "
                                              "network namespace, the default), none (loopback "
                                              "only) or host (the node's network)",
                                              *v));
        }
      }
      if (auto l = it->second["limits"]) {
        auto limits = LimitsSection(l, FieldPath(f, "limits"));
        if (!limits) return std::unexpected(limits.error());
        t.limits = *limits;
      }
      p_.tenants[name] = t;
    }
    return Ok();
  }

  Result<RunAs> RunAsSection(const YAML::Node& n, const std::string& f) {
    BERTH_RETURN_IF_ERROR(YamlObject::Read(n, f, kRunAsFields));
    RunAs r;
    if (n["user"] && n["uid"]) {
      return InvalidField(f, "give either user (resolved on each node) or uid, not both");
    }
    if (!n["user"] && !n["uid"]) {
      return InvalidField(f, "give user (a name each node resolves) or uid (with gid)");
    }
    if (auto u = n["user"]) {
      auto v = Str(u, FieldPath(f, "user"));
      if (!v) return std::unexpected(v.error());
      if (v->empty() || v->size() > 64 || v->find_first_of(":/ \t\n") != std::string::npos) {
        return InvalidField(FieldPath(f, "user"), "must be a user name of 1 to 64 characters");
      }
      if (n["gid"] || n["groups"]) {
        return InvalidField(f,
                            "a user's groups come from the node; give gid and groups only "
                            "with uid");
      }
      r.user = *v;
    }
    constexpr std::int64_t kMaxId = 4'294'967'294;  // (uid_t)-1 means "none" to the kernel
    if (auto u = n["uid"]) {
      auto v = Int(u, FieldPath(f, "uid"), 0, kMaxId);
      if (!v) return std::unexpected(v.error());
      r.uid = static_cast<std::uint32_t>(*v);
      r.gid = *r.uid;
      if (auto g = n["gid"]) {
        auto gv = Int(g, FieldPath(f, "gid"), 0, kMaxId);
        if (!gv) return std::unexpected(gv.error());
        r.gid = static_cast<std::uint32_t>(*gv);
      }
      if (auto gs = n["groups"]) {
        if (!gs.IsSequence()) return InvalidField(FieldPath(f, "groups"), "must be a list of gids");
        for (std::size_t i = 0; i < gs.size(); ++i) {
          auto gv = Int(gs[i], fmt::format("{}.groups[{}]", f, i), 0, kMaxId);
          if (!gv) return std::unexpected(gv.error());
          r.groups.push_back(static_cast<std::uint32_t>(*gv));
        }
      }
    }
    if (auto a = n["allow_root"]) {
      auto v = Bool(a, FieldPath(f, "allow_root"));
      if (!v) return std::unexpected(v.error());
      r.allow_root = *v;
    }
    const bool root = (r.uid && (*r.uid == 0 || r.gid == 0)) || r.user == "root" ||
                      std::find(r.groups.begin(), r.groups.end(), 0U) != r.groups.end();
    if (root && !r.allow_root) {
      return InvalidField(f,
                          "runs as root (uid or group 0) only with allow_root: true; a job "
                          "running as root can read every tenant's data on its node");
    }
    return r;
  }

  // `retry: {max_attempts: N}`, at the top level or on a queue (`f`).
  static Result<RetryCap> RetryCapSection(const YAML::Node& n, const std::string& f) {
    BERTH_RETURN_IF_ERROR(
        YamlObject::Read(n, f, kRetryCapFields,
                         "must be a mapping such as {max_attempts: 1} (1 turns retries off)"));
    RetryCap cap;
    const std::string mf = FieldPath(f, "max_attempts");
    if (!n["max_attempts"]) {
      return InvalidField(mf, "is required, e.g. {max_attempts: 1} (1 turns retries off)");
    }
    if (auto m = n["max_attempts"]) {
      auto v = Int(m, mf, 1, kMaxRetryAttempts);
      if (!v) {
        return InvalidField(mf, fmt::format("must be a whole number of attempts from 1 (retries "
                                            "off) to {}, the first attempt included ({})",
                                            kMaxRetryAttempts, v.error().message));
      }
      cap.max_attempts = static_cast<std::uint32_t>(*v);
    }
    return cap;
  }

  Status BackfillSection(const YAML::Node& n) {
    BERTH_RETURN_IF_ERROR(YamlObject::Read(n, "backfill", kBackfillFields));
    if (auto e = n["enabled"]) {
      auto b = Bool(e, "backfill.enabled");
      if (!b) return std::unexpected(b.error());
      p_.backfill.enabled = *b;
    }
    if (auto m = n["max_reservations"]) {
      auto v = Int(m, "backfill.max_reservations", 0, kMaxReservations);
      if (!v) return std::unexpected(v.error());
      p_.backfill.max_reservations = *v;
    }
    return Ok();
  }

  Status ConsolidationSection(const YAML::Node& n) {
    BERTH_RETURN_IF_ERROR(YamlObject::Read(n, "consolidation", kConsolidationFields));
    if (auto e = n["enabled"]) {
      auto b = Bool(e, "consolidation.enabled");
      if (!b) return std::unexpected(b.error());
      p_.consolidation.enabled = *b;
    }
    if (auto m = n["max_moves"]) {
      auto v = Int(m, "consolidation.max_moves", 0, kMaxMoves);
      if (!v) return std::unexpected(v.error());
      p_.consolidation.max_moves = *v;
    }
    if (auto m = n["max_jobs_per_cycle"]) {
      auto v = Int(m, "consolidation.max_jobs_per_cycle", 0, kMaxConsolidationJobsPerCycle);
      if (!v) return std::unexpected(v.error());
      p_.consolidation.max_jobs_per_cycle = *v;
    }
    return Ok();
  }

  Status Pools(const YAML::Node& n) {
    if (!n.IsSequence()) return InvalidField("pools", "must be a list of {name, selector}");
    p_.pools.clear();
    for (std::size_t i = 0; i < n.size(); ++i) {
      std::string f = fmt::format("pools[{}]", i);
      BERTH_RETURN_IF_ERROR(YamlObject::Read(n[i], f, kPoolFields));
      Pool pool;
      auto name = n[i]["name"] ? Str(n[i]["name"], FieldPath(f, "name"))
                               : InvalidField(FieldPath(f, "name"), "is required");
      if (!name) return std::unexpected(name.error());
      if (!IsValidName(*name))
        return InvalidField(FieldPath(f, "name"), "is not a valid pool name");
      if (p_.FindPool(*name) != nullptr) {
        return InvalidField(FieldPath(f, "name"), fmt::format("pool '{}' is defined twice", *name));
      }
      pool.name = *name;
      if (auto sel = n[i]["selector"]) {
        if (!sel.IsMap()) return InvalidField(FieldPath(f, "selector"), "must map label to value");
        for (auto it = sel.begin(); it != sel.end(); ++it) {
          if (!it->first.IsScalar() || !it->second.IsScalar()) {
            return InvalidField(FieldPath(f, "selector"), "labels and values must be strings");
          }
          pool.selector[it->first.Scalar()] = it->second.Scalar();
        }
      }
      if (auto h = n[i]["inference_headroom"]) {
        const std::string hf = FieldPath(f, "inference_headroom");
        if (!h.IsMap()) {
          return InvalidField(hf,
                              "must be a map such as {gpus: 2}: the whole GPUs of the pool "
                              "kept for inference replicas");
        }
        BERTH_RETURN_IF_ERROR(YamlObject::Read(h, hf, kHeadroomFields));
        if (!h["gpus"]) return InvalidField(FieldPath(hf, "gpus"), "is required, e.g. {gpus: 2}");
        auto g = Int(h["gpus"], FieldPath(hf, "gpus"), 0, kMaxInferenceHeadroomGpus);
        if (!g) {
          return InvalidField(FieldPath(hf, "gpus"),
                              fmt::format("must be a whole number of GPUs from 0 to {} ({})",
                                          kMaxInferenceHeadroomGpus, g.error().message));
        }
        pool.inference_headroom_gpus = *g;
      }
      p_.pools.push_back(std::move(pool));
    }
    return Ok();
  }

  Status Classes(const YAML::Node& n) {
    if (!n.IsSequence()) {
      return InvalidField("priority_classes", "must be a list of {name, value, preemptible}");
    }
    p_.priority_classes.clear();
    for (std::size_t i = 0; i < n.size(); ++i) {
      std::string f = fmt::format("priority_classes[{}]", i);
      BERTH_RETURN_IF_ERROR(YamlObject::Read(n[i], f, kClassFields));
      PriorityClass c;
      auto name = n[i]["name"] ? Str(n[i]["name"], FieldPath(f, "name"))
                               : InvalidField(FieldPath(f, "name"), "is required");
      if (!name) return std::unexpected(name.error());
      if (!IsValidName(*name))
        return InvalidField(FieldPath(f, "name"), "is not a valid class name");
      if (p_.FindPriorityClass(*name) != nullptr) {
        return InvalidField(FieldPath(f, "name"),
                            fmt::format("class '{}' is defined twice", *name));
      }
      c.name = *name;
      if (!n[i]["value"]) return InvalidField(FieldPath(f, "value"), "is required");
      auto v = Int(n[i]["value"], FieldPath(f, "value"), 0, 1'000'000);
      if (!v) return std::unexpected(v.error());
      c.value = static_cast<std::int32_t>(*v);
      if (auto pre = n[i]["preemptible"]) {
        auto b = Bool(pre, FieldPath(f, "preemptible"));
        if (!b) return std::unexpected(b.error());
        c.preemptible = *b;
      }
      p_.priority_classes.push_back(std::move(c));
    }
    return Ok();
  }

  Status Queue(const YAML::Node& n, const std::string& parent, const std::string& f,
               std::size_t depth) {
    BERTH_RETURN_IF_ERROR(YamlObject::Read(n, f, kQueueFields));
    if (depth > kMaxQueueDepth) {
      return InvalidField(f, fmt::format("queues nest at most {} deep", kMaxQueueDepth));
    }
    auto name = n["name"] ? Str(n["name"], FieldPath(f, "name"))
                          : InvalidField(FieldPath(f, "name"), "is required");
    if (!name) return std::unexpected(name.error());
    if (!IsValidName(*name)) {
      return InvalidField(FieldPath(f, "name"),
                          fmt::format("'{}' is not a valid queue name (lower-case "
                                      "letters, digits, '-', '_', '.')",
                                      *name));
    }
    QueuePolicy q;
    q.path = parent.empty() ? *name : parent + "/" + *name;
    q.tenant = parent.empty() ? *name : parent.substr(0, parent.find('/'));
    q.parent = parent;
    if (p_.FindQueue(q.path) != nullptr) {
      return InvalidField(FieldPath(f, "name"), fmt::format("queue '{}' is defined twice", q.path));
    }
    if (auto k = n["kind"]) {
      auto v = Str(k, FieldPath(f, "kind"));
      if (!v) return std::unexpected(v.error());
      if (std::find(kQueueKinds.begin(), kQueueKinds.end(), *v) == kQueueKinds.end()) {
        return InvalidField(FieldPath(f, "kind"),
                            fmt::format("'{}' is not one of {}", *v, JoinNames(kQueueKinds)));
      }
      q.kind = *v;
    }
    if (auto pools = n["pools"]) {
      auto v = Names(pools, FieldPath(f, "pools"));
      if (!v) return std::unexpected(v.error());
      for (std::size_t i = 0; i < v->size(); ++i) {
        if (p_.FindPool((*v)[i]) == nullptr) {
          std::vector<std::string> known;
          for (const auto& p : p_.pools) known.push_back(p.name);
          return InvalidField(fmt::format("{}.pools[{}]", f, i),
                              fmt::format("unknown pool '{}'; pools are: {}", (*v)[i],
                                          known.empty() ? "(none)" : JoinNames(known)));
        }
      }
      q.pools = std::move(*v);
    }
    if (auto quota = n["quota"]) {
      std::string qf = FieldPath(f, "quota");
      if (!quota.IsMap()) return InvalidField(qf, "must map resources to quotas");
      for (auto it = quota.begin(); it != quota.end(); ++it) {
        if (!it->first.IsScalar()) return InvalidField(qf, "resource names must be strings");
        auto key = ParseResourceKey(it->first.Scalar());
        std::string rf = FieldPath(qf, it->first.Scalar());
        if (!key) {
          return InvalidField(rf, fmt::format("unknown resource '{}'; use gpus, gpus/MODEL, "
                                              "gpu_memory, cpu or memory",
                                              it->first.Scalar()));
        }
        auto v = ParseQuota(key->kind, it->second, rf);
        if (!v) return std::unexpected(v.error());
        if (q.quota.contains(*key)) {
          return InvalidField(rf, fmt::format("field '{}' is given twice; give it once", rf));
        }
        q.quota[*key] = *v;
      }
    }
    if (auto o = n["over_quota"]) {
      auto v = Str(o, FieldPath(f, "over_quota"));
      if (!v) return std::unexpected(v.error());
      if (*v == "borrow") {
        q.over_quota = OverQuota::kBorrow;
      } else if (*v == "wait") {
        q.over_quota = OverQuota::kWait;
      } else if (*v == "reject") {
        q.over_quota = OverQuota::kReject;
      } else {
        return InvalidField(FieldPath(f, "over_quota"),
                            fmt::format("'{}' is not one of borrow, wait, reject", *v));
      }
    }
    if (auto pre = n["preemptible"]) {
      auto b = Bool(pre, FieldPath(f, "preemptible"));
      if (!b) return std::unexpected(b.error());
      q.preemptible_by_default = *b;
    }
    if (auto m = n["max_session_lifetime"]) {
      const std::string mf = FieldPath(f, "max_session_lifetime");
      if (q.kind != "interactive") {
        return InvalidField(mf, fmt::format("is for queues of kind interactive (sessions); queue "
                                            "{} is of kind {}",
                                            q.path, q.kind));
      }
      auto v = Str(m, mf);
      if (!v) return std::unexpected(v.error());
      auto ms = ParseDurationMs(*v);
      if (!ms || *ms < 60'000 || *ms > kMaxSessionLifetimeMs) {
        return InvalidField(mf, fmt::format("'{}' is not a duration from 1m to 30d, e.g. 8h", *v));
      }
      q.max_session_lifetime_ms = *ms;
    }
    if (auto r = n["retry"]) {
      auto cap = RetryCapSection(r, FieldPath(f, "retry"));
      if (!cap) return std::unexpected(cap.error());
      q.retry = *cap;
    }
    std::string path = q.path;
    auto quota = q.quota;
    p_.queues.push_back(std::move(q));
    if (auto children = n["children"]) {
      std::string cf = FieldPath(f, "children");
      if (!children.IsSequence()) return InvalidField(cf, "must be a list of queues");
      std::size_t first = p_.queues.size();
      for (std::size_t i = 0; i < children.size(); ++i) {
        BERTH_RETURN_IF_ERROR(Queue(children[i], path, fmt::format("{}[{}]", cf, i), depth + 1));
      }
      // Children's guarantees are carved out of their parent's.
      for (const auto& [key, pq] : quota) {
        std::int64_t sum = 0;
        for (std::size_t i = first; i < p_.queues.size(); ++i) {
          if (p_.queues[i].parent != path) continue;
          if (auto it = p_.queues[i].quota.find(key); it != p_.queues[i].quota.end()) {
            // Saturating: a clamped sum is still more than any parent's.
            sum = SaturatingAdd(sum, it->second.guaranteed);
          }
        }
        if (sum > pq.guaranteed) {
          return InvalidField(cf,
                              fmt::format("children of '{}' guarantee {} {} in total, more "
                                          "than the parent's {}",
                                          path, FormatAmount(key.kind, sum), ResourceKeyName(key),
                                          FormatAmount(key.kind, pq.guaranteed)));
        }
      }
    }
    return Ok();
  }

  Policy& p_;
};

}  // namespace

Result<std::int64_t> ParseQuotaAmount(ResourceKind kind, std::string_view text,
                                      const std::string& field) {
  return Amount(kind, YAML::Node(std::string(text)), field);
}

std::string FormatQuotaAmount(ResourceKind kind, std::int64_t v) {
  return FormatAmount(kind, v);
}

std::string ResourceKeyName(const ResourceKey& key) {
  switch (key.kind) {
    case ResourceKind::kGpus:
      return key.gpu_model.empty() ? "gpus" : "gpus/" + key.gpu_model;
    case ResourceKind::kGpuMemory:
      return "gpu_memory";
    case ResourceKind::kCpu:
      return "cpu";
    case ResourceKind::kMemory:
      return "memory";
  }
  return "gpus";
}

std::optional<ResourceKey> ParseResourceKey(std::string_view name) {
  if (name == "gpus") return ResourceKey{ResourceKind::kGpus, ""};
  if (name == "gpu_memory") return ResourceKey{ResourceKind::kGpuMemory, ""};
  if (name == "cpu") return ResourceKey{ResourceKind::kCpu, ""};
  if (name == "memory") return ResourceKey{ResourceKind::kMemory, ""};
  if (name.starts_with("gpus/") && name.size() > 5 && name.size() <= 5 + 64) {
    // GPU model names as Berth writes them ("H100-80GB"): letters, digits
    // and ._- only, so a policy prints and parses back unchanged.
    const std::string_view model = name.substr(5);
    for (char c : model) {
      if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '.' && c != '_' && c != '-') {
        return std::nullopt;
      }
    }
    return ResourceKey{ResourceKind::kGpus, std::string(model)};
  }
  return std::nullopt;
}

const QueuePolicy* Policy::FindQueue(std::string_view path) const {
  for (const auto& q : queues) {
    if (q.path == path) return &q;
  }
  return nullptr;
}

std::optional<AttemptCap> AttemptCapOf(const Policy& policy, std::string_view queue) {
  // The queue, then its ancestors: a path's parent is the path up to its
  // last '/'.
  std::string path(queue);
  while (!path.empty()) {
    const QueuePolicy* q = policy.FindQueue(path);
    if (q != nullptr && q->retry.max_attempts) return AttemptCap{*q->retry.max_attempts, q->path};
    const auto slash = path.rfind('/');
    if (slash == std::string::npos) break;
    path.resize(slash);
  }
  if (policy.retry.max_attempts) return AttemptCap{*policy.retry.max_attempts, {}};
  return std::nullopt;
}

std::uint32_t EffectiveMaxAttempts(std::uint32_t asked, const std::optional<AttemptCap>& cap) {
  return cap ? std::min(asked, cap->max_attempts) : asked;
}

const Pool* Policy::FindPool(std::string_view name) const {
  for (const auto& p : pools) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const PriorityClass* Policy::FindPriorityClass(std::string_view name) const {
  for (const auto& c : priority_classes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

Policy DefaultPolicy() {
  Policy p;
  p.pools = {Pool{"default", {}}};
  p.priority_classes = {
      {"low", 0, true}, {"normal", 100, true}, {"high", 200, true}, {"critical", 300, true}};
  QueuePolicy tenant;
  tenant.path = "default";
  tenant.tenant = "default";
  QueuePolicy queue;
  queue.path = "default/default";
  queue.tenant = "default";
  queue.parent = "default";
  p.queues = {tenant, queue};
  // A fresh install's one tenant may use /tmp, so a first job can write a
  // checkpoint; a policy that lists its tenants grants its own storage.
  p.tenants["default"].storage = {StorageGrant{"/tmp", true}};
  return p;
}

Result<Policy> ParsePolicy(std::string_view yaml) {
  Policy p = DefaultPolicy();
  p.queues.clear();  // a document lists its own queues; pools and classes default
  p.tenants.clear();
  BERTH_RETURN_IF_ERROR(
      ReadDocument(yaml, 0, "policy", [&](const YAML::Node& root) { return Parser(p).Top(root); }));
  if (p.queues.empty() && p.tenants.empty()) {
    // Jobs always have somewhere to go, as on a fresh install.
    p.queues = DefaultPolicy().queues;
    p.tenants = DefaultPolicy().tenants;
  } else if (p.queues.empty()) {
    p.queues = DefaultPolicy().queues;
  }
  // Two tenants never share a run identity: their jobs could then read and
  // signal each other's on every node.
  std::map<std::string, std::string> owner;  // identity -> tenant
  for (const auto& q : p.queues) {
    if (!q.parent.empty()) continue;
    RunAs r = RunIdentityOf(p, q.tenant);
    std::string key = r.uid ? fmt::format("uid {}", *r.uid) : "user " + r.user;
    auto [it, fresh] = owner.emplace(key, q.tenant);
    if (!fresh && it->second != q.tenant) {
      return InvalidField(fmt::format("tenants.{}.run_as", q.tenant),
                          fmt::format("tenants {} and {} would both run as {}; give one of them a "
                                      "run_as of its own",
                                      it->second, q.tenant, key));
    }
  }
  return p;
}

}  // namespace berth::model
