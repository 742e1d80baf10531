// A run's log survives kill -9 of berthd whole and exactly once: a job on a
// standalone agent prints numbered lines (several 64 KiB chunks) and exits,
// and berthd is killed right after it reports the exit, or while chunks are
// still on their way. After a restart on the same data dir, `berth logs`
// has every line, in order, once: berthd syncs the log before it records
// and acknowledges the exit, the agent keeps its copy until that ack, and a
// resent chunk lands at its own offset.
#include <fmt/format.h>

#include <sstream>
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

constexpr int kLines = 6000;

// Each line is "line NNNNNN " and padding to 100 bytes: 600 KB in all, about
// ten chunks. `every`/`pause`: the job sleeps `pause` after each `every`
// lines, so the log takes a while to arrive.
std::string PrintLines(int every = 0, const std::string& pause = "0") {
  std::string script = fmt::format(
      "pad=$(printf '%0{}d' 0); i=1; while [ $i -le {} ]; do printf 'line %06d %s\\n' $i "
      "\"$pad\"; ",
      100 - 13, kLines);
  if (every > 0) script += fmt::format("[ $((i % {})) -eq 0 ] && sleep {}; ", every, pause);
  script += "i=$((i + 1)); done";
  return script;
}

// Checks that `log` is exactly lines 1..kLines in order; says what is wrong.
::testing::AssertionResult AllLinesOnce(const std::string& log) {
  std::istringstream in(log);
  std::string line;
  int expect = 1;
  while (std::getline(in, line)) {
    int n = 0;
    if (std::sscanf(line.c_str(), "line %d", &n) != 1) {  // NOLINT
      return ::testing::AssertionFailure() << "line " << expect << " is '" << line << "'";
    }
    if (n != expect) {
      return ::testing::AssertionFailure() << "expected line " << expect << ", found line " << n
                                           << " (" << log.size() << " bytes in all)";
    }
    if (line.size() != 99) {
      return ::testing::AssertionFailure() << "line " << n << " is torn: '" << line << "'";
    }
    ++expect;
  }
  if (expect != kLines + 1) {
    return ::testing::AssertionFailure()
           << "the log ends after line " << expect - 1 << " of " << kLines;
  }
  return ::testing::AssertionSuccess();
}

class LogDurabilityTest : public IntegrationTest {
 protected:
  void StartCluster() {
    berthd_ = &NewBerthd(ControlPlaneOnly());
    ASSERT_TRUE(berthd_->Start()) << berthd_->log();
    agent_ = &NewAgent(*berthd_, dir_ / "agent", WriteCluster("log-node"), "agent.log");
    ASSERT_TRUE(berthd_->WaitForNode("Ready", 20s, "log-node")) << berthd_->Nodes().dump(2);
  }
  std::string Logs(std::int64_t id) const {
    auto cli = Cli(*berthd_, {"logs", std::to_string(id)});
    EXPECT_EQ(cli.exit_code, 0) << cli.err;
    return cli.out;
  }
  // The agent forgets a run once berthd acknowledged its exit.
  bool AgentHoldsNoRun() const {
    std::error_code ec;
    auto runs = dir_.path() / "agent" / "runs";
    return !std::filesystem::exists(runs, ec) || std::filesystem::is_empty(runs, ec);
  }

  Berthd* berthd_ = nullptr;
  Process* agent_ = nullptr;
};

TEST_F(LogDurabilityTest, KilledRightAfterItReportsTheExitTheLogIsWholeAfterRestart) {
  StartCluster();
  auto id = berthd_->Submit(JobSpecJson("lines", Sh(PrintLines())));
  ASSERT_GT(id, 0);
  // The moment the API shows the exit, berthd dies: the exit is recorded,
  // the ack may or may not have reached the agent.
  ASSERT_TRUE(WaitFor([&] { return berthd_->JobState(id) == "Succeeded"; }, 60s, 1ms))
      << berthd_->JobState(id);
  berthd_->Kill();
  ASSERT_TRUE(berthd_->Start()) << berthd_->log();
  ASSERT_TRUE(berthd_->WaitForNode("Ready", 20s, "log-node"));
  EXPECT_TRUE(WaitFor([&] { return AgentHoldsNoRun(); }, 30s))
      << "the agent still holds the run: its exit was never acknowledged";
  EXPECT_EQ(berthd_->JobState(id), "Succeeded");
  EXPECT_TRUE(AllLinesOnce(Logs(id)));
}

TEST_F(LogDurabilityTest, KilledWhileChunksAreInFlightTheLogIsWholeAfterRestart) {
  StartCluster();
  // About 3 s of output in bursts of 200 lines (20 KB).
  auto id = berthd_->Submit(JobSpecJson("lines", Sh(PrintLines(200, "0.1"))));
  ASSERT_GT(id, 0);
  const std::string path = fmt::format("/v1/jobs/{}/logs", id);
  // Killed once part of the log has arrived, while the job still prints.
  std::size_t arrived = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = berthd_->http().Get(path);
        arrived = r.text.size();
        return r.status == 200 && arrived > 100'000;
      },
      60s, 5ms));
  berthd_->Kill();
  ASSERT_LT(arrived, std::size_t{kLines} * 100) << "the whole log arrived before the kill";
  // The job finishes while berthd is down; the agent keeps the log.
  std::this_thread::sleep_for(4s);
  ASSERT_TRUE(berthd_->Start()) << berthd_->log();
  ASSERT_TRUE(berthd_->WaitForTerminal(id, 60s)) << berthd_->JobState(id);
  EXPECT_EQ(berthd_->JobState(id), "Succeeded");
  EXPECT_TRUE(AllLinesOnce(Logs(id)));
  EXPECT_TRUE(WaitFor([&] { return AgentHoldsNoRun(); }, 30s));
}

}  // namespace
}  // namespace berth::it
