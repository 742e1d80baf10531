// JSON shapes of the REST API's responses. docs/api.md and the OpenAPI
// document describe the same shapes; keep the three in step.
#pragma once

#include <nlohmann/json.hpp>

#include "server/controller.h"
#include "store/store.h"

namespace berth::server {

nlohmann::json JobJson(const store::JobRecord& job, bool with_timeline);
nlohmann::json NodeJson(const NodeStatus& node, const std::vector<store::RunRecord>& active);
// One entry per GPU, with the job holding it (if any).
nlohmann::json GpusJson(const std::vector<NodeStatus>& nodes,
                        const std::vector<store::JobRecord>& holders);
nlohmann::json ErrorJson(const Error& error);

}  // namespace berth::server
