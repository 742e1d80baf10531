// An acknowledged submission survives kill -9 of berthd: 16 clients submit
// 200 jobs at once, berthd is killed after about half are acknowledged, and
// after a restart on the same data dir every acknowledged job is there under
// the name it was submitted with. Concurrent submissions share commits
// (group commit), so the kill lands during one; every tenth submission is
// an array of 20, which after the restart is there whole or not at all.
// Each submission's audit record commits with its jobs: after the restart
// every stored job has its record and every record its jobs, and the
// chain verifies.
//
// The jobs each need all 8 GPUs and sleep, so one runs and the rest queue:
// the test is about the store, not about starting 200 processes on 2 cores.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

TEST_F(IntegrationTest, CrashDuringSubmissions) {
  constexpr int kClients = 16;
  constexpr int kJobs = 200;
  constexpr int kKillAfter = 100;

  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  constexpr int kArraySize = 20;

  std::mutex mu;
  std::map<std::int64_t, std::string> acked;         // id -> name (every element of an array)
  std::map<std::string, std::int64_t> acked_arrays;  // name -> array id
  std::atomic<int> acks{0};
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      Http http(berthd.api_port(), 5s);
      http.set_token(berthd.http().token());
      for (int i = next.fetch_add(1); i < kJobs; i = next.fetch_add(1)) {
        const bool array = i % 10 == 0;
        std::string name = fmt::format("crash{}-{}", array ? "-array" : "", i);
        auto r = http.Post("/v1/jobs",
                           JobSpecJson(name, {"sleep", "600"}, 8,
                                       array ? json{{"array", kArraySize}} : json::object()));
        if (r.status != 201) continue;  // refused or cut off: not acknowledged
        std::lock_guard lock(mu);
        const auto id = r.body.at("id").get<std::int64_t>();
        if (array) {
          acked_arrays[name] = id;
          for (int e = 0; e < kArraySize; ++e) acked[id + e] = name;
        } else {
          acked[id] = name;
        }
        acks.fetch_add(1);
      }
    });
  }
  bool halfway = WaitFor([&] { return acks.load() >= kKillAfter; }, 60s, 1ms);
  berthd.Kill();
  for (auto& t : clients) t.join();
  ASSERT_TRUE(halfway) << "only " << acks.load() << " acks before the kill";
  EXPECT_LT(acks.load(), kJobs) << "the kill came too late to matter";

  ASSERT_TRUE(berthd.Start()) << berthd.log();
  auto jobs = berthd.Jobs();
  ASSERT_TRUE(jobs.is_array());
  std::map<std::int64_t, std::string> stored;
  for (const auto& j : jobs) stored[j.at("id").get<std::int64_t>()] = j.at("name");
  std::cout << fmt::format(
      "[ info     ] {} of {} submissions ({} jobs) acknowledged before kill -9; "
      "{} jobs stored after restart\n",
      acks.load(), kJobs, acked.size(), stored.size());
  EXPECT_GE(stored.size(), acked.size());
  EXPECT_LE(stored.size(), static_cast<std::size_t>(kJobs + (kJobs / 10) * (kArraySize - 1)));
  // Each array that reached the store is whole, with its indices in order,
  // whether or not its acknowledgement got out before the kill.
  std::map<std::string, std::vector<std::int64_t>> arrays;  // name -> element indices
  for (const auto& j : jobs) {
    if (j.at("array").is_null()) continue;
    EXPECT_EQ(j.at("array").at("size"), kArraySize);
    arrays[j.at("name")].push_back(j.at("array").at("index").get<std::int64_t>());
  }
  for (auto& [name, indices] : arrays) {
    std::sort(indices.begin(), indices.end());
    std::vector<std::int64_t> whole(kArraySize);
    std::iota(whole.begin(), whole.end(), 0);
    EXPECT_EQ(indices, whole) << "array " << name << " is not whole";
  }
  for (const auto& [name, id] : acked_arrays) {
    EXPECT_TRUE(arrays.contains(name))
        << "acknowledged array " << name << " (" << id << ") is gone";
  }
  for (const auto& [id, name] : acked) {
    auto it = stored.find(id);
    if (it == stored.end()) {
      ADD_FAILURE() << "acknowledged job " << id << " (" << name << ") is gone";
    } else {
      EXPECT_EQ(it->second, name) << "job " << id;
    }
  }

  // Both or neither: the submissions' audit records and the jobs.
  std::map<std::string, int> records;  // object ("job/7", "array/9") -> ok records
  for (std::string after;;) {
    auto page = berthd.http().Get("/v1/audit?action=job.submit&limit=500" +
                                  (after.empty() ? "" : "&after=" + after));
    ASSERT_EQ(page.status, 200) << page.body.dump();
    for (const auto& r : page.body.at("records")) {
      if (r.at("outcome") == "ok") ++records[r.at("object").get<std::string>()];
    }
    if (!page.body.contains("next")) break;
    after = page.body.at("next").get<std::string>();
  }
  std::set<std::string> objects;  // what the stored jobs were submitted as
  for (const auto& j : jobs) {
    const auto id = j.at("id").get<std::int64_t>();
    if (j.at("array").is_null()) {
      objects.insert(fmt::format("job/{}", id));
    } else if (j.at("array").at("index") == 0) {
      objects.insert(fmt::format("array/{}", id));
    }
  }
  for (const auto& object : objects) {
    EXPECT_EQ(records[object], 1) << object << " is stored; its submission has " << records[object]
                                  << " ok records";
  }
  for (const auto& [object, n] : records) {
    EXPECT_TRUE(objects.contains(object))
        << "a submission record names " << object << ", which is not stored";
  }
  auto verdict = berthd.http().Get("/v1/audit/verify");
  ASSERT_EQ(verdict.status, 200) << verdict.body.dump();
  EXPECT_EQ(verdict.body.at("ok"), true) << verdict.body.dump();

  // Clean up: cancel what is not finished; the temp dir's teardown kills
  // whatever process is left.
  for (const auto& j : jobs) {
    if (j.at("state") == "Pending" || j.at("state") == "Scheduled" || j.at("state") == "Running") {
      (void)berthd.http().Post(fmt::format("/v1/jobs/{}/cancel", j.at("id").get<std::int64_t>()),
                               "", "application/json");
    }
  }
}

}  // namespace
}  // namespace berth::it
