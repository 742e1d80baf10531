// `berth poc run`'s inference steps: the gateway GET /v1/services shows,
// http steps against it, and the end of a case's services.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "cli/poc_cleanup.h"
#include "cli/poc_http.h"
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
  if (!gw->value("up", false)) {
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
  r.expected += fmt::format(" within {}", FormatDurationMs(step.within_ms));
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
    for (auto id : replicas) {
      json sample = Sample(fmt::format("{} replica", name), id, c, alerts);
      sample["service"] = tenant + "/" + name;
      sample["expected"] =
          fmt::format("a replica of service {}/{}, started by its controller", tenant, name);
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

}  // namespace berth::cli::poc::runner
