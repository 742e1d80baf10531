#include "api/queue_usage.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

namespace berth::server {

using nlohmann::json;

namespace {

const model::ResourceKey kGpus{model::ResourceKind::kGpus, ""};

// What one live run holds, in milli-GPUs.
std::int64_t RunMgpu(const store::RunRecord& r) {
  if (r.gpu_share_millis > 0) return static_cast<std::int64_t>(r.gpu_share_millis);
  return static_cast<std::int64_t>(r.gpu_indices.size()) * 1000;
}

std::string_view OverQuotaName(model::OverQuota o) {
  switch (o) {
    case model::OverQuota::kWait:
      return "wait";
    case model::OverQuota::kReject:
      return "reject";
    case model::OverQuota::kBorrow:
      break;
  }
  return "borrow";
}

}  // namespace

json QueueUsageJson(const model::Policy& policy, const std::vector<store::JobRecord>& holders,
                    const model::TenantScope& scope, std::string_view tenant) {
  std::map<std::string, const model::QueuePolicy*, std::less<>> by_path;
  for (const auto& q : policy.queues) by_path.emplace(q.path, &q);
  // Held GPUs and running jobs per queue, each counted up the chain.
  std::map<std::string, std::int64_t, std::less<>> used;
  std::map<std::string, std::int64_t, std::less<>> jobs;
  for (const auto& job : holders) {
    std::int64_t held = 0;
    for (const auto& r : job.runs) {
      if (r.state != model::RunState::kExited) held += RunMgpu(r);
    }
    const std::string leaf = job.spec.tenant + "/" + job.spec.queue;
    for (auto it = by_path.find(leaf); it != by_path.end(); it = by_path.find(it->second->parent)) {
      used[it->first] += held;
      jobs[it->first] += 1;
    }
  }
  json out = json::array();
  for (const auto& q : policy.queues) {
    if (!scope.Contains(q.tenant) || (!tenant.empty() && q.tenant != tenant)) continue;
    const auto quota = q.quota.find(kGpus);
    const bool declared = quota != q.quota.end();
    const std::int64_t use = used.contains(q.path) ? used.at(q.path) : 0;
    json e = {{"queue", q.path},
              {"tenant", q.tenant},
              {"parent", q.parent.empty() ? json(nullptr) : json(q.parent)},
              {"kind", q.kind},
              {"over_quota", OverQuotaName(q.over_quota)},
              {"used_mgpu", use},
              {"running_jobs", jobs.contains(q.path) ? jobs.at(q.path) : 0},
              {"guaranteed_mgpu", nullptr},
              {"borrow_limit_mgpu", nullptr},
              {"lending_limit_mgpu", nullptr},
              {"borrowed_mgpu", nullptr},
              {"idle_guaranteed_mgpu", nullptr},
              {"lendable_mgpu", nullptr}};
    if (declared) {
      const model::Quota& g = quota->second;
      e["guaranteed_mgpu"] = g.guaranteed;
      if (g.borrow_limit) e["borrow_limit_mgpu"] = *g.borrow_limit;
      e["lending_limit_mgpu"] = g.lending_limit;
      e["borrowed_mgpu"] = std::max<std::int64_t>(0, use - g.guaranteed);
      e["idle_guaranteed_mgpu"] = std::max<std::int64_t>(0, g.guaranteed - use);
      // What other queues may borrow of it now: the idle guarantee above
      // the part it never lends.
      e["lendable_mgpu"] = std::max<std::int64_t>(0, g.guaranteed - std::max(use, g.lending_limit));
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace berth::server
