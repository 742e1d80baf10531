// GPU telemetry history: samples fold into one bucket per GPU, minute and
// run set with exact integer sums; closed minutes reach berth.db on Flush
// and survive a reopen; samples for a minute already written are dropped
// and counted; old minutes roll up into hours and expired hours go; run
// summaries count a bucket when its start lies in [from, to).
#include "store/telemetry_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace berth::store {
namespace {

constexpr std::int64_t kMin = 60'000;
constexpr std::int64_t kHour = 3'600'000;
// An hour-aligned start, so minute and hour arithmetic in the tests is plain.
constexpr TimeMs kT0 = 1'699'999'200'000;
static_assert(kT0 % kHour == 0);

model::GpuSample Sample(TimeMs at, std::uint32_t util, std::vector<std::string> runs,
                        const std::string& uuid = "GPU-a", std::uint32_t gpu = 0) {
  model::GpuSample s;
  s.at_ms = at;
  s.node = "n1";
  s.gpu = gpu;
  s.uuid = uuid;
  s.util_pct = util;
  s.mem_util_pct = util / 2;
  s.memory_used_bytes = std::uint64_t{1'000'000} * util;
  s.memory_total_bytes = 80'000'000'000;
  s.temperature_c = 30 + static_cast<std::int32_t>(util / 10);
  s.power_mw = 100'000 + util * 1000;
  s.run_ids = std::move(runs);
  return s;
}

class TelemetryStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-tel-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    store_.reset();
    auto s = TelemetryStore::Open(dir_, options_);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    store_ = std::move(*s);
  }
  void Ingest(std::vector<model::GpuSample> samples) { store_->Ingest(samples); }
  std::vector<GpuBucket> History(const std::string& uuid, TimeMs from, TimeMs to,
                                 std::int64_t step = 0) {
    auto h = store_->GpuHistory(uuid, from, to, step);
    EXPECT_TRUE(h.has_value()) << h.error().message;
    return h ? *h : std::vector<GpuBucket>{};
  }
  std::map<std::string, UtilSummary> Runs(std::vector<std::string> ids, TimeMs from, TimeMs to) {
    auto r = store_->RunSummaries(ids, from, to);
    EXPECT_TRUE(r.has_value()) << r.error().message;
    return r ? *r : std::map<std::string, UtilSummary>{};
  }

  std::filesystem::path dir_;
  TelemetryOptions options_;
  std::unique_ptr<TelemetryStore> store_;
};

TEST_F(TelemetryStoreTest, BucketsByMinuteAndRunSetWithExactSums) {
  Ingest({Sample(kT0 + 0, 90, {"1.0.0"}), Sample(kT0 + 10'000, 70, {"1.0.0"}),
          // The run set changes within the minute: a second bucket.
          Sample(kT0 + 20'000, 40, {"2.0.0", "1.0.0"}),
          // The next minute.
          Sample(kT0 + kMin + 5'000, 10, {})});
  auto h = History("GPU-a", kT0, kT0 + 10 * kMin);  // unflushed minutes are visible
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].start_ms, kT0);
  EXPECT_EQ(h[0].run_ids, (std::vector<std::string>{"1.0.0"}));
  EXPECT_EQ(h[0].samples, 2);
  EXPECT_EQ(h[0].util_sum, 160);
  EXPECT_EQ(h[0].util_max, 90u);
  EXPECT_EQ(h[0].mem_util_sum, 45 + 35);
  EXPECT_EQ(h[0].memory_used_sum, 160'000'000u);
  EXPECT_EQ(h[0].memory_used_max, 90'000'000u);
  EXPECT_EQ(h[0].power_sum_mw, 200'000u + 160'000u);
  EXPECT_EQ(h[0].temperature_max_c, 39);
  // Run ids are kept sorted whatever order the agent sent.
  EXPECT_EQ(h[1].run_ids, (std::vector<std::string>{"1.0.0", "2.0.0"}));
  EXPECT_EQ(h[1].samples, 1);
  EXPECT_EQ(h[2].start_ms, kT0 + kMin);
  EXPECT_TRUE(h[2].run_ids.empty());
  EXPECT_EQ(h[2].idle_samples, 0);  // 10% is not under the 5% default
  EXPECT_EQ(store_->ingested(), 4);
  EXPECT_EQ(store_->late(), 0);
}

TEST_F(TelemetryStoreTest, FlushedMinutesSurviveReopenAndOpenOnesDoNot) {
  Ingest({Sample(kT0 + 1'000, 50, {"1.0.0"}), Sample(kT0 + kMin + 1'000, 60, {"1.0.0"})});
  // Only the first minute has ended.
  ASSERT_TRUE(store_->Flush(kT0 + kMin + 30'000).has_value());
  Reopen();
  auto h = History("GPU-a", kT0, kT0 + kHour);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].start_ms, kT0);
  EXPECT_EQ(h[0].util_sum, 50);
  auto runs = Runs({"1.0.0"}, kT0, kT0 + kHour);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs["1.0.0"].samples, 1);
}

TEST_F(TelemetryStoreTest, LateSamplesAreCountedAndDropped) {
  Ingest({Sample(kT0 + 1'000, 50, {"1.0.0"})});
  ASSERT_TRUE(store_->Flush(kT0 + kMin).has_value());
  Ingest({Sample(kT0 + 59'000, 99, {"1.0.0"}), Sample(kT0 + kMin + 1, 20, {"1.0.0"})});
  EXPECT_EQ(store_->late(), 1);
  EXPECT_EQ(store_->ingested(), 2);
  auto h = History("GPU-a", kT0, kT0 + kHour);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].util_sum, 50);  // unchanged by the late 99
  EXPECT_EQ(h[1].util_sum, 20);
  // Another GPU's minute is not closed by this one's flush.
  Ingest({Sample(kT0 + 2'000, 30, {}, "GPU-b", 1)});
  EXPECT_EQ(store_->late(), 1);
}

TEST_F(TelemetryStoreTest, SamplesOfAMinuteWrittenBeforeARestartAreAddedToIt) {
  Ingest({Sample(kT0 + 1'000, 50, {"1.0.0"})});
  ASSERT_TRUE(store_->Flush(kT0 + kMin).has_value());
  Reopen();  // a new berthd knows nothing of what it flushed
  Ingest({Sample(kT0 + 2'000, 30, {"1.0.0"})});
  ASSERT_TRUE(store_->Flush(kT0 + kMin).has_value());
  auto h = History("GPU-a", kT0, kT0 + kHour);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].samples, 2);
  EXPECT_EQ(h[0].util_sum, 80);
  EXPECT_EQ(h[0].util_max, 50u);
}

TEST_F(TelemetryStoreTest, MinutesRollUpIntoHoursAndExpiredHoursGo) {
  options_.minute_retention_ms = kHour;
  options_.hour_retention_ms = 2 * kHour;
  Reopen();
  // 30 minutes of the first hour, two samples each, 10% then 0% (idle).
  std::vector<model::GpuSample> samples;
  for (int m = 0; m < 30; ++m) {
    samples.push_back(Sample(kT0 + m * kMin, 10, {"7.0.0"}));
    samples.push_back(Sample(kT0 + m * kMin + 30'000, 0, {"7.0.0"}));
  }
  Ingest(samples);
  samples.clear();
  samples.push_back(Sample(kT0 + kHour + 5 * kMin, 33, {"7.0.0"}));
  Ingest(samples);
  // Minutes of the first hour are older than an hour from T0+2h: rolled.
  ASSERT_TRUE(store_->Flush(kT0 + 2 * kHour + 1).has_value());
  auto h = History("GPU-a", kT0, kT0 + 3 * kHour);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].start_ms, kT0);
  EXPECT_EQ(h[0].width_ms, kHour);
  EXPECT_EQ(h[0].samples, 60);
  EXPECT_EQ(h[0].util_sum, 300);
  EXPECT_EQ(h[0].idle_samples, 30);
  EXPECT_EQ(h[1].width_ms, kMin);  // the second hour's minute is still kept
  EXPECT_EQ(h[1].util_sum, 33);
  // The run is still found through its hour rows.
  auto runs = Runs({"7.0.0"}, kT0, kT0 + 3 * kHour);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs["7.0.0"].samples, 61);
  EXPECT_EQ(runs["7.0.0"].util_sum, 333);
  EXPECT_EQ(runs["7.0.0"].first_ms, kT0);
  EXPECT_EQ(runs["7.0.0"].last_ms, kT0 + kHour + 6 * kMin);
  // Survives a reopen as hours.
  Reopen();
  EXPECT_EQ(History("GPU-a", kT0, kT0 + 3 * kHour).size(), 2u);
  // Two hours later the first hour bucket is past the hour retention.
  ASSERT_TRUE(store_->Flush(kT0 + 3 * kHour + 1).has_value());
  h = History("GPU-a", kT0, kT0 + 4 * kHour);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].start_ms, kT0 + kHour);
  EXPECT_EQ(h[0].width_ms, kHour);  // the second hour rolled up meanwhile
  runs = Runs({"7.0.0"}, kT0, kT0 + 4 * kHour);
  EXPECT_EQ(runs["7.0.0"].samples, 1);
}

TEST_F(TelemetryStoreTest, SummariesCountBucketsWhoseStartIsInTheWindow) {
  Ingest({Sample(kT0 + 1'000, 80, {"1.0.0"}), Sample(kT0 + kMin + 1'000, 40, {"1.0.0"}),
          Sample(kT0 + 2 * kMin + 1'000, 20, {"1.0.0"})});
  ASSERT_TRUE(store_->Flush(kT0 + 2 * kMin).has_value());  // one open minute remains
  // [T0+30s, T0+2m+30s): the buckets starting at T0+1m and T0+2m.
  auto runs = Runs({"1.0.0", "9.9.9"}, kT0 + 30'000, kT0 + 2 * kMin + 30'000);
  ASSERT_EQ(runs.size(), 1u);  // a run with no samples is absent
  const UtilSummary& s = runs["1.0.0"];
  EXPECT_EQ(s.samples, 2);
  EXPECT_EQ(s.util_sum, 60);
  EXPECT_EQ(s.util_max, 40u);
  EXPECT_DOUBLE_EQ(s.AvgUtilPct(), 30.0);
  EXPECT_EQ(s.first_ms, kT0 + kMin);
  EXPECT_EQ(s.last_ms, kT0 + 3 * kMin);
  EXPECT_EQ(s.memory_total_bytes, 80'000'000'000u);
  EXPECT_DOUBLE_EQ(s.AvgMemoryUsedBytes(), 30'000'000.0);
  auto fleet = store_->FleetSummary(kT0, kT0 + kHour);
  ASSERT_TRUE(fleet.has_value()) << fleet.error().message;
  EXPECT_EQ(fleet->samples, 3);
  EXPECT_EQ(fleet->util_sum, 140);
  EXPECT_EQ(fleet->first_ms, kT0);
  EXPECT_EQ(fleet->last_ms, kT0 + 3 * kMin);
}

TEST_F(TelemetryStoreTest, LongestIdleIsTheLongestStretchOfAllIdleSlots) {
  // A run on two GPUs. GPU-a idles throughout; GPU-b works in minute 2.
  // Minute 5 has no samples, so minutes 6-7 start a new stretch.
  std::vector<model::GpuSample> samples;
  for (int m : {0, 1, 2, 3, 4, 6, 7}) {
    samples.push_back(Sample(kT0 + m * kMin, 0, {"3.0.0"}, "GPU-a", 0));
    samples.push_back(Sample(kT0 + m * kMin, m == 2 ? 50 : 1, {"3.0.0"}, "GPU-b", 1));
  }
  // Minute 8 has GPU-a's sample only: still a slot where everything idled.
  samples.push_back(Sample(kT0 + 8 * kMin, 0, {"3.0.0"}, "GPU-a", 0));
  Ingest(samples);
  ASSERT_TRUE(store_->Flush(kT0 + 5 * kMin).has_value());  // half on disk, half in memory
  auto runs = Runs({"3.0.0"}, kT0, kT0 + kHour);
  const UtilSummary& s = runs["3.0.0"];
  EXPECT_EQ(s.longest_idle_ms, 3 * kMin);  // minutes 6, 7 and 8
  EXPECT_EQ(s.samples, 15);
  EXPECT_EQ(s.idle_samples, 14);
  EXPECT_NEAR(s.IdleFraction(), 14.0 / 15.0, 1e-12);
  // A busy sample in minute 7 on one GPU cuts that stretch: 2 minutes left.
  Ingest({Sample(kT0 + 7 * kMin + 30'000, 90, {"3.0.0"}, "GPU-b", 1)});
  EXPECT_EQ(Runs({"3.0.0"}, kT0, kT0 + kHour)["3.0.0"].longest_idle_ms, 2 * kMin);
}

TEST_F(TelemetryStoreTest, HistoryMergesToTheStep) {
  std::vector<model::GpuSample> samples;
  for (int m = 0; m < 7; ++m) samples.push_back(Sample(kT0 + m * kMin, 10 * m, {"1.0.0"}));
  Ingest(samples);
  ASSERT_TRUE(store_->Flush(kT0 + 3 * kMin).has_value());
  auto h = History("GPU-a", kT0, kT0 + kHour, 5 * kMin);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].start_ms, kT0);
  EXPECT_EQ(h[0].width_ms, 5 * kMin);
  EXPECT_EQ(h[0].samples, 5);
  EXPECT_EQ(h[0].util_sum, 0 + 10 + 20 + 30 + 40);
  EXPECT_EQ(h[0].util_max, 40u);
  EXPECT_EQ(h[1].start_ms, kT0 + 5 * kMin);
  EXPECT_EQ(h[1].util_sum, 50 + 60);
  // The window selects overlapping buckets: [T0+90s, T0+2m) overlaps minute 1.
  auto one = History("GPU-a", kT0 + 90'000, kT0 + 2 * kMin);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].start_ms, kT0 + kMin);
  auto bad = store_->GpuHistory("GPU-a", kT0, kT0 + kHour, 90'000);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "step");
  auto empty = store_->GpuHistory("GPU-a", kT0, kT0, 0);
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().field, "to");
}

TEST_F(TelemetryStoreTest, LatestKeepsTheNewestSampleOfEachGpu) {
  Ingest({Sample(kT0 + 2'000, 20, {}, "GPU-a", 0), Sample(kT0 + 1'000, 10, {}, "GPU-a", 0),
          Sample(kT0 + 1'000, 70, {"4.0.0"}, "GPU-b", 1)});
  auto latest = store_->Latest();
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_EQ(latest[0].uuid, "GPU-a");
  EXPECT_EQ(latest[0].util_pct, 20u);
  EXPECT_EQ(latest[1].uuid, "GPU-b");
  EXPECT_EQ(latest[1].run_ids, (std::vector<std::string>{"4.0.0"}));
}

TEST_F(TelemetryStoreTest, BadOptionsAreRefusedNamingTheField) {
  TelemetryOptions o;
  o.minute_retention_ms = 1000;
  auto s = TelemetryStore::Open(dir_, o);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().field, "minute_retention");
  o = TelemetryOptions{};
  o.hour_retention_ms = kHour;
  s = TelemetryStore::Open(dir_, o);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().field, "hour_retention");
  o = TelemetryOptions{};
  o.idle_util_pct = 101;
  s = TelemetryStore::Open(dir_, o);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().field, "idle_threshold");
}

}  // namespace
}  // namespace berth::store
