// berthd killed with -9 while a job runs: the job keeps running under its
// shim, and berthd, started again on the same data dir, records its true exit
// code without starting it again, whether the job ends while berthd is up
// again or while it is still down.
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

// Started events per replica.
std::map<std::uint32_t, int> StartsPerReplica(const json& job) {
  std::map<std::uint32_t, int> out;
  for (std::uint32_t r = 0; r < job.at("spec").value("replicas", 1U); ++r) out[r] = 0;
  for (const auto& e : job.at("timeline")) {
    if (e.value("event", "") != "Started") continue;
    // "replica N started on NODE (pid P)"
    std::string msg = e.value("message", "");
    std::uint32_t replica = 0;
    if (std::sscanf(msg.c_str(), "replica %u", &replica) == 1) ++out[replica];  // NOLINT
  }
  return out;
}

TEST_F(IntegrationTest, RestartKeepsRunningJob) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  // Ends after berthd is back.
  auto id = berthd.Submit(JobSpecJson("exit7", Sh("sleep 4; exit 7")));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(berthd.WaitForState(id, "Running", 30s)) << berthd.JobState(id);
  auto pid = berthd.Job(id).at("placement").at(0).at("pid").get<pid_t>();
  berthd.Kill();
  EXPECT_TRUE(ProcessAlive(pid)) << "the job died with berthd";
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s)) << berthd.JobState(id);
  auto job = berthd.Job(id);
  EXPECT_EQ(job.at("state"), "Failed") << job.dump(2);
  EXPECT_EQ(job.at("exit_code"), 7) << job.dump(2);
  EXPECT_EQ(job.at("placement").at(0).at("pid"), pid) << job.dump(2);
  EXPECT_EQ(StartsPerReplica(job), (std::map<std::uint32_t, int>{{0, 1}})) << job.dump(2);

  // Ends while berthd is down.
  id = berthd.Submit(JobSpecJson("exit5", Sh("sleep 1; exit 5")));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(berthd.WaitForState(id, "Running", 30s)) << berthd.JobState(id);
  berthd.Kill();
  std::this_thread::sleep_for(3s);
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s)) << berthd.JobState(id);
  job = berthd.Job(id);
  EXPECT_EQ(job.at("state"), "Failed") << job.dump(2);
  EXPECT_EQ(job.at("exit_code"), 5) << job.dump(2);
  EXPECT_EQ(StartsPerReplica(job), (std::map<std::uint32_t, int>{{0, 1}})) << job.dump(2);
}

}  // namespace
}  // namespace berth::it
