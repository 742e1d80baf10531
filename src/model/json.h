// JSON forms of the model's value types: used by the store (columns holding
// documents) and the REST API (responses). One mapping, so what is stored is
// what is served.
#pragma once

#include <nlohmann/json.hpp>

#include "model/job.h"
#include "model/node.h"
#include "model/probe_json.h"
#include "model/reason.h"
#include "model/service.h"

namespace berth::model {

// A replica's resources: {gpus, gpu_model, gpu_memory_bytes, cpu_millis,
// memory_bytes, gpu_share_millis, gpu_share_bytes}; missing keys are 0.
nlohmann::json ToJson(const Resources& r);
Resources ResourcesFromJson(const nlohmann::json& j);

nlohmann::json ToJson(const JobSpec& spec);
JobSpec JobSpecFromJson(const nlohmann::json& j);

nlohmann::json ToJson(const NodeInfo& node);
NodeInfo NodeInfoFromJson(const nlohmann::json& j);

// A service spec's canonical document (the fields and order of
// ServiceToYaml); read back through ParseServiceSpec, so a stored or posted
// form is validated as an applied one is.
nlohmann::json ToJson(const ServiceSpec& spec);
Result<ServiceSpec> ServiceSpecFromJson(const nlohmann::json& j);

nlohmann::json ToJson(const Reason& reason);  // {code, counts, detail, message}
Reason ReasonFromJson(const nlohmann::json& j);

}  // namespace berth::model
