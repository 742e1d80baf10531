// One plan, one transaction: berthd killed with -9 after it wrote a plan's
// evictions but before its placements leaves neither on disk, and the
// restarted berthd makes the same decision whole.
//
// The plan is made so that one scheduling pass holds both: a policy change
// lifts at once the two things keeping two jobs waiting. `high` may now
// preempt `low` (min_runtime drops from 1h to 0), and `side`, a CPU-only job,
// may now run in its queue (its CPU quota grows from 0 to 2 cores).
#include <sqlite3.h>

#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

constexpr const char* kGated = R"(min_runtime: 1h
queues:
  - name: default
    children:
      - name: train
        quota: {gpus: 8}
      - name: side
        quota: {cpu: {guaranteed: 0, borrow_limit: 0}}
        over_quota: wait
)";

constexpr const char* kOpen = R"(min_runtime: 0s
queues:
  - name: default
    children:
      - name: train
        quota: {gpus: 8}
      - name: side
        quota: {cpu: {guaranteed: 2, borrow_limit: 0}}
        over_quota: wait
)";

// One integer from berth.db, read with berthd down.
std::int64_t Count(const std::filesystem::path& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::int64_t out = -1;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      out = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

TEST_F(IntegrationTest, AKillBetweenAPlansEvictionsAndPlacementsLeavesNeither) {
  BerthdOptions options = AllInOne({"--stop-grace", "5s"});
  options.env["BERTH_FAILPOINTS"] = "plan.after_evictions";
  Berthd& berthd = NewBerthd(options);
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  WriteFile(dir_ / "gated.yaml", kGated);
  auto r = Cli(berthd, {"policy", "apply", (dir_ / "gated.yaml").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  const auto forever = Sh("trap 'exit 0' TERM; while :; do sleep 0.1; done");
  std::string error;
  const auto low = berthd.Submit(
      JobSpecJson("low", forever, 8, {{"queue", "train"}, {"priority", "low"}}), &error);
  ASSERT_GT(low, 0) << error;
  ASSERT_TRUE(berthd.WaitForState(low, "Running", 30s)) << berthd.Job(low).dump(2);
  const auto high = berthd.Submit(
      JobSpecJson("high", Sh("true"), 8, {{"queue", "train"}, {"priority", "high"}}), &error);
  ASSERT_GT(high, 0) << error;
  const auto side = berthd.Submit(
      JobSpecJson("side", Sh("true"), 0, {{"queue", "side"}, {"resources", {{"cpu", "1"}}}}),
      &error);
  ASSERT_GT(side, 0) << error;
  // Several passes: neither may move while the gates hold.
  std::this_thread::sleep_for(2s);
  ASSERT_TRUE(berthd.running()) << berthd.log();
  ASSERT_EQ(berthd.JobState(high), "Pending");
  ASSERT_EQ(berthd.JobState(side), "Pending") << berthd.Job(side).dump(2);

  // The pass after this change evicts `low` for `high` and places `side`;
  // berthd dies between the two.
  WriteFile(dir_ / "open.yaml", kOpen);
  r = Cli(berthd, {"policy", "apply", (dir_ / "open.yaml").string()});
  ASSERT_TRUE(WaitFor([&] { return !berthd.running(); }, 20s)) << berthd.log();
  berthd.Kill();  // reaps it

  const auto db = berthd.data_dir() / "berth.db";
  const auto id = [](std::int64_t v) { return std::to_string(v); };
  EXPECT_EQ(
      Count(db, "SELECT count(*) FROM runs WHERE job_id=" + id(low) + " AND stop_requested=1"), 0);
  EXPECT_EQ(Count(db, "SELECT count(*) FROM job_events WHERE job_id=" + id(low) +
                          " AND event='Preempting'"),
            0);
  EXPECT_EQ(Count(db, "SELECT count(*) FROM runs WHERE job_id=" + id(side)), 0);
  EXPECT_EQ(Count(db, "SELECT count(*) FROM jobs WHERE id=" + id(side) + " AND state='Pending'"),
            1);
  // The policy change itself was acknowledged before the pass, and stays.
  EXPECT_EQ(Count(db, "SELECT max(version) FROM policy_versions"), 3);

  // Restarted without the crash point, berthd makes the whole decision.
  berthd.options().env.clear();
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForTerminal(side, 30s)) << berthd.Job(side).dump(2);
  EXPECT_EQ(berthd.JobState(side), "Succeeded");
  ASSERT_TRUE(berthd.WaitForTerminal(high, 60s)) << berthd.Job(high).dump(2);
  EXPECT_EQ(berthd.JobState(high), "Succeeded");
  const json victim = berthd.Job(low);
  EXPECT_EQ(CountEvents(victim, "Preempting"), 1) << victim.dump(2);
}

}  // namespace
}  // namespace berth::it
