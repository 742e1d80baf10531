// GET /v1/queues as the API renders it (QueueUsageJson): each queue's GPU
// quota against what its live runs hold, counted up the queue's chain, for
// the caller's tenants only.
#include "api/queue_usage.h"

#include <gtest/gtest.h>

#include <string>

namespace berth::server {
namespace {

constexpr const char* kQueuesPolicy = R"(queues:
  - name: default
    children:
      - name: default
  - name: vision
    quota:
      gpus: {guaranteed: 8, lending_limit: 2}
    children:
      - name: training
        quota:
          gpus: {guaranteed: 2, borrow_limit: 4}
        children:
          - name: nlp
)";

store::JobRecord RunningJob(std::string tenant, std::string queue,
                            std::vector<std::pair<std::uint32_t, model::RunState>> runs,
                            std::uint32_t share_millis = 0) {
  static std::int64_t next = 1;
  store::JobRecord j;
  j.id = next++;
  j.spec.tenant = std::move(tenant);
  j.spec.queue = std::move(queue);
  j.state = model::JobState::kRunning;
  for (const auto& [gpus, state] : runs) {
    store::RunRecord r;
    for (std::uint32_t g = 0; g < gpus; ++g) r.gpu_indices.push_back(g);
    r.gpu_share_millis = share_millis;
    r.state = state;
    j.runs.push_back(std::move(r));
  }
  return j;
}

const nlohmann::json& QueueEntry(const nlohmann::json& all, std::string_view path) {
  for (const auto& q : all) {
    if (q["queue"] == path) return q;
  }
  static const nlohmann::json kMissing;
  ADD_FAILURE() << path << " is not in the answer";
  return kMissing;
}

TEST(QueueUsage, RunsCountUpTheChainAndBorrowingIsWhatPassesTheGuarantee) {
  auto policy = model::ParsePolicy(kQueuesPolicy);
  ASSERT_TRUE(policy.has_value()) << policy.error().message;
  const std::vector<store::JobRecord> holders = {
      // A gang of two 2-GPU replicas in training, one earlier run exited.
      RunningJob("vision", "training",
                 {{2, model::RunState::kRunning},
                  {2, model::RunState::kStarting},
                  {2, model::RunState::kExited}}),
      // A half-GPU slice in nlp, under training.
      RunningJob("vision", "training/nlp", {{1, model::RunState::kRunning}}, 500),
      RunningJob("default", "default", {{1, model::RunState::kRunning}}),
  };
  const auto all = QueueUsageJson(*policy, holders, model::TenantScope::All(), "");
  ASSERT_EQ(all.size(), 5U);

  const auto& training = QueueEntry(all, "vision/training");
  EXPECT_EQ(training["parent"], "vision");
  EXPECT_EQ(training["used_mgpu"], 4500);
  EXPECT_EQ(training["running_jobs"], 2);
  EXPECT_EQ(training["guaranteed_mgpu"], 2000);
  EXPECT_EQ(training["borrow_limit_mgpu"], 4000);
  EXPECT_EQ(training["borrowed_mgpu"], 2500);
  EXPECT_EQ(training["idle_guaranteed_mgpu"], 0);
  EXPECT_EQ(training["lendable_mgpu"], 0);

  const auto& vision = QueueEntry(all, "vision");
  EXPECT_TRUE(vision["parent"].is_null());
  EXPECT_EQ(vision["used_mgpu"], 4500);
  EXPECT_EQ(vision["guaranteed_mgpu"], 8000);
  EXPECT_EQ(vision["borrowed_mgpu"], 0);
  EXPECT_EQ(vision["idle_guaranteed_mgpu"], 3500);
  EXPECT_EQ(vision["lendable_mgpu"], 3500);  // its never-lent 2 GPUs are in use

  const auto& nlp = QueueEntry(all, "vision/training/nlp");
  EXPECT_EQ(nlp["used_mgpu"], 500);
  EXPECT_TRUE(nlp["guaranteed_mgpu"].is_null());
  EXPECT_TRUE(nlp["borrowed_mgpu"].is_null());

  EXPECT_EQ(QueueEntry(all, "default/default")["used_mgpu"], 1000);
  EXPECT_EQ(QueueEntry(all, "default")["used_mgpu"], 1000);
}

TEST(QueueUsage, ACallerSeesOnlyItsTenantsQueues) {
  auto policy = model::ParsePolicy(kQueuesPolicy);
  ASSERT_TRUE(policy.has_value()) << policy.error().message;
  const std::vector<store::JobRecord> holders = {
      RunningJob("default", "default", {{1, model::RunState::kRunning}})};
  const auto vision = QueueUsageJson(*policy, holders, model::TenantScope::Of({"vision"}), "");
  ASSERT_EQ(vision.size(), 3U);
  for (const auto& q : vision) EXPECT_EQ(q["tenant"], "vision");
  // An unused queue with a guarantee lends all of it above the never-lent part.
  EXPECT_EQ(QueueEntry(vision, "vision")["lendable_mgpu"], 6000);

  EXPECT_TRUE(
      QueueUsageJson(*policy, holders, model::TenantScope::Of({"vision"}), "default").empty());
  EXPECT_TRUE(QueueUsageJson(*policy, holders, model::TenantScope(), "").empty());
  EXPECT_EQ(QueueUsageJson(*policy, holders, model::TenantScope::All(), "default").size(), 2U);
}

}  // namespace
}  // namespace berth::server
