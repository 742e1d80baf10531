// Whether the active policy takes a submission: the rule every store
// backend applies inside the transaction that stores the jobs, so a job
// cannot slip into a queue that a policy change removes at the same moment,
// nor past a pending-job limit by racing another submission.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/job.h"
#include "model/policy.h"

namespace berth::model {

// Jobs waiting in the queue (state Pending) of a tenant, and of those the
// ones one member submitted: what the pending-job limits count.
struct PendingCount {
  std::int64_t tenant = 0;
  std::int64_t member = 0;
};

// "queue vision/nlp does not exist in policy v3; queues of tenant vision:
// training, ..." : the error a submission to an unknown queue gets.
std::string UnknownQueueMessage(const Policy& policy, const std::string& tenant,
                                const std::string& queue);

// Refuses `spec`, submitted by `by` ("" when no identity: no member limit)
// with `pending` jobs already waiting, when its queue is not in `policy`
// (field "queue"), its paths lie outside its tenant's storage grants, it is
// over the spec limits (`spec_bytes`: its size as stored), or it would take
// the tenant or the member over a pending-job limit (ResourceExhausted,
// naming the limit and what to do).
[[nodiscard]] Status AdmitSubmission(const Policy& policy, const JobSpec& spec,
                                     std::size_t spec_bytes, const PendingCount& pending,
                                     std::string_view by);

}  // namespace berth::model
