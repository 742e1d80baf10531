// TLS on the REST API and mutual TLS for agents, against real processes: the
// API answers over HTTPS to clients that trust berthd's CA and to no one
// else; plain HTTP is refused off loopback; an agent registers only as the
// node its certificate names, never acts for another node, and an agent
// with a foreign or no certificate never registers at all.
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>

#include "control/pki.h"
#include "integration/fixture.h"

namespace berth::it {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class TlsTest : public IntegrationTest {
 protected:
  static BerthdOptions Tls(BerthdOptions options) {
    options.tls = true;
    return options;
  }

  // A CA berthd has never seen, with a certificate for `node`, in `out`.
  void WriteForeignCredentials(const std::string& node, const fs::path& out) const {
    auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    auto ca = server::pki::CreateCa("someone else's CA", now);
    ASSERT_TRUE(ca);
    auto creds = server::pki::IssueNodeCert(*ca, node, now);
    ASSERT_TRUE(creds);
    fs::create_directories(out);
    WriteFile(out / "ca.pem", ca->cert_pem);
    WriteFile(out / (node + ".pem"), creds->cert_pem);
    WriteFile(out / (node + "-key.pem"), creds->key_pem);
  }

  Process& AgentWith(const Berthd& berthd, const std::string& node, const fs::path& data_dir,
                     std::vector<std::string> tls_args, const std::string& log_name) {
    auto cluster = dir_ / ("cluster-" + node + ".yaml");
    fs::copy_file(WriteCluster(node, 2), cluster, fs::copy_options::overwrite_existing);
    std::vector<std::string> args{"--server",        berthd.agent_address(), "--data-dir",
                                  data_dir.string(), "--simulate",           cluster.string()};
    args.insert(args.end(), tls_args.begin(), tls_args.end());
    agents_.push_back(std::make_unique<Process>(BinDir() / "berth-agent", args, dir_ / log_name));
    return *agents_.back();
  }

  // True if `node` shows up in the node list at any moment within `window`.
  static bool EverAppears(const Berthd& berthd, const std::string& node, Ms window) {
    return WaitFor(
        [&] {
          auto nodes = berthd.Nodes();
          if (!nodes.is_array()) return false;
          for (const auto& n : nodes) {
            if (n.value("name", "") == node) return true;
          }
          return false;
        },
        window, 100ms);
  }
};

unsigned Mode(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 0777;
}

TEST_F(TlsTest, TheApiAnswersOverHttpsToClientsThatTrustItsCaOnly) {
  Berthd& berthd = NewBerthd(Tls(AllInOne()));
  // Start() polls /healthz over HTTPS, trusting <data-dir>/tls/ca.pem.
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const fs::path tls = berthd.data_dir() / "tls";
  EXPECT_EQ(Mode(tls / "ca-key.pem"), 0600U);
  EXPECT_EQ(Mode(tls / "server-key.pem"), 0600U);
  EXPECT_EQ(berthd.http().Get("/healthz").status, 200);
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s)) << berthd.Nodes().dump(2);

  // A client trusting another CA gets no answer: verification fails.
  WriteForeignCredentials("x", dir_ / "foreign");
  Http foreign(berthd.api_port(), 5s, dir_ / "foreign" / "ca.pem");
  EXPECT_EQ(foreign.Get("/healthz").status, 0);
  // Plain HTTP on the HTTPS port gets no answer either.
  Http plain(berthd.api_port(), 5s);
  EXPECT_NE(plain.Get("/healthz").status, 200);

  // The CLI with --ca (the fixture passes it) ...
  auto ok = Cli(berthd, {"nodes"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("Ready"), std::string::npos) << ok.out;
  // ... with BERTH_CA ...
  Process with_env(BinDir() / "berth", {"--server", berthd.url(), "nodes"}, dir_ / "env.out",
                   {{"BERTH_CA", berthd.ca_file().string()}});
  EXPECT_EQ(with_env.Wait(30s), 0) << ReadFile(dir_ / "env.out");
  // ... and without a CA, told how to trust berthd's.
  auto bad = RunCommand(BinDir() / "berth", {"--server", berthd.url(), "nodes"}, dir_.path());
  EXPECT_EQ(bad.exit_code, 3) << bad.out;
  EXPECT_NE(bad.err.find("does not verify"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("--ca <data-dir>/tls/ca.pem"), std::string::npos) << bad.err;

  // A restart keeps the CA: clients and node certificates stay valid.
  const std::string ca = ReadFile(berthd.ca_file());
  berthd.Stop();
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  EXPECT_EQ(ReadFile(berthd.ca_file()), ca);
}

TEST_F(TlsTest, PlainHttpOrPlainAgentsOffLoopbackAreRefusedAndNothingStarts) {
  const fs::path data_dir = dir_ / "refused";
  const int port = FreePort();
  const std::vector<std::vector<std::string>> cases{
      {"--listen", fmt::format("0.0.0.0:{}", port), "--plain-http"},
      {"--agent-listen", fmt::format("0.0.0.0:{}", FreePort()), "--plain-agents"}};
  for (const auto& flags : cases) {
    std::vector<std::string> args{"--data-dir", data_dir.string()};
    args.insert(args.end(), flags.begin(), flags.end());
    auto r = RunCommand(BinDir() / "berthd", args, dir_.path());
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    const std::string said = r.out + r.err;
    EXPECT_NE(said.find(flags.back() + " is allowed only with a loopback"), std::string::npos)
        << said;
    EXPECT_FALSE(fs::exists(data_dir)) << "a refused start must not create state";
  }
  EXPECT_EQ(Http(port, 1s).Get("/healthz").status, 0);
}

TEST_F(TlsTest, AnAgentWithItsNodesCertificateRegistersAndRunsAJob) {
  Berthd& berthd = NewBerthd(Tls(ControlPlaneOnly()));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  // The harness issues the agent a certificate for node "a" (berthd cert node).
  NewAgent(berthd, dir_ / "agent-a", WriteCluster("a", 2), "agent-a.log");
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s, "a")) << berthd.Nodes().dump(2);
  EXPECT_EQ(Mode(dir_ / "agent-a-certs" / "a-key.pem"), 0600U);

  std::string error;
  auto id = berthd.Submit(JobSpecJson("hello", Sh("echo over-mtls"), 1), &error);
  ASSERT_NE(id, 0) << error;
  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s)) << berthd.Job(id).dump(2);
  json job = berthd.Job(id);
  EXPECT_EQ(job["state"], "Succeeded") << job.dump(2);
  ASSERT_FALSE(job["placement"].empty()) << job.dump(2);
  EXPECT_EQ(job["placement"][0]["node"], "a");
  // Its log came back over the mutual-TLS stream.
  EXPECT_TRUE(WaitFor(
      [&] {
        auto logs = Cli(berthd, {"logs", std::to_string(id)});
        return logs.out.find("over-mtls") != std::string::npos;
      },
      10s));
}

TEST_F(TlsTest, ACertificateForNodeACannotRegisterNodeB) {
  Berthd& berthd = NewBerthd(Tls(ControlPlaneOnly()));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const fs::path certs = dir_ / "certs-a";
  ASSERT_TRUE(IssueNodeCert(dir_, berthd, "a", certs));
  Process& agent =
      AgentWith(berthd, "b", dir_ / "agent-b",
                {"--tls-ca", (certs / "ca.pem").string(), "--tls-cert", (certs / "a.pem").string(),
                 "--tls-key", (certs / "a-key.pem").string()},
                "agent-b.log");
  EXPECT_TRUE(WaitFor(
      [&] {
        return berthd.log().find("its certificate is for node 'a' but it registered as 'b'") !=
               std::string::npos;
      },
      15s))
      << berthd.log();
  EXPECT_TRUE(WaitFor(
      [&] {
        return ReadFile(dir_ / "agent-b.log").find("cannot register node 'b'") != std::string::npos;
      },
      10s))
      << ReadFile(dir_ / "agent-b.log");
  EXPECT_FALSE(EverAppears(berthd, "b", 3s)) << berthd.Nodes().dump(2);
  EXPECT_FALSE(EverAppears(berthd, "a", 1s)) << "the stolen name must not register either";
  EXPECT_TRUE(agent.running()) << "the agent keeps retrying; it is refused, not crashed";
}

TEST_F(TlsTest, ANodeCannotReportOnAnotherNodesRuns) {
  Berthd& berthd = NewBerthd(Tls(ControlPlaneOnly()));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  Process& a = NewAgent(berthd, dir_ / "agent-a", WriteCluster("a", 2), "agent-a.log");
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s, "a")) << berthd.Nodes().dump(2);
  std::string error;
  auto id = berthd.Submit(JobSpecJson("long", Sh("sleep 120"), 1), &error);
  ASSERT_NE(id, 0) << error;
  ASSERT_TRUE(berthd.WaitForState(id, "Running", 20s)) << berthd.Job(id).dump(2);
  a.Kill(SIGKILL);
  (void)a.Wait(10s);

  // Node b's agent, started on a's run directory, recovers a's run and
  // reports it at registration: refused, and the run stays a's.
  const fs::path certs = dir_ / "certs-b";
  ASSERT_TRUE(IssueNodeCert(dir_, berthd, "b", certs));
  AgentWith(berthd, "b", dir_ / "agent-a",
            {"--tls-ca", (certs / "ca.pem").string(), "--tls-cert", (certs / "b.pem").string(),
             "--tls-key", (certs / "b-key.pem").string()},
            "agent-b.log");
  EXPECT_TRUE(WaitFor(
      [&] {
        return berthd.log().find("agent b from") != std::string::npos &&
               berthd.log().find("of node a") != std::string::npos;
      },
      15s))
      << berthd.log();
  EXPECT_FALSE(EverAppears(berthd, "b", 2s)) << berthd.Nodes().dump(2);
  json job = berthd.Job(id);
  EXPECT_EQ(job["state"], "Running") << job.dump(2);
  EXPECT_EQ(job["placement"][0]["node"], "a");
}

TEST_F(TlsTest, AgentsWithAForeignCertificateOrNoneNeverRegister) {
  Berthd& berthd = NewBerthd(Tls(ControlPlaneOnly()));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  // Trusts berthd's CA but presents a certificate from another CA.
  const fs::path foreign = dir_ / "foreign";
  WriteForeignCredentials("f", foreign);
  AgentWith(berthd, "f", dir_ / "agent-f",
            {"--tls-ca", berthd.ca_file().string(), "--tls-cert", (foreign / "f.pem").string(),
             "--tls-key", (foreign / "f-key.pem").string()},
            "agent-f.log");
  // No certificate at all.
  AgentWith(berthd, "n", dir_ / "agent-n", {"--insecure"}, "agent-n.log");
  // A control: a properly issued agent registers meanwhile.
  NewAgent(berthd, dir_ / "agent-ok", WriteCluster("ok", 2), "agent-ok.log");
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s, "ok")) << berthd.Nodes().dump(2);
  EXPECT_FALSE(EverAppears(berthd, "f", 3s)) << berthd.Nodes().dump(2);
  EXPECT_FALSE(EverAppears(berthd, "n", 1s)) << berthd.Nodes().dump(2);
  // Both were turned away at the handshake, as their logs say.
  EXPECT_NE(ReadFile(dir_ / "agent-f.log").find("stream to berthd closed"), std::string::npos);
  EXPECT_NE(ReadFile(dir_ / "agent-n.log").find("stream to berthd closed"), std::string::npos);

  // An agent without --tls-* or --insecure refuses to start, naming the flags.
  auto r = RunCommand(BinDir() / "berth-agent",
                      {"--server", berthd.agent_address(), "--data-dir", (dir_ / "x").string()},
                      dir_.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--tls-ca, --tls-cert and --tls-key"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace berth::it
