// GET /v1/jobs/{id}/why end to end inside one process: a real SqliteStore and
// Controller behind the real Api on a loopback httplib server.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "unit/server/api_harness.h"

namespace berth::server {
namespace {

using nlohmann::json;

class WhyApiTest : public ApiHarness {};

TEST_F(WhyApiTest, RendersTheReasonInTheAskedLanguageWithTheEventsThatExplainIt) {
  auto job = Post("/v1/jobs", "name: resnet50\ncommand: [\"true\"]\nresources: {gpus: 2}\n");
  ASSERT_EQ(job.status, 201) << job.body.dump();
  std::int64_t id = job.body["id"];
  std::string path = "/v1/jobs/" + std::to_string(id) + "/why";

  // No nodes yet: the pass leaves it pending with a reason.
  ASSERT_TRUE(controller_->RunPass().has_value());
  Answer en = Get(path);
  ASSERT_EQ(en.status, 200) << en.body.dump();
  EXPECT_EQ(en.body["id"], id);
  EXPECT_EQ(en.body["name"], "resnet50");
  EXPECT_EQ(en.body["state"], "Pending");
  EXPECT_EQ(en.body["lang"], "en");
  EXPECT_EQ(en.body["reason"]["code"], "NoNodes");
  EXPECT_EQ(en.body["reason"]["message"],
            "no nodes are registered; start berth-agent on a GPU host");
  // A hint only where the reason carries one (NoNodeFits, Fragmented).
  EXPECT_FALSE(en.body["reason"].contains("hint")) << en.body.dump();
  // Submitted and Scheduled-style events do not explain anything here.
  EXPECT_EQ(en.body["timeline"], json::array());

  Answer zh = Get(path + "?lang=zh");
  ASSERT_EQ(zh.status, 200);
  EXPECT_EQ(zh.body["lang"], "zh");
  EXPECT_EQ(zh.body["reason"]["code"], "NoNodes");
  EXPECT_EQ(zh.body["reason"]["counts"], en.body["reason"]["counts"]);
  EXPECT_EQ(zh.body["reason"]["message"],
            "集群里还没有注册任何节点；请在 GPU 主机上启动 berth-agent");

  ASSERT_EQ(Post("/v1/jobs/" + std::to_string(id) + "/cancel", "").status, 200);
  zh = Get(path + "?lang=zh");
  EXPECT_EQ(zh.body["state"], "Cancelled");
  EXPECT_EQ(zh.body["reason"]["code"], "Cancelled");
  EXPECT_EQ(zh.body["reason"]["detail"], "alice");
  EXPECT_EQ(zh.body["reason"]["message"], "已被 alice 取消");
  ASSERT_EQ(zh.body["timeline"].size(), 1u) << zh.body.dump();
  EXPECT_EQ(zh.body["timeline"][0]["event"], "Cancelled");

  // The job object itself keeps its English message.
  EXPECT_EQ(Get("/v1/jobs/" + std::to_string(id)).body["reason"]["message"], "cancelled by alice");
}

TEST_F(WhyApiTest, BadLanguageIdAndUnknownJob) {
  auto job = Post("/v1/jobs", "name: x\ncommand: [\"true\"]\n");
  ASSERT_EQ(job.status, 201);
  std::string path = "/v1/jobs/" + std::to_string(job.body["id"].get<std::int64_t>()) + "/why";
  for (const char* bad : {"fr", "", "chinese"}) {
    Answer a = Get(path + "?lang=" + bad);
    EXPECT_EQ(a.status, 400) << bad;
    EXPECT_EQ(a.body["error"]["field"], "lang") << bad;
    std::string message = a.body["error"]["message"];
    EXPECT_NE(message.find("en or zh"), std::string::npos) << message;
  }
  EXPECT_EQ(Get(path + "?lang=zh_CN.UTF-8").status, 200);
  EXPECT_EQ(Get("/v1/jobs/999/why").status, 404);
  Answer a = Get("/v1/jobs/abc/why");
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body["error"]["field"], "id");
  EXPECT_TRUE(Get("/v1/openapi.json").body["paths"].contains("/v1/jobs/{id}/why"));
}

}  // namespace
}  // namespace berth::server
