// Human views of berthd's answers: pure functions from the response JSON (and
// the current time, for ages) to the text the CLI prints. Kept free of I/O so
// tests can pin the exact output.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace berth::cli {

// GET /v1/jobs: ID NAME TENANT QUEUE STATE GPUS AGE REASON.
std::string RenderJobs(const nlohmann::json& response, std::int64_t now_ms);

// GET /v1/jobs/{id}: spec summary, state, exit, placement and timeline.
std::string RenderJob(const nlohmann::json& job, std::int64_t now_ms);

// GET /v1/nodes: NAME STATE GPUS(FREE/TOTAL) MODELS CPUS MEMORY PROVIDER HEARTBEAT.
std::string RenderNodes(const nlohmann::json& response, std::int64_t now_ms);

// GET /v1/gpus: NODE INDEX MODEL MEMORY HEALTH JOB.
std::string RenderGpus(const nlohmann::json& response);

// The JOB cell of `berth gpus`: "12 resnet50/r0" for a job object, "-" for a
// free GPU, and a string (e.g. "another tenant") exactly as berthd sent it.
std::string GpuHolder(const nlohmann::json& gpu);

// "2x4": replicas x GPUs per replica; replicas default to 1 as in the spec.
std::string JobGpus(const nlohmann::json& job);

}  // namespace berth::cli
