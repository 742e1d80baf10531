// Job tokens: the credential each run berthd dispatches gets in its
// environment (BERTH_JOB_TOKEN), so a job reports its checkpoint and reads
// its own state without anyone pasting a personal token into its `env`.
//
// A job token is `berth_j<job>r<replica>a<attempt>_<mac>`, where <mac> is
// HMAC-SHA256 (64 hex digits) over "berth-job-token/v1", the run id and the
// job id, keyed by 32 random bytes kept in <data-dir>/job-token.key (0600,
// made at the first start). The part before the second underscore is the
// token's public id: rate limits and refusals key on it, and the redactor
// (redact.h) cuts everything after it, as for every berth_<id>_<secret>.
//
// Why an HMAC and not a hashed row per run: nothing per run is written, so a
// dispatch costs no store write and a restarted berthd verifies the tokens
// of the runs that kept running with the key it reads back; the same run
// always gets the same token, so a start order sent again after a reconnect
// changes nothing. Verification recomputes the MAC (compared in constant
// time) and then asks the store whether the run is still active: a token
// stops working when its run's exit is recorded (it finished, was evicted,
// cancelled or lost), and another attempt is another run id, so another
// token. Revoking every job token at once: stop berthd, delete the key file,
// start it (running jobs lose theirs; docs/security.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"

namespace berth::server {

// What a job token speaks for.
struct JobTokenClaim {
  std::int64_t job_id = 0;
  std::uint32_t replica = 0;
  std::uint32_t attempt = 0;
  std::string token_id;  // "j12r0a1": public, in rate limits and audit records
  std::string run_id;    // "12.0.1" (store::RunRecord::run_id)
};

// Whether `token` has a job token's prefix (berth_j): such a bearer is
// verified here, never as an identity's token (whose ids are hex).
bool IsJobTokenShaped(std::string_view token);

class JobTokenKey {
 public:
  // The key of <data_dir>/job-token.key, created (32 random bytes, hex,
  // mode 0600) when missing. A key file of another size or readable by
  // others is an error naming the file and the fix.
  static Result<JobTokenKey> LoadOrCreate(const std::filesystem::path& data_dir);
  // A key from its bytes (tests).
  explicit JobTokenKey(std::string key) : key_(std::move(key)) {}

  // The token of run <job>.<replica>.<attempt>.
  std::string Issue(std::int64_t job_id, std::uint32_t replica, std::uint32_t attempt) const;
  // The run a presented token names, when its MAC is this key's; else
  // Unauthenticated saying it is malformed or not valid (never echoing
  // more of it than its public id).
  Result<JobTokenClaim> Verify(std::string_view token) const;

 private:
  std::string Mac(std::string_view run_id, std::int64_t job_id) const;
  std::string key_;
};

}  // namespace berth::server
