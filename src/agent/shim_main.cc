// berth-shim: the one process that watches one job, like containerd-shim or
// conmon. The agent (or berthd) may crash and restart at any time; the shim
// does not, so the job keeps running and its true exit status is recorded in
// RUN_DIR/exit.json for whichever agent comes next. Single-threaded on
// purpose: it forks, and only a single-threaded process may allocate freely
// between fork and exec.
//
// Protocol (see run_files.h for the files):
//   1. take RUN_DIR/shim.lock for life; if pid.json or exit.json already
//      exists, an earlier shim owns this run: leave quietly.
//   2. fork the job; the child makes itself a process group and waits on a
//      gate pipe. The parent writes pid.json durably, then opens the gate, so
//      no job ever runs without a pid.json, and a shim that dies before the
//      gate opens leaves no job behind (the child reads EOF and exits).
//   3. a CLOEXEC pipe reports a failed chdir/exec (errno) to the parent.
//   4. waitpid, kill what is left of the job's process group, write exit.json.
//
// Confinement (the agent is root, docs/security.md): before step 2 the shim
// makes the run's cgroup with its limits and, after the fork, moves the child
// into it before pid.json exists, so every process of the job is in the
// cgroup from its first instruction. After the gate the child takes the run
// identity (groups, gid, uid, no_new_privs) and only then changes to its
// working directory, so that check is made as the job. Step 4 kills the
// whole cgroup and waits until it is empty; the shim is the subreaper of the
// job's orphans, so double-forked daemons are reaped here too. exit.json
// then records the OOM kills and peak memory the cgroup saw.
//
// A container run (spec.image set) differs in two places: before step 2 the
// shim makes sure the image is present (podman image exists, else podman
// pull, bounded by the spec's pull timeout; a failure is the run's start
// error), and before exit.json it removes the container. The job process is
// then `podman run` in the foreground: it proxies the signals it gets (the
// stop signal) to the container's main process, but a SIGKILL ends only
// podman itself, so the removal is what ends the container.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/atomic_file.h"
#include "agent/cgroup.h"
#include "agent/run_files.h"

namespace {

using berth::agent::ExitRecord;
using berth::agent::PidRecord;

enum Stage : int { kStageChdir = 1, kStageExec = 2, kStageIdentity = 3, kStageCgroup = 4 };

struct ChildReport {
  int stage = 0;
  int err = 0;
};

std::string g_dir;

std::string PathIn(std::string_view name) {
  return g_dir + "/" + std::string(name);
}

std::int64_t WallMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

void Say(const std::string& msg) {
  std::fprintf(stderr, "berth-shim: %s\n", msg.c_str());
}

bool Exists(std::string_view name) {
  struct stat st {};
  return ::stat(PathIn(name).c_str(), &st) == 0;
}

int WriteExit(const ExitRecord& rec) {
  int err =
      berth::agent::WriteFileAtomic(PathIn(berth::agent::kExitFile), berth::agent::ToJson(rec));
  if (err != 0) Say("cannot write exit.json: " + std::string(std::strerror(err)));
  return err == 0 ? 0 : 1;
}

// The job never ran: say why in its log (best effort) and in exit.json.
int StartFailed(int log_fd, const std::string& why, int exit_code) {
  if (log_fd >= 0) {
    std::string line = "berth: " + why + "\n";
    [[maybe_unused]] ssize_t n = ::write(log_fd, line.data(), line.size());
  }
  Say(why);
  ExitRecord rec;
  rec.exit_code = exit_code;
  rec.started_at_ms = WallMs();
  rec.ended_at_ms = rec.started_at_ms;
  rec.start_error = why;
  return WriteExit(rec);
}

// Runs a helper (podman) to completion with stdout and stderr on `out_fd`,
// killing it after `timeout_ms`. Returns its exit code, -1 when it could not
// run or timed out (`timed_out` tells which).
int RunTool(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            int out_fd, std::int64_t timeout_ms, bool* timed_out = nullptr) {
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  if (timed_out != nullptr) *timed_out = false;
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::setpgid(0, 0);  // its helpers go with it on a timeout
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(out_fd, 2);
    ::execve(cargv[0], cargv.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  const std::int64_t deadline = WallMs() + timeout_ms;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (r < 0 && errno != EINTR) return -1;
    if (WallMs() >= deadline) {
      ::kill(-pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (timed_out != nullptr) *timed_out = true;
      return -1;
    }
    timespec nap{0, 50'000'000};
    ::nanosleep(&nap, nullptr);
  }
}

// The last non-empty line of a file, without podman's "Error: " prefix: the
// one line of a failed pull that says why.
std::string LastLine(const std::string& path) {
  auto text = berth::agent::ReadWholeFile(path);
  if (!text) return "no output";
  std::string t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  auto nl = t.rfind('\n');
  std::string line = nl == std::string::npos ? t : t.substr(nl + 1);
  if (line.starts_with("Error: ")) line.erase(0, 7);
  return line.empty() ? "no output" : line;
}

// Makes sure a container run's image is present; returns why not, or "".
// podman's pull output goes to pull.log and then into the job's log, where
// the user looks for why a run took long to start.
std::string EnsureImage(const berth::agent::ShimSpec& spec, int log_fd) {
  const std::int64_t kCheckMs = 60'000;
  int fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  int exists = RunTool({spec.podman, "image", "exists", spec.image}, spec.env, fd, kCheckMs);
  if (fd >= 0) ::close(fd);
  if (exists == 0) return "";
  const std::string pull_log = PathIn(berth::agent::kPullLogFile);
  int out = ::open(pull_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) return "cannot open pull.log: " + std::string(std::strerror(errno));
  const std::int64_t timeout = spec.pull_timeout_ms > 0 ? spec.pull_timeout_ms : 600'000;
  bool timed_out = false;
  int rc = RunTool({spec.podman, "pull", spec.image}, spec.env, out, timeout, &timed_out);
  ::close(out);
  if (auto text = berth::agent::ReadWholeFile(pull_log); text && log_fd >= 0) {
    [[maybe_unused]] ssize_t n = ::write(log_fd, text->data(), text->size());
  }
  if (rc == 0) return "";
  if (timed_out) {
    return "could not pull image " + spec.image + ": no answer within " +
           std::to_string(timeout / 1000) + " s (the agent's --pull-timeout)";
  }
  return "could not pull image " + spec.image + ": " + LastLine(pull_log);
}

// Where to look for argv[0]: the job's own PATH, as execvpe would if it used
// the target environment rather than the caller's.
std::vector<std::string> Candidates(const berth::agent::ShimSpec& spec) {
  const std::string& cmd = spec.command.front();
  if (cmd.find('/') != std::string::npos) return {cmd};
  auto it = spec.env.find("PATH");
  std::string path = it != spec.env.end() ? it->second : "/usr/local/bin:/usr/bin:/bin";
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon == std::string::npos ? colon : colon - start);
    out.push_back((dir.empty() ? "." : dir) + "/" + cmd);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

// The evidence the user reads at the end of the log (docs/failures.md).
void SayOomKilled(const ExitRecord& out, int log_fd) {
  std::string line =
      "berth: killed by the kernel's OOM killer: the run reached its memory "
      "limit of " +
      std::to_string(out.memory_limit_bytes >> 20) + " MiB (resources.memory); peak " +
      std::to_string(out.memory_peak_bytes >> 20) + " MiB, " + std::to_string(out.oom_kills) +
      " process(es) killed\n";
  [[maybe_unused]] ssize_t n = ::write(log_fd, line.data(), line.size());
}

// How many processes of container `id` the kernel's OOM killer killed, from
// the kernel's log: podman counts them in the container's own cgroup and
// removes that cgroup when the container exits, before anyone can read it.
// Each kill is an "oom-kill:" record naming the container's cgroup
// (libpod-<id>, in cgroupfs and systemd layouts alike). -1 when the log
// cannot be read (no /dev/kmsg, or not root).
int ContainerOomKills(const std::string& id) {
  if (id.size() < 12) return -1;
  int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  int kills = 0;
  std::string record(8192, '\0');
  for (;;) {
    ssize_t n = ::read(fd, record.data(), record.size());
    if (n < 0 && (errno == EINTR || errno == EPIPE)) continue;  // EPIPE: overwritten meanwhile
    if (n <= 0) break;                                          // EAGAIN: the end of the log
    std::string_view r(record.data(), static_cast<std::size_t>(n));
    if (r.find("oom-kill:") != std::string_view::npos &&
        r.find("libpod-" + id) != std::string_view::npos) {
      ++kills;
    }
  }
  ::close(fd);
  return kills;
}

// Kills whatever is left in the run's cgroup, reaps it (we are the
// subreaper), records what the cgroup saw, and removes it. The run is over
// only once its cgroup is empty.
void EndCgroup(const berth::agent::RunCgroup& cgroup, ExitRecord& out, int log_fd) {
  if (cgroup.enabled()) {
    if (!cgroup.KillAll(10'000)) Say("processes remain in the run's cgroup after SIGKILL");
    out.oom_kills = cgroup.OomKills();
    out.memory_peak_bytes = cgroup.MemoryPeak();
    if (out.oom_kills > 0) SayOomKilled(out, log_fd);
  }
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  cgroup.Remove();
}

void ReportAndExit(int fd, int stage, int err, int code) {
  ChildReport rep{stage, err};
  [[maybe_unused]] ssize_t n = ::write(fd, &rep, sizeof rep);
  ::_exit(code);
}

[[noreturn]] void RunChild(const berth::agent::ShimSpec& spec,
                           const berth::agent::RunCgroup& cgroup, int lock_fd, int log_fd,
                           int gate_rd, int report_wr) {
  ::close(lock_fd);
  ::setpgid(0, 0);
  // Into the run's cgroup first, while still root and before the gate: the
  // job never executes a single instruction outside it. A failure is
  // reported after the gate, and the job never runs.
  if (int err = cgroup.JoinSelf(); err != 0) ReportAndExit(report_wr, kStageCgroup, err, 126);
  // Dispositions set to ignore survive exec: give the job a clean slate.
  for (int sig : {SIGHUP, SIGINT, SIGPIPE, SIGTERM, SIGCHLD}) ::signal(sig, SIG_DFL);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0 && null_fd != 0) {
    ::dup2(null_fd, 0);
    ::close(null_fd);
  }
  ::dup2(log_fd, 1);
  ::dup2(log_fd, 2);

  char go = 0;
  ssize_t got;
  do {
    got = ::read(gate_rd, &go, 1);
  } while (got < 0 && errno == EINTR);
  if (got != 1) ::_exit(125);  // the shim died before recording us: never run

  if (spec.set_identity) {
    // Groups first: after setuid the job could no longer drop them.
    std::vector<gid_t> groups(spec.groups.begin(), spec.groups.end());
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(spec.gid) != 0 ||
        ::setuid(spec.uid) != 0) {
      ReportAndExit(report_wr, kStageIdentity, errno, 126);
    }
    // No setuid binary or file capability gives the job back what it lost.
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      ReportAndExit(report_wr, kStageIdentity, errno, 126);
    }
  }

  if (!spec.working_dir.empty() && ::chdir(spec.working_dir.c_str()) != 0) {
    ReportAndExit(report_wr, kStageChdir, errno, 126);
  }

  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.command;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  bool saw_eacces = false;
  for (const std::string& cand : Candidates(spec)) {
    ::execve(cand.c_str(), argv.data(), envp.data());
    int err = errno;
    if (err == ENOEXEC) {
      // A script without #!: run it with sh, as execvp does.
      std::vector<std::string> sh_args{"/bin/sh", cand};
      sh_args.insert(sh_args.end(), args.begin() + 1, args.end());
      std::vector<char*> sh_argv;
      for (auto& a : sh_args) sh_argv.push_back(a.data());
      sh_argv.push_back(nullptr);
      ::execve("/bin/sh", sh_argv.data(), envp.data());
      err = errno;
    }
    // Like execvp: a missing candidate means try the next PATH entry; an
    // unreadable one is remembered; anything else ends the search.
    if (err == EACCES) {
      saw_eacces = true;
    } else if (err != ENOENT && err != ENOTDIR && err != ESTALE && err != ENODEV) {
      ReportAndExit(report_wr, kStageExec, err, 126);
    }
  }
  ReportAndExit(report_wr, kStageExec, saw_eacces ? EACCES : ENOENT, 127);
  ::_exit(127);
}

// Why the job never started, from the child's report.
std::string StartErrorText(const berth::agent::ShimSpec& spec, const ChildReport& rep) {
  std::string why = rep.stage == kStageChdir
                        ? "cannot change to working directory '" + spec.working_dir + "': "
                    : rep.stage == kStageCgroup ? "cannot join the run's cgroup: "
                    : rep.stage == kStageIdentity
                        ? "cannot take the run identity uid " + std::to_string(spec.uid) + " gid " +
                              std::to_string(spec.gid) + ": "
                        : "cannot start '" + spec.command.front() + "': ";
  return why + std::strerror(rep.err);
}

// After the job's main process ended (wait status `status`): kills what it
// left behind, ends its cgroup and container, and fills `out` with how it
// ended.
void Reap(const berth::agent::ShimSpec& spec, berth::agent::RunCgroup& cgroup, pid_t pid,
          int status, int log_fd, ExitRecord& out) {
  // The run ends with its main process: whatever it left in its group or its
  // cgroup would otherwise hold GPUs the scheduler believes are free.
  out.leftover_processes = static_cast<std::uint32_t>(cgroup.Pids().size());
  ::kill(-pid, SIGKILL);
  EndCgroup(cgroup, out, log_fd);
  if (!spec.container_name.empty()) {
    // podman may have died (SIGKILL after the grace period) with the
    // container still running: kill and remove it, or it keeps the GPUs.
    int fd = ::open(PathIn(berth::agent::kShimLogFile).c_str(),
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    RunTool({spec.podman, "rm", "--force", "--ignore", "--time", "0", spec.container_name},
            spec.env, fd, 60'000);
    if (fd >= 0) ::close(fd);
  }
  if (WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
    out.exit_code = 128 + out.signal;
  } else {
    out.exit_code = WEXITSTATUS(status);
  }
  // A container killed past its memory limit ends as 137 (podman's exit for
  // a SIGKILLed process); the kernel's log says whether its OOM killer did it.
  if (!spec.container_name.empty() && out.exit_code == 128 + SIGKILL && out.oom_kills == 0) {
    std::string id;
    if (std::ifstream cid(PathIn(berth::agent::kContainerIdFile)); cid) std::getline(cid, id);
    if (int kills = ContainerOomKills(id); kills > 0) {
      out.oom_kills = static_cast<std::uint64_t>(kills);
      out.memory_peak_bytes = out.memory_limit_bytes;  // what it reached
      SayOomKilled(out, log_fd);
    }
  }
}

// Locks the run directory (shim.lock, held until the shim exits). Returns
// the exit code when this shim must not run the job: the lock failed, or
// an earlier shim already owns the run.
std::optional<int> TakeRun(int& lock_fd) {
  lock_fd = ::open(PathIn(berth::agent::kShimLockFile).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    Say("cannot open shim.lock: " + std::string(std::strerror(errno)));
    return 1;
  }
  while (::flock(lock_fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      Say("cannot lock shim.lock: " + std::string(std::strerror(errno)));
      return 1;
    }
  }
  if (Exists(berth::agent::kExitFile) || Exists(berth::agent::kPidFile)) {
    Say("run already owned by an earlier shim; leaving");
    return 0;
  }
  return std::nullopt;
}

// berth-shim --probe RUN_DIR ARGV...: a service replica's command probe
// (agent/prober.h), run as the replica runs. In a container: `podman exec`
// in it. Otherwise: in the run's cgroup, as its identity with no_new_privs,
// in its working directory, with its environment. Exits with the command's
// status (126/127 when it cannot run); the agent times it out.
int RunProbeCommand(const std::string& dir, std::vector<std::string> command) {
  g_dir = dir;
  auto text = berth::agent::ReadWholeFile(PathIn(berth::agent::kSpecFile));
  if (!text) {
    std::fprintf(stderr, "cannot read the run's spec.json\n");
    return 126;
  }
  auto spec = berth::agent::ParseShimSpec(*text);
  if (!spec) {
    std::fprintf(stderr, "bad spec.json: %s\n", spec.error().message.c_str());
    return 126;
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec->env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  if (!spec->image.empty()) {
    // The container's own user, namespaces and cgroup; podman's environment.
    std::vector<std::string> args{spec->podman, "exec", spec->container_name};
    args.insert(args.end(), command.begin(), command.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execve(spec->podman.c_str(), argv.data(), envp.data());
    std::fprintf(stderr, "cannot run %s: %s\n", spec->podman.c_str(), std::strerror(errno));
    return 127;
  }
  berth::agent::RunCgroup cgroup(
      spec->cgroup_name.empty() ? berth::agent::CgroupHost{} : berth::agent::DetectCgroups(),
      spec->cgroup_parent, spec->cgroup_name);
  if (int err = cgroup.JoinSelf(); err != 0) {
    std::fprintf(stderr, "cannot join the run's cgroup: %s\n", std::strerror(err));
    return 126;
  }
  if (spec->set_identity) {
    std::vector<gid_t> groups(spec->groups.begin(), spec->groups.end());
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(spec->gid) != 0 ||
        ::setuid(spec->uid) != 0 || ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      std::fprintf(stderr, "cannot take the run identity: %s\n", std::strerror(errno));
      return 126;
    }
  }
  if (!spec->working_dir.empty() && ::chdir(spec->working_dir.c_str()) != 0) {
    std::fprintf(stderr, "cannot change to %s: %s\n", spec->working_dir.c_str(),
                 std::strerror(errno));
    return 126;
  }
  std::vector<char*> argv;
  for (auto& a : command) argv.push_back(a.data());
  argv.push_back(nullptr);
  spec->command = command;
  for (const std::string& cand : Candidates(*spec)) {
    ::execve(cand.c_str(), argv.data(), envp.data());
  }
  std::fprintf(stderr, "cannot run %s: %s\n", command.front().c_str(), std::strerror(errno));
  return 127;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::string_view(argv[1]) == "--probe") {
    return RunProbeCommand(argv[2], std::vector<std::string>(argv + 3, argv + argc));
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: berth-shim RUN_DIR | berth-shim --probe RUN_DIR ARGV...\n");
    return 2;
  }
  g_dir = argv[1];
  // Own session: no terminal or agent process-group signal reaches us.
  ::setsid();
  for (int sig : {SIGHUP, SIGINT, SIGPIPE}) ::signal(sig, SIG_IGN);
  ::close_range(3, ~0U, 0);  // nothing the agent held open leaks into the job

  int lock_fd = -1;
  if (std::optional<int> done = TakeRun(lock_fd)) return *done;

  auto text = berth::agent::ReadWholeFile(PathIn(berth::agent::kSpecFile));
  if (!text) return StartFailed(-1, "cannot read spec.json", 126);
  auto spec = berth::agent::ParseShimSpec(*text);
  if (!spec) return StartFailed(-1, "bad spec.json: " + spec.error().message, 126);

  int log_fd = ::open(spec->log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    return StartFailed(-1, "cannot open log '" + spec->log_path + "': " + std::strerror(errno),
                       126);
  }
  if (spec->command.empty() || spec->command.front().empty()) {
    return StartFailed(log_fd, "cannot start job: empty command", 127);
  }

  if (!spec->image.empty()) {
    // podman refuses to overwrite a container id file: one left by a shim
    // that died before its run started goes now.
    ::unlink(PathIn(berth::agent::kContainerIdFile).c_str());
    if (std::string why = EnsureImage(*spec, log_fd); !why.empty()) {
      return StartFailed(log_fd, why, 125);
    }
  }

  berth::agent::RunCgroup cgroup(
      spec->cgroup_name.empty() ? berth::agent::CgroupHost{} : berth::agent::DetectCgroups(),
      spec->cgroup_parent, spec->cgroup_name);
  if (cgroup.enabled()) {
    berth::agent::CgroupLimits limits;
    limits.memory_bytes = spec->memory_limit_bytes;
    limits.cpu_millis = spec->cpu_millis;
    limits.pids_max = spec->pids_max;
    limits.devices = spec->devices;
    if (std::string why = cgroup.Create(limits); !why.empty()) {
      cgroup.Remove();
      return StartFailed(log_fd, "cannot set up the run's cgroup: " + why, 126);
    }
  }
  // Orphans of the job (a double fork, a setsid daemon) become our children,
  // so they are reaped here once the cgroup kill ends them.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

  int gate[2];
  int report[2];
  if (::pipe2(gate, O_CLOEXEC) != 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    return StartFailed(log_fd, std::string("cannot create pipes: ") + std::strerror(errno), 126);
  }
  pid_t pid = ::fork();
  if (pid < 0) return StartFailed(log_fd, std::string("fork: ") + std::strerror(errno), 126);
  if (pid == 0) {
    ::close(gate[1]);
    ::close(report[0]);
    RunChild(*spec, cgroup, lock_fd, log_fd, gate[0], report[1]);
  }
  ::close(gate[0]);
  ::close(report[1]);
  ::setpgid(pid, pid);  // also in the parent, so the group exists before pid.json says so

  PidRecord rec;
  rec.shim_pid = ::getpid();
  rec.pid = pid;
  rec.pgid = pid;
  rec.started_at_ms = WallMs();
  if (int err =
          berth::agent::WriteFileAtomic(PathIn(berth::agent::kPidFile), berth::agent::ToJson(rec));
      err != 0) {
    ::close(gate[1]);  // the child reads EOF and exits without running the job
    ::waitpid(pid, nullptr, 0);
    return StartFailed(log_fd, std::string("cannot write pid.json: ") + std::strerror(err), 126);
  }
  char go = 1;
  [[maybe_unused]] ssize_t wrote = ::write(gate[1], &go, 1);
  ::close(gate[1]);

  ChildReport rep;
  ssize_t got;
  do {
    got = ::read(report[0], &rep, sizeof rep);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ExitRecord out;
  out.memory_limit_bytes = spec->memory_limit_bytes;
  out.started_at_ms = rec.started_at_ms;
  out.ended_at_ms = WallMs();
  if (got == static_cast<ssize_t>(sizeof rep)) {
    const std::string why = StartErrorText(*spec, rep);
    std::string line = "berth: " + why + "\n";
    [[maybe_unused]] ssize_t n = ::write(log_fd, line.data(), line.size());
    out.exit_code = rep.stage == kStageExec && rep.err == ENOENT ? 127 : 126;
    out.start_error = why;
    EndCgroup(cgroup, out, log_fd);
    return WriteExit(out);
  }
  Reap(*spec, cgroup, pid, status, log_fd, out);
  return WriteExit(out);
}
