// The berth CLI against an HTTPS server whose certificate comes from the
// local CA: it connects when told to trust that CA (--ca or BERTH_CA), and
// otherwise fails with a message that says how to trust it.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <sstream>
#include <thread>

#include "cli/app.h"
#include "common/clock.h"
#include "control/pki.h"
#include "http/server.h"

namespace berth::server {
namespace {

namespace fs = std::filesystem;

class TlsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "berth-tls-cli-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    auto server = pki::EnsureServerCert(dir_, {}, clock_.NowMs());
    ASSERT_TRUE(server) << server.error().message;
    files_ = pki::FilesIn(dir_);
    auto other = pki::CreateCa("another CA", clock_.NowMs());
    ASSERT_TRUE(other);
    ASSERT_TRUE(pki::WriteFileAtomic(dir_ / "other-ca.pem", other->cert_pem, 0644));

    http::ServerOptions options;
    options.tls = http::TlsFiles{files_.server_cert, files_.server_key};
    https_ = std::make_unique<http::Server>(options);
    https_->Get("/v1/nodes", [](const http::Request&, http::Response& res) {
      res.set_content(R"({"nodes":[]})", "application/json");
    });
    auto port = https_->Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.has_value()) << port.error().message;
    port_ = *port;
    https_->Start();
  }
  void TearDown() override {
    if (https_) https_->Stop();
    fs::remove_all(dir_);
  }

  struct CliRun {
    int code = -1;
    std::string out;
    std::string err;
  };
  CliRun Cli(std::vector<std::string> args, std::optional<std::string> env_ca = std::nullopt,
             const std::string& scheme = "https") {
    args.insert(args.begin(),
                {"berth", "--server", scheme + "://127.0.0.1:" + std::to_string(port_)});
    std::istringstream in;
    std::ostringstream out;
    std::ostringstream err;
    CliRun run;
    run.code = cli::RunCli(args, {in, out, err, std::nullopt, clock_, std::nullopt,
                                  dir_ / "config.json", std::nullopt, std::move(env_ca)});
    run.out = out.str();
    run.err = err.str();
    return run;
  }

  SystemClock clock_;
  fs::path dir_;
  pki::TlsFiles files_;
  std::unique_ptr<http::Server> https_;
  int port_ = 0;
};

TEST_F(TlsCliTest, TrustingTheCaWithTheFlagOrTheEnvironmentConnects) {
  CliRun flag = Cli({"nodes", "--ca", files_.ca_cert.string()});
  EXPECT_EQ(flag.code, cli::kExitOk) << flag.err;
  EXPECT_NE(flag.out.find("No nodes registered."), std::string::npos) << flag.out;

  CliRun env = Cli({"nodes"}, files_.ca_cert.string());
  EXPECT_EQ(env.code, cli::kExitOk) << env.err;

  // The flag wins over the environment.
  CliRun both = Cli({"nodes", "--ca", files_.ca_cert.string()}, (dir_ / "other-ca.pem").string());
  EXPECT_EQ(both.code, cli::kExitOk) << both.err;
}

TEST_F(TlsCliTest, AnUntrustedCertificateFailsNamingTheCaFlag) {
  CliRun none = Cli({"nodes"});
  EXPECT_EQ(none.code, cli::kExitUnavailable);
  EXPECT_NE(none.err.find("does not verify against the system trust store: pass --ca "
                          "<data-dir>/tls/ca.pem (or set BERTH_CA)"),
            std::string::npos)
      << none.err;

  CliRun other = Cli({"nodes", "--ca", (dir_ / "other-ca.pem").string()});
  EXPECT_EQ(other.code, cli::kExitUnavailable);
  EXPECT_NE(other.err.find("does not verify against " + (dir_ / "other-ca.pem").string()),
            std::string::npos)
      << other.err;
}

TEST_F(TlsCliTest, AMissingCaFileIsAUsageError) {
  CliRun run = Cli({"nodes", "--ca", (dir_ / "nope.pem").string()});
  EXPECT_EQ(run.code, cli::kExitUsage);
  EXPECT_NE(run.err.find("--ca '" + (dir_ / "nope.pem").string() + "': no such file"),
            std::string::npos)
      << run.err;
  CliRun env = Cli({"nodes"}, (dir_ / "nope.pem").string());
  EXPECT_EQ(env.code, cli::kExitUsage);
  EXPECT_NE(env.err.find("(from BERTH_CA)"), std::string::npos) << env.err;
}

TEST_F(TlsCliTest, PlainHttpAgainstHttpsSaysToUseHttps) {
  CliRun run = Cli({"nodes"}, std::nullopt, "http");
  EXPECT_EQ(run.code, cli::kExitUnavailable);
  EXPECT_NE(run.err.find("berthd serves HTTPS unless started with --plain-http"), std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace berth::server
