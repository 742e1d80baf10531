// `berth poc rerun`'s pure parts: an earlier report read back from its
// directory or file (a missing or foreign one named by path), the failed
// cases selected, a suite of another text refused naming --suite, the new
// report marked with what it re-tests, and the re-run section in its
// Markdown and HTML. `berth poc cleanup`'s run-id check.
#include "cli/poc_rerun.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/json_view.h"
#include "cli/poc_cleanup.h"
#include "cli/poc_report.h"

namespace berth::cli::poc {
namespace {

using nlohmann::json;

json RerunCase(const std::string& id, const std::string& verdict) {
  return {{"id", id},
          {"group", "g"},
          {"title", "case " + id},
          {"capability", "x"},
          {"perspective", "y"},
          {"weight", 1},
          {"risk", "high"},
          {"verdict", verdict},
          {"reason", verdict == "fail" ? "why" : ""},
          {"retest", "again"},
          {"steps", json::array()},
          {"samples", json::array()},
          {"evidence", json::object()}};
}

json RerunEarlier(const std::string& sha) {
  json r;
  r["environment"] = {{"suite", {{"name", "s"}, {"version", "1"}, {"sha256", sha}}}};
  r["run"] = {{"id", "poc-abc"}, {"started_ms", 1'700'000'000'000}};
  r["cases"] = {RerunCase("one", "pass"), RerunCase("two", "fail"), RerunCase("three", "skipped"),
                RerunCase("four", "fail")};
  return r;
}

class PocRerunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("poc-rerun-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::filesystem::path& p, const std::string& text) {
    std::ofstream(p, std::ios::binary) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(PocRerunTest, ReadsTheReportFromItsDirectoryOrFileAndNamesABadPath) {
  Write(dir_ / "report.json", RerunEarlier("aa").dump());
  auto from_dir = ReadEarlierReport(dir_.string());
  ASSERT_TRUE(from_dir.has_value()) << from_dir.error().message;
  EXPECT_EQ(from_dir->path, (dir_ / "report.json").string());
  auto from_file = ReadEarlierReport((dir_ / "report.json").string());
  ASSERT_TRUE(from_file.has_value());
  EXPECT_EQ(Text(from_file->doc, "run.id"), "poc-abc");

  auto missing = ReadEarlierReport((dir_ / "nope").string());
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find((dir_ / "nope").string()), std::string::npos);

  Write(dir_ / "garbage.json", "{not json");
  auto garbage = ReadEarlierReport((dir_ / "garbage.json").string());
  ASSERT_FALSE(garbage.has_value());
  EXPECT_NE(garbage.error().message.find("garbage.json: not JSON"), std::string::npos);

  Write(dir_ / "other.json", R"({"cases": []})");
  auto other = ReadEarlierReport((dir_ / "other.json").string());
  ASSERT_FALSE(other.has_value());
  EXPECT_NE(other.error().message.find("not a berth poc report"), std::string::npos);
}

TEST(PocRerun, SelectsOnlyTheFailedCases) {
  EXPECT_EQ(FailedCases(RerunEarlier("aa")), (std::set<std::string>{"two", "four"}));
  json none = RerunEarlier("aa");
  none["cases"] = {RerunCase("one", "pass"), RerunCase("three", "skipped")};
  EXPECT_TRUE(FailedCases(none).empty());
}

TEST(PocRerun, CaseSelectsByIdAloneOrWithFailed) {
  const json r = RerunEarlier("aa");
  auto only = SelectRerunCases(r, false, {"one", "three", "one"});
  ASSERT_TRUE(only.has_value()) << only.error().message;
  EXPECT_EQ(*only, (std::set<std::string>{"one", "three"}));
  auto both = SelectRerunCases(r, true, {"one"});
  ASSERT_TRUE(both.has_value()) << both.error().message;
  EXPECT_EQ(*both, (std::set<std::string>{"one", "two", "four"}));
  auto failed = SelectRerunCases(r, true, {});
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(*failed, FailedCases(r));

  auto unknown = SelectRerunCases(r, true, {"two", "fivee"});
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().field, "case");
  EXPECT_NE(unknown.error().message.find("--case fivee"), std::string::npos)
      << unknown.error().message;
  EXPECT_NE(unknown.error().message.find("one, two, three, four"), std::string::npos)
      << unknown.error().message;

  auto neither = SelectRerunCases(r, false, {});
  ASSERT_FALSE(neither.has_value());
  EXPECT_NE(neither.error().message.find("--failed"), std::string::npos);
  EXPECT_NE(neither.error().message.find("--case"), std::string::npos);
}

TEST(PocRerun, RefusesASuiteOfAnotherTextNamingSuiteAndTheFix) {
  EarlierReport earlier{"/tmp/r/report.json", RerunEarlier(std::string(64, 'a'))};
  Suite same;
  same.sha256 = std::string(64, 'a');
  EXPECT_TRUE(CheckSameSuite(earlier, same, "s.yaml").has_value());
  Suite other;
  other.sha256 = std::string(64, 'b');
  auto refused = CheckSameSuite(earlier, other, "s.yaml");
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Code::kFailedPrecondition);
  EXPECT_EQ(refused.error().field, "suite");
  const std::string& m = refused.error().message;
  EXPECT_NE(m.find("/tmp/r/report.json"), std::string::npos) << m;
  EXPECT_NE(m.find("--suite s.yaml has sha256 " + std::string(64, 'b')), std::string::npos) << m;
  EXPECT_NE(m.find("pass --suite with the suite file that run used"), std::string::npos) << m;
  auto builtin = CheckSameSuite(earlier, other, "");
  ASSERT_FALSE(builtin.has_value());
  EXPECT_NE(builtin.error().message.find("the built-in suite has sha256"), std::string::npos);
}

TEST(PocRerun, TheNewReportNamesWhatItReTestsAndEachPreviousVerdict) {
  EarlierReport earlier{"/tmp/r/report.json", RerunEarlier("aa")};
  json report;
  report["environment"] = earlier.doc["environment"];
  report["run"] = {{"id", "poc-new"}};
  report["cases"] = {RerunCase("two", "pass"), RerunCase("four", "fail")};
  ScoreReport(report);
  MarkRerun(report, earlier);
  EXPECT_EQ(report["rerun_of"]["run"], "poc-abc");
  EXPECT_EQ(report["rerun_of"]["path"], "/tmp/r/report.json");
  EXPECT_EQ(report["cases"][0]["previous_verdict"], "fail");
  EXPECT_EQ(report["cases"][0]["previous_reason"], "why");
  EXPECT_EQ(report["summary"]["cases"], 2);

  const std::string md = WithRerunMarkdown(RenderMarkdown(report), report);
  const auto section = md.find("## Re-run");
  ASSERT_NE(section, std::string::npos);
  EXPECT_LT(section, md.find("## Environment"));
  EXPECT_NE(md.find("| g/two | fail | pass |"), std::string::npos) << md;
  EXPECT_NE(md.find("run poc-abc (/tmp/r/report.json"), std::string::npos);
  const std::string html = WithRerunHtml(RenderHtml(report), report);
  const auto h = html.find("<h2 id=\"rerun\">Re-run</h2>");
  ASSERT_NE(h, std::string::npos);
  EXPECT_LT(h, html.find("<h2>Environment</h2>"));
  EXPECT_NE(html.find("<td>g/four</td><td>fail</td><td>fail</td>"), std::string::npos);

  // A plain run's report is left as rendered.
  json plain = report;
  plain.erase("rerun_of");
  EXPECT_EQ(WithRerunMarkdown("x", plain), "x");
  EXPECT_EQ(WithRerunHtml("y", plain), "y");
}

TEST(PocRerun, TheRerunSectionKeepsReportValuesInert) {
  EarlierReport earlier{"/tmp/<b>/report.json", RerunEarlier("aa")};
  json report;
  report["cases"] = {RerunCase("<script>x</script>", "pass")};
  MarkRerun(report, earlier);
  const std::string html = WithRerunHtml("<body>\n</body>", report);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
}

TEST(PocCleanup, ARunIdIsPocAndBase36Only) {
  EXPECT_TRUE(IsRunPrefix("poc-mxcevc00"));
  EXPECT_FALSE(IsRunPrefix("poc-"));
  EXPECT_FALSE(IsRunPrefix("poc"));
  EXPECT_FALSE(IsRunPrefix("default"));
  EXPECT_FALSE(IsRunPrefix("poc-ABC"));
  EXPECT_FALSE(IsRunPrefix("poc-a-b"));
  EXPECT_FALSE(IsRunPrefix("poc-a*"));
  EXPECT_EQ(RunPolicyComment("poc-x"),
            "berth poc run poc-x: its tenants (rolled back when it ends)");
  EXPECT_EQ(RunRollbackComment("poc-x"), "berth poc run poc-x ended");
}

}  // namespace
}  // namespace berth::cli::poc
