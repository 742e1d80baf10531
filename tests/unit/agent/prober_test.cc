#include "agent/prober.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>

#include "agent/runner.h"
#include "test_util.h"

namespace berth::agent {
namespace {

using testing::TempDir;
using testing::WaitFor;

model::Probe ProberHttpProbe(std::uint32_t success = 1, std::uint32_t failure = 3) {
  model::Probe p;
  p.kind = model::ProbeKind::kHttp;
  p.http_path = "/health";
  p.period_ms = 1000;
  p.timeout_ms = 300;
  p.success_threshold = success;
  p.failure_threshold = failure;
  return p;
}

TEST(ProbeCounter, DecidesAfterItsThresholdsInARowAndReportsOnlyChanges) {
  ProbeCounter c(ProberHttpProbe(2, 3));
  EXPECT_EQ(c.Observe(true), std::nullopt);  // one pass of two
  EXPECT_EQ(c.Observe(false), std::nullopt);
  EXPECT_EQ(c.Observe(true), std::nullopt);  // the run of passes started again
  EXPECT_EQ(c.Observe(true), std::optional<bool>(true));
  EXPECT_EQ(c.Observe(true), std::nullopt);  // still ready: no change
  EXPECT_EQ(c.Observe(false), std::nullopt);
  EXPECT_EQ(c.Observe(false), std::nullopt);
  EXPECT_EQ(c.Observe(false), std::optional<bool>(false));
  EXPECT_EQ(c.verdict(), std::optional<bool>(false));
}

TEST(ProbeCounter, AFirstVerdictOfNotReadyIsAChange) {
  ProbeCounter c(ProberHttpProbe(1, 1));
  EXPECT_EQ(c.Observe(false), std::optional<bool>(false));
}

// A probe function answering from a table the test changes, counting calls.
struct ProberScript {
  std::map<std::string, bool> readiness_ok;
  std::map<std::string, bool> liveness_ok;
  std::atomic<int> liveness_calls{0};
  ProbeFn Fn() {
    return [this](const model::Probe& p, const ProbeTarget& t) {
      if (p.http_path == "/live") {
        ++liveness_calls;
        return ProbeResult{liveness_ok[t.run_id], "GET /live"};
      }
      return ProbeResult{readiness_ok[t.run_id], "GET /health"};
    };
  }
};

ProbeTarget ProberTarget(const std::string& id, bool with_liveness) {
  ProbeTarget t;
  t.run_id = id;
  t.node_port = 40000;
  t.service_port = 8000;
  t.readiness = ProberHttpProbe(1, 2);
  if (with_liveness) {
    t.liveness = ProberHttpProbe(1, 2);
    t.liveness.http_path = "/live";
  }
  return t;
}

TEST(Prober, ReadinessIsReportedAsItChangesAndLivenessWaitsUntilTheReplicaWasReady) {
  ManualClock clock;
  ProberScript script;
  Prober prober(clock, script.Fn());
  prober.SetTargets({ProberTarget("r1", true)});
  script.readiness_ok["r1"] = false;
  script.liveness_ok["r1"] = false;

  prober.RunDue();
  EXPECT_TRUE(prober.TakeChanges().empty());  // one failure of two
  clock.Advance(1000);
  prober.RunDue();
  auto changes = prober.TakeChanges();
  ASSERT_EQ(changes.size(), 1U);
  EXPECT_FALSE(changes[0].ready);
  EXPECT_FALSE(changes[0].liveness_failed);
  EXPECT_EQ(prober.Ready("r1"), std::optional<bool>(false));
  // Loading: liveness is not probed, so a slow model is never killed.
  EXPECT_EQ(script.liveness_calls.load(), 0);

  script.readiness_ok["r1"] = true;
  script.liveness_ok["r1"] = true;
  clock.Advance(1000);
  prober.RunDue();
  changes = prober.TakeChanges();
  ASSERT_EQ(changes.size(), 1U);
  EXPECT_TRUE(changes[0].ready);
  EXPECT_EQ(changes[0].at_ms, clock.NowMs());

  // Ready once: liveness now counts. Two failures in a row, and it is done.
  clock.Advance(1000);
  prober.RunDue();
  EXPECT_GE(script.liveness_calls.load(), 1);
  script.liveness_ok["r1"] = false;
  clock.Advance(1000);
  prober.RunDue();
  EXPECT_TRUE(prober.TakeChanges().empty());
  clock.Advance(1000);
  prober.RunDue();
  changes = prober.TakeChanges();
  ASSERT_EQ(changes.size(), 1U);
  EXPECT_TRUE(changes[0].liveness_failed);
  EXPECT_NE(changes[0].detail.find("liveness failed 2 times in a row"), std::string::npos)
      << changes[0].detail;
  // Not probed again while its agent stops it.
  const int calls = script.liveness_calls.load();
  clock.Advance(5000);
  EXPECT_EQ(prober.RunDue(), 0);
  EXPECT_EQ(script.liveness_calls.load(), calls);
}

TEST(Prober, ForgetsRunsNoLongerGivenAndIgnoresRunsWithoutProbes) {
  ManualClock clock;
  ProberScript script;
  Prober prober(clock, script.Fn());
  ProbeTarget bare;
  bare.run_id = "plain";
  prober.SetTargets({ProberTarget("r1", false), bare});
  script.readiness_ok["r1"] = true;
  prober.RunDue();
  EXPECT_EQ(prober.Ready("r1"), std::optional<bool>(true));
  EXPECT_EQ(prober.Ready("plain"), std::nullopt);
  prober.SetTargets({});
  EXPECT_EQ(prober.Ready("r1"), std::nullopt);
  EXPECT_EQ(prober.RunDue(), 0);
}

// A loopback listener answering each connection with `answer` (nothing:
// accept and stay silent).
class ProberTestServer {
 public:
  explicit ProberTestServer(std::string answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(fd_, 8);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[1024];
        [[maybe_unused]] ssize_t r = ::recv(c, buf, sizeof buf, 0);
        if (!answer_.empty()) {
          [[maybe_unused]] ssize_t w = ::send(c, answer_.data(), answer_.size(), MSG_NOSIGNAL);
          ::close(c);
        } else {
          held_.push_back(c);
        }
      }
    });
  }
  ~ProberTestServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    for (int c : held_) ::close(c);
  }
  std::uint32_t port() const { return port_; }

 private:
  std::string answer_;
  int fd_ = -1;
  std::uint32_t port_ = 0;
  std::vector<int> held_;
  std::thread thread_;
};

TEST(RunProbe, HttpPassesOn2xxAnd3xxAndFailsOtherwise) {
  ProberTestServer ok("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n");
  ProberTestServer loading("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
  ProbeTarget t;
  t.node_port = ok.port();
  ProbeResult r = RunProbe(ProberHttpProbe(), t, BERTH_SHIM_PATH);
  EXPECT_TRUE(r.ok) << r.detail;
  EXPECT_EQ(r.detail, "GET /health: HTTP 204");
  t.node_port = loading.port();
  r = RunProbe(ProberHttpProbe(), t, BERTH_SHIM_PATH);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.detail, "GET /health: HTTP 503");
}

TEST(RunProbe, ASilentServerTimesOutWithinTheProbeTimeout) {
  ProberTestServer silent("");
  ProbeTarget t;
  t.node_port = silent.port();
  const auto begin = std::chrono::steady_clock::now();
  ProbeResult r = RunProbe(ProberHttpProbe(), t, BERTH_SHIM_PATH);
  const auto took = std::chrono::steady_clock::now() - begin;
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.detail.find("timed out after"), std::string::npos) << r.detail;
  EXPECT_LT(took, std::chrono::seconds(5));  // bounded: 300 ms plus scheduling
}

TEST(RunProbe, TcpConnectsToTheReplicasNodePortWhenItNamesTheServicePort) {
  ProberTestServer up("x");
  model::Probe p;
  p.kind = model::ProbeKind::kTcp;
  p.tcp_port = 8000;  // the spec's port: the replica's node port is meant
  p.timeout_ms = 300;
  ProbeTarget t;
  t.service_port = 8000;
  t.node_port = up.port();
  EXPECT_TRUE(RunProbe(p, t, BERTH_SHIM_PATH).ok);
  // A closed port: refused at once.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  t.node_port = ntohs(addr.sin_port);
  ::close(fd);
  ProbeResult r = RunProbe(p, t, BERTH_SHIM_PATH);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.detail.find("refused"), std::string::npos) << r.detail;
}

// A command probe runs as the replica runs: in its working directory with
// its environment (PORT included), through berth-shim --probe.
TEST(RunProbe, ACommandRunsInTheReplicasEnvironmentAndPassesOnExitZero) {
  TempDir dir;
  SystemClock clock;
  RunnerOptions o;
  o.data_dir = dir.path();
  o.shim_path = BERTH_SHIM_PATH;
  o.node_name = "node-1";
  Runner runner(o, clock);
  StartOrder order;
  order.run_id = "7.0.0";
  order.job_id = 7;
  order.command = {"sleep", "30"};
  order.env["MODEL_DIR"] = "/models/coder";
  order.service_port = 8000;
  order.grace_ms = 100;
  auto state = runner.Start(order);
  ASSERT_TRUE(state.has_value()) << state.error().message;
  ASSERT_TRUE(WaitFor([&] {
    runner.Poll();
    auto s = runner.Get("7.0.0");
    return s && s->phase == RunPhase::kRunning;
  }));
  ProbeTarget t;
  t.run_id = "7.0.0";
  t.run_dir = runner.RunDir("7.0.0");
  t.node_port = runner.Get("7.0.0")->port;
  model::Probe p;
  p.kind = model::ProbeKind::kCommand;
  p.timeout_ms = 5000;
  p.command = {"sh", "-c",
               "test \"$MODEL_DIR\" = /models/coder && test \"$PORT\" = " +
                   std::to_string(t.node_port) + " && test \"$(basename \"$(pwd)\")\" = 7.0.0"};
  ProbeResult r = RunProbe(p, t, BERTH_SHIM_PATH);
  EXPECT_TRUE(r.ok) << r.detail;
  p.command = {"sh", "-c", "echo model not loaded; exit 3"};
  r = RunProbe(p, t, BERTH_SHIM_PATH);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.detail, "sh: exit 3 (model not loaded)");
  p.command = {"sleep", "10"};
  p.timeout_ms = 200;
  r = RunProbe(p, t, BERTH_SHIM_PATH);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.detail.find("timed out"), std::string::npos) << r.detail;
  ASSERT_TRUE(runner.Stop("7.0.0", "cancelled", 100).has_value());
  ASSERT_TRUE(WaitFor([&] {
    runner.Poll();
    auto s = runner.Get("7.0.0");
    return s && s->phase == RunPhase::kExited;
  }));
}

}  // namespace
}  // namespace berth::agent
