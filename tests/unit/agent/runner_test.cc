#include "agent/runner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "agent/atomic_file.h"
#include "test_util.h"

namespace berth::agent {
namespace {

using testing::TempDir;
using testing::WaitFor;

std::vector<std::string> Sh(const std::string& script) {
  return {"sh", "-c", script};
}

// Gone, or a zombie nobody has reaped yet (init in a container may be slow).
bool ProcessGone(std::int64_t pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return true;
  std::string stat = testing::Slurp("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

// Everything one run reported, gathered from Poll() events.
struct Seen {
  std::vector<RunEvent::Kind> kinds;
  std::string log;
  std::optional<RunState> started;
  std::optional<RunState> exited;
  std::vector<std::int64_t> checkpoints;  // kCheckpoint times, in order
};

class RunnerTest : public ::testing::Test {
 protected:
  RunnerOptions Options() {
    RunnerOptions o;
    o.data_dir = dir_.path();
    o.shim_path = BERTH_SHIM_PATH;
    o.node_name = "node-1";
    return o;
  }

  static StartOrder Order(std::string id, std::vector<std::string> command) {
    StartOrder o;
    o.run_id = std::move(id);
    o.job_id = 7;
    o.attempt = 2;
    o.command = std::move(command);
    o.grace_ms = 5000;
    return o;
  }

  void Drain(Runner& runner) {
    for (auto& ev : runner.Poll()) {
      Seen& s = seen_[ev.state.run_id];
      s.kinds.push_back(ev.kind);
      if (ev.kind == RunEvent::Kind::kLog) {
        EXPECT_EQ(ev.offset, s.log.size()) << "log bytes out of order";
        s.log += ev.data;
      } else if (ev.kind == RunEvent::Kind::kStarted) {
        s.started = ev.state;
      } else if (ev.kind == RunEvent::Kind::kCheckpoint) {
        s.checkpoints.push_back(ev.checkpoint_at_ms);
      } else {
        s.exited = ev.state;
      }
    }
  }

  // Polls until `run_id` has reported its exit (or the deadline passes).
  bool PollUntilExited(Runner& runner, const std::string& run_id) {
    return WaitFor([&] {
      Drain(runner);
      return seen_[run_id].exited.has_value();
    });
  }
  bool PollUntilLogHas(Runner& runner, const std::string& run_id, const std::string& text) {
    return WaitFor([&] {
      Drain(runner);
      return seen_[run_id].log.find(text) != std::string::npos;
    });
  }

  TempDir dir_;
  SystemClock system_clock_;
  std::map<std::string, Seen> seen_;
};

TEST_F(RunnerTest, ReportsStartThenLogThenExitAndSetsTheJobEnvironment) {
  Runner runner(Options(), system_clock_);
  StartOrder order = Order("r1", {"sh", "-c",
                                  "echo \"$CUDA_VISIBLE_DEVICES|$NVIDIA_VISIBLE_DEVICES|"
                                  "$BERTH_GPU_UUIDS|$BERTH_NODE|$BERTH_RUN_ID|$BERTH_ATTEMPT|"
                                  "$BERTH_JOB_ID|$(pwd)\"; exit 4"});
  order.gpu_indices = {2, 5};
  order.gpu_uuids = {"GPU-a", "GPU-b"};
  order.env = {{"BERTH_JOB_ID", "7"}, {"CUDA_VISIBLE_DEVICES", "overridden by the agent"}};
  auto state = runner.Start(order);
  ASSERT_TRUE(state.has_value()) << state.error().message;
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  const Seen& s = seen_["r1"];
  ASSERT_EQ(s.kinds.size(), 3u);
  EXPECT_EQ(s.kinds[0], RunEvent::Kind::kStarted);
  EXPECT_EQ(s.kinds[1], RunEvent::Kind::kLog);
  EXPECT_EQ(s.kinds[2], RunEvent::Kind::kExited);
  EXPECT_EQ(s.log, "2,5|2,5|GPU-a,GPU-b|node-1|r1|2|7|" + runner.WorkDir("r1").string() + "\n");
  EXPECT_GT(s.started->pid, 0);
  EXPECT_EQ(s.exited->phase, RunPhase::kExited);
  EXPECT_EQ(s.exited->exit->exit_code, 4);
  EXPECT_EQ(s.exited->exit->stopped_for, "");
  // Reported once.
  Drain(runner);
  EXPECT_EQ(seen_["r1"].kinds.size(), 3u);
}

TEST_F(RunnerTest, ASliceSeesItsGpuShareAndMemoryLimit) {
  Runner runner(Options(), system_clock_);
  StartOrder order = Order("r1", {"sh", "-c",
                                  "echo \"$CUDA_VISIBLE_DEVICES|$BERTH_GPU_SHARE|"
                                  "$BERTH_GPU_MEMORY_LIMIT|$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT|"
                                  "$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE\""});
  order.gpu_indices = {3};
  order.gpu_share_millis = 250;
  order.gpu_share_bytes = 20ULL << 30;
  ASSERT_TRUE(runner.Start(order).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  EXPECT_EQ(seen_["r1"].log, "3|0.25|21474836480|0=20480M|25\n");
}

TEST_F(RunnerTest, JobsReachTheOperatorsMpsDaemon) {
  // The agent was started with the MPS daemon's pipe directory.
  ::setenv("CUDA_MPS_PIPE_DIRECTORY", "/run/berth-mps", 1);  // NOLINT(concurrency-mt-unsafe)
  Runner runner(Options(), system_clock_);
  StartOrder order = Order("r1", {"sh", "-c", "echo \"$CUDA_MPS_PIPE_DIRECTORY\""});
  order.gpu_indices = {0};
  order.gpu_share_millis = 500;
  order.gpu_share_bytes = 40ULL << 30;
  ASSERT_TRUE(runner.Start(order).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  ::unsetenv("CUDA_MPS_PIPE_DIRECTORY");  // NOLINT(concurrency-mt-unsafe)
  EXPECT_EQ(seen_["r1"].log, "/run/berth-mps\n");
}

TEST_F(RunnerTest, WholeGpusSetNoShareLimits) {
  Runner runner(Options(), system_clock_);
  StartOrder order = Order(
      "r1", {"sh", "-c",
             "echo \"[${BERTH_GPU_SHARE-unset}][${CUDA_MPS_PINNED_DEVICE_MEM_LIMIT-unset}]\""});
  order.gpu_indices = {0};
  ASSERT_TRUE(runner.Start(order).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  EXPECT_EQ(seen_["r1"].log, "[unset][unset]\n");
}

TEST_F(RunnerTest, NoGpusMeansEmptyCudaDevicesAndVoidNvidiaDevices) {
  Runner runner(Options(), system_clock_);
  ASSERT_TRUE(runner
                  .Start(Order("r1", {"sh", "-c",
                                      "echo \"[${CUDA_VISIBLE_DEVICES-unset}]"
                                      "[$NVIDIA_VISIBLE_DEVICES]\""}))
                  .has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  EXPECT_EQ(seen_["r1"].log, "[][void]\n");
}

TEST_F(RunnerTest, RestartedRunnerReattachesAndNeverStartsTwice) {
  auto a = std::make_unique<Runner>(Options(), system_clock_);
  ASSERT_TRUE(a->Start(Order("r1", {"sh", "-c", "echo started; sleep 1"})).has_value());
  ASSERT_TRUE(WaitFor([&] {
    Drain(*a);
    return seen_["r1"].started.has_value();
  }));
  std::int64_t pid = seen_["r1"].started->pid;
  a.reset();  // the "agent" dies; the job does not

  Runner b(Options(), system_clock_);
  auto runs = b.Scan();
  ASSERT_TRUE(runs.has_value()) << runs.error().message;
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].run_id, "r1");
  EXPECT_EQ((*runs)[0].phase, RunPhase::kRunning);
  EXPECT_EQ((*runs)[0].pid, pid);
  EXPECT_EQ(::kill(static_cast<pid_t>(pid), 0), 0);

  // berthd re-sends the order: same run, no new process.
  auto again = b.Start(Order("r1", {"sh", "-c", "echo started; sleep 1"}));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->pid, pid);

  seen_.clear();
  ASSERT_TRUE(PollUntilExited(b, "r1"));
  const Seen& s = seen_["r1"];
  EXPECT_EQ(s.exited->exit->exit_code, 0);
  EXPECT_EQ(s.exited->exit->signal, 0);
  EXPECT_EQ(s.exited->pid, pid);
  EXPECT_EQ(s.log, "started\n");  // B ships the whole log, which says one start

  // After an exit, Start of the same id still runs nothing.
  auto after = b.Start(Order("r1", {"sh", "-c", "echo started; sleep 1"}));
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->phase, RunPhase::kExited);
  Drain(b);
  EXPECT_EQ(testing::Slurp(b.RunDir("r1") / "output.log"), "started\n");
}

TEST_F(RunnerTest, ExitOnDiskIsReportedAfterRestartAndAckDeletesTheRun) {
  {
    Runner a(Options(), system_clock_);
    ASSERT_TRUE(a.Start(Order("r1", {"sh", "-c", "echo bye; exit 5"})).has_value());
    ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(a.RunDir("r1") / "exit.json"); }));
  }
  Runner b(Options(), system_clock_);
  ASSERT_TRUE(b.Scan().has_value());
  // Its log has not been shipped by this runner: registration shows it
  // running, and the exit follows the log.
  auto report = b.ReportAll();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].phase, RunPhase::kRunning);
  ASSERT_TRUE(PollUntilExited(b, "r1"));
  EXPECT_EQ(seen_["r1"].log, "bye\n");
  EXPECT_EQ(seen_["r1"].exited->exit->exit_code, 5);
  EXPECT_EQ(seen_["r1"].kinds.front(), RunEvent::Kind::kLog);  // start already reported
  // A reconnection: registration still shows it running until berthd says
  // how much log it holds. Holding all of it, only the exit is sent again.
  report = b.ReportAll();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].phase, RunPhase::kRunning);
  b.SetLogOffset("r1", 4);
  seen_.clear();
  Drain(b);
  EXPECT_EQ(seen_["r1"].kinds, std::vector<RunEvent::Kind>{RunEvent::Kind::kExited});
  // Another reconnection where berthd lost the tail: the tail goes again,
  // then the exit.
  (void)b.ReportAll();
  b.SetLogOffset("r1", 2);
  seen_.clear();
  seen_["r1"].log = "by";  // what berthd holds
  Drain(b);
  EXPECT_EQ(seen_["r1"].log, "bye\n");
  EXPECT_EQ(seen_["r1"].kinds,
            (std::vector<RunEvent::Kind>{RunEvent::Kind::kLog, RunEvent::Kind::kExited}));

  ASSERT_TRUE(b.Ack("r1").has_value());
  EXPECT_FALSE(std::filesystem::exists(b.RunDir("r1")));
  EXPECT_FALSE(b.Get("r1").has_value());
  EXPECT_TRUE(b.Ack("r1").has_value());  // acks may repeat
}

TEST_F(RunnerTest, ARunWhoseExitWasAcknowledgedIsNeverStartedAgain) {
  // berthd changed hands while the run ended: the new leader settled the
  // exit the agent reported, and a start order read before that comes
  // again. The run ran once; the repeat is refused and nothing starts.
  const auto marker = dir_.path() / "ran";
  Runner runner(Options(), system_clock_);
  const std::string script = "echo once >> " + marker.string();
  ASSERT_TRUE(runner.Start(Order("r1", {"sh", "-c", script})).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  ASSERT_TRUE(runner.Ack("r1").has_value());
  auto again = runner.Start(Order("r1", {"sh", "-c", script}));
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, Code::kFailedPrecondition);
  EXPECT_NE(again.error().message.find("started once"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(runner.RunDir("r1")));
  // A restarted agent knows it too: the mark is on disk.
  Runner restarted(Options(), system_clock_);
  ASSERT_TRUE(restarted.Scan().has_value());
  EXPECT_FALSE(restarted.Start(Order("r1", {"sh", "-c", script})).has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(testing::Slurp(marker), "once\n");
}

TEST_F(RunnerTest, AckOfARunningRunIsRefused) {
  Runner runner(Options(), system_clock_);
  ASSERT_TRUE(runner.Start(Order("r1", {"sleep", "5"})).has_value());
  auto ack = runner.Ack("r1");
  ASSERT_FALSE(ack.has_value());
  EXPECT_EQ(ack.error().code, Code::kFailedPrecondition);
  ASSERT_TRUE(runner.Stop("r1", "cancelled", 0).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
}

TEST_F(RunnerTest, StopSendsTermToTheGroupAndJobMayExitCleanly) {
  Runner runner(Options(), system_clock_);
  ASSERT_TRUE(runner
                  .Start(Order("r1", {"sh", "-c",
                                      "trap 'echo got-term; exit 0' TERM; echo ready; "
                                      "while :; do sleep 0.05; done"}))
                  .has_value());
  ASSERT_TRUE(PollUntilLogHas(runner, "r1", "ready"));
  ASSERT_TRUE(runner.Stop("r1", "cancelled", 10'000).has_value());
  ASSERT_TRUE(std::filesystem::exists(runner.RunDir("r1") / "stop.json"));
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  const auto& exit = *seen_["r1"].exited->exit;
  EXPECT_EQ(exit.exit_code, 0);
  EXPECT_EQ(exit.signal, 0);
  EXPECT_EQ(exit.stopped_for, "cancelled");
  EXPECT_NE(seen_["r1"].log.find("got-term"), std::string::npos);
}

TEST_F(RunnerTest, JobIgnoringTermIsKilledOnlyAfterGrace) {
  ManualClock clock(SystemClock().NowMs());
  Runner runner(Options(), clock);
  ASSERT_TRUE(runner
                  .Start(Order("r1", {"sh", "-c",
                                      "trap '' TERM; echo ready; "
                                      "while :; do sleep 0.05; done"}))
                  .has_value());
  ASSERT_TRUE(PollUntilLogHas(runner, "r1", "ready"));
  ASSERT_TRUE(runner.Stop("r1", "cancelled", 5'000).has_value());
  clock.Advance(4'000);
  EXPECT_FALSE(WaitFor(
      [&] {
        Drain(runner);
        return seen_["r1"].exited.has_value();
      },
      std::chrono::milliseconds(300)))
      << "killed before its grace ran out";
  clock.Advance(1'001);
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  EXPECT_EQ(seen_["r1"].exited->exit->signal, SIGKILL);
  EXPECT_EQ(seen_["r1"].exited->exit->stopped_for, "cancelled");
}

TEST_F(RunnerTest, GraceDeadlineSurvivesARestart) {
  ManualClock clock(SystemClock().NowMs());
  auto a = std::make_unique<Runner>(Options(), clock);
  ASSERT_TRUE(
      a->Start(Order("r1", {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}))
          .has_value());
  ASSERT_TRUE(PollUntilLogHas(*a, "r1", "ready"));
  ASSERT_TRUE(a->Stop("r1", "cancelled", 5'000).has_value());
  a.reset();
  Runner b(Options(), clock);
  ASSERT_TRUE(b.Scan().has_value());
  clock.Advance(5'001);
  seen_.clear();
  ASSERT_TRUE(PollUntilExited(b, "r1"));
  EXPECT_EQ(seen_["r1"].exited->exit->signal, SIGKILL);
  EXPECT_EQ(seen_["r1"].exited->exit->stopped_for, "cancelled");
}

TEST_F(RunnerTest, MaxRuntimeIsEnforced) {
  ManualClock clock(SystemClock().NowMs());
  Runner runner(Options(), clock);
  StartOrder order = Order("r1", {"sleep", "30"});
  order.max_runtime_ms = 60'000;
  order.grace_ms = 1'000;
  ASSERT_TRUE(runner.Start(order).has_value());
  ASSERT_TRUE(WaitFor([&] {
    Drain(runner);
    return seen_["r1"].started.has_value();
  }));
  Drain(runner);
  EXPECT_FALSE(seen_["r1"].exited.has_value());
  clock.Advance(61'000);
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  EXPECT_EQ(seen_["r1"].exited->exit->signal, SIGTERM);
  EXPECT_EQ(seen_["r1"].exited->exit->stopped_for, "max_runtime");
}

TEST_F(RunnerTest, LostShimIsReportedAndItsJobEnded) {
  Runner runner(Options(), system_clock_);
  ASSERT_TRUE(runner.Start(Order("r1", {"sleep", "30"})).has_value());
  ASSERT_TRUE(WaitFor([&] {
    Drain(runner);
    return seen_["r1"].started.has_value();
  }));
  auto pid = ParsePidRecord(ReadWholeFile((runner.RunDir("r1") / "pid.json").string()).value());
  ASSERT_TRUE(pid.has_value());
  ASSERT_EQ(::kill(static_cast<pid_t>(pid->shim_pid), SIGKILL), 0);
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  const auto& exit = *seen_["r1"].exited->exit;
  EXPECT_EQ(exit.exit_code, -1);
  EXPECT_EQ(exit.start_error, "berth-shim lost; exit status unknown");
  // The orphaned job was ended rather than left running unaccounted for.
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(pid->pid); }));
}

TEST_F(RunnerTest, CommandNotFoundExitsWithStartError) {
  Runner runner(Options(), system_clock_);
  ASSERT_TRUE(runner.Start(Order("r1", {"berth-no-such-command"})).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  const auto& exit = *seen_["r1"].exited->exit;
  EXPECT_EQ(exit.exit_code, 127);
  EXPECT_NE(exit.start_error.find("No such file or directory"), std::string::npos);
}

TEST_F(RunnerTest, MissingShimIsAStartErrorNotAHang) {
  RunnerOptions o = Options();
  o.shim_path = dir_.path() / "no-such-shim";
  Runner runner(o, system_clock_);
  ASSERT_TRUE(runner.Start(Order("r1", {"true"})).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  EXPECT_EQ(seen_["r1"].exited->exit->exit_code, 126);
  EXPECT_NE(seen_["r1"].exited->exit->start_error.find("cannot start berth-shim"),
            std::string::npos);
}

TEST_F(RunnerTest, RejectsRunIdsThatAreNotPlainNames) {
  Runner runner(Options(), system_clock_);
  for (const char* bad : {"", "../etc", ".hidden", "a/b"}) {
    auto r = runner.Start(Order(bad, {"true"}));
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().field, "run_id");
  }
}

TEST_F(RunnerTest, LogsLargerThanAChunkArriveWholeAndInOrder) {
  Runner runner(Options(), system_clock_);
  // 200,000 bytes: more than three 64 KiB chunks.
  ASSERT_TRUE(
      runner.Start(Order("r1", {"sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x"})).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  EXPECT_EQ(seen_["r1"].log, std::string(200000, 'x'));
  EXPECT_EQ(seen_["r1"].kinds.back(), RunEvent::Kind::kExited);
}

// --- the checkpoint handshake ---

// A job that saves on SIGUSR1 and would fail loudly on SIGTERM: only the
// run's own stop signal lets it exit 0.
const char* const kSavesOnUsr1 =
    "trap 'echo saved; exit 0' USR1; trap 'echo wrong-signal; exit 3' TERM; echo ready; "
    "while :; do sleep 0.05; done";

TEST_F(RunnerTest, StopSendsTheRunsStopSignalAndAnExitWithinGraceIsClean) {
  Runner runner(Options(), system_clock_);
  StartOrder order = Order("r1", Sh(kSavesOnUsr1));
  order.stop_signal = "SIGUSR1";
  ASSERT_TRUE(runner.Start(order).has_value());
  ASSERT_TRUE(PollUntilLogHas(runner, "r1", "ready"));
  ASSERT_TRUE(runner.Stop("r1", "preempted", 10'000).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  const auto& exit = *seen_["r1"].exited->exit;
  EXPECT_NE(seen_["r1"].log.find("saved"), std::string::npos) << seen_["r1"].log;
  EXPECT_EQ(exit.exit_code, 0);
  EXPECT_EQ(exit.stopped_for, "preempted");
  ASSERT_TRUE(exit.clean_stop.has_value());
  EXPECT_TRUE(*exit.clean_stop);
}

TEST_F(RunnerTest, AJobIgnoringItsStopSignalIsKilledAfterItsGraceAndIsNotClean) {
  ManualClock clock(SystemClock().NowMs());
  Runner runner(Options(), clock);
  StartOrder order = Order("r1", Sh("trap '' USR2; echo ready; while :; do sleep 0.05; done"));
  order.stop_signal = "SIGUSR2";
  order.grace_ms = 3'000;
  ASSERT_TRUE(runner.Start(order).has_value());
  ASSERT_TRUE(PollUntilLogHas(runner, "r1", "ready"));
  // The order's grace (from the job's checkpoint block) wins over the stop's.
  ASSERT_TRUE(runner.Stop("r1", "preempted", 60'000).has_value());
  clock.Advance(2'000);
  EXPECT_FALSE(WaitFor(
      [&] {
        Drain(runner);
        return seen_["r1"].exited.has_value();
      },
      std::chrono::milliseconds(300)));
  clock.Advance(1'001);
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  const auto& exit = *seen_["r1"].exited->exit;
  EXPECT_EQ(exit.signal, SIGKILL);
  ASSERT_TRUE(exit.clean_stop.has_value());
  EXPECT_FALSE(*exit.clean_stop);
}

TEST_F(RunnerTest, AnUnstoppedRunSaysNothingAboutACleanStop) {
  Runner runner(Options(), system_clock_);
  ASSERT_TRUE(runner.Start(Order("r1", Sh("exit 0"))).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  EXPECT_FALSE(seen_["r1"].exited->exit->clean_stop.has_value());
}

TEST_F(RunnerTest, TheKillVerdictSurvivesAnAgentRestart) {
  ManualClock clock(SystemClock().NowMs());
  auto a = std::make_unique<Runner>(Options(), clock);
  StartOrder order = Order("r1", Sh("trap '' TERM; echo ready; while :; do sleep 0.05; done"));
  order.grace_ms = 1'000;
  ASSERT_TRUE(a->Start(order).has_value());
  ASSERT_TRUE(PollUntilLogHas(*a, "r1", "ready"));
  ASSERT_TRUE(a->Stop("r1", "cancelled", 1'000).has_value());
  clock.Advance(1'001);
  a->Supervise();  // records the kill, then sends it
  auto stop = ParseStopRecord(ReadWholeFile((a->RunDir("r1") / "stop.json").string()).value());
  ASSERT_TRUE(stop.has_value());
  EXPECT_GT(stop->killed_at_ms, 0);
  a.reset();
  Runner b(Options(), clock);
  ASSERT_TRUE(b.Scan().has_value());
  seen_.clear();
  ASSERT_TRUE(PollUntilExited(b, "r1"));
  ASSERT_TRUE(seen_["r1"].exited->exit->clean_stop.has_value());
  EXPECT_FALSE(*seen_["r1"].exited->exit->clean_stop);
}

TEST_F(RunnerTest, ARestartedAgentResendsTheRunsOwnStopSignal) {
  ManualClock clock(SystemClock().NowMs());
  auto a = std::make_unique<Runner>(Options(), clock);
  // Saves on the second SIGUSR1 only: the first stands for a handshake that
  // an agent restart interrupted. Any SIGTERM makes it exit 3.
  StartOrder order = Order(
      "r1", Sh("n=0; trap 'n=$((n+1)); echo usr1-$n; [ $n -ge 2 ] && exit 0' USR1; "
               "trap 'echo wrong-signal; exit 3' TERM; echo ready; while :; do sleep 0.05; done"));
  order.stop_signal = "SIGUSR1";
  ASSERT_TRUE(a->Start(order).has_value());
  ASSERT_TRUE(PollUntilLogHas(*a, "r1", "ready"));
  ASSERT_TRUE(a->Stop("r1", "preempted", 5'000).has_value());
  ASSERT_TRUE(PollUntilLogHas(*a, "r1", "usr1-1"));
  a.reset();
  Runner b(Options(), clock);
  ASSERT_TRUE(b.Scan().has_value());
  seen_.clear();
  ASSERT_TRUE(PollUntilExited(b, "r1"));
  const auto& exit = *seen_["r1"].exited->exit;
  EXPECT_EQ(exit.exit_code, 0) << seen_["r1"].log;
  EXPECT_TRUE(exit.clean_stop.value_or(false));
}

TEST_F(RunnerTest, ReportsEachNewerCheckpointFileTimeAndTheLastOneAtExit) {
  Runner runner(Options(), system_clock_);
  const auto file = dir_.path() / "ckpt" / "done";
  std::filesystem::create_directories(file.parent_path());
  const std::int64_t base_s = SystemClock().NowMs() / 1000 + 100;
  // Two checkpoints with known mtimes; the second once the test says so.
  // The first appears by a rename: `touch -d` of a missing file creates it
  // (mtime now) before it sets the time, and the runner may look between.
  const std::string script = fmt::format(
      "touch -d @{0} {2}.tmp; mv {2}.tmp {2}; echo one; while [ ! -e {3} ]; do sleep 0.05; done; "
      "touch -d @{1} {2}; echo two; sleep 1.2",
      base_s, base_s + 7, file.string(), (dir_.path() / "go").string());
  StartOrder order = Order("r1", Sh(script));
  order.checkpoint_file = file.string();
  ASSERT_TRUE(runner.Start(order).has_value());
  ASSERT_TRUE(WaitFor([&] {
    Drain(runner);
    return !seen_["r1"].checkpoints.empty();
  }));
  EXPECT_EQ(seen_["r1"].checkpoints.front(), base_s * 1000);
  testing::WriteText(dir_.path() / "go", "");
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  ASSERT_EQ(seen_["r1"].checkpoints.size(), 2u);
  EXPECT_EQ(seen_["r1"].checkpoints.back(), (base_s + 7) * 1000);
  EXPECT_EQ(seen_["r1"].exited->exit->last_checkpoint_ms, (base_s + 7) * 1000);
  // Checkpoints come before the exit.
  EXPECT_EQ(seen_["r1"].kinds.back(), RunEvent::Kind::kExited);
}

TEST_F(RunnerTest, APreviousAttemptsCheckpointIsNotThisRuns) {
  Runner runner(Options(), system_clock_);
  const auto file = dir_.path() / "done";
  testing::WriteText(file, "");
  std::filesystem::last_write_time(
      file, std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
  StartOrder order = Order("r1", Sh("sleep 0.3"));
  order.checkpoint_file = file.string();
  ASSERT_TRUE(runner.Start(order).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  EXPECT_TRUE(seen_["r1"].checkpoints.empty());
  EXPECT_EQ(seen_["r1"].exited->exit->last_checkpoint_ms, 0);
}

// --- containers ---

TEST_F(RunnerTest, AnImageWithoutPodmanFailsAtOnceWithWhatToDo) {
  RunnerOptions o = Options();
  o.search_path = (dir_.path() / "empty-bin").string() + ":/nonexistent";
  std::filesystem::create_directories(dir_.path() / "empty-bin");
  Runner runner(o, system_clock_);
  StartOrder order = Order("r1", {"true"});
  order.image = "docker.io/x:1";
  ASSERT_TRUE(runner.Start(order).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  const auto& exit = *seen_["r1"].exited->exit;
  EXPECT_EQ(exit.exit_code, 127);
  EXPECT_EQ(exit.start_error,
            "image docker.io/x:1 needs a container runtime, but podman is not installed on node "
            "node-1; install podman there or remove `image` from the job spec");
  EXPECT_FALSE(seen_["r1"].started.has_value());
}

}  // namespace
}  // namespace berth::agent

namespace berth::agent {
namespace {

TEST(RunnerMounts, AContainerMountThatLeadsThroughASymlinkIsRefusedBeforePodmanRuns) {
  testing::TempDir dir;
  SystemClock clock;
  RunnerOptions o;
  o.data_dir = dir.path() / "agent";
  o.shim_path = BERTH_SHIM_PATH;
  o.node_name = "node-1";
  Runner runner(o, clock);
  // A job of the tenant planted a link inside its granted root, pointing
  // out of it; the next container job names the link as its mount.
  std::filesystem::create_directories(dir.path() / "granted");
  std::filesystem::create_symlink("/etc", dir.path() / "granted" / "ckpt");
  StartOrder order;
  order.run_id = "linked";
  order.command = {"true"};
  order.image = "localhost/berth-test/busybox:2";
  order.mounts = {{(dir.path() / "granted" / "ckpt" / "sub").string(), false}};
  ASSERT_TRUE(runner.Start(order).has_value());
  std::optional<RunState> exit;
  ASSERT_TRUE(testing::WaitFor([&] {
    for (auto& ev : runner.Poll()) {
      if (ev.kind == RunEvent::Kind::kExited) exit = ev.state;
    }
    return exit.has_value();
  }));
  ASSERT_TRUE(exit->exit.has_value());
  EXPECT_NE(exit->exit->start_error.find("leads through a symlink to /etc/sub"), std::string::npos)
      << exit->exit->start_error;
}

TEST(RunnerMounts, AJobRootSomeoneElseMadeFirstIsNotClaimed) {
  testing::TempDir dir;
  const auto fresh = dir.path() / "fresh";
  EXPECT_EQ(ClaimJobRoot(fresh), "");
  struct stat st {};
  ASSERT_EQ(::lstat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711U);
  EXPECT_EQ(ClaimJobRoot(fresh), "");  // ours already: claimed again
  // A symlink planted where the agent's root will be.
  struct stat etc_before {};
  ASSERT_EQ(::lstat("/etc", &etc_before), 0);
  std::filesystem::create_symlink("/etc", dir.path() / "planted");
  EXPECT_NE(ClaimJobRoot(dir.path() / "planted").find("not a directory of its own"),
            std::string::npos);
  ASSERT_EQ(::lstat("/etc", &st), 0);
  EXPECT_EQ(st.st_mode, etc_before.st_mode) << "the link's target was changed";
  // A directory others may write into.
  const auto open = dir.path() / "open";
  std::filesystem::create_directories(open);
  ::chmod(open.c_str(), 01777);
  EXPECT_NE(ClaimJobRoot(open).find("not to root alone"), std::string::npos);
  if (::geteuid() == 0) {
    const auto theirs = dir.path() / "theirs";
    std::filesystem::create_directories(theirs);
    ASSERT_EQ(::chown(theirs.c_str(), 2000900001, 2000900001), 0);
    EXPECT_NE(ClaimJobRoot(theirs).find("belongs to uid 2000900001"), std::string::npos);
  }
}

}  // namespace
}  // namespace berth::agent
