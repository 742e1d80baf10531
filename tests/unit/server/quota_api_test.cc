// The quota request endpoints and the submit-time over-quota refusal in one
// process: bodies read as the policy writes amounts, bad fields named, an
// approval the policy validation refuses leaving everything as it was.
#include "unit/server/api_harness.h"

namespace berth::server {
namespace {

constexpr const char* kPolicy = R"(queues:
  - name: vision
    quota: {gpus: {guaranteed: 4}}
    children:
      - name: training
        quota: {gpus: {guaranteed: 2}}
      - name: strict
        quota: {gpus: {guaranteed: 1}, cpu: {guaranteed: 4}}
        over_quota: reject
)";

class QuotaApiTest : public ApiHarness {
 protected:
  void SetUp() override {
    ApiHarness::SetUp();
    auto v = store_->ApplyPolicy(kPolicy, "root", "", clock_.NowMs());
    ASSERT_TRUE(v.has_value()) << v.error().message;
  }
};

TEST_F(QuotaApiTest, AmountsAreReadAndWrittenAsThePolicyWritesThem) {
  auto a = Post("/v1/quota-requests",
                "queue: vision/training\nresource: gpus\nguaranteed: 2.5\nweight: 3\n"
                "reason: evals\n");
  ASSERT_EQ(a.status, 201) << a.body.dump();
  EXPECT_EQ(a.body["guaranteed"], "2.5");
  EXPECT_EQ(a.body["weight"], 3);
  EXPECT_TRUE(a.body["borrow_limit"].is_null());
  EXPECT_EQ(a.body["filed_by"], "alice");
  auto stored = store_->GetQuotaRequest(a.body["id"].get<std::int64_t>());
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->guaranteed, 2500);

  auto j = Post("/v1/quota-requests",
                R"({"queue": "vision/strict", "resource": "cpu", "guaranteed": "500m",
                    "reason": "x"})",
                "application/json");
  ASSERT_EQ(j.status, 201) << j.body.dump();
  EXPECT_EQ(j.body["guaranteed"], "500m");

  auto list = Get("/v1/quota-requests?state=pending&tenant=vision");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.body["requests"].size(), 2u);
  EXPECT_EQ(list.body["requests"][0]["resource"], "cpu");  // newest first
  EXPECT_EQ(Get("/v1/quota-requests?state=Done").status, 400);
  EXPECT_EQ(Get("/v1/quota-requests/99").status, 404);
}

TEST_F(QuotaApiTest, BadBodiesNameTheFieldAndStoreNothing) {
  struct Case {
    const char* body;
    const char* field;
  };
  for (const Case& c :
       {Case{"queue: vision/training\nguaranteed: 2\nreason: x\n", "resource"},
        Case{"queue: vision/training\nresource: gpus\nguaranteed: lots\n"
             "reason: x\n",
             "guaranteed"},
        Case{"queue: vision/training\nresource: gpus\nguaranteed: 1\ncolour: red\n"
             "reason: x\n",
             "colour"},
        Case{"queue: vision/training\nresource: gpus\nweight: 5000\nreason: x\n", "weight"},
        Case{"queue: vision/nlp\nresource: gpus\nguaranteed: 1\nreason: x\n", "queue"},
        Case{"queue: vision/training\nresource: gpus\nguaranteed: 1\n", "reason"},
        Case{"[1, 2]", "body"}}) {
    auto a = Post("/v1/quota-requests", c.body);
    EXPECT_EQ(a.status, 400) << c.body << a.body.dump();
    EXPECT_EQ(a.body["error"]["field"], c.field) << c.body << a.body.dump();
  }
  EXPECT_TRUE(store_->ListQuotaRequests({})->empty());
}

TEST_F(QuotaApiTest, AnInvalidApprovalIsRefusedAndARejectNeedsAComment) {
  // training 4 + strict 1 is over vision's 4.
  auto a = Post("/v1/quota-requests",
                "queue: vision/training\nresource: gpus\nguaranteed: 4\nreason: x\n");
  ASSERT_EQ(a.status, 201) << a.body.dump();
  const std::string path = "/v1/quota-requests/" + a.body["id"].dump();
  auto approve = Post(path + "/approve", "");
  EXPECT_EQ(approve.status, 400) << approve.body.dump();
  EXPECT_NE(approve.body["error"]["message"].get<std::string>().find("more than the parent's"),
            std::string::npos)
      << approve.body.dump();
  EXPECT_EQ(store_->ActivePolicy()->version, 2);
  EXPECT_EQ(Get(path).body["state"], "Pending");

  auto reject = Post(path + "/reject", "");
  EXPECT_EQ(reject.status, 400);
  EXPECT_EQ(reject.body["error"]["field"], "comment");
  reject = Post(path + "/reject?comment=too%20big", "");
  ASSERT_EQ(reject.status, 200) << reject.body.dump();
  EXPECT_EQ(reject.body["comment"], "too big");
  EXPECT_EQ(Post(path + "/withdraw", "").status, 409);
}

TEST_F(QuotaApiTest, ARejectQueueRefusesASubmissionOverItsGuarantee) {
  auto first = Post("/v1/jobs",
                    "name: a\ntenant: vision\nqueue: strict\ncommand: [\"true\"]\n"
                    "resources: {gpus: 1}\n");
  ASSERT_EQ(first.status, 201) << first.body.dump();
  auto second = Post("/v1/jobs",
                     "name: b\ntenant: vision\nqueue: strict\ncommand: [\"true\"]\n"
                     "resources: {gpus: 1}\n");
  EXPECT_EQ(second.status, 409) << second.body.dump();
  const std::string m = second.body["error"]["message"];
  EXPECT_NE(m.find("queue vision/strict"), std::string::npos) << m;
  EXPECT_NE(m.find("asks for 1 gpus"), std::string::npos) << m;
  EXPECT_NE(m.find("hold 1 of 1 guaranteed"), std::string::npos) << m;
  // CPU counts too: 5 cores are over strict's 4 even without GPUs.
  auto cpu = Post("/v1/jobs",
                  "name: c\ntenant: vision\nqueue: strict\ncommand: [\"true\"]\n"
                  "resources: {cpu: 5}\n");
  EXPECT_EQ(cpu.status, 409) << cpu.body.dump();
  // A borrow queue takes the same job.
  auto training = Post("/v1/jobs",
                       "name: d\ntenant: vision\nqueue: training\n"
                       "command: [\"true\"]\nresources: {gpus: 3}\n");
  EXPECT_EQ(training.status, 201) << training.body.dump();
  EXPECT_EQ(Get("/v1/jobs").body["jobs"].size(), 2u);
}

TEST_F(QuotaApiTest, TheEndpointsAreInTheOpenApiDocument) {
  auto paths = Get("/v1/openapi.json").body["paths"];
  for (const char* p :
       {"/v1/quota-requests", "/v1/quota-requests/{id}", "/v1/quota-requests/{id}/approve",
        "/v1/quota-requests/{id}/reject", "/v1/quota-requests/{id}/withdraw"}) {
    EXPECT_TRUE(paths.contains(p)) << p;
  }
}

}  // namespace
}  // namespace berth::server
