// A plan is one batch, all or nothing: a process killed (SIGKILL, from the
// plan.after_evictions crash point) after the store wrote a plan's evictions
// and before its placements leaves neither; the same plan applied again
// afterwards lands whole.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "control/lifecycle.h"
#include "store/sqlite_store.h"
#include "unit/builders.h"

namespace berth::store {
namespace {

class PlanCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-plan-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

model::JobSpec Spec(const std::string& name) {
  model::JobSpec s;
  s.name = name;
  s.command = {"true"};
  s.resources.gpus = 1;
  return s;
}

TEST_F(PlanCrashTest, AKillBetweenEvictionsAndPlacementsLeavesNeither) {
  std::int64_t victim = 0;
  std::int64_t waiting = 0;
  sched::Plan plan;
  {
    auto store = SqliteStore::Open(dir_, 1000);
    ASSERT_TRUE(store) << store.error().message;
    ASSERT_TRUE((*store)->UpsertNode(tests::H100Node(2), 1000));
    victim = *(*store)->CreateJob(Spec("victim"), 1000);
    waiting = *(*store)->CreateJob(Spec("waiting"), 1000);
    sched::Plan first;
    first.placements.push_back({victim, {{0, "n1", {0}}}});
    ASSERT_TRUE(control::ApplyPlan(**store, first, *(*store)->ListNodes(), 1, 1500));
    ASSERT_TRUE(control::MarkRunStarted(**store, std::to_string(victim) + ".0.1", 42, 1600, 1600));
  }
  sched::Eviction e;
  e.job_id = victim;
  e.by_job = waiting;
  e.cause = sched::EvictionCause::kPreempt;
  e.reason = {model::ReasonCode::kPreempted, {{"by_job", waiting}}, {}};
  plan.evictions.push_back(e);
  plan.placements.push_back({waiting, {{0, "n1", {1}}}});

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setenv("BERTH_FAILPOINTS", "plan.after_evictions", 1);  // NOLINT(concurrency-mt-unsafe)
    auto store = SqliteStore::Open(dir_, 2000);
    if (!store) _exit(2);
    auto nodes = (*store)->ListNodes();
    if (!nodes) _exit(3);
    (void)control::ApplyPlan(**store, plan, *nodes, 1, 2000);
    _exit(0);  // the crash point did not fire
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  ASSERT_EQ(WTERMSIG(status), SIGKILL);

  auto store = SqliteStore::Open(dir_, 3000);
  ASSERT_TRUE(store) << store.error().message;
  auto v = (*store)->GetJob(victim);
  ASSERT_TRUE(v);
  ASSERT_EQ(v->runs.size(), 1U);
  EXPECT_FALSE(v->runs[0].stop_requested);
  EXPECT_EQ(v->reason.code, model::ReasonCode::kRunning);
  for (const auto& ev : v->timeline) EXPECT_NE(ev.event, "Preempting");
  auto w = (*store)->GetJob(waiting);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->state, model::JobState::kPending);
  EXPECT_TRUE(w->runs.empty());

  // Applied again without the crash: all of it.
  ASSERT_TRUE(control::ApplyPlan(**store, plan, *(*store)->ListNodes(), 1, 3000));
  v = (*store)->GetJob(victim);
  EXPECT_TRUE(v->runs[0].stop_requested);
  EXPECT_EQ(v->runs[0].stopped_for, model::StopCause::kPreempted);
  EXPECT_EQ(v->reason.code, model::ReasonCode::kPreempted);
  w = (*store)->GetJob(waiting);
  EXPECT_EQ(w->state, model::JobState::kScheduled);
  EXPECT_EQ(w->runs.size(), 1U);
}

}  // namespace
}  // namespace berth::store
