// Metering arithmetic: price tables, splitting at price changes and
// midnights, share pricing, clipping, grouping and exact reconciliation.
#include "model/usage.h"

#include <gtest/gtest.h>

namespace berth::model {
namespace {

constexpr TimeMs kHour = 3'600'000;
// 2026-11-30T00:00:00Z
constexpr TimeMs kNov30 = 1'795'996'800'000;

UsageRecord Rec(std::string run, std::string tenant, std::int64_t mgpu, TimeMs start, TimeMs end,
                std::string model = "H100-80GB", std::string pool = "default") {
  UsageRecord r;
  r.run_id = std::move(run);
  r.tenant = std::move(tenant);
  r.queue = "default";
  r.mgpu = mgpu;
  r.start_ms = start;
  r.end_ms = end;
  r.gpu_model = std::move(model);
  r.pool = std::move(pool);
  r.node = "n1";
  return r;
}

PriceVersion Version(std::int64_t v, TimeMs at, std::string_view yaml) {
  auto t = ParsePriceTable(yaml);
  EXPECT_TRUE(t.has_value()) << (t ? "" : t.error().message);
  return PriceVersion{v, at, t.value_or(PriceTable{})};
}

TEST(CalendarTest, DaysAndMonthsInUtc) {
  EXPECT_EQ(DayOf(kNov30), "2026-11-30");
  EXPECT_EQ(MonthOf(kNov30 + 23 * kHour), "2026-11");
  EXPECT_EQ(MonthOf(kNov30 + 24 * kHour), "2026-12");
  EXPECT_EQ(DayStart(kNov30 + 5), kNov30);
  EXPECT_EQ(MonthStart(kNov30 + 5), kNov30 - 29 * 24 * kHour);
  EXPECT_EQ(NextMonthStart(kNov30), kNov30 + 24 * kHour);
  EXPECT_EQ(MonthOf(0), "1970-01");
}

TEST(MoneyTest, ParsesAndFormatsExactly) {
  EXPECT_EQ(ParseMoney("2.50", "x").value(), 2'500'000);
  EXPECT_EQ(ParseMoney("3", "x").value(), 3'000'000);
  EXPECT_EQ(ParseMoney("0.000001", "x").value(), 1);
  EXPECT_FALSE(ParseMoney("-1", "x").has_value());
  EXPECT_FALSE(ParseMoney("1.0000001", "x").has_value());
  EXPECT_FALSE(ParseMoney("abc", "x").has_value());
  EXPECT_EQ(FormatMoney(2'500'000), "2.50");
  EXPECT_EQ(FormatMoney(1), "0.000001");
  EXPECT_EQ(FormatMoney(12'345'600), "12.3456");
}

// Found by fuzz_price_table: 13 whole digits passed the old check and
// overflowed as micro-units. The bound is a trillion per GPU-hour.
TEST(MoneyTest, TheLargestAmountIsATrillionAndNoMore) {
  EXPECT_EQ(ParseMoney("1000000000000", "x").value(), std::int64_t{1'000'000'000'000'000'000});
  EXPECT_EQ(ParseMoney("999999999999.999999", "x").value(), 999'999'999'999'999'999);
  for (const char* big : {"1000000000000.000001", "9888888888888", "99999999999999999999999"}) {
    auto m = ParseMoney(big, "prices[0].per_gpu_hour");
    ASSERT_FALSE(m.has_value()) << big;
    EXPECT_EQ(m.error().field, "prices[0].per_gpu_hour");
    EXPECT_NE(m.error().message.find("from 0 to 1000000000000"), std::string::npos)
        << m.error().message;
  }
}

TEST(PriceTableTest, ParsesAndPicksTheMostSpecificLine) {
  auto t = ParsePriceTable(
      "currency: EUR\ndefault: 1.00\nprices:\n"
      "  - {model: H100-80GB, pool: default, per_gpu_hour: 2.50}\n"
      "  - {model: H100-80GB, per_gpu_hour: 3.00}\n"
      "  - {model: '*', pool: spot, per_gpu_hour: 0.50}\n");
  ASSERT_TRUE(t.has_value()) << t.error().message;
  EXPECT_EQ(t->currency, "EUR");
  EXPECT_EQ(PriceFor(*t, "H100-80GB", "default"), 2'500'000);
  EXPECT_EQ(PriceFor(*t, "H100-80GB", "other"), 3'000'000);
  EXPECT_EQ(PriceFor(*t, "A100-80GB", "spot"), 500'000);
  EXPECT_EQ(PriceFor(*t, "A100-80GB", "default"), 1'000'000);
}

TEST(PriceTableTest, BadInputNamesTheField) {
  auto unknown = ParsePriceTable("prices: [{model: H100-80GB, price: 2}]");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().field, "prices[0].price");
  auto negative = ParsePriceTable("prices: [{model: H100-80GB, per_gpu_hour: -2}]");
  ASSERT_FALSE(negative.has_value());
  EXPECT_EQ(negative.error().field, "prices[0].per_gpu_hour");
  auto twice = ParsePriceTable(
      "prices: [{model: A, per_gpu_hour: 1}, {model: A, pool: '*', per_gpu_hour: 2}]");
  ASSERT_FALSE(twice.has_value());
  EXPECT_EQ(twice.error().field, "prices[1]");
}

// Found by fuzz_price_table: a key that is a list threw out of the parser,
// and a lone CR (which YAML keeps inside a plain scalar) made a currency
// name that prints over its own table row.
TEST(PriceTableTest, OddKeysAndControlCharactersAreRefused) {
  auto key = ParsePriceTable("{[currency]: USD}");
  ASSERT_FALSE(key.has_value());
  EXPECT_NE(key.error().message.find("plain strings"), std::string::npos) << key.error().message;
  auto line = ParsePriceTable("prices: [{? [model] : A, per_gpu_hour: 1}]");
  ASSERT_FALSE(line.has_value());
  EXPECT_EQ(line.error().field, "prices[0]");
  auto cr = ParsePriceTable("currency: USD  \r\r   # a name\ndefault: 1.00\n");
  ASSERT_FALSE(cr.has_value());
  EXPECT_EQ(cr.error().field, "currency");
  auto tab = ParsePriceTable("prices: [{model: \"H100\\t80GB\", per_gpu_hour: 1}]");
  ASSERT_FALSE(tab.has_value());
  EXPECT_EQ(tab.error().field, "prices[0].model");
  EXPECT_TRUE(ParsePriceTable("currency: €\n").has_value());
}

TEST(PriceRecordTest, WholeGpusForAnHour) {
  auto r = Rec("1.0.0", "a", 2000, kNov30 + kHour, kNov30 + 2 * kHour);
  PriceRecord(r, {Version(1, 0, "prices: [{model: H100-80GB, per_gpu_hour: 2.50}]")});
  EXPECT_EQ(r.mgpu_ms, 2000 * kHour);
  EXPECT_EQ(r.cost_micros, 5'000'000);
  ASSERT_EQ(r.pieces.size(), 1u);
  EXPECT_EQ(r.pieces[0].price_version, 1);
}

TEST(PriceRecordTest, SplitAtAPriceChange) {
  // 1 GPU from 01:00 to 03:00; the price goes 2.00 -> 4.00 at 02:30.
  auto r = Rec("1.0.0", "a", 1000, kNov30 + kHour, kNov30 + 3 * kHour);
  PriceRecord(
      r, {Version(1, 0, "default: 2"), Version(2, kNov30 + 2 * kHour + kHour / 2, "default: 4")});
  ASSERT_EQ(r.pieces.size(), 2u);
  EXPECT_EQ(r.pieces[0].end_ms, kNov30 + 2 * kHour + kHour / 2);
  EXPECT_EQ(r.pieces[0].price_version, 1);
  EXPECT_EQ(r.pieces[1].price_version, 2);
  EXPECT_EQ(r.cost_micros, 3'000'000 + 2'000'000);  // 1.5 h x 2 + 0.5 h x 4
  EXPECT_EQ(r.mgpu_ms, 1000 * 2 * kHour);
}

TEST(PriceRecordTest, BeforeAnyPriceTableCostsNothing) {
  auto r = Rec("1.0.0", "a", 1000, kNov30, kNov30 + 2 * kHour);
  PriceRecord(r, {Version(1, kNov30 + kHour, "default: 1")});
  ASSERT_EQ(r.pieces.size(), 2u);
  EXPECT_EQ(r.pieces[0].price_version, 0);
  EXPECT_EQ(r.pieces[0].cost_micros, 0);
  EXPECT_EQ(r.cost_micros, 1'000'000);
}

TEST(PriceRecordTest, ASliceIsPricedByItsShare) {
  // A quarter of a GPU for two hours at 4.00: 2.00.
  auto r = Rec("1.0.0", "a", 250, kNov30, kNov30 + 2 * kHour);
  PriceRecord(r, {Version(1, 0, "default: 4")});
  EXPECT_EQ(r.mgpu_ms, 250 * 2 * kHour);
  EXPECT_EQ(r.cost_micros, 2'000'000);
}

TEST(PriceRecordTest, SplitAtMidnightAndGroupedByDay) {
  auto r = Rec("1.0.0", "a", 1000, kNov30 - kHour, kNov30 + 2 * kHour);
  PriceRecord(r, {Version(1, 0, "default: 1")});
  ASSERT_EQ(r.pieces.size(), 2u);
  auto report = Aggregate({r}, {UsageKey::kDay});
  ASSERT_EQ(report.rows.size(), 2u);
  EXPECT_EQ(report.rows[0].key[0], "2026-11-29");
  EXPECT_EQ(report.rows[0].mgpu_ms, 1000 * kHour);
  EXPECT_EQ(report.rows[1].key[0], "2026-11-30");
  EXPECT_EQ(report.rows[1].mgpu_ms, 2000 * kHour);
  EXPECT_EQ(report.rows[0].runs + report.rows[1].runs, 2);  // the run is in both days
  EXPECT_EQ(report.total.runs, 1);
  auto by_month = Aggregate({r}, {UsageKey::kMonth});
  ASSERT_EQ(by_month.rows.size(), 1u);
}

TEST(ClipTest, KeepsOnlyTheWindowAndRePrices) {
  auto r = Rec("1.0.0", "a", 1000, kNov30, kNov30 + 4 * kHour);
  const std::vector<PriceVersion> v{Version(1, 0, "default: 3")};
  auto c = ClipRecord(r, kNov30 + kHour, kNov30 + 2 * kHour, v);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->start_ms, kNov30 + kHour);
  EXPECT_EQ(c->mgpu_ms, 1000 * kHour);
  EXPECT_EQ(c->cost_micros, 3'000'000);
  EXPECT_FALSE(ClipRecord(r, kNov30 + 5 * kHour, kNov30 + 6 * kHour, v).has_value());
}

TEST(AggregateTest, TotalsReconcileExactlyWithTheRecords) {
  // Awkward figures: prime milliseconds, thirds of a cent, slices, a price
  // change and midnights, so per-piece rounding is exercised.
  const std::vector<PriceVersion> v{
      Version(1, 0, "default: 1.333333\nprices: [{model: A100-80GB, per_gpu_hour: 0.777777}]"),
      Version(2, kNov30 + 7'777'777, "default: 2.718281")};
  std::vector<UsageRecord> records;
  for (int i = 0; i < 40; ++i) {
    auto r = Rec("r" + std::to_string(i), i % 3 == 0 ? "vision" : "nlp", (i % 4 + 1) * 333,
                 kNov30 - 86'400'000 + i * 3'919'993,
                 kNov30 - 86'400'000 + i * 3'919'993 + 5 * kHour + i * 1'234'567 + 1,
                 i % 2 ? "A100-80GB" : "H100-80GB", i % 5 ? "default" : "spot");
    r.user = i % 2 ? "alice" : "bob";
    PriceRecord(r, v);
    records.push_back(std::move(r));
  }
  std::int64_t mgpu_ms = 0;
  std::int64_t cost = 0;
  for (const auto& r : records) {
    mgpu_ms += r.mgpu_ms;
    cost += r.cost_micros;
    std::int64_t piece_cost = 0;
    for (const auto& p : r.pieces) piece_cost += p.cost_micros;
    EXPECT_EQ(piece_cost, r.cost_micros);
  }
  for (const auto& keys :
       std::vector<std::vector<UsageKey>>{{UsageKey::kTenant},
                                          {UsageKey::kUser, UsageKey::kModel},
                                          {UsageKey::kDay},
                                          {UsageKey::kMonth, UsageKey::kPool, UsageKey::kQueue},
                                          {UsageKey::kNode}}) {
    auto report = Aggregate(records, keys);
    std::int64_t rows_mgpu = 0;
    std::int64_t rows_cost = 0;
    for (const auto& row : report.rows) {
      rows_mgpu += row.mgpu_ms;
      rows_cost += row.cost_micros;
    }
    EXPECT_EQ(rows_mgpu, mgpu_ms);
    EXPECT_EQ(rows_cost, cost);
    EXPECT_EQ(report.total.mgpu_ms, mgpu_ms);
    EXPECT_EQ(report.total.cost_micros, cost);
    EXPECT_EQ(report.total.runs, 40);
  }
  auto by_tenant = Aggregate(records, {UsageKey::kTenant});
  ASSERT_EQ(by_tenant.rows.size(), 2u);
  EXPECT_EQ(by_tenant.rows[0].key[0], "nlp");
  EXPECT_EQ(by_tenant.rows[0].runs + by_tenant.rows[1].runs, 40);
}

TEST(MeasureRecordTest, WeightsEachPieceByItsMeasuredUtilization) {
  // Two GPUs for two hours across a price change at +1 h: 2 h at 1.00, then 2 h at 3.00.
  UsageRecord r = Rec("r1", "red", 2000, kNov30, kNov30 + 2 * kHour);
  PriceRecord(r, {Version(1, 0, "default: 1"), Version(2, kNov30 + kHour, "default: 3")});
  ASSERT_EQ(r.pieces.size(), 2U);
  // First hour: 120 samples averaging 75% with 20 idle; second hour unmeasured.
  MeasureRecord(r,
                {PieceMeasure{.samples = 120, .util_sum = 9000, .idle_samples = 20}, std::nullopt});
  EXPECT_TRUE(r.pieces[0].measured);
  EXPECT_FALSE(r.pieces[1].measured);
  EXPECT_EQ(r.pieces[0].used_mgpu_ms, 2000 * kHour * 3 / 4);
  EXPECT_EQ(r.pieces[0].idle_mgpu_ms, 2000 * kHour / 6);
  EXPECT_EQ(r.pieces[0].used_cost_micros, 1'500'000);  // 2 GPU-hours at 1.00, 75% used
  EXPECT_EQ(r.pieces[0].idle_cost_micros, 333'333);    // a sixth, rounded down
  EXPECT_EQ(r.measured_mgpu_ms, 2000 * kHour);
  EXPECT_EQ(r.used_mgpu_ms, r.pieces[0].used_mgpu_ms);
  EXPECT_EQ(r.idle_cost_micros, 333'333);
  EXPECT_EQ(r.pieces[1].used_mgpu_ms, 0);

  // Readings out of range are clamped: never more used than allocated.
  MeasureRecord(r, {PieceMeasure{.samples = 10, .util_sum = 5000, .idle_samples = 99},
                    PieceMeasure{.samples = 0}});
  EXPECT_EQ(r.pieces[0].used_mgpu_ms, r.pieces[0].mgpu_ms);
  EXPECT_EQ(r.pieces[0].idle_mgpu_ms, r.pieces[0].mgpu_ms);
  EXPECT_FALSE(r.pieces[1].measured);
}

TEST(MeasureRecordTest, RowsAndTotalsReconcileWithMeasuredRecords) {
  const std::vector<PriceVersion> v = {Version(1, 0, "default: 2.5")};
  std::vector<UsageRecord> records = {Rec("a", "red", 1000, kNov30 - kHour, kNov30 + kHour),
                                      Rec("b", "red", 500, kNov30, kNov30 + 3 * kHour),
                                      Rec("c", "blue", 3000, kNov30 + 7, kNov30 + kHour + 13)};
  std::int64_t util = 7;
  for (auto& r : records) {
    PriceRecord(r, v);
    std::vector<std::optional<PieceMeasure>> m;
    for (std::size_t i = 0; i < r.pieces.size(); ++i) {
      m.push_back(PieceMeasure{.samples = 61, .util_sum = 61 * util, .idle_samples = util % 5});
      util += 31;
    }
    MeasureRecord(r, m);
  }
  records[1].idle = true;
  const UsageReport report = Aggregate(records, {UsageKey::kTenant, UsageKey::kDay});
  std::int64_t used = 0, idle = 0, used_cost = 0, idle_cost = 0, idle_runs = 0;
  for (const auto& row : report.rows) {
    used += row.used_mgpu_ms;
    idle += row.idle_mgpu_ms;
    used_cost += row.used_cost_micros;
    idle_cost += row.idle_cost_micros;
    idle_runs += row.idle_runs;
  }
  std::int64_t rec_used = 0, rec_idle = 0;
  for (const auto& r : records) {
    rec_used += r.used_mgpu_ms;
    rec_idle += r.idle_mgpu_ms;
  }
  EXPECT_GT(rec_used, 0);
  EXPECT_EQ(used, rec_used);
  EXPECT_EQ(idle, rec_idle);
  EXPECT_EQ(report.total.used_mgpu_ms, rec_used);
  EXPECT_EQ(report.total.idle_mgpu_ms, rec_idle);
  EXPECT_EQ(report.total.used_cost_micros, used_cost);
  EXPECT_EQ(report.total.idle_cost_micros, idle_cost);
  EXPECT_EQ(report.total.measured_mgpu_ms, report.total.mgpu_ms);
  EXPECT_EQ(report.total.idle_runs, 1);
  EXPECT_EQ(idle_runs, 1);  // b lies within one day, so in one row
}

TEST(UsageKeysTest, ParsesAndRejects) {
  auto k = ParseUsageKeys("tenant,day");
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(*k, (std::vector<UsageKey>{UsageKey::kTenant, UsageKey::kDay}));
  auto bad = ParseUsageKeys("tenant,week");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().field, "by");
  EXPECT_NE(bad.error().message.find("week"), std::string::npos);
  EXPECT_FALSE(ParseUsageKeys("day,day").has_value());
}

TEST(BudgetTest, ThresholdsAndOver) {
  Budget b;
  b.tenant = "nlp";
  b.mgpu_ms = 10 * 1000 * kHour;  // 10 GPU-hours
  b.alert_percents = {50, 80, 100};
  auto s = EvaluateBudget(b, "2026-11", 8 * 1000 * kHour, 0);
  EXPECT_EQ(s.used_micros, 8'000'000);
  EXPECT_EQ(s.limit_micros, 10'000'000);
  EXPECT_EQ(s.crossed_percents, (std::vector<std::int32_t>{50, 80}));
  EXPECT_FALSE(s.over);
  s = EvaluateBudget(b, "2026-11", 10 * 1000 * kHour, 0);
  EXPECT_TRUE(s.over);
  EXPECT_EQ(s.crossed_percents.size(), 3u);
  Budget money;
  money.cost_micros = 100'000'000;
  money.alert_percents = {100};
  EXPECT_FALSE(EvaluateBudget(money, "2026-11", 1, 99'999'999).over);
  EXPECT_TRUE(EvaluateBudget(money, "2026-11", 1, 100'000'000).over);
}

}  // namespace
}  // namespace berth::model
