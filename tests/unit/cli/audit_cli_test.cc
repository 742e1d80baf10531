// `berth audit`'s pure parts: the --since/--until forms and the CSV rows.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"

namespace berth::cli {
namespace {

TEST(AuditTimeQuery, DurationsAndMillisecondsPassAsTheyAre) {
  EXPECT_EQ(AuditTimeQuery("", "--since").value(), "");
  EXPECT_EQ(AuditTimeQuery("1h", "--since").value(), "1h");
  EXPECT_EQ(AuditTimeQuery("1796018578428", "--since").value(), "1796018578428");
}

TEST(AuditTimeQuery, Rfc3339BecomesEpochMilliseconds) {
  EXPECT_EQ(AuditTimeQuery("1970-01-01T00:00:01Z", "--since").value(), "1000");
  EXPECT_EQ(AuditTimeQuery("2026-11-30T05:00:00Z", "--since").value(), "1796014800000");
  EXPECT_EQ(AuditTimeQuery("2026-11-30T07:00:00.25+02:00", "--since").value(), "1796014800250");
  EXPECT_EQ(AuditTimeQuery("2026-11-30t04:30:00-00:30", "--until").value(), "1796014800000");
}

TEST(AuditTimeQuery, AnythingElseNamesTheFlag) {
  for (const char* bad : {"yesterday", "2026-11-30", "2026-11-30T05:00:00", "2026-13-01T00:00:00Z",
                          "2026-11-30T05:00:00+0200", "1h!"}) {
    auto r = AuditTimeQuery(bad, "--since");
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().field, "--since") << bad;
  }
}

TEST(AuditCsv, QuotesFieldsThatNeedItAndKeepsJsonCompact) {
  auto response = nlohmann::json::parse(R"({"records": [{
    "seq": 3, "time_ms": 1000, "actor": "alice, admin", "tenant": "", "action": "node.cordon",
    "object": "node/a", "before": null, "after": {"cordon": "cordon", "reason": "say \"hi\""},
    "request_id": "r1", "source": "10.0.0.1", "outcome": "ok", "prev_hash": "p", "hash": "h"}]})");
  std::string csv = AuditCsv(response);
  EXPECT_EQ(csv,
            "seq,time,actor,tenant,action,object,before,after,request_id,source,outcome,prev_hash,"
            "hash\r\n"
            "3,1970-01-01T00:00:01.000Z,\"alice, admin\",,node.cordon,node/a,,"
            "\"{\"\"cordon\"\":\"\"cordon\"\",\"\"reason\"\":\"\"say \\\"\"hi\\\"\"\"\"}\","
            "r1,10.0.0.1,ok,p,h\r\n");
}

TEST(RenderAudit, SaysSoWhenNothingMatches) {
  EXPECT_EQ(RenderAudit(nlohmann::json{{"records", nlohmann::json::array()}}),
            "No audit records match.\n");
}

}  // namespace
}  // namespace berth::cli
