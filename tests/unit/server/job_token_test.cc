// Job tokens (job_token.h) and the Authorizer's side of them and of
// metrics-readers: a token verifies only with its key and for its own run,
// a wrong MAC, another run id or a malformed token is refused without
// echoing the secret, an ended run's token is refused, the key survives a
// restart in the data dir (0600), and the redactor cuts the secret.
#include "control/job_token.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>

#include "api/auth.h"
#include "api/redact.h"

namespace berth::server {
namespace {

const std::string kKey(64, 'a');

TEST(JobToken, VerifiesForItsOwnRunOnly) {
  JobTokenKey key(kKey);
  const std::string token = key.Issue(12, 1, 3);
  EXPECT_TRUE(token.starts_with("berth_j12r1a3_")) << token;
  EXPECT_EQ(token.size(), std::string("berth_j12r1a3_").size() + 64);
  auto claim = key.Verify(token);
  ASSERT_TRUE(claim.has_value()) << claim.error().message;
  EXPECT_EQ(claim->job_id, 12);
  EXPECT_EQ(claim->replica, 1u);
  EXPECT_EQ(claim->attempt, 3u);
  EXPECT_EQ(claim->run_id, "12.1.3");
  EXPECT_EQ(claim->token_id, "j12r1a3");
  // The same run always gets the same token; another attempt another one.
  EXPECT_EQ(key.Issue(12, 1, 3), token);
  EXPECT_NE(key.Issue(12, 1, 4), token);
}

TEST(JobToken, AWrongMacAnotherRunOrAnotherKeyIsRefused) {
  JobTokenKey key(kKey);
  const std::string token = key.Issue(12, 0, 1);
  const std::string mac = token.substr(token.find('_', 6) + 1);
  std::string flipped = token;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  // Another attempt's (or job's) id with this run's MAC.
  for (const std::string& bad :
       {flipped, "berth_j12r0a2_" + mac, "berth_j13r0a1_" + mac, "berth_j12r1a1_" + mac,
        JobTokenKey(std::string(64, 'b')).Issue(12, 0, 1)}) {
    auto v = key.Verify(bad);
    ASSERT_FALSE(v.has_value()) << bad;
    EXPECT_EQ(v.error().code, Code::kUnauthenticated) << bad;
    EXPECT_NE(v.error().message.find("is not valid"), std::string::npos) << v.error().message;
    EXPECT_EQ(v.error().message.find(mac.substr(0, 16)), std::string::npos) << v.error().message;
  }
}

TEST(JobToken, MalformedTokensAreRefusedAsSuch) {
  JobTokenKey key(kKey);
  const std::string mac(64, 'f');
  for (const std::string& bad : std::vector<std::string>{
           "berth_j", "berth_j12r0a1", "berth_j12r0a1_", "berth_j12r0a1_" + mac + "0",
           "berth_j12r0a1_abc", "berth_j012r0a1_" + mac, "berth_j0r0a1_" + mac,
           "berth_j-1r0a1_" + mac, "berth_j12a1_" + mac, "berth_j12r0_" + mac,
           "berth_j99999999999999999999r0a1_" + mac, "berth_j12r0a1x_" + mac}) {
    auto v = key.Verify(bad);
    ASSERT_FALSE(v.has_value()) << bad;
    EXPECT_EQ(v.error().code, Code::kUnauthenticated) << bad;
    EXPECT_NE(v.error().message.find("not a Berth job token"), std::string::npos)
        << bad << ": " << v.error().message;
  }
}

TEST(JobToken, TheRedactorCutsItsSecret) {
  const std::string token = JobTokenKey(kKey).Issue(7, 0, 1);
  EXPECT_EQ(RedactSecrets("env BERTH_JOB_TOKEN=" + token + " end"),
            "env BERTH_JOB_TOKEN=berth_j7r0a1_\u2026 end");
  EXPECT_EQ(BearerTokenId("Bearer " + token), "j7r0a1");
}

class TempDataDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-jt-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

using JobTokenKeyFile = TempDataDir;

TEST_F(JobTokenKeyFile, IsMadeOnceKeptPrivateAndReadBack) {
  auto first = JobTokenKey::LoadOrCreate(dir_);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "job-token.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A restarted berthd verifies the tokens it gave before.
  auto again = JobTokenKey::LoadOrCreate(dir_);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_TRUE(again->Verify(first->Issue(3, 0, 1)).has_value());
  // Readable by others: refused, naming the fix.
  ::chmod((dir_ / "job-token.key").c_str(), 0644);
  auto open = JobTokenKey::LoadOrCreate(dir_);
  ASSERT_FALSE(open.has_value());
  EXPECT_NE(open.error().message.find("chmod 600"), std::string::npos) << open.error().message;
  // Deleted: a new key, and the old tokens stop verifying.
  std::filesystem::remove(dir_ / "job-token.key");
  auto fresh = JobTokenKey::LoadOrCreate(dir_);
  ASSERT_TRUE(fresh.has_value()) << fresh.error().message;
  EXPECT_FALSE(fresh->Verify(first->Issue(3, 0, 1)).has_value());
}

using AuthorizerScopes = TempDataDir;

http::Request Bearer(const std::string& token) {
  http::Request req;
  req.method = "GET";
  req.path = "/v1/jobs/12";
  req.remote_addr = "127.0.0.1";
  req.headers.emplace("Authorization", "Bearer " + token);
  return req;
}

TEST_F(AuthorizerScopes, AJobTokenIsTheJobWhileItsRunIsActive) {
  auto ids = store::IdentityStore::Open(dir_);
  ASSERT_TRUE(ids.has_value()) << ids.error().message;
  ManualClock clock;
  Authorizer auth(**ids, clock);
  JobTokenKey key(kKey);
  const std::string token = key.Issue(12, 0, 1);
  // Without a key berthd issues none and accepts none.
  EXPECT_EQ(auth.Authenticate(Bearer(token)).error().code, Code::kUnauthenticated);

  std::map<std::string, JobRunState> runs{{"12.0.1", {true, "red"}}};
  auth.set_job_tokens(&key, [&](const std::string& run_id) -> Result<std::optional<JobRunState>> {
    auto it = runs.find(run_id);
    if (it == runs.end()) return std::optional<JobRunState>();
    return std::optional<JobRunState>(it->second);
  });
  auto caller = auth.Authenticate(Bearer(token));
  ASSERT_TRUE(caller.has_value()) << caller.error().message;
  EXPECT_EQ(caller->scope, Scope::kJob);
  EXPECT_EQ(caller->name, "job/12 run 12.0.1");
  EXPECT_EQ(caller->token_id, "j12r0a1");
  EXPECT_EQ(caller->job_id, 12);
  EXPECT_EQ(caller->job_tenant, "red");
  // It holds no role anywhere: the handlers' own checks find nothing to show.
  EXPECT_FALSE(caller->platform_admin);
  EXPECT_FALSE(caller->CanRead("red"));
  EXPECT_TRUE(Authorizer::ScopeOf(*caller).none());

  // Its run exited: refused, saying so. A run the store never had: the same.
  runs["12.0.1"].active = false;
  auto ended = auth.Authenticate(Bearer(token));
  ASSERT_FALSE(ended.has_value());
  EXPECT_EQ(ended.error().code, Code::kUnauthenticated);
  EXPECT_NE(ended.error().message.find("run 12.0.1, which has ended"), std::string::npos)
      << ended.error().message;
  EXPECT_FALSE(auth.Authenticate(Bearer(key.Issue(40, 0, 1))).has_value());
}

TEST_F(AuthorizerScopes, AMetricsReaderHoldsNoRoleWhateverItsRecordSays) {
  auto ids = store::IdentityStore::Open(dir_);
  ASSERT_TRUE(ids.has_value()) << ids.error().message;
  store::Identity prom;
  prom.name = "prometheus";
  prom.kind = "service";
  prom.metrics_reader = true;
  prom.created_by = "test";
  ASSERT_TRUE((*ids)->CreateIdentity(prom).has_value());
  // Never with a role or platform-admin.
  prom.name = "prom2";
  prom.tenants["red"] = store::Role::kMember;
  auto mixed = (*ids)->CreateIdentity(prom);
  ASSERT_FALSE(mixed.has_value());
  EXPECT_EQ(mixed.error().field, "metrics_reader");
  // Kept across a reopen.
  ids->reset();
  ids = store::IdentityStore::Open(dir_);
  ASSERT_TRUE(ids.has_value());
  auto read = (*ids)->GetIdentity("prometheus");
  ASSERT_TRUE(read.has_value() && read->has_value());
  EXPECT_TRUE((*read)->metrics_reader);

  ManualClock clock;
  Authorizer auth(**ids, clock);
  auto issued = (*ids)->CreateToken("prometheus", "scrape", std::nullopt, "test", 0);
  ASSERT_TRUE(issued.has_value()) << issued.error().message;
  auto caller = auth.Authenticate(Bearer(issued->token));
  ASSERT_TRUE(caller.has_value()) << caller.error().message;
  EXPECT_EQ(caller->scope, Scope::kMetrics);
  EXPECT_FALSE(caller->platform_admin);
  EXPECT_TRUE(caller->tenants.empty());
}

}  // namespace
}  // namespace berth::server
