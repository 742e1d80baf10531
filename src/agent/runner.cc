#include "agent/runner.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <type_traits>

#include "agent/atomic_file.h"
#include "common/hash.h"
#include "common/units.h"

extern char** environ;

namespace berth::agent {
namespace {

namespace fs = std::filesystem;

std::string Join(const auto& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ',';
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(item)>>) {
      out += std::to_string(item);
    } else {
      out += item;
    }
  }
  return out;
}

}  // namespace

Status ValidateRunId(std::string_view id) {
  bool ok = !id.empty() && id.size() <= 128 && id.front() != '.';
  for (char c : id) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
  }
  if (!ok) {
    return InvalidField("run_id",
                        "run_id must be 1..128 of letters, digits, '.', '-', '_' "
                        "and must not start with '.'");
  }
  return Ok();
}

int StopSignalNumber(std::string_view name) {
  if (name.starts_with("SIG")) name.remove_prefix(3);
  if (name == "INT") return SIGINT;
  if (name == "USR1") return SIGUSR1;
  if (name == "USR2") return SIGUSR2;
  return SIGTERM;
}

std::vector<std::string> RunDeviceRules(const fs::path& device_dir,
                                        const std::vector<std::uint32_t>& gpu_indices) {
  // What every process expects to open: null, zero, full, random, urandom,
  // tty, ptmx and the pseudo-terminals.
  std::vector<std::string> rules{"c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm",
                                 "c 1:9 rwm", "c 5:0 rwm", "c 5:2 rwm", "c 136:* rwm"};
  auto allow = [&](const std::string& name) {
    struct stat st {};
    if (::stat((device_dir / name).c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return;
    rules.push_back(fmt::format("c {}:{} rw", major(st.st_rdev), minor(st.st_rdev)));
  };
  // The control devices CUDA opens whatever GPUs it uses (Slurm's
  // ConstrainDevices allows them too).
  for (const char* control : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) {
    allow(control);
  }
  for (auto idx : gpu_indices) allow(fmt::format("nvidia{}", idx));
  return rules;
}

namespace {

// What a container gets bind-mounted (its checkpoint directory, its mounts)
// must be the path berthd checked against the tenant's storage grants, not
// a symlink a job planted there: podman resolves symlinks, so the link's
// target would be mounted instead. Returns "" or why not.
std::string SymlinkedMount(const StartOrder& order) {
  std::vector<std::string> paths;
  if (auto it = order.env.find("BERTH_CHECKPOINT_DIR"); it != order.env.end()) {
    paths.push_back(it->second);
  }
  if (!order.checkpoint_file.empty()) {
    paths.push_back(fs::path(order.checkpoint_file).parent_path().string());
  }
  for (const auto& [path, read_only] : order.mounts) paths.push_back(path);
  for (std::string path : paths) {
    if (path.empty() || path.front() != '/') continue;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    std::error_code ec;
    const fs::path real = fs::weakly_canonical(path, ec);
    if (!ec && real.string() != fs::path(path).lexically_normal().string()) {
      return fmt::format(
          "{} leads through a symlink to {}; a container gets only real paths under its "
          "tenant's storage grants: remove the link, or name the real path",
          path, real.string());
    }
  }
  return {};
}

}  // namespace

std::string ClaimJobRoot(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) {
    return fmt::format("mkdir {}: {}", dir.string(), std::strerror(errno));
  }
  // Through a descriptor that refuses symlinks: what is checked is what is
  // changed.
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return fmt::format("{} is not a directory of its own ({})", dir.string(), std::strerror(errno));
  }
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0) {
    why = fmt::format("stat {}: {}", dir.string(), std::strerror(errno));
  } else if (st.st_uid != 0 || (st.st_mode & 022) != 0) {
    why = fmt::format(
        "{} belongs to uid {} with mode {:o}, not to root alone; someone made it "
        "before the agent did",
        dir.string(), st.st_uid, st.st_mode & 07777);
  } else if (::fchmod(fd, 0711) != 0) {
    why = fmt::format("chmod {}: {}", dir.string(), std::strerror(errno));
  }
  ::close(fd);
  return why;
}

Runner::Runner(RunnerOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {
  if (options_.work_root.empty()) options_.work_root = options_.data_dir / "work";
  if (options_.output_root.empty()) {
    options_.output_root = options_.work_root.parent_path() / "outputs";
  }
  // Run ids are unique per berthd, not per host: two agents on one host (two
  // simulated nodes, a test beside a real agent) keep their runs' cgroups
  // apart under a scope named for the node and the agent's data directory.
  std::error_code ec;
  fs::path data = fs::weakly_canonical(options_.data_dir, ec);
  const std::uint32_t h = Fnv1a32((ec ? options_.data_dir : data).string());
  std::string node = options_.node_name.empty() ? "node" : options_.node_name;
  std::replace(node.begin(), node.end(), '/', '_');
  cgroup_scope_ = fmt::format("{}/{}-{:08x}", options_.cgroup_parent, node, h);
}

Runner::~Runner() = default;

fs::path Runner::RunDir(std::string_view run_id) const {
  return options_.data_dir / "runs" / std::string(run_id);
}

fs::path Runner::WorkDir(std::string_view run_id) const {
  return options_.work_root / std::string(run_id);
}

fs::path Runner::OutputDir(std::string_view run_id) const {
  return options_.output_root / std::string(run_id) / "out";
}

namespace {

// The agent's directories and who may enter them: the data dir and the work
// root may be passed through (a job reaches its own working directory and,
// on simulated nodes, the stand-in devices) but not listed; the run
// directories (orders, specs with their env, exit records, logs) are the
// agent's alone.
Status PrepareDirs(const fs::path& data_dir, const fs::path& work_root,
                   const fs::path& output_root) {
  std::error_code ec;
  const fs::path runs = data_dir / "runs";
  for (const auto& [dir, mode] :
       {std::pair{data_dir, 0711}, {runs, 0700}, {work_root, 0711}, {output_root, 0711}}) {
    fs::create_directories(dir, ec);
    if (ec) return Fail(Code::kInternal, "cannot create " + dir.string() + ": " + ec.message());
    if (::chmod(dir.c_str(), static_cast<mode_t>(mode)) != 0) {
      return Fail(Code::kInternal, fmt::format("cannot chmod {:o} {}: {}", mode, dir.string(),
                                               std::strerror(errno)));
    }
  }
  return Ok();
}

}  // namespace

std::string Runner::MakeWorkDir(const std::string& run_id,
                                const std::optional<Identity>& owner) const {
  const fs::path dir = WorkDir(run_id);
  std::error_code ec;
  fs::remove_all(dir, ec);  // a leftover of a Start() that died before its run dir
  for (const fs::path& d : {dir, dir / "tmp"}) {
    if (::mkdir(d.c_str(), 0700) != 0)
      return fmt::format("mkdir {}: {}", d.string(), std::strerror(errno));
    if (owner && ::lchown(d.c_str(), owner->uid, owner->gid) != 0) {
      return fmt::format("chown {} to {}:{}: {}", d.string(), owner->uid, owner->gid,
                         std::strerror(errno));
    }
  }
  return {};
}

std::string Runner::MakeOutputDir(const std::string& run_id,
                                  const std::optional<Identity>& owner) const {
  // The run's directory is ours, so the job cannot rename its `out` or change
  // the time its retention counts from; `out` is the job's.
  const fs::path top = options_.output_root / run_id;
  std::error_code ec;
  fs::remove_all(top, ec);  // a leftover of a Start() that died before its run dir
  // chmod: berthd's umask (077) would leave it closed to the run identity.
  if (::mkdir(top.c_str(), 0711) != 0 || ::chmod(top.c_str(), 0711) != 0) {
    return fmt::format("mkdir {}: {}", top.string(), std::strerror(errno));
  }
  const fs::path out = OutputDir(run_id);
  if (::mkdir(out.c_str(), 0700) != 0) {
    return fmt::format("mkdir {}: {}", out.string(), std::strerror(errno));
  }
  if (owner && ::lchown(out.c_str(), owner->uid, owner->gid) != 0) {
    return fmt::format("chown {} to {}:{}: {}", out.string(), owner->uid, owner->gid,
                       std::strerror(errno));
  }
  return {};
}

Result<OutputRead> Runner::ReadOutput(std::string_view run_id, std::string_view path,
                                      std::uint64_t offset, std::uint32_t length) const {
  BERTH_RETURN_IF_ERROR(ValidateRunId(run_id));
  auto read = ReadOutputAt(OutputDir(run_id), path, offset, length);
  if (!read && read.error().code == Code::kNotFound && path.empty()) {
    return Fail(
        Code::kNotFound,
        fmt::format("run {} has no outputs on node {}: they are kept {} after the run "
                    "(berth-agent --output-retention), or the run never started here",
                    run_id, options_.node_name, FormatDurationMs(options_.output_retention_ms)));
  }
  return read;
}

void Runner::SweepOutputs(TimeMs now) {
  outputs_swept_ms_ = now;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.output_root, ec)) {
    const std::string name = entry.path().filename().string();
    if (runs_.contains(name) || fs::exists(RunDir(name))) continue;  // not acknowledged yet
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0) continue;
    const TimeMs since =
        static_cast<TimeMs>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
    if (since + options_.output_retention_ms > now) continue;
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
    if (rm) spdlog::warn("cannot remove the outputs of {}: {}", name, rm.message());
  }
}

namespace {

// The largest uid or gid podman accepts for --user and --group-add.
constexpr std::uint32_t kMaxContainerId = 2'147'483'647U;

bool ContainerSafe(const Identity& id) {
  return id.uid <= kMaxContainerId && id.gid <= kMaxContainerId &&
         std::all_of(id.groups.begin(), id.groups.end(),
                     [](std::uint32_t g) { return g <= kMaxContainerId; });
}

}  // namespace

RunCgroup Runner::CgroupOf(const Run& run) const {
  return RunCgroup(options_.confine ? options_.cgroups : CgroupHost{}, cgroup_scope_, run.id);
}

Runner::Run Runner::Load(const std::string& run_id) const {
  Run run;
  run.id = run_id;
  run.dir = RunDir(run_id);
  if (auto order = ReadRunRecord<OrderRecord>(FileIn(run.dir, kOrderFile), ParseOrderRecord)) {
    run.order = *order;
  }
  run.order.run_id = run_id;
  run.pid = ReadRunRecord<PidRecord>(FileIn(run.dir, kPidFile), ParsePidRecord);
  run.exit = ReadRunRecord<ExitRecord>(FileIn(run.dir, kExitFile), ParseExitRecord);
  run.stop = ReadRunRecord<StopRecord>(FileIn(run.dir, kStopFile), ParseStopRecord);
  return run;
}

Result<std::vector<RunState>> Runner::Scan() {
  fs::path root = options_.data_dir / "runs";
  std::error_code ec;
  BERTH_RETURN_IF_ERROR(PrepareDirs(options_.data_dir, options_.work_root, options_.output_root));
  // A working directory without its run directory belongs to a Start() that
  // died before the rename, or to a run acknowledged before its directory
  // went: nothing will use it.
  for (const auto& entry : fs::directory_iterator(options_.work_root, ec)) {
    if (!fs::exists(RunDir(entry.path().filename().string()))) fs::remove_all(entry.path(), ec);
  }
  ec.clear();
  std::vector<RunState> out;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with(".tmp-")) {
      // A Start() that died before its rename: the run was never accepted.
      fs::remove_all(entry.path(), ec);
      continue;
    }
    if (!entry.is_directory(ec) || !ValidateRunId(name) || runs_.contains(name)) continue;
    Run run = Load(name);
    if (!run.exit && !run.pid) {
      // Accepted but not started: its shim never ran, or died before the
      // gate. Holding the lock, no other shim can be past its own checks, so
      // starting one more cannot run the job twice.
      if (int fd = LockIfShimGone(run); fd >= 0) {
        run.pid = ReadRunRecord<PidRecord>(FileIn(run.dir, kPidFile), ParsePidRecord);
        run.exit = ReadRunRecord<ExitRecord>(FileIn(run.dir, kExitFile), ParseExitRecord);
        if (!run.pid && !run.exit) SpawnShim(run);
        ::close(fd);
      }
    }
    auto [it, inserted] = runs_.emplace(name, std::move(run));
    out.push_back(StateOf(it->second));
  }
  if (ec) return Fail(Code::kInternal, "cannot list " + root.string() + ": " + ec.message());
  return out;
}

std::map<std::string, std::string> Runner::JobEnv(const StartOrder& order) const {
  std::map<std::string, std::string> job_env = order.env;
  std::string gpus = Join(order.gpu_indices);
  job_env["CUDA_VISIBLE_DEVICES"] = gpus;
  // "void" is the NVIDIA container runtime's word for "no GPUs at all";
  // an empty value would mean "all GPUs" to some of its versions.
  job_env["NVIDIA_VISIBLE_DEVICES"] = gpus.empty() ? "void" : gpus;
  job_env["BERTH_GPU_UUIDS"] = Join(order.gpu_uuids);
  job_env["BERTH_NODE"] = options_.node_name;
  job_env["BERTH_RUN_ID"] = order.run_id;
  job_env["BERTH_ATTEMPT"] = std::to_string(order.attempt);
  job_env["BERTH_OUTPUT_DIR"] = OutputDir(order.run_id).string();
  if (order.gpu_share_millis > 0) {
    // A slice: what placement granted. Berth guarantees the accounting; on
    // the card, the NVIDIA MPS daemon (where the operator runs it) enforces
    // these limits for its clients. The one visible device is device 0.
    std::string share = fmt::format("0.{:03}", order.gpu_share_millis % 1000);
    while (share.back() == '0') share.pop_back();
    if (order.gpu_share_millis >= 1000) share = "1";
    job_env["BERTH_GPU_SHARE"] = share;
    job_env["BERTH_GPU_MEMORY_LIMIT"] = std::to_string(order.gpu_share_bytes);
    job_env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = fmt::format("0={}M", order.gpu_share_bytes >> 20);
    job_env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] =
        std::to_string(std::max<std::uint32_t>(1, (order.gpu_share_millis + 9) / 10));
  }
  return job_env;
}

OrderRecord Runner::RecordOf(const StartOrder& order, TimeMs now_ms) {
  OrderRecord rec;
  rec.run_id = order.run_id;
  rec.job_id = order.job_id;
  rec.replica = order.replica;
  rec.attempt = order.attempt;
  rec.gpu_indices = order.gpu_indices;
  rec.gpu_uuids = order.gpu_uuids;
  rec.max_runtime_ms = order.max_runtime_ms;
  rec.grace_ms = order.grace_ms;
  rec.stop_signal = order.stop_signal;
  rec.checkpoint_file = order.checkpoint_file;
  rec.image = order.image;
  rec.created_at_ms = now_ms;
  rec.gpu_share_millis = order.gpu_share_millis;
  rec.gpu_share_bytes = order.gpu_share_bytes;
  rec.load = order.load;
  return rec;
}

Status Runner::WriteRunDir(const std::string& run_id, const ShimSpec& spec,
                           const OrderRecord& rec) const {
  // Build the directory under a temporary name and rename it into place: a
  // run directory is either complete or absent, whatever instant we die at.
  const fs::path root = options_.data_dir / "runs";
  const fs::path dir = RunDir(run_id);
  fs::path tmp = root / (".tmp-" + run_id);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) return Fail(Code::kInternal, "cannot create " + tmp.string() + ": " + ec.message());
  int err = WriteFileAtomic(FileIn(tmp, kSpecFile), ToJson(spec));
  if (err == 0) err = WriteFileAtomic(FileIn(tmp, kOrderFile), ToJson(rec));
  if (err == 0 && ::rename(tmp.c_str(), dir.c_str()) != 0) err = errno;
  if (err == 0) err = SyncDirectory(root.string());
  if (err != 0) {
    fs::remove_all(tmp, ec);
    return Fail(Code::kInternal,
                "cannot write run directory " + dir.string() + ": " + std::strerror(err));
  }
  return Ok();
}

Result<RunState> Runner::Start(const StartOrder& order) {
  BERTH_RETURN_IF_ERROR(ValidateRunId(order.run_id));
  if (auto it = runs_.find(order.run_id); it != runs_.end()) {
    it->second.started_reported = false;
    it->second.exit_reported = false;
    Refresh(it->second);
    return StateOf(it->second);
  }
  fs::path dir = RunDir(order.run_id);
  std::error_code ec;
  if (fs::exists(dir, ec)) {  // on disk but not scanned: adopt, never restart
    auto [it, inserted] = runs_.emplace(order.run_id, Load(order.run_id));
    return StateOf(it->second);
  }
  if (fs::exists(options_.output_root / order.run_id / kAckedFile, ec)) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("run {} already ran on node {} and berthd acknowledged its exit; a run "
                            "is started once (this order is a repeat)",
                            order.run_id, options_.node_name));
  }
  BERTH_RETURN_IF_ERROR(PrepareDirs(options_.data_dir, options_.work_root, options_.output_root));

  // Who the job runs as. A confined node starts nothing without an identity
  // it can resolve: the run exits at once with the reason, for berth why.
  std::string refused;
  bool identity_refused = false;
  std::optional<Identity> identity;
  if (options_.confine) {
    if (auto id = ResolveRunAs(order.run_as, order.tenant, options_.node_name)) {
      identity = *id;
    } else {
      refused = id.error().message;
      identity_refused = true;
    }
  }
  if (std::string why = MakeWorkDir(order.run_id, identity); !why.empty() && refused.empty()) {
    refused = "cannot make the run's working directory: " + why;
  }
  if (std::string why = MakeOutputDir(order.run_id, identity); !why.empty() && refused.empty()) {
    refused = "cannot make the run's output directory: " + why;
  }
  const fs::path work = WorkDir(order.run_id);
  if (refused.empty() && !order.image.empty()) refused = SymlinkedMount(order);

  // What the job itself sees, over what it inherits from the agent.
  std::map<std::string, std::string> job_env = JobEnv(order);
  // A service replica's port: where it listens (PORT) and where the node
  // serves it (BERTH_NODE_PORT), the same but in a container on a network
  // of its own, which listens on the spec's port published on the node's.
  std::uint32_t port = 0;
  if (order.service_port > 0 && refused.empty()) {
    if (auto picked = PickServicePort()) {
      port = *picked;
      const bool own_network = !order.image.empty() && order.container_network.empty();
      job_env["PORT"] = std::to_string(own_network ? order.service_port : port);
      job_env["BERTH_NODE_PORT"] = std::to_string(port);
    } else {
      refused = picked.error().message;
    }
  }

  ShimSpec spec;
  spec.command = order.command;
  spec.working_dir = order.working_dir.empty() ? work.string() : order.working_dir;
  spec.log_path = FileIn(dir, kLogFile);
  if (identity) {
    // The job's own home and scratch, never the agent's.
    job_env["HOME"] = work.string();
    job_env["TMPDIR"] = (work / "tmp").string();
    job_env["USER"] = identity->name;
    job_env["LOGNAME"] = identity->name;
  }
  std::string no_runtime = refused;
  if (!refused.empty()) {
    // Nothing to start: the verdict below says why.
  } else if (order.image.empty()) {
    for (const auto& name : options_.inherited_env) {
      if (const char* value = std::getenv(name.c_str())) spec.env[name] = value;
    }
    for (const auto& [k, v] : job_env) spec.env[k] = v;
    if (identity) {
      spec.set_identity = true;
      spec.uid = identity->uid;
      spec.gid = identity->gid;
      spec.groups = identity->groups;
    }
    if (options_.confine && options_.cgroups.version != CgroupVersion::kNone) {
      spec.cgroup_parent = cgroup_scope_;
      spec.cgroup_name = order.run_id;
      spec.memory_limit_bytes = order.memory_bytes;
      spec.cpu_millis = order.cpu_millis;
      spec.pids_max = options_.pids_max;
      if (options_.cgroups.v1_roots.contains("devices") || options_.cgroups.v2_devices) {
        spec.devices = RunDeviceRules(options_.gpu_device_dir, order.gpu_indices);
      }
    }
  } else if (std::string podman = FindPodman();
             !podman.empty() && identity && !ContainerSafe(*identity)) {
    // podman parses --user into a signed 32-bit id and refuses the rest
    // ("uids and gids must be in range 0-2147483647"), though the kernel
    // runs a process as them: say so before podman does, with what to change.
    refused = no_runtime = fmt::format(
        "run identity uid {} gid {} of tenant {} is above {}, and podman runs no container as "
        "it; give the tenant a run_as below that (tenants.{}.run_as in the policy) or run the "
        "job without `image`",
        identity->uid, identity->gid, order.tenant, kMaxContainerId, order.tenant);
  } else if (!podman.empty()) {
    spec.env = std::move(job_env);
    ContainerSpec(order, port, podman, spec, identity ? &work : nullptr);
    if (identity) {
      // podman runs as root on the host; the container's processes run as the
      // run identity with no capabilities and no way to gain any. podman
      // puts the container in a cgroup of its own, so the limits go to it.
      std::vector<std::string> confine{"--user", fmt::format("{}:{}", identity->uid, identity->gid),
                                       "--cap-drop=ALL", "--security-opt=no-new-privileges",
                                       fmt::format("--pids-limit={}", options_.pids_max)};
      for (auto g : identity->groups) {
        if (g != identity->gid) confine.push_back(fmt::format("--group-add={}", g));
      }
      if (order.memory_bytes > 0) confine.push_back(fmt::format("--memory={}", order.memory_bytes));
      // Only for the exit record: the shim makes no cgroup of its own here.
      spec.memory_limit_bytes = order.memory_bytes;
      if (order.cpu_millis > 0) {
        confine.push_back(
            fmt::format("--cpus={}.{:03}", order.cpu_millis / 1000, order.cpu_millis % 1000));
      }
      // After `podman run --rm --pull=never`, before the first option given.
      spec.command.insert(spec.command.begin() + 4, confine.begin(), confine.end());
    }
  } else {
    // Failing now beats a run that waits forever for a runtime that is not
    // coming: the user learns at once what to change.
    no_runtime = fmt::format(
        "image {} needs a container runtime, but podman is not installed on node {}; install "
        "podman there or remove `image` from the job spec",
        order.image, options_.node_name);
  }

  OrderRecord rec = RecordOf(order, clock_.NowMs());
  rec.port = port;
  rec.service_port = order.service_port;
  rec.readiness = order.readiness;
  rec.liveness = order.liveness;

  BERTH_RETURN_IF_ERROR(WriteRunDir(order.run_id, spec, rec));

  Run run;
  run.id = order.run_id;
  run.dir = dir;
  run.order = rec;
  if (no_runtime.empty()) {
    SpawnShim(run);
  } else {
    WriteExitVerdict(run, no_runtime, refused.empty() ? 127 : 126, identity_refused);
  }
  auto [it, inserted] = runs_.emplace(order.run_id, std::move(run));
  return StateOf(it->second);
}

std::string Runner::FindPodman() const {
  std::string path;
  if (options_.search_path) {
    path = *options_.search_path;
  } else if (const char* env = std::getenv("PATH")) {
    path = env;
  }
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t colon = std::min(path.find(':', start), path.size());
    std::string dir = path.substr(start, colon - start);
    start = colon + 1;
    if (dir.empty() || dir.front() != '/') continue;  // never a relative podman
    std::string cand = dir + "/podman";
    struct stat st {};
    if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(cand.c_str(), X_OK) == 0) {
      return cand;
    }
  }
  return {};
}

std::map<std::string, std::string> Runner::PodmanEnv() const {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string_view::npos) env[std::string(kv.substr(0, eq))] = kv.substr(eq + 1);
  }
  if (!options_.podman_conf.empty()) env["CONTAINERS_CONF"] = options_.podman_conf.string();
  return env;
}

void Runner::ContainerSpec(const StartOrder& order, std::uint32_t port, const std::string& podman,
                           ShimSpec& spec, const fs::path* work) const {
  std::map<std::string, std::string> job_env = std::move(spec.env);
  std::vector<std::string> argv{podman, "run", "--rm", "--pull=never"};
  // The container's name is derived from the run, so the shim (or anyone)
  // can find and remove it; run ids are valid container names.
  spec.container_name = "berth-" + order.run_id;
  argv.insert(argv.end(), {"--name", spec.container_name});
  // Its id, by which the shim finds the kernel's OOM kills in it once podman
  // has removed its cgroup.
  argv.insert(argv.end(), {"--cidfile", FileIn(RunDir(order.run_id), kContainerIdFile)});
  // The tenant's network from the policy; an unknown word from a newer
  // berthd gets the tightest, never the host's.
  if (order.container_network == "host") {
    argv.emplace_back("--network=host");
  } else if (!order.container_network.empty()) {
    argv.emplace_back("--network=none");
  } else if (port > 0) {
    // A service replica on its own network: its port, on the node's.
    argv.emplace_back("--publish");
    argv.push_back(fmt::format("{}:{}", port, order.service_port));
  }
  if (options_.cdi_gpus) {
    // CDI hands the container exactly these GPUs, and inside it CUDA numbers
    // them from 0: the host indices would name devices it cannot see.
    std::vector<std::uint32_t> inside;
    for (auto idx : order.gpu_indices) {
      argv.emplace_back("--device");
      argv.push_back(fmt::format("nvidia.com/gpu={}", idx));
      inside.push_back(static_cast<std::uint32_t>(inside.size()));
    }
    job_env["CUDA_VISIBLE_DEVICES"] = Join(inside);
    // CDI already injected the devices; a legacy NVIDIA hook reading this
    // variable must not add the host's numbering on top.
    job_env.erase("NVIDIA_VISIBLE_DEVICES");
  }
  // The checkpoint directory and file live on the host, at the same paths
  // inside: what the job saves survives the container, and the agent sees
  // the checkpoint file's mtime.
  std::vector<std::string> mounts;
  if (auto it = job_env.find("BERTH_CHECKPOINT_DIR"); it != job_env.end() && !it->second.empty()) {
    mounts.push_back(it->second);
  }
  if (!order.checkpoint_file.empty()) {
    mounts.push_back(fs::path(order.checkpoint_file).parent_path().string());
  }
  std::sort(mounts.begin(), mounts.end());
  mounts.erase(std::unique(mounts.begin(), mounts.end()), mounts.end());
  for (const auto& m : mounts) {
    if (m.empty() || m.front() != '/') continue;
    std::error_code ec;
    fs::create_directories(m, ec);  // podman refuses a missing bind source
    argv.emplace_back("-v");
    argv.push_back(fmt::format("{0}:{0}", m));
  }
  // The job's own mounts must exist already: the agent creates nothing of a
  // tenant's data.
  for (const auto& [path, read_only] : order.mounts) {
    if (path.empty() || path.front() != '/') continue;
    argv.emplace_back("-v");
    argv.push_back(fmt::format("{0}:{0}{1}", path, read_only ? ":ro" : ""));
  }
  // The image's file system is root's: a job running as its identity has
  // nowhere to write but its own working directory (HOME, TMPDIR), the same
  // one, at the same path, as a process run gets. Nothing else of the host
  // is mounted: not the agent's run directories, not other runs' work.
  if (work != nullptr) {
    argv.emplace_back("-v");
    argv.push_back(fmt::format("{0}:{0}", work->string()));
  }
  // What it leaves for its tenant to download, at the path BERTH_OUTPUT_DIR
  // names.
  argv.emplace_back("-v");
  argv.push_back(fmt::format("{0}:{0}", OutputDir(order.run_id).string()));
  for (const auto& [k, v] : job_env) {
    argv.emplace_back("-e");
    argv.push_back(fmt::format("{}={}", k, v));
  }
  if (!order.working_dir.empty()) argv.insert(argv.end(), {"-w", order.working_dir});
  argv.push_back(order.image);
  argv.insert(argv.end(), order.command.begin(), order.command.end());
  spec.command = std::move(argv);
  spec.env = PodmanEnv();
  // The host side runs in the run directory; the job's own working dir
  // applies inside (-w) where it may not exist on the host.
  spec.working_dir = RunDir(order.run_id).string();
  spec.podman = podman;
  spec.image = order.image;
  spec.pull_timeout_ms = options_.pull_timeout_ms;
}

std::vector<RunState> Runner::ReportAll() {
  std::vector<RunState> out;
  for (auto& [id, run] : runs_) {
    Refresh(run);
    RunState state = StateOf(run);
    if (run.exit) {
      // Its Exited must follow the rest of its log, and only berthd knows how
      // much of the log it holds (Registered.log_offsets): until the log has
      // caught up, the run is still running as far as berthd is told.
      state.phase = RunPhase::kRunning;
      state.exit.reset();
    }
    // The exit goes out as its own Exited once the log is drained.
    run.exit_reported = false;
    run.started_reported = run.pid.has_value() || run.exit.has_value();
    out.push_back(std::move(state));
  }
  return out;
}

void Runner::SetLogOffset(std::string_view run_id, std::uint64_t offset) {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  struct stat st {};
  auto log = it->second.dir / "output.log";
  std::uint64_t size =
      ::stat(log.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : std::uint64_t{0};
  it->second.log_offset = std::min(offset, size);
}

std::vector<Runner::Held> Runner::Running() const {
  std::vector<Held> out;
  for (const auto& [id, run] : runs_) {
    if (!run.pid || run.exit) continue;
    out.push_back({run.order, run.pid->started_at_ms});
  }
  return out;
}

std::optional<RunState> Runner::Get(std::string_view run_id) const {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return std::nullopt;
  return StateOf(it->second);
}

Result<std::uint32_t> Runner::PickServicePort() const {
  std::set<std::uint32_t> given;
  for (const auto& [id, run] : runs_) {
    if (run.order.port > 0 && !run.exit) given.insert(run.order.port);
  }
  for (int attempt = 0; attempt < 16; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
    auto* any = reinterpret_cast<sockaddr*>(&addr);
    const bool bound = ::bind(fd, any, sizeof(addr)) == 0 && ::getsockname(fd, any, &len) == 0;
    ::close(fd);
    if (!bound) break;
    const std::uint32_t port = ntohs(addr.sin_port);
    if (!given.contains(port)) return port;
  }
  return Fail(Code::kUnavailable,
              fmt::format("node {} found no free TCP port for the service replica: {}",
                          options_.node_name, std::strerror(errno)));
}

RunState Runner::StateOf(const Run& run) const {
  RunState s;
  s.run_id = run.id;
  s.port = run.order.port;
  if (run.pid) {
    s.phase = RunPhase::kRunning;
    s.pid = run.pid->pid;
    s.started_at_ms = run.pid->started_at_ms;
  }
  if (run.exit) {
    s.phase = RunPhase::kExited;
    RunExit e;
    e.exit_code = run.exit->exit_code;
    e.signal = run.exit->signal;
    e.started_at_ms = run.exit->started_at_ms;
    e.ended_at_ms = run.exit->ended_at_ms;
    e.start_error = run.exit->start_error;
    e.stopped_for = run.stop ? run.stop->reason : "";
    // Clean: the job ended before Berth had to SIGKILL it. A run that never
    // started was not stopped at all, so it says nothing either way.
    if (run.stop && run.exit->start_error.empty()) e.clean_stop = run.stop->killed_at_ms == 0;
    e.last_checkpoint_ms = run.checkpoint_seen_ms;
    e.oom_kills = run.exit->oom_kills;
    e.memory_peak_bytes = run.exit->memory_peak_bytes;
    e.memory_limit_bytes = run.exit->memory_limit_bytes;
    e.leftover_processes = run.exit->leftover_processes;
    e.identity_refused = run.exit->identity_refused;
    if (!run.pid) s.started_at_ms = e.started_at_ms;
    s.exit = std::move(e);
  }
  return s;
}

}  // namespace berth::agent
