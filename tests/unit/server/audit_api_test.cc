// The API's audit records in one process: request ids honoured or made,
// a policy dry run left out, and a GPU Berth cordons on its own recorded
// with actor "berth".
#include "api/audit.h"
#include "store/audit_log.h"
#include "unit/server/api_harness.h"

namespace berth::server {
namespace {

class AuditApiTest : public ApiHarness {
 protected:
  void SetUp() override {
    ApiHarness::SetUp();
    auto log = store::AuditLog::Open(dir_);
    ASSERT_TRUE(log.has_value()) << log.error().message;
    audit_ = std::move(*log);
    api_->set_audit(audit_.get());
  }
  void TearDown() override {
    ApiHarness::TearDown();
    audit_.reset();
  }
  std::vector<store::AuditEntry> Records() {
    auto r = audit_->Query(store::AuditFilter{});
    EXPECT_TRUE(r.has_value());
    return r.value_or(std::vector<store::AuditEntry>{});
  }
  std::unique_ptr<store::AuditLog> audit_;
};

TEST_F(AuditApiTest, AFloodOfBadTokensLeavesOneRecordPerSourceAndMinuteWithTheCount) {
  httplib::Client forger("127.0.0.1", port_);
  for (int i = 0; i < 300; ++i) {
    auto res = forger.Get("/v1/nodes", {{"Authorization", "Bearer berth_x" + std::to_string(i) +
                                                              "_secretsecretsecret"}});
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 401);
  }
  auto records = Records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].outcome, "denied: Unauthenticated");
  // A minute later the next refusal is recorded with the count of the rest.
  clock_.Advance(61'000);
  ASSERT_EQ(forger.Get("/v1/nodes")->status, 401);
  records = Records();
  ASSERT_EQ(records.size(), 3u);
  bool summary = false;
  for (const auto& r : records) {
    if (r.action == "auth.refused") {
      summary = true;
      EXPECT_NE(r.after.find("\"refused\":299"), std::string::npos) << r.after;
    }
  }
  EXPECT_TRUE(summary);
}

TEST_F(AuditApiTest, RequestIdsAreHonouredWhenSaneAndMadeOtherwise) {
  auto res = client_->Post("/v1/jobs/7/cancel", {{"X-Request-Id", "trace-42.a"}}, "", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("X-Request-Id"), "trace-42.a");
  res =
      client_->Post("/v1/jobs/7/cancel", {{"X-Request-Id", "no spaces; please"}}, "", "text/plain");
  ASSERT_TRUE(res);
  const std::string made = res->get_header_value("X-Request-Id");
  EXPECT_EQ(made.size(), 24u) << made;
  auto records = Records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].request_id, "trace-42.a");
  EXPECT_EQ(records[0].outcome, "denied: NotFound");
  EXPECT_EQ(records[0].object, "job/7");
  EXPECT_EQ(records[0].time_ms, clock_.NowMs());
  EXPECT_EQ(records[1].request_id, made);
  // A read leaves no record, but carries an id too.
  res = client_->Get("/v1/jobs");
  ASSERT_TRUE(res);
  EXPECT_FALSE(res->get_header_value("X-Request-Id").empty());
  EXPECT_EQ(Records().size(), 2u);
}

TEST_F(AuditApiTest, TheEndpointsAreInTheOpenApiDocument) {
  auto paths = Get("/v1/openapi.json").body["paths"];
  EXPECT_TRUE(paths.contains("/v1/audit"));
  EXPECT_TRUE(paths.contains("/v1/audit/verify"));
}

TEST_F(AuditApiTest, ASubmitRecordsTheJobButNotItsEnv) {
  auto a = Post("/v1/jobs", "name: t\ncommand: [\"true\"]\nenv: {TOKEN: s3cret}\n");
  ASSERT_EQ(a.status, 201) << a.body.dump();
  auto records = Records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].actor, "alice");
  EXPECT_EQ(records[0].action, "job.submit");
  EXPECT_EQ(records[0].object, "job/" + a.body["id"].dump());
  EXPECT_EQ(records[0].tenant, "default");
  EXPECT_EQ(records[0].outcome, "ok");
  EXPECT_EQ(records[0].after.find("s3cret"), std::string::npos) << records[0].after;
  EXPECT_NE(records[0].after.find("\"name\":\"t\""), std::string::npos) << records[0].after;
}

TEST_F(AuditApiTest, APolicyDryRunLeavesNoRecordAndAnApplyDoes) {
  const char* policy = "queues:\n  - name: default\n    children:\n      - name: default\n";
  ASSERT_EQ(Post("/v1/policy?dry_run=true", policy).status, 200);
  EXPECT_TRUE(Records().empty());
  ASSERT_EQ(Post("/v1/policy", policy).status, 201);
  auto records = Records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].action, "policy.apply");
  EXPECT_EQ(records[0].object, "policy/v2");
  EXPECT_EQ(records[0].before, R"({"version":1})");
}

// Node n1 with one H100, GPU-0, healthy.
model::NodeInfo NodeWithOneGpu() {
  model::NodeInfo info;
  info.name = "n1";
  info.cpus = 8;
  model::Gpu gpu;
  gpu.index = 0;
  gpu.uuid = "GPU-0";
  gpu.model = "H100-80GB";
  gpu.memory_bytes = 80ULL << 30;
  info.gpus.push_back(gpu);
  return info;
}

TEST_F(AuditApiTest, AnAutomaticGpuCordonIsRecordedAsBerth) {
  ASSERT_TRUE(store_->UpsertNode(NodeWithOneGpu(), clock_.NowMs()).has_value());
  berth::v1::GpuHealthChanged msg;
  msg.set_index(0);
  msg.set_uuid("GPU-0");
  msg.set_health("unhealthy");
  msg.set_health_detail("XID 79: fell off the bus");
  ASSERT_TRUE(controller_->OnGpuHealth("n1", msg).has_value());
  auto records = Records();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].actor, "berth");
  EXPECT_EQ(records[0].action, "gpu.cordon");
  EXPECT_EQ(records[0].object, "gpu/n1/0");
  EXPECT_EQ(records[0].outcome, "ok");
  EXPECT_NE(records[0].after.find("XID 79"), std::string::npos) << records[0].after;
  auto verdict = audit_->Verify();
  ASSERT_TRUE(verdict.has_value());
  EXPECT_TRUE(verdict->ok) << verdict->problem;
}

// A health berthd does not know (an agent of another version) keeps the GPU
// out of placement, says why, and neither cordons it nor records a cordon.
TEST_F(AuditApiTest, AnUnknownGpuHealthTakesTheGpuOutOfPlacementWithoutACordon) {
  ASSERT_TRUE(store_->UpsertNode(NodeWithOneGpu(), clock_.NowMs()).has_value());
  berth::v1::GpuHealthChanged msg;
  msg.set_index(0);
  msg.set_uuid("GPU-0");
  msg.set_health("degraded");
  ASSERT_TRUE(controller_->OnGpuHealth("n1", msg).has_value());
  EXPECT_TRUE(Records().empty());
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.has_value());
  ASSERT_EQ(nodes->size(), 1u);
  const store::NodeRecord& n = (*nodes)[0];
  EXPECT_TRUE(n.gpu_cordons.empty());
  ASSERT_EQ(n.info.gpus.size(), 1u);
  EXPECT_EQ(n.info.gpus[0].health, model::Health::kUnhealthy);
  EXPECT_NE(n.info.gpus[0].health_detail.find("'degraded'"), std::string::npos)
      << n.info.gpus[0].health_detail;
  // The agent's next "healthy" makes it schedulable again: no cordon to lift.
  msg.set_health("healthy");
  ASSERT_TRUE(controller_->OnGpuHealth("n1", msg).has_value());
  nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.has_value());
  EXPECT_EQ((*nodes)[0].info.gpus[0].health, model::Health::kHealthy);
  EXPECT_TRUE((*nodes)[0].gpu_cordons.empty());
}

}  // namespace
}  // namespace berth::server
