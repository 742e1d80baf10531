// The job spec's `load:` block and the utilization a load profile gives over
// time (what the simulated GPU provider reports).
#include <gtest/gtest.h>

#include "model/job.h"
#include "model/json.h"
#include "model/telemetry.h"

namespace berth::model {
namespace {

TEST(LoadSpec, AbsentGivesTheDefaultProfile) {
  auto spec = ParseJobSpec("name: a\ncommand: [x]\n");
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->load, LoadProfile{});
  EXPECT_EQ(spec->load.util_pct, 80u);
  EXPECT_EQ(spec->load.memory_pct, 50u);
  // The default is not written out, so stored specs stay as they were.
  EXPECT_FALSE(ToJson(*spec).contains("load"));
}

TEST(LoadSpec, ParsesEveryField) {
  auto spec = ParseJobSpec(
      "name: a\ncommand: [x]\nload: {pattern: periodic, utilization: 85, idle_utilization: 5, "
      "memory: 60%, period: 2m, idle_after: 30m}\n");
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->load.pattern, LoadPattern::kPeriodic);
  EXPECT_EQ(spec->load.util_pct, 85u);
  EXPECT_EQ(spec->load.idle_util_pct, 5u);
  EXPECT_EQ(spec->load.memory_pct, 60u);
  EXPECT_EQ(spec->load.period_ms, 120'000);
  EXPECT_EQ(spec->load.idle_after_ms, 1'800'000);
}

TEST(LoadSpec, AcceptsBoundsAndPlainNumbers) {
  auto spec = ParseJobSpec(
      "name: a\ncommand: [x]\nload: {pattern: idle, utilization: 100%, idle_utilization: 0, "
      "memory: 0, idle_after: 0}\n");
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->load.pattern, LoadPattern::kIdle);
  EXPECT_EQ(spec->load.util_pct, 100u);
  EXPECT_EQ(spec->load.memory_pct, 0u);
  EXPECT_EQ(spec->load.idle_after_ms, 0);
  // The key order does not matter: pattern is read before period.
  auto periodic = ParseJobSpec("name: a\ncommand: [x]\nload: {period: 1s, pattern: periodic}\n");
  ASSERT_TRUE(periodic.has_value()) << periodic.error().message;
  EXPECT_EQ(periodic->load.period_ms, 1'000);
}

TEST(LoadSpec, JsonRoundTripKeepsTheProfile) {
  auto spec = ParseJobSpec(
      "name: a\ncommand: [x]\nload: {pattern: periodic, utilization: 30, memory: 10%, "
      "period: 90s, idle_after: 1h}\n");
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  auto j = ToJson(*spec);
  EXPECT_EQ(j["load"]["pattern"], "periodic");
  auto back = JobSpecFromJson(j);
  EXPECT_EQ(back.load, spec->load);
  // JSON is YAML: the printed form is not a spec (different keys), but the
  // stored form reads back exactly.
  EXPECT_EQ(ToJson(back), j);
}

struct BadLoad {
  const char* load;
  const char* field;
  const char* hint;
};

class LoadSpecRejects : public ::testing::TestWithParam<BadLoad> {};

TEST_P(LoadSpecRejects, NamesTheFieldAndTheFix) {
  std::string yaml = std::string("name: a\ncommand: [x]\nload: ") + GetParam().load + "\n";
  auto spec = ParseJobSpec(yaml);
  ASSERT_FALSE(spec.has_value()) << yaml;
  EXPECT_EQ(spec.error().code, Code::kInvalidArgument);
  EXPECT_EQ(spec.error().field, GetParam().field) << spec.error().message;
  EXPECT_NE(spec.error().message.find(GetParam().hint), std::string::npos) << spec.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LoadSpecRejects,
    ::testing::Values(BadLoad{"steady", "load", "mapping"},
                      BadLoad{"{utilisation: 80}", "load.utilisation", "allowed fields"},
                      BadLoad{"{utilization: 80, utilization: 90}", "load.utilization",
                              "given twice"},
                      BadLoad{"{pattern: bursty}", "load.pattern", "steady, periodic or idle"},
                      BadLoad{"{pattern: [steady]}", "load.pattern", "string"},
                      BadLoad{"{utilization: 101}", "load.utilization", "0 to 100"},
                      BadLoad{"{utilization: -1}", "load.utilization", "0 to 100"},
                      BadLoad{"{utilization: high}", "load.utilization", "percentage"},
                      BadLoad{"{utilization: 85.5}", "load.utilization", "whole number"},
                      BadLoad{"{idle_utilization: 200%}", "load.idle_utilization", "0 to 100"},
                      BadLoad{"{memory: 60Gi}", "load.memory", "60%"},
                      BadLoad{"{memory: 120%}", "load.memory", "0 to 100"},
                      BadLoad{"{pattern: periodic, period: 500ms}", "load.period", "1s and 24h"},
                      BadLoad{"{pattern: periodic, period: 2d}", "load.period", "1s and 24h"},
                      BadLoad{"{pattern: periodic, period: soon}", "load.period", "duration"},
                      BadLoad{"{period: 2m}", "load.period", "pattern: periodic"},
                      BadLoad{"{pattern: steady, period: 2m}", "load.period", "pattern: periodic"},
                      BadLoad{"{idle_after: 30}", "load.idle_after", "unit"},
                      BadLoad{"{idle_after: -5m}", "load.idle_after", "duration"}));

TEST(ProfileUtilization, SteadyHoldsItsUtilization) {
  LoadProfile p;
  p.util_pct = 85;
  EXPECT_EQ(ProfileUtilization(p, 0), 85u);
  EXPECT_EQ(ProfileUtilization(p, 3'600'000), 85u);
}

TEST(ProfileUtilization, PeriodicIsBusyTheFirstHalfOfEachPeriod) {
  LoadProfile p;
  p.pattern = LoadPattern::kPeriodic;
  p.util_pct = 90;
  p.idle_util_pct = 10;
  p.period_ms = 120'000;
  EXPECT_EQ(ProfileUtilization(p, 0), 90u);
  EXPECT_EQ(ProfileUtilization(p, 59'999), 90u);
  EXPECT_EQ(ProfileUtilization(p, 60'000), 10u);
  EXPECT_EQ(ProfileUtilization(p, 119'999), 10u);
  EXPECT_EQ(ProfileUtilization(p, 120'000), 90u);
  EXPECT_EQ(ProfileUtilization(p, 185'000), 10u);
}

TEST(ProfileUtilization, IdleAndIdleAfter) {
  LoadProfile idle;
  idle.pattern = LoadPattern::kIdle;
  idle.idle_util_pct = 3;
  EXPECT_EQ(ProfileUtilization(idle, 0), 3u);
  LoadProfile notebook;
  notebook.util_pct = 70;
  notebook.idle_after_ms = 1'800'000;
  EXPECT_EQ(ProfileUtilization(notebook, 1'799'999), 70u);
  EXPECT_EQ(ProfileUtilization(notebook, 1'800'000), 0u);
  EXPECT_EQ(ProfileUtilization(notebook, 7'200'000), 0u);
}

}  // namespace
}  // namespace berth::model
