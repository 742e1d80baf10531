// `berth quota`'s renderings: the request list and one request.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"

namespace berth::cli {
namespace {

using nlohmann::json;

json Request() {
  return json{{"id", 3},
              {"tenant", "vision"},
              {"queue", "vision/training"},
              {"resource", "gpus"},
              {"guaranteed", "16"},
              {"borrow_limit", "8"},
              {"weight", nullptr},
              {"lending_limit", nullptr},
              {"reason", "new 70B run"},
              {"state", "Approved"},
              {"filed_by", "alice"},
              {"filed_ms", 1796014800000},
              {"decided_by", "root"},
              {"decided_ms", 1796014860000},
              {"comment", "ok for Q4"},
              {"policy_version", 7}};
}

TEST(QuotaCli, TheListShowsTheChangeAndTheVersion) {
  std::string out = RenderQuotaRequests(json{{"requests", json::array({Request()})}});
  EXPECT_NE(out.find("ID   STATE      QUEUE"), std::string::npos) << out;
  EXPECT_NE(out.find("guaranteed 16, borrow_limit 8"), std::string::npos) << out;
  EXPECT_NE(out.find("v7"), std::string::npos) << out;
  EXPECT_NE(out.find("2026-11-30T05:00:00.000Z"), std::string::npos) << out;
  EXPECT_EQ(RenderQuotaRequests(json{{"requests", json::array()}}), "No quota requests match.\n");
}

TEST(QuotaCli, OneRequestShowsItsDecision) {
  std::string out = RenderQuotaRequest(Request());
  EXPECT_NE(out.find("State:         Approved"), std::string::npos) << out;
  EXPECT_NE(out.find("Decided:       2026-11-30T05:01:00.000Z by root"), std::string::npos) << out;
  EXPECT_NE(out.find("Comment:       ok for Q4"), std::string::npos) << out;
  EXPECT_NE(out.find("Policy:        v7"), std::string::npos) << out;
  json pending = Request();
  pending["state"] = "Pending";
  pending["decided_ms"] = nullptr;
  pending["policy_version"] = nullptr;
  out = RenderQuotaRequest(pending);
  EXPECT_EQ(out.find("Decided:"), std::string::npos) << out;
  EXPECT_EQ(out.find("Policy:"), std::string::npos) << out;
}

}  // namespace
}  // namespace berth::cli
