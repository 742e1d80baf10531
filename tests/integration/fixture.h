// The GoogleTest side of the harness: a fixture that owns the test's temp
// dir, keeps it (and prints the daemons' logs) when the test failed, and
// small builders for job specs and CLI calls.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "integration/harness.h"
#include "support/pg_server.h"

namespace berth::it {

// A job spec as JSON (which is YAML). `extra` is merged in at the top level.
std::string JobSpecJson(const std::string& name, const std::vector<std::string>& command,
                        int gpus = 0, const nlohmann::json& extra = nlohmann::json::object());

// Makes `dir` (created if missing) belong to `tenant`'s run identity, as an
// operator prepares a tenant's checkpoint directory: jobs run as that
// identity and write there (docs/security.md). The tenant must have no
// run_as in the policy (its identity is the derived one).
void OwnedByTenant(const std::filesystem::path& dir, const std::string& tenant = "default");

// A shell command, as a job's argv.
inline std::vector<std::string> Sh(const std::string& script) {
  return {"sh", "-c", script};
}

// Owns the test's temp dir and the daemons it starts. When the test failed,
// TearDown keeps the dir, saves the stacks of daemons still running (they may
// be stuck) and prints the tails of their logs.
class IntegrationTest : public ::testing::Test {
 protected:
  void TearDown() override;

  // A berthd (not yet started) that lives until the end of the test.
  Berthd& NewBerthd(BerthdOptions options);
  // A started berth-agent for `berthd` (see StartAgent); lives until the end
  // of the test unless killed.
  Process& NewAgent(const Berthd& berthd, const std::filesystem::path& data_dir,
                    const std::filesystem::path& simulate, const std::string& log_name,
                    const std::map<std::string, std::string>& env = {},
                    const std::vector<std::string>& extra_args = {});

  // Runs the real `berth` CLI against `berthd`.
  CommandResult Cli(const Berthd& berthd, const std::vector<std::string>& args) const;
  // Writes a one-node simulated cluster file and returns its path.
  std::filesystem::path WriteCluster(const std::string& node = "it-node", int gpus = 8) const;
  // The same with several nodes of `gpus` H100s each.
  std::filesystem::path WriteCluster(const std::vector<std::string>& nodes, int gpus) const;

  TempDir dir_;  // destroyed last: it reaps whatever the daemons left behind
  std::vector<std::unique_ptr<Berthd>> berthds_;
  std::vector<std::unique_ptr<Process>> agents_;
};

// The same with a PostgreSQL 15 server of the test's own (initdb in a temp
// dir, a free loopback port); skipped, saying why, where the server
// binaries are missing.
class PostgresIntegrationTest : public IntegrationTest {
 protected:
  void SetUp() override;

  std::unique_ptr<tests::PgServer> server_;
};

}  // namespace berth::it
