// Container runs with the real podman: a pull that cannot succeed fails the
// run at once, and a job in a container gets its environment, its stop
// signal and its checkpoint directory. On a confining (root) runner, a
// container job runs as its tenant's identity with no capabilities, sees
// nothing of the host it was not given, writes its checkpoint mount only
// when its identity owns it, is held to its memory limit, and leaves no
// process or container behind when cancelled. podman runs with the
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
#include <array>
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

// What `cmd` printed on stdout.
std::string Output(const std::string& cmd) {
  std::string out;
  if (FILE* f = ::popen(cmd.c_str(), "r")) {  // NOLINT(cert-env33-c): test setup
    char buf[512];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
    ::pclose(f);
  }
  return out;
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

// The sandbox of a container job on a confining (root) agent. Identities
// stay below 2^31: podman refuses larger ids (the last test).
constexpr std::uint32_t kUidA = 2'000'900'001U;
constexpr std::uint32_t kUidB = 2'000'900'002U;

class ConfinedContainerTest : public ContainerTest {
 protected:
  void SetUp() override {
    ContainerTest::SetUp();
    if (IsSkipped()) return;
    if (::geteuid() != 0) GTEST_SKIP() << "confinement needs root (run identities)";
    host_ = DetectCgroups();
    if (host_.version == CgroupVersion::kNone) GTEST_SKIP() << "no usable cgroups on this host";
    if (std::string why = PrepareImage(dir_.path()); !why.empty()) GTEST_SKIP() << why;
  }

  RunnerOptions Confined() {
    RunnerOptions o = Options();
    o.confine = true;
    o.cgroups = host_;
    o.cgroup_parent = "berth-test-" + std::to_string(::getpid());
    return o;
  }

  static StartOrder Order(std::string id, std::string script, std::uint32_t uid = kUidA) {
    StartOrder o;
    o.run_id = std::move(id);
    o.job_id = 1;
    o.attempt = 1;
    o.image = kImage;
    o.command = {"/bin/sh", "-c", std::move(script)};
    o.grace_ms = 200;
    o.tenant = uid == kUidA ? "team-a" : "team-b";
    o.run_as.numeric = true;
    o.run_as.uid = uid;
    o.run_as.gid = uid;
    return o;
  }

  // Runs `order` to its end; returns its exit and everything it printed.
  std::pair<std::optional<RunExit>, std::string> RunToEnd(Runner& runner, const StartOrder& order) {
    log_.clear();
    exit_.reset();
    if (!runner.Start(order).has_value()) return {};
    PollUntilExited(runner, order.run_id);
    return {exit_, log_};
  }

  CgroupHost host_;
};

TEST_F(ConfinedContainerTest, AJobRunsAsItsTenantsIdentityWithNoCapabilitiesNorAWayToGainAny) {
  Runner runner(Confined(), clock_);
  StartOrder order = Order("who",
                           "id -u; id -g; id -G; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' "
                           "/proc/self/status; touch $HOME/h $TMPDIR/t && echo writes-its-home");
  order.run_as.groups = {kUidA, 2'000'900'100U};
  auto [exit, log] = RunToEnd(runner, order);
  ASSERT_TRUE(exit.has_value()) << log;
  EXPECT_EQ(exit->exit_code, 0) << log << exit->start_error;
  EXPECT_EQ(log, fmt::format("{0}\n{0}\n{0} 2000900100\nCapPrm:\t0000000000000000\n"
                             "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
                             "NoNewPrivs:\t1\nwrites-its-home\n",
                             kUidA));
  // Its home is its work directory on the host, as for a process run.
  struct stat st {};
  ASSERT_EQ(::stat((runner.WorkDir("who") / "h").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kUidA);
}

TEST_F(ConfinedContainerTest, AJobSeesNothingOfTheHostItWasNotGiven) {
  Runner runner(Confined(), clock_);
  // A file any host user could read, the agent's run state (its own run's
  // spec and log among it) and the data directory's other contents.
  const auto secret = dir_.path() / "host-secret";
  testing::WriteText(secret, "secret\n");
  ::chmod(secret.c_str(), 0644);
  const auto runs = dir_.path() / "data" / "runs";
  const std::string script = fmt::format(
      "for p in {0} {1} {2} {3}/spec.json {3}/output.log /etc/shadow; do "
      "if [ -e $p ]; then echo \"SEES $p\"; else echo \"NO $p\"; fi; done; ls {4}",
      secret.string(), dir_.path().string(), runs.string(), runner.RunDir("peek").string(),
      (dir_.path() / "data").string());
  auto [exit, log] = RunToEnd(runner, Order("peek", script));
  ASSERT_TRUE(exit.has_value()) << log;
  // The data directory holds only the paths down to its own work and
  // output directories.
  EXPECT_EQ(log, fmt::format("NO {0}\nSEES {1}\nNO {2}\nNO {3}/spec.json\nNO {3}/output.log\n"
                             "NO /etc/shadow\noutputs\nwork\n",
                             secret.string(), dir_.path().string(), runs.string(),
                             runner.RunDir("peek").string()));
}

TEST_F(ConfinedContainerTest, AJobWritesItsCheckpointMountOnlyWhenItsIdentityOwnsIt) {
  Runner runner(Confined(), clock_);
  const std::string script =
      "if { echo step-7 > $BERTH_CHECKPOINT_DIR/state; } 2>/dev/null; then echo WROTE; else echo "
      "DENIED; fi";
  // A directory the agent makes for the mount is root's: mounted, not given.
  const auto unowned = dir_.path() / "ckpt-root";
  StartOrder a = Order("ckpt-root", script);
  a.env = {{"BERTH_CHECKPOINT_DIR", unowned.string()}};
  auto [a_exit, a_log] = RunToEnd(runner, a);
  ASSERT_TRUE(a_exit.has_value()) << a_log;
  EXPECT_EQ(a_log, "DENIED\n");
  EXPECT_FALSE(std::filesystem::exists(unowned / "state"));

  // One its identity owns (as berth's checkpoint directories are, docs/jobs.md).
  const auto owned = dir_.path() / "ckpt-own";
  std::filesystem::create_directories(owned);
  ASSERT_EQ(::chown(owned.c_str(), kUidA, kUidA), 0);
  ASSERT_EQ(::chmod(owned.c_str(), 0700), 0);
  StartOrder b = Order("ckpt-own", script);
  b.env = {{"BERTH_CHECKPOINT_DIR", owned.string()}};
  auto [b_exit, b_log] = RunToEnd(runner, b);
  ASSERT_TRUE(b_exit.has_value()) << b_log;
  EXPECT_EQ(b_log, "WROTE\n");
  EXPECT_EQ(testing::Slurp(owned / "state"), "step-7\n");
  struct stat st {};
  ASSERT_EQ(::stat((owned / "state").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kUidA);

  // Another tenant's job cannot write (or read) it.
  StartOrder c = Order("ckpt-other", script + "; cat $BERTH_CHECKPOINT_DIR/state", kUidB);
  c.env = {{"BERTH_CHECKPOINT_DIR", owned.string()}};
  auto [c_exit, c_log] = RunToEnd(runner, c);
  ASSERT_TRUE(c_exit.has_value()) << c_log;
  EXPECT_EQ(c_log.substr(0, 7), "DENIED\n") << c_log;
  EXPECT_EQ(c_log.find("step-7"), std::string::npos) << c_log;
  EXPECT_EQ(testing::Slurp(owned / "state"), "step-7\n");
}

// podman gives the container its own memory cgroup with the order's limit;
// the kernel kills what grows past it. podman reports only the container's
// exit code: its OOMKilled stays false here (conmon 2.1.6, cgroup v1) and
// the container's cgroup, which counted the kill, is gone once podman
// returns, so the run carries no oom_kills evidence (docs/security.md).
TEST_F(ConfinedContainerTest, AJobOverItsMemoryLimitIsKilledWithTheEvidenceAndItsNeighbourRunsOn) {
  if (host_.version == CgroupVersion::kV1 && !host_.v1_roots.contains("memory")) {
    GTEST_SKIP() << "no memory controller";
  }
  Runner runner(Confined(), clock_);
  // tail keeps the one 400 MiB "line" in memory: far over the 64 MiB limit.
  StartOrder hog = Order("hog",
                         "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || "
                         "cat /sys/fs/cgroup/memory.max; "
                         "head -c 419430400 /dev/zero | tail > /dev/null");
  hog.memory_bytes = std::uint64_t{64} << 20;
  ASSERT_TRUE(runner.Start(hog).has_value());
  ASSERT_TRUE(runner.Start(Order("neighbour", "sleep 1; echo alive", kUidB)).has_value());
  std::map<std::string, std::string> logs;
  std::map<std::string, RunExit> exits;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (auto& ev : runner.Poll()) {
          if (ev.kind == RunEvent::Kind::kLog) logs[ev.state.run_id] += ev.data;
          if (ev.kind == RunEvent::Kind::kExited) exits[ev.state.run_id] = *ev.state.exit;
        }
        return exits.size() == 2;
      },
      std::chrono::seconds(90)))
      << logs["hog"] << logs["neighbour"];
  // The limit inside, the shell's word for its pipeline's end (killed, by
  // the kernel's SIGKILL), and the evidence the shim found in the kernel's
  // log where it can read it (root, /dev/kmsg).
  EXPECT_EQ(exits["hog"].exit_code, 128 + SIGKILL) << logs["hog"];
  EXPECT_EQ(exits["hog"].memory_limit_bytes, std::uint64_t{64} << 20);
  if (::access("/dev/kmsg", R_OK) == 0) {
    EXPECT_GE(exits["hog"].oom_kills, 1U) << logs["hog"];
    EXPECT_EQ(logs["hog"],
              "67108864\nKilled\nberth: killed by the kernel's OOM killer: the run reached its "
              "memory limit of 64 MiB (resources.memory); peak 64 MiB, " +
                  std::to_string(exits["hog"].oom_kills) + " process(es) killed\n");
  } else {
    EXPECT_EQ(logs["hog"], "67108864\nKilled\n");
  }
  EXPECT_EQ(exits["neighbour"].exit_code, 0);
  EXPECT_EQ(logs["neighbour"], "alive\n");
}

// The interfaces in /proc/net/dev as a container or the host sees them,
// without the veth ends of containers that other tests start and stop
// meanwhile.
constexpr const char* kInterfaces =
    "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | grep -v '^veth' | sort | "
    "tr '\\n' ' '; echo";

std::string HostOutput(const std::string& script) {
  std::string out;
  if (FILE* f = ::popen(script.c_str(), "r")) {
    std::array<char, 256> buf{};
    while (std::fgets(buf.data(), buf.size(), f) != nullptr) out += buf.data();
    ::pclose(f);
  }
  return out;
}

TEST_F(ConfinedContainerTest, AContainerGetsTheNetworkItsTenantsPolicyGives) {
  Runner runner(Confined(), clock_);
  StartOrder none = Order("net-none", kInterfaces);
  none.container_network = "none";
  auto [none_exit, none_log] = RunToEnd(runner, none);
  ASSERT_TRUE(none_exit.has_value()) << none_log;
  EXPECT_EQ(none_log, "lo \n");
  // A word this agent does not know gets no network either.
  StartOrder odd = Order("net-odd", kInterfaces);
  odd.container_network = "future-mode";
  auto [odd_exit, odd_log] = RunToEnd(runner, odd);
  EXPECT_EQ(odd_log, "lo \n");
  const std::string host = HostOutput(kInterfaces);
  ASSERT_NE(host, "lo \n") << "the host has no interface but loopback to tell apart";
  StartOrder shared = Order("net-host", kInterfaces);
  shared.container_network = "host";
  auto [host_exit, host_log] = RunToEnd(runner, shared);
  ASSERT_TRUE(host_exit.has_value()) << host_log;
  EXPECT_EQ(host_log, host);
}

bool AnyProcessRuns(const std::string& cmdline) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    std::string text = testing::Slurp(entry.path() / "cmdline");
    std::replace(text.begin(), text.end(), '\0', ' ');
    if (text == cmdline + " ") return true;
  }
  return false;
}

TEST_F(ConfinedContainerTest, ACancelledJobLeavesNoProcessAndNoContainerBehind) {
  Runner runner(Confined(), clock_);
  // A child in the background, and a PID 1 that ignores the stop signal:
  // the container must be killed, not asked.
  const std::string marker = fmt::format("sleep 7{}", ::getpid());
  ASSERT_TRUE(runner.Start(Order("cancel", marker + " & echo ready; wait")).has_value());
  ASSERT_TRUE(WaitFor(
      [&] {
        for (auto& ev : runner.Poll()) {
          if (ev.kind == RunEvent::Kind::kLog) log_ += ev.data;
        }
        return log_.find("ready") != std::string::npos;
      },
      std::chrono::seconds(60)))
      << log_;
  ASSERT_TRUE(WaitFor([&] { return AnyProcessRuns(marker); })) << "the child never ran";
  ASSERT_TRUE(runner.Stop("cancel", "cancelled", 200).has_value());
  ASSERT_TRUE(PollUntilExited(runner, "cancel")) << log_;
  EXPECT_EQ(exit_->stopped_for, "cancelled");
  EXPECT_FALSE(exit_->clean_stop.value_or(true));
  EXPECT_FALSE(AnyProcessRuns(marker)) << "the container's child outlived its run";
  EXPECT_EQ(Output(PodmanCommand() + " ps -a --filter name=^berth-cancel$ --format '{{.Names}}'"),
            "");
}

TEST_F(ConfinedContainerTest, AnIdentityPodmanCannotRunAsFailsTheRunAtOnceSayingWhy) {
  Runner runner(Confined(), clock_);
  auto [exit, log] = RunToEnd(runner, Order("big", "echo ran", 3'000'900'001U));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 126);
  EXPECT_EQ(exit->start_error,
            "run identity uid 3000900001 gid 3000900001 of tenant team-b is above 2147483647, "
            "and podman runs no container as it; give the tenant a run_as below that "
            "(tenants.team-b.run_as in the policy) or run the job without `image`");
  EXPECT_EQ(log.find("ran"), std::string::npos);
}

}  // namespace
}  // namespace berth::agent
