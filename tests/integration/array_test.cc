// Job arrays end to end: `berth submit` of a spec with `array:` stores one job
// per element, each runs with its index and its parameter set in the
// environment, `berth jobs --array` lists them, and `berth cancel --array`
// cancels the elements still waiting and stops the ones that run.
#include <fmt/format.h>

#include <fstream>
#include <set>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

TEST_F(IntegrationTest, AnArrayRunsEachElementWithItsIndexAndParametersAndCancelsAsAGroup) {
  Berthd& berthd = NewBerthd(AllInOne({"--stop-grace", "2s"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  const auto spec_path = dir_ / "sweep.yaml";
  {
    std::ofstream f(spec_path);
    f << "name: sweep\n"
         "command: [sh, -c, 'echo \"$BERTH_ARRAY_ID $BERTH_ARRAY_INDEX/$BERTH_ARRAY_SIZE "
         "lr=$LR\"']\n"
         "array: [{LR: '0.1'}, {LR: '0.01'}, {LR: '0.001'}]\n";
  }
  auto submitted = Cli(berthd, {"submit", spec_path.string()});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  std::int64_t first = 0;
  ASSERT_EQ(std::sscanf(submitted.out.c_str(), "array %ld submitted", &first), 1) << submitted.out;
  EXPECT_NE(submitted.out.find("3 jobs"), std::string::npos) << submitted.out;

  const std::vector<std::string> lrs{"0.1", "0.01", "0.001"};
  for (std::int64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(berthd.WaitForTerminal(first + i, 30s)) << berthd.JobState(first + i);
    auto job = berthd.Job(first + i);
    EXPECT_EQ(job.at("state"), "Succeeded") << job.dump(2);
    EXPECT_EQ(job.at("array").at("id"), first);
    EXPECT_EQ(job.at("array").at("index"), i);
    auto logs = Cli(berthd, {"logs", std::to_string(first + i)});
    EXPECT_EQ(logs.out, fmt::format("{} {}/3 lr={}\n", first, i, lrs[i])) << logs.err;
  }
  auto listed = Cli(berthd, {"jobs", "--array", std::to_string(first)});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(listed.out.find(fmt::format("sweep[{}]", i)), std::string::npos) << listed.out;
  }

  // One element runs (all 8 GPUs each); the other three wait behind it.
  auto big = berthd.http().Post(
      "/v1/jobs", JobSpecJson("big", {"sleep", "300"}, 8, {{"array", "4-7"}}), "application/json");
  ASSERT_EQ(big.status, 201) << big.text;
  const std::int64_t array = big.body.at("id");
  EXPECT_EQ(big.body.at("array").at("jobs").at("last"), array + 3);
  EXPECT_EQ(big.body.at("array").at("index"), 4);
  ASSERT_TRUE(berthd.WaitForState(array, "Running", 30s)) << berthd.JobState(array);
  auto cancel = Cli(berthd, {"cancel", "--array", std::to_string(array)});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err;
  EXPECT_EQ(cancel.out, fmt::format("array {}: 3 cancelled, 1 stopping\n", array));
  for (std::int64_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(berthd.WaitForTerminal(array + i, 30s)) << berthd.JobState(array + i);
    EXPECT_EQ(berthd.Job(array + i).at("state"), "Cancelled");
  }
  // A job id that is no array's, and a made-up one, are refused alike.
  auto not_array =
      berthd.http().Post(fmt::format("/v1/arrays/{}/cancel", first + 10), "", "application/json");
  EXPECT_EQ(not_array.status, 404) << not_array.text;
  auto single = berthd.Submit(JobSpecJson("single", {"true"}));
  auto refused =
      berthd.http().Post(fmt::format("/v1/arrays/{}/cancel", single), "", "application/json");
  EXPECT_EQ(refused.status, 404) << refused.text;
}

}  // namespace
}  // namespace berth::it
