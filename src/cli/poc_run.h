// `berth poc run`: drives a live berthd through its public API with a suite
// (poc_suite.h) and gathers the evidence the report (poc_report.h) shows.
// It sets up the suite's tenants (a new policy version), identities and
// tokens under a run-unique prefix, runs each case whose preconditions the
// API shows to be met (pass or fail; skipped, naming what is unmet,
// otherwise), then cleans up what it made: cancels its jobs, revokes its
// tokens, disables its identities and rolls the policy back to the version
// active before it started. Everything it judges comes from API answers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/api_client.h"
#include "cli/poc_suite.h"
#include "common/clock.h"
#include "common/status.h"

namespace berth::cli::poc {

// How an operator's command ended: its exit status (128+N for a signal,
// -1 when it could not be started) and the tail of its stdout and stderr.
struct CommandOutcome {
  int exit_status = -1;
  std::string output_tail;
};

// Runs `command` with /bin/sh -c, BERTH_POC_LEADER=`leader` added to the
// environment, and waits for it.
CommandOutcome RunFailoverCommand(const std::string& command, const std::string& leader);

struct RunOptions {
  // The run-unique prefix of every name the run makes ("poc-k3x9a").
  std::string run;
  // The cluster as --allow-on named it, for the report.
  std::string cluster;
  // A client of the same berthd sending `token` (an identity the run made).
  std::function<ApiClient(const std::string& token)> client_for;
  const Clock* clock = nullptr;
  // Waits `ms` (the real sleep; a test's may advance a ManualClock).
  std::function<void(std::int64_t ms)> sleep;
  // One line per case as it ends ("pass  training/train-succeeds"); may be
  // empty.
  std::function<void(const std::string&)> progress;
  // How often a wait polls the job.
  std::int64_t poll_ms = 250;
  // --scale: a burst's counts and an expect_burst's durations times this
  // (1: the suite as written, what CI runs).
  std::int64_t scale = 1;
  // When not empty, only the cases with these ids run (berth poc rerun);
  // the others are left out of the report altogether, so its scores are
  // over the cases re-run.
  std::set<std::string> only_cases;
  // The operator's command that stops the leading berthd for a failover
  // step (--failover-command; never from the suite). Empty: cases with a
  // standby are skipped, saying so.
  std::string failover_command;
  // What ${model_server} expands to: the model server command a service
  // replica runs (--model-server; berth-model-server on the node's PATH).
  std::string model_server = "berth-model-server";
  // Runs `command` with /bin/sh -c and BERTH_POC_LEADER=`leader` in its
  // environment; empty: RunFailoverCommand.
  std::function<CommandOutcome(const std::string& command, const std::string& leader)> run_command;
  // The signal that asked the run to stop (0: none; empty: never asked).
  // Polled before each step and in each wait: the run stops after the step
  // in flight, marks that case "interrupted" and the cases after it
  // "not_run" (neither passed nor failed), cleans up and returns the
  // report with "interrupted" {signal, case, not_run}.
  std::function<int()> interrupted;
  // The signal's name for the report ("SIGINT"); empty: "signal N".
  std::function<std::string(int)> signal_name;
};

// A request's bind: {from, where, field}: `field` (printed as text) of the
// first item of `answer`'s list at `from` (a dotted path) whose fields meet
// every `where` (values already expanded); nullopt, with why in `why`, when
// there is no such list, no item matches or the match lacks `field`.
std::optional<std::string> PickBoundValue(const nlohmann::json& answer, const std::string& from,
                                          const std::vector<BindWhere>& where,
                                          const std::string& field, std::string& why);

// The run prefix for a run that starts at `now_ms`: "poc-" and the time in
// base 36, so two runs a millisecond apart differ.
std::string RunPrefix(TimeMs now_ms);

// Runs `suite` as the platform admin `admin` and returns the report
// document (report.json; poc_report.h adds the scores and lists). Fails only
// when the run cannot start (the caller is no platform admin, the setup is
// refused); a failed cleanup step is recorded in the report, not returned.
Result<nlohmann::json> RunSuite(ApiClient& admin, const Suite& suite, const RunOptions& options);

}  // namespace berth::cli::poc
