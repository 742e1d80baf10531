// `berth poc run`'s burst steps: concurrent submissions by several tenants
// and the judgement of how the cluster handled them.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "cli/poc_runner.h"
#include "common/units.h"

namespace berth::cli::poc::runner {

// Submits every tenant's part at once (a thread and an identity each).
PocStepResult PocRunner::RunBurst(const Step& step, const std::map<std::string, std::string>& jobs,
                                  json& evidence) {
  Burst burst;
  std::vector<BurstPart> parts;
  std::int64_t asked = 0;
  for (const auto& t : step.burst) {
    BurstPart part{t.tenant, ActorName(t.as), "", &ClientOf(t.as), {}};
    if (auto q = YAML::Load(t.spec)["queue"]; q && q.IsScalar()) part.queue = q.as<std::string>();
    const std::int64_t n = t.count * opt_.scale;
    asked += n;
    for (std::int64_t i = 1; i <= n; ++i) {
      std::string text = t.spec;
      const std::string index = std::to_string(i);
      for (auto at = text.find("${burst.index}"); at != std::string::npos;
           at = text.find("${burst.index}", at + index.size())) {
        text.replace(at, std::string_view("${burst.index}").size(), index);
      }
      auto spec = Expand(text, jobs);
      if (!spec) return {false, "a job spec", spec.error().message};
      part.specs.push_back(std::move(*spec));
    }
    parts.push_back(std::move(part));
  }
  burst.began_ms = Now();
  burst.parts = SubmitBurst(parts, *opt_.clock, opt_.sleep);
  const TimeMs took = Now() - burst.began_ms;
  std::int64_t made = 0;
  std::int64_t refused = 0;
  std::string who;
  std::string refusal;
  json ids = json::array();
  for (const auto& p : burst.parts) {
    for (auto id : p.ids) {
      ids.push_back(id);
      BurstJob job;
      job.id = id;
      job.tenant = p.tenant;
      burst.jobs.push_back(std::move(job));
    }
    made += static_cast<std::int64_t>(p.ids.size());
    refused += p.refused;
    if (refusal.empty() && !p.first_refusal.empty()) refusal = p.tenant + ": " + p.first_refusal;
    who += fmt::format("{}{}: {} as {} in {}", who.empty() ? "" : ", ", p.tenant, p.ids.size(),
                       p.actor, FormatDurationMs(p.ended_ms - p.began_ms));
    evidence["requests"].push_back(
        {{"as", p.actor},
         {"request",
          fmt::format("POST /v1/jobs x{} (burst {})", p.ids.size() + p.refused, step.bind)},
         {"status", p.refused == 0 ? std::string("2xx")
                                   : fmt::format("{} 2xx, {} refused", p.ids.size(), p.refused)}});
  }
  evidence["bursts"][step.bind] = std::move(ids);
  PocStepResult r;
  r.ok = refused == 0;
  r.expected = fmt::format("{} jobs from {} tenant(s) submitted concurrently (scale {})", asked,
                           step.burst.size(), opt_.scale);
  r.actual = fmt::format("{} submitted, {} refused in {} ({}){}", made, refused,
                         FormatDurationMs(took), who, refusal.empty() ? "" : "; " + refusal);
  bursts_[step.bind] = std::move(burst);
  return r;
}

// Watches the burst's jobs (GET /v1/jobs per tenant) until each is in a
// wanted or final state or the time is up, then judges the figures.
PocStepResult PocRunner::ExpectBurst(const Step& step) {
  Burst& burst = bursts_.at(step.job);
  const BurstExpectation& e = step.burst_expect;
  std::set<std::string> tenants;
  for (const auto& j : burst.jobs) tenants.insert(j.tenant);
  const TimeMs deadline = burst.began_ms + e.within_ms * opt_.scale;
  std::string error;
  std::string stopped_early;
  while (true) {
    json rows = json::array();
    for (const auto& t : tenants) {
      auto page = GetAllPages(admin_, "/v1/jobs", {{"tenant", tenants_.at(t)}, {"limit", "5000"}},
                              "jobs", 0, PageOrder::kAppend);
      if (!page) {
        error = page.error().message;
        continue;
      }
      if (page->is_array()) {
        for (auto& row : *page) rows.push_back(std::move(row));
      }
    }
    ObserveBurst(burst.jobs, rows);
    burst.settled = std::all_of(burst.jobs.begin(), burst.jobs.end(), [&e](const BurstJob& j) {
      return PocTerminal(j.state) ||
             std::find(e.states.begin(), e.states.end(), j.state) != e.states.end();
    });
    if (burst.settled || Now() >= deadline || BurstDoomed(e, burst.jobs, opt_.scale, Now())) {
      break;
    }
    opt_.sleep(opt_.poll_ms);
  }
  if (!burst.settled && Now() < deadline) {
    stopped_early = fmt::format(" (stopped watching after {}: it cannot pass any more)",
                                FormatDurationMs(Now() - burst.began_ms));
  }
  const json figures = AggregateBurst(burst.jobs, Now());
  const BurstVerdict v = JudgeBurst(e, figures, opt_.scale, burst.settled);
  burst.expected = v.expected;
  PocStepResult r{v.ok, fmt::format("burst {}: {}", step.job, v.expected),
                  v.actual + stopped_early};
  if (!error.empty()) r.actual += fmt::format(" (listing jobs: {})", PocQuote(error));
  return r;
}

}  // namespace berth::cli::poc::runner
