// GET /v1/queues: each queue of the active policy with its GPU quota against
// what its running jobs hold now (its own and its descendants'), so a team
// lead reads guarantee, use and borrowing in one answer instead of adding
// up jobs. Amounts are milli-GPUs, as the policy counts them.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "model/policy.h"
#include "model/tenant_scope.h"
#include "store/store.h"

namespace berth::server {

// One entry per queue of `policy` in `scope` (and of `tenant` when not
// empty), in the policy's order. `holders` are the Scheduled and Running
// jobs; each live run counts its GPUs (a slice its share) against its
// queue and every ancestor. A queue that declares no GPU quota has
// `guaranteed_mgpu: null` and no borrowing of its own.
nlohmann::json QueueUsageJson(const model::Policy& policy,
                              const std::vector<store::JobRecord>& holders,
                              const model::TenantScope& scope, std::string_view tenant);

}  // namespace berth::server
