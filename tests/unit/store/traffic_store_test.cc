// Services' requests by hour: deltas add into their hour's row (across
// writes and a reopen), a range sums each service's hours that overlap it,
// expired hours go, and a window past the row cap is refused.
#include "store/traffic_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace berth::store {
namespace {

constexpr std::int64_t kTrafficHour = 3'600'000;
constexpr TimeMs kTrafficT0 = 1'699'999'200'000;  // hour-aligned
static_assert(kTrafficT0 % kTrafficHour == 0);

ServiceTraffic Delta(const std::string& service, TimeMs at, std::int64_t requests,
                     std::int64_t errors, std::int64_t latency_ms) {
  ServiceTraffic t;
  t.tenant = "ml";
  t.service = service;
  t.hour_ms = at - at % kTrafficHour;
  t.requests = requests;
  t.responses_2xx = requests - errors;
  t.responses_5xx = errors;
  t.latency_sum_ms = requests * latency_ms;
  t.latency_min_ms = latency_ms;
  t.latency_max_ms = latency_ms;
  t.latency_buckets[static_cast<int>(latency_ms % 100)] = requests;
  t.slo_windows = 1;
  t.slo_windows_met = errors == 0 ? 1 : 0;
  return t;
}

class TrafficStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-traffic-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen(std::int64_t retention = 400 * 24 * kTrafficHour) {
    store_.reset();
    auto s = ServiceTrafficStore::Open(dir_, retention);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    store_ = std::move(*s);
  }
  std::vector<ServiceTraffic> Range(TimeMs from, TimeMs to, std::size_t cap = 1000) {
    auto r = store_->Range(from, to, cap);
    EXPECT_TRUE(r.has_value()) << r.error().message;
    return r.value_or(std::vector<ServiceTraffic>{});
  }
  std::filesystem::path dir_;
  std::unique_ptr<ServiceTrafficStore> store_;
};

TEST_F(TrafficStoreTest, DeltasAddIntoTheirHourAcrossWritesAndAReopen) {
  ASSERT_TRUE(
      store_->Add({Delta("coder", kTrafficT0 + 1000, 10, 0, 20)}, kTrafficT0 + 2000).has_value());
  ASSERT_TRUE(store_->Add({Delta("coder", kTrafficT0 + 60'000, 5, 2, 40)}, kTrafficT0 + 61'000)
                  .has_value());
  Reopen();
  ASSERT_TRUE(store_->Add({Delta("coder", kTrafficT0 + 120'000, 1, 0, 30)}, kTrafficT0 + 121'000)
                  .has_value());
  auto got = Range(kTrafficT0, kTrafficT0 + kTrafficHour);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].requests, 16);
  EXPECT_EQ(got[0].responses_5xx, 2);
  EXPECT_EQ(got[0].responses_2xx, 14);
  EXPECT_EQ(got[0].latency_sum_ms, 10 * 20 + 5 * 40 + 30);
  EXPECT_EQ(got[0].latency_min_ms, 20);
  EXPECT_EQ(got[0].latency_max_ms, 40);
  EXPECT_EQ(got[0].latency_buckets, (std::map<int, std::int64_t>{{20, 10}, {30, 1}, {40, 5}}));
  EXPECT_EQ(got[0].slo_windows, 3);
  EXPECT_EQ(got[0].slo_windows_met, 2);
}

TEST_F(TrafficStoreTest, ARangeSumsEachServicesHoursThatOverlapIt) {
  ASSERT_TRUE(store_
                  ->Add({Delta("coder", kTrafficT0, 1, 0, 5),
                         Delta("coder", kTrafficT0 + kTrafficHour, 2, 0, 5),
                         Delta("coder", kTrafficT0 + 2 * kTrafficHour, 4, 0, 5),
                         Delta("chat", kTrafficT0 + kTrafficHour, 8, 8, 7)},
                        kTrafficT0 + 3 * kTrafficHour)
                  .has_value());
  // [T0+90m, T0+2h): the hour from T0+1h overlaps; T0+2h starts at the end.
  auto got = Range(kTrafficT0 + kTrafficHour + kTrafficHour / 2, kTrafficT0 + 2 * kTrafficHour);
  ASSERT_EQ(got.size(), 2U);
  EXPECT_EQ(got[0].service, "chat");
  EXPECT_EQ(got[0].requests, 8);
  EXPECT_EQ(got[1].service, "coder");
  EXPECT_EQ(got[1].requests, 2);
  // The whole span: every hour of each.
  got = Range(kTrafficT0, kTrafficT0 + 3 * kTrafficHour);
  ASSERT_EQ(got.size(), 2U);
  EXPECT_EQ(got[1].requests, 7);
  EXPECT_TRUE(Range(kTrafficT0 + 3 * kTrafficHour, kTrafficT0 + 4 * kTrafficHour).empty());
  // Past the cap on rows read: refused, naming the window.
  auto capped = store_->Range(kTrafficT0, kTrafficT0 + 3 * kTrafficHour, 3);
  ASSERT_FALSE(capped.has_value());
  EXPECT_EQ(capped.error().code, Code::kResourceExhausted);
  EXPECT_EQ(capped.error().field, "window");
}

// A reader's range holds its tenants' services only, and other tenants'
// hours are left out in the query: they never count against its cap.
TEST_F(TrafficStoreTest, ARangeHoldsTheReadersTenantsAndOthersRowsDoNotCountAgainstTheCap) {
  std::vector<ServiceTraffic> deltas;
  for (int h = 0; h < 5; ++h) {
    ServiceTraffic other = Delta("chat", kTrafficT0 + h * kTrafficHour, 3, 0, 5);
    other.tenant = "blue";
    deltas.push_back(other);
  }
  deltas.push_back(Delta("coder", kTrafficT0, 2, 0, 5));
  ASSERT_TRUE(store_->Add(deltas, kTrafficT0 + 5 * kTrafficHour).has_value());
  // Six rows in the window; ml's reader reads one, within a cap of two.
  auto mine =
      store_->Range(kTrafficT0, kTrafficT0 + 5 * kTrafficHour, 2, model::TenantScope::Of({"ml"}));
  ASSERT_TRUE(mine.has_value()) << mine.error().message;
  ASSERT_EQ(mine->size(), 1U);
  EXPECT_EQ((*mine)[0].tenant, "ml");
  EXPECT_EQ((*mine)[0].requests, 2);
  // blue's reader reads blue's five hours, and the same cap refuses them.
  auto theirs =
      store_->Range(kTrafficT0, kTrafficT0 + 5 * kTrafficHour, 2, model::TenantScope::Of({"blue"}));
  ASSERT_FALSE(theirs.has_value());
  EXPECT_EQ(theirs.error().field, "window");
  auto none =
      store_->Range(kTrafficT0, kTrafficT0 + 5 * kTrafficHour, 2, model::TenantScope::Of({"red"}));
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
}

TEST_F(TrafficStoreTest, HoursPastTheRetentionGoAndARetentionUnderAnHourIsRefused) {
  Reopen(2 * kTrafficHour);
  ASSERT_TRUE(store_->Add({Delta("coder", kTrafficT0, 1, 0, 5)}, kTrafficT0 + 1000).has_value());
  ASSERT_TRUE(store_
                  ->Add({Delta("coder", kTrafficT0 + 3 * kTrafficHour, 1, 0, 5)},
                        kTrafficT0 + 3 * kTrafficHour)
                  .has_value());
  auto got = Range(kTrafficT0 - kTrafficHour, kTrafficT0 + 4 * kTrafficHour);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].requests, 1);
  EXPECT_EQ(got[0].hour_ms, kTrafficT0 + 3 * kTrafficHour);
  auto refused = ServiceTrafficStore::Open(dir_, kTrafficHour - 1);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().field, "retention");
}

}  // namespace
}  // namespace berth::store
