// A job's env through a real berthd (docs/security.md "Env values"): the
// member who submitted it sees its values but not a secret entry's; another
// member of its tenant and a platform admin see the keys only; the run still
// gets every value; and the submission's audit record holds no value.
#include <fmt/format.h>

#include "integration/fixture.h"
#include "integration/tenants.h"

namespace berth::it {
namespace {

using nlohmann::json;

TEST_F(IntegrationTest, EnvValuesShowOnlyToTheSubmitterAndSecretOnesToNobody) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const Http& admin = berthd.http();
  ASSERT_EQ(admin.Post("/v1/policy", kRedBlue).status, 201);
  Http alice(berthd.api_port());
  alice.set_token(MemberToken(admin, "alice", "red", "member"));
  Http bob(berthd.api_port());
  bob.set_token(MemberToken(admin, "bob", "red", "tenant-admin"));

  // The job prints both values: its log is its own output (what a job
  // prints is its owner's choice), and proves the run got them.
  const json spec = json::parse(
      JobSpecJson("env", Sh("echo plain=$PLAIN_VAR secret=$HF_TOKEN"), 0,
                  {{"tenant", "red"},
                   {"queue", "main"},
                   {"env", {{"PLAIN_VAR", "plain-value-1"}, {"HF_TOKEN", "hf-secret-value-1"}}},
                   {"secret_env", {"HF_TOKEN"}}}));
  auto submitted = alice.Post("/v1/jobs", spec.dump(), "application/json");
  ASSERT_EQ(submitted.status, 201) << submitted.text;
  EXPECT_EQ(submitted.text.find("hf-secret-value-1"), std::string::npos) << submitted.text;
  const std::int64_t id = submitted.body.at("id").get<std::int64_t>();
  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s));

  const std::string path = fmt::format("/v1/jobs/{}", id);
  auto mine = alice.Get(path);
  ASSERT_EQ(mine.status, 200) << mine.text;
  EXPECT_EQ(mine.body.at("spec").at("env").at("PLAIN_VAR"), "plain-value-1");
  EXPECT_EQ(mine.body.at("spec").at("env").at("HF_TOKEN"), "(secret)");
  EXPECT_EQ(mine.text.find("hf-secret-value-1"), std::string::npos) << mine.text;

  for (const Http* other : std::vector<const Http*>{&bob, &admin}) {
    for (const std::string& p : {path, std::string("/v1/jobs?full=true&tenant=red")}) {
      auto seen = other->Get(p);
      ASSERT_EQ(seen.status, 200) << seen.text;
      EXPECT_EQ(seen.text.find("plain-value-1"), std::string::npos) << p << ": " << seen.text;
      EXPECT_EQ(seen.text.find("hf-secret-value-1"), std::string::npos) << p << ": " << seen.text;
    }
    auto job = other->Get(path);
    EXPECT_EQ(job.body.at("spec").at("env").at("PLAIN_VAR"), "(hidden)");
    EXPECT_EQ(job.body.at("spec").at("env").at("HF_TOKEN"), "(secret)");
  }
  // Alice's own full list shows her value, never the secret.
  auto list = alice.Get("/v1/jobs?full=true");
  ASSERT_EQ(list.status, 200) << list.text;
  EXPECT_NE(list.text.find("plain-value-1"), std::string::npos) << list.text;
  EXPECT_EQ(list.text.find("hf-secret-value-1"), std::string::npos) << list.text;

  // The run got both values.
  auto logs = alice.Get(fmt::format("/v1/jobs/{}/logs", id));
  ASSERT_EQ(logs.status, 200) << logs.text;
  EXPECT_NE(logs.text.find("plain=plain-value-1 secret=hf-secret-value-1"), std::string::npos)
      << logs.text;

  // Neither the audit trail, the history export nor berthd's log holds a value.
  auto audit = admin.Get("/v1/audit?action=job.submit");
  ASSERT_EQ(audit.status, 200) << audit.text;
  ASSERT_FALSE(audit.body.at("records").empty()) << audit.text;
  EXPECT_EQ(audit.text.find("hf-secret-value-1"), std::string::npos) << audit.text;
  EXPECT_EQ(audit.text.find("plain-value-1"), std::string::npos) << audit.text;
  auto history = admin.Get("/v1/history?since=0");
  ASSERT_EQ(history.status, 200) << history.text;
  EXPECT_EQ(history.text.find("hf-secret-value-1"), std::string::npos);
  EXPECT_EQ(berthd.log().find("hf-secret-value-1"), std::string::npos);
}

}  // namespace
}  // namespace berth::it
