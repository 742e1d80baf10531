// Internal to `berth poc run` (poc_run.h is the public face): the runner
// class and the helpers its steps share, split over poc_run.cc (setup, cases,
// samples, cleanup), poc_run_services.cc (the gateway, http steps, a case's
// services), poc_run_burst.cc (bursts) and poc_run_failover.cc (failover).
// Only those files include it.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/api_client.h"
#include "cli/json_view.h"
#include "cli/poc_burst.h"
#include "cli/poc_run.h"
#include "cli/poc_suite.h"
#include "common/status.h"

namespace berth::cli::poc::runner {

using nlohmann::json;

// Whether a job state is final (Succeeded, Failed, Cancelled).
bool PocTerminal(const std::string& state);

// `text`, cut to what the report quotes.
std::string PocQuote(std::string_view text);

// An API answer as a step judges it: the HTTP status (for an error, the one
// its code maps to; for success 200, since the CLI's client reads any 2xx as
// success) and the body's text.
struct PocAnswer {
  int status = 0;
  std::string body;
  json doc;  // the body as JSON where it is JSON
  bool ok() const { return status / 100 == 2; }
};

PocAnswer PocGet(ApiClient& api, const std::string& path);
PocAnswer PocPost(ApiClient& api, const std::string& path, const std::string& body,
                  const std::string& content_type);

// Whether `actual` is what a step expecting `expected` wants (any 2xx for 2xx).
bool PocStatusMatches(int expected, int actual);
std::string PocStatusText(int status);

// What one address of the server list answers on GET /healthz.
struct PocHealth {
  std::string url;     // as given
  std::string role;    // leader, standby, "" (single berthd), or "" with error
  std::string leader;  // the lease holder it names
  std::int64_t term = 0;
  std::string error;  // when it did not answer
};

std::string PocHealthText(const PocHealth& h);
std::string PocHealthList(const std::vector<PocHealth>& seen);
// The index of the address that answers as leader, if one does.
std::optional<std::size_t> PocLeaderOf(const std::vector<PocHealth>& seen);

// The outcome of one step.
struct PocStepResult {
  bool ok = true;
  std::string expected;
  std::string actual;
};

class PocRunner {
 public:
  PocRunner(ApiClient& admin, const Suite& suite, const RunOptions& opt)
      : admin_(admin), suite_(suite), opt_(opt) {}

  Result<json> Run();

 private:
  TimeMs Now() const { return opt_.clock->NowMs(); }
  ApiClient& ClientOf(const std::string& as) {
    if (as == "admin") return admin_;
    return *clients_.at(as);
  }
  std::string ActorName(const std::string& as) const {
    return as == "admin" ? admin_name_ : identities_.at(as);
  }

  Status Preflight();
  json Fingerprint();
  Status Setup();
  json RunCase(const Case& c);
  std::vector<std::string> Unmet(const Case& c);
  // What each address of the server list answers on GET /healthz.
  std::vector<PocHealth> Health() const;
  PocStepResult Failover(const Step& step, json& evidence);
  PocStepResult RunStep(const Step& step, std::map<std::string, std::string>& jobs, json& evidence);
  PocStepResult Judge(const Step& step, const PocAnswer& a, const std::string& what,
                      const std::map<std::string, std::string>& jobs);
  // `alerts`: GET /v1/alerts?all=true, read once for all of a case's samples.
  json Sample(const std::string& bound, std::uint64_t id, const Case& c,
              const Result<json>& alerts) const;
  json Cleanup();
  // Cancels those of `ids` still live and waits for them to end; counts in
  // `c` (jobs_cancelled, jobs_already_ended, problems).
  void CancelLive(const std::vector<std::uint64_t>& ids, json& c);
  Result<std::string> Expand(std::string_view text, std::map<std::string, std::string> jobs) {
    jobs["gpus"] = std::to_string(HealthyGpus());
    jobs["model_server"] = opt_.model_server;
    if (!gateway_url_.empty()) jobs["gateway"] = gateway_url_;
    return ExpandPlaceholders(text, opt_.run, tenants_, jobs);
  }
  std::int64_t HealthyGpus() const {
    std::int64_t healthy = 0;
    for (const auto& g : gpus_) healthy += Text(g, "health") == "healthy" ? 1 : 0;
    return healthy;
  }
  PocAnswer RequestOnce(const Step& step, const std::string& path, const std::string& body);
  // bind: {from, where, field}: the first item of the answer's list that
  // meets every where, its field in `picked`; `r` failed when none does.
  PocStepResult PickBound(const Step& step, const PocAnswer& a,
                          const std::map<std::string, std::string>& jobs, PocStepResult r,
                          std::string& picked);
  // The operator asked the run to stop (RunOptions::interrupted).
  bool Interrupted() const { return opt_.interrupted && opt_.interrupted() != 0; }
  std::string SignalName() const {
    const int sig = opt_.interrupted ? opt_.interrupted() : 0;
    return opt_.signal_name ? opt_.signal_name(sig) : fmt::format("signal {}", sig);
  }
  // A case the interrupted run did not start: in the report as not run.
  json NotRun(const Case& c) const;
  // GET /v1/services' `gateway`: sets gateway_url_ (empty when absent) and
  // returns why the gateway cannot be used ("" when it is up).
  std::string ReadGateway();
  PocStepResult HttpStep(const Step& step, const std::map<std::string, std::string>& jobs,
                         json& evidence);
  // http_load: the http step's call kept step.load_concurrency at once in
  // flight for step.load_duration_ms (poc_load.h); its figures as evidence.
  PocStepResult HttpLoad(const Step& step, const std::map<std::string, std::string>& jobs,
                         json& evidence);
  // The replicas of the services case `c` applied, as samples, then the
  // services deleted and their replicas waited for (the case's cleanup).
  void EndCaseServices(const Case& c, const Result<json>& alerts, json& out);
  PocStepResult RunBurst(const Step& step, const std::map<std::string, std::string>& jobs,
                         json& evidence);
  PocStepResult ExpectBurst(const Step& step);

  // A burst of the case running now, by its bind name.
  struct Burst {
    TimeMs began_ms = 0;
    std::vector<BurstSubmission> parts;
    std::vector<BurstJob> jobs;
    std::string expected;  // what its expect_burst asked, for the sample
    bool settled = false;
  };
  std::map<std::string, Burst> bursts_;

  ApiClient& admin_;
  const Suite& suite_;
  const RunOptions& opt_;
  std::string admin_name_;
  TimeMs started_ms_ = 0;
  TimeMs case_began_ms_ = 0;  // the case running now
  std::int64_t policy_before_ = 0;
  std::int64_t policy_during_ = 0;
  std::map<std::string, std::string> tenants_;     // short -> real
  std::map<std::string, std::string> identities_;  // short -> real, those created
  std::map<std::string, std::unique_ptr<ApiClient>> clients_;
  std::vector<std::pair<std::string, std::string>> tokens_;  // id, identity
  std::vector<std::uint64_t> jobs_;                          // every job the run made
  std::map<std::string, std::string> tokens_of_;             // short identity -> its token
  // Services the run applied and has not deleted yet (tenant, name), and
  // those of the case running now.
  std::vector<std::pair<std::string, std::string>> services_;
  std::vector<std::pair<std::string, std::string>> case_services_;
  std::string gateway_url_;  // as GET /v1/services showed it; "" when none
  json nodes_ = json::array();
  json gpus_ = json::array();
};

}  // namespace berth::cli::poc::runner
