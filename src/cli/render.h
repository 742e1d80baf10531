// Human views of berthd's answers: pure functions from the response JSON (and
// the current time, for ages) to the text the CLI prints. Kept free of I/O so
// tests can pin the exact output.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "model/reason.h"

namespace berth::cli {

// GET /v1/jobs: ID NAME TENANT QUEUE STATE GPUS AGE REASON.
std::string RenderJobs(const nlohmann::json& response, std::int64_t now_ms);

// GET /v1/jobs/{id}: spec summary, state, exit, placement and timeline.
std::string RenderJob(const nlohmann::json& job, std::int64_t now_ms);

// GET /v1/jobs/{id}/why: the reason's message as a headline, then "key: value"
// lines (job, state, code, every count, detail), then the explaining timeline
// events as TIME EVENT MESSAGE; labels and units in `lang` (the sentence is
// already in it, from berthd).
std::string RenderWhy(const nlohmann::json& why, model::Lang lang);

// GET /v1/nodes: NAME STATE GPUS(FREE/TOTAL) MODELS CPUS MEMORY PROVIDER HEARTBEAT.
std::string RenderNodes(const nlohmann::json& response, std::int64_t now_ms);

// GET /v1/gpus: NODE INDEX MODEL MEMORY HEALTH JOB.
std::string RenderGpus(const nlohmann::json& response);
// `berth node NAME`: its state, cordon, GPUs and recent events.
std::string RenderNode(const nlohmann::json& node, std::int64_t now_ms);
// `berth alerts`: open (or all) alerts, oldest first.
std::string RenderAlerts(const nlohmann::json& response, std::int64_t now_ms);

// The JOB cell of `berth gpus`: "12 resnet50/r0" for a job object, "-" for a
// free GPU, and a string (e.g. "another tenant") exactly as berthd sent it.
std::string GpuHolder(const nlohmann::json& gpu);

// "2x4": replicas x GPUs per replica; replicas default to 1 as in the spec.
std::string JobGpus(const nlohmann::json& job);

// GET /v1/policy (or /v1/policy/versions/{v}): who applied it, when and why,
// then QUEUE KIND POOLS RESOURCE GUARANTEED BORROW-LIMIT WEIGHT LENDING-LIMIT.
std::string RenderPolicy(const nlohmann::json& version, std::int64_t now_ms);

// GET /v1/policy/versions: VERSION ACTIVE APPLIED BY COMMENT.
std::string RenderPolicyVersions(const nlohmann::json& response, std::int64_t now_ms);

// GET /v1/policy/diff: the unified diff, then a summary of queue and quota
// changes in words.
std::string RenderPolicyDiff(const nlohmann::json& response);

// POST /v1/policy/preview: a header (versions, window, cluster), then per
// tenant and overall "current -> proposed (change)" for mean and p95 wait,
// mean completion time, GPU-hours and cost; notes on what was not replayed
// or priced. A window where no job ran prints berthd's message instead.
// `file` names the proposed policy in the closing hint.
std::string RenderPolicyPreview(const nlohmann::json& response, const std::string& file);

// A quota amount in the unit people write: "2" or "0.5" GPUs, "80Gi", "16"
// or "1500m" CPUs; "none" for null (no limit).
std::string QuotaAmount(std::string_view resource, const nlohmann::json& amount);

}  // namespace berth::cli
