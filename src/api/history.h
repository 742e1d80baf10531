// The job history document (GET /v1/history, `berth history export`): the
// jobs submitted in a window with what a replay needs (resources, priority,
// every run of every attempt), the node inventory and the active policy.
// sim::ReadHistory reads it back; docs/api.md#history lists its fields.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "common/clock.h"
#include "store/store.h"

namespace berth::server {

// `jobs` as Store::JobsSubmittedBetween returns them. Commands, environment
// and working directories are left out: a replay does not need them, and
// they may hold secrets.
nlohmann::json HistoryJson(const std::vector<store::JobRecord>& jobs,
                           const std::vector<store::NodeRecord>& nodes,
                           const store::PolicyVersion& policy, TimeMs since_ms, TimeMs until_ms,
                           TimeMs now_ms);

}  // namespace berth::server
