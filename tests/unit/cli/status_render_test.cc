// `berth status`'s view of a control plane (commands_status.cc): which
// berthd serves, and what each one says of the lease, from the documents
// StatusDocument builds out of every berthd's /healthz.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"

namespace berth::cli {
namespace {

using nlohmann::json;

constexpr std::int64_t kNow = 1'800'000'000'000;

json Leader(const std::string& url, int term, std::int64_t since_ms_ago) {
  return {{"server", url},
          {"reachable", true},
          {"role", "leader"},
          {"term", term},
          {"leader", url + " (pid 7 on cp1)"},
          {"leading_since", kNow - since_ms_ago},
          {"lease_age_ms", 420},
          {"lease_expires_in_ms", 2580}};
}

TEST(StatusRenderTest, NamesTheLeaderAndEachStandbysViewOfTheLease) {
  json doc{{"servers",
            {Leader("https://10.0.0.1:7460", 4, 192'000),
             {{"server", "https://10.0.0.2:7460"},
              {"reachable", true},
              {"role", "standby"},
              {"term", 4},
              {"lease_age_ms", 150},
              {"lease_expires_in_ms", 2400}},
             {{"server", "https://10.0.0.3:7460"},
              {"reachable", true},
              {"role", "standby"},
              {"term", 3},
              {"lease_age_ms", 61'000},
              {"lease_expires_in_ms", -58'000},
              {"database_error", "store: cannot connect to PostgreSQL: timeout expired"}},
             {{"server", "https://10.0.0.4:7460"},
              {"reachable", false},
              {"error", "cannot reach https://10.0.0.4:7460: connection refused"}}}},
           {"leader", "https://10.0.0.1:7460"},
           {"term", 4}};
  const std::string text = RenderStatus(doc, kNow);
  EXPECT_NE(text.find("leader: https://10.0.0.1:7460 at term 4, for 3m12s"), std::string::npos)
      << text;
  EXPECT_NE(text.find("https://10.0.0.2:7460   standby   4      0.1s ago     2.4s         ready "
                      "to take over"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("61.0s ago"), std::string::npos) << text;
  EXPECT_NE(text.find("database: store: cannot connect to PostgreSQL: timeout expired"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("unreachable: cannot reach https://10.0.0.4:7460: connection refused"),
            std::string::npos)
      << text;
}

TEST(StatusRenderTest, TheLeaderOfTheLaterTermServesAndTheOtherIsDeposed) {
  json doc{
      {"servers",
       {Leader("https://10.0.0.1:7460", 4, 60'000), Leader("https://10.0.0.2:7460", 5, 1'000)}},
      {"leader", "https://10.0.0.2:7460"}};
  const std::string text = RenderStatus(doc, kNow);
  EXPECT_NE(text.find("leader: https://10.0.0.2:7460 at term 5"), std::string::npos) << text;
  EXPECT_NE(text.find("deposed: a later term leads"), std::string::npos) << text;
}

TEST(StatusRenderTest, SaysSoWhenNobodyLeadsOrOneServesAlone) {
  json none{{"servers",
             {{{"server", "https://10.0.0.2:7460"},
               {"reachable", true},
               {"role", "standby"},
               {"term", 4},
               {"lease_age_ms", 100},
               {"lease_expires_in_ms", -900}}}},
            {"leader", nullptr}};
  EXPECT_EQ(RenderStatus(none, kNow).rfind("no berthd answers as the leader", 0), 0U);
  json single{
      {"servers", {{{"server", "http://127.0.0.1:7460"}, {"reachable", true}, {"role", "single"}}}},
      {"leader", "http://127.0.0.1:7460"}};
  const std::string text = RenderStatus(single, kNow);
  EXPECT_NE(text.find("http://127.0.0.1:7460 serves alone"), std::string::npos) << text;
  EXPECT_NE(text.find("single   -      -            -"), std::string::npos) << text;
}

}  // namespace
}  // namespace berth::cli
