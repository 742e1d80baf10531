#include "cli/poc_burst.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "cli/json_view.h"
#include "common/units.h"

namespace berth::cli::poc {
namespace {

using nlohmann::json;

// How much of a refusal the report quotes.
constexpr std::size_t kBurstQuote = 300;
// A 429's wait and how often one job is sent again.
constexpr std::int64_t kBurstBackoffMs = 200;
constexpr int kBurstRetries = 100;
// A job "Queued" (submitted after the last scheduling pass) longer than
// this was never looked at: its wait is unexplained.
constexpr std::int64_t kBurstQueuedGraceMs = 5000;

bool BurstFinal(const std::string& state) {
  return state == "Succeeded" || state == "Failed" || state == "Cancelled";
}

// "850ms", "12.3s", "4m10s": a wait as people read it.
std::string BurstMsText(std::int64_t ms) {
  if (ms % 1000 == 0 || ms < 1000) return FormatDurationMs(ms);
  if (ms < 60000) return fmt::format("{:.1f}s", static_cast<double>(ms) / 1000);
  return FormatDurationMs((ms + 500) / 1000 * 1000);
}

json BurstWaitFigures(std::vector<std::int64_t> waits) {
  if (waits.empty()) return json{{"p50_ms", nullptr}, {"p95_ms", nullptr}, {"max_ms", nullptr}};
  const auto max = *std::max_element(waits.begin(), waits.end());
  return json{{"p50_ms", PercentileMs(waits, 50)},
              {"p95_ms", PercentileMs(std::move(waits), 95)},
              {"max_ms", max}};
}

}  // namespace

std::vector<BurstSubmission> SubmitBurst(const std::vector<BurstPart>& parts, const Clock& clock,
                                         const std::function<void(std::int64_t ms)>& sleep) {
  std::vector<BurstSubmission> out(parts.size());
  std::vector<std::thread> threads;
  threads.reserve(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    threads.emplace_back([&part = parts[i], &made = out[i], &clock, &sleep] {
      made.tenant = part.tenant;
      made.actor = part.actor;
      made.queue = part.queue;
      made.began_ms = clock.NowMs();
      for (const auto& spec : part.specs) {
        auto r = part.client->Post("/v1/jobs", spec, "application/yaml");
        for (int tries = 0; !r && HttpStatus(r.error().code) == 429 && tries < kBurstRetries;
             ++tries) {
          ++made.throttled;
          sleep(kBurstBackoffMs);
          r = part.client->Post("/v1/jobs", spec, "application/yaml");
        }
        const json* id = r ? Field(*r, "id") : nullptr;
        if (id != nullptr && id->is_number_unsigned()) {
          made.ids.push_back(id->get<std::uint64_t>());
          continue;
        }
        ++made.refused;
        if (made.first_refusal.empty()) {
          made.first_refusal =
              (r ? std::string("no job id in ") + r->dump()
                 : fmt::format("{} ({})", r.error().message, CodeName(r.error().code)))
                  .substr(0, kBurstQuote);
        }
      }
      made.ended_ms = clock.NowMs();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

void ObserveBurst(std::vector<BurstJob>& jobs, const json& rows) {
  std::unordered_map<std::uint64_t, const json*> by_id;
  if (rows.is_array()) {
    for (const auto& row : rows) {
      const json* id = Field(row, "id");
      if (id != nullptr && id->is_number_unsigned()) by_id[id->get<std::uint64_t>()] = &row;
    }
  }
  for (auto& j : jobs) {
    auto it = by_id.find(j.id);
    if (it == by_id.end()) continue;
    const json& row = *it->second;
    j.state = Text(row, "state");
    j.submitted_ms = Int(row, "submitted_at_ms");
    j.started_ms = Int(row, "started_at_ms");
    j.finished_ms = Int(row, "finished_at_ms");
    const std::int64_t replicas = Int(row, "replicas").value_or(1);
    std::int64_t per_replica = 0;
    if (const json* g = Field(row, "resources.gpus"); g != nullptr && g->is_number()) {
      per_replica = static_cast<std::int64_t>(g->get<double>() * 1000 + 0.5);
    }
    per_replica += Int(row, "resources.gpu_share_millis").value_or(0);
    j.gpu_millis = per_replica * std::max<std::int64_t>(replicas, 1);
    if (j.state == "Pending") {
      ++j.pending_seen;
      const std::string code = Text(row, "reason.code");
      const std::string message = Text(row, "reason.message");
      if (code.empty() || code == "-" || message.empty() || message == "-") {
        j.reason_missing = true;
      } else if (std::find(j.reasons.begin(), j.reasons.end(), code) == j.reasons.end()) {
        j.reasons.push_back(code);
      }
    }
  }
}

std::int64_t PercentileMs(std::vector<std::int64_t> values, int pct) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto n = static_cast<std::int64_t>(values.size());
  // ceil(pct * n / 100), at least the first.
  const std::int64_t rank = std::max<std::int64_t>(1, (pct * n + 99) / 100);
  return values[static_cast<std::size_t>(std::min(rank, n) - 1)];
}

json AggregateBurst(const std::vector<BurstJob>& jobs, TimeMs now_ms) {
  json out;
  out["count"] = jobs.size();
  std::map<std::string, std::int64_t> states;
  std::map<std::string, std::vector<std::int64_t>> tenant_waits;
  std::map<std::string, std::map<std::string, std::int64_t>> tenant_states;
  std::map<std::string, TimeMs> tenant_last_end;  // when its last job ended (now if one has not)
  std::vector<std::int64_t> waits;
  std::map<std::string, std::int64_t> reasons;
  json unexplained = json::array();
  std::optional<TimeMs> first_submit;
  std::optional<TimeMs> last_end;
  std::int64_t failures = 0;
  for (const auto& j : jobs) {
    states[j.state] += 1;
    tenant_states[j.tenant][j.state] += 1;
    failures += j.state == "Failed" ? 1 : 0;
    std::int64_t job_wait = 0;
    if (j.submitted_ms) {
      first_submit = std::min(first_submit.value_or(*j.submitted_ms), *j.submitted_ms);
      // A job that never started waited until it ended, or until now.
      const TimeMs until = j.started_ms ? *j.started_ms : j.finished_ms.value_or(now_ms);
      const std::int64_t wait = std::max<std::int64_t>(0, until - *j.submitted_ms);
      waits.push_back(wait);
      tenant_waits[j.tenant].push_back(wait);
      job_wait = wait;
    }
    const TimeMs end = BurstFinal(j.state) && j.finished_ms ? *j.finished_ms : now_ms;
    last_end = std::max(last_end.value_or(end), end);
    tenant_last_end[j.tenant] = std::max(tenant_last_end[j.tenant], end);
    for (const auto& r : j.reasons) reasons[r] += 1;
    // A wait is explained when every look at it showed a reason, and one
    // longer than kBurstQueuedGraceMs showed more than "Queued" (not looked
    // at by the scheduler yet).
    const bool only_queued = std::all_of(j.reasons.begin(), j.reasons.end(),
                                         [](const std::string& r) { return r == "Queued"; });
    if (j.reason_missing || (j.pending_seen > 0 && only_queued && job_wait > kBurstQueuedGraceMs)) {
      unexplained.push_back(j.id);
    }
  }
  // Contention: from the first submit until the first tenant ran out of
  // work; each tenant's GPU time inside it, as a share of all of it.
  TimeMs contention_end = now_ms;
  for (const auto& [t, end] : tenant_last_end) contention_end = std::min(contention_end, end);
  const TimeMs contention_begin = first_submit.value_or(now_ms);
  std::map<std::string, std::int64_t> gpu_ms;  // milli-GPU-ms / 1000 = GPU-ms
  std::int64_t total_gpu_ms = 0;
  for (const auto& j : jobs) {
    if (!j.started_ms) continue;
    const TimeMs end = j.finished_ms.value_or(now_ms);
    const TimeMs from = std::max(*j.started_ms, contention_begin);
    const TimeMs to = std::min(end, contention_end);
    if (to <= from) continue;
    const std::int64_t held = (to - from) * j.gpu_millis / 1000;
    gpu_ms[j.tenant] += held;
    total_gpu_ms += held;
  }
  out["states"] = states;
  out["failures"] = failures;
  out["wait"] = BurstWaitFigures(waits);
  out["first_submit_ms"] = first_submit ? json(*first_submit) : json();
  out["run_ms"] = first_submit && last_end ? json(*last_end - *first_submit) : json();
  out["contention_ms"] = std::max<std::int64_t>(0, contention_end - contention_begin);
  json tenants = json::object();
  for (const auto& [t, s] : tenant_states) {
    std::int64_t count = 0;
    for (const auto& [state, n] : s) count += n;
    json tj = BurstWaitFigures(tenant_waits[t]);
    tj["count"] = count;
    tj["states"] = s;
    tj["gpu_ms_contended"] = gpu_ms[t];
    tj["share_ppm"] = total_gpu_ms > 0 ? json(gpu_ms[t] * 1'000'000 / total_gpu_ms) : json();
    tenants[t] = std::move(tj);
  }
  out["tenants"] = std::move(tenants);
  out["reasons"] = reasons;
  out["unexplained"] = std::move(unexplained);
  return out;
}

bool BurstDoomed(const BurstExpectation& e, const std::vector<BurstJob>& jobs, std::int64_t scale,
                 TimeMs now_ms) {
  for (const auto& j : jobs) {
    const bool wanted = std::find(e.states.begin(), e.states.end(), j.state) != e.states.end();
    if (BurstFinal(j.state) && !wanted) return true;
    if (e.tenant_max_wait_ms && !j.started_ms && !BurstFinal(j.state) && j.submitted_ms &&
        now_ms - *j.submitted_ms > *e.tenant_max_wait_ms * scale) {
      return true;
    }
  }
  return false;
}

BurstVerdict JudgeBurst(const BurstExpectation& e, const json& agg, std::int64_t scale,
                        bool settled) {
  BurstVerdict v;
  std::vector<std::string> want;
  std::vector<std::string> got;
  std::string states;
  for (const auto& s : e.states) states += (states.empty() ? "" : " or ") + s;
  const std::int64_t count = Int(agg, "count").value_or(0);
  std::int64_t in_state = 0;
  if (const json* st = Field(agg, "states"); st != nullptr && st->is_object()) {
    for (const auto& s : e.states) in_state += Int(*st, s).value_or(0);
  }
  want.push_back(
      fmt::format("all {} {} within {}", count, states, BurstMsText(e.within_ms * scale)));
  std::string state_text;
  if (const json* st = Field(agg, "states"); st != nullptr && st->is_object()) {
    for (const auto& [s, n] : st->items()) {
      state_text += fmt::format("{}{} {}", state_text.empty() ? "" : ", ", ValueText(n), s);
    }
  }
  got.push_back(fmt::format("{}{}", state_text.empty() ? "no jobs" : state_text,
                            settled ? "" : " (not all settled)"));
  if (!settled || in_state != count || count == 0) v.ok = false;
  auto check_max = [&](std::string_view what, const std::optional<std::int64_t>& limit,
                       std::optional<std::int64_t> value) {
    if (!limit) return;
    want.push_back(fmt::format("{} <= {}", what, BurstMsText(*limit * scale)));
    got.push_back(fmt::format("{} {}", what, value ? BurstMsText(*value) : std::string("-")));
    if (!value || *value > *limit * scale) v.ok = false;
  };
  check_max("wait p50", e.p50_wait_ms, Int(agg, "wait.p50_ms"));
  check_max("wait p95", e.p95_wait_ms, Int(agg, "wait.p95_ms"));
  const json* tenants = Field(agg, "tenants");
  if (e.tenant_max_wait_ms && tenants != nullptr && tenants->is_object()) {
    for (const auto& [t, tj] : tenants->items()) {
      check_max(fmt::format("{}'s longest wait", t), e.tenant_max_wait_ms, Int(tj, "max_ms"));
    }
  }
  for (const auto& [t, ppm] : e.min_share_ppm) {
    want.push_back(fmt::format("{}'s share of GPU time under contention >= {:.1f}%", t,
                               static_cast<double>(ppm) / 10000));
    std::optional<std::int64_t> have;
    if (tenants != nullptr && tenants->contains(t)) have = Int((*tenants)[t], "share_ppm");
    got.push_back(fmt::format("{}'s share {}", t,
                              have ? fmt::format("{:.1f}%", static_cast<double>(*have) / 10000)
                                   : std::string("- (no GPU time under contention)")));
    if (!have || *have < ppm) v.ok = false;
  }
  if (e.explained) {
    const json* un = Field(agg, "unexplained");
    const std::size_t n = un != nullptr && un->is_array() ? un->size() : 0;
    want.push_back("every wait explained");
    if (n == 0) {
      got.push_back("every wait explained");
    } else {
      std::string ids;
      for (std::size_t i = 0; i < std::min<std::size_t>(n, 10); ++i) {
        ids += (ids.empty() ? "" : ", ") + ValueText((*un)[i]);
      }
      got.push_back(fmt::format("{} unexplained (jobs {}{})", n, ids, n > 10 ? ", ..." : ""));
      v.ok = false;
    }
  }
  auto join = [](const std::vector<std::string>& parts) {
    std::string s;
    for (const auto& p : parts) s += (s.empty() ? "" : "; ") + p;
    return s;
  };
  v.expected = join(want);
  v.actual = join(got);
  return v;
}

json BurstSample(const std::string& name, const std::vector<BurstSubmission>& parts,
                 const std::vector<BurstJob>& jobs, const std::string& expected, std::int64_t scale,
                 bool settled, TimeMs now_ms, const std::map<std::string, std::string>& tenants) {
  json s{{"name", name},
         {"kind", "burst"},
         {"expected", expected},
         {"scale", scale},
         {"settled", settled}};
  json ps = json::array();
  std::optional<TimeMs> began;
  std::optional<TimeMs> ended;
  for (const auto& p : parts) {
    auto real = tenants.find(p.tenant);
    ps.push_back({{"tenant", p.tenant},
                  {"tenant_name", real == tenants.end() ? p.tenant : real->second},
                  {"as", p.actor},
                  {"queue", p.queue},
                  {"submitted", p.ids.size()},
                  {"refused", p.refused},
                  {"first_refusal", p.first_refusal},
                  {"throttled", p.throttled},
                  {"submit_ms", p.ended_ms - p.began_ms}});
    began = std::min(began.value_or(p.began_ms), p.began_ms);
    ended = std::max(ended.value_or(p.ended_ms), p.ended_ms);
  }
  s["parts"] = std::move(ps);
  s["submit_ms"] = began && ended ? json(*ended - *began) : json();
  s["figures"] = AggregateBurst(jobs, now_ms);
  return s;
}

std::vector<std::string> BurstSampleCells(const json& s) {
  const json empty = json::object();
  const json* fig = Field(s, "figures");
  if (fig == nullptr || !fig->is_object()) fig = &empty;
  auto ms = [](const json& obj, std::string_view key) {
    auto v = Int(obj, key);
    return v ? BurstMsText(*v) : std::string("-");
  };
  std::string who;
  std::int64_t refused = 0;
  std::int64_t throttled = 0;
  std::string refusal;
  for (const auto& p : Array(s, "parts")) {
    throttled += Int(p, "throttled").value_or(0);
    who += fmt::format("{}{} / {} / {}", who.empty() ? "" : "; ", Text(p, "tenant_name"),
                       Text(p, "as"), Text(p, "queue"));
    refused += Int(p, "refused").value_or(0);
    if (refusal.empty() && !Text(p, "first_refusal").empty() && Text(p, "first_refusal") != "-") {
      refusal = Text(p, "first_refusal");
    }
  }
  std::string asked;
  std::string waits = fmt::format("p50 {}, p95 {}, max {}", ms(*fig, "wait.p50_ms"),
                                  ms(*fig, "wait.p95_ms"), ms(*fig, "wait.max_ms"));
  std::string shares;
  if (const json* ts = Field(*fig, "tenants"); ts != nullptr && ts->is_object()) {
    for (const auto& [t, tj] : ts->items()) {
      asked += fmt::format("{}{}: {} jobs", asked.empty() ? "" : "; ", t, IntText(tj, "count"));
      waits += fmt::format("; {}: p50 {}, p95 {}, max {}", t, ms(tj, "p50_ms"), ms(tj, "p95_ms"),
                           ms(tj, "max_ms"));
      auto ppm = Int(tj, "share_ppm");
      shares += fmt::format(
          "{}{} {}", shares.empty() ? "" : ", ", t,
          ppm ? fmt::format("{:.0f}%", static_cast<double>(*ppm) / 10000) : std::string("-"));
    }
  }
  std::string states;
  if (const json* st = Field(*fig, "states"); st != nullptr && st->is_object()) {
    for (const auto& [state, n] : st->items()) {
      states += fmt::format("{}{} {}", states.empty() ? "" : ", ", ValueText(n), state);
    }
  }
  if (!Bool(s, "settled", true)) states += " (not all settled)";
  std::string reasons;
  if (const json* rs = Field(*fig, "reasons"); rs != nullptr && rs->is_object()) {
    for (const auto& [code, n] : rs->items()) {
      reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", code, ValueText(n));
    }
  }
  const json& un = Array(*fig, "unexplained");
  std::string explained =
      un.empty()
          ? fmt::format("every wait explained ({})", reasons.empty() ? "none waited" : reasons)
          : fmt::format("{} wait(s) unexplained (ids in report.json); reasons seen: {}", un.size(),
                        reasons.empty() ? "-" : reasons);
  return {fmt::format("{} (burst, scale {})", Text(s, "name"), IntText(s, "scale")),
          fmt::format("{} jobs (ids in report.json evidence.bursts)", IntText(*fig, "count")),
          who.empty() ? "-" : who,
          asked.empty() ? "-" : asked,
          Text(s, "expected").empty() ? "-" : Text(s, "expected"),
          states.empty() ? "-" : states,
          waits,
          fmt::format("burst {} (submitting {})", ms(*fig, "run_ms"), ms(s, "submit_ms")),
          fmt::format("{} failed, {} refused{}", IntText(*fig, "failures"), refused,
                      refusal.empty() ? "" : ": " + refusal),
          fmt::format("GPU time while every tenant had work ({}): {}", ms(*fig, "contention_ms"),
                      shares.empty() ? "-" : shares),
          explained};
}

}  // namespace berth::cli::poc
