// The `metered` step's judgement (poc_meter.h): a job's GPU time whole in
// its tenant's usage records and priced at the rate of the price table in
// force; a zero rate for the job's GPU, GPU time that is not the runs',
// another tenant's record or a cost off the rate each fail naming what is
// wrong; no price table at all is said, and the GPU time still judged.
#include "cli/poc_meter.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace berth::cli::poc {
namespace {

using nlohmann::json;

// A 1-GPU job whose one run ran 10 s.
json MeterJob() {
  return {{"id", 7},
          {"tenant", "poc-x-a"},
          {"placement",
           {{{"attempt", 0},
             {"run_id", "7.0.0"},
             {"started_at_ms", 1'000'000},
             {"finished_at_ms", 1'010'000}}}}};
}

// Its record: 10 s × 1000 mGPU, priced under version 2 at `cost_micros`.
json MeterRecords(std::int64_t mgpu_ms = 10'000'000, std::int64_t cost_micros = 6'944,
                  const std::string& tenant = "poc-x-a") {
  return {{"records",
           {{{"run_id", "7.0.0"},
             {"job_id", 7},
             {"attempt", 0},
             {"tenant", tenant},
             {"gpu_model", "H100-80GB"},
             {"pool", "default"},
             {"mgpu_ms", mgpu_ms},
             {"cost_micros", cost_micros},
             {"cost", "0.006944"},
             {"price_versions", {2}}}}}};
}

// Version 2: H100-80GB in any pool at `micros` per GPU-hour, others 1.00.
json MeterPrices(std::int64_t micros = 2'500'000) {
  return {
      {"version", 2},
      {"active", 2},
      {"table",
       {{"currency", "USD"},
        {"default_micros", 1'000'000},
        {"prices", {{{"model", "H100-80GB"}, {"pool", "*"}, {"per_gpu_hour_micros", micros}}}}}}};
}

TEST(PocMeter, RunTimeTimesGpusPricedAtTheTableRatePasses) {
  // 10 s of one GPU at 2.50 per GPU-hour: 2.5e6 × 1e7 / 3.6e9 = 6944.4 → 6944.
  auto m = JudgeMetering(MeterJob(), MeterRecords(), MeterPrices(), 1);
  EXPECT_TRUE(m.ok) << m.actual;
  EXPECT_NE(m.actual.find("2.50 per GPU-hour"), std::string::npos) << m.actual;
  EXPECT_NE(m.expected.find("poc-x-a"), std::string::npos) << m.expected;
}

TEST(PocMeter, AZeroRateForTheJobsGpuFailsNamingModelPoolAndVersion) {
  auto m = JudgeMetering(MeterJob(), MeterRecords(10'000'000, 0), MeterPrices(0), 1);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.actual.find("version 2 prices GPU model H100-80GB in pool 'default' at 0.00"),
            std::string::npos)
      << m.actual;
}

TEST(PocMeter, ACostOffTheRateFails) {
  auto m = JudgeMetering(MeterJob(), MeterRecords(10'000'000, 2'778), MeterPrices(), 1);
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.actual.find("costs 2778 micros"), std::string::npos) << m.actual;
  EXPECT_NE(m.actual.find("is 6944"), std::string::npos) << m.actual;
}

TEST(PocMeter, GpuTimeOutsideTheBandOfRunTimeTimesGpusFails) {
  // Half the GPU time, or the job counted as 2 GPUs: both off the band.
  EXPECT_FALSE(JudgeMetering(MeterJob(), MeterRecords(5'000'000), MeterPrices(), 1).ok);
  auto twice = JudgeMetering(MeterJob(), MeterRecords(), MeterPrices(), 2);
  EXPECT_FALSE(twice.ok);
  EXPECT_NE(twice.actual.find("for 10000 ms of run"), std::string::npos) << twice.actual;
  // Within 10% and a GPU-second: a run's start and end as the agent saw them.
  EXPECT_TRUE(JudgeMetering(MeterJob(), MeterRecords(10'900'000, 7'569), MeterPrices(), 1).ok);
}

TEST(PocMeter, AnotherTenantsRecordOrNoneFails) {
  auto other =
      JudgeMetering(MeterJob(), MeterRecords(10'000'000, 6'944, "poc-x-b"), MeterPrices(), 1);
  EXPECT_FALSE(other.ok);
  EXPECT_NE(other.actual.find("metered to tenant poc-x-b, not poc-x-a"), std::string::npos);
  auto none = JudgeMetering(MeterJob(), json{{"records", json::array()}}, MeterPrices(), 1);
  EXPECT_FALSE(none.ok);
  EXPECT_NE(none.actual.find("no usage record"), std::string::npos) << none.actual;
}

TEST(PocMeter, NoPriceTableIsSaidAndTheGpuTimeStillJudged) {
  const json no_table = {{"version", nullptr}, {"active", nullptr}, {"table", json::object()}};
  auto m = JudgeMetering(MeterJob(), MeterRecords(10'000'000, 0), no_table, 1);
  EXPECT_TRUE(m.ok) << m.actual;
  EXPECT_NE(m.actual.find("no price table is in force"), std::string::npos) << m.actual;
  EXPECT_FALSE(JudgeMetering(MeterJob(), MeterRecords(1'000), no_table, 1).ok);
}

}  // namespace
}  // namespace berth::cli::poc
