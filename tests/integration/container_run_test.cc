// Jobs with an `image` through berthd and real agents: with no node whose
// agent found podman the job waits, saying why, and lands on such a node
// once one joins or once podman is installed on a node whose agent runs;
// with podman (where it can
// run containers here) the job runs in its image, its output is its log.
// berthd's agent gives podman the configuration Berth ships
// (--podman-conf deploy/podman/containers.conf), as an operator would. The
// image is built locally from busybox-static: no registry is needed.
#include <fmt/format.h>
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

// A stand-in for podman on an agent's PATH: the agent reports podman, and
// every pull fails the way a registry that cannot be reached makes it fail.
// Where a job lands, not what podman does, is what it shows.
std::filesystem::path FakePodmanDir(const std::filesystem::path& dir) {
  const auto bin = dir / "fake-podman-bin";
  std::filesystem::create_directories(bin);
  WriteFile(bin / "podman",
            "#!/bin/sh\n"
            "case \"$1\" in\n"
            "  pull) echo \"Error: no registry in this test\" >&2; exit 125 ;;\n"
            "  *) exit 1 ;;\n"
            "esac\n");
  std::filesystem::permissions(bin / "podman", std::filesystem::perms::owner_all);
  return bin;
}

// A simulated node of its own for each agent.
std::filesystem::path ClusterFileFor(const std::filesystem::path& dir, const std::string& node) {
  const auto file = dir / ("cluster-" + node + ".yaml");
  WriteFile(file, fmt::format("nodes:\n  - name: {}\n    cpus: 16\n    memory: 64Gi\n"
                              "    gpus: {{model: H100-80GB, memory: 80Gi, count: 8}}\n",
                              node));
  return file;
}

// No node reports podman: the job with an image is not placed (it would only
// fail there) but waits, and its reason names the image and the nodes
// without a container runtime; once a node with podman joins, the job
// lands there, and nowhere else.
TEST_F(IntegrationTest, AnImageWaitsForANodeWithPodmanAndLandsThere) {
  Berthd& berthd = NewBerthd(ControlPlaneOnly());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  // The agent's PATH has no podman, whatever this machine has installed.
  NewAgent(berthd, dir_ / "agent", ClusterFileFor(dir_.path(), "bare-node"), "agent.log",
           {{"PATH", (dir_ / "no-podman-here").string()}});
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  // The node says so: no container runtime.
  auto nodes = berthd.http().Get("/v1/nodes");
  ASSERT_EQ(nodes.status, 200);
  EXPECT_EQ(nodes.body["nodes"][0]["container_runtime"], "") << nodes.text;

  std::string error;
  auto id = berthd.Submit(JobSpecJson("boxed", {"true"}, 1, {{"image", "docker.io/x:1"}}), &error);
  ASSERT_NE(id, 0) << error;
  ASSERT_TRUE(WaitFor(
      [&] {
        return berthd.Job(id).value("reason", json::object()).value("code", "") == "NoNodeFits";
      },
      30s))
      << berthd.Job(id).dump(2);
  json job = berthd.Job(id);
  EXPECT_EQ(job["state"], "Pending") << job.dump(2);
  EXPECT_TRUE(job["placement"].empty()) << job.dump(2);
  EXPECT_EQ(job["reason"]["counts"]["no_container_runtime"], 1) << job.dump(2);
  auto why = berthd.http().Get(fmt::format("/v1/jobs/{}/why", id));
  ASSERT_EQ(why.status, 200) << why.text;
  const std::string message = why.body["reason"]["message"];
  EXPECT_NE(message.find("needs a node with a container runtime (podman) for image "
                         "docker.io/x:1: 1 of 1 nodes have none"),
            std::string::npos)
      << message;
  auto cli = Cli(berthd, {"why", std::to_string(id)});
  EXPECT_NE(cli.out.find("container runtime (podman) for image docker.io/x:1"), std::string::npos)
      << cli.out << cli.err;

  NewAgent(berthd, dir_ / "agent-podman", ClusterFileFor(dir_.path(), "podman-node"),
           "agent-podman.log", {{"PATH", FakePodmanDir(dir_.path()).string()}});
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s, "podman-node"));
  ASSERT_TRUE(berthd.WaitForTerminal(id, 60s)) << berthd.Job(id).dump(2);
  job = berthd.Job(id);
  EXPECT_EQ(job["state"], "Failed") << job.dump(2);
  ASSERT_EQ(job["placement"].size(), 1U) << job.dump(2);
  EXPECT_EQ(job["placement"][0]["node"], "podman-node") << job.dump(2);
  EXPECT_NE(job["placement"][0]["start_error"].get<std::string>().find(
                "could not pull image docker.io/x:1: no registry in this test"),
            std::string::npos)
      << job.dump(2);
}

// podman installed on a node after its agent started, then removed: the
// agent notices on its heartbeats and berthd's node follows (GET /v1/nodes,
// a node event each way), and so does the scheduler. A job with an image
// waits while the node has no runtime and lands there once podman appears
// (the stand-in podman fails its pull, which shows where it ran); after
// podman is gone, the next such job waits again. No agent restarts.
TEST_F(IntegrationTest, ANodeGainsAndLosesPodmanWhileItsAgentRuns) {
  Berthd& berthd = NewBerthd(ControlPlaneOnly());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  // The agent's PATH is one directory where podman appears later.
  const auto late_bin = dir_ / "late-bin";
  std::filesystem::create_directories(late_bin);
  NewAgent(berthd, dir_ / "agent", ClusterFileFor(dir_.path(), "late-node"), "agent.log",
           {{"PATH", late_bin.string()}});
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  auto runtime = [&] {
    auto nodes = berthd.http().Get("/v1/nodes");
    if (nodes.status != 200 || nodes.body["nodes"].empty()) return std::string("?");
    return nodes.body["nodes"][0].value("container_runtime", std::string("?"));
  };
  ASSERT_EQ(runtime(), "");

  std::string error;
  auto waits = [&](std::int64_t id) {
    return WaitFor(
        [&] {
          json job = berthd.Job(id);
          return job.value("reason", json::object()).value("code", "") == "NoNodeFits" &&
                 job["reason"].value("counts", json::object()).value("no_container_runtime", 0) ==
                     1;
        },
        30s);
  };
  auto first =
      berthd.Submit(JobSpecJson("early", {"true"}, 1, {{"image", "docker.io/x:1"}}), &error);
  ASSERT_NE(first, 0) << error;
  ASSERT_TRUE(waits(first)) << berthd.Job(first).dump(2);

  // podman is installed: a link on the agent's PATH to an executable.
  std::filesystem::create_symlink(FakePodmanDir(dir_.path()) / "podman", late_bin / "podman");
  ASSERT_TRUE(WaitFor([&] { return runtime() == "podman"; }, 30s)) << runtime();
  ASSERT_TRUE(berthd.WaitForTerminal(first, 60s)) << berthd.Job(first).dump(2);
  json job = berthd.Job(first);
  ASSERT_EQ(job["placement"].size(), 1U) << job.dump(2);
  EXPECT_EQ(job["placement"][0]["node"], "late-node") << job.dump(2);
  EXPECT_NE(job["placement"][0]["start_error"].get<std::string>().find(
                "could not pull image docker.io/x:1: no registry in this test"),
            std::string::npos)
      << job.dump(2);

  // podman is removed: the node has no runtime again, and a new job with an
  // image waits for one.
  std::filesystem::remove(late_bin / "podman");
  ASSERT_TRUE(WaitFor([&] { return runtime() == ""; }, 30s)) << runtime();
  auto second =
      berthd.Submit(JobSpecJson("later", {"true"}, 1, {{"image", "docker.io/x:1"}}), &error);
  ASSERT_NE(second, 0) << error;
  ASSERT_TRUE(waits(second)) << berthd.Job(second).dump(2);
  EXPECT_EQ(berthd.JobState(second), "Pending");

  // Each change is one of the node's events, saying which way it went.
  auto node = berthd.http().Get("/v1/nodes/late-node");
  ASSERT_EQ(node.status, 200) << node.text;
  std::vector<std::string> changes;
  for (const auto& e : node.body["events"]) {
    if (e["event"] == "ContainerRuntimeChanged") changes.push_back(e["message"]);
  }
  ASSERT_EQ(changes.size(), 2U) << node.text;
  EXPECT_NE(changes[0].find("found podman"), std::string::npos) << changes[0];
  EXPECT_NE(changes[1].find("no longer on the agent's search path"), std::string::npos)
      << changes[1];
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
