// The isolation matrix through real berthd and its embedded agent, as root:
// a job of tenant A tries to read and write tenant B's working directory and
// checkpoints, B's run log and spool on the node, berthd's secrets (the
// bootstrap token, the CA key, the database), the agent's run state, to
// signal B's job and to open a GPU it was not given. Every attempt must fail
// and B's job must run on unharmed. A second tenant's job proves the
// identities differ and a path outside its grants is the next issue's work.
// Skipped, saying why, where the host cannot confine runs.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

constexpr const char* kTwoTenants = R"(
queues:
  - name: team-a
    children: [{name: main}]
  - name: team-b
    children: [{name: main}]
tenants:
  team-b:
    run_as: {uid: 2000900777, gid: 2000900777}
)";

// The job's one run, once it has a pid.
json RunOf(const Berthd& berthd, std::int64_t id) {
  json run;
  WaitFor(
      [&] {
        json job = berthd.Job(id);
        if (!job.is_object() || !job.contains("runs") || job["runs"].empty()) return false;
        run = job["runs"].back();
        return run["pid"].is_number();
      },
      20s);
  return run;
}

class IsolationTest : public IntegrationTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "run identities and cgroups need root";
  }
  CommandResult Logs(const Berthd& berthd, std::int64_t id) const {
    return Cli(berthd, {"logs", std::to_string(id)});
  }
};

TEST_F(IsolationTest, AJobOfOneTenantReachesNothingOfAnotherNorOfThePlatform) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  json node = berthd.Nodes().at(0);
  const json confinement = node.value("confinement", json::object());
  if (confinement.value("mode", "") != "enforced" || confinement.value("cgroup", "") == "none") {
    GTEST_SKIP() << "this node does not confine runs: " << confinement.dump();
  }
  const std::string name = node.at("name");
  WriteFile(dir_ / "policy.yaml", kTwoTenants);
  auto r = Cli(berthd, {"policy", "apply", (dir_ / "policy.yaml").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  std::string error;
  // B keeps a secret in its working directory and a checkpoint, then waits.
  const std::int64_t b = berthd.Submit(
      JobSpecJson("b-secret",
                  Sh("echo b-secret > secret.txt; mkdir ckpt; echo state > ckpt/state; "
                     "echo b-result > \"$BERTH_OUTPUT_DIR/result\"; id -u; echo ready; sleep 120"),
                  1, {{"tenant", "team-b"}, {"queue", "main"}}),
      &error);
  ASSERT_GT(b, 0) << error;
  ASSERT_TRUE(berthd.WaitForState(b, "Running", 20s)) << berthd.Job(b).dump(2);
  json b_run = RunOf(berthd, b);
  ASSERT_TRUE(b_run["pid"].is_number()) << berthd.Job(b).dump(2);
  ASSERT_TRUE(WaitFor([&] { return Logs(berthd, b).out.find("ready") != std::string::npos; }, 20s));
  EXPECT_EQ(Logs(berthd, b).out, "2000900777\nready\n");

  const auto agent_dir = berthd.data_dir() / "agents" / name;
  const std::string b_id = b_run.at("run_id");
  const std::string b_work = (agent_dir / "work" / b_id).string();
  const std::string b_spool = (agent_dir / "runs" / b_id).string();
  const std::string b_out = (agent_dir / "outputs" / b_id / "out").string();
  const std::uint32_t b_gpu = b_run.at("gpus").at(0);
  const std::string data = berthd.data_dir().string();
  // Each line: what A tried, and GOT or DENIED.
  std::vector<std::pair<std::string, std::string>> tries{
      {"read-b-work", "cat " + b_work + "/secret.txt"},
      {"list-b-work", "ls " + b_work},
      {"write-b-work", "touch " + b_work + "/planted"},
      {"read-b-checkpoint", "cat " + b_work + "/ckpt/state"},
      {"write-b-checkpoint", "echo evil > " + b_work + "/ckpt/state"},
      {"read-b-log", "cat " + b_spool + "/output.log"},
      {"read-b-outputs", "cat " + b_out + "/result"},
      {"list-b-outputs", "ls " + b_out},
      {"write-b-outputs", "touch " + b_out + "/planted"},
      {"read-b-spec", "cat " + b_spool + "/spec.json"},
      {"write-b-exit", "echo '{}' > " + b_spool + "/exit.json"},
      {"list-runs", "ls " + (agent_dir / "runs").string()},
      {"read-token", "cat " + data + "/bootstrap-token"},
      {"read-ca-key", "cat " + data + "/tls/ca-key.pem"},
      {"read-db", "cat " + data + "/berth.db"},
      {"list-data-dir", "ls " + data},
      {"read-job-logs", "ls " + data + "/logs"},
      {"signal-b", "kill -TERM " + std::to_string(b_run.at("pid").get<std::int64_t>())},
      {"open-b-gpu", "cat " + (agent_dir / "dev").string() + "/nvidia" + std::to_string(b_gpu)},
  };
  std::string script =
      "try() { if eval \"$2\" >/dev/null 2>&1; then echo \"GOT $1\"; else echo "
      "\"DENIED $1\"; fi; }; ";
  std::string expected;
  for (const auto& [what, cmd] : tries) {
    script += "try " + what + " '" + cmd + "'; ";
    expected += "DENIED " + what + "\n";
  }
  // Its own GPU's device is open to it (the stand-in has no driver: ENXIO).
  script +=
      "cat " + (agent_dir / "dev").string() + "/nvidia$CUDA_VISIBLE_DEVICES 2>&1 | sed 's/.*: //'";
  expected += "No such device or address\n";
  const std::int64_t a = berthd.Submit(
      JobSpecJson("a-intruder", Sh(script), 1, {{"tenant", "team-a"}, {"queue", "main"}}), &error);
  ASSERT_GT(a, 0) << error;
  ASSERT_TRUE(berthd.WaitForTerminal(a, 30s)) << berthd.Job(a).dump(2);
  EXPECT_EQ(Logs(berthd, a).out, expected);

  // B was not touched: still running, its files as it left them.
  EXPECT_EQ(berthd.JobState(b), "Running");
  EXPECT_EQ(ReadFile(b_work + "/ckpt/state"), "state\n");
  EXPECT_FALSE(std::filesystem::exists(b_work + "/planted"));
  EXPECT_EQ(ReadFile(b_out + "/result"), "b-result\n");
  EXPECT_FALSE(std::filesystem::exists(b_out + "/planted"));
  r = Cli(berthd, {"cancel", std::to_string(b)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(berthd.WaitForTerminal(b, 30s));
}

TEST_F(IsolationTest, AJobOverItsMemoryLimitFailsAsHostOutOfMemoryWithTheEvidence) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const json confinement = berthd.Nodes().at(0).value("confinement", json::object());
  auto controllers = confinement.value("controllers", std::vector<std::string>{});
  if (std::find(controllers.begin(), controllers.end(), "memory") == controllers.end()) {
    GTEST_SKIP() << "no memory controller on this node: " << confinement.dump();
  }
  const std::int64_t hog = berthd.Submit(
      JobSpecJson("hog", Sh("head -c 400M /dev/zero | tail > /dev/null"), 0,
                  {{"resources", {{"memory", "64Mi"}}}, {"retry", {{"max_attempts", 1}}}}));
  ASSERT_GT(hog, 0);
  const std::int64_t neighbour = berthd.Submit(JobSpecJson("neighbour", Sh("sleep 2; echo alive")));
  ASSERT_TRUE(berthd.WaitForTerminal(hog, 30s));
  json job = berthd.Job(hog);
  EXPECT_EQ(job.value("state", ""), "Failed") << job.dump(2);
  EXPECT_EQ(job.at("runs").back().value("failure_class", ""), "host_out_of_memory") << job.dump(2);
  EXPECT_NE(job.dump().find("killed by the kernel's OOM killer"), std::string::npos) << job.dump(2);
  ASSERT_TRUE(berthd.WaitForTerminal(neighbour, 30s));
  EXPECT_EQ(berthd.JobState(neighbour), "Succeeded");
}

TEST_F(IntegrationTest, APathOutsideTheTenantsGrantsIsRefusedAtSubmitAndNothingIsStored) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  WriteFile(dir_ / "policy.yaml", R"(
queues:
  - name: team-a
    children: [{name: main}]
tenants:
  team-a:
    storage:
      - {path: /tmp, access: read-write}
      - {path: /usr/share, access: read-only}
)");
  auto r = Cli(berthd, {"policy", "apply", (dir_ / "policy.yaml").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json tenant{{"tenant", "team-a"}, {"queue", "main"}};
  struct Case {
    json extra;
    std::string field;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{{"checkpoint", {{"dir", "/etc/cron.d"}}}},
            "checkpoint.dir",
            "/etc/cron.d is outside the storage granted to its tenant: tenant team-a may use /tmp "
            "(read-write), /usr/share (read-only)"},
           {{{"working_dir", "/root"}}, "working_dir", "/root is outside"},
           {{{"mounts", {{{"path", "/usr/share/doc"}}}}}, "mounts[0].path", "may only read"},
           {{{"working_dir", "/tmp/../etc"}}, "working_dir", "not a normal path"},
       }) {
    json extra = tenant;
    extra.update(c.extra);
    std::string error;
    EXPECT_EQ(berthd.Submit(JobSpecJson("outside", Sh("true"), 0, extra), &error), 0) << c.field;
    EXPECT_NE(error.find("\"field\":\"" + c.field + "\""), std::string::npos) << error;
    EXPECT_NE(error.find(c.says), std::string::npos) << error;
  }
  EXPECT_TRUE(berthd.Jobs().empty()) << berthd.Jobs().dump(2);
  // Under the grants, the same job is taken.
  json fine = tenant;
  fine.update(
      {{"working_dir", "/tmp"}, {"mounts", {{{"path", "/usr/share/doc"}, {"read_only", true}}}}});
  std::string error;
  EXPECT_GT(berthd.Submit(JobSpecJson("inside", Sh("true"), 0, fine), &error), 0) << error;
}

}  // namespace
}  // namespace berth::it

namespace berth::it {
namespace {

TEST_F(IsolationTest, ARunIdentityTheNodeCannotResolveFailsTheJobWithAReasonForTheAdmin) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  if (berthd.Nodes().at(0).value("confinement", json::object()).value("mode", "") != "enforced") {
    GTEST_SKIP() << "this node does not confine runs";
  }
  WriteFile(dir_ / "policy.yaml", R"(
queues:
  - name: team-a
    children: [{name: main}]
tenants:
  team-a:
    run_as: {user: no-such-berth-user}
)");
  auto r = Cli(berthd, {"policy", "apply", (dir_ / "policy.yaml").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string error;
  const std::int64_t id = berthd.Submit(
      JobSpecJson("nobody-home", Sh("echo ran"), 0, {{"tenant", "team-a"}, {"queue", "main"}}),
      &error);
  ASSERT_GT(id, 0) << error;
  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s));
  json job = berthd.Job(id);
  EXPECT_EQ(job.value("state", ""), "Failed") << job.dump(2);
  EXPECT_EQ(job.at("runs").back().value("failure_class", ""), "run_identity") << job.dump(2);
  r = Cli(berthd, {"why", std::to_string(id)});
  EXPECT_NE(r.out.find("run identity user 'no-such-berth-user' of tenant team-a does not exist"),
            std::string::npos)
      << r.out << r.err;
  EXPECT_NE(r.out.find("a platform admin must create that user"), std::string::npos) << r.out;
  EXPECT_EQ(Cli(berthd, {"logs", std::to_string(id)}).out.find("ran"), std::string::npos);
}

}  // namespace
}  // namespace berth::it
