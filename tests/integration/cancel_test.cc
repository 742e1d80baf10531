// Stopping jobs: `berth cancel` ends a running job Cancelled and its process
// is gone; a job past its max_runtime is stopped and fails with
// MaxRuntimeExceeded.
#include <signal.h>

#include "integration/fixture.h"

namespace berth::it {
namespace {

TEST_F(IntegrationTest, CancelAndMaxRuntime) {
  Berthd& berthd = NewBerthd(AllInOne({"--stop-grace", "2s"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  auto cancelled = berthd.Submit(JobSpecJson("cancel-me", {"sleep", "30"}));
  auto limited =
      berthd.Submit(JobSpecJson("too-long", {"sleep", "30"}, 0, {{"max_runtime", "1s"}}));
  ASSERT_GT(cancelled, 0);
  ASSERT_GT(limited, 0);

  ASSERT_TRUE(berthd.WaitForState(cancelled, "Running", 30s)) << berthd.JobState(cancelled);
  auto pid = berthd.Job(cancelled).at("placement").at(0).at("pid").get<pid_t>();
  ASSERT_TRUE(ProcessAlive(pid));
  auto r = Cli(berthd, {"cancel", std::to_string(cancelled)});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_TRUE(berthd.WaitForTerminal(cancelled, 30s)) << berthd.JobState(cancelled);
  auto job = berthd.Job(cancelled);
  EXPECT_EQ(job.at("state"), "Cancelled") << job.dump(2);
  EXPECT_FALSE(ProcessAlive(pid)) << "pid " << pid << " outlived its cancelled job";
  EXPECT_NE(::kill(-pid, 0), 0) << "process group " << pid << " outlived its cancelled job";

  ASSERT_TRUE(berthd.WaitForTerminal(limited, 30s)) << berthd.JobState(limited);
  job = berthd.Job(limited);
  EXPECT_EQ(job.at("state"), "Failed") << job.dump(2);
  EXPECT_EQ(job.at("reason").at("code"), "MaxRuntimeExceeded") << job.dump(2);
}

}  // namespace
}  // namespace berth::it
