// JSON shapes of the REST API's responses. docs/api.md and the OpenAPI
// document describe the same shapes; keep the three in step.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

#include "control/controller.h"
#include "store/store.h"

namespace berth::server {

// Whose view of a job's env a rendering is (docs/security.md "Env
// values"). Values of `secret_env` entries are never shown in either.
enum class EnvView {
  kSubmitter,  // the identity that submitted the job: its env values
  kOther,      // anyone else (members, admins, job tokens): the keys only
};
// Whether a reader sees the ids of other tenants' jobs that a job's reason
// names (model::HideOtherTenantsJobs; docs/security.md "Tenants"): only one
// who reads every tenant's jobs does.
enum class JobRefs {
  kHideOtherTenants,
  kShowAll,  // a platform admin
};
// A job spec as the API shows it to `view`: model::ToJson with env values
// (and an array's parameter values) the viewer may not read replaced by
// model::kHiddenEnvValue, and secret ones by model::kSecretEnvValue.
nlohmann::json SpecJson(const model::JobSpec& spec, EnvView view);
// A job with its spec (SpecJson for `view`) and placement; with_timeline
// adds every run and the timeline.
nlohmann::json JobJson(const store::JobRecord& job, bool with_timeline, EnvView view,
                       JobRefs refs = JobRefs::kHideOtherTenants);
// A job as GET /v1/jobs lists it by default: what `berth jobs` shows (ids,
// owner, state and reason, resources, times, array) and no spec, runs or
// placement.
nlohmann::json JobSummaryJson(const store::JobRecord& job,
                              JobRefs refs = JobRefs::kHideOtherTenants);
// A node's or GPU's cordon (null when none).
nlohmann::json CordonJson(const std::optional<store::Cordon>& cordon);
nlohmann::json NodeJson(const NodeStatus& node, const std::vector<store::RunRecord>& active);
// One entry per GPU, with the job holding it (if any). A holder of a tenant
// `visible` refuses is shown only as "another tenant": no id, name, queue or
// run (api/auth.h).
nlohmann::json GpusJson(const std::vector<NodeStatus>& nodes,
                        const std::vector<store::JobRecord>& holders,
                        const std::function<bool(std::string_view tenant)>& visible = {});
nlohmann::json ErrorJson(const Error& error);

// The parsed policy: settings, pools, priority classes and queues (quota
// amounts in the resource's unit: milli-GPUs, bytes, millicores).
nlohmann::json PolicyJson(const model::Policy& policy);
// One policy version: its metadata, and with `full` the YAML as applied, the
// normalised YAML and the parsed policy. `active` is the active version.
nlohmann::json PolicyVersionJson(const store::PolicyVersion& version, std::int64_t active,
                                 bool full);

}  // namespace berth::server
