// Jobs with an `image` through berthd and a real agent: on a node without
// podman the run fails at once with what to do; with podman (where it can
// run containers here) the job runs in its image, its output is its log.
// berthd's agent gives podman the configuration Berth ships
// (--podman-conf deploy/podman/containers.conf), as an operator would. The
// image is built locally from busybox-static: no registry is needed.
#include <unistd.h>

#include <cstdlib>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

// Every busybox applet in /bin (as tests/unit/agent/container_test.cc).
constexpr const char* kImage = "localhost/berth-test/busybox:2";

bool HavePodman() {
  return ::access("/usr/bin/podman", X_OK) == 0 || ::access("/usr/local/bin/podman", X_OK) == 0;
}

int Shell(const std::string& cmd) {
  return std::system(cmd.c_str());  // NOLINT(concurrency-mt-unsafe): test setup
}

// Why containers cannot run here, or "" once kImage exists and runs.
std::string PrepareImage(const std::filesystem::path& scratch) {
  if (!HavePodman()) return "podman is not installed";
  const std::string podman = "env CONTAINERS_CONF='" BERTH_PODMAN_CONF "' podman";
  if (Shell(podman + " image exists " + kImage) != 0) {
    if (::access("/bin/busybox", X_OK) != 0) return "no /bin/busybox (busybox-static)";
    auto bin = scratch / "rootfs" / "bin";
    std::filesystem::create_directories(bin);
    std::string cmd =
        "cp /bin/busybox " + bin.string() +
        "/ && for c in $(/bin/busybox --list); do [ $c = busybox ] || ln -s busybox " +
        bin.string() + "/$c; done && tar -C " + (scratch / "rootfs").string() + " -cf " +
        (scratch / "rootfs.tar").string() + " . && " + podman + " import -q " +
        (scratch / "rootfs.tar").string() + " " + kImage + " >/dev/null";
    if (Shell(cmd) != 0) return "podman import of a busybox rootfs failed";
  }
  if (Shell("timeout 60 " + podman + " run --rm " + kImage + " true >/dev/null 2>&1") != 0) {
    return "podman cannot run containers on this host";
  }
  return "";
}

TEST_F(IntegrationTest, AnImageOnANodeWithoutPodmanFailsAtOnceSayingWhatToDo) {
  Berthd& berthd = NewBerthd(ControlPlaneOnly());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  // The agent's PATH has no podman, whatever this machine has installed.
  NewAgent(berthd, dir_ / "agent", WriteCluster("bare-node", 8), "agent.log",
           {{"PATH", (dir_ / "no-podman-here").string()}});
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  // The node says so: no container runtime.
  auto nodes = berthd.http().Get("/v1/nodes");
  ASSERT_EQ(nodes.status, 200);
  EXPECT_EQ(nodes.body["nodes"][0]["container_runtime"], "") << nodes.text;

  std::string error;
  auto id = berthd.Submit(JobSpecJson("boxed", {"true"}, 1, {{"image", "docker.io/x:1"}}), &error);
  ASSERT_NE(id, 0) << error;
  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s)) << berthd.Job(id).dump(2);
  json job = berthd.Job(id);
  EXPECT_EQ(job["state"], "Failed") << job.dump(2);
  ASSERT_FALSE(job["placement"].empty());
  const auto& run = job["placement"][0];
  EXPECT_EQ(run["exit_code"], 127) << run.dump(2);
  EXPECT_EQ(run["start_error"],
            "image docker.io/x:1 needs a container runtime, but podman is not installed on node "
            "bare-node; install podman there or remove `image` from the job spec");
}

TEST_F(IntegrationTest, AJobRunsInItsImage) {
  if (std::string why = PrepareImage(dir_.path()); !why.empty()) GTEST_SKIP() << why;
  Berthd& berthd = NewBerthd(AllInOne({"--podman-conf", BERTH_PODMAN_CONF}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  std::string error;
  auto id = berthd.Submit(JobSpecJson("boxed",
                                      {"/bin/sh", "-c",
                                       "echo \"hello from $BERTH_JOB_NAME on GPUs "
                                       "$CUDA_VISIBLE_DEVICES\"; ls /bin/busybox"},
                                      2, {{"image", kImage}}),
                          &error);
  ASSERT_NE(id, 0) << error;
  ASSERT_TRUE(berthd.WaitForTerminal(id, 90s)) << berthd.Job(id).dump(2);
  EXPECT_EQ(berthd.JobState(id), "Succeeded") << berthd.Job(id).dump(2);
  auto logs = berthd.http().Get("/v1/jobs/" + std::to_string(id) + "/logs");
  EXPECT_NE(logs.text.find("hello from boxed on GPUs "), std::string::npos) << logs.text;
  EXPECT_NE(logs.text.find("/bin/busybox"), std::string::npos) << logs.text;
}

}  // namespace
}  // namespace berth::it
