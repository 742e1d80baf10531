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

}  // namespace
}  // namespace berth::it
