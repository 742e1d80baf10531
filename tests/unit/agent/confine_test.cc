// Confined runs through the real runner and berth-shim, as root: a job runs
// as its tenant's identity in its own cgroup, cannot touch the agent's state
// or forge its record, takes every process it made with it when it ends, is
// held to its memory limit, and opens only its own GPUs' devices. Each test
// skips, saying why, where the host cannot confine (not root, no cgroups).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent/runner.h"
#include "test_util.h"

namespace berth::agent {
namespace {

using testing::TempDir;
using testing::WaitFor;

constexpr std::uint32_t kUidA = 3'000'900'001U;
constexpr std::uint32_t kUidB = 3'000'900'002U;

bool Gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::string stat = testing::Slurp("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

class ConfineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "confinement needs root (run identities, cgroups)";
    host_ = DetectCgroups();
    if (host_.version == CgroupVersion::kNone) {
      GTEST_SKIP() << "no usable cgroups on this host: "
                   << (host_.missing.empty() ? "" : host_.missing.front());
    }
  }

  void TearDown() override {
    // The per-test parent and the runner's scope in it, once the runs'
    // cgroups are gone.
    if (host_.version == CgroupVersion::kNone) return;
    const std::string parent = Options().cgroup_parent;
    for (const auto& [controller, root] : host_.v1_roots) {
      for (const auto& entry : std::filesystem::directory_iterator(root + "/" + parent, ec_)) {
        if (entry.is_directory()) ::rmdir(entry.path().c_str());
      }
    }
    if (!host_.v2_root.empty()) {
      for (const auto& entry :
           std::filesystem::directory_iterator(host_.v2_root + "/" + parent, ec_)) {
        if (entry.is_directory()) ::rmdir(entry.path().c_str());
      }
    }
    RunCgroup(host_, "", parent).Remove();
  }

  RunnerOptions Options() {
    RunnerOptions o;
    o.data_dir = dir_.path();
    o.shim_path = BERTH_SHIM_PATH;
    o.node_name = "node-1";
    o.confine = true;
    o.cgroups = host_;
    o.cgroup_parent = "berth-test-" + std::to_string(::getpid());
    o.gpu_device_dir = dir_.path() / "dev";
    return o;
  }

  static StartOrder Order(std::string id, std::string script, std::uint32_t uid = kUidA) {
    StartOrder o;
    o.run_id = std::move(id);
    o.job_id = 1;
    o.attempt = 1;
    o.command = {"sh", "-c", std::move(script)};
    o.grace_ms = 200;
    o.tenant = uid == kUidA ? "team-a" : "team-b";
    o.run_as.numeric = true;
    o.run_as.uid = uid;
    o.run_as.gid = uid;
    return o;
  }

  // Polls until the run exited; returns its exit and everything it printed.
  // Other runs' events are kept too: each Exited is reported only once, and
  // a neighbour may end while this run is awaited (on a loaded machine).
  std::pair<std::optional<RunExit>, std::string> Finish(Runner& runner, const std::string& id) {
    WaitFor([&] {
      for (auto& ev : runner.Poll()) {
        if (ev.kind == RunEvent::Kind::kLog) logs_[ev.state.run_id] += ev.data;
        if (ev.kind == RunEvent::Kind::kExited) exits_[ev.state.run_id] = ev.state.exit;
      }
      return exits_.contains(id);
    });
    return {exits_[id], logs_[id]};
  }

  TempDir dir_;
  SystemClock clock_;
  CgroupHost host_;
  std::error_code ec_;
  std::map<std::string, std::string> logs_;
  std::map<std::string, std::optional<RunExit>> exits_;
};

TEST_F(ConfineTest, AJobRunsAsItsTenantsIdentityInAWorkDirOfItsOwn) {
  Runner runner(Options(), clock_);
  StartOrder order = Order("who",
                           "id -u; id -g; id -G; pwd; echo \"$HOME|$TMPDIR\"; stat -c '%u %a' .; "
                           "grep NoNewPrivs /proc/self/status; grep '^CapEff' /proc/self/status");
  order.run_as.groups = {kUidA, 3'000'900'100U};
  ASSERT_TRUE(runner.Start(order).has_value());
  auto [exit, log] = Finish(runner, "who");
  ASSERT_TRUE(exit.has_value()) << log;
  EXPECT_EQ(exit->exit_code, 0) << log << exit->start_error;
  const std::string work = runner.WorkDir("who").string();
  EXPECT_EQ(log, fmt::format("{0}\n{0}\n{0} 3000900100\n{1}\n{1}|{1}/tmp\n{0} 700\n"
                             "NoNewPrivs:\t1\nCapEff:\t0000000000000000\n",
                             kUidA, work));
}

TEST_F(ConfineTest, AJobCannotReachTheAgentsStateOrForgeItsRecord) {
  Runner runner(Options(), clock_);
  const std::string runs = (dir_.path() / "runs").string();
  // Every attempt prints DENIED or the thing it managed; the job then exits 3
  // after at least 300 ms, whatever it tried to write.
  const std::string script = fmt::format(
      "try() {{ if eval \"$1\" 2>/dev/null; then echo \"GOT $2\"; else echo \"DENIED $2\"; fi; }}; "
      "try 'ls {0}' list-runs; "
      "try 'cat {0}/forge/spec.json' read-spec; "
      "try 'cat {0}/forge/output.log' read-log; "
      "try 'echo {{\"exit_code\":0,\"signal\":0,\"started_at_ms\":1,\"ended_at_ms\":2}} > "
      "{0}/forge/exit.json' write-exit; "
      "try 'touch {0}/forge/stop.json' write-stop; "
      "try 'kill -KILL $PPID' kill-shim; "
      "sleep 0.3; exit 3",
      runs);
  const auto before = clock_.NowMs();
  ASSERT_TRUE(runner.Start(Order("forge", script)).has_value());
  auto [exit, log] = Finish(runner, "forge");
  ASSERT_TRUE(exit.has_value()) << log;
  EXPECT_EQ(log,
            "DENIED list-runs\nDENIED read-spec\nDENIED read-log\nDENIED write-exit\n"
            "DENIED write-stop\nDENIED kill-shim\n");
  // The record is the shim's: the job's real exit, start and end.
  EXPECT_EQ(exit->exit_code, 3);
  EXPECT_TRUE(exit->start_error.empty()) << exit->start_error;
  EXPECT_GE(exit->started_at_ms, before);
  EXPECT_GE(exit->ended_at_ms - exit->started_at_ms, 300);
}

TEST_F(ConfineTest, OneTenantsJobCannotTouchAnothersWorkOrProcesses) {
  Runner runner(Options(), clock_);
  ASSERT_TRUE(
      runner.Start(Order("b-victim", "echo secret > secret.txt; echo ready; sleep 30", kUidB))
          .has_value());
  ASSERT_TRUE(WaitFor([&] {
    for (auto& ev : runner.Poll()) {
      if (ev.kind == RunEvent::Kind::kLog) logs_[ev.state.run_id] += ev.data;
    }
    return logs_["b-victim"].find("ready") != std::string::npos;
  }));
  auto victim = runner.Get("b-victim");
  ASSERT_TRUE(victim.has_value());
  const std::string b_work = runner.WorkDir("b-victim").string();
  const std::string script = fmt::format(
      "try() {{ if eval \"$1\" 2>/dev/null; then echo \"GOT $2\"; else echo \"DENIED $2\"; fi; }}; "
      "try 'cat {0}/secret.txt' read-b; try 'touch {0}/planted' write-b; try 'ls {0}' list-b; "
      "try 'kill -TERM {1}' signal-b",
      b_work, victim->pid);
  ASSERT_TRUE(runner.Start(Order("a-intruder", script)).has_value());
  auto [exit, log] = Finish(runner, "a-intruder");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(log, "DENIED read-b\nDENIED write-b\nDENIED list-b\nDENIED signal-b\n");
  EXPECT_FALSE(Gone(static_cast<pid_t>(victim->pid))) << "B's job was hurt";
  ASSERT_TRUE(runner.Stop("b-victim", "cancelled", 100).has_value());
  auto [b_exit, b_log] = Finish(runner, "b-victim");
  EXPECT_TRUE(b_exit.has_value());
}

TEST_F(ConfineTest, ASetsidDaemonAndDoubleForkedChildrenDieWithTheRun) {
  Runner runner(Options(), clock_);
  // The job leaves a setsid daemon and a double-forked child behind, prints
  // their pids and exits at once.
  ASSERT_TRUE(
      runner.Start(Order("daemon", "setsid sleep 1000 & echo $!; (sleep 1000 & echo $!) ; exit 0"))
          .has_value());
  auto [exit, log] = Finish(runner, "daemon");
  ASSERT_TRUE(exit.has_value()) << log;
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_GE(exit->leftover_processes, 2U) << log;
  int pids = 0;
  for (std::size_t start = 0; start < log.size();) {
    std::size_t end = log.find('\n', start);
    pid_t pid = static_cast<pid_t>(std::stol(log.substr(start, end - start)));
    EXPECT_TRUE(WaitFor([&] { return Gone(pid); })) << "pid " << pid << " outlived its run";
    ++pids;
    start = end + 1;
  }
  EXPECT_EQ(pids, 2);
}

TEST_F(ConfineTest, AStopKillsChildrenThatLeftTheProcessGroup) {
  Runner runner(Options(), clock_);
  ASSERT_TRUE(runner
                  .Start(Order("stopme",
                               "(setsid sh -c 'trap \"\" TERM; sleep 1000' & echo $!); sleep 1000"))
                  .has_value());
  std::string log;
  ASSERT_TRUE(WaitFor([&] {
    for (auto& ev : runner.Poll()) {
      if (ev.kind == RunEvent::Kind::kLog) log += ev.data;
    }
    return log.find('\n') != std::string::npos;
  }));
  const pid_t child = static_cast<pid_t>(std::stol(log));
  ASSERT_TRUE(runner.Stop("stopme", "cancelled", 200).has_value());
  auto [exit, rest] = Finish(runner, "stopme");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->stopped_for, "cancelled");
  EXPECT_TRUE(WaitFor([&] { return Gone(child); })) << "the setsid child outlived the stop";
}

TEST_F(ConfineTest, AtItsMaxRuntimeTheRunAndEveryProcessItForkedAreKilled) {
  Runner runner(Options(), clock_);
  StartOrder order =
      Order("timed", "(setsid sh -c 'trap \"\" TERM; exec sleep 1000' & echo $!); exec sleep 1000");
  order.max_runtime_ms = 300;
  ASSERT_TRUE(runner.Start(order).has_value());
  auto [exit, log] = Finish(runner, "timed");
  ASSERT_TRUE(exit.has_value()) << log;
  EXPECT_EQ(exit->stopped_for, "max_runtime");
  const pid_t child = static_cast<pid_t>(std::stol(log));
  EXPECT_TRUE(WaitFor([&] { return Gone(child); })) << "the orphan outlived max_runtime";
}

TEST_F(ConfineTest, AJobOverItsMemoryLimitIsOomKilledAndItsNeighbourRunsOn) {
  if (host_.version == CgroupVersion::kV1 && !host_.v1_roots.contains("memory")) {
    GTEST_SKIP() << "no memory controller";
  }
  Runner runner(Options(), clock_);
  // tail keeps the one 400 MiB "line" in memory: far over the 64 MiB limit.
  StartOrder hog = Order("hog", "head -c 400M /dev/zero | tail > /dev/null");
  hog.memory_bytes = std::uint64_t{64} << 20;
  ASSERT_TRUE(runner.Start(hog).has_value());
  ASSERT_TRUE(runner.Start(Order("neighbour", "sleep 1; echo alive", kUidB)).has_value());
  auto [exit, log] = Finish(runner, "hog");
  ASSERT_TRUE(exit.has_value()) << log;
  EXPECT_EQ(exit->exit_code, 128 + SIGKILL) << log;
  EXPECT_GE(exit->oom_kills, 1U) << log;
  EXPECT_EQ(exit->memory_limit_bytes, std::uint64_t{64} << 20);
  EXPECT_GT(exit->memory_peak_bytes, std::uint64_t{32} << 20);
  EXPECT_NE(log.find("berth: killed by the kernel's OOM killer"), std::string::npos) << log;
  auto [n_exit, n_log] = Finish(runner, "neighbour");
  ASSERT_TRUE(n_exit.has_value());
  EXPECT_EQ(n_exit->exit_code, 0);
  EXPECT_EQ(n_log, "alive\n");
}

TEST_F(ConfineTest, AJobOpensOnlyItsOwnGpuDevices) {
  if (!host_.v1_roots.contains("devices") && !host_.v2_devices) {
    GTEST_SKIP() << "device confinement needs the cgroup v1 devices controller or BPF here: "
                 << (host_.missing.empty() ? "" : host_.missing.back());
  }
  const auto dev = dir_.path() / "dev";
  std::filesystem::create_directories(dev);
  ::chmod(dev.c_str(), 0755);
  for (unsigned minor : {0U, 1U, 255U}) {
    const auto name = minor == 255 ? std::string("nvidiactl") : fmt::format("nvidia{}", minor);
    ASSERT_EQ(::mknod((dev / name).c_str(), S_IFCHR | 0666, makedev(195, minor)), 0);
    ::chmod((dev / name).c_str(), 0666);
  }
  Runner runner(Options(), clock_);
  // No driver stands behind the stand-ins: an allowed open reaches the
  // (absent) driver and fails with ENXIO, a denied one stops at the cgroup
  // with EPERM.
  StartOrder order = Order("gpus", fmt::format("for d in nvidia0 nvidiactl nvidia1; do "
                                               "cat {}/$d 2>&1 | sed 's/.*: //'; done",
                                               dev.string()));
  order.gpu_indices = {0};
  ASSERT_TRUE(runner.Start(order).has_value());
  auto [exit, log] = Finish(runner, "gpus");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(log, "No such device or address\nNo such device or address\nOperation not permitted\n");
}

TEST_F(ConfineTest, ARunWhoseIdentityCannotBeResolvedNeverStarts) {
  Runner runner(Options(), clock_);
  StartOrder unknown = Order("unknown", "echo ran");
  unknown.run_as = {};
  unknown.run_as.user = "no-such-berth-user";
  ASSERT_TRUE(runner.Start(unknown).has_value());
  auto [exit, log] = Finish(runner, "unknown");
  ASSERT_TRUE(exit.has_value());
  EXPECT_NE(exit->start_error.find("run identity user 'no-such-berth-user' of tenant team-a does "
                                   "not exist on node node-1"),
            std::string::npos)
      << exit->start_error;
  EXPECT_EQ(log.find("ran"), std::string::npos);

  StartOrder root = Order("root", "echo ran");
  root.run_as.uid = 0;
  root.run_as.gid = 0;
  ASSERT_TRUE(runner.Start(root).has_value());
  auto [r_exit, r_log] = Finish(runner, "root");
  ASSERT_TRUE(r_exit.has_value());
  EXPECT_NE(r_exit->start_error.find("allow_root: true"), std::string::npos) << r_exit->start_error;
  EXPECT_EQ(r_log.find("ran"), std::string::npos);
}

}  // namespace
}  // namespace berth::agent
