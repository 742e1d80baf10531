// berth-sim's reader of Berth's own history (GET /v1/history, `berth
// history export`): what run time each job gets, and clear errors.
#include "sim/history.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace berth::sim {
namespace {

using nlohmann::json;

json RunOf(int replica, int attempt, json start, json end, const std::string& stopped_for = "",
           json gpus = json::array({0})) {
  return json{{"replica", replica},
              {"attempt", attempt},
              {"node", "n1"},
              {"gpus", gpus},
              {"started_ms", start},
              {"finished_ms", end},
              {"stopped_for", stopped_for}};
}

json Doc(json jobs) {
  json node{{"name", "n1"},
            {"cpus", 32},
            {"memory_bytes", 1LL << 38},
            {"gpus",
             {{{"index", 1}, {"model", "A100-80GB"}, {"memory_bytes", 80LL << 30}},
              {{"index", 0}, {"model", "A100-80GB"}, {"memory_bytes", 80LL << 30}}}},
            {"state", "NotReady"}};
  return json{{"format", "berth-history/1"},
              {"since_ms", 0},
              {"until_ms", 100'000},
              {"exported_ms", 100'000},
              {"policy", {{"version", 4}, {"yaml", "queues: []\n"}}},
              {"nodes", {node}},
              {"jobs", jobs}};
}

TEST(HistoryReader, RunTimeIsTheWorkOfAttemptsThatWereNotEvicted) {
  json jobs = json::array();
  // 7: two replicas; the first attempt was preempted (its work lost), the
  // second ran from 5000 (first replica up) to 9000 (last one down).
  jobs.push_back({{"id", 7},
                  {"tenant", "vision"},
                  {"queue", "training"},
                  {"priority", "high"},
                  {"replicas", 2},
                  {"resources", {{"gpus", 1}, {"cpu_millis", 4000}, {"memory_bytes", 1 << 30}}},
                  {"preemptible", true},
                  {"max_runtime_ms", 60'000},
                  {"submitted_ms", 1000},
                  {"runs",
                   {RunOf(0, 1, 1500, 2500, "preempted"), RunOf(1, 1, 1500, 2600, "preempted"),
                    RunOf(0, 2, 5000, 8000), RunOf(1, 2, 5200, 9000, "", json::array({1}))}}});
  // 8: failed, then a retry succeeded: both attempts did work.
  jobs.push_back({{"id", 8},
                  {"submitted_ms", 500},
                  {"resources", {{"gpus", 1}, {"gpu_model", "H100-80GB"}}},
                  {"runs", {RunOf(0, 1, 600, 1600), RunOf(0, 2, 2000, 2500)}}});
  // 9: still running at the export (100 s): counts up to it.
  jobs.push_back({{"id", 9}, {"submitted_ms", 40'000}, {"runs", {RunOf(0, 1, 60'000, nullptr)}}});
  // 10: never started (pending, or a start error): nothing to replay.
  jobs.push_back({{"id", 10}, {"submitted_ms", 50'000}, {"runs", {RunOf(0, 1, nullptr, nullptr)}}});
  jobs.push_back({{"id", 11}, {"submitted_ms", 60'000}, {"runs", json::array()}});

  auto h = ReadHistory(Doc(jobs));
  ASSERT_TRUE(h.has_value()) << h.error().message;
  EXPECT_EQ(h->policy_version, 4);
  EXPECT_EQ(h->policy_yaml, "queues: []\n");
  EXPECT_EQ(h->never_ran, 2);
  EXPECT_EQ(h->still_running, 1);
  ASSERT_EQ(h->nodes.size(), 1U);
  EXPECT_TRUE(h->nodes[0].ready);  // the inventory, whatever its lease said
  EXPECT_EQ(h->nodes[0].cpu_millis_free, 32'000U);
  ASSERT_EQ(h->nodes[0].gpus.size(), 2U);
  EXPECT_EQ(h->nodes[0].gpus[0].index, 0U);

  ASSERT_EQ(h->jobs.size(), 3U);
  // Submit order, ids from 1; the Berth id is the name.
  const SimJob& retried = h->jobs[0];
  EXPECT_EQ(retried.id, 1);
  EXPECT_EQ(retried.name, "8");
  EXPECT_EQ(retried.duration_ms, 1000 + 500);
  EXPECT_EQ(retried.tenant, "default");
  EXPECT_EQ(retried.resources.gpu_model, "H100-80GB");
  const SimJob& gang = h->jobs[1];
  EXPECT_EQ(gang.id, 2);
  EXPECT_EQ(gang.name, "7");
  EXPECT_EQ(gang.duration_ms, 4000);
  EXPECT_EQ(gang.tenant, "vision");
  EXPECT_EQ(gang.queue, "training");
  EXPECT_EQ(gang.priority, model::Priority::kHigh);
  EXPECT_EQ(gang.preemptible, true);
  EXPECT_EQ(gang.replicas, 2U);
  EXPECT_EQ(gang.resources.cpu_millis, 4000U);
  EXPECT_EQ(gang.max_runtime_ms, 60'000);
  EXPECT_EQ(gang.submit_ms, 1000);
  EXPECT_EQ(h->gpu_model.at(2), "A100-80GB");  // what its last run held
  const SimJob& running = h->jobs[2];
  EXPECT_EQ(running.duration_ms, 40'000);
  EXPECT_EQ(running.preemptible, std::nullopt);
}

TEST(HistoryReader, MalformedDocumentsGetErrorsThatNameTheField) {
  json good = {{"id", 1}, {"submitted_ms", 1}, {"runs", json::array()}};
  auto err = [](const json& doc) {
    auto h = ReadHistory(doc);
    EXPECT_FALSE(h.has_value());
    return h ? std::string() : h.error().message;
  };
  json wrong = Doc({good});
  wrong["format"] = "csv";
  EXPECT_NE(err(wrong).find("'csv' is not berth-history/1"), std::string::npos);
  EXPECT_NE(err(Doc({good, {{"id", 2}}})).find("jobs[1].submitted_ms: missing"), std::string::npos);
  EXPECT_NE(err(Doc({{{"id", 2}, {"submitted_ms", 5}, {"runs", {RunOf(0, 1, 9, 3)}}}}))
                .find("jobs[0].runs[0]: finished_ms is before started_ms"),
            std::string::npos);
  EXPECT_NE(
      err(Doc({{{"id", 2}, {"submitted_ms", 5}, {"priority", "urgent"}}})).find("jobs[0].priority"),
      std::string::npos);
  // A member of the wrong type is an error value, not an exception.
  EXPECT_NE(err(Doc({{{"id", 2}, {"submitted_ms", 5}, {"tenant", 3}}})).find("malformed"),
            std::string::npos);
  EXPECT_NE(err(json::array()).find("not a JSON object"), std::string::npos);
  auto missing = ReadHistoryFile("/nonexistent/history.json");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("/nonexistent/history.json"), std::string::npos);
}

}  // namespace
}  // namespace berth::sim
