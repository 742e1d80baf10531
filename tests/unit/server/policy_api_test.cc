// The policy endpoints end to end inside one process: a real SqliteStore and
// Controller behind the real Api over loopback.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "unit/server/api_harness.h"

namespace berth::server {
namespace {

using nlohmann::json;

constexpr const char* kVision = R"(queues:
  - name: default
    children:
      - name: default
  - name: vision
    quota:
      gpus: {guaranteed: 8}
    children:
      - name: training
)";

constexpr const char* kDefaultOnly = R"(queues:
  - name: default
    children:
      - name: default
)";

class PolicyApiTest : public ApiHarness {};

TEST_F(PolicyApiTest, TwoAppliesOnTheSameBaseOneWinsAndTheOtherGets409NamingTheWinner) {
  // Both written against version 1, sent at once from two clients.
  std::vector<int> statuses(2);
  std::vector<std::thread> both;
  for (int i = 0; i < 2; ++i) {
    both.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", port_);
      c.set_bearer_token_auth(token_);
      auto r =
          c.Post("/v1/policy?base_version=1", i == 0 ? kVision : kDefaultOnly, "application/yaml");
      statuses[static_cast<std::size_t>(i)] = r ? r->status : 0;
    });
  }
  for (auto& t : both) t.join();
  std::sort(statuses.begin(), statuses.end());
  EXPECT_EQ(statuses, (std::vector<int>{201, 409}));
  EXPECT_EQ(Get("/v1/policy").body["version"], 2);

  // A stale base again: 409 naming the field, the version that landed and
  // the way on; nothing applied.
  Answer stale = Post("/v1/policy?base_version=1", kVision);
  EXPECT_EQ(stale.status, 409) << stale.body.dump();
  EXPECT_EQ(stale.body["error"]["field"], "base_version");
  const std::string message = stale.body["error"].value("message", "");
  EXPECT_NE(message.find("version 2 was applied by alice"), std::string::npos) << message;
  EXPECT_NE(message.find("--base 2"), std::string::npos) << message;
  EXPECT_EQ(Get("/v1/policy").body["version"], 2);
  // On the current base it applies.
  EXPECT_EQ(Post("/v1/policy?base_version=2", kVision).status, 201);
  EXPECT_EQ(Get("/v1/policy").body["version"], 3);
}

TEST_F(PolicyApiTest, ApplyShowListDiffAndRollBack) {
  Answer a = Get("/v1/policy");
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.body["version"], 1);
  EXPECT_EQ(a.body["active"], true);
  EXPECT_EQ(a.body["applied_by"], "berthd");
  EXPECT_EQ(a.body["policy"]["queues"][1]["path"], "default/default");

  clock_.Advance(1000);
  a = Post("/v1/policy?comment=vision%20team", kVision);
  ASSERT_EQ(a.status, 201) << a.body.dump();
  EXPECT_EQ(a.body["version"], 2);

  a = Get("/v1/policy");
  EXPECT_EQ(a.body["version"], 2);
  EXPECT_EQ(a.body["applied_by"], "alice");
  EXPECT_EQ(a.body["comment"], "vision team");
  EXPECT_EQ(a.body["applied_at_ms"], 1'001'000);
  EXPECT_EQ(a.body["yaml"], kVision);
  EXPECT_EQ(a.body["policy"]["queues"][2]["path"], "vision");
  EXPECT_EQ(a.body["policy"]["queues"][2]["quota"]["gpus"]["guaranteed"], 8000);

  a = Get("/v1/policy/diff");
  ASSERT_EQ(a.status, 200) << a.body.dump();
  EXPECT_EQ(a.body["from"], 1);
  EXPECT_EQ(a.body["to"], 2);
  EXPECT_TRUE(a.body["diff"].get<std::string>().starts_with("--- policy v1\n+++ policy v2\n@@"))
      << a.body["diff"];
  EXPECT_EQ(a.body["changes"]["queues_added"], json::array({"vision", "vision/training"}));

  // A job in vision/training keeps the queue in every later policy.
  auto job = Post("/v1/jobs", "name: t\ntenant: vision\nqueue: training\ncommand: [\"true\"]\n");
  ASSERT_EQ(job.status, 201) << job.body.dump();
  EXPECT_EQ(job.body["policy_version"], nullptr);
  a = Post("/v1/policy", kDefaultOnly);
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body["error"]["field"], "queues");
  EXPECT_NE(a.body["error"]["message"].get<std::string>().find("vision/training (1 job)"),
            std::string::npos);
  a = Post("/v1/policy/rollback?to=1", "");
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body["error"]["field"], "to");
  ASSERT_EQ(Post("/v1/jobs/1/cancel", "", "application/json").status, 200);

  a = Post("/v1/policy/rollback?to=1", "");
  ASSERT_EQ(a.status, 201) << a.body.dump();
  EXPECT_EQ(a.body["version"], 3);
  a = Get("/v1/policy/versions");
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.body["active"], 3);
  ASSERT_EQ(a.body["versions"].size(), 3U);
  EXPECT_EQ(a.body["versions"][2]["restores"], 1);
  EXPECT_EQ(a.body["versions"][2]["rolled_back_from"], 2);
  EXPECT_EQ(a.body["versions"][2]["comment"], "rollback to v1");
  EXPECT_FALSE(a.body["versions"][0].contains("yaml"));

  a = Get("/v1/policy/diff?from=1&to=3");
  EXPECT_EQ(a.body["diff"], "");
  a = Get("/v1/policy/versions/2");
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body["active"], false);
  EXPECT_EQ(a.body["yaml"], kVision);

  // Jobs now go only where policy v3 says.
  job = Post("/v1/jobs", "name: t\ntenant: vision\nqueue: training\ncommand: [\"true\"]\n");
  EXPECT_EQ(job.status, 400);
  EXPECT_EQ(job.body["error"]["field"], "queue");
  EXPECT_NE(job.body["error"]["message"].get<std::string>().find("policy v3"), std::string::npos)
      << job.body.dump();
}

TEST_F(PolicyApiTest, DryRunPreviewsWithoutApplying) {
  Answer a = Post("/v1/policy?dry_run=true", kVision);
  ASSERT_EQ(a.status, 200) << a.body.dump();
  EXPECT_EQ(a.body["dry_run"], true);
  EXPECT_EQ(a.body["from"], 1);
  EXPECT_EQ(a.body["to"], 2);
  EXPECT_TRUE(
      a.body["diff"].get<std::string>().starts_with("--- policy v1\n+++ policy v2 (not applied)\n"))
      << a.body["diff"];
  EXPECT_EQ(a.body["changes"]["queues_added"], json::array({"vision", "vision/training"}));
  EXPECT_EQ(Get("/v1/policy").body["version"], 1);
  EXPECT_EQ(Get("/v1/policy/versions").body["versions"].size(), 1U);
  a = Post("/v1/policy?dry_run=true", "queues:\n  - name: x\n    bogus: 1\n");
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body["error"]["field"], "queues[0].bogus");
}

TEST_F(PolicyApiTest, JobsNameNestedQueuesByTheirPathBelowTheTenant) {
  ASSERT_EQ(Post("/v1/policy", R"(queues:
  - name: vision
    children:
      - name: training
        children:
          - name: nlp
)")
                .status,
            201);
  auto job =
      Post("/v1/jobs", "name: t\ntenant: vision\nqueue: training/nlp\ncommand: [\"true\"]\n");
  ASSERT_EQ(job.status, 201) << job.body.dump();
  EXPECT_EQ(job.body["queue"], "training/nlp");
  job = Post("/v1/jobs", "name: t\ntenant: vision\nqueue: nlp\ncommand: [\"true\"]\n");
  EXPECT_EQ(job.status, 400);
  EXPECT_EQ(job.body["error"]["field"], "queue");
  EXPECT_NE(job.body["error"]["message"].get<std::string>().find(
                "queues of tenant vision: training, training/nlp"),
            std::string::npos)
      << job.body.dump();
  for (const char* bad : {"training//nlp", "training/", "/nlp", "Training/nlp"}) {
    job = Post("/v1/jobs",
               fmt::format("name: t\ntenant: vision\nqueue: \"{}\"\ncommand: [\"true\"]\n", bad));
    EXPECT_EQ(job.status, 400) << bad;
    EXPECT_EQ(job.body["error"]["field"], "queue") << bad;
  }
  // Removing the nested queue is guarded like any other.
  auto a = Post("/v1/policy", "queues:\n  - name: vision\n    children:\n      - name: training\n");
  EXPECT_EQ(a.status, 400);
  EXPECT_NE(a.body["error"]["message"].get<std::string>().find("vision/training/nlp (1 job)"),
            std::string::npos);
}

TEST_F(PolicyApiTest, BadRequestsChangeNothing) {
  Answer a = Post("/v1/policy", "queues:\n  - name: Bad Name\n");
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body["error"]["field"], "queues[0].name");
  a = Post("/v1/policy", "  \n");
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body["error"]["field"], "body");
  a = Post("/v1/policy/rollback", "");
  EXPECT_EQ(a.body["error"]["field"], "to");
  a = Post("/v1/policy/rollback?to=x", "");
  EXPECT_EQ(a.status, 400);
  a = Post("/v1/policy/rollback?to=7", "");
  EXPECT_EQ(a.status, 404);
  a = Get("/v1/policy/versions/7");
  EXPECT_EQ(a.status, 404);
  a = Get("/v1/policy/diff?from=0");
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body["error"]["field"], "from");
  a = Get("/v1/policy/diff?to=9");
  EXPECT_EQ(a.status, 404);
  EXPECT_EQ(a.body["error"]["field"], "to");
  EXPECT_EQ(Get("/v1/policy/versions").body["versions"].size(), 1U);
  // Version 1 diffs against the empty document.
  a = Get("/v1/policy/diff");
  EXPECT_EQ(a.body["from"], 0);
  EXPECT_TRUE(
      a.body["diff"].get<std::string>().starts_with("--- policy v0\n+++ policy v1\n@@ -0,0"))
      << a.body["diff"];
  // The OpenAPI document still parses and lists the new paths.
  auto doc = Get("/v1/openapi.json");
  EXPECT_TRUE(doc.body["paths"].contains("/v1/policy/diff"));
}

}  // namespace
}  // namespace berth::server
