// berthd's forecast of when waiting jobs start (control/forecaster.h): its
// scheduler run forward over the ends of what runs, shown by GET /why.
#include <string>

#include "integration/fixture.h"

namespace berth::it {
namespace {

// One 8-GPU node: a hog holds it for 10 minutes (declared); two 8-GPU jobs
// of 5 minutes each wait. The cycle's own estimate gives the second only
// "not before the first"; the forecast runs the first after the hog and
// the second after that: the hog's start plus 15 minutes.
TEST_F(IntegrationTest, WhyForecastsAJobBehindItsHeadFromTheDeclaredEnds) {
  Berthd& berthd = NewBerthd(AllInOne({"--forecast-interval", "1s"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const auto hog = berthd.Submit(JobSpecJson("hog", {"sleep", "600"}, 8, {{"max_runtime", "10m"}}));
  ASSERT_GT(hog, 0);
  ASSERT_TRUE(berthd.WaitForState(hog, "Running", 20s)) << berthd.Job(hog).dump(2);
  const std::int64_t hog_start = berthd.Job(hog)["started_at_ms"].get<std::int64_t>();
  const auto first = berthd.Submit(JobSpecJson("first", Sh("true"), 8, {{"max_runtime", "5m"}}));
  const auto second = berthd.Submit(JobSpecJson("second", Sh("true"), 8, {{"max_runtime", "5m"}}));
  ASSERT_GT(first, 0);
  ASSERT_GT(second, 0);

  Reply why;
  ASSERT_TRUE(WaitFor(
      [&] {
        why = berthd.http().Get("/v1/jobs/" + std::to_string(second) + "/why");
        return why.status == 200 && why.body["reason"].contains("forecast");
      },
      20s))
      << why.text;
  const auto& f = why.body["reason"]["forecast"];
  EXPECT_EQ(f["start_ms"].get<std::int64_t>(), hog_start + 15 * 60'000) << f.dump();
  EXPECT_EQ(f["basis"], "declared") << f.dump();
  EXPECT_GE(f["cycles"].get<std::int64_t>(), 3) << f.dump();  // now, the hog's end, the first's
  const std::string message = why.body["reason"]["message"].get<std::string>();
  EXPECT_NE(message.find("forecast: starts in about"), std::string::npos) << message;
  EXPECT_NE(message.find("no new arrivals"), std::string::npos) << message;
  // The head's forecast is the hog's end.
  const Reply head = berthd.http().Get("/v1/jobs/" + std::to_string(first) + "/why");
  ASSERT_EQ(head.status, 200) << head.text;
  EXPECT_EQ(head.body["reason"]["forecast"]["start_ms"].get<std::int64_t>(),
            hog_start + 10 * 60'000)
      << head.text;
  // In Chinese too.
  const Reply zh = berthd.http().Get("/v1/jobs/" + std::to_string(second) + "/why?lang=zh");
  ASSERT_EQ(zh.status, 200) << zh.text;
  EXPECT_NE(zh.body["reason"]["message"].get<std::string>().find("预测"), std::string::npos)
      << zh.text;
  // `berth why` shows it as a line of its own.
  const CommandResult cli = Cli(berthd, {"why", std::to_string(second), "--lang", "en"});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("declared basis"), std::string::npos) << cli.out;
}

// With forecasts off, why says nothing of one.
TEST_F(IntegrationTest, NoForecastWhenTheIntervalIsZero) {
  Berthd& berthd = NewBerthd(AllInOne({"--forecast-interval", "0"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const auto hog = berthd.Submit(JobSpecJson("hog", {"sleep", "600"}, 8, {{"max_runtime", "10m"}}));
  ASSERT_TRUE(berthd.WaitForState(hog, "Running", 20s)) << berthd.Job(hog).dump(2);
  const auto waiting = berthd.Submit(JobSpecJson("w", Sh("true"), 8, {{"max_runtime", "5m"}}));
  ASSERT_TRUE(
      WaitFor([&] { return berthd.Job(waiting)["reason"]["counts"].contains("eta_ms"); }, 20s))
      << berthd.Job(waiting).dump(2);
  const Reply why = berthd.http().Get("/v1/jobs/" + std::to_string(waiting) + "/why");
  ASSERT_EQ(why.status, 200) << why.text;
  EXPECT_FALSE(why.body["reason"].contains("forecast")) << why.text;
}

// A bad interval names the flag and the fix.
TEST_F(IntegrationTest, ABadForecastIntervalIsRefused) {
  Berthd& berthd = NewBerthd(AllInOne({"--forecast-interval", "10ms"}));
  EXPECT_FALSE(berthd.Start());
  EXPECT_NE(berthd.log().find("--forecast-interval '10ms'"), std::string::npos) << berthd.log();
}

}  // namespace
}  // namespace berth::it
