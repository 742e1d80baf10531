// Fencing with real processes: a berth-agent cut off from berthd stops its
// own run (reason "fenced") within its lease plus its fence grace, and the
// job's next attempt starts only after the first one's last sign of life,
// whether the cut is a network partition (a relay that stops carrying bytes,
// while berthd and both agents keep running) or berthd itself going away.
// The job appends "<restart count> <unix ms>" to a shared file every 100 ms,
// so the file shows whether two attempts ever ran at once.
#include "model/fencing.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

TimeMs NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The job's lines: restart count -> the times it wrote, in order.
std::map<int, std::vector<TimeMs>> ReadBeats(const std::filesystem::path& file) {
  std::map<int, std::vector<TimeMs>> beats;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    int attempt = -1;
    TimeMs at = 0;
    if (fields >> attempt >> at && attempt >= 0 && at > 0) beats[attempt].push_back(at);
  }
  return beats;
}

std::string Dump(const std::map<int, std::vector<TimeMs>>& beats) {
  std::string out;
  for (const auto& [attempt, times] : beats) {
    out += fmt::format("attempt {}: {} lines, {} .. {}\n", attempt, times.size(), times.front(),
                       times.back());
  }
  return out;
}

// Short everything: a 1 s lease and fence grace, a 1 s stop grace, and a
// node-lost grace shorter than fencing needs, so berthd must wait for the
// fence time rather than its own grace.
constexpr TimeMs kLeaseMs = 1'000;
constexpr TimeMs kFenceGraceMs = 1'000;
constexpr TimeMs kStopGraceMs = 1'000;
std::vector<std::string> BerthdFlags(const std::string& node_lost_grace = "1s") {
  return {"--lease",
          "1s",
          "--heartbeat",
          "200ms",
          "--stop-grace",
          "1s",
          "--node-lost-grace",
          node_lost_grace,
          "--agent-fence-grace",
          "1s"};
}
const std::vector<std::string> kAgentFlags{"--fence-grace", "1s"};
// What the agent logs when it stops its runs.
constexpr std::string_view kFencedLine = "stopping 1 run(s), since berthd may now start";
// Generous: the suite runs beside compilers.
constexpr TimeMs kToleranceMs = 4'000;

class FencingTest : public IntegrationTest {
 protected:
  // A simulated one-GPU node of its own for each agent.
  std::filesystem::path Cluster(const std::string& node) {
    auto file = dir_ / ("cluster-" + node + ".yaml");
    std::filesystem::copy_file(WriteCluster(node, 1), file,
                               std::filesystem::copy_options::overwrite_existing);
    return file;
  }
  // A one-GPU job that writes a beat every 100 ms until stopped; node_lost
  // (the default retry class) is retried after 1 s.
  std::int64_t SubmitBeating(Berthd& berthd) {
    const std::string script = "while :; do echo \"$BERTH_RESTART_COUNT $(date +%s%3N)\" >> " +
                               beats_.string() + "; sleep 0.1; done";
    std::string error;
    auto id = berthd.Submit(JobSpecJson("beating", Sh(script), 1,
                                        {{"retry", {{"max_attempts", 3}, {"backoff", "1s"}}}}),
                            &error);
    EXPECT_NE(id, 0) << error;
    return id;
  }
  bool WaitForBeats(int attempt, std::size_t n, Ms timeout) {
    return WaitFor([&] { return ReadBeats(beats_)[attempt].size() >= n; }, timeout);
  }
  // The attempt-0 run as the job's record shows it.
  static json FirstRun(const json& job) {
    for (const auto& r : job.value("runs", json::array())) {
      if (r.value("attempt", 0) == 1) return r;
    }
    return nullptr;
  }

  std::filesystem::path beats_ = dir_ / "beats";
};

// The agent's stream goes through a relay that is cut: berthd and both
// agents keep running, but the first agent hears nothing. It fences its run;
// berthd presumes the run lost only after the fence time and places the next
// attempt on the other node.
TEST_F(FencingTest, APartitionedAgentStopsItsRunBeforeTheNextAttemptStartsElsewhere) {
  Berthd& berthd = NewBerthd(ControlPlaneOnly(BerthdFlags()));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  Relay relay(berthd.agent_port());
  std::vector<std::string> via_relay = kAgentFlags;
  via_relay.insert(via_relay.end(), {"--server", fmt::format("127.0.0.1:{}", relay.port())});
  NewAgent(berthd, dir_ / "agent-cut", Cluster("cut"), "agent-cut.log", {}, via_relay);
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s, "cut")) << berthd.Nodes().dump(2);

  auto id = SubmitBeating(berthd);
  ASSERT_TRUE(berthd.WaitForState(id, "Running", 30s)) << berthd.Job(id).dump(2);
  ASSERT_EQ(berthd.Job(id)["placement"][0]["node"], "cut");
  NewAgent(berthd, dir_ / "agent-other", Cluster("other"), "agent-other.log", {}, kAgentFlags);
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s, "other")) << berthd.Nodes().dump(2);
  ASSERT_TRUE(WaitForBeats(0, 3, 20s)) << Dump(ReadBeats(beats_));

  const TimeMs cut = NowMs();
  relay.Cut();
  ASSERT_TRUE(WaitForBeats(1, 3, 60s)) << Dump(ReadBeats(beats_)) << berthd.Job(id).dump(2);
  auto beats = ReadBeats(beats_);
  const TimeMs last_first = beats[0].back();
  const TimeMs first_next = beats[1].front();
  // Keepalive notices the silence, then lease + fence grace, then at most
  // one connection attempt, then the stop (sh dies on SIGTERM at once).
  const TimeMs bound = model::kAgentKeepaliveMs + model::kAgentKeepaliveTimeoutMs + kLeaseMs +
                       kFenceGraceMs + model::kAgentConnectTimeoutMs + kStopGraceMs;
  EXPECT_LE(last_first - cut, bound + kToleranceMs) << Dump(beats);
  EXPECT_GT(first_next, last_first) << "two attempts ran at once:\n" << Dump(beats);
  auto job = berthd.Job(id);
  EXPECT_EQ(job["placement"][0]["node"], "other") << job.dump(2);
  // Still cut off: berthd presumed it lost (it cannot have heard "fenced").
  EXPECT_EQ(FirstRun(job).value("stopped_for", ""), "lost") << job.dump(2);
  EXPECT_NE(ReadFile(dir_ / "agent-cut.log").find(kFencedLine), std::string::npos);

  // Healed, the agent reports its fenced exit for a run already settled.
  relay.Heal();
  EXPECT_TRUE(berthd.WaitForNode("Ready", 20s, "cut")) << berthd.Nodes().dump(2);
  auto cancel = Cli(berthd, {"cancel", std::to_string(id)});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err;
  EXPECT_TRUE(berthd.WaitForTerminal(id, 30s)) << berthd.Job(id).dump(2);
}

// berthd goes away (kill -9) and stays away past the fence time: the agent
// stops its run; when berthd is back it reports the exit as fenced, and the
// job's retry policy places the next attempt, after the first one's end.
TEST_F(FencingTest, AnAgentWithoutBerthdFencesItsRunAndReportsItWhenBerthdReturns) {
  // A restarted berthd gives the node a fresh lease; the long node-lost
  // grace leaves the agent (reconnecting with backoff) time to report.
  Berthd& berthd = NewBerthd(ControlPlaneOnly(BerthdFlags("30s")));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  NewAgent(berthd, dir_ / "agent", Cluster("alone"), "agent.log", {}, kAgentFlags);
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s, "alone")) << berthd.Nodes().dump(2);
  auto id = SubmitBeating(berthd);
  ASSERT_TRUE(berthd.WaitForState(id, "Running", 30s)) << berthd.Job(id).dump(2);
  ASSERT_TRUE(WaitForBeats(0, 3, 20s)) << Dump(ReadBeats(beats_));

  const TimeMs cut = NowMs();
  berthd.Kill();
  // The stream breaks at once; lease + fence grace later the run is stopped.
  ASSERT_TRUE(WaitFor(
      [&] { return ReadFile(dir_ / "agent.log").find(kFencedLine) != std::string::npos; }, 30s));
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * kStopGraceMs));
  auto beats = ReadBeats(beats_);
  const TimeMs last_first = beats[0].back();
  EXPECT_LE(last_first - cut, kLeaseMs + kFenceGraceMs + kStopGraceMs + kToleranceMs)
      << Dump(beats);
  EXPECT_LT(last_first, NowMs() - kStopGraceMs) << "still running after the fence";

  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(WaitForBeats(1, 3, 60s)) << Dump(ReadBeats(beats_)) << berthd.Job(id).dump(2);
  beats = ReadBeats(beats_);
  EXPECT_GT(beats[1].front(), beats[0].back()) << "two attempts ran at once:\n" << Dump(beats);
  auto job = berthd.Job(id);
  const json first = FirstRun(job);
  EXPECT_EQ(first.value("stopped_for", ""), "fenced") << job.dump(2);
  EXPECT_EQ(first.value("failure_class", ""), "node_lost") << job.dump(2);
  EXPECT_EQ(CountEvents(job, "Retrying"), 1) << job.dump(2);
  auto cancel = Cli(berthd, {"cancel", std::to_string(id)});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err;
  EXPECT_TRUE(berthd.WaitForTerminal(id, 30s)) << berthd.Job(id).dump(2);
}

}  // namespace
}  // namespace berth::it
