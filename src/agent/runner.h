// The runner turns start/stop orders into supervised processes and reports
// what happened to them. It owns <data_dir>/runs/<run_id>/ (files described
// in run_files.h) and keeps no state that matters only in memory: an agent
// killed at any instant and started again rebuilds everything with Scan(),
// reattaches to jobs still running under their berth-shim, and never starts a
// run twice.
//
// Not thread-safe: the agent calls it from one worker thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cgroup.h"
#include "agent/identity.h"
#include "agent/outputs.h"
#include "agent/run_files.h"
#include "common/clock.h"
#include "common/status.h"

namespace berth::agent {

inline constexpr std::size_t kMaxLogChunkBytes = std::size_t{64} * 1024;

// How long a run's outputs stay on its node after berthd acknowledged its
// exit, unless berth-agent --output-retention says otherwise.
inline constexpr std::int64_t kDefaultOutputRetentionMs = std::int64_t{7} * 24 * 3600 * 1000;

struct RunnerOptions {
  std::filesystem::path data_dir;  // runs live in data_dir/runs (0700)
  // Jobs' own working directories, one per run (0700, owned by the run
  // identity; HOME and TMPDIR point into it); empty: data_dir/work.
  std::filesystem::path work_root{};
  // Runs' output directories (BERTH_OUTPUT_DIR): <output_root>/<run>/out,
  // owned by the run identity, kept after the run for `output_retention_ms`
  // so its tenant can download them (docs/jobs.md#outputs); empty: beside
  // work_root (its parent's "outputs").
  std::filesystem::path output_root{};
  std::int64_t output_retention_ms = kDefaultOutputRetentionMs;
  std::filesystem::path shim_path;  // the berth-shim executable
  std::string node_name;            // BERTH_NODE for jobs
  // Container runs: how long the shim may spend pulling a missing image, and
  // whether assigned GPUs are passed to podman as CDI devices
  // (nvidia.com/gpu=INDEX; real NVIDIA nodes) or not at all (simulated GPUs).
  std::int64_t pull_timeout_ms = std::int64_t{10} * 60 * 1000;
  bool cdi_gpus = false;
  // Where podman is looked up; empty: the agent's own PATH.
  std::optional<std::string> search_path{};
  // A containers.conf for Berth's podman (deploy/podman/containers.conf):
  // every podman a run needs (image exists, pull, run, kill, rm) gets it as
  // CONTAINERS_CONF, which replaces the host's containers.conf for those
  // commands only. Absolute; empty: podman's own configuration (the agent's
  // environment, else /etc/containers).
  std::filesystem::path podman_conf{};
  // Environment variables the job inherits from the agent, before the order's
  // own env and the variables the agent sets. The MPS directories let jobs
  // reach an MPS control daemon the operator started with its own pipe
  // directory, so that it enforces slices' limits on the card.
  std::vector<std::string> inherited_env{"PATH",
                                         "HOME",
                                         "USER",
                                         "LOGNAME",
                                         "LANG",
                                         "LC_ALL",
                                         "TZ",
                                         "TMPDIR",
                                         "SHELL",
                                         "CUDA_MPS_PIPE_DIRECTORY",
                                         "CUDA_MPS_LOG_DIRECTORY"};
  // Confinement (docs/security.md). true: every job runs as its order's run
  // identity, in a cgroup of its own (where `cgroups` offers one), and the
  // agent must be root; false: the single-user mode, every job as the
  // agent's own user, confined by nothing.
  bool confine = false;
  CgroupHost cgroups{};  // what DetectCgroups() found
  std::string cgroup_parent = "berth";
  std::uint32_t pids_max = 32768;  // per run: a fork bomb stops there
  // Where the GPUs' device nodes (nvidiaN, nvidiactl, nvidia-uvm) are: /dev
  // on NVIDIA nodes, stand-ins of the same numbers on simulated ones. A run
  // may open only its own GPUs' nodes and the control devices (the v1
  // devices controller, or on v2 a BPF device program).
  std::filesystem::path gpu_device_dir = "/dev";
};

// Makes `dir` (in a world-writable place such as /var/tmp) the agent's own:
// created 0711 if missing; refused unless it is a real directory (not a
// symlink), owned by root and writable by no one else, since whoever else
// made it could swap its contents under the agent. Returns "" or why not.
std::string ClaimJobRoot(const std::filesystem::path& dir);

// The device rules (cgroup v1 syntax, CgroupLimits::devices) of a run
// holding `gpu_indices`: the standard character devices, the NVIDIA control
// devices and those GPUs' nodes, as found in `device_dir`.
std::vector<std::string> RunDeviceRules(const std::filesystem::path& device_dir,
                                        const std::vector<std::uint32_t>& gpu_indices);

// A StartRun order, independent of the wire format.
struct StartOrder {
  std::string run_id;
  std::int64_t job_id = 0;
  std::uint32_t replica = 0;
  std::uint32_t attempt = 0;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string working_dir;  // empty: the run directory
  std::vector<std::uint32_t> gpu_indices;
  std::vector<std::string> gpu_uuids;
  // A slice of the one GPU in gpu_indices (0: whole GPUs): the replica sees
  // its share and memory limit in BERTH_GPU_SHARE / BERTH_GPU_MEMORY_LIMIT
  // and, for NVIDIA MPS clients, CUDA_MPS_* limits.
  std::uint32_t gpu_share_millis = 0;
  std::uint64_t gpu_share_bytes = 0;
  std::int64_t max_runtime_ms = 0;  // 0: unlimited
  std::int64_t grace_ms = 0;        // stop signal -> SIGKILL
  std::string stop_signal;          // empty or "SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2"
  std::string checkpoint_file;      // absolute; its mtime is reported as checkpoints
  std::string image;                // OCI image to run the command in (podman)
  model::LoadProfile load{};        // the job's declared load (simulated telemetry)
  std::string tenant;               // whose run: named in identity errors
  RunAs run_as{};                   // who it runs as (confined agents)
  std::uint32_t cpu_millis = 0;     // per replica, enforced by its cgroup; 0: none
  std::uint64_t memory_bytes = 0;
  // Host paths bind-mounted into a container at the same path (read_only:
  // ":ro"); berthd checked them against the tenant's storage grants.
  std::vector<std::pair<std::string, bool>> mounts{};
  // A container's network: "" (podman's default, a namespace of its own),
  // "none" or "host" (tenants.<t>.container_network).
  std::string container_network{};
  // A service replica: the port it serves on; the runner gives it a free
  // port of the node (RunState::port). 0: any other run.
  std::uint32_t service_port = 0;
  // A replica's probes (agent/prober.h); kind kNone: not probed.
  model::Probe readiness{};
  model::Probe liveness{};
};

struct RunExit {
  std::int32_t exit_code = 0;
  std::int32_t signal = 0;
  std::int64_t started_at_ms = 0;
  std::int64_t ended_at_ms = 0;
  std::string stopped_for;  // "", "cancelled", "max_runtime", ...
  std::string start_error;
  // Stopped runs only: true when the job ended on its own within its grace
  // period after the stop signal, false when it had to be SIGKILLed.
  std::optional<bool> clean_stop;
  std::int64_t last_checkpoint_ms = 0;  // checkpoint file mtime; 0: none seen
  // From the run's cgroup (ExitRecord).
  std::uint64_t oom_kills = 0;
  std::uint64_t memory_peak_bytes = 0;
  std::uint64_t memory_limit_bytes = 0;
  std::uint32_t leftover_processes = 0;
  bool identity_refused = false;  // the node could not take the run identity
};

enum class RunPhase {
  kStarting,  // accepted; the shim has not recorded the job's pid yet
  kRunning,
  kExited,
};

struct RunState {
  std::string run_id;
  RunPhase phase = RunPhase::kStarting;
  std::int64_t pid = 0;
  std::int64_t started_at_ms = 0;
  std::optional<RunExit> exit;  // set when phase == kExited
  std::uint32_t port = 0;       // a service replica's port on the node; 0: none
};

// What Poll() found, in the order it must be reported: a run's Started comes
// before its log bytes, and all of its log bytes before its Exited.
struct RunEvent {
  enum class Kind { kStarted, kLog, kCheckpoint, kExited };
  Kind kind = Kind::kStarted;
  RunState state;                     // run_id always; the rest for kStarted, kExited
  std::uint64_t offset = 0;           // kLog
  std::string data;                   // kLog, at most kMaxLogChunkBytes
  std::int64_t checkpoint_at_ms = 0;  // kCheckpoint: the checkpoint file's mtime
};

// The signal a StartRun's stop_signal names; SIGTERM for empty or unknown.
int StopSignalNumber(std::string_view name);

class Runner {
 public:
  Runner(RunnerOptions options, const Clock& clock);
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  // Does not touch running jobs: they outlive the runner by design.
  ~Runner();

  // podman's absolute path in the search path; empty if it is not there.
  // A job with an `image` runs in a container only where this finds one.
  std::string FindPodman() const;

  // Rebuilds state from the run directories (call once, at start). Runs whose
  // shim is alive stay running; exits already on disk are kept for reporting;
  // a run accepted but never started gets its shim (again). Returns every run.
  Result<std::vector<RunState>> Scan();

  // Idempotent: a known run_id is not started again; its state is returned and
  // its Started/Exited will be reported again by Poll(). Errors only for an
  // invalid run_id or an unwritable data dir; a job that cannot start is a run
  // that exits with start_error.
  Result<RunState> Start(const StartOrder& order);

  // Records the stop durably, then sends the run's stop signal (StartRun's
  // stop_signal, SIGTERM by default) to the job's process group, or to a
  // container through `podman kill` (retried by Poll() while podman has no
  // running container yet); Poll() sends SIGKILL once the grace period has
  // passed since the signal was delivered, at most two grace periods after
  // the stop (also after an agent restart): the run's own grace_ms from StartRun, or `grace_ms` for
  // a run that has none. The first stop of a run wins; stopping an exited run does nothing.
  Status Stop(std::string_view run_id, std::string_view reason, std::int64_t grace_ms);

  // Whether `run_id` is a valid id this runner has no trace of: neither
  // tracked nor on disk. Such a run was never started here (a run directory
  // exists before its shim does, and lasts until berthd acknowledged the
  // exit), so a stop for it can be answered as never started.
  bool NeverHeld(std::string_view run_id) const;

  // berthd has recorded the exit durably: forget the run and delete its
  // directory. Unknown runs are fine (acks may repeat).
  Status Ack(std::string_view run_id);

  // Reaps shims, enforces stops and max runtime (SIGKILL after grace), and
  // turns a lost shim into a recorded exit. Reports nothing, so the agent
  // keeps calling it while berthd is unreachable.
  void Supervise();

  // Supervise(), then what there is to report: starts, new log bytes (up to
  // max_log_chunks chunks per run per call), newer checkpoints and exits. Each Started/Exited
  // is returned once, unless Start() of the same run_id or ReportAll() asks
  // for it again.
  std::vector<RunEvent> Poll(std::size_t max_log_chunks = 16);

  // The state of every unacknowledged run, for a (re)registration. Runs that
  // exited but whose log has not been read to the end yet are shown as
  // running: their Exited follows the remaining log bytes. Starts count as
  // reported; every exit is returned by the next Poll() again, so a
  // reconnection always re-sends RunExited until Ack().
  std::vector<RunState> ReportAll();

  // Resumes shipping `run_id`'s log from `offset` (what berthd holds),
  // clamped to the log's size. Unknown runs are ignored.
  void SetLogOffset(std::string_view run_id, std::uint64_t offset);

  // A run whose job process is running now (started, not exited): what
  // telemetry attributes GPU readings to.
  struct Held {
    OrderRecord order;
    std::int64_t started_at_ms = 0;
  };
  std::vector<Held> Running() const;

  // The current state of one run; nullopt if unknown.
  std::optional<RunState> Get(std::string_view run_id) const;

  // The run directory of `run_id` (whether or not it exists).
  std::filesystem::path RunDir(std::string_view run_id) const;
  // The job's own working directory (when its spec names none).
  std::filesystem::path WorkDir(std::string_view run_id) const;
  // The run's output directory (BERTH_OUTPUT_DIR), kept after Ack() until
  // the retention has passed.
  std::filesystem::path OutputDir(std::string_view run_id) const;

  // A listing or a slice of a file of `run_id`'s outputs (agent/outputs.h),
  // for berthd's OutputRequest. Works for acknowledged runs too.
  Result<OutputRead> ReadOutput(std::string_view run_id, std::string_view path,
                                std::uint64_t offset, std::uint32_t length) const;
  // Removes the output directories of runs acknowledged longer than the
  // retention ago (Poll() calls it at most once a minute).
  void SweepOutputs(TimeMs now);

 private:
  // One run as the runner tracks it. The durable truth is the directory;
  // the flags below only decide what still needs reporting.
  struct Run {
    std::string id;
    std::filesystem::path dir;
    OrderRecord order;
    std::int64_t shim_pid = 0;  // our own child, while not yet reaped
    std::optional<PidRecord> pid;
    std::optional<ExitRecord> exit;
    std::optional<StopRecord> stop;
    bool term_sent = false;  // the stop signal went out (again after a restart)
    // A container's stop signal goes through `podman kill` (SendStopSignal):
    // the one in flight (our child, not yet reaped), when to try again after
    // podman refused, and when podman confirmed delivery (0: not yet). Kept
    // in memory only: a restarted agent sends the signal again anyway.
    std::int64_t signaller_pid = 0;
    TimeMs signal_retry_at_ms = 0;
    TimeMs signal_delivered_ms = 0;
    std::uint64_t log_offset = 0;  // bytes of output.log handed out so far
    bool started_reported = false;
    bool exit_reported = false;
    // Checkpoint file mtimes: the newest seen, the newest reported, and when
    // the file was last looked at (at most once a second).
    std::int64_t checkpoint_seen_ms = 0;
    std::int64_t checkpoint_reported_ms = 0;
    TimeMs checkpoint_checked_ms = 0;
  };

  void Refresh(Run& run);
  void SuperviseRun(Run& run, TimeMs now);
  int LockIfShimGone(Run& run);
  void SpawnShim(Run& run);
  bool LogDrained(const Run& run) const;
  void SignalGroup(const Run& run, int sig);
  // The run's stop signal: to the job's process group for a plain process,
  // through `podman kill` for a container (see runner.cc for why).
  void SendStopSignal(Run& run, TimeMs now);
  // Reaps a finished `podman kill`: delivered, or to be tried again.
  void ReapSignaller(Run& run, TimeMs now);
  void ReapStraySignallers();
  void WatchCheckpoint(Run& run, TimeMs now, bool force);
  // Start's steps: the environment the job sees (its spec's env, the GPUs
  // it was given, its node, run and attempt, its slice's limits); the
  // order as the run directory keeps it; and the run directory written
  // whole under a temporary name and renamed into place.
  std::map<std::string, std::string> JobEnv(const StartOrder& order) const;
  static OrderRecord RecordOf(const StartOrder& order, TimeMs now_ms);
  Status WriteRunDir(const std::string& run_id, const ShimSpec& spec, const OrderRecord& rec) const;
  // The environment podman runs with: the agent's own (CONTAINERS_CONF,
  // XDG_RUNTIME_DIR, REGISTRY_AUTH_FILE...), never the job's, with
  // CONTAINERS_CONF=podman_conf where the runner has one.
  std::map<std::string, std::string> PodmanEnv() const;
  // Turns `spec` (the job's own argv and environment) into `podman run` of
  // order.image; the environment becomes the agent's own, for podman.
  // `work` (confined runs): the run's own working directory, mounted at the
  // same path, where its HOME and TMPDIR point.
  // A free TCP port of the node for a service replica: one the kernel gives
  // for port 0, and none the agent gave a live run.
  Result<std::uint32_t> PickServicePort() const;
  void ContainerSpec(const StartOrder& order, std::uint32_t port, const std::string& podman,
                     ShimSpec& spec, const std::filesystem::path* work) const;
  void WriteExitVerdict(Run& run, std::string start_error, std::int32_t exit_code,
                        bool identity_refused = false);
  // The run's cgroup (disabled when the runner does not confine).
  RunCgroup CgroupOf(const Run& run) const;
  // Makes the job's working directory, owned by `owner` (none: ours).
  std::string MakeWorkDir(const std::string& run_id, const std::optional<Identity>& owner) const;
  // Makes <output_root>/<run> (ours, 0711) and its `out` (0700, `owner`'s).
  std::string MakeOutputDir(const std::string& run_id, const std::optional<Identity>& owner) const;
  RunState StateOf(const Run& run) const;
  Run Load(const std::string& run_id) const;

  RunnerOptions options_;
  std::string cgroup_scope_;  // cgroup_parent/<node>-<hash of data_dir>: this agent's runs
  const Clock& clock_;
  std::map<std::string, Run, std::less<>> runs_;
  // `podman kill`s still running when their run was acknowledged: reaped by
  // Supervise()/Poll() so none stays a zombie.
  std::vector<std::int64_t> stray_signallers_;
  TimeMs outputs_swept_ms_ = 0;
};

// Checks a run id is safe as a directory name: 1..128 of [A-Za-z0-9._-], not
// starting with '.'.
Status ValidateRunId(std::string_view run_id);

}  // namespace berth::agent
