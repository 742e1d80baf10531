// `berth history export` and `berth policy preview` end to end: the real CLI
// (in-process) against the real Api, Controller and SqliteStore on loopback,
// over a small recorded history.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/app.h"
#include "sim/history.h"
#include "unit/server/history_harness.h"

namespace berth::server {
namespace {

using nlohmann::json;

class PreviewCliTest : public HistoryHarness {
 protected:
  struct CliRun {
    int code = -1;
    std::string out;
    std::string err;
  };
  CliRun Cli(std::vector<std::string> args) {
    args.insert(args.begin(), {"berth", "--server", "http://127.0.0.1:" + std::to_string(port_)});
    std::istringstream in;
    std::ostringstream out;
    std::ostringstream err;
    CliRun run;
    run.code = cli::RunCli(args, {in, out, err, std::nullopt, clock_, token_, {}, std::nullopt});
    run.out = out.str();
    run.err = err.str();
    return run;
  }
  std::string Write(const std::string& name, const std::string& text) {
    auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }
};

TEST_F(PreviewCliTest, PreviewPrintsCurrentAgainstProposedPerTenantAndAppliesNothing) {
  RecordAWaitingBehindB();
  std::string file = Write("a-first.yaml", kAFirst);

  CliRun run = Cli({"policy", "preview", file, "--window", "1h"});
  ASSERT_EQ(run.code, cli::kExitOk) << run.err;
  EXPECT_NE(run.out.find("Policy preview: v2 (active) -> v3 (not applied), replaying 5 jobs "
                         "submitted in the last 1h on 8 GPUs (1 node)"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("TENANT   JOBS   MEAN WAIT"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\na        2      "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\n(all)    5      "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Cost: unpriced"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Nothing was applied. To apply: berth policy apply " + file),
            std::string::npos);

  // -o json is berthd's answer; a's wait drops under the proposed policy.
  run = Cli({"policy", "preview", file, "--window", "1h", "-o", "json"});
  ASSERT_EQ(run.code, cli::kExitOk) << run.err;
  json answer = json::parse(run.out);
  ASSERT_EQ(answer["tenants"][0]["tenant"], "a");
  EXPECT_LT(answer["tenants"][0]["change"]["mean_wait_s"].get<double>(), -100);

  // Prices from a YAML file price every GPU-hour.
  std::string prices = Write("prices.yaml", "H100-80GB: 3.5\ndefault: 1\n");
  run = Cli({"policy", "preview", file, "--window", "1h", "--prices", prices, "-o", "json"});
  ASSERT_EQ(run.code, cli::kExitOk) << run.err;
  answer = json::parse(run.out);
  EXPECT_EQ(answer["priced"], true);
  EXPECT_DOUBLE_EQ(answer["overall"]["current"]["cost"].get<double>(),
                   answer["overall"]["current"]["gpu_hours"].get<double>() * 3.5);
  EXPECT_EQ(Cli({"policy", "preview", file, "--prices", Write("bad.yaml", "H100: free\n")}).code,
            cli::kExitUsage);

  // An invalid policy: the field-naming error, exit 1, nothing applied.
  run = Cli({"policy", "preview", Write("bad-policy.yaml", "queues:\n  - name: a\n    kind: x\n")});
  EXPECT_EQ(run.code, cli::kExitError);
  EXPECT_NE(run.err.find("berth: queues[0].kind:"), std::string::npos) << run.err;
  EXPECT_EQ(Get("/v1/policy").body["version"], 2);

  // A window where nothing ran: the message, not a table.
  run = Cli({"policy", "preview", file, "--window", "1s"});
  ASSERT_EQ(run.code, cli::kExitOk) << run.err;
  EXPECT_EQ(run.out.find("TENANT"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("no job ran in the last 1s"), std::string::npos) << run.out;
}

TEST_F(PreviewCliTest, HistoryExportWritesAFileBerthSimReads) {
  RecordAWaitingBehindB();
  std::string path = (dir_ / "history.json").string();
  CliRun run = Cli({"history", "export", "--since", "1h", "-o", path});
  ASSERT_EQ(run.code, cli::kExitOk) << run.err;
  EXPECT_NE(run.out.find("wrote 5 jobs submitted"), std::string::npos) << run.out;
  auto history = sim::ReadHistoryFile(path);
  ASSERT_TRUE(history.has_value()) << history.error().message;
  ASSERT_EQ(history->jobs.size(), 5U);
  EXPECT_EQ(history->jobs[0].tenant, "b");
  EXPECT_EQ(history->jobs[0].duration_ms, 100 * kSec);
  EXPECT_EQ(history->policy_yaml, kBFirst);

  // Without -o it goes to stdout.
  run = Cli({"history", "export", "--since", "1h"});
  ASSERT_EQ(run.code, cli::kExitOk) << run.err;
  EXPECT_EQ(json::parse(run.out)["jobs"].size(), 5U);
  run = Cli({"history", "export", "--since", "last week"});
  EXPECT_EQ(run.code, cli::kExitError);
  EXPECT_NE(run.err.find("since:"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace berth::server
