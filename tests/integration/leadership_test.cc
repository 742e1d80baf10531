// Several berthd on one PostgreSQL database (issue 20, docs/operations.md
// "High availability"): one leads, the others stand by. A standby answers
// /healthz with who leads and turns API requests away with 503; after a
// kill -9 of the leader it takes the lease, loads the state and schedules,
// and a berth-agent given every control-plane address follows it, its
// running job untouched and started once. A leader paused past its lease
// (SIGSTOP, then SIGCONT) finds itself deposed, commits nothing and exits.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

class LeadershipTest : public PostgresIntegrationTest {
 protected:
  // A berthd of the control plane, with its own data dir and log.
  BerthdOptions Member(const std::string& name) {
    BerthdOptions o = ControlPlaneOnly({"--store", server_->conninfo(), "--leader-ttl", "4s"});
    o.name = name;
    return o;
  }
};

TEST_F(LeadershipTest, AStandbyTakesOverAfterAKillAndTheAgentFollowsIt) {
  Berthd& a = NewBerthd(Member("berthd-a"));
  ASSERT_TRUE(a.Start()) << a.log();
  Berthd& b = NewBerthd(Member("berthd-b"));
  ASSERT_TRUE(b.StartStandby()) << b.log();
  b.set_token(a.http().token());
  a.set_token(a.http().token());  // the CLI's environment: a's token

  // The standby says who leads, and serves nothing else.
  Reply health = b.http().Get("/healthz");
  ASSERT_EQ(health.status, 200) << health.text;
  EXPECT_EQ(health.body.value("role", ""), "standby") << health.text;
  EXPECT_NE(health.body.value("leader", "").find(a.url()), std::string::npos) << health.text;
  EXPECT_EQ(health.body.value("term", 0), 1) << health.text;
  EXPECT_EQ(b.http().Get("/readyz").status, 503);
  Reply refused = b.http().Get("/v1/jobs");
  EXPECT_EQ(refused.status, 503) << refused.text;
  EXPECT_EQ(refused.headers["retry-after"], "1");
  EXPECT_NE(refused.text.find("standby"), std::string::npos) << refused.text;
  // So does the CLI given the standby's address first.
  CommandResult via_standby =
      RunCommand(BinDir() / "berth", {"--server", b.url() + "," + a.url(), "jobs"}, dir_.path());
  EXPECT_EQ(via_standby.exit_code, 0) << via_standby.out << via_standby.err;
  Reply leader = a.http().Get("/healthz");
  EXPECT_EQ(leader.body.value("role", ""), "leader") << leader.text;
  EXPECT_EQ(leader.body.value("term", 0), 1) << leader.text;
  // berth status asks each of them: who leads, and how current the
  // standby's view of the lease is.
  CommandResult status =
      RunCommand(BinDir() / "berth", {"--server", b.url() + "," + a.url(), "status"}, dir_.path());
  EXPECT_EQ(status.exit_code, 0) << status.out << status.err;
  EXPECT_NE(status.out.find("leader: " + a.url() + " at term 1"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("ready to take over"), std::string::npos) << status.out;

  // One agent, given both berthd's agent addresses (the standby's first:
  // it is not listening).
  auto cluster = WriteCluster("ha-node");
  NewAgent(a, dir_ / "agent", cluster, "agent.log", {},
           {"--server", b.agent_address() + "," + a.agent_address()});
  ASSERT_TRUE(a.WaitForNode("Ready", 20s, "ha-node")) << a.Nodes().dump(2);
  const std::int64_t running = a.Submit(JobSpecJson("survivor", Sh("sleep 20"), 1));
  ASSERT_GT(running, 0);
  ASSERT_TRUE(a.WaitForState(running, "Running", 30s)) << a.JobState(running);
  const auto pid = a.Job(running).at("placement").at(0).at("pid").get<pid_t>();
  // Acknowledged just before the kill: placed by the old leader or the new.
  const std::int64_t queued = a.Submit(JobSpecJson("acknowledged", Sh("exit 0"), 1));
  ASSERT_GT(queued, 0);

  const auto killed = Clock::now();
  a.Kill();
  EXPECT_TRUE(ProcessAlive(pid)) << "the job died with the leader";
  ASSERT_TRUE(b.WaitUntilReady(20s)) << b.log();
  const auto ready = Clock::now();
  // The CLI given both addresses finds the new leader (the old one's is
  // refused) and stays with it.
  CommandResult listed = RunCommand(
      BinDir() / "berth", {"--server", a.url() + "," + b.url(), "jobs", "-o", "json"}, dir_.path());
  EXPECT_EQ(listed.exit_code, 0) << listed.out << listed.err;
  EXPECT_NE(listed.out.find("survivor"), std::string::npos) << listed.out;
  const std::int64_t after = b.Submit(JobSpecJson("after", Sh("exit 0"), 1));
  ASSERT_GT(after, 0);
  ASSERT_TRUE(b.WaitForState(after, "Succeeded", 30s)) << b.JobState(after);
  const auto placed = Clock::now();
  const auto ms = [&](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t - killed).count();
  };
  std::cout << "[ figures ] kill -9 of the leader to: standby ready " << ms(ready)
            << " ms, a new job placed and done " << ms(placed) << " ms (--leader-ttl 3s)\n";

  // What the old leader acknowledged is there; the running job ran on,
  // started once, and ends on the new leader; the last one acknowledged
  // runs too.
  EXPECT_TRUE(ProcessAlive(pid)) << "the job died during the takeover";
  ASSERT_TRUE(b.WaitForTerminal(running, 30s)) << b.JobState(running);
  json job = b.Job(running);
  EXPECT_EQ(job.at("state"), "Succeeded") << job.dump(2);
  EXPECT_EQ(CountEvents(job, "Started"), 1) << job.dump(2);
  ASSERT_TRUE(b.WaitForState(queued, "Succeeded", 30s)) << b.JobState(queued);
  EXPECT_EQ(b.Nodes().size(), 1U) << b.Nodes().dump(2);
  health = b.http().Get("/healthz");
  EXPECT_EQ(health.body.value("role", ""), "leader") << health.text;
  EXPECT_EQ(health.body.value("term", 0), 2) << health.text;
  Reply metrics = b.http().Get("/metrics");
  EXPECT_NE(metrics.text.find("berth_leader{role=\"leader\"} 1"), std::string::npos)
      << metrics.text;
  EXPECT_NE(metrics.text.find("berth_leader_term 2"), std::string::npos) << metrics.text;

  // The old leader comes back as a standby of the new one.
  ASSERT_TRUE(a.StartStandby()) << a.log();
  health = a.http().Get("/healthz");
  EXPECT_NE(health.body.value("leader", "").find(b.url()), std::string::npos) << health.text;
  CommandResult r = Cli(b, {"audit", "verify"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;

  // A clean shutdown gives the lease up instead of letting it lapse.
  b.Stop();
  EXPECT_NE(b.log().find("gave the lease of term 2 up"), std::string::npos) << b.log();
  ASSERT_TRUE(a.WaitUntilReady(20s)) << a.log();
  EXPECT_EQ(a.http().Get("/healthz").body.value("term", 0), 3);
}

TEST_F(LeadershipTest, ALeaderPausedPastItsLeaseIsDeposedAndExitsWithoutWriting) {
  Berthd& a = NewBerthd(Member("berthd-a"));
  ASSERT_TRUE(a.Start()) << a.log();
  Berthd& b = NewBerthd(Member("berthd-b"));
  ASSERT_TRUE(b.StartStandby()) << b.log();
  b.set_token(a.http().token());
  a.set_token(a.http().token());
  const std::int64_t before = a.Submit(JobSpecJson("before", Sh("exit 0"), 0));
  ASSERT_GT(before, 0);

  const pid_t paused = a.pid();
  ASSERT_EQ(::kill(paused, SIGSTOP), 0);
  ASSERT_TRUE(b.WaitUntilReady(20s)) << b.log();
  const std::int64_t on_b = b.Submit(JobSpecJson("on-b", Sh("exit 0"), 0));
  ASSERT_GT(on_b, 0);
  ASSERT_EQ(::kill(paused, SIGCONT), 0);

  // Woken, a still believes it leads until its next renewal: whatever it
  // tries to write is refused by the database, and it exits.
  Reply late = a.http().Post("/v1/jobs", JobSpecJson("late", Sh("exit 0"), 0));
  EXPECT_FALSE(late.status >= 200 && late.status < 300) << late.status << " " << late.text;
  EXPECT_TRUE(WaitFor([&] { return !a.running(); }, 10s)) << a.log();
  // It steps down by whichever it meets first: its renewal refused, or a
  // store session that PostgreSQL ended while it was paused inside a
  // transaction (idle_in_transaction_session_timeout).
  const std::string log = a.log();
  EXPECT_TRUE(log.find("leadership lost") != std::string::npos ||
              log.find("the database session was lost") != std::string::npos)
      << log;
  json jobs = b.Jobs();
  std::vector<std::string> names;
  for (const auto& j : jobs) names.push_back(j.value("name", ""));
  std::ranges::sort(names);
  EXPECT_EQ(names, (std::vector<std::string>{"before", "on-b"})) << jobs.dump(2);
  EXPECT_EQ(b.http().Get("/healthz").body.value("term", 0), 2);
}

}  // namespace
}  // namespace berth::it
