#include "api/policy_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

namespace berth::server {
namespace {

using nlohmann::json;

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    if (nl == std::string_view::npos) {
      out.push_back(text);
      break;
    }
    out.push_back(text.substr(0, nl));
    text.remove_prefix(nl + 1);
  }
  return out;
}

struct Op {
  char kind;  // ' ', '-', '+'
  std::string_view line;
};

// Above this many cells the middle of the two texts is shown as replaced
// whole rather than aligned (policies are far smaller in practice).
constexpr std::size_t kMaxTableCells = std::size_t{16} << 20;

std::vector<Op> EditScript(const std::vector<std::string_view>& a,
                           const std::vector<std::string_view>& b) {
  std::size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  std::size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) {
    ++suffix;
  }
  std::vector<Op> ops;
  for (std::size_t i = 0; i < prefix; ++i) ops.push_back({' ', a[i]});
  std::size_t n = a.size() - prefix - suffix;
  std::size_t m = b.size() - prefix - suffix;
  if ((n + 1) * (m + 1) > kMaxTableCells) {
    for (std::size_t i = 0; i < n; ++i) ops.push_back({'-', a[prefix + i]});
    for (std::size_t j = 0; j < m; ++j) ops.push_back({'+', b[prefix + j]});
  } else {
    // lcs[i][j]: length of the LCS of a[i..n) and b[j..m) (middle parts).
    std::vector<std::uint32_t> lcs((n + 1) * (m + 1), 0);
    auto at = [&](std::size_t i, std::size_t j) -> std::uint32_t& { return lcs[i * (m + 1) + j]; };
    for (std::size_t i = n; i-- > 0;) {
      for (std::size_t j = m; j-- > 0;) {
        at(i, j) = a[prefix + i] == b[prefix + j] ? at(i + 1, j + 1) + 1
                                                  : std::max(at(i + 1, j), at(i, j + 1));
      }
    }
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[prefix + i] == b[prefix + j]) {
        ops.push_back({' ', a[prefix + i]});
        ++i;
        ++j;
      } else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) {
        // Deletions before insertions within a change, as diff(1) prints them.
        ops.push_back({'-', a[prefix + i]});
        ++i;
      } else {
        ops.push_back({'+', b[prefix + j]});
        ++j;
      }
    }
  }
  for (std::size_t i = a.size() - suffix; i < a.size(); ++i) ops.push_back({' ', a[i]});
  return ops;
}

std::string Range(std::size_t start, std::size_t count) {
  // diff(1): an empty range names the line before it.
  return fmt::format("{},{}", count == 0 ? start - 1 : start, count);
}

json QuotaField(const model::Quota& q, std::string_view field) {
  if (field == "guaranteed") return q.guaranteed;
  if (field == "borrow_limit") return q.borrow_limit ? json(*q.borrow_limit) : json(nullptr);
  if (field == "weight") return q.weight;
  return q.lending_limit;
}

std::string_view OverQuotaName(model::OverQuota o) {
  switch (o) {
    case model::OverQuota::kBorrow:
      return "borrow";
    case model::OverQuota::kWait:
      return "wait";
    case model::OverQuota::kReject:
      return "reject";
  }
  return "borrow";
}

}  // namespace

std::string UnifiedDiff(std::string_view from, std::string_view to, std::string_view from_name,
                        std::string_view to_name, int context) {
  if (from == to) return "";
  auto a = Lines(from);
  auto b = Lines(to);
  std::vector<Op> ops = EditScript(a, b);
  std::string out = fmt::format("--- {}\n+++ {}\n", from_name, to_name);
  auto ctx = static_cast<std::size_t>(std::max(context, 0));
  std::size_t k = 0;
  // Line numbers (1-based) of ops[k] in each text.
  std::size_t old_line = 1;
  std::size_t new_line = 1;
  while (k < ops.size()) {
    // Find the next change.
    std::size_t change = k;
    std::size_t ol = old_line;
    std::size_t nl = new_line;
    while (change < ops.size() && ops[change].kind == ' ') {
      ++change;
      ++ol;
      ++nl;
    }
    if (change == ops.size()) break;
    // The hunk starts `ctx` lines of context before it.
    std::size_t start = change - std::min(ctx, change - k);
    std::size_t hunk_old = ol - (change - start);
    std::size_t hunk_new = nl - (change - start);
    // Extend over changes separated by at most 2 * ctx unchanged lines.
    std::size_t end = change;
    std::size_t last_change = change;
    while (end < ops.size()) {
      if (ops[end].kind != ' ') {
        last_change = end;
        ++end;
        continue;
      }
      std::size_t run = end;
      while (run < ops.size() && ops[run].kind == ' ') ++run;
      if (run == ops.size() || run - end > 2 * ctx) break;
      end = run;
    }
    end = std::min(ops.size(), last_change + 1 + ctx);
    std::size_t old_count = 0;
    std::size_t new_count = 0;
    std::string body;
    for (std::size_t i = start; i < end; ++i) {
      if (ops[i].kind != '+') ++old_count;
      if (ops[i].kind != '-') ++new_count;
      body += ops[i].kind;
      body += ops[i].line;
      body += '\n';
    }
    out += fmt::format("@@ -{} +{} @@\n", Range(hunk_old, old_count), Range(hunk_new, new_count));
    out += body;
    // Advance the line counters over [k, end).
    for (std::size_t i = k; i < end; ++i) {
      if (ops[i].kind != '+') ++old_line;
      if (ops[i].kind != '-') ++new_line;
    }
    k = end;
  }
  return out;
}

json PolicyChanges(const model::Policy& from, const model::Policy& to) {
  json added = json::array();
  json removed = json::array();
  json quota_changes = json::array();
  json queue_changes = json::array();
  for (const auto& q : to.queues) {
    if (from.FindQueue(q.path) == nullptr) added.push_back(q.path);
  }
  for (const auto& q : from.queues) {
    if (to.FindQueue(q.path) == nullptr) removed.push_back(q.path);
  }
  for (const auto& after : to.queues) {
    const model::QueuePolicy* before = from.FindQueue(after.path);
    if (before == nullptr) continue;
    auto field = [&](std::string_view name, const json& a, const json& b) {
      if (a != b)
        queue_changes.push_back({{"queue", after.path}, {"field", name}, {"from", a}, {"to", b}});
    };
    field("kind", before->kind, after.kind);
    field("pools", before->pools, after.pools);
    field("over_quota", OverQuotaName(before->over_quota), OverQuotaName(after.over_quota));
    field("preemptible", before->preemptible_by_default, after.preemptible_by_default);
    auto lifetime = [](const model::QueuePolicy& q) {
      return q.max_session_lifetime_ms ? json(*q.max_session_lifetime_ms) : json(nullptr);
    };
    field("max_session_lifetime_ms", lifetime(*before), lifetime(after));
    auto retry_cap = [](const model::QueuePolicy& q) {
      return q.retry.max_attempts ? json(*q.retry.max_attempts) : json(nullptr);
    };
    field("retry_max_attempts", retry_cap(*before), retry_cap(after));
    std::set<model::ResourceKey> keys;
    for (const auto& [key, quota] : before->quota) keys.insert(key);
    for (const auto& [key, quota] : after.quota) keys.insert(key);
    for (const auto& key : keys) {
      auto b = before->quota.find(key);
      auto a = after.quota.find(key);
      model::Quota qb = b == before->quota.end() ? model::Quota{} : b->second;
      model::Quota qa = a == after.quota.end() ? model::Quota{} : a->second;
      for (std::string_view f : {"guaranteed", "borrow_limit", "weight", "lending_limit"}) {
        json vb = QuotaField(qb, f);
        json va = QuotaField(qa, f);
        if (vb == va) continue;
        quota_changes.push_back({{"queue", after.path},
                                 {"resource", model::ResourceKeyName(key)},
                                 {"field", f},
                                 {"from", vb},
                                 {"to", va}});
      }
    }
  }
  json settings = json::array();
  auto pools = [](const model::Policy& p) {
    json out = json::array();
    for (const auto& pool : p.pools) {
      out.push_back({pool.name, pool.selector, pool.inference_headroom_gpus});
    }
    return out;
  };
  auto classes = [](const model::Policy& p) {
    json out = json::array();
    for (const auto& c : p.priority_classes) out.push_back({c.name, c.value, c.preemptible});
    return out;
  };
  if (pools(from) != pools(to)) settings.push_back("pools");
  if (classes(from) != classes(to)) settings.push_back("priority_classes");
  if (from.usage_half_life_ms != to.usage_half_life_ms) settings.push_back("usage_half_life");
  if (from.min_runtime_ms != to.min_runtime_ms) settings.push_back("min_runtime");
  if (from.reclaim_grace_ms != to.reclaim_grace_ms) settings.push_back("reclaim_grace");
  if (from.short_first_max_wait_ms != to.short_first_max_wait_ms) {
    settings.push_back("short_first_max_wait");
  }
  if (from.backfill != to.backfill) settings.push_back("backfill");
  if (from.consolidation != to.consolidation) settings.push_back("consolidation");
  if (from.retry != to.retry) settings.push_back("retry");
  if (from.limits != to.limits) settings.push_back("limits");
  // Who a tenant's jobs run as and what they may reach on the nodes.
  json tenant_changes = json::array();
  std::set<std::string> tenants;
  for (const auto& [name, t] : from.tenants) tenants.insert(name);
  for (const auto& [name, t] : to.tenants) tenants.insert(name);
  const model::TenantPolicy none{};
  for (const auto& name : tenants) {
    auto b = from.tenants.find(name);
    auto a = to.tenants.find(name);
    const model::TenantPolicy& tb = b == from.tenants.end() ? none : b->second;
    const model::TenantPolicy& ta = a == to.tenants.end() ? none : a->second;
    if (tb.run_as != ta.run_as) tenant_changes.push_back({{"tenant", name}, {"field", "run_as"}});
    if (tb.storage != ta.storage)
      tenant_changes.push_back({{"tenant", name}, {"field", "storage"}});
    if (tb.container_network != ta.container_network) {
      tenant_changes.push_back({{"tenant", name}, {"field", "container_network"}});
    }
    if (tb.limits != ta.limits) tenant_changes.push_back({{"tenant", name}, {"field", "limits"}});
  }
  return json{{"queues_added", added},          {"tenant_changes", tenant_changes},
              {"queues_removed", removed},      {"quota_changes", quota_changes},
              {"queue_changes", queue_changes}, {"settings_changed", settings}};
}

}  // namespace berth::server
