// A run's log past berthd's --log-limit: `berth logs` and the API show its
// head, one marker line and its latest output, through a berthd restart in
// the middle of the run (the agent resumes at the absolute offset berthd
// reports, after the dropped middle).
#include <fmt/format.h>

#include "integration/fixture.h"

namespace berth::it {
namespace {

// Lines "a-line-00000000", 16 bytes each, numbered from `from` to `to`.
std::string Lines(const std::string& tag, int from, int to) {
  std::string out;
  for (int i = from; i < to; ++i) out += fmt::format("{}-line-{:08}\n", tag, i);
  return out;
}

TEST_F(IntegrationTest, ALogPastItsLimitKeepsHeadMarkerAndTailAcrossARestart) {
  Berthd& berthd = NewBerthd(AllInOne({"--log-limit", "16Ki"}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  const auto more = dir_ / "more";
  // 4000 lines of 16 bytes (64,000 bytes), then, once told, 2000 more.
  const std::string script =
      "i=0; while [ $i -lt 4000 ]; do printf 'a-line-%08d\\n' $i; i=$((i+1)); done; "
      "while [ ! -e " +
      more.string() +
      " ]; do sleep 0.1; done; "
      "while [ $i -lt 6000 ]; do printf 'b-line-%08d\\n' $i; i=$((i+1)); done";
  std::string error;
  auto id = berthd.Submit(JobSpecJson("chatty", Sh(script), 1), &error);
  ASSERT_NE(id, 0) << error;
  const std::string path = "/v1/jobs/" + std::to_string(id) + "/logs";
  const std::string first = Lines("a", 0, 4000);
  ASSERT_TRUE(WaitFor(
      [&] { return berthd.http().Get(path).text.ends_with(first.substr(first.size() - 100)); },
      30s))
      << berthd.http().Get(path).text.substr(0, 200);

  const std::string marker_start = "[berth: ";
  std::string text = berthd.http().Get(path).text;
  EXPECT_TRUE(text.starts_with(first.substr(0, 4096))) << text.substr(0, 200);
  EXPECT_NE(
      text.find(fmt::format("{}{} bytes of output dropped here", marker_start, 64'000 - 16 * 1024)),
      std::string::npos)
      << text.substr(4000, 400);
  EXPECT_TRUE(text.ends_with(first.substr(64'000 - 12 * 1024)));

  // berthd dies; the job keeps writing; the agent resumes after what berthd
  // holds, the dropped middle included.
  berthd.Kill();
  WriteFile(more, "");
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForTerminal(id, 60s)) << berthd.Job(id).dump(2);
  EXPECT_EQ(berthd.JobState(id), "Succeeded");

  const std::string all = first + Lines("b", 4000, 6000);
  text = berthd.http().Get(path).text;
  const std::string want =
      all.substr(0, 4096) +
      fmt::format(
          "[berth: {} bytes of output dropped here: this run's log passed its limit of "
          "16Ki, so Berth keeps its head and its latest output]\n",
          all.size() - 16 * 1024) +
      all.substr(all.size() - 12 * 1024);
  EXPECT_EQ(text.size(), want.size());
  EXPECT_TRUE(text == want) << text.substr(0, 300) << "\n...\n"
                            << text.substr(text.size() > 300 ? text.size() - 300 : 0);
  // `berth logs` reads the same thing.
  auto cli = Cli(berthd, {"logs", std::to_string(id)});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_TRUE(cli.out == want) << cli.out.substr(0, 300);
}

}  // namespace
}  // namespace berth::it
