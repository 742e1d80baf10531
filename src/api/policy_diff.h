// What changed between two policy versions: a unified diff of their
// normalised YAML, for people, and a structured summary of queue and quota
// changes, for people and scripts. Pure functions; no I/O.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "model/policy.h"

namespace berth::server {

// A unified diff ("--- a", "+++ b", "@@ -l,n +l,n @@" hunks with `context`
// lines around each change), computed line by line with a longest common
// subsequence. Empty when the texts are equal.
std::string UnifiedDiff(std::string_view from, std::string_view to, std::string_view from_name,
                        std::string_view to_name, int context = 3);

// {"queues_added": [path...], "queues_removed": [path...],
//  "quota_changes": [{"queue", "resource", "field", "from", "to"}...],
//  "queue_changes": [{"queue", "field", "from", "to"}...],
//  "settings_changed": ["pools", "priority_classes", "usage_half_life", "min_runtime"...]}
// Quota amounts are in the resource's unit (milli-GPUs, bytes, millicores);
// borrow_limit null means no limit. A resource missing on one side counts as
// the default quota (guaranteed 0, no borrow limit, weight 1, lending 0).
nlohmann::json PolicyChanges(const model::Policy& from, const model::Policy& to);

}  // namespace berth::server
