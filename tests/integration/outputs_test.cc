// A job's outputs, downloaded by its tenant through real berthd, its agent
// and the berth CLI (docs/jobs.md#outputs): the files stay on the node, a
// member lists and copies them, a member of another tenant and an anonymous
// client get nothing, a path out of the output directory or through a link
// is refused, and every download is in the audit trail.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "integration/fixture.h"
#include "integration/tenants.h"

namespace berth::it {
namespace {

using nlohmann::json;

class OutputsTest : public IntegrationTest {
 protected:
  // The berth CLI as the holder of `token`.
  CommandResult CliAs(const Berthd& berthd, const std::string& token,
                      const std::vector<std::string>& args) const {
    const std::string admin = berthd.http().token();
    ::setenv("BERTH_TOKEN", token.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    CommandResult r = Cli(berthd, args);
    ::setenv("BERTH_TOKEN", admin.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    return r;
  }
};

TEST_F(OutputsTest, ItsTenantListsAndDownloadsAJobsOutputsAndNoOneElseGetsThem) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));
  const Http& admin = berthd.http();
  ASSERT_EQ(admin.Post("/v1/policy", kRedBlue).status, 201);
  const std::string red = MemberToken(admin, "rita", "red", "member", "1h");
  const std::string blue = MemberToken(admin, "bo", "blue", "member", "1h");

  // Three slices' worth of model, a directory of metrics, and a link a job
  // might plant to get a file of the node out through the download.
  std::string error;
  const std::int64_t id = berthd.Submit(
      JobSpecJson("train",
                  Sh("cd \"$BERTH_OUTPUT_DIR\" && seq 1 400000 > model.txt && mkdir -p metrics && "
                     "echo '{\"loss\": 0.25}' > metrics/final.json && ln -s /etc/passwd passwd"),
                  1, {{"tenant", "red"}, {"queue", "main"}}),
      &error);
  ASSERT_GT(id, 0) << error;
  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s));
  ASSERT_EQ(berthd.JobState(id), "Succeeded") << berthd.Job(id).dump(2);
  const std::string job = std::to_string(id);
  const json run = berthd.Job(id).at("runs").back();
  const auto on_node = berthd.data_dir() / "agents" / run.at("node").get<std::string>() /
                       "outputs" / run.at("run_id").get<std::string>() / "out";
  ASSERT_TRUE(std::filesystem::exists(on_node / "model.txt")) << on_node;
  const std::string model = ReadFile(on_node / "model.txt");
  ASSERT_GT(model.size(), std::size_t{2} << 20);

  // The member of red lists and copies them.
  auto r = CliAs(berthd, red, {"outputs", job});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("metrics"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.txt"), std::string::npos) << r.out;
  const auto link_row = r.out.substr(r.out.find("passwd"));
  EXPECT_EQ(link_row.substr(0, link_row.find('\n')).find("other") == std::string::npos, false)
      << r.out;
  const auto dest = dir_ / "got";
  std::filesystem::create_directories(dest);
  r = CliAs(berthd, red, {"cp", job + ":model.txt", dest.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(dest / "model.txt"), model);
  EXPECT_FALSE(std::filesystem::exists(dest / "model.txt.part"));
  r = CliAs(berthd, red, {"cp", "-r", job + ":", (dest / "all").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(dest / "all" / "model.txt"), model);
  EXPECT_EQ(ReadFile(dest / "all" / "metrics" / "final.json"), "{\"loss\": 0.25}\n");
  EXPECT_FALSE(std::filesystem::exists(dest / "all" / "passwd"));
  EXPECT_NE(r.out.find("copied 2 files"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("skipped passwd: not a file or directory"), std::string::npos) << r.out;

  // The link and a way out of the directory are refused, naming the path.
  Http rita(berthd.api_port());
  rita.set_token(red);
  auto link = rita.Get("/v1/jobs/" + job + "/outputs/content?path=passwd");
  EXPECT_EQ(link.status, 400) << link.text;
  EXPECT_NE(link.text.find("symbolic link"), std::string::npos) << link.text;
  EXPECT_EQ(link.text.find("root:"), std::string::npos) << link.text;
  for (const std::string path :
       {"../../../../etc/passwd", "/etc/passwd", "metrics/../model.txt", "model%FF.txt"}) {
    auto out = rita.Get("/v1/jobs/" + job + "/outputs/content?path=" + path);
    EXPECT_EQ(out.status, 400) << path << ": " << out.text;
    EXPECT_EQ(out.body["error"].value("field", ""), "path") << out.text;
  }
  auto missing = rita.Get("/v1/jobs/" + job + "/outputs?path=nothing");
  EXPECT_EQ(missing.status, 404) << missing.text;

  // Another tenant's member sees no such job; no token gets 401.
  Http bo(berthd.api_port());
  bo.set_token(blue);
  for (const std::string what : {"/outputs", "/outputs/content?path=model.txt"}) {
    auto denied = bo.Get("/v1/jobs/" + job + what);
    EXPECT_EQ(denied.status, 404) << denied.text;
    EXPECT_EQ(denied.text.find("model"), std::string::npos) << denied.text;
    EXPECT_EQ(Http(berthd.api_port()).Get("/v1/jobs/" + job + what).status, 401);
  }
  r = CliAs(berthd, blue, {"cp", job + ":model.txt", (dest / "stolen").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(dest / "stolen"));

  // Each download is audited with who took which file.
  auto audit = admin.Get("/v1/audit?action=job.outputs.download&limit=100");
  ASSERT_EQ(audit.status, 200) << audit.text;
  int by_rita = 0;
  int denied_bo = 0;
  for (const auto& rec : audit.body.at("records")) {
    if (rec.value("actor", "") == "rita" && rec.dump().find("model.txt") != std::string::npos) {
      ++by_rita;
    }
    if (rec.value("actor", "") == "bo" && rec.value("outcome", "").starts_with("denied")) {
      ++denied_bo;
    }
  }
  EXPECT_GE(by_rita, 2) << audit.text;
  EXPECT_GE(denied_bo, 1) << audit.text;
}

}  // namespace
}  // namespace berth::it
