#include "api/policy_diff.h"

#include <gtest/gtest.h>

namespace berth::server {
namespace {

using nlohmann::json;

TEST(UnifiedDiff, EqualTextsGiveNothing) {
  EXPECT_EQ(UnifiedDiff("a\nb\n", "a\nb\n", "x", "y"), "");
}

TEST(UnifiedDiff, OneChangeWithContext) {
  std::string from = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
  std::string to = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
  EXPECT_EQ(UnifiedDiff(from, to, "policy v1", "policy v2"),
            "--- policy v1\n+++ policy v2\n"
            "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
}

TEST(UnifiedDiff, FarApartChangesMakeTwoHunksAndNearOnesOne) {
  std::string from;
  std::string to;
  for (int i = 1; i <= 20; ++i) {
    from += std::to_string(i) + "\n";
    to += (i == 2 ? "two" : i == 18 ? "eighteen" : std::to_string(i)) + "\n";
  }
  std::string diff = UnifiedDiff(from, to, "a", "b");
  EXPECT_EQ(diff,
            "--- a\n+++ b\n"
            "@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n"
            "@@ -15,6 +15,6 @@\n 15\n 16\n 17\n-18\n+eighteen\n 19\n 20\n");
  // Changes 6 lines apart (within 2 x 3 of context) share a hunk.
  std::string near = UnifiedDiff("a\nb\nc\nd\ne\nf\ng\nh\n", "A\nb\nc\nd\ne\nf\ng\nH\n", "a", "b");
  EXPECT_EQ(near, "--- a\n+++ b\n@@ -1,8 +1,8 @@\n-a\n+A\n b\n c\n d\n e\n f\n g\n-h\n+H\n");
}

TEST(UnifiedDiff, InsertionsDeletionsAndEmptySides) {
  EXPECT_EQ(UnifiedDiff("", "a\nb\n", "a", "b"), "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+a\n+b\n");
  EXPECT_EQ(UnifiedDiff("a\nb\n", "", "a", "b"), "--- a\n+++ b\n@@ -1,2 +0,0 @@\n-a\n-b\n");
  EXPECT_EQ(UnifiedDiff("a\nc\n", "a\nb\nc\n", "a", "b"),
            "--- a\n+++ b\n@@ -1,2 +1,3 @@\n a\n+b\n c\n");
}

TEST(PolicyChanges, QueuesAndQuotas) {
  auto from = model::ParsePolicy(R"(queues:
  - name: vision
    quota:
      gpus: {guaranteed: 8}
    children:
      - name: training
      - name: old
)");
  auto to = model::ParsePolicy(R"(queues:
  - name: vision
    pools: [default]
    quota:
      gpus: {guaranteed: 16, borrow_limit: 4}
      memory: {guaranteed: 1Ti}
    children:
      - name: training
      - name: nlp
)");
  ASSERT_TRUE(from.has_value()) << from.error().field << ": " << from.error().message;
  ASSERT_TRUE(to.has_value()) << to.error().field << ": " << to.error().message;
  json c = PolicyChanges(*from, *to);
  EXPECT_EQ(c["queues_added"], json::array({"vision/nlp"}));
  EXPECT_EQ(c["queues_removed"], json::array({"vision/old"}));
  EXPECT_EQ(c["quota_changes"], json::parse(R"([
              {"queue": "vision", "resource": "gpus", "field": "guaranteed", "from": 8000, "to": 16000},
              {"queue": "vision", "resource": "gpus", "field": "borrow_limit", "from": null, "to": 4000},
              {"queue": "vision", "resource": "memory", "field": "guaranteed", "from": 0, "to": 1099511627776}
            ])"));
  EXPECT_EQ(c["queue_changes"], json::parse(R"([
              {"queue": "vision", "field": "pools", "from": [], "to": ["default"]}])"));
  EXPECT_EQ(c["settings_changed"], json::array());
  EXPECT_EQ(PolicyChanges(*to, *to)["quota_changes"], json::array());
}

TEST(PolicyChanges, ARetryCapIsATopLevelSettingOrAQueueField) {
  auto from = model::ParsePolicy("queues:\n  - name: vision\n    children: [{name: training}]\n");
  auto to = model::ParsePolicy(
      "retry: {max_attempts: 2}\nqueues:\n  - name: vision\n"
      "    children: [{name: training, retry: {max_attempts: 1}}]\n");
  ASSERT_TRUE(from.has_value()) << from.error().field << ": " << from.error().message;
  ASSERT_TRUE(to.has_value()) << to.error().field << ": " << to.error().message;
  json c = PolicyChanges(*from, *to);
  EXPECT_EQ(c["settings_changed"], json::array({"retry"}));
  EXPECT_EQ(c["queue_changes"], json::parse(R"([
              {"queue": "vision/training", "field": "retry_max_attempts", "from": null, "to": 1}])"));
  EXPECT_EQ(PolicyChanges(*to, *to)["queue_changes"], json::array());
  EXPECT_EQ(PolicyChanges(*to, *to)["settings_changed"], json::array());
}

}  // namespace
}  // namespace berth::server
