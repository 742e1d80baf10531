// The API's gate in one process: undeclared query parameters get 400 before
// any handler runs, a caller over its rate gets 429 with Retry-After and
// recovers, /healthz is never limited, an oversized body gets a JSON 413
// naming the limit, and errors never echo a token's secret.
#include <fmt/format.h>

#include "unit/server/api_harness.h"

namespace berth::server {
namespace {

class HardeningApiTest : public ApiHarness {
 protected:
  http::ServerOptions HttpOptions() const override {
    auto o = ApiHarness::HttpOptions();
    o.max_body_bytes = 4096;
    return o;
  }
};

TEST_F(HardeningApiTest, AnUnknownQueryParameterIsRefusedAndChangesNothing) {
  auto r = Post("/v1/policy/rollback?to=1&comitt=typo", "");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"].value("field", ""), "comitt");
  EXPECT_NE(r.body["error"].value("message", "").find("accepted: to, comment"), std::string::npos)
      << r.body.dump();
  // Nothing ran: the policy is still at its first version.
  auto versions = Get("/v1/policy/versions");
  EXPECT_EQ(versions.body["versions"].size(), 1u) << versions.body.dump();
  // A malformed value of a known parameter, on a read.
  r = Get("/v1/alerts?all=maybe");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"].value("field", ""), "all");
  EXPECT_EQ(Get("/v1/alerts?all=true").status, 200);
}

// The alert list's kind filter is read once at the edge: a kind no alert can
// have matches none (it is no error), and the list shows the stored names.
TEST_F(HardeningApiTest, TheAlertKindFilterMatchesByNameAndAnUnknownKindMatchesNothing) {
  store::Alert budget;
  budget.kind = model::AlertKind::kBudget;
  budget.severity = model::AlertSeverity::kCritical;
  budget.raised_ms = clock_.NowMs();
  ASSERT_TRUE(store_->RaiseAlert(budget).has_value());
  store::Alert waits = budget;
  waits.kind = model::AlertKind::kQueueWait;
  waits.severity = model::AlertSeverity::kInfo;
  ASSERT_TRUE(store_->RaiseAlert(waits).has_value());
  auto r = Get("/v1/alerts?kind=queue_wait");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  ASSERT_EQ(r.body["alerts"].size(), 1u) << r.body.dump();
  EXPECT_EQ(r.body["alerts"][0]["kind"], "queue_wait");
  EXPECT_EQ(r.body["alerts"][0]["severity"], "info");
  EXPECT_EQ(Get("/v1/alerts").body["alerts"].size(), 2u);
  r = Get("/v1/alerts?kind=disk_full");
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body["alerts"].empty()) << r.body.dump();
}

TEST_F(HardeningApiTest, ACallerOverItsRateGets429WithRetryAfterAndRecovers) {
  RateLimiter limiter({2, 2, 100}, clock_);
  api_->set_rate_limiter(&limiter);
  const httplib::Headers token{{"Authorization", "Bearer " + token_}};
  auto second = identities_->CreateToken("alice", "second", std::nullopt, "test", clock_.NowMs());
  ASSERT_TRUE(second.has_value());
  const httplib::Headers other{{"Authorization", "Bearer " + second->token}};
  EXPECT_EQ(client_->Get("/v1/nodes", token)->status, 200);
  EXPECT_EQ(client_->Get("/v1/nodes", token)->status, 200);
  auto res = client_->Get("/v1/nodes", token);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429);
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  auto body = nlohmann::json::parse(res->body);
  EXPECT_EQ(body["error"].value("code", ""), "ResourceExhausted");
  EXPECT_EQ(body["error"].value("field", ""), "rate_limit");
  const std::string message = body["error"].value("message", "");
  EXPECT_NE(message.find("at most 2 requests per second"), std::string::npos) << message;
  EXPECT_NE(message.find("--rate-limit"), std::string::npos) << message;
  // Probes are exempt; another token, or no token (the address), has its own budget.
  EXPECT_EQ(client_->Get("/healthz", token)->status, 200);
  EXPECT_EQ(client_->Get("/v1/nodes", other)->status, 200);
  httplib::Client anonymous("127.0.0.1", port_);
  EXPECT_EQ(anonymous.Get("/v1/nodes")->status, 401);  // counted, not limited
  clock_.Advance(500);
  EXPECT_EQ(client_->Get("/v1/nodes", token)->status, 200);
}

TEST_F(HardeningApiTest, MadeUpTokenIdsShareTheirSourcesBudgetInsteadOfEachGettingOne) {
  RateLimiter limiter({2, 2, 100}, clock_);
  api_->set_rate_limiter(&limiter);
  // A source gets kSourceFactor times a token's burst (40) before anything
  // is verified; a new id per request does not reset it.
  const int source_burst = static_cast<int>(2 * kSourceFactor);
  httplib::Client forger("127.0.0.1", port_);
  int unauthenticated = 0;
  int limited = 0;
  for (int i = 0; i < source_burst + 10; ++i) {
    const httplib::Headers made_up{
        {"Authorization", "Bearer berth_fake" + std::to_string(i) + "_secretsecretsecret"}};
    auto res = forger.Get("/v1/nodes", made_up);
    ASSERT_TRUE(res);
    unauthenticated += res->status == 401;
    if (res->status == 429) {
      ++limited;
      EXPECT_NE(res->body.find("per source address"), std::string::npos) << res->body;
    }
  }
  EXPECT_EQ(unauthenticated, source_burst);
  EXPECT_EQ(limited, 10);
}

TEST_F(HardeningApiTest, WrongSecretsForARealTokenCostOneVerificationEachAndAreCapped) {
  // alice's real token id with a secret that is not hers.
  ASSERT_EQ(Get("/v1/nodes").status, 200);  // her own, verified and cached
  const std::string id = token_.substr(0, token_.rfind('_'));
  const std::size_t secret_len = token_.size() - id.size() - 1;
  httplib::Client guesser("127.0.0.1", port_);
  auto try_secret = [&](const std::string& secret) {
    auto res = guesser.Get("/v1/nodes", {{"Authorization", "Bearer " + id + "_" + secret}});
    return res ? res->status : 0;
  };
  // The same wrong secret again and again: refused from memory, so it never
  // uses up the source's verifications (the clock stands still: nothing
  // refills).
  for (int i = 0; i < 100; ++i) ASSERT_EQ(try_secret(std::string(secret_len, 'a')), 401) << i;
  // New secrets each cost a verification, up to the source's burst.
  int refused = 0;
  int limited = 0;
  for (int i = 0; i < static_cast<int>(kVerifyBurstPerSource) + 5; ++i) {
    const int status = try_secret(fmt::format("{:0{}x}", i + 1, secret_len));
    refused += status == 401;
    limited += status == 429;
  }
  // Two of the burst went on alice's own token and the first wrong secret.
  EXPECT_EQ(refused, kVerifyBurstPerSource - 2);
  EXPECT_EQ(limited, 7);
  // The owner's cached token still works.
  EXPECT_EQ(Get("/v1/nodes").status, 200);
}

TEST_F(HardeningApiTest, AnOversizedBodyGetsJson413NamingTheLimit) {
  api_->set_max_body_bytes(4096);
  auto r = Post("/v1/jobs", "name: x\ncommand: [\"true\"]\n#" + std::string(8192, 'x'));
  EXPECT_EQ(r.status, 413);
  const std::string message = r.body["error"].value("message", "");
  EXPECT_NE(message.find("4096 bytes"), std::string::npos) << r.body.dump();
  EXPECT_NE(message.find("--max-body"), std::string::npos) << r.body.dump();
}

TEST_F(HardeningApiTest, ErrorsNeverEchoATokenSecret) {
  auto r = Get("/v1/jobs/berth_abc_topsecretvalue");
  EXPECT_EQ(r.status, 400);
  const std::string text = r.body.dump();
  EXPECT_EQ(text.find("topsecretvalue"), std::string::npos) << text;
  EXPECT_NE(text.find("berth_abc_"), std::string::npos) << text;
  r = Get("/v1/nope/berth_abc_topsecretvalue");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body.dump().find("topsecretvalue"), std::string::npos) << r.body.dump();
  r = Get("/v1/jobs?berth_abc_topsecretvalue=1");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body.dump().find("topsecretvalue"), std::string::npos) << r.body.dump();
}

}  // namespace
}  // namespace berth::server
