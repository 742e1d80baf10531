// `berth poc run`'s inference steps: the gateway GET /v1/services shows,
// http steps against it, and the end of a case's services.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "cli/json_view.h"
#include "cli/poc_cleanup.h"
#include "cli/poc_http.h"
#include "cli/poc_load.h"
#include "cli/poc_runner.h"
#include "common/units.h"

namespace berth::cli::poc::runner {

std::string PocRunner::ReadGateway() {
  gateway_url_.clear();
  auto listed = admin_.Get("/v1/services?limit=1");
  if (!listed) return "GET /v1/services: " + listed.error().message;
  const json* gw = Field(*listed, "gateway");
  if (gw == nullptr || !gw->is_object()) {
    return "GET /v1/services shows no gateway: berthd runs none (start it with --gateway-listen "
           "HOST:PORT; HAProxy must be installed)";
  }
  gateway_url_ = Text(*gw, "url");
  if (!Bool(*gw, "up")) {
    return fmt::format(
        "GET /v1/services shows the gateway at {} down (its last sync failed; berthd's log says "
        "why)",
        gateway_url_);
  }
  return {};
}

PocStepResult PocRunner::HttpStep(const Step& step, const std::map<std::string, std::string>& jobs,
                                  json& evidence) {
  auto url = Expand(step.path, jobs);
  if (!url) return {false, step.path, url.error().message};
  auto body = Expand(step.body, jobs);
  if (!body) return {false, step.body, body.error().message};
  const auto token = tokens_of_.find(step.as);
  const TimeMs sent = Now();
  const HttpCallAnswer got = CallUrl(
      step.method, *url, token == tokens_of_.end() ? "" : token->second, *body, step.within_ms);
  const TimeMs took = Now() - sent;
  evidence["requests"].push_back(
      {{"as", ActorName(step.as)},
       {"request", step.method + " " + *url},
       {"status", got.status == 0 ? std::string("no answer") : PocStatusText(got.status)},
       {"took_ms", took}});
  PocAnswer a;
  a.status = got.status;
  a.body = got.status == 0 ? got.error : got.body;
  PocStepResult r =
      Judge(step, a, fmt::format("{} {} as {}", step.method, *url, ActorName(step.as)), jobs);
  r.expected += step.cold_start ? fmt::format(
                                      " within {} (the cold-start target: the call is held while "
                                      "the service scales from zero)",
                                      FormatDurationMs(step.within_ms))
                                : fmt::format(" within {}", FormatDurationMs(step.within_ms));
  if (got.status == 0) {
    r.ok = false;
    r.actual = "no answer: " + PocQuote(got.error);
  }
  r.actual += fmt::format(" (after {} ms)", took);
  return r;
}

void PocRunner::EndCaseServices(const Case& c, const Result<json>& alerts, json& out) {
  if (case_services_.empty()) return;
  for (const auto& [tenant, name] : case_services_) {
    auto service = admin_.Get(fmt::format("/v1/services/{}/{}", tenant, name));
    if (!service) continue;
    std::set<std::uint64_t> replicas;
    for (const auto& r : Array(*service, "status.replicas")) {
      if (auto id = Int(r, "job")) replicas.insert(static_cast<std::uint64_t>(*id));
    }
    if (auto cold = Int(*service, "status.last_cold_start.job")) {
      replicas.insert(static_cast<std::uint64_t>(*cold));
    }
    const auto cold_job = Int(*service, "status.last_cold_start.job");
    const auto cold_ms = Int(*service, "status.last_cold_start.duration_ms");
    for (auto id : replicas) {
      json sample = Sample(fmt::format("{} replica", name), id, c, alerts);
      sample["service"] = tenant + "/" + name;
      sample["expected"] =
          fmt::format("a replica of service {}/{}, started by its controller", tenant, name);
      // The cold start berthd measured (status.last_cold_start), on the
      // replica that took the held calls.
      if (cold_job && cold_ms && static_cast<std::uint64_t>(*cold_job) == id) {
        sample["cold_start_ms"] = *cold_ms;
      }
      out["samples"].push_back(std::move(sample));
    }
  }
  // A case leaves no service behind: deleted now, its replicas stopped.
  json ended{{"services_deleted", json::array()}, {"problems", json::array()}};
  DeleteServices(admin_, case_services_, {opt_.clock, opt_.sleep, opt_.poll_ms}, ended);
  for (const auto& made : case_services_) {
    services_.erase(std::remove(services_.begin(), services_.end(), made), services_.end());
  }
  out["cleanup"]["services_deleted"] = ended["services_deleted"];
  if (!ended["problems"].empty()) out["cleanup"]["service_problems"] = ended["problems"];
}

PocStepResult PocRunner::HttpLoad(const Step& step, const std::map<std::string, std::string>& jobs,
                                  json& evidence) {
  auto url = Expand(step.path, jobs);
  if (!url) return {false, step.path, url.error().message};
  auto body = Expand(step.body, jobs);
  if (!body) return {false, step.body, body.error().message};
  // Expanded once here: the calls run on threads of their own.
  std::vector<std::string> wanted;
  std::vector<std::string> unwanted;
  for (const auto& t : step.contains) {
    auto e = Expand(t, jobs);
    wanted.push_back(e ? *e : t);
  }
  for (const auto& t : step.not_contains) {
    auto e = Expand(t, jobs);
    unwanted.push_back(e ? *e : t);
  }
  const auto token = tokens_of_.find(step.as);
  const std::string bearer = token == tokens_of_.end() ? "" : token->second;
  const int want = step.status.value_or(200);
  const Clock& clock = *opt_.clock;
  const auto call = [&]() {
    LoadCall c;
    const TimeMs sent = clock.NowMs();
    const HttpCallAnswer got = CallUrl(step.method, *url, bearer, *body, step.within_ms);
    c.status = got.status;
    c.took_ms = clock.NowMs() - sent;
    if (got.status == 0) {
      c.problem = "no answer: " + PocQuote(got.error);
      return c;
    }
    if (!PocStatusMatches(want, got.status)) {
      c.problem = fmt::format("{}: {}", PocStatusText(got.status), PocQuote(got.body));
      return c;
    }
    for (const auto& w : wanted) {
      if (got.body.find(w) == std::string::npos) {
        c.problem = fmt::format("an answer without '{}': {}", w, PocQuote(got.body));
        return c;
      }
    }
    for (const auto& u : unwanted) {
      if (got.body.find(u) != std::string::npos) {
        c.problem = fmt::format("an answer with '{}': {}", u, PocQuote(got.body));
        return c;
      }
    }
    c.as_expected = true;
    return c;
  };
  const TimeMs began = Now();
  const auto calls = RunLoad(step.load_concurrency, step.load_duration_ms, clock, call,
                             [this] { return Interrupted(); });
  const TimeMs took = Now() - began;
  const LoadFigures f = SummarizeLoad(calls);
  const std::string request = step.method + " " + *url;
  evidence["loads"].push_back({{"as", ActorName(step.as)},
                               {"request", request},
                               {"concurrency", step.load_concurrency},
                               {"duration_ms", step.load_duration_ms},
                               {"took_ms", took},
                               {"calls", f.calls},
                               {"as_expected", f.as_expected},
                               {"p50_ms", f.p50_ms},
                               {"p95_ms", f.p95_ms},
                               {"max_ms", f.max_ms}});
  evidence["requests"].push_back(
      {{"as", ActorName(step.as)},
       {"request", fmt::format("{} x{} ({} at once for {})", request, f.calls,
                               step.load_concurrency, FormatDurationMs(step.load_duration_ms))},
       {"status", fmt::format("{} as expected, {} not", f.as_expected, f.calls - f.as_expected)}});
  PocStepResult r;
  r.ok = f.calls > 0 && f.as_expected == f.calls;
  r.expected = fmt::format("{} calls of {} as {} in flight at once for {}, each answering {}",
                           step.load_concurrency, request, ActorName(step.as),
                           FormatDurationMs(step.load_duration_ms), PocStatusText(want));
  for (const auto& w : wanted) r.expected += fmt::format(", containing '{}'", w);
  for (const auto& u : unwanted) r.expected += fmt::format(", not containing '{}'", u);
  r.expected += fmt::format(" within {}", FormatDurationMs(step.within_ms));
  r.actual = fmt::format(
      "{} calls in {}: {} as expected, {} not; latency p50 {} ms, p95 {} ms, "
      "max {} ms",
      f.calls, FormatDurationMs(took), f.as_expected, f.calls - f.as_expected, f.p50_ms, f.p95_ms,
      f.max_ms);
  if (!f.first_problem.empty()) r.actual += "; first not as expected: " + f.first_problem;
  return r;
}

}  // namespace berth::cli::poc::runner
