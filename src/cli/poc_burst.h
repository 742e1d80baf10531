// `berth poc run`'s concurrent load (docs/poc.md "Concurrent load"): a
// burst submits many jobs from several tenants at once, one thread and one
// identity per tenant, and an expect_burst watches them settle and judges
// the whole burst against thresholds (every job done in time, the median
// and 95th-percentile waits, no tenant starved, every wait explained). The
// report shows a burst as one sample row of aggregate figures; the job ids
// stay in report.json's evidence.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/api_client.h"
#include "cli/poc_suite.h"
#include "common/clock.h"

namespace berth::cli::poc {

// One job of a burst as the runner last saw it in GET /v1/jobs.
struct BurstJob {
  std::uint64_t id = 0;
  std::string tenant;  // the suite's short name
  std::string state = "Pending";
  std::optional<TimeMs> submitted_ms;
  std::optional<TimeMs> started_ms;
  std::optional<TimeMs> finished_ms;
  std::int64_t gpu_millis = 0;  // GPUs of all its replicas, in milli-GPUs
  // How its waits were explained: the times it was seen Pending, whether
  // one of them carried no reason, and the reason codes seen then.
  std::int64_t pending_seen = 0;
  bool reason_missing = false;
  std::vector<std::string> reasons;
};

// One tenant's part as submitted: the jobs made, the refusals and how long
// its thread took.
struct BurstSubmission {
  std::string tenant;  // short name
  std::string actor;   // the identity it submitted as
  std::string queue;
  std::vector<std::uint64_t> ids;
  std::int64_t refused = 0;
  std::string first_refusal;
  TimeMs began_ms = 0;
  TimeMs ended_ms = 0;
  // Answers of 429 (berthd's --rate-limit per caller) it waited out and
  // sent again, as any client would.
  std::int64_t throttled = 0;
};

// What one part submits: `specs` (expanded) as `client`.
struct BurstPart {
  std::string tenant;
  std::string actor;
  std::string queue;
  ApiClient* client = nullptr;
  std::vector<std::string> specs;
};

// Submits every part at once, one thread per part (each with its own
// client, so its own identity), and returns what each made. A 429 is
// waited out (`sleep`, 200 ms) and sent again, up to 100 times a job.
std::vector<BurstSubmission> SubmitBurst(const std::vector<BurstPart>& parts, const Clock& clock,
                                         const std::function<void(std::int64_t ms)>& sleep);

// Updates `jobs` from job summaries (GET /v1/jobs rows): state, times,
// GPUs and, for a Pending one, the reason it carries.
void ObserveBurst(std::vector<BurstJob>& jobs, const nlohmann::json& rows);

// The value at or below which `pct` percent of `values` lie (nearest rank:
// the ceil(pct/100 * n)-th smallest); 0 for none.
std::int64_t PercentileMs(std::vector<std::int64_t> values, int pct);

// The burst's figures at `now_ms`: count, states, failures, wait p50/p95/
// max overall and per tenant (a job not started yet has waited until now),
// run time (first submit to last end), each tenant's share of the
// GPU-seconds while every tenant still had work (contention_ms), the
// reasons its waits carried, and the jobs whose wait went unexplained.
nlohmann::json AggregateBurst(const std::vector<BurstJob>& jobs, TimeMs now_ms);

// Whether the burst has failed already, whatever happens next: a job
// ended in a state `e` does not want, or one not started has waited past
// tenant_max_wait (times `scale`). Watching stops there.
bool BurstDoomed(const BurstExpectation& e, const std::vector<BurstJob>& jobs, std::int64_t scale,
                 TimeMs now_ms);

struct BurstVerdict {
  bool ok = true;
  std::string expected;
  std::string actual;
};

// Judges `aggregate` against `e` with its durations times `scale`;
// `settled`: every job reached a wanted or final state before the deadline.
BurstVerdict JudgeBurst(const BurstExpectation& e, const nlohmann::json& aggregate,
                        std::int64_t scale, bool settled);

// The burst's sample for the report: its parts (tenant, identity, queue,
// submitted, refused, how long submitting took), `expected`, the figures
// of AggregateBurst at `now_ms`, and `kind: burst`. `tenants`: short name
// -> the run's tenant.
nlohmann::json BurstSample(const std::string& name, const std::vector<BurstSubmission>& parts,
                           const std::vector<BurstJob>& jobs, const std::string& expected,
                           std::int64_t scale, bool settled, TimeMs now_ms,
                           const std::map<std::string, std::string>& tenants);

// A burst sample's cells under the report's sample headers (sample, job,
// tenant / user / queue, resources asked, expected, state, queueing time,
// run time, failure reason, GPU utilization and memory, error states and
// alerts): one row of aggregates, never a row per job.
std::vector<std::string> BurstSampleCells(const nlohmann::json& sample);

}  // namespace berth::cli::poc
