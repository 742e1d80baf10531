// The runner's supervision of started runs (runner.h): spawning the shim,
// stop requests with their signal and grace, exits (the shim's record, or
// the runner's verdict when the shim was lost), checkpoints, and the events
// Poll hands the agent.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "agent/atomic_file.h"
#include "agent/runner.h"
#include "common/units.h"

extern char** environ;

namespace berth::agent {

namespace fs = std::filesystem;

namespace {

// Starts argv[0] for a run: stdin and stdout on /dev/null, stderr appended
// to `log`, in a session of its own, with none of the agent's blocked
// signals (the agent blocks SIGTERM/SIGINT to sigwait for them) or
// handlers, with `env` as its environment (none: the agent's).
// posix_spawn's result: 0, or the errno it failed with.
int SpawnForRun(std::vector<std::string> args, const std::string& log, pid_t* pid,
                const std::map<std::string, std::string>* env = nullptr) {
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&files, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2}) {
    sigaddset(&defaults, sig);
  }
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  std::vector<char*> envp;
  if (env != nullptr) {
    for (const auto& [k, v] : *env) env_strings.push_back(k + "=" + v);
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  int rc = ::posix_spawn(pid, args.front().c_str(), &files, &attr, argv.data(),
                         env != nullptr ? envp.data() : environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&files);
  return rc;
}

}  // namespace

void Runner::SpawnShim(Run& run) {
  const std::string shim = options_.shim_path.string();
  pid_t pid = 0;
  int rc = SpawnForRun({shim, run.dir.string()}, FileIn(run.dir, kShimLogFile), &pid);
  if (rc != 0) {
    WriteExitVerdict(run, "cannot start berth-shim '" + shim + "': " + std::strerror(rc), 126);
    return;
  }
  run.shim_pid = pid;
}

int Runner::LockIfShimGone(Run& run) {
  int fd = ::open(FileIn(run.dir, kShimLockFile).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {  // a shim holds it: alive
    ::close(fd);
    return -1;
  }
  return fd;
}

void Runner::SignalGroup(const Run& run, int sig) {
  // The job leads its own process group (the shim is outside it), so the
  // group signal reaches the job and its children, never the shim.
  if (run.pid && run.pid->pgid > 1) ::kill(-static_cast<pid_t>(run.pid->pgid), sig);
  // And every process in the run's cgroup: a setsid or double-forked child
  // has left the group but never the cgroup.
  CgroupOf(run).Signal(sig);
}

// How long after podman refused a `podman kill` (the container not running
// yet) the agent asks again.
constexpr TimeMs kSignalRetryMs = 250;

void Runner::SendStopSignal(Run& run, TimeMs now) {
  const int sig = StopSignalNumber(run.order.stop_signal);
  std::string podman = run.order.image.empty() ? std::string() : FindPodman();
  if (podman.empty()) {
    SignalGroup(run, sig);
    // Delivered with the kill itself: the grace runs from the stop request.
    run.signal_delivered_ms = run.stop ? run.stop->requested_at_ms : now;
    return;
  }
  if (run.signaller_pid > 0) return;  // one podman kill at a time
  // Not the group signal to `podman run`: podman before 4.4 installs its
  // signal proxy only after the container has started (podman#16901), so a
  // signal that reaches `podman run` in between (the job already printing,
  // an operator preempting it) is swallowed, and the job is SIGKILLed after
  // its grace without ever hearing it. `podman kill` waits for the
  // container's lock until the start is done, and fails (then we ask again)
  // while there is no running container yet.
  pid_t pid = 0;
  const auto env = PodmanEnv();
  int rc = SpawnForRun({podman, "kill", "--signal", std::to_string(sig), "berth-" + run.id},
                       FileIn(run.dir, kShimLogFile), &pid, &env);
  if (rc != 0) {
    run.signal_retry_at_ms = now + kSignalRetryMs;
    return;
  }
  run.signaller_pid = pid;
}

void Runner::ReapSignaller(Run& run, TimeMs now) {
  if (run.signaller_pid <= 0) return;
  int status = 0;
  pid_t r = ::waitpid(static_cast<pid_t>(run.signaller_pid), &status, WNOHANG);
  if (r == 0 || (r < 0 && errno != ECHILD)) return;
  run.signaller_pid = 0;
  if (r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    run.signal_delivered_ms = now;
  } else {
    run.signal_retry_at_ms = now + kSignalRetryMs;
  }
}

void Runner::WriteExitVerdict(Run& run, std::string start_error, std::int32_t exit_code,
                              bool identity_refused) {
  ExitRecord rec;
  rec.identity_refused = identity_refused;
  rec.exit_code = exit_code;
  rec.started_at_ms = run.pid ? run.pid->started_at_ms : 0;
  rec.ended_at_ms = clock_.NowMs();
  rec.start_error = std::move(start_error);
  // Kept in memory even if the disk refuses it: the next agent then decides
  // again, the same way.
  WriteFileAtomic(FileIn(run.dir, kExitFile), ToJson(rec));
  run.exit = rec;
}

void Runner::Refresh(Run& run) {
  if (run.shim_pid > 0) {
    int status = 0;
    pid_t r = ::waitpid(static_cast<pid_t>(run.shim_pid), &status, WNOHANG);
    if (r == run.shim_pid || (r < 0 && errno == ECHILD)) run.shim_pid = 0;
  }
  if (!run.pid) run.pid = ReadRunRecord<PidRecord>(FileIn(run.dir, kPidFile), ParsePidRecord);
  if (!run.exit) run.exit = ReadRunRecord<ExitRecord>(FileIn(run.dir, kExitFile), ParseExitRecord);
}

Status Runner::Stop(std::string_view run_id, std::string_view reason, std::int64_t grace_ms) {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return Fail(Code::kNotFound, "no run " + std::string(run_id));
  Run& run = it->second;
  Refresh(run);
  if (run.exit || run.stop) return Ok();
  // The job's own grace (from its checkpoint block, via StartRun) is what it
  // asked for to save its work; the order's only covers runs without one.
  StopRecord rec;
  rec.reason = std::string(reason);
  rec.requested_at_ms = clock_.NowMs();
  rec.grace_ms = std::max<std::int64_t>(run.order.grace_ms > 0 ? run.order.grace_ms : grace_ms, 0);
  if (int err = WriteFileAtomic(FileIn(run.dir, kStopFile), ToJson(rec)); err != 0) {
    return Fail(Code::kInternal, "cannot record stop of " + run.id + ": " + std::strerror(err));
  }
  run.stop = rec;
  if (run.pid) {
    SendStopSignal(run, clock_.NowMs());
    run.term_sent = true;
  }
  return Ok();
}

bool Runner::NeverHeld(std::string_view run_id) const {
  if (!ValidateRunId(run_id)) return false;
  if (runs_.find(run_id) != runs_.end()) return false;
  std::error_code ec;
  const bool on_disk = fs::exists(RunDir(run_id), ec);
  return !on_disk && !ec;  // unreadable: assume it may be there
}

Status Runner::Ack(std::string_view run_id) {
  BERTH_RETURN_IF_ERROR(ValidateRunId(run_id));
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return Ok();
  Refresh(it->second);
  if (!it->second.exit) {
    return Fail(Code::kFailedPrecondition, "run " + it->second.id + " has not exited");
  }
  std::error_code ec;
  fs::remove_all(WorkDir(run_id), ec);
  // Remembered as run for as long as its outputs are kept: a start order for
  // it that comes again (from a berthd that read its state before this exit
  // was settled) must not run it twice. The directory is the agent's; the
  // job owns only `out` below it.
  const fs::path acked = options_.output_root / std::string(run_id) / kAckedFile;
  if (std::ofstream mark(acked); !mark) {
    spdlog::warn(
        "cannot mark run {} as acknowledged ({}): a repeated start order would run it "
        "again",
        run_id, acked.string());
  }
  // The outputs stay for their retention, counted from now.
  const TimeMs now = clock_.NowMs();
  const struct timespec times[2] = {{now / 1000, (now % 1000) * 1'000'000},
                                    {now / 1000, (now % 1000) * 1'000'000}};
  (void)::utimensat(AT_FDCWD, (options_.output_root / std::string(run_id)).c_str(), times,
                    AT_SYMLINK_NOFOLLOW);
  fs::remove_all(it->second.dir, ec);
  if (ec)
    return Fail(Code::kInternal, "cannot remove " + it->second.dir.string() + ": " + ec.message());
  if (it->second.signaller_pid > 0) stray_signallers_.push_back(it->second.signaller_pid);
  runs_.erase(it);
  return Ok();
}

void Runner::ReapStraySignallers() {
  std::erase_if(stray_signallers_, [](std::int64_t pid) {
    pid_t r = ::waitpid(static_cast<pid_t>(pid), nullptr, WNOHANG);
    return r == pid || (r < 0 && errno == ECHILD);
  });
}

bool Runner::LogDrained(const Run& run) const {
  struct stat st {};
  if (::stat(FileIn(run.dir, kLogFile).c_str(), &st) != 0) return true;
  return static_cast<std::uint64_t>(st.st_size) <= run.log_offset;
}

void Runner::SuperviseRun(Run& run, TimeMs now) {
  ReapSignaller(run, now);
  Refresh(run);
  if (run.exit) return;
  const auto& order = run.order;
  if (run.pid && !run.stop && order.max_runtime_ms > 0 &&
      now >= run.pid->started_at_ms + order.max_runtime_ms) {
    (void)Stop(run.id, "max_runtime", order.grace_ms);
  }
  WatchCheckpoint(run, now, false);
  if (run.stop && run.pid) {
    if (!run.term_sent) {
      // Also after an agent restart: a job that already caught the signal
      // and is checkpointing gets it again, which checkpoint handlers
      // written for Berth must tolerate (docs/jobs.md).
      if (run.stop->killed_at_ms == 0) SendStopSignal(run, now);
      run.term_sent = true;
    } else if (run.stop->killed_at_ms == 0 && run.signal_delivered_ms == 0 &&
               run.signaller_pid == 0 && now >= run.signal_retry_at_ms) {
      SendStopSignal(run, now);  // podman refused: no running container yet
    }
    // The grace runs from when the signal reached the job (podman kill may
    // take seconds on a loaded node), but ends at most one grace period late.
    const TimeMs requested = run.stop->requested_at_ms;
    const TimeMs signalled =
        std::clamp(run.signal_delivered_ms, requested, requested + run.stop->grace_ms);
    if (run.stop->killed_at_ms == 0 && now >= signalled + run.stop->grace_ms) {
      // Durable before the signal: an agent that dies right after still
      // knows this run did not stop cleanly.
      StopRecord killed = *run.stop;
      killed.killed_at_ms = now;
      (void)WriteFileAtomic(FileIn(run.dir, kStopFile), ToJson(killed));
      run.stop = killed;
    }
    // Repeated while the job lives (each tick, also after a restart): the
    // group may have grown since the last one.
    if (run.stop->killed_at_ms != 0) SignalGroup(run, SIGKILL);
  }
  if (run.shim_pid != 0) return;  // our own child, not yet reaped: alive
  int fd = LockIfShimGone(run);
  if (fd < 0) return;
  // No shim, and none can start while we hold its lock: whatever is on disk
  // now is final.
  Refresh(run);
  if (!run.exit && run.pid) {
    // The job may still run, unsupervised; its end could never be reported,
    // so end it now.
    SignalGroup(run, SIGKILL);
    RunCgroup cgroup = CgroupOf(run);
    (void)cgroup.KillAll(2000);
    cgroup.Remove();
    WriteExitVerdict(run, "berth-shim lost; exit status unknown", -1);
  } else if (!run.exit) {
    WriteExitVerdict(run, "berth-shim lost before starting the job", -1);
  }
  ::close(fd);
}

void Runner::WatchCheckpoint(Run& run, TimeMs now, bool force) {
  if (run.order.checkpoint_file.empty()) return;
  if (!force && run.checkpoint_checked_ms != 0 && now < run.checkpoint_checked_ms + 1000) return;
  run.checkpoint_checked_ms = now;
  struct stat st {};
  if (::stat(run.order.checkpoint_file.c_str(), &st) != 0) return;  // none yet
  // A checkpoint older than the run is the previous attempt's: it is in the
  // store already, and this run has not saved anything yet.
  const std::int64_t mtime_ms =
      static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
  if (mtime_ms < run.order.created_at_ms) return;
  run.checkpoint_seen_ms = std::max(run.checkpoint_seen_ms, mtime_ms);
}

void Runner::Supervise() {
  ReapStraySignallers();
  const TimeMs now = clock_.NowMs();
  for (auto& [id, run] : runs_) SuperviseRun(run, now);
}

std::vector<RunEvent> Runner::Poll(std::size_t max_log_chunks) {
  std::vector<RunEvent> events;
  ReapStraySignallers();
  const TimeMs now = clock_.NowMs();
  if (now - outputs_swept_ms_ >= 60'000) SweepOutputs(now);
  for (auto& [id, run] : runs_) {
    SuperviseRun(run, now);

    if (!run.started_reported && (run.pid || run.exit)) {
      run.started_reported = true;
      if (run.pid) events.push_back({RunEvent::Kind::kStarted, StateOf(run), 0, {}});
    }

    // The exit is loaded before the log is read, so once the read reaches
    // the end after an exit, every byte of the job is in what we handed out.
    bool at_end = true;
    int fd = ::open(FileIn(run.dir, kLogFile).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      for (std::size_t i = 0; i < max_log_chunks; ++i) {
        std::string buf(kMaxLogChunkBytes, '\0');
        ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(run.log_offset));
        if (n <= 0) break;
        buf.resize(static_cast<std::size_t>(n));
        events.push_back({RunEvent::Kind::kLog, {}, run.log_offset, std::move(buf)});
        events.back().state.run_id = id;
        run.log_offset += static_cast<std::uint64_t>(n);
      }
      struct stat st {};
      at_end = ::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) <= run.log_offset;
      ::close(fd);
    }
    // The checkpoint file is looked at once more at the exit: a job that
    // checkpoints and exits within the same second still reports it.
    if (run.exit && !run.exit_reported) WatchCheckpoint(run, now, true);
    if (run.checkpoint_seen_ms > run.checkpoint_reported_ms) {
      run.checkpoint_reported_ms = run.checkpoint_seen_ms;
      RunEvent ev{RunEvent::Kind::kCheckpoint, {}, 0, {}};
      ev.state.run_id = id;
      ev.checkpoint_at_ms = run.checkpoint_seen_ms;
      events.push_back(std::move(ev));
    }
    if (run.exit && at_end && !run.exit_reported) {
      run.exit_reported = true;
      events.push_back({RunEvent::Kind::kExited, StateOf(run), 0, {}});
    }
  }
  return events;
}

}  // namespace berth::agent
