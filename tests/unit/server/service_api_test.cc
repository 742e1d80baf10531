// The /v1/services endpoints in one process, through the real Api and its
// authorization layer: who may apply, read and change a service, what
// another tenant's member and an anonymous caller get, the queue and
// per-tenant limits, and the audit record each change commits with itself.
#include "control/service_controller.h"
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
      - name: notebooks
        kind: interactive
        max_session_lifetime: 90m
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
  EXPECT_EQ(created.body["status"]["phase"], "pending");  // no controller here
  EXPECT_TRUE(created.body["status"]["replicas"].empty());
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

namespace berth::server {
namespace {

// The service controller over the same store and Controller: replicas made,
// replaced, scaled and stopped as jobs of the service, one round at a time.
class ServiceControllerTest : public ServiceApiTest {
 protected:
  void SetUp() override {
    ServiceApiTest::SetUp();
    services_ = std::make_unique<ServiceController>(*store_, *controller_, clock_);
    api_->set_services(services_.get());
  }
  void TearDown() override {
    api_->set_services(nullptr);
    services_.reset();
    ServiceApiTest::TearDown();
  }
  std::vector<store::JobRecord> Replicas(std::vector<model::JobState> states = {}) {
    store::JobFilter f;
    f.tenant = "ml";
    f.service = "coder";
    f.states = std::move(states);
    auto jobs = store_->ListJobs(f);
    EXPECT_TRUE(jobs.has_value());
    return jobs ? *jobs : std::vector<store::JobRecord>{};
  }
  std::vector<store::JobRecord> Live() {
    return Replicas({model::JobState::kPending, model::JobState::kRunning});
  }
  std::unique_ptr<ServiceController> services_;
};

TEST(ServiceReplicas, TheMinimumIsNotPreemptibleAndReplicasAboveItAre) {
  model::ServiceSpec spec;
  spec.replicas.min = 2;
  spec.replicas.max = 5;
  EXPECT_FALSE(ServiceController::ReplicaPreemptible(spec, 0));
  EXPECT_FALSE(ServiceController::ReplicaPreemptible(spec, 1));
  EXPECT_TRUE(ServiceController::ReplicaPreemptible(spec, 2));
  EXPECT_TRUE(ServiceController::ReplicaPreemptible(spec, 4));
  spec.replicas.min = 0;  // scale to zero: every replica borrows
  EXPECT_TRUE(ServiceController::ReplicaPreemptible(spec, 0));

  // A replica is not replaced for being of the other kind: an older
  // revision's preemptible replica still runs the current spec.
  store::ServiceRecord service;
  service.tenant = "ml";
  service.name = "coder";
  service.revision = 2;
  service.spec.queue = "serving";
  service.spec.command = {"serve"};
  service.spec.resources.gpus = 1;
  model::JobSpec replica = ServiceController::ReplicaSpec(service);
  EXPECT_EQ(replica.preemptible, std::optional<bool>(false));
  replica.service->revision = 1;
  replica.preemptible = true;
  EXPECT_TRUE(ServiceController::RunsCurrentSpec(service, replica));
  replica.command = {"serve", "--old"};
  EXPECT_FALSE(ServiceController::RunsCurrentSpec(service, replica));
}

TEST(ServiceReplicas, ARoundsRequestLogAddsToItsHour) {
  gateway::LatencyHistogram h;
  for (std::int64_t v : {10, 20, 30, 400}) h.Add(v);
  gateway::RouteLatency window;
  window.requests = 4;
  window.responses_2xx = 3;
  window.responses_5xx = 1;
  window.held = 1;
  window.sum_ms = h.sum_ms();
  window.min_ms = h.min_ms();
  window.max_ms = h.max_ms();
  window.buckets = h.NonEmptyBuckets();
  const TimeMs now = 1'700'000'123'456;
  store::ServiceTraffic t = ServiceController::TrafficOf("ml", "coder", window, false, now);
  EXPECT_EQ(t.hour_ms, now - now % 3'600'000);
  EXPECT_EQ(t.requests, 4);
  EXPECT_EQ(t.responses_5xx, 1);
  EXPECT_EQ(t.held, 1);
  EXPECT_EQ(t.latency_sum_ms, 460);
  EXPECT_EQ(t.latency_max_ms, 400);
  EXPECT_EQ(t.latency_buckets.size(), 4U);
  EXPECT_EQ(t.slo_windows, 1);
  EXPECT_EQ(t.slo_windows_met, 0);
  gateway::RouteLatency quiet;  // a round with no request: no SLO window
  EXPECT_EQ(ServiceController::TrafficOf("ml", "coder", quiet, true, now).slo_windows, 0);
}

TEST_F(ServiceControllerTest, ReplicasAreJobsOfTheServiceMadeByBerth) {
  std::string two = kCoder;
  two.replace(two.find("min: 1"), 6, "min: 2");
  ASSERT_EQ(Of(bob_->Post("/v1/services", two, "application/yaml")).status, 201);
  ASSERT_TRUE(services_->Reconcile().has_value());
  auto live = Live();
  ASSERT_EQ(live.size(), 2U);
  for (const auto& job : live) {
    ASSERT_TRUE(job.spec.service.has_value());
    EXPECT_EQ(job.spec.service->name, "coder");
    EXPECT_EQ(job.spec.service->revision, 1);
    EXPECT_EQ(job.spec.tenant, "ml");
    EXPECT_EQ(job.spec.queue, "serving");
    EXPECT_EQ(job.spec.command, (std::vector<std::string>{"serve", "--port", "8000"}));
    EXPECT_EQ(job.spec.resources.gpus, 1U);
    EXPECT_EQ(job.spec.preemptible, std::optional<bool>(false));
    EXPECT_EQ(job.spec.env.at("BERTH_SERVICE"), "ml/coder");
    EXPECT_EQ(job.submitted_by, "bob");
  }
  // A second round with nothing changed makes nothing more.
  ASSERT_TRUE(services_->Reconcile().has_value());
  EXPECT_EQ(Live().size(), 2U);

  auto shown = Of(vera_->Get("/v1/services/ml/coder"));
  ASSERT_EQ(shown.status, 200) << shown.body.dump();
  EXPECT_EQ(shown.body["status"]["desired"], 2);
  EXPECT_EQ(shown.body["status"]["starting"], 2);
  EXPECT_EQ(shown.body["status"]["ready"], 0);
  EXPECT_EQ(shown.body["status"]["phase"], "scaling");
  EXPECT_EQ(shown.body["status"]["replicas"].size(), 2U);
  // Each waiting replica says why, as its job does.
  for (const auto& r : shown.body["status"]["replicas"]) {
    EXPECT_EQ(r["reason"]["code"], "Queued") << r.dump();
    EXPECT_FALSE(r["reason"]["message"].get<std::string>().empty()) << r.dump();
  }

  // The replica's job says whose it is; its owner cannot be cancelled away.
  const std::int64_t id = live[0].id;
  auto job = Of(bob_->Get("/v1/jobs/" + std::to_string(id)));
  ASSERT_EQ(job.status, 200);
  EXPECT_EQ(job.body["service"], (json{{"name", "coder"}, {"revision", 1}}));
  auto cancel = Of(bob_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", "text/plain"));
  EXPECT_EQ(cancel.status, 409) << cancel.body.dump();
  EXPECT_NE(cancel.body.dump().find("replica of service ml/coder"), std::string::npos);
  EXPECT_EQ(store_->GetJob(id)->state, model::JobState::kPending);
  EXPECT_FALSE(store_->GetJob(id)->cancel_requested);
  // Another tenant's member: as for any job of another tenant.
  EXPECT_EQ(Of(carol_->Post("/v1/jobs/" + std::to_string(id) + "/cancel", "", "text/plain")).status,
            404);
}

TEST_F(ServiceControllerTest, NoSubmittedSpecCanClaimAService) {
  const std::string spec = R"(name: sneaky
tenant: ml
queue: training
command: ["true"]
service: {name: coder, revision: 1}
)";
  auto refused = Of(bob_->Post("/v1/jobs", spec, "application/yaml"));
  EXPECT_EQ(refused.status, 400) << refused.body.dump();
  EXPECT_EQ(refused.body["error"]["field"], "service") << refused.body.dump();
  EXPECT_TRUE(Replicas().empty());
}

TEST_F(ServiceControllerTest, ANewRevisionScalingAndDeletingChangeTheReplicas) {
  ASSERT_EQ(Of(bob_->Post("/v1/services", kCoder, "application/yaml")).status, 201);
  ASSERT_TRUE(services_->Reconcile().has_value());
  auto first = Live();
  ASSERT_EQ(first.size(), 1U);

  // Revision 2: the old replica never ran, so it is replaced at once.
  std::string v2 = kCoder;
  v2.replace(v2.find("\"8000\""), 6, "\"8001\"");
  ASSERT_EQ(Of(bob_->Post("/v1/services", v2, "application/yaml")).status, 200);
  ASSERT_TRUE(services_->Reconcile().has_value());
  auto second = Live();
  ASSERT_EQ(second.size(), 1U);
  EXPECT_EQ(second[0].spec.service->revision, 2);
  EXPECT_EQ(second[0].spec.command.back(), "8001");
  auto old = store_->GetJob(first[0].id);
  EXPECT_EQ(old->state, model::JobState::kCancelled);
  EXPECT_NE(old->cancelled_by.find("replaced it with revision 2"), std::string::npos)
      << old->cancelled_by;

  // Scaled to 3 (revision 3): the replica of revision 2 runs the same spec
  // and stays; two more join it. Then to 0.
  ASSERT_EQ(Of(bob_->Post("/v1/services/ml/coder/scale?min=3", "", "text/plain")).status, 200);
  ASSERT_TRUE(services_->Reconcile().has_value());
  auto three = Live();
  EXPECT_EQ(three.size(), 3U);
  EXPECT_EQ(store_->GetJob(second[0].id)->state, model::JobState::kPending);
  auto scaled = Of(bob_->Get("/v1/services/ml/coder"));
  ASSERT_EQ(scaled.body["status"]["replicas"].size(), 3U);
  for (const auto& r : scaled.body["status"]["replicas"]) EXPECT_EQ(r["current"], true);
  // min 0 needs scale to zero; max stays 3.
  std::string zero = v2;
  zero.replace(zero.find("replicas: {min: 1, max: 3}"), 26,
               "replicas: {min: 0, max: 3}\nautoscaling: {scale_to_zero: {enabled: true}}");
  ASSERT_EQ(Of(bob_->Post("/v1/services", zero, "application/yaml")).status, 200);
  ASSERT_TRUE(services_->Reconcile().has_value());
  EXPECT_TRUE(Live().empty());

  ASSERT_EQ(Of(bob_->Post("/v1/services", v2, "application/yaml")).status, 200);
  ASSERT_TRUE(services_->Reconcile().has_value());
  auto before_delete = Live();
  ASSERT_EQ(before_delete.size(), 1U);
  ASSERT_EQ(Of(bob_->Delete("/v1/services/ml/coder")).status, 200);
  ASSERT_TRUE(services_->Reconcile().has_value());
  EXPECT_TRUE(Live().empty());
  EXPECT_NE(store_->GetJob(before_delete[0].id)->cancelled_by.find("deleted"), std::string::npos);

  // Each replica started and stopped is Berth's own audited action.
  auto log = store::AuditLog::Open(dir_);
  ASSERT_TRUE(log.has_value());
  store::AuditFilter all;
  all.limit = 1000;
  auto records = (*log)->Query(all);
  ASSERT_TRUE(records.has_value());
  int starts = 0;
  int stops = 0;
  for (const auto& r : *records) {
    if (!r.action.starts_with("service.replica.")) continue;
    EXPECT_EQ(r.actor, "berth");
    EXPECT_EQ(r.tenant, "ml");
    EXPECT_EQ(r.object, "service/ml/coder");
    (r.action == "service.replica.start" ? starts : stops) += 1;
  }
  EXPECT_EQ(starts, 1 + 1 + 2 + 1);
  EXPECT_EQ(stops, 1 + 3 + 1);
}

TEST_F(ServiceControllerTest, AReplicaRefusedAsAJobIsSaidInTheStatus) {
  // A pending-job limit of one for ml's members: the second replica is
  // refused as a second job would be.
  auto v = store_->ApplyPolicy(
      std::string(kPolicy) + "tenants:\n  ml:\n    limits: {pending_jobs_per_member: 1}\n", "root",
      "", clock_.NowMs());
  ASSERT_TRUE(v.has_value()) << v.error().message;
  std::string two = kCoder;
  two.replace(two.find("min: 1"), 6, "min: 2");
  ASSERT_EQ(Of(bob_->Post("/v1/services", two, "application/yaml")).status, 201);
  ASSERT_TRUE(services_->Reconcile().has_value());
  EXPECT_EQ(Live().size(), 1U);
  auto shown = Of(bob_->Get("/v1/services/ml/coder"));
  ASSERT_EQ(shown.status, 200);
  EXPECT_NE(shown.body["status"]["refused"].dump().find("pending"), std::string::npos)
      << shown.body.dump();
}

// /metrics from a berthd whose service controller runs no gateway: the
// replicas with the desired count the status shows, no gateway family, and
// the status's gateway fields null. A tenant's member reads no /metrics.
TEST_F(ServiceControllerTest, MetricsWithoutGatewayHaveTheReplicasAndNoGatewayFamily) {
  ServerMetrics counters;
  api_->set_metrics(&counters);
  std::string two = kCoder;
  two.replace(two.find("min: 1"), 6, "min: 2");
  ASSERT_EQ(Of(bob_->Post("/v1/services", two, "application/yaml")).status, 201);
  ASSERT_TRUE(services_->Reconcile().has_value());
  auto scrape = [&] {
    auto res = client_->Get("/metrics");  // alice, a platform admin
    EXPECT_TRUE(res && res->status == 200);
    return res ? res->body : std::string();
  };
  std::string text = scrape();
  const std::string coder = R"(berth_service_replicas{tenant="ml",service="coder",state=)";
  EXPECT_NE(text.find(coder + R"("desired"} 2)" + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find(coder + R"("starting"} 2)" + "\n"), std::string::npos) << text;
  for (const char* family : {"berth_service_requests_in_flight", "berth_service_requests_held",
                             "berth_service_request_duration_seconds",
                             "berth_service_responses_total", "berth_service_cold_start_seconds"}) {
    EXPECT_EQ(text.find(family), std::string::npos) << family;
  }
  // Scaled, not reconciled yet: the new revision's minimum, as the status says.
  ASSERT_EQ(Of(bob_->Post("/v1/services/ml/coder/scale?min=3", "", "text/plain")).status, 200);
  text = scrape();
  EXPECT_NE(text.find(coder + R"("desired"} 3)" + "\n"), std::string::npos) << text;
  auto shown = Of(bob_->Get("/v1/services/ml/coder"));
  EXPECT_EQ(shown.body["status"]["desired"], 3);
  EXPECT_TRUE(shown.body["status"]["endpoint"].is_null()) << shown.body.dump();
  ASSERT_TRUE(services_->Reconcile().has_value());
  shown = Of(bob_->Get("/v1/services/ml/coder"));
  for (const char* k :
       {"endpoint", "autoscale", "traffic", "cold_start_since_ms", "last_cold_start"}) {
    EXPECT_TRUE(shown.body["status"][k].is_null()) << k << " " << shown.body.dump();
  }
  EXPECT_EQ(shown.body["status"]["routed"], 0);

  EXPECT_EQ(bob_->Get("/metrics")->status, 403);
  EXPECT_EQ(anon_->Get("/metrics")->status, 401);
  api_->set_metrics(nullptr);
}

constexpr const char* kNotebook = R"(kind: session
name: nb
tenant: ml
queue: notebooks
command: [jupyter, lab]
resources: {gpus: 1}
session: {max_lifetime: 2h, idle_window: 30m}
)";

TEST_F(ServiceApiTest, ASessionRunsInAnInteractiveQueueAndKeepsItsKind) {
  // A session in an inference queue, and a service in an interactive one.
  std::string wrong = kNotebook;
  wrong.replace(wrong.find("queue: notebooks"), 16, "queue: serving");
  auto refused = Of(bob_->Post("/v1/services", wrong, "application/yaml"));
  ASSERT_EQ(refused.status, 400) << refused.body.dump();
  EXPECT_EQ(refused.body["error"]["field"], "queue");
  EXPECT_NE(refused.body["error"]["message"].get<std::string>().find(
                "a session runs in a queue of kind interactive; tenant ml's queues of kind "
                "interactive: notebooks"),
            std::string::npos)
      << refused.body.dump();
  std::string service_there = kCoder;
  service_there.replace(service_there.find("queue: serving"), 14, "queue: notebooks");
  EXPECT_EQ(Of(bob_->Post("/v1/services", service_there, "application/yaml")).status, 400);

  auto started = Of(bob_->Post("/v1/services", kNotebook, "application/yaml"));
  ASSERT_EQ(started.status, 201) << started.body.dump();
  EXPECT_EQ(started.body["spec"]["kind"], "session");
  EXPECT_EQ(started.body["status"]["desired"], 1);
  EXPECT_EQ(started.body["status"]["session"]["expires_ms"],
            started.body["created_ms"].get<std::int64_t>() + 90 * 60'000);  // the queue's cap
  EXPECT_EQ(started.body["status"]["session"]["max_lifetime_ms"], 90 * 60'000);
  ASSERT_EQ(Of(bob_->Post("/v1/services", kCoder, "application/yaml")).status, 201);

  // The list by kind; a bad kind names the parameter.
  auto sessions = Of(vera_->Get("/v1/services?kind=session"));
  ASSERT_EQ(sessions.status, 200) << sessions.body.dump();
  ASSERT_EQ(sessions.body["services"].size(), 1U);
  EXPECT_EQ(sessions.body["services"][0]["name"], "nb");
  auto services = Of(vera_->Get("/v1/services?kind=service"));
  ASSERT_EQ(services.body["services"].size(), 1U);
  EXPECT_EQ(services.body["services"][0]["name"], "coder");
  EXPECT_EQ(Of(vera_->Get("/v1/services")).body["services"].size(), 2U);
  auto bad = Of(vera_->Get("/v1/services?kind=notebook"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["field"], "kind");
  // Another tenant's member sees none of them.
  EXPECT_TRUE(Of(carol_->Get("/v1/services?kind=session")).body["services"].empty());
  EXPECT_EQ(Of(carol_->Get("/v1/services/ml/nb")).status, 404);
  EXPECT_EQ(Of(carol_->Delete("/v1/services/ml/nb")).status, 404);

  // A name keeps its kind, and a session is not scaled.
  std::string as_service = kCoder;
  as_service.replace(as_service.find("name: coder"), 11, "name: nb");
  auto changed = Of(bob_->Post("/v1/services", as_service, "application/yaml"));
  EXPECT_EQ(changed.status, 409) << changed.body.dump();
  EXPECT_EQ(changed.body["error"]["field"], "kind");
  auto scaled = Of(bob_->Post("/v1/services/ml/nb/scale?max=3", "", "text/plain"));
  EXPECT_EQ(scaled.status, 409) << scaled.body.dump();
  EXPECT_EQ(Of(vera_->Get("/v1/services/ml/nb")).body["revision"], 1);
}

TEST_F(ServiceControllerTest, ASessionPastItsLifetimeIsStoppedWithTheReasonAndDeleted) {
  ASSERT_EQ(Of(bob_->Post("/v1/services", kNotebook, "application/yaml")).status, 201);
  ASSERT_TRUE(services_->Reconcile().has_value());
  store::JobFilter f;
  f.tenant = "ml";
  f.service = "nb";
  auto live = store_->ListJobs(f);
  ASSERT_TRUE(live.has_value());
  ASSERT_EQ(live->size(), 1U);
  const std::int64_t replica = live->front().id;
  EXPECT_EQ(live->front().spec.preemptible, std::optional<bool>(false));
  EXPECT_EQ(live->front().spec.queue, "notebooks");

  // Waiting for a GPU is not idleness: the idle window does not end it.
  clock_.Advance(60 * 60'000);
  ASSERT_TRUE(services_->Reconcile().has_value());
  auto shown = Of(bob_->Get("/v1/services/ml/nb"));
  ASSERT_EQ(shown.status, 200);
  EXPECT_TRUE(shown.body["status"]["session"]["idle_since_ms"].is_null()) << shown.body.dump();
  EXPECT_FALSE(store_->GetJob(replica)->cancel_requested);

  // Its lifetime counts from its start, waiting included.
  clock_.Advance(30 * 60'000);
  ASSERT_TRUE(services_->Reconcile().has_value());
  EXPECT_EQ(Of(bob_->Get("/v1/services/ml/nb")).status, 404);
  auto job = store_->GetJob(replica);
  ASSERT_TRUE(job.has_value());
  EXPECT_TRUE(job->cancel_requested || job->state == model::JobState::kCancelled);
  auto events = Of(bob_->Get("/v1/jobs/" + std::to_string(replica)));
  // The queue's 90m cap, not the spec's 2h.
  EXPECT_NE(events.body.dump().find(
                "maximum lifetime of 1h30m (its queue's max_session_lifetime in the policy)"),
            std::string::npos)
      << events.body.dump();
  const auto audit = ServiceAudit();
  ASSERT_FALSE(audit.empty());
  EXPECT_EQ(audit.back(), "service.replica.stop service/ml/nb by berth ok");
  // The end itself, with its cause.
  auto log = store::AuditLog::Open(dir_);
  ASSERT_TRUE(log.has_value());
  store::AuditFilter all;
  all.limit = 1000;
  auto records = (*log)->Query(all);
  ASSERT_TRUE(records.has_value());
  auto end = std::find_if(records->begin(), records->end(),
                          [](const store::AuditEntry& r) { return r.action == "session.end"; });
  ASSERT_NE(end, records->end());
  EXPECT_EQ(end->object, "service/ml/nb");
  EXPECT_EQ(end->actor, "berth");
  EXPECT_NE(end->after.find("\"cause\":\"max_lifetime\""), std::string::npos) << end->after;
  // A later round has nothing left to do.
  ASSERT_TRUE(services_->Reconcile().has_value());
}

}  // namespace
}  // namespace berth::server
