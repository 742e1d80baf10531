// The /v1/services endpoints in one process, through the real Api and its
// authorization layer: who may apply, read and change a service, what
// another tenant's member and an anonymous caller get, the queue and
// per-tenant limits, and the audit record each change commits with itself.
#include "model/json.h"
#include "model/service.h"
#include "store/audit_log.h"
#include "unit/server/api_harness.h"

namespace berth::server {
namespace {

using nlohmann::json;

constexpr const char* kPolicy = R"(queues:
  - name: ml
    children:
      - name: serving
        kind: inference
      - name: training
  - name: vision
    children:
      - name: online
        kind: inference
)";

constexpr const char* kCoder = R"(name: coder
tenant: ml
queue: serving
command: [serve, --port, "8000"]
replicas: {min: 1, max: 3}
resources: {gpus: 1}
)";

class ServiceApiTest : public ApiHarness {
 protected:
  void SetUp() override {
    ApiHarness::SetUp();
    auto v = store_->ApplyPolicy(kPolicy, "root", "", clock_.NowMs());
    ASSERT_TRUE(v.has_value()) << v.error().message;
    bob_ = Client("bob", {{"ml", store::Role::kMember}});
    vera_ = Client("vera", {{"ml", store::Role::kViewer}});
    carol_ = Client("carol", {{"vision", store::Role::kMember}});
    anon_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
  }
  std::unique_ptr<httplib::Client> Client(const std::string& name,
                                          std::map<std::string, store::Role> tenants) {
    store::Identity id;
    id.name = name;
    id.tenants = std::move(tenants);
    EXPECT_TRUE(identities_->CreateIdentity(id).has_value());
    auto token = identities_->CreateToken(name, "tests", std::nullopt, "tests", clock_.NowMs());
    EXPECT_TRUE(token.has_value());
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    if (token) c->set_bearer_token_auth(token->token);
    return c;
  }
  static Answer Of(const httplib::Result& res) {
    if (!res) return {};
    return {res->status, json::parse(res->body, nullptr, false)};
  }
  std::vector<std::string> ServiceAudit() {
    std::vector<std::string> out;
    auto log = store::AuditLog::Open(dir_);
    EXPECT_TRUE(log.has_value());
    if (!log) return out;
    store::AuditFilter all;
    all.limit = 1000;
    auto records = (*log)->Query(all);
    EXPECT_TRUE(records.has_value());
    for (const auto& r : *records) {
      if (r.action.starts_with("service.")) {
        out.push_back(r.action + " " + r.object + " by " + r.actor + " " + r.outcome);
      }
    }
    return out;
  }

  std::unique_ptr<httplib::Client> bob_, vera_, carol_, anon_;
};

TEST_F(ServiceApiTest, AMemberAppliesShowsScalesRollsBackAndDeletes) {
  auto created = Of(bob_->Post("/v1/services", kCoder, "application/yaml"));
  ASSERT_EQ(created.status, 201) << created.body.dump();
  EXPECT_EQ(created.body["applied"], "created");
  EXPECT_EQ(created.body["revision"], 1);
  EXPECT_EQ(created.body["created_by"], "bob");
  EXPECT_EQ(created.body["status"]["desired"], 1);
  EXPECT_EQ(created.body["status"]["ready"], 0);
  EXPECT_NE(created.body["status"]["note"].get<std::string>().find("not run"), std::string::npos);
  EXPECT_EQ(created.body["spec"]["replicas"]["max"], 3);

  // The same spec as JSON is the same spec: nothing changes.
  auto same = Of(bob_->Post("/v1/services", model::ToJson(*model::ParseServiceSpec(kCoder)).dump(),
                            "application/json"));
  ASSERT_EQ(same.status, 200) << same.body.dump();
  EXPECT_EQ(same.body["applied"], "unchanged");
  EXPECT_EQ(same.body["revision"], 1);

  auto scaled = Of(bob_->Post("/v1/services/ml/coder/scale?min=2&max=5", "", "text/plain"));
  ASSERT_EQ(scaled.status, 200) << scaled.body.dump();
  EXPECT_EQ(scaled.body["revision"], 2);
  EXPECT_EQ(scaled.body["status"]["desired"], 2);
  EXPECT_EQ(scaled.body["spec"]["replicas"], (json{{"min", 2}, {"max", 5}}));

  auto rolled = Of(bob_->Post("/v1/services/ml/coder/rollback", "", "text/plain"));
  ASSERT_EQ(rolled.status, 200) << rolled.body.dump();
  EXPECT_EQ(rolled.body["revision"], 3);
  EXPECT_EQ(rolled.body["spec"]["replicas"], (json{{"min", 1}, {"max", 3}}));
  EXPECT_EQ(rolled.body["revisions"][0]["change"], "rollback");
  EXPECT_EQ(rolled.body["revisions"][0]["restores"], 1);

  auto shown = Of(vera_->Get("/v1/services/ml/coder"));
  ASSERT_EQ(shown.status, 200) << shown.body.dump();
  EXPECT_EQ(shown.body["revisions"].size(), 3u);

  auto gone = Of(bob_->Delete("/v1/services/ml/coder"));
  ASSERT_EQ(gone.status, 200) << gone.body.dump();
  EXPECT_EQ(Of(bob_->Get("/v1/services/ml/coder")).status, 404);

  EXPECT_EQ(ServiceAudit(),
            (std::vector<std::string>{"service.apply service/ml/coder by bob ok",
                                      "service.scale service/ml/coder by bob ok",
                                      "service.rollback service/ml/coder by bob ok",
                                      "service.delete service/ml/coder by bob ok"}));
}

TEST_F(ServiceApiTest, AnotherTenantGetsWhatItGetsForAnotherTenantsJob) {
  ASSERT_EQ(Of(bob_->Post("/v1/services", kCoder, "application/yaml")).status, 201);
  // A job of tenant ml, for the answer another tenant gets for it.
  model::JobSpec job;
  job.name = "j";
  job.tenant = "ml";
  job.queue = "training";
  job.command = {"true"};
  auto id = store_->CreateJob(job, clock_.NowMs(), "bob");
  ASSERT_TRUE(id.has_value());
  auto job_answer = Of(carol_->Get("/v1/jobs/" + std::to_string(*id)));
  EXPECT_EQ(job_answer.status, 404);

  auto show = Of(carol_->Get("/v1/services/ml/coder"));
  auto missing = Of(bob_->Get("/v1/services/ml/nothing"));
  EXPECT_EQ(show.status, 404);
  EXPECT_EQ(show.body["error"]["code"], job_answer.body["error"]["code"]);
  EXPECT_EQ(show.body["error"]["message"], "service ml/coder not found");
  EXPECT_EQ(missing.body["error"]["message"], "service ml/nothing not found");
  EXPECT_EQ(Of(carol_->Post("/v1/services/ml/coder/scale?max=9", "", "text/plain")).status, 404);
  EXPECT_EQ(Of(carol_->Post("/v1/services/ml/coder/rollback", "", "text/plain")).status, 404);
  EXPECT_EQ(Of(carol_->Delete("/v1/services/ml/coder")).status, 404);
  auto list = Of(carol_->Get("/v1/services"));
  ASSERT_EQ(list.status, 200);
  EXPECT_TRUE(list.body["services"].empty());
  // Nothing changed.
  EXPECT_EQ(store_->GetService("ml", "coder")->revision, 1);
  // Applying into a tenant it is not a member of: 403, as a job submission.
  auto apply = Of(carol_->Post("/v1/services", kCoder, "application/yaml"));
  EXPECT_EQ(apply.status, 403);
  EXPECT_EQ(apply.body["error"]["field"], "tenant");
}

TEST_F(ServiceApiTest, AnonymousIs401AndAViewerCannotWrite) {
  ASSERT_EQ(Of(bob_->Post("/v1/services", kCoder, "application/yaml")).status, 201);
  EXPECT_EQ(Of(anon_->Get("/v1/services")).status, 401);
  EXPECT_EQ(Of(anon_->Get("/v1/services/ml/coder")).status, 401);
  EXPECT_EQ(Of(anon_->Post("/v1/services", kCoder, "application/yaml")).status, 401);
  EXPECT_EQ(Of(anon_->Delete("/v1/services/ml/coder")).status, 401);

  EXPECT_EQ(Of(vera_->Get("/v1/services/ml/coder")).status, 200);
  EXPECT_EQ(Of(vera_->Get("/v1/services")).body["services"].size(), 1u);
  EXPECT_EQ(Of(vera_->Post("/v1/services", kCoder, "application/yaml")).status, 403);
  EXPECT_EQ(Of(vera_->Post("/v1/services/ml/coder/scale?max=9", "", "text/plain")).status, 403);
  EXPECT_EQ(Of(vera_->Post("/v1/services/ml/coder/rollback", "", "text/plain")).status, 403);
  EXPECT_EQ(Of(vera_->Delete("/v1/services/ml/coder")).status, 403);
  EXPECT_EQ(store_->GetService("ml", "coder")->revision, 1);
}

TEST_F(ServiceApiTest, AQueueThatIsNotInferenceIsRefusedNamingQueue) {
  std::string training = kCoder;
  training.replace(training.find("queue: serving"), 14, "queue: training");
  auto a = Of(bob_->Post("/v1/services", training, "application/yaml"));
  ASSERT_EQ(a.status, 400) << a.body.dump();
  EXPECT_EQ(a.body["error"]["field"], "queue");
  const std::string msg = a.body["error"]["message"];
  EXPECT_NE(msg.find("training queue"), std::string::npos) << msg;
  EXPECT_NE(msg.find("inference: serving"), std::string::npos) << msg;

  std::string unknown = kCoder;
  unknown.replace(unknown.find("queue: serving"), 14, "queue: nowhere");
  auto u = Of(bob_->Post("/v1/services", unknown, "application/yaml"));
  ASSERT_EQ(u.status, 400) << u.body.dump();
  EXPECT_EQ(u.body["error"]["field"], "queue");
  EXPECT_NE(u.body["error"]["message"].get<std::string>().find("not in the active policy"),
            std::string::npos);
  EXPECT_EQ(store_->GetService("ml", "coder").error().code, Code::kNotFound);
  EXPECT_TRUE(ServiceAudit().empty());
}

TEST_F(ServiceApiTest, ABadSpecIs400NamingTheField) {
  auto a = Of(bob_->Post("/v1/services",
                         "name: coder\ntenant: ml\nqueue: serving\ncommand: [x]\n"
                         "replicas: {min: 4, max: 2}\n",
                         "application/yaml"));
  ASSERT_EQ(a.status, 400) << a.body.dump();
  EXPECT_EQ(a.body["error"]["field"].get<std::string>().rfind("replicas", 0), 0u) << a.body.dump();
  auto s = Of(bob_->Post("/v1/services", kCoder, "application/yaml"));
  ASSERT_EQ(s.status, 201);
  auto bad = Of(bob_->Post("/v1/services/ml/coder/scale?min=5&max=2", "", "text/plain"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "min");
  auto none = Of(bob_->Post("/v1/services/ml/coder/scale", "", "text/plain"));
  EXPECT_EQ(none.status, 400);
  auto first = Of(bob_->Post("/v1/services/ml/coder/rollback", "", "text/plain"));
  EXPECT_EQ(first.status, 409);
  EXPECT_EQ(first.body["error"]["field"], "revision");
}

TEST_F(ServiceApiTest, ATenantPastTheLimitIsRefusedNamingTheFlag) {
  api_->set_max_services_per_tenant(1);
  ASSERT_EQ(Of(bob_->Post("/v1/services", kCoder, "application/yaml")).status, 201);
  std::string other = kCoder;
  other.replace(0, 11, "name: other");
  auto a = Of(bob_->Post("/v1/services", other, "application/yaml"));
  EXPECT_EQ(a.status, 429) << a.body.dump();
  const std::string msg = a.body["error"]["message"];
  EXPECT_NE(msg.find("--max-services-per-tenant"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 services"), std::string::npos) << msg;
  // A new revision of the one it has is fine.
  std::string v2 = kCoder;
  v2 += "port: 9000\n";
  EXPECT_EQ(Of(bob_->Post("/v1/services", v2, "application/yaml")).status, 200);
}

TEST_F(ServiceApiTest, TheListPagesNewestFirst) {
  for (const char* n : {"a", "b", "c"}) {
    std::string spec = kCoder;
    spec.replace(0, 11, std::string("name: ") + n);
    ASSERT_EQ(Of(bob_->Post("/v1/services", spec, "application/yaml")).status, 201);
  }
  auto first = Get("/v1/services?limit=2");
  ASSERT_EQ(first.status, 200) << first.body.dump();
  ASSERT_EQ(first.body["services"].size(), 2u);
  EXPECT_EQ(first.body["services"][0]["name"], "c");
  ASSERT_TRUE(first.body.contains("next"));
  auto second = Get("/v1/services?limit=2&after=" + first.body["next"].get<std::string>());
  ASSERT_EQ(second.status, 200);
  ASSERT_EQ(second.body["services"].size(), 1u);
  EXPECT_EQ(second.body["services"][0]["name"], "a");
  EXPECT_FALSE(second.body.contains("next"));
  EXPECT_EQ(Get("/v1/services?tenant=vision").body["services"].size(), 0u);
}

}  // namespace
}  // namespace berth::server
