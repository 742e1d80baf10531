// The files of one run directory (<data_dir>/runs/<run_id>/) and their JSON
// forms. The directory is the only channel between the runner and berth-shim,
// and the only memory that survives an agent restart, so each record here is
// written whole (see atomic_file.h) and read back tolerantly.
//
//   spec.json   runner -> shim   what to exec (argv, full env, cwd, log path;
//                                for a container: the image to pull first)
//   order.json  runner           the StartRun fields the runner enforces later
//                                (stop signal, grace, checkpoint file)
//   shim.lock   shim             flock held for the shim's life: its liveness
//   pid.json    shim -> runner   written before the job may exec
//   exit.json   shim -> runner   the job's true end (or the runner's verdict
//                                when the shim itself was lost)
//   stop.json   runner           a requested stop: reason, time, grace, and
//                                when SIGKILL was sent (rewritten before it is)
//   output.log  job              combined stdout and stderr, append-only
//   shim.log    shim             the shim's own stderr, for diagnosis
//   pull.log    shim             podman's output while pulling the image
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/atomic_file.h"
#include "common/status.h"
#include "model/service.h"
#include "model/telemetry.h"

namespace berth::agent {

// One of a run directory's files by its name (kLogFile, kExitFile, ...).
inline std::string FileIn(const std::filesystem::path& dir, std::string_view name) {
  return (dir / name).string();
}

// One record of a run directory read back with its Parse function; nullopt
// when it is missing, torn or foreign (treated as not written yet).
template <typename T, typename Parse>
std::optional<T> ReadRunRecord(const std::string& file, Parse parse) {
  auto text = ReadWholeFile(file);
  if (!text) return std::nullopt;
  auto rec = parse(*text);
  if (!rec) return std::nullopt;
  return *rec;
}

inline constexpr std::string_view kSpecFile = "spec.json";
inline constexpr std::string_view kOrderFile = "order.json";
inline constexpr std::string_view kShimLockFile = "shim.lock";
inline constexpr std::string_view kPidFile = "pid.json";
inline constexpr std::string_view kExitFile = "exit.json";
inline constexpr std::string_view kStopFile = "stop.json";
inline constexpr std::string_view kLogFile = "output.log";
inline constexpr std::string_view kShimLogFile = "shim.log";
inline constexpr std::string_view kPullLogFile = "pull.log";
// Beside a run's `out` (output_root/RUN, the agent's, kept for the output
// retention): berthd acknowledged the run's exit, so it never starts again.
inline constexpr std::string_view kAckedFile = "acked";
// A container run's container id, written by `podman run --cidfile`.
inline constexpr std::string_view kContainerIdFile = "container.id";

struct ShimSpec {
  std::vector<std::string> command;
  std::map<std::string, std::string> env;  // the job's complete environment
  std::string working_dir;
  std::string log_path;
  // Set when the job runs in a container: `command` is then `podman run ...`
  // and the shim first makes sure `image` is present (podman image exists,
  // else podman pull within pull_timeout_ms), and after the job removes
  // container `container_name`, so that nothing of it outlives the run.
  std::string podman{};  // absolute path of podman
  std::string image{};
  std::string container_name{};
  std::int64_t pull_timeout_ms{0};
  // Confinement, set when the agent runs as root (docs/security.md). The job
  // runs as uid:gid with exactly `groups` and no_new_privs; the shim itself
  // stays root to supervise it. Unset: the job runs as the shim's own user
  // (the agent's single-user mode).
  bool set_identity{false};
  std::uint32_t uid{0};
  std::uint32_t gid{0};
  std::vector<std::uint32_t> groups{};
  // The run's cgroup (cgroup.h): <cgroup_parent>/<cgroup_name> in every
  // hierarchy the host offers; empty name: none. Limits 0: none.
  std::string cgroup_parent{};
  std::string cgroup_name{};
  std::uint64_t memory_limit_bytes{0};
  std::uint32_t cpu_millis{0};
  std::uint32_t pids_max{0};
  std::vector<std::string> devices{};  // device rules (CgroupLimits::devices); empty: not confined
};

struct PidRecord {
  std::int64_t shim_pid = 0;
  std::int64_t pid = 0;
  std::int64_t pgid = 0;
  std::int64_t started_at_ms = 0;
};

struct ExitRecord {
  std::int32_t exit_code = 0;  // meaningful when signal == 0
  std::int32_t signal = 0;
  std::int64_t started_at_ms = 0;
  std::int64_t ended_at_ms = 0;
  std::string start_error;  // non-empty: the job never ran
  // From the run's cgroup, read by the shim after the last process is gone:
  // the kernel's OOM kills, the peak memory and the limit it was held to,
  // and how many processes were still alive when the main process ended
  // (daemons and orphans, all killed with the run).
  std::uint64_t oom_kills = 0;
  std::uint64_t memory_peak_bytes = 0;
  std::uint64_t memory_limit_bytes = 0;
  std::uint32_t leftover_processes = 0;
  // The runner refused the run: its run identity could not be resolved.
  bool identity_refused = false;
};

// What the runner must remember about a StartRun after a restart.
struct OrderRecord {
  std::string run_id;
  std::int64_t job_id = 0;
  std::uint32_t replica = 0;
  std::uint32_t attempt = 0;
  std::vector<std::uint32_t> gpu_indices;
  std::vector<std::string> gpu_uuids;
  std::int64_t max_runtime_ms = 0;  // 0: unlimited
  std::int64_t grace_ms = 0;        // stop signal -> SIGKILL
  std::string stop_signal;          // "SIGTERM" (also when empty), "SIGUSR1", ...
  std::string checkpoint_file;      // empty: none to watch
  std::string image;                // empty: a plain process
  std::int64_t created_at_ms = 0;
  // For telemetry: the slice of gpu_indices[0] (both 0: whole GPUs) and the
  // job's load profile (what the simulated provider reports).
  std::uint32_t gpu_share_millis = 0;
  std::uint64_t gpu_share_bytes = 0;
  model::LoadProfile load{};
  // A service replica's port on the node (StartRun.service_port); 0: none.
  std::uint32_t port = 0;
  // A service replica: the spec's port (what a tcp probe of it means) and
  // its probes, which the agent runs again after a restart.
  std::uint32_t service_port = 0;
  model::Probe readiness{};
  model::Probe liveness{};
};

struct StopRecord {
  std::string reason;
  std::int64_t requested_at_ms = 0;
  std::int64_t grace_ms = 0;
  // When the runner gave up waiting and sent SIGKILL; 0: not (yet). Written
  // before the SIGKILL goes out, so a job that had to be killed is never
  // reported as a clean stop, whichever agent sees its exit.
  std::int64_t killed_at_ms = 0;
};

std::string ToJson(const ShimSpec& spec);
std::string ToJson(const PidRecord& rec);
std::string ToJson(const ExitRecord& rec);
std::string ToJson(const OrderRecord& rec);
std::string ToJson(const StopRecord& rec);

// Parsers never throw; a malformed or truncated file is an error value.
Result<ShimSpec> ParseShimSpec(std::string_view json);
Result<PidRecord> ParsePidRecord(std::string_view json);
Result<ExitRecord> ParseExitRecord(std::string_view json);
Result<OrderRecord> ParseOrderRecord(std::string_view json);
Result<StopRecord> ParseStopRecord(std::string_view json);

}  // namespace berth::agent
