// The growing admin lists page like jobs and audit do (docs/api.md "Pages"):
// GET /v1/alerts, /v1/alert-deliveries and /v1/quota-requests answer at
// most `limit` rows with a `next` cursor, filters apply before the page is
// cut, a cursor of another list or a limit past the maximum is refused with
// 400 naming the parameter, and `berth alerts` follows the pages back to
// the first alert.
#include <fmt/format.h>

#include <functional>
#include <sstream>

#include "cli/app.h"
#include "unit/server/api_harness.h"

namespace berth::server {
namespace {

using nlohmann::json;

class PagingApiTest : public ApiHarness {
 protected:
  // Raises `n` alerts of `kind`, one sink each; returns their ids.
  std::vector<std::int64_t> Raise(int n, model::AlertKind kind) {
    std::vector<std::int64_t> ids;
    for (int i = 0; i < n; ++i) {
      store::Alert a;
      a.kind = kind;
      a.severity = model::AlertSeverity::kWarning;
      a.message = fmt::format("alert {}", i);
      a.raised_ms = clock_.NowMs();
      a.sinks = {"ops"};
      auto id = store_->RaiseAlert(a);
      EXPECT_TRUE(id.has_value()) << id.error().message;
      ids.push_back(id.value_or(0));
    }
    return ids;
  }

  // Every page of `path` (which has no query yet) at `limit` rows, following
  // `next`; each page but the last is full and the last has no `next`.
  static std::vector<json> AllPages(const std::function<Answer(const std::string&)>& get,
                                    const std::string& path, const std::string& key,
                                    std::size_t limit) {
    std::vector<json> rows;
    std::string after;
    for (int guard = 0; guard < 100; ++guard) {
      auto page =
          get(fmt::format("{}{}limit={}{}", path, path.find('?') == std::string::npos ? "?" : "&",
                          limit, after.empty() ? "" : "&after=" + after));
      EXPECT_EQ(page.status, 200) << path << page.body.dump();
      if (page.status != 200) break;
      for (const auto& r : page.body[key]) rows.push_back(r);
      if (!page.body.contains("next")) break;
      EXPECT_EQ(page.body[key].size(), limit) << "a page before the last is full";
      after = page.body["next"].get<std::string>();
    }
    return rows;
  }

  static std::vector<std::int64_t> Ids(const json& list) {
    std::vector<std::int64_t> out;
    for (const auto& row : list) out.push_back(row["id"].get<std::int64_t>());
    return out;
  }
};

TEST_F(PagingApiTest, AlertPagesGoBackInTimeEachOldestFirstAndTheKindFilterIsAppliedFirst) {
  auto budget = Raise(3, model::AlertKind::kBudget);
  auto waits = Raise(2, model::AlertKind::kQueueWait);
  auto more = Raise(1, model::AlertKind::kBudget);

  // The newest two budget alerts, oldest first; the queue-wait alerts
  // between them do not shorten the page.
  auto r = Get("/v1/alerts?kind=budget&limit=2");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(Ids(r.body["alerts"]), (std::vector<std::int64_t>{budget[2], more[0]}));
  ASSERT_TRUE(r.body.contains("next")) << r.body.dump();
  r = Get("/v1/alerts?kind=budget&limit=2&after=" + r.body["next"].get<std::string>());
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(Ids(r.body["alerts"]), (std::vector<std::int64_t>{budget[0], budget[1]}));
  EXPECT_FALSE(r.body.contains("next")) << r.body.dump();

  // Without a limit every alert fits the default page: no cursor.
  r = Get("/v1/alerts");
  EXPECT_EQ(r.body["alerts"].size(), 6u);
  EXPECT_FALSE(r.body.contains("next"));
  (void)waits;
}

TEST_F(PagingApiTest, ABadLimitOrAForeignCursorIsRefusedNamingIt) {
  Raise(1, model::AlertKind::kBudget);
  for (const char* path :
       {"/v1/alerts?limit=5001", "/v1/alert-deliveries?limit=0", "/v1/quota-requests?limit=6000"}) {
    auto r = Get(path);
    EXPECT_EQ(r.status, 400) << path << r.body.dump();
    EXPECT_EQ(r.body["error"]["field"], "limit") << path << r.body.dump();
  }
  // A job list's cursor, and text that is no cursor, on each list.
  for (const char* path :
       {"/v1/alerts?after=j5", "/v1/alert-deliveries?after=l1", "/v1/quota-requests?after=x"}) {
    auto r = Get(path);
    EXPECT_EQ(r.status, 400) << path << r.body.dump();
    EXPECT_EQ(r.body["error"]["field"], "after") << path << r.body.dump();
  }
}

TEST_F(PagingApiTest, DeliveryPagesAreNewestFirstAndMeetWithoutOverlap) {
  Raise(5, model::AlertKind::kBudget);  // one "raised" delivery each
  auto first = Get("/v1/alert-deliveries?limit=3");
  ASSERT_EQ(first.status, 200) << first.body.dump();
  auto a = Ids(first.body["deliveries"]);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_GT(a[0], a[1]);
  EXPECT_GT(a[1], a[2]);
  ASSERT_TRUE(first.body.contains("next"));
  auto second = Get("/v1/alert-deliveries?limit=3&after=" + first.body["next"].get<std::string>());
  ASSERT_EQ(second.status, 200) << second.body.dump();
  auto b = Ids(second.body["deliveries"]);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_LT(b[0], a[2]);
  EXPECT_FALSE(second.body.contains("next"));
}

TEST_F(PagingApiTest, QuotaRequestPagesAreNewestFirstWithTheStateFilterAppliedFirst) {
  ASSERT_TRUE(store_
                  ->ApplyPolicy("queues:\n  - name: vision\n    quota: {gpus: {guaranteed: 4}}\n",
                                "root", "", clock_.NowMs())
                  .has_value());
  std::vector<std::int64_t> filed;
  for (int i = 0; i < 4; ++i) {
    auto r =
        Post("/v1/quota-requests",
             fmt::format("queue: vision\nresource: gpus\nguaranteed: {}\nreason: r{}\n", i + 5, i));
    ASSERT_EQ(r.status, 201) << r.body.dump();
    filed.push_back(r.body["id"].get<std::int64_t>());
  }
  // The second one is withdrawn: a Pending page skips it without coming up short.
  ASSERT_EQ(Post(fmt::format("/v1/quota-requests/{}/withdraw", filed[1]), "").status, 200);
  auto r = Get("/v1/quota-requests?state=Pending&limit=2");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(Ids(r.body["requests"]), (std::vector<std::int64_t>{filed[3], filed[2]}));
  ASSERT_TRUE(r.body.contains("next"));
  r = Get("/v1/quota-requests?state=Pending&limit=2&after=" + r.body["next"].get<std::string>());
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(Ids(r.body["requests"]), (std::vector<std::int64_t>{filed[0]}));
  EXPECT_FALSE(r.body.contains("next"));
}

TEST_F(PagingApiTest, IdentityPagesTogetherAreTheWholeListAndATenantAdminsHoldOnlyItsTenants) {
  for (int i = 0; i < 7; ++i) {
    store::Identity id;
    id.name = fmt::format("user{}", i);
    id.tenants[i % 2 == 0 ? "red" : "blue"] = store::Role::kMember;
    ASSERT_TRUE(identities_->CreateIdentity(id).has_value());
  }
  store::Identity ta;
  ta.name = "ta";
  ta.tenants["red"] = store::Role::kTenantAdmin;
  ASSERT_TRUE(identities_->CreateIdentity(ta).has_value());
  auto get = [this](const std::string& p) { return Get(p); };
  const json whole = Get("/v1/identities").body["identities"];
  ASSERT_EQ(whole.size(), 9u);  // alice, ta, user0..6
  auto paged = AllPages(get, "/v1/identities", "identities", 2);
  EXPECT_EQ(json(paged), whole);

  // The tenant-admin of red: red's members only (user0, 2, 4, 6 and itself),
  // in full pages, whatever cursor it forges.
  auto token = identities_->CreateToken("ta", "tests", std::nullopt, "tests", clock_.NowMs());
  ASSERT_TRUE(token.has_value());
  httplib::Client as_ta("127.0.0.1", port_);
  as_ta.set_bearer_token_auth(token->token);
  auto get_ta = [&as_ta](const std::string& p) -> Answer {
    auto res = as_ta.Get(p);
    if (!res) return {};
    return {res->status, json::parse(res->body, nullptr, false)};
  };
  std::vector<std::string> names;
  for (const auto& r : AllPages(get_ta, "/v1/identities", "identities", 2)) {
    names.push_back(r["name"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"ta", "user0", "user2", "user4", "user6"}));
  auto forged = get_ta("/v1/identities?limit=1&after=iuser0");
  ASSERT_EQ(forged.status, 200) << forged.body.dump();
  ASSERT_EQ(forged.body["identities"].size(), 1u);
  EXPECT_EQ(forged.body["identities"][0]["name"], "user2");
}

TEST_F(PagingApiTest, TokenPagesAreNewestFirstAndTogetherAreTheWholeList) {
  // Three in one millisecond (the id breaks the tie), then two later.
  for (int i = 0; i < 5; ++i) {
    if (i >= 3) clock_.Advance(1000);
    ASSERT_TRUE(
        identities_->CreateToken("alice", "t", std::nullopt, "tests", clock_.NowMs()).has_value());
  }
  auto get = [this](const std::string& p) { return Get(p); };
  const json whole = Get("/v1/tokens").body["tokens"];
  ASSERT_EQ(whole.size(), 6u);
  EXPECT_EQ(json(AllPages(get, "/v1/tokens", "tokens", 2)), whole);
  EXPECT_EQ(json(AllPages(get, "/v1/tokens?identity=alice", "tokens", 4)), whole);
  EXPECT_EQ(json(AllPages(get, "/v1/tokens", "tokens", 6)), whole);
}

TEST_F(PagingApiTest, IdentityTokenAndDeliveryListsRefuseABadLimitOrCursorNamingIt) {
  for (const char* path : {"/v1/identities?limit=5001", "/v1/tokens?limit=5001",
                           "/v1/alert-deliveries?limit=5001", "/v1/identities?limit=0"}) {
    auto r = Get(path);
    EXPECT_EQ(r.status, 400) << path << r.body.dump();
    EXPECT_EQ(r.body["error"]["field"], "limit") << path << r.body.dump();
  }
  for (const char* path : {"/v1/identities?after=j5", "/v1/tokens?after=ialice",
                           "/v1/tokens?after=t12", "/v1/tokens?after=tx:1"}) {
    auto r = Get(path);
    EXPECT_EQ(r.status, 400) << path << r.body.dump();
    EXPECT_EQ(r.body["error"]["field"], "after") << path << r.body.dump();
  }
}

TEST_F(PagingApiTest, DeliveriesPageAtTheDefaultOf500LikeEveryList) {
  Raise(501, model::AlertKind::kBudget);
  auto r = Get("/v1/alert-deliveries");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["deliveries"].size(), 500u);
  EXPECT_TRUE(r.body.contains("next"));
}

TEST_F(PagingApiTest, AHistoryWindowOverTheReadCapIsRefusedNamingItTheMaximumAndTheFlag) {
  for (int i = 0; i < 3; ++i) {
    auto r = Post("/v1/jobs", fmt::format("{{name: j{}, command: [x]}}", i));
    ASSERT_EQ(r.status, 201) << r.body.dump();
  }
  clock_.Advance(1000);  // the window ends before now: the jobs are in it
  api_->set_report_max_rows(3);
  auto fits = Get("/v1/history?since=0");
  ASSERT_EQ(fits.status, 200) << fits.body.dump();
  EXPECT_EQ(fits.body["jobs"].size(), 3u);
  api_->set_report_max_rows(2);
  auto over = Get("/v1/history?since=0");
  ASSERT_EQ(over.status, 400) << over.body.dump();
  EXPECT_EQ(over.body["error"]["field"], "since");
  const std::string message = over.body["error"]["message"];
  EXPECT_NE(message.find("more than 2"), std::string::npos) << message;
  EXPECT_NE(message.find("--report-max-rows 2"), std::string::npos) << message;
  EXPECT_NE(message.find("the window from"), std::string::npos) << message;
}

TEST_F(PagingApiTest, TheCliFollowsAlertPagesBackToTheFirstAlert) {
  // More than one page of berthd's default 500.
  auto ids = Raise(1203, model::AlertKind::kBudget);
  std::istringstream in;
  std::ostringstream out;
  std::ostringstream err;
  const int code = cli::RunCli(
      {"berth", "--server", "http://127.0.0.1:" + std::to_string(port_), "alerts", "-o", "json"},
      {in, out, err, std::nullopt, clock_, token_, {}, std::nullopt});
  ASSERT_EQ(code, cli::kExitOk) << err.str();
  auto body = json::parse(out.str());
  EXPECT_EQ(Ids(body["alerts"]), ids);
}

}  // namespace
}  // namespace berth::server
