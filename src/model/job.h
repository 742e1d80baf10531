// The job: what a user submits (JobSpec, parsed and validated from YAML or
// JSON), and the lifecycle states the control plane moves it through.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/names.h"
#include "model/service.h"
#include "model/telemetry.h"

namespace berth::model {

// Per-replica resources. Quantities are exact integers.
struct Resources {
  std::uint32_t gpus = 0;
  std::string gpu_model;               // empty: any model
  std::uint64_t gpu_memory_bytes = 0;  // minimum memory per GPU; 0: any
  std::uint32_t cpu_millis = 0;        // 1000 = one CPU
  std::uint64_t memory_bytes = 0;
  // A slice of one shared GPU instead of whole GPUs (gpus is then 0): by
  // share in milli-GPUs (250 = a quarter), or by memory. At most one is set.
  std::uint32_t gpu_share_millis = 0;
  std::uint64_t gpu_share_bytes = 0;
};

// True when each replica asks for a slice of one GPU in sharing mode.
inline bool IsSlice(const Resources& r) {
  return r.gpu_share_millis > 0 || r.gpu_share_bytes > 0;
}

// What a slice holds on a card with `card_memory_bytes`: a share reserves
// that fraction of the card's memory (rounded down); a memory slice counts
// as memory / card memory in milli-GPUs, rounded up (at least 1). Placement,
// quota and the runs all use this one rule.
struct GpuSlice {
  std::uint32_t millis = 0;
  std::uint64_t bytes = 0;
  bool operator==(const GpuSlice&) const = default;
};
GpuSlice SliceOf(const Resources& r, std::uint64_t card_memory_bytes);

enum class Priority { kLow, kNormal, kHigh, kCritical };

// Lets a job onto nodes carrying a matching taint. An empty value matches any
// value of the key; an empty effect matches any effect.
struct Toleration {
  std::string key;
  std::string value;
  std::string effect;  // "" | NoSchedule | PreferNoSchedule
  bool operator==(const Toleration&) const = default;
};

enum class NvlinkIsland { kNone, kPrefer, kRequire };

// Where the replicas may land relative to each other.
struct Topology {
  bool one_node = false;  // every replica on the same node
  // kRequire: each replica's GPUs within one NVLink island; kPrefer: try to.
  NvlinkIsland nvlink_island = NvlinkIsland::kNone;
  bool operator==(const Topology&) const = default;
};

// A job that saves its own progress. Berth stops it with `signal` (SIGTERM by
// default) and waits up to `grace_ms` before SIGKILL when it preempts,
// reclaims or moves it; the job finds `dir` (BERTH_CHECKPOINT_DIR) as it left
// it when it runs again. A job that touches `file` (BERTH_CHECKPOINT_FILE)
// after each checkpoint tells Berth how much work an eviction would lose.
// Only such jobs are moved to make room for a gang (policy `consolidation`).
struct Checkpoint {
  bool enabled = false;       // the spec has a checkpoint block
  std::int64_t grace_ms = 0;  // 0: berthd's stop grace
  std::string dir{};
  std::string signal = "SIGTERM";  // or SIGINT, SIGUSR1, SIGUSR2
  std::string file{};              // absolute path; empty: none reported by file
  bool operator==(const Checkpoint&) const = default;
};

// What happens when a run fails: the whole gang stops, and it is placed
// again (same job, BERTH_RESTART_COUNT + 1) while attempts remain and its
// failure class is one of `on`. The wait before attempt n+1 is
// backoff_ms * 2^(n-1), capped at kMaxRetryBackoffMs.
struct Retry {
  std::uint32_t max_attempts = 3;  // attempts in all, the first included
  std::int64_t backoff_ms = 10'000;
  // Failure class names (docs/failures.md); by default the failures that are
  // not the job's own.
  std::vector<std::string> on{"node_lost", "gpu_hardware"};
  bool operator==(const Retry&) const = default;
};

// Failure classes a retry policy may name.
inline constexpr std::array<std::string_view, 8> kRetryableClasses{
    "user_code",         "gpu_out_of_memory", "host_out_of_memory", "communication",
    "command_not_found", "gpu_hardware",      "node_lost",          "max_runtime"};

// A host path the job uses (its data, its model), at the same path inside a
// container. It must lie under one of its tenant's storage grants
// (docs/security.md); read_only ones may lie under read-only grants.
struct Mount {
  std::string path;
  bool read_only = false;
  bool operator==(const Mount&) const = default;
};
inline constexpr std::size_t kMaxMounts = 64;

// `array:` in a submitted spec: submit `count` jobs at once, one per index
// first..first+count-1 (a range, `array: 0-9999`, or a count, `array: 100`),
// or one per parameter set (`array: [{LR: "0.1"}, {LR: "0.01"}]`, indices
// from 0, each set added to that element's env). Each element is a job of
// its own; the array is shown and cancelled as a group.
struct JobArray {
  std::uint32_t first = 0;
  std::uint32_t count = 0;
  std::vector<std::map<std::string, std::string>> params{};  // empty, or one per index
  bool operator==(const JobArray&) const = default;
};

// What an element of an array knows of it; set by Berth, never submitted.
// `id` is the array's id: its first element's job id. In the job's
// environment as BERTH_ARRAY_ID, BERTH_ARRAY_INDEX and BERTH_ARRAY_SIZE.
struct ArrayElement {
  std::int64_t id = 0;
  std::uint32_t index = 0;
  std::uint32_t size = 0;
  bool operator==(const ArrayElement&) const = default;
};

// The service a replica job runs for (docs/services.md, "Replicas"): its
// name within the job's tenant and the revision whose spec made the job.
// Set only by berthd's service controller; ParseJobSpec never reads it, so
// no submitted spec can claim a service.
struct ServiceOwner {
  std::string name;
  std::int64_t revision = 0;
  // Where the replica serves (the service's `port`); the agent gives it a
  // port of the node and sets PORT (agent.proto StartRun.service_port).
  std::uint32_t port = 0;
  // The service's probes, run by the replica's agent (agent/prober.h):
  // readiness decides whether the gateway sends it requests, liveness
  // whether it is replaced.
  Probe readiness{};
  Probe liveness{};
  bool operator==(const ServiceOwner&) const = default;
};

struct JobSpec {
  std::string name;
  std::string tenant = "default";
  std::string queue = "default";
  std::vector<std::string> command;  // argv; command[0] is looked up in PATH
  std::map<std::string, std::string> env;
  // Names of `env` (or of an array's parameter sets) whose values are
  // secret (`secret_env: [HF_TOKEN]`): they reach the run's environment as
  // any env does, but the API never shows them, to anyone, the submitter
  // included (docs/security.md "Env values"). Every name is a key of `env`
  // or of at least one parameter set.
  std::set<std::string> secret_env{};
  std::string working_dir;  // empty: the agent's run directory
  std::uint32_t replicas = 1;
  Resources resources;
  Priority priority = Priority::kNormal;
  std::int64_t max_runtime_ms = 0;  // 0: unlimited
  // nullopt: from the priority class and the queue (preemptible by default).
  std::optional<bool> preemptible{};
  std::map<std::string, std::string> node_selector{};  // node labels, all must match
  std::vector<Toleration> tolerations{};
  std::string pool{};  // empty: any of the queue's pools
  Topology topology{};
  Checkpoint checkpoint{};
  Retry retry{};
  std::string image{};  // OCI image run with podman; empty: a plain process
  std::vector<Mount> mounts{};
  // How the job loads its GPUs (`load:`); only the simulated GPU provider
  // honours it. The default is what a spec without the block gets.
  LoadProfile load{};
  // A submitted array, before it is expanded (ExpandArray); never stored.
  std::optional<JobArray> array{};
  // On each stored element of an array.
  std::optional<ArrayElement> array_element{};
  // On a service's replica (ServiceOwner).
  std::optional<ServiceOwner> service{};
};

// Limits users see in validation errors; documented in docs/jobs.md.
//
// The quantities are bounded so that one job's totals (a replica's amount
// times kMaxReplicas) stay below 2^61 in every unit: 6.5e7 milli-GPUs,
// 4.2e9 millicores, 2^60 bytes. Sums over many jobs, queues and nodes are
// still taken with common/checked.h, since no bound limits how many there
// are.
inline constexpr std::uint32_t kMaxReplicas = 1024;
inline constexpr std::uint32_t kMaxGpusPerReplica = 64;
inline constexpr std::uint32_t kMaxCpuMillis = 4096 * 1000;  // 4,096 cores per replica
// resources.memory, resources.gpu_memory and a gpu_share by memory: 1 PiB
// (1024Ti), far above any machine's (or GPU's) memory.
inline constexpr std::uint64_t kMaxMemoryBytes = std::uint64_t{1} << 50;
// max_runtime and load.idle_after: 10 years (87600h).
inline constexpr std::int64_t kMaxDurationMs = std::int64_t{3650} * 86'400'000;
inline constexpr std::size_t kMaxCommandArgs = 4096;
inline constexpr std::size_t kMaxEnvEntries = 1024;
// What an env value shows where its viewer may not read it: another
// member's (any caller but the submitter), and a secret entry (anyone).
inline constexpr std::string_view kHiddenEnvValue = "(hidden)";
inline constexpr std::string_view kSecretEnvValue = "(secret)";
inline constexpr std::size_t kMaxSpecBytes = 1 << 20;
inline constexpr std::int64_t kMaxCheckpointGraceMs = 3'600'000;
inline constexpr std::uint32_t kMaxRetryAttempts = 100;
inline constexpr std::int64_t kMaxRetryBackoffMs = 3'600'000;
inline constexpr std::int64_t kMinLoadPeriodMs = 1'000;
inline constexpr std::int64_t kMaxLoadPeriodMs = 86'400'000;
// Elements of one job array (`array:`).
inline constexpr std::uint32_t kMaxArrayElements = 100'000;

// Parses a YAML (or JSON, which is YAML) job spec and validates every field.
// Unknown fields are errors. The error's `field` names the offending field.
Result<JobSpec> ParseJobSpec(std::string_view text);

// How many jobs a submitted spec stands for: its array's count, else 1.
std::uint32_t JobCount(const JobSpec& spec);
// The i-th (from 0) job of a spec with an `array`: the spec without `array`,
// with that element's parameter set merged into env (its own values win)
// and `array_element` set but for its id, which the store sets (the
// array's id is its first element's job id). A spec without `array`: itself.
JobSpec ArrayElementSpec(const JobSpec& spec, std::uint32_t i);

std::string_view PriorityName(Priority p);
// "steady", "periodic", "idle": the names `load.pattern` takes.
std::string_view LoadPatternName(LoadPattern p);
std::optional<LoadPattern> ParseLoadPattern(std::string_view name);
std::string_view NvlinkIslandName(NvlinkIsland n);
std::optional<Priority> ParsePriority(std::string_view name);

enum class JobState { kPending, kScheduled, kRunning, kSucceeded, kFailed, kCancelled };

std::string_view JobStateName(JobState s);
std::optional<JobState> ParseJobState(std::string_view name);
inline bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

// State of one replica's current run on an agent.
enum class RunState { kStarting, kRunning, kExited };
std::string_view RunStateName(RunState s);

}  // namespace berth::model
