// Container runs with the real podman: a pull that cannot succeed fails the
// run at once, and a job in a container gets its environment, its stop
// signal and its checkpoint directory. podman runs with the
// configuration Berth ships (deploy/podman/containers.conf), given as an
// operator gives it (RunnerOptions.podman_conf, berth-agent --podman-conf).
// Skipped where podman is not installed, or cannot run containers on this
// host (the skip says why). The image is made locally from busybox-static
// (no registry needed).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "agent/atomic_file.h"
#include "agent/runner.h"
#include "test_util.h"

namespace berth::agent {
namespace {

using testing::TempDir;
using testing::WaitFor;

// Every busybox applet, linked into /bin (tag 2: tag 1 had only a few).
constexpr const char* kImage = "localhost/berth-test/busybox:2";

std::string Podman() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"}) {
    std::string p = std::string(dir) + "/podman";
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

// podman as the runner runs it: with Berth's containers.conf.
std::string PodmanCommand() {
  return "env CONTAINERS_CONF='" BERTH_PODMAN_CONF "' podman";
}

int Shell(const std::string& cmd) {
  return std::system(cmd.c_str());  // NOLINT(concurrency-mt-unsafe): test setup
}

// Imports a busybox root filesystem as kImage unless it exists; then checks
// that a container can actually run here. Returns why not, or "".
std::string PrepareImage(const std::filesystem::path& scratch) {
  const std::string podman = PodmanCommand();
  if (Shell(podman + " image exists " + kImage) != 0) {
    if (::access("/bin/busybox", X_OK) != 0)
      return "no /bin/busybox (busybox-static) to build an image from";
    auto root = scratch / "rootfs";
    std::filesystem::create_directories(root / "bin");
    const std::string bin = (root / "bin").string();
    std::string cmd =
        "cp /bin/busybox " + bin +
        "/ && for c in $(/bin/busybox --list); do [ $c = " + "busybox ] || ln -s busybox " + bin +
        "/$c; done && tar -C " + root.string() + " -cf " + (scratch / "rootfs.tar").string() +
        " . && " + podman + " import -q " + (scratch / "rootfs.tar").string() + " " + kImage +
        " >/dev/null";
    if (Shell(cmd) != 0) return "podman import of a busybox rootfs failed";
  }
  if (Shell("timeout 60 " + podman + " run --rm " + kImage + " true >/dev/null 2>&1") != 0) {
    return "podman cannot run containers on this host (see docs/operations.md, containers)";
  }
  return "";
}

class ContainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Podman().empty()) GTEST_SKIP() << "podman is not installed";
  }

  RunnerOptions Options() {
    RunnerOptions o;
    o.data_dir = dir_.path() / "data";
    o.shim_path = BERTH_SHIM_PATH;
    o.node_name = "node-1";
    o.pull_timeout_ms = 60'000;
    o.podman_conf = BERTH_PODMAN_CONF;
    return o;
  }

  // Polls until `run_id` exited; gathers its log and checkpoints.
  bool PollUntilExited(Runner& runner, const std::string& run_id,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    return WaitFor(
        [&] {
          for (auto& ev : runner.Poll()) {
            if (ev.state.run_id != run_id) continue;
            if (ev.kind == RunEvent::Kind::kLog) log_ += ev.data;
            if (ev.kind == RunEvent::Kind::kStarted) started_ = true;
            if (ev.kind == RunEvent::Kind::kCheckpoint) checkpoints_.push_back(ev.checkpoint_at_ms);
            if (ev.kind == RunEvent::Kind::kExited) exit_ = ev.state.exit;
          }
          return exit_.has_value();
        },
        timeout);
  }

  TempDir dir_;
  SystemClock clock_;
  std::string log_;
  bool started_ = false;
  std::vector<std::int64_t> checkpoints_;
  std::optional<RunExit> exit_;
};

TEST_F(ContainerTest, AnImageThatCannotBePulledFailsTheRunAtOnce) {
  Runner runner(Options(), clock_);
  StartOrder order;
  order.run_id = "r1";
  order.command = {"true"};
  order.image = "registry.invalid/berth/none:1";
  ASSERT_TRUE(runner.Start(order).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
  EXPECT_FALSE(started_);
  EXPECT_EQ(exit_->exit_code, 125);
  const std::string prefix = "could not pull image registry.invalid/berth/none:1: ";
  ASSERT_TRUE(exit_->start_error.starts_with(prefix)) << exit_->start_error;
  // podman's own last word on why, not a generic one.
  const std::string why = exit_->start_error.substr(prefix.size());
  EXPECT_FALSE(why.empty());
  EXPECT_NE(why, "no output");
  EXPECT_NE(log_.find("berth: could not pull image"), std::string::npos) << log_;
}

TEST_F(ContainerTest, AJobRunsInItsImageAndCheckpointsOnItsStopSignal) {
  if (std::string why = PrepareImage(dir_.path()); !why.empty()) GTEST_SKIP() << why;
  Runner runner(Options(), clock_);
  const auto ckpt = dir_.path() / "ckpt";
  StartOrder order;
  order.run_id = "r1";
  order.attempt = 1;
  order.gpu_indices = {1, 3};
  order.env = {{"BERTH_CHECKPOINT_DIR", ckpt.string()},
               {"BERTH_CHECKPOINT_FILE", (ckpt / "done").string()}};
  order.checkpoint_file = (ckpt / "done").string();
  order.stop_signal = "SIGUSR1";
  order.grace_ms = 20'000;
  order.image = kImage;
  // busybox's own sh as PID 1 in the container: it runs the trap.
  order.command = {"/bin/sh", "-c",
                   "trap 'echo state > $BERTH_CHECKPOINT_DIR/state; touch $BERTH_CHECKPOINT_FILE; "
                   "echo saved; exit 0' USR1; echo \"in $BERTH_RUN_ID gpus $CUDA_VISIBLE_DEVICES "
                   "path $PATH\"; while true; do sleep 0.1; done"};
  ASSERT_TRUE(runner.Start(order).has_value());
  ASSERT_TRUE(WaitFor(
      [&] {
        for (auto& ev : runner.Poll()) {
          if (ev.kind == RunEvent::Kind::kLog) log_ += ev.data;
        }
        return log_.find("in r1") != std::string::npos;
      },
      std::chrono::seconds(60)))
      << log_;
  // The image's environment, not the host's PATH; the GPUs as for a plain
  // process (simulated GPUs are not CDI devices).
  EXPECT_NE(log_.find("in r1 gpus 1,3 path "), std::string::npos) << log_;
  EXPECT_EQ(log_.find(std::getenv("PATH")), std::string::npos) << log_;
  ASSERT_TRUE(runner.Stop("r1", "preempted", 20'000).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "r1")) << log_;
  EXPECT_NE(log_.find("saved"), std::string::npos) << log_;
  EXPECT_EQ(exit_->exit_code, 0) << exit_->start_error;
  EXPECT_TRUE(exit_->clean_stop.value_or(false));
  EXPECT_EQ(testing::Slurp(ckpt / "state"), "state\n");
  EXPECT_GT(exit_->last_checkpoint_ms, 0);
  // The container is gone with the run.
  EXPECT_NE(Shell(PodmanCommand() + " container exists berth-r1"), 0);
}

// Stopped the instant the job says it is ready: podman before 4.4 proxies
// signals sent to `podman run` only some time after the container started,
// and dropped this one about one time in three (the flake this guards). The
// stop signal goes through `podman kill`, so every stop is heard.
TEST_F(ContainerTest, AStopRightAfterTheJobIsReadyStillReachesItsTrap) {
  if (std::string why = PrepareImage(dir_.path()); !why.empty()) GTEST_SKIP() << why;
  Runner runner(Options(), clock_);
  for (int i = 0; i < 6; ++i) {
    const std::string run_id = "quick-" + std::to_string(i);
    StartOrder order;
    order.run_id = run_id;
    order.stop_signal = "SIGUSR1";
    order.grace_ms = 5'000;
    order.image = kImage;
    order.command = {"/bin/sh", "-c",
                     "trap 'echo saved; exit 0' USR1; echo ready; while true; do sleep 0.1; done"};
    ASSERT_TRUE(runner.Start(order).has_value());
    log_.clear();
    exit_.reset();
    // 1 ms naps, not 10: the stop goes out as soon as the line is in the log.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (log_.find("ready") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      for (auto& ev : runner.Poll()) {
        if (ev.state.run_id == run_id && ev.kind == RunEvent::Kind::kLog) log_ += ev.data;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_NE(log_.find("ready"), std::string::npos) << log_;
    ASSERT_TRUE(runner.Stop(run_id, "preempted", 5'000).has_value());
    ASSERT_TRUE(PollUntilExited(runner, run_id)) << log_;
    EXPECT_NE(log_.find("saved"), std::string::npos) << "attempt " << i << ": " << log_;
    EXPECT_EQ(exit_->exit_code, 0) << "attempt " << i;
    EXPECT_TRUE(exit_->clean_stop.value_or(false)) << "attempt " << i;
  }
}

TEST_F(ContainerTest, OnNvidiaNodesTheGpusArePassedAsCdiDevicesAndNumberedFromZeroInside) {
  RunnerOptions o = Options();
  o.cdi_gpus = true;
  Runner runner(o, clock_);
  StartOrder order;
  order.run_id = "r1";
  order.gpu_indices = {2, 5};
  order.gpu_uuids = {"GPU-a", "GPU-b"};
  order.working_dir = "/work";
  order.env = {{"FOO", "bar"}};
  // Never pulled: the image does not exist, and the run fails; what podman
  // was asked to run is in the run's spec.json.
  order.image = "registry.invalid/berth/cuda:1";
  order.command = {"python", "train.py"};
  ASSERT_TRUE(runner.Start(order).has_value());
  auto text = ReadWholeFile((runner.RunDir("r1") / "spec.json").string());
  ASSERT_TRUE(text.has_value());
  auto spec = ParseShimSpec(*text);
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  const auto& argv = spec->command;
  auto has = [&](const std::string& a, const std::string& b) {
    for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == a && argv[i + 1] == b) return true;
    }
    return false;
  };
  ASSERT_FALSE(argv.empty());
  EXPECT_EQ(argv[0], Podman());
  EXPECT_EQ(argv[1], "run");
  EXPECT_TRUE(has("--name", "berth-r1"));
  EXPECT_TRUE(has("--device", "nvidia.com/gpu=2"));
  EXPECT_TRUE(has("--device", "nvidia.com/gpu=5"));
  EXPECT_TRUE(has("-e", "CUDA_VISIBLE_DEVICES=0,1"));
  EXPECT_TRUE(has("-e", "BERTH_GPU_UUIDS=GPU-a,GPU-b"));
  EXPECT_TRUE(has("-e", "FOO=bar"));
  EXPECT_TRUE(has("-w", "/work"));
  EXPECT_TRUE(std::none_of(argv.begin(), argv.end(), [](const std::string& a) {
    return a.starts_with("NVIDIA_VISIBLE_DEVICES=");
  }));
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(argv.end() - 3, argv.end()),
            (std::vector<std::string>{"registry.invalid/berth/cuda:1", "python", "train.py"}));
  EXPECT_EQ(spec->image, "registry.invalid/berth/cuda:1");
  // podman gets Berth's configuration, as every podman of the run does.
  EXPECT_EQ(spec->env["CONTAINERS_CONF"], BERTH_PODMAN_CONF);
  EXPECT_EQ(spec->container_name, "berth-r1");
  ASSERT_TRUE(PollUntilExited(runner, "r1"));
}

}  // namespace
}  // namespace berth::agent
