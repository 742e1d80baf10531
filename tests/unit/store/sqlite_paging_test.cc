// The store's long reads: keyset pages of the job list (stable while jobs
// are added), runs loaded for a whole page, the jobs of a report's window,
// and reads that run on their own connection so a long one never holds up
// a submission.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "control/lifecycle.h"
#include "store/audit_log.h"
#include "store/sqlite_store.h"
#include "unit/builders.h"

namespace berth::store {
namespace {

using namespace std::chrono_literals;

class SqlitePagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-paging-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto s = SqliteStore::Open(dir_, 1000);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    store_ = std::move(*s);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  static model::JobSpec Spec(std::string name, std::string tenant = "default") {
    model::JobSpec s;
    s.name = std::move(name);
    s.tenant = std::move(tenant);
    s.command = {"true"};
    s.resources.gpus = 1;
    return s;
  }
  // `n` jobs in one transaction (an array), returning their ids.
  std::vector<std::int64_t> Many(std::uint32_t n, const std::string& tenant = "default") {
    model::JobSpec spec = Spec("sweep", tenant);
    spec.array = model::JobArray{0, n, {}};
    auto ids = store_->CreateJobs(spec, 1500, "alice");
    EXPECT_TRUE(ids.has_value()) << ids.error().message;
    return ids.value_or(std::vector<std::int64_t>{});
  }
  // Every page of `filter`, `page` jobs at a time.
  std::vector<std::int64_t> AllPages(JobFilter filter, std::size_t page) {
    std::vector<std::int64_t> out;
    filter.limit = page;
    for (;;) {
      auto jobs = store_->ListJobs(filter);
      EXPECT_TRUE(jobs.has_value());
      if (!jobs || jobs->empty()) return out;
      for (const auto& j : *jobs) out.push_back(j.id);
      filter.after_id = jobs->back().id;
    }
  }

  std::filesystem::path dir_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqlitePagingTest, PagesWhileJobsAreAddedNeitherSkipNorRepeat) {
  const auto before = Many(2000);
  // Another thread submits all the while: new jobs get larger ids, so they
  // never push a row of a later page back onto a page already read.
  std::atomic<bool> stop{false};
  std::atomic<int> added{0};
  std::thread writer([&] {
    while (!stop.load()) {
      if (store_->CreateJob(Spec("late"), 1600).has_value()) added.fetch_add(1);
    }
  });
  std::vector<std::int64_t> seen;
  JobFilter filter;
  filter.limit = 97;
  for (;;) {
    auto jobs = store_->ListJobs(filter);
    ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
    if (jobs->empty()) break;
    for (const auto& j : *jobs) seen.push_back(j.id);
    filter.after_id = jobs->back().id;
    // Let the writer land something between pages.
    const int at = added.load();
    for (int i = 0; i < 200 && added.load() == at; ++i) std::this_thread::sleep_for(1ms);
  }
  stop = true;
  writer.join();
  EXPECT_GT(added.load(), 0);
  const std::set<std::int64_t> unique(seen.begin(), seen.end());
  EXPECT_EQ(unique.size(), seen.size()) << "a job was listed twice";
  EXPECT_TRUE(std::is_sorted(seen.rbegin(), seen.rend())) << "pages are newest first";
  for (auto id : before) EXPECT_TRUE(unique.contains(id)) << "job " << id << " was skipped";
}

TEST_F(SqlitePagingTest, APageCarriesEachJobsRunsFromOneQuery) {
  const auto ids = Many(5);
  model::NodeInfo n = tests::H100Node(8);
  ASSERT_TRUE(store_->UpsertNode(n, 1000).has_value());
  sched::Plan plan;
  for (std::uint32_t i = 0; i < 3; ++i) {
    plan.placements.push_back(sched::Placement{ids[i], {{0, "n1", {i}}}});
  }
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(control::ApplyPlan(*store_, plan, *nodes, 1, 2000).has_value());
  auto jobs = store_->ListJobs(JobFilter{});
  ASSERT_TRUE(jobs.has_value());
  ASSERT_EQ(jobs->size(), 5U);
  for (const auto& j : *jobs) {
    const auto one = store_->GetJob(j.id);
    ASSERT_EQ(j.runs.size(), one->runs.size()) << "job " << j.id;
    for (std::size_t r = 0; r < j.runs.size(); ++r) {
      EXPECT_EQ(j.runs[r].run_id, one->runs[r].run_id);
      EXPECT_EQ(j.runs[r].gpu_indices, one->runs[r].gpu_indices);
    }
  }
  JobFilter summaries;
  summaries.with_runs = false;
  // Held in a variable: a range-for over *temporary would read a destroyed
  // Result (GCC 12 does not extend temporaries in a range-for's initializer).
  auto listed = store_->ListJobs(summaries);
  ASSERT_TRUE(listed.has_value());
  for (const auto& j : *listed) EXPECT_TRUE(j.runs.empty());
}

TEST_F(SqlitePagingTest, AnyCursorStillShowsOnlyTheVisibleTenants) {
  ASSERT_TRUE(store_
                  ->ApplyPolicy("queues:\n"
                                "  - {name: default, children: [{name: default}]}\n"
                                "  - {name: vision, children: [{name: default}]}\n"
                                "  - {name: nlp, children: [{name: default}]}\n",
                                "admin", "", 1200)
                  .has_value());
  Many(30, "vision");
  const auto theirs = Many(30, "nlp");
  ASSERT_EQ(theirs.size(), 30U);
  JobFilter filter;
  filter.tenants = model::TenantScope::Of({"vision"});
  // Every page, and pages started at made-up positions (inside and past
  // the other tenant's ids): never one of nlp's jobs.
  for (std::int64_t after :
       {std::int64_t{0}, theirs.back() + 1, theirs[10], std::int64_t{1} << 40}) {
    if (after > 0) filter.after_id = after;
    for (auto id : AllPages(filter, 7)) {
      EXPECT_EQ(store_->GetJob(id)->spec.tenant, "vision") << "after " << after;
    }
  }
  filter.after_id.reset();
  EXPECT_EQ(AllPages(filter, 7).size(), 30U);
  filter.tenants = model::TenantScope();
  EXPECT_TRUE(AllPages(filter, 7).empty());
}

TEST_F(SqlitePagingTest, AReportsJobsLeaveOutThoseFinishedBeforeItsWindow) {
  const auto early = *store_->CreateJob(Spec("early"), 1500);
  ASSERT_TRUE(control::CancelJob(*store_, early, "alice", 2000).has_value());  // finished at 2000
  const auto waiting = *store_->CreateJob(Spec("waiting"), 1600);
  const auto later = *store_->CreateJob(Spec("later"), 9000);
  auto jobs = store_->JobsForWindow(5000, 8000, model::TenantScope::All(), 100);
  ASSERT_TRUE(jobs.has_value());
  std::vector<std::int64_t> ids;
  for (const auto& j : *jobs) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{waiting}));
  EXPECT_EQ(store_->JobsForWindow(1000, 10000, model::TenantScope::All(), 100)->size(), 3U);
  // The cap: at most max_rows rows are read.
  EXPECT_EQ(store_->JobsForWindow(1000, 10000, model::TenantScope::All(), 2)->size(), 2U);
  (void)later;
}

TEST_F(SqlitePagingTest, ALongReadDoesNotHoldUpASubmission) {
  Many(100);
  // The hook runs inside the list's read transaction, on the reading
  // thread: it holds the read open until a submission made meanwhile has
  // committed, or gives up after 10 s. Reading under the writer's mutex, the
  // submission could not commit and the hook would time out.
  std::mutex mu;
  std::condition_variable cv;
  bool submitted = false;
  bool blocked = false;
  std::thread submitter;
  store_->set_read_hook_for_test([&] {
    submitter = std::thread([&] {
      auto id = store_->CreateJob(Spec("during"), 1700);
      EXPECT_TRUE(id.has_value());
      std::lock_guard lock(mu);
      submitted = true;
      cv.notify_all();
    });
    std::unique_lock lock(mu);
    blocked = !cv.wait_for(lock, 10s, [&] { return submitted; });
  });
  auto jobs = store_->ListJobs(JobFilter{});
  store_->set_read_hook_for_test({});
  submitter.join();
  ASSERT_TRUE(jobs.has_value());
  EXPECT_FALSE(blocked) << "the submission waited for the read";
  // The read saw its snapshot: the submission made during it is not there.
  EXPECT_EQ(jobs->size(), 100U);
  EXPECT_EQ(store_->ListJobs(JobFilter{})->size(), 101U);
}

TEST_F(SqlitePagingTest, AuditPagesGoBackInTimeWithoutGapsOrRepeats) {
  auto log = AuditLog::Open(dir_);
  ASSERT_TRUE(log.has_value());
  for (int i = 1; i <= 25; ++i) {
    AuditEntry e;
    e.time_ms = 1000 + i;
    e.actor = "alice";
    e.action = "job.submit";
    e.object = "job/" + std::to_string(i);
    e.outcome = "ok";
    ASSERT_TRUE((*log)->Append(e).has_value());
  }
  AuditFilter filter;
  filter.limit = 10;
  std::vector<std::int64_t> seqs;
  for (;;) {
    auto page = (*log)->Query(filter);
    ASSERT_TRUE(page.has_value());
    if (page->empty()) break;
    EXPECT_TRUE(std::is_sorted(page->begin(), page->end(),
                               [](const auto& a, const auto& b) { return a.seq < b.seq; }));
    // Older pages come after: prepend.
    std::vector<std::int64_t> ids;
    for (const auto& e : *page) ids.push_back(e.seq);
    seqs.insert(seqs.begin(), ids.begin(), ids.end());
    filter.after_seq = page->front().seq;
  }
  std::vector<std::int64_t> want(25);
  for (int i = 0; i < 25; ++i) want[i] = i + 1;
  EXPECT_EQ(seqs, want);
}

}  // namespace
}  // namespace berth::store
