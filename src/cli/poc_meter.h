// The `metered` step of a `berth poc` suite (docs/poc.md): whether a job's
// GPU time reached its tenant's usage records whole and was priced at the
// rate of the price table in force. Pure: the runner reads the three API
// answers (GET /v1/jobs/ID, /v1/usage/records?job=ID, /v1/prices) and this
// judges them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace berth::cli::poc {

struct MeterJudgement {
  bool ok = false;
  std::string expected;
  std::string actual;
};

// Judges the usage records of `job` (its last attempt's) against what the
// job shows: every record is the job's tenant's; their GPU time is the
// runs' time × `gpus` within 10% and one GPU-second; and, where a price
// table is in force, each record's rate for its GPU model and pool is above
// zero and (a record priced under that one version) its cost is the exact
// price of its GPU time at that rate. No price table at all is said, not
// failed: the GPU time is still judged.
MeterJudgement JudgeMetering(const nlohmann::json& job, const nlohmann::json& records,
                             const nlohmann::json& prices, std::int64_t gpus);

}  // namespace berth::cli::poc
