// berthd killed with -9 while a preempted job is still stopping (it ignores
// SIGTERM for the grace period): after the restart the preemptor keeps
// waiting for that same victim, and no second job is evicted for it.
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

TEST_F(IntegrationTest, RestartDuringAnEvictionEvictsNothingMore) {
  Berthd& berthd = NewBerthd(AllInOne({"--stop-grace", "60s"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  // Two low-priority jobs fill the node and shrug off SIGTERM.
  const auto stubborn = Sh("trap '' TERM; while :; do sleep 0.2; done");
  std::vector<std::int64_t> low;
  for (const char* name : {"low-a", "low-b"}) {
    low.push_back(berthd.Submit(JobSpecJson(name, stubborn, 4, {{"priority", "low"}})));
    ASSERT_GT(low.back(), 0);
  }
  for (auto id : low) ASSERT_TRUE(berthd.WaitForState(id, "Running", 30s)) << berthd.JobState(id);

  auto evictions = [&] {
    int n = 0;
    for (auto id : low) n += CountEvents(berthd.Job(id), "Preempting");
    return n;
  };
  auto high = berthd.Submit(JobSpecJson("high", Sh("true"), 4, {{"priority", "high"}}));
  ASSERT_GT(high, 0);
  ASSERT_TRUE(WaitFor([&] { return evictions() == 1; }, 20s)) << berthd.Job(high).dump(2);

  berthd.Kill();
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  // Several passes of the restarted berthd.
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(evictions(), 1) << berthd.Job(low[0]).dump(2) << berthd.Job(low[1]).dump(2);
  EXPECT_EQ(berthd.JobState(high), "Pending");
  for (auto id : low) EXPECT_EQ(berthd.JobState(id), "Running");
}

// berthd learns run times from the jobs finished in its store (read again
// when it starts): a job like three that ran about a second each is
// predicted to run about as long (by its submitter and name), and the job
// holding the GPUs it waits for, declaring no max runtime, is predicted from
// its tenant's runs of that shape, so the wait has an estimated start
// instead of "unknown".
TEST_F(IntegrationTest, AfterARestartBerthdPredictsRunTimesFromItsHistory) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  for (int i = 0; i < 3; ++i) {
    const auto id = berthd.Submit(JobSpecJson("train", Sh("sleep 1"), 8));
    ASSERT_GT(id, 0);
    ASSERT_TRUE(berthd.WaitForState(id, "Succeeded", 30s)) << berthd.Job(id).dump(2);
  }
  berthd.Kill();
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  const auto hog = berthd.Submit(JobSpecJson("hog", {"sleep", "300"}, 8));
  ASSERT_GT(hog, 0);
  ASSERT_TRUE(berthd.WaitForState(hog, "Running", 20s)) << berthd.Job(hog).dump(2);
  const auto next = berthd.Submit(JobSpecJson("train", Sh("sleep 1"), 8));
  ASSERT_GT(next, 0);
  nlohmann::json counts;
  ASSERT_TRUE(WaitFor(
      [&] {
        counts = berthd.Job(next)["reason"]["counts"];
        return counts.contains("predicted_runtime_ms") && counts.contains("eta_basis");
      },
      20s))
      << berthd.Job(next).dump(2);
  // The median of the three runs: a second of sleep and the start around it.
  EXPECT_GE(counts["predicted_runtime_ms"].get<std::int64_t>(), 900) << counts.dump();
  EXPECT_LE(counts["predicted_runtime_ms"].get<std::int64_t>(), 10'000) << counts.dump();
  EXPECT_EQ(counts["predicted_basis"], 1) << counts.dump();  // user+name
  EXPECT_EQ(counts["predicted_samples"], 3) << counts.dump();
  EXPECT_EQ(counts["eta_basis"], 2) << counts.dump();  // a predicted end
  EXPECT_EQ(counts["eta_after_job"], hog) << counts.dump();
  EXPECT_FALSE(counts.contains("eta_unknown")) << counts.dump();
}

}  // namespace
}  // namespace berth::it
