// The audit trail end to end: changes and a refusal made through the real
// `berth` CLI each leave a record `berth audit` shows, `berth audit verify`
// finds the chain intact, and after one record is edited in berth.db while
// berthd is down, verify (on the restarted berthd) names that record.
#include <sqlite3.h>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

constexpr const char* kVisionPolicy = R"(queues:
  - name: default
    children:
      - name: default
  - name: vision
    quota:
      gpus: {guaranteed: 8}
    children:
      - name: training
)";

// The record of `action` on `object`, or null.
json Find(const json& records, const std::string& action, const std::string& outcome_prefix) {
  for (const auto& r : records) {
    if (r.value("action", "") == action && r.value("outcome", "").starts_with(outcome_prefix)) {
      return r;
    }
  }
  return nullptr;
}

TEST_F(IntegrationTest, AuditTrailRecordsChangesAndRefusalsAndFindsAnEdit) {
  Berthd& berthd = NewBerthd(AllInOne({"--stop-grace", "2s"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const std::string node = berthd.Nodes().at(0).at("name");

  WriteFile(dir_ / "vision.yaml", kVisionPolicy);
  auto r = Cli(berthd, {"policy", "apply", (dir_ / "vision.yaml").string(), "--comment", "vision"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  // A secret in the env must not reach the trail.
  WriteFile(dir_ / "job.json", JobSpecJson("audited", {"sleep", "30"}, 0,
                                           {{"tenant", "vision"},
                                            {"queue", "training"},
                                            {"env", {{"API_TOKEN", "hunter2-secret"}}}}));
  r = Cli(berthd, {"submit", (dir_ / "job.json").string(), "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::int64_t id = json::parse(r.out).at("id");

  WriteFile(dir_ / "bad.json", R"({"name": "broken", "replicas": 0, "command": ["true"]})");
  r = Cli(berthd, {"submit", (dir_ / "bad.json").string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;

  r = Cli(berthd, {"cancel", std::to_string(id)});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s)) << berthd.JobState(id);

  r = Cli(berthd, {"policy", "rollback", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = Cli(berthd, {"cordon", node, "--reason", "maintenance"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = Cli(berthd, {"uncordon", node});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  r = Cli(berthd, {"audit", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("hunter2-secret"), std::string::npos) << r.out;
  const json records = json::parse(r.out).at("records");
  ASSERT_EQ(records.size(), 7u) << records.dump(2);
  for (const auto& rec : records) {
    EXPECT_FALSE(rec.value("actor", "").empty()) << rec.dump();
    EXPECT_FALSE(rec.value("request_id", "").empty()) << rec.dump();
    EXPECT_FALSE(rec.value("source", "").empty()) << rec.dump();
    EXPECT_EQ(rec.value("hash", "").size(), 64u) << rec.dump();
  }
  auto apply = Find(records, "policy.apply", "ok");
  ASSERT_FALSE(apply.is_null()) << records.dump(2);
  EXPECT_EQ(apply["object"], "policy/v2");
  EXPECT_EQ(apply["before"]["version"], 1);
  auto submit = Find(records, "job.submit", "ok");
  ASSERT_FALSE(submit.is_null()) << records.dump(2);
  EXPECT_EQ(submit["object"], "job/" + std::to_string(id));
  EXPECT_EQ(submit["tenant"], "vision");
  EXPECT_EQ(submit["after"]["name"], "audited");
  EXPECT_EQ(submit["after"]["queue"], "training");
  auto refused = Find(records, "job.submit", "denied: InvalidArgument");
  ASSERT_FALSE(refused.is_null()) << records.dump(2);
  auto cancel = Find(records, "job.cancel", "ok");
  ASSERT_FALSE(cancel.is_null()) << records.dump(2);
  EXPECT_EQ(cancel["object"], "job/" + std::to_string(id));
  EXPECT_EQ(cancel["tenant"], "vision");
  EXPECT_FALSE(cancel["before"]["state"].is_null());
  auto rollback = Find(records, "policy.rollback", "ok");
  ASSERT_FALSE(rollback.is_null()) << records.dump(2);
  EXPECT_EQ(rollback["object"], "policy/v3");
  EXPECT_EQ(rollback["after"]["restores"], 1);
  auto cordon = Find(records, "node.cordon", "ok");
  ASSERT_FALSE(cordon.is_null()) << records.dump(2);
  EXPECT_EQ(cordon["object"], "node/" + node);
  EXPECT_EQ(cordon["after"]["reason"], "maintenance");
  auto uncordon = Find(records, "node.uncordon", "ok");
  ASSERT_FALSE(uncordon.is_null()) << records.dump(2);
  EXPECT_EQ(uncordon["before"]["cordon"], "cordon");

  // Filters and the CSV form.
  r = Cli(berthd, {"audit", "--action", "job.", "--since", "1h", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(json::parse(r.out).at("records").size(), 3u) << r.out;
  r = Cli(berthd, {"audit", "--tenant", "vision", "-o", "csv"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(r.out.starts_with("seq,time,actor,tenant,action,object,")) << r.out;
  EXPECT_NE(r.out.find("job.cancel"), std::string::npos) << r.out;
  r = Cli(berthd, {"jobs", "-o", "csv"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;

  r = Cli(berthd, {"audit", "verify"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("intact"), std::string::npos) << r.out;

  // With berthd down, someone rewrites who cancelled the job.
  berthd.Stop();
  const std::int64_t seq = cancel.at("seq");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((berthd.data_dir() / "berth.db").c_str(), &db), SQLITE_OK);
  const std::string sql =
      "UPDATE audit_log SET actor='someone-else' WHERE seq=" + std::to_string(seq);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string message = err != nullptr ? err : "";
  sqlite3_free(err);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;

  ASSERT_TRUE(berthd.Start()) << berthd.log();
  r = Cli(berthd, {"audit", "verify"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("broken at record " + std::to_string(seq)), std::string::npos)
      << r.out << r.err;
  r = Cli(berthd, {"audit", "verify", "-o", "json"});
  auto verdict = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(verdict.is_object()) << r.out << r.err;
  EXPECT_EQ(verdict["ok"], false);
  EXPECT_EQ(verdict["first_bad_seq"], seq) << verdict.dump(2);
}

}  // namespace
}  // namespace berth::it
