// Short-lived node certificates against real processes (docs/operations.md,
// "TLS and node credentials"): an agent renews its certificate over its
// authenticated stream and keeps its stream and its job past the first
// certificate's expiry; a stream can get a certificate for its own node
// only; removing a node is refused while it runs work, then revokes its
// certificates (the agent is cut off and refused, also after a restart of
// berthd) until a fresh `berthd cert node` adds it back.
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>

#include "agent/node_cert.h"
#include "berth/v1/agent.grpc.pb.h"
#include "control/pki.h"
#include "integration/fixture.h"

namespace berth::it {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

unsigned Mode(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 0777;
}

class NodeCertTest : public IntegrationTest {
 protected:
  // `berthd cert node NODE` into `out`, with `ttl` when set.
  bool Issue(const Berthd& berthd, const std::string& node, const fs::path& out,
             const std::string& ttl = "") {
    std::vector<std::string> args{
        "cert", "node", node, "--data-dir", berthd.data_dir().string(), "--out", out.string()};
    if (!ttl.empty()) args.insert(args.end(), {"--node-cert-ttl", ttl});
    auto r = RunCommand(BinDir() / "berthd", args, dir_.path());
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r.exit_code == 0;
  }

  // berth-agent for simulated node `node` with the credentials in `certs`.
  Process& AgentWith(const Berthd& berthd, const std::string& node, const fs::path& certs,
                     const std::string& log_name) {
    auto cluster = dir_ / ("cluster-" + node + ".yaml");
    fs::copy_file(WriteCluster(node, 2), cluster, fs::copy_options::overwrite_existing);
    std::vector<std::string> args{"--server",   berthd.agent_address(),
                                  "--data-dir", (dir_ / ("agent-" + node)).string(),
                                  "--simulate", cluster.string(),
                                  "--tls-ca",   (certs / "ca.pem").string(),
                                  "--tls-cert", (certs / (node + ".pem")).string(),
                                  "--tls-key",  (certs / (node + "-key.pem")).string()};
    agents_.push_back(std::make_unique<Process>(BinDir() / "berth-agent", args, dir_ / log_name));
    return *agents_.back();
  }

  static bool Listed(const Berthd& berthd, const std::string& node) {
    auto nodes = berthd.Nodes();
    if (!nodes.is_array()) return false;
    for (const auto& n : nodes) {
      if (n.value("name", "") == node) return true;
    }
    return false;
  }

  static int Count(const std::string& text, const std::string& what) {
    int n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  static json AuditOf(const Berthd& berthd, const std::string& action) {
    json out = json::array();
    auto all = GetAllPages(berthd.http(), "/v1/audit", "records");
    for (const auto& r : all.body.value("records", json::array())) {
      if (r.value("action", "") == action) out.push_back(r);
    }
    return out;
  }
};

TEST_F(NodeCertTest, AnAgentRenewsItsCertificateAndKeepsItsStreamAndJobPastTheFirstExpiry) {
  Berthd& berthd = NewBerthd([] {
    BerthdOptions o = ControlPlaneOnly({"--node-cert-ttl", "20s"});
    o.tls = true;
    return o;
  }());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const fs::path certs = dir_ / "certs-a";
  ASSERT_TRUE(Issue(berthd, "a", certs, "20s"));
  const std::string first = ReadFile(certs / "a.pem");
  const std::string first_key = ReadFile(certs / "a-key.pem");
  auto first_validity = server::pki::ValidityOf(first);
  ASSERT_TRUE(first_validity);
  EXPECT_EQ(first_validity->not_after_ms - first_validity->not_before_ms, 20'000);

  Process& agent = AgentWith(berthd, "a", certs, "agent-a.log");
  ASSERT_TRUE(berthd.WaitForNode("Ready", 15s, "a")) << berthd.Nodes().dump(2);
  std::string error;
  auto id = berthd.Submit(JobSpecJson("long", Sh("sleep 120"), 1), &error);
  ASSERT_NE(id, 0) << error;
  ASSERT_TRUE(berthd.WaitForState(id, "Running", 15s)) << berthd.Job(id).dump(2);

  // At 2/3 of 20 s the agent asks, and writes what berthd signed.
  ASSERT_TRUE(WaitFor([&] { return ReadFile(certs / "a.pem") != first; }, 20s))
      << ReadFile(dir_ / "agent-a.log");
  const std::string renewed = ReadFile(certs / "a.pem");
  const std::string renewed_key = ReadFile(certs / "a-key.pem");
  EXPECT_NE(renewed_key, first_key) << "a new key, made on the node";
  EXPECT_EQ(Mode(certs / "a-key.pem"), 0600U);
  EXPECT_TRUE(agent::CheckCertMatchesKey(renewed, renewed_key));
  const std::string ca = ReadFile(berthd.ca_file());
  EXPECT_TRUE(server::pki::VerifyCert(ca, renewed, NowMs()));
  EXPECT_EQ(*server::pki::CommonName(renewed), "a");
  auto renewed_validity = server::pki::ValidityOf(renewed);
  ASSERT_TRUE(renewed_validity);
  EXPECT_GT(renewed_validity->not_after_ms, first_validity->not_after_ms);
  EXPECT_TRUE(WaitFor(
      [&] {
        return ReadFile(dir_ / "agent-a.log").find("node certificate renewed: valid until") !=
               std::string::npos;
      },
      5s));

  // Past the first certificate's expiry: the same stream, the same job.
  const auto wait_ms = first_validity->not_after_ms + 2'000 - NowMs();
  if (wait_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  EXPECT_FALSE(server::pki::VerifyCert(ca, first, NowMs())) << "the first one has expired";
  EXPECT_EQ(berthd.JobState(id), "Running") << berthd.Job(id).dump(2);
  EXPECT_TRUE(berthd.WaitForNode("Ready", 1s, "a"));
  EXPECT_EQ(Count(berthd.log(), "agent a disconnected"), 0) << berthd.log();
  // Audited as the node's own act.
  auto renewals = AuditOf(berthd, "node.cert.renew");
  ASSERT_FALSE(renewals.empty());
  EXPECT_EQ(renewals[0].value("actor", ""), "node/a");
  EXPECT_EQ(renewals[0].value("object", ""), "node/a");

  // A restarted agent starts from the renewed files (the first one could
  // no longer connect at all).
  agent.Kill(SIGKILL);
  (void)agent.Wait(5s);
  const auto reconnects = Count(berthd.log(), "node a registered");
  AgentWith(berthd, "a", certs, "agent-a2.log");
  ASSERT_TRUE(WaitFor([&] { return Count(berthd.log(), "node a registered") > reconnects; }, 15s))
      << ReadFile(dir_ / "agent-a2.log");
  EXPECT_EQ(berthd.JobState(id), "Running") << berthd.Job(id).dump(2);
  EXPECT_EQ(
      berthd.http().Post(fmt::format("/v1/jobs/{}/cancel", id), "", "application/json").status,
      200);
}

// A raw stream as node `node` over mutual TLS with `certs`: registers, then
// asks for a certificate for `csr_node`.
berth::v1::CertificateIssued RenewOverRawStream(const Berthd& berthd, const fs::path& certs,
                                                const std::string& node,
                                                const std::string& csr_node) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFile(certs / "ca.pem");
  ssl.pem_cert_chain = ReadFile(certs / (node + ".pem"));
  ssl.pem_private_key = ReadFile(certs / (node + "-key.pem"));
  auto channel = grpc::CreateChannel(berthd.agent_address(), grpc::SslCredentials(ssl));
  auto stub = berth::v1::AgentService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 15s);
  auto stream = stub->Connect(&context);
  berth::v1::AgentMessage reg;
  reg.mutable_register_()->mutable_node()->set_name(node);
  reg.mutable_register_()->mutable_node()->set_cpus(4);
  reg.mutable_register_()->mutable_node()->set_gpu_provider("simulated");
  berth::v1::CertificateIssued out;
  if (!stream->Write(reg)) return out;
  berth::v1::ServerMessage msg;
  if (!stream->Read(&msg) || !msg.has_registered()) return out;
  auto csr = agent::MakeNodeCsr(csr_node);
  if (!csr) return out;
  berth::v1::AgentMessage ask;
  ask.mutable_renew_certificate()->set_csr_pem(csr->csr_pem);
  if (!stream->Write(ask)) return out;
  while (stream->Read(&msg)) {
    if (msg.has_certificate_issued()) {
      out = msg.certificate_issued();
      break;
    }
  }
  stream->WritesDone();
  context.TryCancel();
  (void)stream->Finish();
  return out;
}

TEST_F(NodeCertTest, ANodesStreamGetsACertificateForItsOwnNameOnly) {
  Berthd& berthd = NewBerthd([] {
    BerthdOptions o = ControlPlaneOnly();
    o.tls = true;
    return o;
  }());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const fs::path certs = dir_ / "certs-a";
  ASSERT_TRUE(Issue(berthd, "a", certs));

  auto stolen = RenewOverRawStream(berthd, certs, "a", "b");
  EXPECT_TRUE(stolen.cert_pem().empty());
  EXPECT_EQ(stolen.code(), static_cast<int>(Code::kPermissionDenied)) << stolen.error();
  EXPECT_NE(stolen.error().find("cannot get a certificate for 'b'"), std::string::npos)
      << stolen.error();
  EXPECT_TRUE(AuditOf(berthd, "node.cert.renew").empty());

  auto own = RenewOverRawStream(berthd, certs, "a", "a");
  ASSERT_FALSE(own.cert_pem().empty()) << own.error();
  EXPECT_EQ(*server::pki::CommonName(own.cert_pem()), "a");
  EXPECT_EQ(AuditOf(berthd, "node.cert.renew").size(), 1U);
}

TEST_F(NodeCertTest, RemovingANodeIsRefusedWhileItRunsThenRevokesItsCertificates) {
  Berthd& berthd = NewBerthd([] {
    BerthdOptions o = ControlPlaneOnly();
    o.tls = true;
    return o;
  }());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const fs::path certs = dir_ / "certs-a";
  ASSERT_TRUE(Issue(berthd, "a", certs));
  Process& agent = AgentWith(berthd, "a", certs, "agent-a.log");
  ASSERT_TRUE(berthd.WaitForNode("Ready", 15s, "a")) << berthd.Nodes().dump(2);
  std::string error;
  auto id = berthd.Submit(JobSpecJson("long", Sh("sleep 120"), 1), &error);
  ASSERT_NE(id, 0) << error;
  ASSERT_TRUE(berthd.WaitForState(id, "Running", 15s)) << berthd.Job(id).dump(2);

  // Refused while the job runs, naming its run and how to drain.
  auto refused = Cli(berthd, {"node", "remove", "a"});
  EXPECT_NE(refused.exit_code, 0);
  const std::string said = refused.out + refused.err;
  EXPECT_NE(said.find(fmt::format("(job {})", id)), std::string::npos) << said;
  EXPECT_NE(said.find("berth drain a"), std::string::npos) << said;
  EXPECT_TRUE(Listed(berthd, "a"));

  ASSERT_EQ(
      berthd.http().Post(fmt::format("/v1/jobs/{}/cancel", id), "", "application/json").status,
      200);
  ASSERT_TRUE(berthd.WaitForTerminal(id, 20s)) << berthd.Job(id).dump(2);
  auto removed = Cli(berthd, {"node", "remove", "a"});
  ASSERT_EQ(removed.exit_code, 0) << removed.out << removed.err;
  EXPECT_NE(removed.out.find("node a removed"), std::string::npos) << removed.out;
  const auto removed_ms = NowMs();

  // Cut off at once, and refused on every reconnection, naming the revocation.
  EXPECT_TRUE(
      WaitFor([&] { return berthd.log().find("disconnecting agent a") != std::string::npos; }, 5s))
      << berthd.log();
  EXPECT_TRUE(WaitFor(
      [&] {
        return ReadFile(dir_ / "agent-a.log").find("is revoked: the node was removed") !=
               std::string::npos;
      },
      10s))
      << ReadFile(dir_ / "agent-a.log");
  EXPECT_FALSE(WaitFor([&] { return Listed(berthd, "a"); }, 2s)) << berthd.Nodes().dump(2);
  auto audit = AuditOf(berthd, "node.remove");
  ASSERT_FALSE(audit.empty());
  EXPECT_EQ(audit.back().value("outcome", ""), "ok") << audit.dump(2);
  EXPECT_EQ(audit.back().value("object", ""), "node/a") << audit.dump(2);
  EXPECT_TRUE(agent.running()) << "refused, not crashed";

  // The revocation survives a restart of berthd: an agent started afresh
  // with the old certificate (so the check does not hang on how far the old
  // agent's reconnect backoff grew while berthd was down) is refused again.
  agent.Kill(SIGKILL);
  (void)agent.Wait(5s);
  berthd.Stop();
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  const int refusals = Count(berthd.log(), "is revoked: the node was removed");
  Process& again = AgentWith(berthd, "a", certs, "agent-a-again.log");
  EXPECT_TRUE(WaitFor(
      [&] { return Count(berthd.log(), "is revoked: the node was removed") > refusals; }, 30s))
      << berthd.log() << ReadFile(dir_ / "agent-a-again.log");
  EXPECT_FALSE(Listed(berthd, "a"));
  again.Kill(SIGKILL);
  (void)again.Wait(5s);

  // A certificate issued after the removal adds the node back.
  const auto wait_ms = removed_ms + 1'100 - NowMs();
  if (wait_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  const fs::path fresh = dir_ / "certs-a-fresh";
  ASSERT_TRUE(Issue(berthd, "a", fresh));
  AgentWith(berthd, "a", fresh, "agent-a2.log");
  EXPECT_TRUE(berthd.WaitForNode("Ready", 15s, "a"))
      << berthd.Nodes().dump(2) << ReadFile(dir_ / "agent-a2.log");
}

}  // namespace
}  // namespace berth::it
