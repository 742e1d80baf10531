// Strict query decoding (request_decode.h): unknown, repeated and malformed
// parameters are refused naming the parameter, and every documented endpoint
// has a declared rule.
#include "api/request_decode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>

#include "api/openapi.h"

namespace berth::server {
namespace {

constexpr TimeMs kNow = 1'700'000'000'000;

Error QueryError(std::string_view method, std::string_view path, std::string_view query) {
  const RouteRule* route = MatchRoute(method, path);
  EXPECT_NE(route, nullptr) << method << " " << path;
  if (route == nullptr) return {};
  auto st = CheckQuery(*route, ParseQueryString(query), kNow);
  EXPECT_FALSE(st.has_value()) << query;
  return st.has_value() ? Error{} : st.error();
}

bool QueryOk(std::string_view method, std::string_view path, std::string_view query) {
  const RouteRule* route = MatchRoute(method, path);
  if (route == nullptr) return false;
  auto st = CheckQuery(*route, ParseQueryString(query), kNow);
  EXPECT_TRUE(st.has_value()) << query << ": " << st.error().message;
  return st.has_value();
}

TEST(RequestDecode, AcceptsWhatEachRouteDeclares) {
  EXPECT_TRUE(QueryOk("GET", "/v1/jobs", "state=Running,Pending&tenant=a&queue=b&limit=20"));
  EXPECT_TRUE(QueryOk("GET", "/v1/jobs/12/logs", "replica=3&follow=true"));
  EXPECT_TRUE(QueryOk("GET", "/v1/audit", "since=7d&until=1700000000000&actor=alice&limit=1"));
  EXPECT_TRUE(QueryOk("POST", "/v1/policy", "dry_run=1&comment=more%20GPUs"));
  EXPECT_TRUE(QueryOk("POST", "/v1/nodes/n1/gpus/3/cordon", "reason=xid+79"));
  EXPECT_TRUE(QueryOk("POST", "/v1/policy/preview", "window=12h&prices=H100%3D2.5"));
  EXPECT_TRUE(QueryOk("GET", "/v1/nodes", ""));
}

TEST(RequestDecode, AnUnknownParameterIsNamedWithTheAcceptedOnes) {
  auto e = QueryError("GET", "/v1/jobs", "state=Running&colour=blue");
  EXPECT_EQ(e.code, Code::kInvalidArgument);
  EXPECT_EQ(e.field, "colour");
  EXPECT_NE(e.message.find("unknown query parameter 'colour'"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("accepted: state, tenant, queue, array, limit"), std::string::npos)
      << e.message;
  e = QueryError("GET", "/v1/nodes", "verbose=1");
  EXPECT_NE(e.message.find("takes no query parameters"), std::string::npos) << e.message;
  // A misspelling is not silently ignored.
  e = QueryError("GET", "/v1/audit", "limt=5");
  EXPECT_EQ(e.field, "limt");
}

TEST(RequestDecode, MalformedValuesAreRefusedNamingTheParameter) {
  struct Case {
    std::string_view method, path, query, field, says;
  };
  const std::vector<Case> cases{
      {"GET", "/v1/jobs", "limit=0", "limit", "from 1 to 5000"},
      {"GET", "/v1/jobs", "limit=5001", "limit", "from 1 to 5000"},
      {"GET", "/v1/jobs", "limit=ten", "limit", "'ten'"},
      {"GET", "/v1/jobs", "limit=", "limit", "from 1 to 5000"},
      {"GET", "/v1/jobs/1/logs", "follow=yes", "follow", "true or false"},
      {"GET", "/v1/jobs/1/logs", "replica=-1", "replica", "from 0 to 1023"},
      {"POST", "/v1/jobs/1/checkpoint", "at_ms=99999999999999999999", "at_ms", "at least 1"},
      {"GET", "/v1/history", "since=yesterday", "since", "7d or 12h"},
      {"POST", "/v1/policy/preview", "window=0s", "window", "positive duration"},
      {"POST", "/v1/policy/rollback", "to=0", "to", "at least 1"},
      {"GET", "/v1/policy/diff", "from=1&from=2", "from", "given 2 times"},
      {"GET", "/v1/jobs", "=Running", "query", "has no name"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.query));
    auto e = QueryError(c.method, c.path, c.query);
    EXPECT_EQ(e.code, Code::kInvalidArgument);
    EXPECT_EQ(e.field, c.field);
    EXPECT_NE(e.message.find(c.says), std::string::npos) << e.message;
  }
  auto e = QueryError("POST", "/v1/nodes/n1/drain", "reason=" + std::string(1025, 'x'));
  EXPECT_EQ(e.field, "reason");
}

TEST(RequestDecode, AHugeValueIsNotEchoedBack) {
  auto e = QueryError("GET", "/v1/jobs", "limit=" + std::string(100000, '9'));
  EXPECT_LT(e.message.size(), 300u) << e.message.size();
}

TEST(RequestDecode, RoutesMatchAsTheServerRegistersThem) {
  EXPECT_EQ(MatchRoute("GET", "/v1/jobs/12")->pattern, R"(/v1/jobs/([^/]+))");
  EXPECT_EQ(MatchRoute("POST", "/v1/jobs/12/cancel")->pattern, R"(/v1/jobs/([^/]+)/cancel)");
  EXPECT_EQ(MatchRoute("DELETE", "/v1/jobs/12"), nullptr);
  EXPECT_EQ(MatchRoute("GET", "/v1/jobs/12/nope"), nullptr);
  EXPECT_EQ(MatchRoute("GET", "/v1/" + std::string(20000, 'a')), nullptr);
}

TEST(RequestDecode, EveryDocumentedEndpointAndParameterHasARule) {
  auto doc = nlohmann::json::parse(OpenApiDocument());
  const auto& paths = doc["paths"];
  int checked = 0;
  for (auto it = paths.begin(); it != paths.end(); ++it) {
    // /v1/nodes/{node}/{action} -> /v1/nodes/1/cordon
    // (an identity's actions are disable, enable, ...)
    std::string path =
        std::regex_replace(it.key(), std::regex(R"(\{action\})"),
                           it.key().starts_with("/v1/identities/") ? "disable" : "cordon");
    path = std::regex_replace(path, std::regex(R"(\{[^}]+\})"), "1");
    for (auto op = it.value().begin(); op != it.value().end(); ++op) {
      std::string method = op.key();
      for (auto& c : method) c = static_cast<char>(std::toupper(c));
      const RouteRule* route = MatchRoute(method, path);
      ASSERT_NE(route, nullptr) << method << " " << it.key();
      ++checked;
      if (!op.value().contains("parameters")) continue;
      const auto& params = op.value()["parameters"];
      for (const auto& param : params) {
        if (param.value("in", "") != "query") continue;
        const std::string name = param.value("name", "");
        bool declared = std::any_of(route->params.begin(), route->params.end(),
                                    [&](const ParamRule& r) { return r.name == name; });
        EXPECT_TRUE(declared) << method << " " << it.key() << " documents ?" << name;
      }
    }
  }
  EXPECT_GE(checked, 20);
}

TEST(RequestDecode, QueryStringsDecodeAsTheServerDoes) {
  auto p = ParseQueryString("a=1&b=x%20y+z&c&&d=%zz&e=%4");
  EXPECT_EQ(p.find("a")->second, "1");
  EXPECT_EQ(p.find("b")->second, "x y z");
  EXPECT_EQ(p.find("c")->second, "");
  EXPECT_EQ(p.find("d")->second, "%zz");
  EXPECT_EQ(p.find("e")->second, "%4");
  EXPECT_EQ(p.size(), 5u);
}

}  // namespace
}  // namespace berth::server
