// The policy printed back as YAML (PolicyToYaml): what `berth policy get`
// shows and what ParsePolicy reads back to the same policy.
#include <yaml-cpp/yaml.h>

#include <string>

#include "common/units.h"
#include "model/policy.h"
#include "model/policy_limits.h"

namespace berth::model {
namespace {

// `retry: {max_attempts: N}` when a cap is set; nothing otherwise, so a
// policy without one prints as before.
void EmitRetryCap(YAML::Emitter& out, const RetryCap& cap) {
  if (!cap.max_attempts) return;
  out << YAML::Key << "retry" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key
      << "max_attempts" << YAML::Value << *cap.max_attempts << YAML::EndMap;
}

void EmitQueue(YAML::Emitter& out, const Policy& p, const QueuePolicy& q) {
  out << YAML::BeginMap;
  auto slash = q.path.rfind('/');
  out << YAML::Key << "name" << YAML::Value
      << (slash == std::string::npos ? q.path : q.path.substr(slash + 1));
  if (q.kind != "training") out << YAML::Key << "kind" << YAML::Value << q.kind;
  if (!q.pools.empty()) {
    out << YAML::Key << "pools" << YAML::Value << YAML::Flow << q.pools;
  }
  if (!q.quota.empty()) {
    out << YAML::Key << "quota" << YAML::Value << YAML::BeginMap;
    for (const auto& [key, quota] : q.quota) {
      out << YAML::Key << ResourceKeyName(key) << YAML::Value << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "guaranteed" << YAML::Value
          << FormatQuotaAmount(key.kind, quota.guaranteed);
      if (quota.borrow_limit) {
        out << YAML::Key << "borrow_limit" << YAML::Value
            << FormatQuotaAmount(key.kind, *quota.borrow_limit);
      }
      if (quota.weight != 1) out << YAML::Key << "weight" << YAML::Value << quota.weight;
      if (quota.lending_limit != 0) {
        out << YAML::Key << "lending_limit" << YAML::Value
            << FormatQuotaAmount(key.kind, quota.lending_limit);
      }
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  if (q.over_quota != OverQuota::kBorrow) {
    out << YAML::Key << "over_quota" << YAML::Value
        << (q.over_quota == OverQuota::kWait ? "wait" : "reject");
  }
  if (!q.preemptible_by_default) out << YAML::Key << "preemptible" << YAML::Value << false;
  if (q.max_session_lifetime_ms) {
    out << YAML::Key << "max_session_lifetime" << YAML::Value
        << FormatDurationMs(*q.max_session_lifetime_ms);
  }
  EmitRetryCap(out, q.retry);
  bool any_child = false;
  for (const auto& c : p.queues) {
    if (c.parent != q.path) continue;
    if (!any_child) out << YAML::Key << "children" << YAML::Value << YAML::BeginSeq;
    any_child = true;
    EmitQueue(out, p, c);
  }
  if (any_child) out << YAML::EndSeq;
  out << YAML::EndMap;
}

void EmitLimits(YAML::Emitter& out, const Limits& limits) {
  using policy_internal::kLimitFields;
  if (limits == Limits{}) return;
  out << YAML::Key << "limits" << YAML::Value << YAML::BeginMap;
  for (const auto& lf : kLimitFields) {
    const auto& v = limits.*lf.member;
    if (!v) continue;
    out << YAML::Key << std::string(lf.name) << YAML::Value;
    if (lf.bytes) {
      out << FormatBytes(static_cast<std::uint64_t>(*v));
    } else {
      out << *v;
    }
  }
  out << YAML::EndMap;
}

}  // namespace

std::string PolicyToYaml(const Policy& p) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "usage_half_life" << YAML::Value << FormatDurationMs(p.usage_half_life_ms);
  out << YAML::Key << "min_runtime" << YAML::Value << FormatDurationMs(p.min_runtime_ms);
  out << YAML::Key << "reclaim_grace" << YAML::Value << FormatDurationMs(p.reclaim_grace_ms);
  out << YAML::Key << "short_first_max_wait" << YAML::Value
      << FormatDurationMs(p.short_first_max_wait_ms);
  out << YAML::Key << "backfill" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key
      << "enabled" << YAML::Value << p.backfill.enabled << YAML::Key << "max_reservations"
      << YAML::Value << p.backfill.max_reservations << YAML::EndMap;
  out << YAML::Key << "consolidation" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key
      << "enabled" << YAML::Value << p.consolidation.enabled << YAML::Key << "max_moves"
      << YAML::Value << p.consolidation.max_moves << YAML::Key << "max_jobs_per_cycle"
      << YAML::Value << p.consolidation.max_jobs_per_cycle << YAML::EndMap;
  EmitRetryCap(out, p.retry);
  out << YAML::Key << "pools" << YAML::Value << YAML::BeginSeq;
  for (const auto& pool : p.pools) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << pool.name
        << YAML::Key << "selector" << YAML::Value << YAML::Flow << pool.selector;
    if (pool.inference_headroom_gpus > 0) {
      out << YAML::Key << "inference_headroom" << YAML::Value << YAML::Flow << YAML::BeginMap
          << YAML::Key << "gpus" << YAML::Value << pool.inference_headroom_gpus << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "priority_classes" << YAML::Value << YAML::BeginSeq;
  for (const auto& c : p.priority_classes) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << c.name << YAML::Key
        << "value" << YAML::Value << c.value;
    if (!c.preemptible) out << YAML::Key << "preemptible" << YAML::Value << false;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "queues" << YAML::Value << YAML::BeginSeq;
  for (const auto& q : p.queues) {
    if (q.parent.empty()) EmitQueue(out, p, q);
  }
  out << YAML::EndSeq;
  if (!p.tenants.empty()) {
    out << YAML::Key << "tenants" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, t] : p.tenants) {
      out << YAML::Key << name << YAML::Value << YAML::BeginMap;
      if (t.run_as) {
        const RunAs& r = *t.run_as;
        out << YAML::Key << "run_as" << YAML::Value << YAML::Flow << YAML::BeginMap;
        if (r.uid) {
          out << YAML::Key << "uid" << YAML::Value << *r.uid << YAML::Key << "gid" << YAML::Value
              << r.gid;
          if (!r.groups.empty())
            out << YAML::Key << "groups" << YAML::Value << YAML::Flow << r.groups;
        } else {
          out << YAML::Key << "user" << YAML::Value << r.user;
        }
        if (r.allow_root) out << YAML::Key << "allow_root" << YAML::Value << true;
        out << YAML::EndMap;
      }
      if (!t.storage.empty()) {
        out << YAML::Key << "storage" << YAML::Value << YAML::BeginSeq;
        for (const auto& g : t.storage) {
          out << YAML::Flow << YAML::BeginMap << YAML::Key << "path" << YAML::Value << g.path
              << YAML::Key << "access" << YAML::Value << (g.writable ? "read-write" : "read-only")
              << YAML::EndMap;
        }
        out << YAML::EndSeq;
      }
      if (t.container_network != ContainerNetwork::kPrivate) {
        out << YAML::Key << "container_network" << YAML::Value
            << std::string(ContainerNetworkName(t.container_network));
      }
      EmitLimits(out, t.limits);
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  EmitLimits(out, p.limits);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace berth::model
