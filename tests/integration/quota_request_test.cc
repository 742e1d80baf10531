// Quota requests and over-quota outcomes end to end through the real
// `berth` CLI against a real berthd: a tenant files a request, an admin
// approves it (a new policy version) and rolls it back, another is
// rejected, and the audit trail shows each step with its actor; then the
// three over_quota outcomes at submit (reject refused with the numbers,
// wait waiting with its reason, borrow running with a Borrowing event).
#include <stdlib.h>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

constexpr const char* kPolicy = R"(queues:
  - name: default
    children:
      - name: default
  - name: vision
    quota:
      gpus: {guaranteed: 6}
    children:
      - name: training
        quota:
          gpus: {guaranteed: 2, borrow_limit: 4}
      - name: strict
        quota:
          gpus: {guaranteed: 1}
        over_quota: reject
      - name: patient
        quota:
          gpus: {guaranteed: 1}
        over_quota: wait
)";

class QuotaRequestTest : public IntegrationTest {
 protected:
  // The CLI as `user`, with a token of its own (the actor berthd records):
  // root is a platform admin, alice the tenant-admin of vision, bob a member.
  CommandResult CliAs(const std::string& user, const Berthd& berthd,
                      const std::vector<std::string>& args) {
    if (!tokens_.contains(user)) {
      json body{{"name", user}};
      if (user == "root") {
        body["platform_admin"] = true;
      } else {
        body["tenants"] = {{"vision", user == "alice" ? "tenant-admin" : "member"}};
      }
      auto made = berthd.http().Post("/v1/identities", body.dump(), "application/json");
      EXPECT_EQ(made.status, 201) << made.text;
      auto token =
          berthd.http().Post("/v1/tokens", json{{"identity", user}}.dump(), "application/json");
      EXPECT_EQ(token.status, 201) << token.text;
      tokens_[user] = token.body.value("token", "");
    }
    const std::string admin = berthd.http().token();
    setenv("BERTH_TOKEN", tokens_[user].c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    CommandResult r = Cli(berthd, args);
    setenv("BERTH_TOKEN", admin.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    return r;
  }
  std::map<std::string, std::string> tokens_;

  Berthd& StartWithPolicy() {
    BerthdOptions options = AllInOne({"--stop-grace", "2s"});
    options.simulate = WriteCluster("quota-node", 8);
    Berthd& berthd = NewBerthd(options);
    EXPECT_TRUE(berthd.Start()) << berthd.log();
    EXPECT_TRUE(berthd.WaitForNode("Ready", 20s));
    WriteFile(dir_ / "policy.yaml", kPolicy);
    auto r = CliAs("root", berthd,
                   {"policy", "apply", (dir_ / "policy.yaml").string(), "--comment", "vision"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return berthd;
  }

  // The active policy's quota of `queue` for gpus, in milli-GPUs, and its version.
  std::pair<std::int64_t, json> ActiveGpuQuota(const Berthd& berthd, const std::string& queue) {
    auto r = Cli(berthd, {"policy", "show", "-o", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    json p = json::parse(r.out, nullptr, false);
    if (!p.is_object()) return {0, nullptr};
    for (const auto& q : p["policy"]["queues"]) {
      if (q.value("path", "") == queue) return {p.value("version", 0), q["quota"]["gpus"]};
    }
    ADD_FAILURE() << "no queue " << queue << " in " << r.out;
    return {0, nullptr};
  }
};

TEST_F(QuotaRequestTest, RequestApprovedIsANewPolicyVersionThatRollsBackAndIsAudited) {
  Berthd& berthd = StartWithPolicy();

  auto r = CliAs("alice", berthd,
                 {"quota", "request", "vision/training", "--resource", "gpus", "--guaranteed", "4",
                  "--borrow-limit", "1", "--reason", "bigger model", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json filed = json::parse(r.out);
  const std::int64_t id = filed.at("id");
  EXPECT_EQ(filed["state"], "Pending");
  EXPECT_EQ(filed["tenant"], "vision");
  EXPECT_EQ(filed["guaranteed"], "4");
  EXPECT_EQ(filed["filed_by"], "alice");

  // An unknown queue is refused at filing, naming the field.
  r = CliAs("alice", berthd,
            {"quota", "request", "vision/nlp", "--guaranteed", "4", "--reason", "x"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("queue"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("training"), std::string::npos) << r.err;

  r = Cli(berthd, {"quota", "requests", "--state", "Pending"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("vision/training"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("guaranteed 4, borrow_limit 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alice"), std::string::npos) << r.out;

  r = CliAs("root", berthd, {"quota", "approve", std::to_string(id), "--comment", "ok"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("policy v3 is active"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("berth policy rollback 2"), std::string::npos) << r.out;

  auto [v3, quota3] = ActiveGpuQuota(berthd, "vision/training");
  EXPECT_EQ(v3, 3);
  EXPECT_EQ(quota3["guaranteed"], 4000) << quota3.dump();
  EXPECT_EQ(quota3["borrow_limit"], 1000) << quota3.dump();
  r = Cli(berthd, {"policy", "versions"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("quota request #" + std::to_string(id)), std::string::npos) << r.out;

  r = Cli(berthd, {"quota", "show", std::to_string(id)});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Approved"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("v3"), std::string::npos) << r.out;

  r = CliAs("root", berthd, {"policy", "rollback", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto [v4, quota4] = ActiveGpuQuota(berthd, "vision/training");
  EXPECT_EQ(v4, 4);
  EXPECT_EQ(quota4["guaranteed"], 2000) << quota4.dump();
  EXPECT_EQ(quota4["borrow_limit"], 4000) << quota4.dump();

  // A second request is rejected; deciding it again is refused.
  r = CliAs("alice", berthd,
            {"quota", "request", "vision/strict", "--guaranteed", "2", "--reason", "more evals",
             "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::int64_t id2 = json::parse(r.out).at("id");
  r = CliAs("root", berthd, {"quota", "reject", std::to_string(id2)});
  EXPECT_EQ(r.exit_code, 2) << "reject needs --comment: " << r.out << r.err;
  r = CliAs("root", berthd,
            {"quota", "reject", std::to_string(id2), "--comment", "no capacity this quarter"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = CliAs("root", berthd, {"quota", "approve", std::to_string(id2)});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("is Rejected"), std::string::npos) << r.err;
  EXPECT_EQ(ActiveGpuQuota(berthd, "vision/strict").first, 4);  // no new version

  r = Cli(berthd, {"audit", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json records = json::parse(r.out).at("records");
  // The successful steps, in order, with their actors (the test's own
  // identity and token set-up left aside).
  std::vector<std::tuple<std::string, std::string, std::string>> steps;
  for (const auto& rec : records) {
    if (rec.value("outcome", "") != "ok") continue;
    if (rec.value("action", "").starts_with("identity.") ||
        rec.value("action", "").starts_with("token.")) {
      continue;
    }
    steps.emplace_back(rec.value("action", ""), rec.value("actor", ""), rec.value("object", ""));
  }
  const std::string obj1 = "quota-request/" + std::to_string(id);
  const std::string obj2 = "quota-request/" + std::to_string(id2);
  std::vector<std::tuple<std::string, std::string, std::string>> want{
      {"policy.apply", "root", "policy/v2"}, {"quota.request", "alice", obj1},
      {"quota.approve", "root", obj1},       {"policy.rollback", "root", "policy/v4"},
      {"quota.request", "alice", obj2},      {"quota.reject", "root", obj2}};
  EXPECT_EQ(steps, want) << records.dump(2);
  for (const auto& rec : records) {
    if (rec.value("action", "") == "quota.approve" && rec.value("outcome", "") == "ok") {
      EXPECT_EQ(rec["tenant"], "vision");
      EXPECT_EQ(rec["before"]["state"], "Pending") << rec.dump();
      EXPECT_EQ(rec["before"]["active_policy_version"], 2) << rec.dump();
      EXPECT_EQ(rec["after"]["state"], "Approved") << rec.dump();
      EXPECT_EQ(rec["after"]["policy_version"], 3) << rec.dump();
    }
  }
  bool refused_recorded = false;
  for (const auto& rec : records) {
    if (rec.value("action", "") == "quota.approve" && rec.value("object", "") == obj2) {
      refused_recorded = rec.value("outcome", "") == "denied: FailedPrecondition";
    }
  }
  EXPECT_TRUE(refused_recorded) << records.dump(2);
  r = Cli(berthd, {"audit", "verify"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("intact"), std::string::npos) << r.out;
}

TEST_F(QuotaRequestTest, OverQuotaRejectRefusesWaitWaitsBorrowRunsBorrowed) {
  Berthd& berthd = StartWithPolicy();
  auto submit = [&](const std::string& name, const std::string& queue, int gpus) {
    WriteFile(dir_ / (name + ".json"),
              JobSpecJson(name, {"sleep", "120"}, gpus, {{"tenant", "vision"}, {"queue", queue}}));
    return CliAs("bob", berthd, {"submit", (dir_ / (name + ".json")).string(), "-o", "json"});
  };
  auto id_of = [](const CommandResult& r) -> std::int64_t {
    auto j = json::parse(r.out, nullptr, false);
    return j.is_object() ? j.value("id", std::int64_t{0}) : 0;
  };

  // reject: within the guarantee it is taken; past it, refused with the numbers.
  auto r = submit("strict-1", "strict", 1);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::int64_t strict1 = id_of(r);
  r = submit("strict-2", "strict", 1);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("over_quota: reject"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("asks for 1 gpus"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hold 1 of 1 guaranteed"), std::string::npos) << r.err;
  int strict_jobs = 0;
  for (const auto& j : berthd.Jobs()) {
    if (j["spec"].value("queue", "") == "strict") ++strict_jobs;
  }
  EXPECT_EQ(strict_jobs, 1) << berthd.Jobs().dump(2);

  // wait: the second job waits with its over-quota reason and numbers.
  r = submit("patient-1", "patient", 1);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::int64_t patient1 = id_of(r);
  r = submit("patient-2", "patient", 1);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::int64_t patient2 = id_of(r);

  // borrow: within the guarantee no event; past it, a Borrowing event.
  r = submit("train-2", "training", 2);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::int64_t train2 = id_of(r);
  ASSERT_TRUE(berthd.WaitForState(train2, "Running", 30s)) << berthd.Job(train2).dump(2);
  r = submit("train-borrow", "training", 1);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::int64_t borrow = id_of(r);

  ASSERT_TRUE(berthd.WaitForState(strict1, "Running", 30s)) << berthd.Job(strict1).dump(2);
  ASSERT_TRUE(berthd.WaitForState(patient1, "Running", 30s)) << berthd.Job(patient1).dump(2);
  ASSERT_TRUE(berthd.WaitForState(borrow, "Running", 30s)) << berthd.Job(borrow).dump(2);
  ASSERT_TRUE(WaitFor([&] { return berthd.Job(patient2)["reason"]["code"] == "OverQuota"; }, 20s))
      << berthd.Job(patient2).dump(2);
  const json waiting = berthd.Job(patient2);
  EXPECT_EQ(waiting["state"], "Pending");
  r = Cli(berthd, {"why", std::to_string(patient2)});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("uses 1 GPU, with 1 GPU guaranteed"), std::string::npos) << r.out;

  const json borrowed = berthd.Job(borrow);
  ASSERT_EQ(CountEvents(borrowed, "Borrowing"), 1) << borrowed.dump(2);
  for (const auto& e : borrowed["timeline"]) {
    if (e.value("event", "") != "Borrowing") continue;
    const std::string m = e.value("message", "");
    EXPECT_NE(m.find("borrowed capacity"), std::string::npos) << m;
    EXPECT_NE(m.find("queue vision/training holds 3 GPU(s)"), std::string::npos) << m;
    EXPECT_NE(m.find("over its 2 guaranteed"), std::string::npos) << m;
    EXPECT_NE(m.find("preemptible"), std::string::npos) << m;
  }
  EXPECT_EQ(CountEvents(berthd.Job(train2), "Borrowing"), 0) << berthd.Job(train2).dump(2);

  // The refusal is in the audit trail, with its numbers, and nothing else of it.
  r = Cli(berthd, {"audit", "--action", "job.submit", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  int refused = 0;
  const json submits = json::parse(r.out).at("records");
  for (const auto& rec : submits) {
    if (rec.value("outcome", "") != "denied: FailedPrecondition") continue;
    ++refused;
    EXPECT_EQ(rec["actor"], "bob");
    EXPECT_EQ(rec["tenant"], "vision");
    EXPECT_EQ(rec["object"], "job");
    EXPECT_NE(rec["after"].value("refused", "").find("hold 1 of 1 guaranteed"), std::string::npos)
        << rec.dump();
  }
  EXPECT_EQ(refused, 1) << r.out;
}

}  // namespace
}  // namespace berth::it
