// Undoing what a `berth poc run` made (docs/poc.md "Cleaning up a killed
// run"). RunSuite (poc_run.h) cleans up what it knows it made when it ends;
// `berth poc cleanup RUN_ID` finds, through the API, what a run that was
// killed midway left: its services and the jobs that have not ended (their
// tenant starts with "RUN_ID-"; a service's replicas go with it), its
// identities "RUN_ID-*" not yet disabled and their tokens not yet revoked,
// and the policy version it applied when that version is still the active
// one. Both then undo it with CleanUpRun, so a second cleanup finds nothing
// to do.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli/api_client.h"
#include "common/clock.h"
#include "common/status.h"

namespace berth::cli::poc {

// What a run made and cleanup undoes.
struct RunLeftovers {
  std::string run;                  // the run prefix, "poc-k3x9a"
  std::vector<std::uint64_t> jobs;  // ended ones are counted, not cancelled
  // Services it applied (tenant, name): deleted, their replicas waited for.
  std::vector<std::pair<std::string, std::string>> services;
  std::vector<std::pair<std::string, std::string>> tokens;  // token id, identity
  std::vector<std::string> identities;
  // Its tenants: a budget a case set on one is removed.
  std::vector<std::string> tenants;
  // The version the run applied (0: none to roll back) and the one active
  // before it, which the rollback restores.
  std::int64_t policy_during = 0;
  std::int64_t policy_before = 0;
  // Why the policy is not rolled back although the run applied a version
  // ("" when there is no such reason); cleanup reports it as a problem.
  std::string policy_problem;

  bool empty() const {
    return jobs.empty() && services.empty() && tokens.empty() && identities.empty() &&
           tenants.empty() && policy_during == 0 && policy_problem.empty();
  }
};

struct CleanupClock {
  const Clock* clock = nullptr;
  std::function<void(std::int64_t ms)> sleep;
  std::int64_t poll_ms = 250;
};

// The comment of the policy version a run applies, and of the rollback that
// undoes it: cleanup recognizes a run's version by the first.
std::string RunPolicyComment(const std::string& run);
std::string RunRollbackComment(const std::string& run);

// Cancels those of `ids` that have not ended and waits (up to a minute) for
// them to end; counts in `c`: jobs_cancelled (ids), jobs_already_ended,
// problems (a refused cancel, a job still live after the wait).
void CancelJobs(ApiClient& admin, const std::vector<std::uint64_t>& ids, const CleanupClock& clock,
                nlohmann::json& c);

// Deletes `services` (tenant, name) and waits (up to a minute) for the
// replicas each had to end: a replica is stopped by its service, never
// cancelled as a job. Counts in `c`: services_deleted ("tenant/name"; one
// already gone counts too), problems.
void DeleteServices(ApiClient& admin,
                    const std::vector<std::pair<std::string, std::string>>& services,
                    const CleanupClock& clock, nlohmann::json& c);

// Deletes the services and waits for their replicas to end, cancels the
// jobs that have not ended and waits for them to end (a policy
// that strands live jobs is refused), revokes the tokens, disables the
// identities, removes the tenants' budgets, then rolls the policy back to
// `policy_before` when the active version is still `policy_during`. Returns
// the report's "cleanup" object: services_deleted, jobs_cancelled,
// jobs_already_ended, tokens_revoked, identities_disabled, budgets_removed, policy (null:
// unchanged), problems (a step that failed, in words).
nlohmann::json CleanUpRun(ApiClient& admin, const RunLeftovers& what, const CleanupClock& clock);

// What the run `run` left behind, as the platform admin `admin` sees it
// through the API. Errors: a caller who is not a platform admin, a list the
// API refuses.
Result<RunLeftovers> FindLeftovers(ApiClient& admin, const std::string& run);

// Whether `run` has the shape RunPrefix gives ("poc-" and base-36 digits):
// cleanup refuses anything else rather than match other names by prefix.
bool IsRunPrefix(std::string_view run);

}  // namespace berth::cli::poc
