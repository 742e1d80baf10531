// The checkpoint handshake end to end: a preempted job gets its own stop
// signal, saves into its checkpoint directory, touches its checkpoint file
// and exits within its grace period; berthd records a clean stop and the
// checkpoint time, and the next attempt finds what it saved. A job that
// ignores the signal is killed once its grace period is over, and says so.
#include <fstream>
#include <sstream>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The run of `attempt` (replica 0) in the job's "runs".
json RunOf(const json& job, int attempt) {
  for (const auto& r : job.value("runs", json::array())) {
    if (r.value("attempt", 0) == attempt) return r;
  }
  return nullptr;
}

// The message of the first timeline event `event` containing `text`.
bool TimelineSays(const json& job, const std::string& event, const std::string& text) {
  for (const auto& e : job.value("timeline", json::array())) {
    if (e.value("event", "") == event && e.value("message", "").find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

class CheckpointTest : public IntegrationTest {
 protected:
  // A high-priority job that takes the whole node for a moment.
  void Preempt(Berthd& berthd) {
    std::string error;
    auto high =
        berthd.Submit(JobSpecJson("high", Sh("sleep 1"), 8, {{"priority", "high"}}), &error);
    ASSERT_NE(high, 0) << error;
    ASSERT_TRUE(berthd.WaitForTerminal(high, 60s)) << berthd.Job(high).dump(2);
  }
};

TEST_F(CheckpointTest, APreemptedJobCheckpointsOnItsSignalAndResumesFromIt) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  const auto ckpt_dir = dir_ / "ckpt";
  const auto done = dir_ / "done";
  OwnedByTenant(ckpt_dir);
  // Saves on SIGUSR1; a SIGTERM would mean Berth sent the wrong signal.
  const std::string script =
      "echo \"restart=$BERTH_RESTART_COUNT saved=$(cat $BERTH_CHECKPOINT_DIR/state 2>/dev/null)\" "
      ">> $BERTH_CHECKPOINT_DIR/attempts; touch $BERTH_CHECKPOINT_FILE; "
      "trap 'echo step-42 > $BERTH_CHECKPOINT_DIR/state; touch $BERTH_CHECKPOINT_FILE; exit 0' "
      "USR1; trap 'echo wrong-signal >> $BERTH_CHECKPOINT_DIR/attempts; exit 3' TERM; "
      "while [ ! -e " +
      done.string() + " ]; do sleep 0.1; done";
  std::string error;
  auto low = berthd.Submit(JobSpecJson("low", Sh(script), 8,
                                       {{"priority", "low"},
                                        {"checkpoint",
                                         {{"dir", ckpt_dir.string()},
                                          {"file", (ckpt_dir / "done-marker").string()},
                                          {"signal", "SIGUSR1"},
                                          {"grace", "5s"}}}}),
                           &error);
  ASSERT_NE(low, 0) << error;
  ASSERT_TRUE(berthd.WaitForState(low, "Running", 30s)) << berthd.Job(low).dump(2);
  ASSERT_TRUE(WaitFor([&] { return !Slurp(ckpt_dir / "attempts").empty(); }, 20s));
  // The checkpoint it made at its start reaches berthd while it runs.
  ASSERT_TRUE(WaitFor(
      [&] {
        json placement = berthd.Job(low)["placement"];
        return !placement.empty() && placement[0]["last_checkpoint_ms"].is_number();
      },
      10s))
      << berthd.Job(low).dump(2);

  Preempt(berthd);
  ASSERT_FALSE(HasFailure());
  // The next attempt found what the first one saved.
  ASSERT_TRUE(WaitFor(
      [&] { return Slurp(ckpt_dir / "attempts").find("restart=1") != std::string::npos; }, 30s))
      << Slurp(ckpt_dir / "attempts");
  EXPECT_EQ(Slurp(ckpt_dir / "attempts"), "restart=0 saved=\nrestart=1 saved=step-42\n");

  json job = berthd.Job(low);
  json first = RunOf(job, 1);
  ASSERT_TRUE(first.is_object()) << job.dump(2);
  EXPECT_EQ(first["clean_stop"], true) << first.dump(2);
  EXPECT_EQ(first["exit_code"], 0) << first.dump(2);
  ASSERT_TRUE(first["last_checkpoint_ms"].is_number()) << first.dump(2);
  EXPECT_LE(first["last_checkpoint_ms"].get<std::int64_t>(),
            first["finished_at_ms"].get<std::int64_t>() + 1000);
  EXPECT_TRUE(TimelineSays(job, "Exited", "it exited within its grace period")) << job.dump(2);
  EXPECT_TRUE(TimelineSays(job, "Exited", "last checkpoint")) << job.dump(2);

  WriteFile(done, "");
  ASSERT_TRUE(berthd.WaitForTerminal(low, 30s));
  EXPECT_EQ(berthd.JobState(low), "Succeeded") << berthd.Job(low).dump(2);
}

TEST_F(CheckpointTest, AJobThatIgnoresItsSignalIsKilledAfterItsGrace) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  const auto done = dir_ / "done";
  std::string error;
  auto low = berthd.Submit(
      JobSpecJson("stubborn",
                  Sh("trap '' USR1; while [ ! -e " + done.string() + " ]; do sleep 0.1; done"), 8,
                  {{"priority", "low"},
                   {"checkpoint",
                    {{"dir", (dir_ / "ckpt").string()}, {"signal", "SIGUSR1"}, {"grace", "2s"}}}}),
      &error);
  ASSERT_NE(low, 0) << error;
  ASSERT_TRUE(berthd.WaitForState(low, "Running", 30s)) << berthd.Job(low).dump(2);
  auto started = std::chrono::steady_clock::now();
  Preempt(berthd);
  ASSERT_FALSE(HasFailure());
  // It had its whole grace period before the kill.
  EXPECT_GE(std::chrono::steady_clock::now() - started, 2s);

  json job = berthd.Job(low);
  json first = RunOf(job, 1);
  ASSERT_TRUE(first.is_object()) << job.dump(2);
  EXPECT_EQ(first["clean_stop"], false) << first.dump(2);
  EXPECT_EQ(first["signal"], 9) << first.dump(2);
  EXPECT_TRUE(first["last_checkpoint_ms"].is_null()) << first.dump(2);
  EXPECT_TRUE(
      TimelineSays(job, "Exited", "it was killed after its grace period (no clean checkpoint)"))
      << job.dump(2);
  WriteFile(done, "");
  ASSERT_TRUE(berthd.WaitForTerminal(low, 30s));
}

}  // namespace
}  // namespace berth::it
