// Berth across hosts, tested as hosts (issue 20): PostgreSQL, two berthd,
// an agent and the test's client each on a host of their own (a network
// namespace with a veth link to one bridge, tests/support/netns.h), talking
// over the fabric's addresses with TLS as they would across a rack, and
// partitions made by cutting the link between two hosts (packets dropped
// both ways, no reset):
//
// - leader <-> database: the leader steps down (exits 75) within its lease,
//   the standby takes over, the agent follows it, and what the old leader
//   acknowledged is all there;
// - standby <-> database: the standby never leads while cut off, not even
//   when the leader dies; the fleet keeps running its jobs without a
//   leader, `berth status` says why the standby cannot take over, and the
//   standby takes over once it sees the database again;
// - agent <-> leader: the node goes NotReady, its job runs on, and when
//   the link heals the agent reconciles it: finished, started once.
//
// Skipped, saying why, where the tests cannot make namespaces (not root,
// no iproute2) or PostgreSQL's server binaries are missing.
#include "support/netns.h"

#include <signal.h>

#include <chrono>
#include <iostream>
#include <optional>
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// What agents check every berthd's certificate against (each berthd has it
// as a SAN besides its own address), as a DNS name for the control plane.
constexpr const char* kControlName = "control.berth.test";

class NetnsTest : public IntegrationTest {
 protected:
  void SetUp() override {
    if (auto why = tests::NetFabric::Unavailable()) GTEST_SKIP() << *why;
    if (auto why = tests::PgServerUnavailable()) GTEST_SKIP() << *why;
    auto fabric = tests::NetFabric::Make();
    ASSERT_TRUE(fabric.has_value()) << fabric.error();
    fabric_.emplace(std::move(*fabric));
    for (const char* host : {"db", "cp1", "cp2", "node1", "client"}) {
      auto ip = fabric_->AddHost(host);
      ASSERT_TRUE(ip.has_value()) << ip.error();
    }
    {
      tests::ScopedNetns on_db(fabric_->netns("db"));
      auto server = tests::PgServer::Start(
          {.listen = fabric_->ip("db"), .trust_network = fabric_->network()});
      ASSERT_TRUE(server.has_value()) << server.error();
      db_ = std::move(*server);
    }
    // The test is the client machine from here on.
    on_client_.emplace(fabric_->netns("client"));
  }

  void TearDown() override {
    IntegrationTest::TearDown();
    on_client_.reset();
  }

  // berthd on `host`, on the database, with TLS.
  Berthd& Member(const std::string& host) {
    BerthdOptions o =
        ControlPlaneOnly({"--store", db_->conninfo("postgres") + " connect_timeout=2",
                          "--leader-ttl", "3s", "--tls-san", fabric_->ip(host), "--tls-san",
                          kControlName, "--lease", "3s", "--heartbeat", "500ms"});
    o.name = host;
    o.tls = true;
    o.host = fabric_->ip(host);
    o.netns = fabric_->netns(host);
    return NewBerthd(o);
  }

  // The second member shares the first one's CA and job-token key, as the
  // control-plane hosts of one installation do (docs/operations.md).
  void ShareCredentials(const Berthd& from, const Berthd& to) {
    fs::create_directories(to.data_dir() / "tls");
    fs::permissions(to.data_dir(), fs::perms::owner_all);
    fs::permissions(to.data_dir() / "tls", fs::perms::owner_all);
    for (const char* f : {"ca.pem", "ca-key.pem"}) {
      fs::copy_file(from.data_dir() / "tls" / f, to.data_dir() / "tls" / f);
    }
    fs::copy_file(from.data_dir() / "job-token.key", to.data_dir() / "job-token.key");
  }

  // cp1 leads; cp2, with cp1's CA, job-token key and admin token, stands by.
  void StartControlPlane() {
    cp1_ = &Member("cp1");
    ASSERT_TRUE(cp1_->Start(30s)) << cp1_->log();
    cp2_ = &Member("cp2");
    ShareCredentials(*cp1_, *cp2_);
    ASSERT_TRUE(cp2_->StartStandby(30s)) << cp2_->log();
    cp2_->set_token(cp1_->http().token());
  }

  // A berth-agent on host node1 that knows every member.
  void StartNodeAgent(const Berthd& issuer, const std::vector<const Berthd*>& members) {
    std::string servers;
    for (const Berthd* m : members) {
      servers += (servers.empty() ? "" : ",") + m->agent_address();
    }
    auto cluster = WriteCluster("node1", 4);
    tests::ScopedNetns on_node(fabric_->netns("node1"));
    NewAgent(issuer, dir_ / "agent", cluster, "agent.log", {},
             {"--server", servers, "--tls-server-name", kControlName, "--fence-grace", "30s"});
  }

  // `berth status -o json` from the client host, given both members.
  CommandResult Status(const Berthd& a, const Berthd& b) {
    return RunCommand(
        BinDir() / "berth",
        {"--server", a.url() + "," + b.url(), "--ca", a.ca_file().string(), "status", "-o", "json"},
        dir_.path());
  }

  std::optional<tests::NetFabric> fabric_;
  Berthd* cp1_ = nullptr;
  Berthd* cp2_ = nullptr;
  std::unique_ptr<tests::PgServer> db_;
  std::optional<tests::ScopedNetns> on_client_;
};

std::int64_t Since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

TEST_F(NetnsTest, ALeaderCutFromTheDatabaseStepsDownAndTheStandbyTakesOver) {
  ASSERT_NO_FATAL_FAILURE(StartControlPlane());
  Berthd& cp1 = *cp1_;
  Berthd& cp2 = *cp2_;
  // Reached at its fabric address, over TLS from another host.
  Reply health = cp2.http().Get("/healthz");
  EXPECT_EQ(health.body.value("role", ""), "standby") << health.text;
  EXPECT_NE(health.body.value("leader", "").find(cp1.url()), std::string::npos) << health.text;

  StartNodeAgent(cp1, {&cp1, &cp2});
  ASSERT_TRUE(cp1.WaitForNode("Ready", 30s, "node1")) << cp1.Nodes().dump(2);
  const std::int64_t running = cp1.Submit(JobSpecJson("survivor", Sh("sleep 12"), 1));
  ASSERT_GT(running, 0);
  ASSERT_TRUE(cp1.WaitForState(running, "Running", 30s)) << cp1.JobState(running);
  const auto pid = cp1.Job(running).at("placement").at(0).at("pid").get<pid_t>();
  const std::int64_t acked = cp1.Submit(JobSpecJson("acknowledged", Sh("exit 0"), 1));
  ASSERT_GT(acked, 0);

  // The leader's host loses the database; the leader still serves its
  // clients and its agent, but must not lead past its lease.
  const auto cut = Clock::now();
  ASSERT_TRUE(fabric_->Cut("cp1", "db").has_value());
  ASSERT_TRUE(WaitFor([&] { return !cp1.running(); }, 15s)) << cp1.log();
  const auto stepped_down_ms = Since(cut);
  EXPECT_NE(cp1.log().find("leadership lost"), std::string::npos) << cp1.log();
  ASSERT_TRUE(cp2.WaitUntilReady(20s)) << cp2.log();
  const auto ready_ms = Since(cut);
  EXPECT_EQ(cp2.http().Get("/healthz").body.value("term", 0), 2);

  // The agent follows the new leader; nothing acknowledged is lost and
  // the running job ran on, started once.
  ASSERT_TRUE(cp2.WaitForNode("Ready", 30s, "node1")) << cp2.Nodes().dump(2);
  EXPECT_TRUE(ProcessAlive(pid)) << "the job died with its leader's database link";
  const std::int64_t after = cp2.Submit(JobSpecJson("after", Sh("exit 0"), 1));
  ASSERT_GT(after, 0);
  ASSERT_TRUE(cp2.WaitForState(after, "Succeeded", 30s)) << cp2.JobState(after);
  const auto placed_ms = Since(cut);
  ASSERT_TRUE(cp2.WaitForState(acked, "Succeeded", 30s)) << cp2.JobState(acked);
  ASSERT_TRUE(cp2.WaitForTerminal(running, 30s)) << cp2.JobState(running);
  json job = cp2.Job(running);
  EXPECT_EQ(job.at("state"), "Succeeded") << job.dump(2);
  EXPECT_EQ(CountEvents(job, "Started"), 1) << job.dump(2);
  std::cout << "[ figures ] leader cut from the database (--leader-ttl 3s): stepped down "
            << stepped_down_ms << " ms, standby serving " << ready_ms
            << " ms, a new job placed and done " << placed_ms << " ms\n";

  // Healed, the old leader comes back as the new one's standby.
  ASSERT_TRUE(fabric_->Heal("cp1", "db").has_value());
  ASSERT_TRUE(cp1.StartStandby(30s)) << cp1.log();
  health = cp1.http().Get("/healthz");
  EXPECT_NE(health.body.value("leader", "").find(cp2.url()), std::string::npos) << health.text;
}

TEST_F(NetnsTest, AStandbyCutFromTheDatabaseNeverLeadsUntilItSeesItAgain) {
  ASSERT_NO_FATAL_FAILURE(StartControlPlane());
  Berthd& cp1 = *cp1_;
  Berthd& cp2 = *cp2_;
  StartNodeAgent(cp1, {&cp1, &cp2});
  ASSERT_TRUE(cp1.WaitForNode("Ready", 30s, "node1")) << cp1.Nodes().dump(2);

  // Cut off, the standby disturbs nothing: the leader keeps its term and
  // schedules.
  ASSERT_TRUE(fabric_->Cut("cp2", "db").has_value());
  const std::int64_t during = cp1.Submit(JobSpecJson("during", Sh("exit 0"), 1));
  ASSERT_GT(during, 0);
  ASSERT_TRUE(cp1.WaitForState(during, "Succeeded", 30s)) << cp1.JobState(during);
  std::this_thread::sleep_for(7s);  // two leases and more
  EXPECT_EQ(cp1.http().Get("/healthz").body.value("term", 0), 1);
  EXPECT_EQ(cp2.http().Get("/readyz").status, 503);
  // berth status shows the operator why this standby could not take over:
  // its view of the lease is stale and the database does not answer it.
  CommandResult status = Status(cp1, cp2);
  ASSERT_EQ(status.exit_code, 0) << status.out << status.err;
  json view = json::parse(status.out, nullptr, false);
  ASSERT_TRUE(view.is_object()) << status.out;
  EXPECT_EQ(view.value("leader", ""), cp1.url()) << status.out;
  ASSERT_EQ(view["servers"].size(), 2U) << status.out;
  EXPECT_EQ(view["servers"][1].value("role", ""), "standby") << status.out;
  EXPECT_GT(view["servers"][1].value("lease_age_ms", 0), 3000) << status.out;
  EXPECT_TRUE(view["servers"][1].contains("database_error")) << status.out;
  EXPECT_LT(view["servers"][0].value("lease_age_ms", 99'999), 3000) << status.out;
  // /healthz is anyone's: it says the database does not answer, not where
  // the database is or what it said.
  const Http anonymous(cp2.api_port(), 10s, cp2.ca_file(), fabric_->ip("cp2"));
  Reply health = anonymous.Get("/healthz");
  ASSERT_EQ(health.status, 200) << health.text;
  const std::string failed = health.body.value("database_error", "");
  EXPECT_TRUE(failed == "cannot read the lease" || failed == "cannot connect to the database")
      << health.text;
  EXPECT_EQ(health.text.find(fabric_->ip("db")), std::string::npos) << health.text;
  EXPECT_EQ(health.text.find(std::to_string(db_->port())), std::string::npos) << health.text;

  // The leader dies while the standby is cut off: nobody leads, and the
  // node's running job runs on without a control plane.
  const std::int64_t running = cp1.Submit(JobSpecJson("runs-on", Sh("sleep 14"), 1));
  ASSERT_GT(running, 0);
  ASSERT_TRUE(cp1.WaitForState(running, "Running", 30s)) << cp1.JobState(running);
  const auto pid = cp1.Job(running).at("placement").at(0).at("pid").get<pid_t>();
  const std::int64_t acked = cp1.Submit(JobSpecJson("acknowledged", Sh("exit 0"), 1));
  ASSERT_GT(acked, 0);
  cp1.Kill();
  std::this_thread::sleep_for(7s);
  EXPECT_TRUE(cp2.running()) << cp2.log();
  EXPECT_EQ(cp2.http().Get("/readyz").status, 503) << "a standby led without its database";
  status = Status(cp1, cp2);
  EXPECT_NE(status.exit_code, 0) << status.out << status.err;
  EXPECT_NE(status.err.find("no berthd of the 2 given leads"), std::string::npos) << status.err;
  EXPECT_TRUE(ProcessAlive(pid)) << "the job died without a control plane";

  // It sees the database again: it takes over, with everything acknowledged.
  const auto healed = Clock::now();
  ASSERT_TRUE(fabric_->Heal("cp2", "db").has_value());
  ASSERT_TRUE(cp2.WaitUntilReady(30s)) << cp2.log();
  std::cout << "[ figures ] standby healed to serving: " << Since(healed) << " ms\n";
  EXPECT_EQ(cp2.http().Get("/healthz").body.value("term", 0), 2);
  ASSERT_TRUE(cp2.WaitForState(acked, "Succeeded", 40s)) << cp2.JobState(acked);
  ASSERT_TRUE(cp2.WaitForTerminal(running, 30s)) << cp2.JobState(running);
  json job = cp2.Job(running);
  EXPECT_EQ(job.at("state"), "Succeeded") << job.dump(2);
  EXPECT_EQ(CountEvents(job, "Started"), 1) << job.dump(2);
  EXPECT_EQ(cp2.JobState(during), "Succeeded");
}

TEST_F(NetnsTest, AnAgentCutFromTheLeaderRunsOnAndIsReconciledWhenHealed) {
  Berthd& cp1 = Member("cp1");
  ASSERT_TRUE(cp1.Start(30s)) << cp1.log();
  StartNodeAgent(cp1, {&cp1});
  ASSERT_TRUE(cp1.WaitForNode("Ready", 30s, "node1")) << cp1.Nodes().dump(2);
  const std::int64_t running = cp1.Submit(JobSpecJson("cut-off", Sh("sleep 10"), 1));
  ASSERT_GT(running, 0);
  ASSERT_TRUE(cp1.WaitForState(running, "Running", 30s)) << cp1.JobState(running);
  const auto pid = cp1.Job(running).at("placement").at(0).at("pid").get<pid_t>();

  const auto cut = Clock::now();
  ASSERT_TRUE(fabric_->Cut("node1", "cp1").has_value());
  // The node's lease (3 s) lapses: NotReady; the agent is far from its
  // fence grace (30 s), so the job runs on.
  ASSERT_TRUE(cp1.WaitForNode("NotReady", 15s, "node1")) << cp1.Nodes().dump(2);
  std::cout << "[ figures ] agent cut from the leader to NotReady: " << Since(cut) << " ms\n";
  EXPECT_TRUE(ProcessAlive(pid)) << "the job died with its node's link";
  // Nothing new is placed on a node the leader cannot hear.
  const std::int64_t waiting = cp1.Submit(JobSpecJson("waits", Sh("exit 0"), 1));
  ASSERT_GT(waiting, 0);
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(cp1.JobState(waiting), "Pending");

  ASSERT_TRUE(fabric_->Heal("node1", "cp1").has_value());
  const auto healed = Clock::now();
  ASSERT_TRUE(cp1.WaitForNode("Ready", 60s, "node1")) << cp1.Nodes().dump(2);
  std::cout << "[ figures ] link healed to Ready again: " << Since(healed) << " ms\n";
  ASSERT_TRUE(cp1.WaitForState(waiting, "Succeeded", 30s)) << cp1.JobState(waiting);
  ASSERT_TRUE(cp1.WaitForTerminal(running, 30s)) << cp1.JobState(running);
  json job = cp1.Job(running);
  EXPECT_EQ(job.at("state"), "Succeeded") << job.dump(2);
  EXPECT_EQ(CountEvents(job, "Started"), 1) << job.dump(2);
}

}  // namespace
}  // namespace berth::it
