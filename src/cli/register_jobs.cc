// berth submit, jobs, job, why, cancel, checkpoint and logs.
#include <charconv>
#include <optional>
#include <string>

#include "cli/api_error.h"
#include "cli/registry.h"

namespace berth::cli {
namespace {

struct JobFlags {
  std::string spec_path;
  std::string spec;
  JobFilter filter;
  std::string states;
  std::uint64_t job_id = 0;
  std::string lang;
  bool cancel_array = false;
  std::uint64_t checkpoint_job = 0;
  std::int64_t checkpoint_at = 0;
  int replica = 0;
  bool follow = false;
};

void RegisterSubmit(CommandRegistry& r, JobFlags& f) {
  auto* submit = r.app().add_subcommand("submit", "submit a job spec (YAML or JSON)");
  submit->add_option("FILE", f.spec_path, "job spec file; - reads stdin")->required();
  r.ReadsDocument(submit, f.spec_path, "job spec", f.spec);
  r.OnRun(submit, [&f](ApiClient& api, const Output& out) { return SubmitJob(api, f.spec, out); });
}

void RegisterJobs(CommandRegistry& r, JobFlags& f) {
  auto* jobs = r.app().add_subcommand("jobs", "list jobs, newest first");
  jobs->add_option("--state", f.states,
                   "only jobs in these states, comma-separated (e.g. Pending,Running)");
  jobs->add_option("--queue", f.filter.queue, "only jobs in this queue");
  jobs->add_option("--tenant", f.filter.tenant, "only jobs of this tenant");
  jobs->add_option("--array", f.filter.array, "only the elements of this job array (its id)")
      ->check(CLI::PositiveNumber);
  jobs->add_option("--limit", f.filter.limit,
                   "the newest N jobs (default: every job, fetched page after page)")
      ->check(CLI::PositiveNumber);
  jobs->add_flag("--full", f.filter.full, "each job's whole spec and placement (with -o json)");
  r.OnCheck(jobs, [&r, &f] {
    auto states = NormalizeStates(f.states);
    if (!states) return r.Fail(kExitUsage, FormatError(states.error()));
    f.filter.states = *states;
    return kExitOk;
  });
  r.OnRun(jobs, [&f](ApiClient& api, const Output& out) { return ListJobs(api, f.filter, out); });
}

void RegisterShowAndWhy(CommandRegistry& r, JobFlags& f) {
  auto* job = r.app().add_subcommand("job", "show one job: spec, state, placement and timeline");
  AddJobId(job, f.job_id);
  r.OnRun(job, [&f](ApiClient& api, const Output& out) { return ShowJob(api, f.job_id, out); });

  auto* why = r.app().add_subcommand(
      "why", "why a job is pending, failed or was evicted: the reason in words and numbers");
  AddJobId(why, f.job_id);
  why->add_option("--lang", f.lang,
                  "en (English) or zh (Simplified Chinese); default: zh when the locale "
                  "($LC_ALL, $LC_MESSAGES or $LANG) starts with zh, else en")
      ->check(CLI::IsMember({"en", "zh"}));
  r.OnRun(why, [&r, &f](ApiClient& api, const Output& out) {
    std::string lang = f.lang;
    const auto& locale = r.env().locale;
    if (lang.empty()) lang = locale && locale->starts_with("zh") ? "zh" : "en";
    return ExplainJob(api, f.job_id, lang, out);
  });

  auto* cancel = r.app().add_subcommand("cancel", "cancel a job, or every element of a job array");
  AddJobId(cancel, f.job_id);
  cancel->add_flag("--array", f.cancel_array,
                   "ID is a job array's id: cancel every element that has not finished");
  r.OnRun(cancel, [&f](ApiClient& api, const Output& out) {
    return f.cancel_array ? CancelArray(api, f.job_id, out) : CancelJob(api, f.job_id, out);
  });
}

// Run from inside a job: ID defaults to $BERTH_JOB_ID, and the job's own
// token is used when there is no other (app.cc).
void RegisterCheckpoint(CommandRegistry& r, JobFlags& f) {
  auto* checkpoint = r.app().add_subcommand(
      "checkpoint",
      "report that a running job saved a checkpoint (inside a job: no login needed, "
      "$BERTH_JOB_TOKEN is used)");
  checkpoint->add_option("ID", f.checkpoint_job, "job id (default: $BERTH_JOB_ID)")
      ->check(CLI::PositiveNumber);
  auto* at_opt = checkpoint->add_option("--at", f.checkpoint_at,
                                        "when it was saved, unix milliseconds (default: now)");
  r.OnCheck(checkpoint, [&r, &f] {
    if (f.checkpoint_job == 0 && r.env().job_id) {
      const std::string& text = *r.env().job_id;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), f.checkpoint_job);
      if (ec != std::errc() || p != text.data() + text.size()) f.checkpoint_job = 0;
    }
    if (f.checkpoint_job == 0) {
      return r.Fail(kExitUsage,
                    "berth checkpoint: give the job's ID (inside a job, $BERTH_JOB_ID is used)");
    }
    return kExitOk;
  });
  r.OnRun(checkpoint, [&f, at_opt](ApiClient& api, const Output& out) {
    return ReportCheckpoint(
        api, f.checkpoint_job,
        at_opt->count() > 0 ? std::optional<std::int64_t>(f.checkpoint_at) : std::nullopt, out);
  });
}

void RegisterLogs(CommandRegistry& r, JobFlags& f) {
  auto* logs = r.app().add_subcommand("logs", "print a job's output");
  AddJobId(logs, f.job_id);
  auto* replica_opt = logs->add_option("--replica", f.replica, "only this replica (default: all)")
                          ->check(CLI::NonNegativeNumber);
  logs->add_flag("-f,--follow", f.follow, "keep printing until the job ends");
  r.OnRun(logs, [&f, replica_opt](ApiClient& api, const Output& out) {
    std::optional<int> only =
        replica_opt->count() > 0 ? std::optional<int>(f.replica) : std::nullopt;
    return StreamLogs(api, f.job_id, only, f.follow, out.out);
  });
}

}  // namespace

void RegisterJobCommands(CommandRegistry& registry) {
  auto& flags = registry.Keep<JobFlags>();
  RegisterSubmit(registry, flags);
  RegisterJobs(registry, flags);
  RegisterShowAndWhy(registry, flags);
  RegisterCheckpoint(registry, flags);
  RegisterLogs(registry, flags);
}

}  // namespace berth::cli
