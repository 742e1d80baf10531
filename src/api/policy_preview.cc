#include "api/policy_preview.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <set>

#include "api/policy_diff.h"
#include "common/units.h"
#include "common/utf8.h"
#include "sched/core_scheduler.h"
#include "sim/engine.h"
#include "sim/report.h"

namespace berth::server {
namespace {

using nlohmann::json;

// GPU-hours and cost of one replay, per tenant ("" is everyone).
struct Usage {
  double gpu_hours = 0;
  double cost = 0;
  bool priced = true;
  std::int64_t evictions = 0;
  double lost_gpu_hours = 0;  // work thrown away by evictions (part of gpu_hours)
};

std::map<std::string, Usage> UsageOf(const sim::SimResult& result, const sim::History& history,
                                     const GpuPrices& prices, std::set<std::string>& unpriced) {
  std::map<std::int64_t, const sim::SimJob*> by_id;
  for (const auto& j : history.jobs) by_id[j.id] = &j;
  std::map<std::string, Usage> out;
  out[""];
  for (const auto& o : result.jobs) {
    const sim::SimJob& job = *by_id.at(o.id);
    // Work done (if it finished) plus work thrown away by evictions.
    double gpu_ms = static_cast<double>(o.lost_gpu_ms);
    if (o.end_ms) gpu_ms += static_cast<double>(sim::GangMgpu(job)) / 1000.0 * o.duration_ms;
    const double hours = gpu_ms / 3'600'000.0;
    std::string model = job.resources.gpu_model;
    if (model.empty()) model = history.gpu_model.count(o.id) ? history.gpu_model.at(o.id) : "";
    std::optional<double> price;
    if (auto p = prices.per_model.find(model); p != prices.per_model.end()) {
      price = p->second;
    } else {
      price = prices.fallback;
    }
    for (const std::string& key : {std::string(), o.tenant}) {
      Usage& u = out[key];
      u.gpu_hours += hours;
      u.evictions += o.evictions;
      u.lost_gpu_hours += static_cast<double>(o.lost_gpu_ms) / 3'600'000.0;
      if (hours == 0) continue;
      if (price) {
        u.cost += hours * *price;
      } else {
        u.priced = false;
      }
    }
    if (!price && hours > 0 && !prices.empty()) unpriced.insert(model.empty() ? "?" : model);
  }
  return out;
}

json Column(const sim::Group& g, const Usage& u, bool priced) {
  return json{{"jobs", g.jobs},
              {"finished", g.finished},
              {"mean_wait_s", g.wait.mean_s},
              {"p95_wait_s", g.wait.p95_s},
              {"mean_jct_s", g.jct.mean_s},
              {"gpu_hours", u.gpu_hours},
              {"evictions", u.evictions},
              {"lost_gpu_hours", u.lost_gpu_hours},
              {"cost", priced && u.priced ? json(u.cost) : json(nullptr)}};
}

json Change(const json& from, const json& to) {
  json out = json::object();
  for (const char* key : {"mean_wait_s", "p95_wait_s", "mean_jct_s", "gpu_hours", "cost"}) {
    if (from[key].is_number() && to[key].is_number()) {
      out[key] = to[key].get<double>() - from[key].get<double>();
    } else {
      out[key] = nullptr;
    }
  }
  return out;
}

}  // namespace

Result<GpuPrices> ParsePrices(std::string_view text) {
  BERTH_RETURN_IF_ERROR(CheckUtf8(text, "prices"));
  GpuPrices prices;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    std::size_t colon = item.rfind(':');
    double price = -1;
    if (colon != std::string_view::npos && colon > 0) {
      std::string_view num = item.substr(colon + 1);
      auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), price);
      if (ec != std::errc() || p != num.data() + num.size()) price = -1;
    }
    if (!(price >= 0) || price == std::numeric_limits<double>::infinity()) {
      return InvalidField("prices",
                          fmt::format("'{}' is not MODEL:PRICE (a GPU model, or default, and a "
                                      "price per GPU-hour of at least 0), e.g. H100-80GB:3.5",
                                      item));
    }
    std::string model(item.substr(0, colon));
    if (model == "default") {
      prices.fallback = price;
    } else {
      prices.per_model[model] = price;
    }
  }
  return prices;
}

Result<json> PreviewPolicyChange(const PreviewInputs& in) {
  const sim::History& history = *in.history;
  json answer{
      {"from", in.current->version},
      {"to", in.proposed->version},
      {"applied", false},
      {"window",
       {{"duration", in.window}, {"since_ms", history.since_ms}, {"until_ms", history.until_ms}}},
      {"jobs", history.jobs.size()},
      {"never_ran", history.never_ran},
      {"still_running", history.still_running},
      {"changes", PolicyChanges(in.current->policy, in.proposed->policy)}};
  if (history.jobs.empty()) {
    answer["message"] = fmt::format(
        "no job ran in the last {} ({} submitted that never started); there is nothing to "
        "replay. Widen the window (--window) or preview again once jobs have run",
        in.window, history.never_ran);
    return answer;
  }
  if (in.nodes.empty()) {
    return Fail(Code::kFailedPrecondition,
                "no nodes are registered: a preview replays the history on the current nodes");
  }
  sim::SimOptions options;
  options.cycle_ms = kPreviewCycleMs;
  // A recorded run time already includes its start-up; an evicted job in
  // the replay loses its work since it started (the history has no
  // checkpoint times) and pays nothing more.
  options.restart_overhead_ms = 0;
  sched::CoreScheduler core;
  auto current = sim::Simulate(in.nodes, history.jobs, in.current->policy, core, options);
  if (!current) return std::unexpected(current.error());
  auto proposed = sim::Simulate(in.nodes, history.jobs, in.proposed->policy, core, options);
  if (!proposed) return std::unexpected(proposed.error());
  sim::Summary before = sim::Summarize(fmt::format("v{}", in.current->version), *current);
  sim::Summary after = sim::Summarize(fmt::format("v{}", in.proposed->version), *proposed);

  std::set<std::string> unpriced;
  auto usage_before = UsageOf(*current, history, in.prices, unpriced);
  auto usage_after = UsageOf(*proposed, history, in.prices, unpriced);
  const bool priced = !in.prices.empty() && unpriced.empty();
  answer["cluster_gpus"] = current->cluster_gpus;
  answer["nodes"] = in.nodes.size();
  answer["priced"] = priced;
  if (!unpriced.empty()) answer["unpriced_models"] = unpriced;
  answer["never_started"] = {{"current", before.never_started}, {"proposed", after.never_started}};

  auto entry = [&](const sim::Group& b, const sim::Group& a, const std::string& tenant) {
    json cur = Column(b, usage_before[tenant], priced);
    json pro = Column(a, usage_after[tenant], priced);
    json e{{"current", cur}, {"proposed", pro}, {"change", Change(cur, pro)}};
    if (!tenant.empty()) e["tenant"] = tenant;
    return e;
  };
  answer["overall"] = entry(before.all, after.all, "");
  std::set<std::string> tenants;
  for (const auto& [t, g] : before.by_tenant) tenants.insert(t);
  for (const auto& [t, g] : after.by_tenant) tenants.insert(t);
  json list = json::array();
  const sim::Group none;
  for (const auto& t : tenants) {
    auto b = before.by_tenant.find(t);
    auto a = after.by_tenant.find(t);
    list.push_back(entry(b == before.by_tenant.end() ? none : b->second,
                         a == after.by_tenant.end() ? none : a->second, t));
  }
  answer["tenants"] = list;
  return answer;
}

}  // namespace berth::server
