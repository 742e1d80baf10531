// An acknowledged submission survives kill -9 of berthd: 16 clients submit
// 200 jobs at once, berthd is killed after about half are acknowledged, and
// after a restart on the same data dir every acknowledged job is there under
// the name it was submitted with.
//
// The jobs each need all 8 GPUs and sleep, so one runs and the rest queue:
// the test is about the store, not about starting 200 processes on 2 cores.
#include <fmt/format.h>

#include <atomic>
#include <mutex>
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

  std::mutex mu;
  std::map<std::int64_t, std::string> acked;  // id -> name
  std::atomic<int> acks{0};
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      Http http(berthd.api_port(), 5s);
      http.set_token(berthd.http().token());
      for (int i = next.fetch_add(1); i < kJobs; i = next.fetch_add(1)) {
        std::string name = fmt::format("crash-{}", i);
        auto r = http.Post("/v1/jobs", JobSpecJson(name, {"sleep", "600"}, 8));
        if (r.status != 201) continue;  // refused or cut off: not acknowledged
        std::lock_guard lock(mu);
        acked[r.body.at("id").get<std::int64_t>()] = name;
        acks.fetch_add(1);
      }
    });
  }
  bool halfway = WaitFor([&] { return acks.load() >= kKillAfter; }, 60s, 1ms);
  berthd.Kill();
  for (auto& t : clients) t.join();
  ASSERT_TRUE(halfway) << "only " << acks.load() << " acks before the kill";
  EXPECT_LT(acked.size(), static_cast<std::size_t>(kJobs)) << "the kill came too late to matter";

  ASSERT_TRUE(berthd.Start()) << berthd.log();
  auto jobs = berthd.Jobs();
  ASSERT_TRUE(jobs.is_array());
  std::map<std::int64_t, std::string> stored;
  for (const auto& j : jobs) stored[j.at("id").get<std::int64_t>()] = j.at("name");
  std::cout << fmt::format(
      "[ info     ] {} of {} submissions acknowledged before kill -9; "
      "{} stored after restart\n",
      acked.size(), kJobs, stored.size());
  EXPECT_GE(stored.size(), acked.size());
  EXPECT_LE(stored.size(), static_cast<std::size_t>(kJobs));
  for (const auto& [id, name] : acked) {
    auto it = stored.find(id);
    if (it == stored.end()) {
      ADD_FAILURE() << "acknowledged job " << id << " (" << name << ") is gone";
    } else {
      EXPECT_EQ(it->second, name) << "job " << id;
    }
  }

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
