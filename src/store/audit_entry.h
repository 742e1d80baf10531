// One record of the audit trail, and how a change hands Berth the record of
// itself. The chain that links records and where it is kept are in
// store/audit_chain.h (SQLite) and store/audit_log.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace berth::store {

struct AuditEntry {
  std::int64_t seq = 0;  // 1, 2, 3, ... with no gaps; assigned when chained
  TimeMs time_ms = 0;
  std::string actor;   // X-Berth-User, the client address, or "berth"
  std::string tenant;  // the job's tenant where there is one, else ""
  std::string action;  // "job.submit", "policy.apply", "gpu.cordon", ...
  std::string object;  // "job/12", "policy/v3", "node/a", "gpu/a/3"
  // Small JSON summaries (compact text, "" for none). Never request bodies:
  // a job's env values or a policy's text stay out of the trail.
  std::string before;
  std::string after;
  std::string request_id;
  std::string source;     // the client's address; "" for Berth's own actions
  std::string outcome;    // "ok", "denied: <code>" or "failed: <message>"
  std::string prev_hash;  // hex; kAuditGenesisHash for record 1
  std::string hash;       // hex SHA-256 of AuditCanonicalText
};

// prev_hash of the first record.
inline constexpr std::string_view kAuditGenesisHash =
    "0000000000000000000000000000000000000000000000000000000000000000";

// Every field but `hash`, each length-prefixed so no two records serialize
// alike, prev_hash last.
std::string AuditCanonicalText(const AuditEntry& e);
// Lower-case hex SHA-256 of AuditCanonicalText (OpenSSL EVP).
Result<std::string> AuditHash(const AuditEntry& e);

// A remembered head: where the log ended when it was last written.
struct AuditHead {
  std::int64_t seq = 0;
  std::string hash;
};

// Records one audit transaction stores at most (a group commit of audit
// appends, or of submissions with their records).
inline constexpr std::size_t kMaxAuditBatch = 256;
// Records the head file may lag the table by at most, after a crash between
// commits and the file write they share (a few batches: changes commit
// while the file is being written). Verify allows no more.
inline constexpr std::size_t kMaxAuditLag = 4 * kMaxAuditBatch;

// The audit record of a change, made inside the change's transaction from
// what the change made (the new job ids, the job as cancelled); nullopt
// records nothing. The caller fills actor, action, object and the rest; the
// chain fills seq and the hashes.
template <typename... Made>
using AuditOf = std::function<std::optional<AuditEntry>(const Made&...)>;

}  // namespace berth::store
