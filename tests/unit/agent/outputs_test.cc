// A run's outputs as the agent reads them for berthd: listings, slices of
// files, and the refusals that keep a download to what the run's identity
// owns (no link followed, no special file opened, nothing of another owner).
#include "agent/outputs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/runner.h"
#include "model/outputs.h"
#include "test_util.h"

namespace berth::agent {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

TEST(OutputPath, RelativePathsSplitAndEverythingElseIsRefusedNamingTheField) {
  EXPECT_EQ(model::SplitOutputPath("").value(), std::vector<std::string>{});
  EXPECT_EQ(model::SplitOutputPath(".").value(), std::vector<std::string>{});
  EXPECT_EQ(model::SplitOutputPath("a//b/").value(), (std::vector<std::string>{"a", "b"}));
  for (const char* bad : {"/etc/passwd", "../x", "a/../../b", "a/./b", ".."}) {
    auto r = model::SplitOutputPath(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().field, "path") << bad;
    EXPECT_EQ(r.error().code, Code::kInvalidArgument) << bad;
  }
  EXPECT_NE(model::SplitOutputPath("/model.pt").error().message.find("write 'model.pt'"),
            std::string::npos);
  EXPECT_FALSE(model::SplitOutputPath(std::string("a\0b", 3)).has_value());
  EXPECT_FALSE(model::SplitOutputPath(std::string(model::kMaxOutputPath + 1, 'a')).has_value());
}

class OutputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = dir_.path() / "out";
    fs::create_directories(out_ / "ckpt");
    Write(out_ / "metrics.json", R"({"loss": 0.1})");
    Write(out_ / "ckpt" / "step-10.pt", std::string(3000, 'x') + "end");
  }
  testing::TempDir dir_;
  fs::path out_;
};

TEST_F(OutputsTest, ADirectoryIsListedSortedAndAFileIsReadInSlices) {
  auto top = ReadOutputAt(out_, "", 0, 0);
  ASSERT_TRUE(top.has_value()) << top.error().message;
  EXPECT_TRUE(top->is_dir);
  ASSERT_EQ(top->entries.size(), 2U);
  EXPECT_EQ(top->entries[0].name, "ckpt");
  EXPECT_EQ(top->entries[0].type, "dir");
  EXPECT_EQ(top->entries[1].name, "metrics.json");
  EXPECT_EQ(top->entries[1].type, "file");
  EXPECT_EQ(top->entries[1].size, 13U);
  EXPECT_GT(top->entries[1].modified_ms, 0);

  auto head = ReadOutputAt(out_, "ckpt/step-10.pt", 0, 1000);
  ASSERT_TRUE(head.has_value()) << head.error().message;
  EXPECT_FALSE(head->is_dir);
  EXPECT_EQ(head->size, 3003U);
  EXPECT_EQ(head->data, std::string(1000, 'x'));
  auto tail = ReadOutputAt(out_, "ckpt/step-10.pt", 2990, 1000);
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(tail->data, std::string(10, 'x') + "end");
  auto past = ReadOutputAt(out_, "ckpt/step-10.pt", 5000, 1000);
  ASSERT_TRUE(past.has_value());
  EXPECT_TRUE(past->data.empty());
  // No more than one chunk per request, whatever is asked.
  Write(out_ / "big", std::string(model::kMaxOutputChunk + 10, 'b'));
  auto big = ReadOutputAt(out_, "big", 0, 0xffffffffU);
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->data.size(), model::kMaxOutputChunk);
}

TEST_F(OutputsTest, LinksSpecialFilesAndMissingPathsAreRefusedWithoutFollowingAnything) {
  fs::create_symlink("/etc/passwd", out_ / "passwd");
  fs::create_symlink("/etc", out_ / "etc");
  ASSERT_EQ(::mkfifo((out_ / "fifo").c_str(), 0600), 0);
  struct Case {
    const char* path;
    Code code;
    const char* says;
  };
  for (const Case& c : {Case{"passwd", Code::kInvalidArgument, "passwd is a symbolic link"},
                        Case{"etc/passwd", Code::kInvalidArgument, "etc is a symbolic link"},
                        Case{"fifo", Code::kInvalidArgument, "fifo is not a file or directory"},
                        Case{"metrics.json/x", Code::kInvalidArgument, "is not a directory"},
                        Case{"nothing", Code::kNotFound, "no nothing in the outputs"},
                        Case{"../out/metrics.json", Code::kInvalidArgument, "'..'"}}) {
    auto r = ReadOutputAt(out_, c.path, 0, 100);
    ASSERT_FALSE(r.has_value()) << c.path;
    EXPECT_EQ(r.error().code, c.code) << c.path << ": " << r.error().message;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
  }
  // A link is listed as what it is, never resolved.
  auto top = ReadOutputAt(out_, "", 0, 0);
  ASSERT_TRUE(top.has_value());
  for (const auto& e : top->entries) {
    if (e.name == "passwd" || e.name == "etc" || e.name == "fifo") {
      EXPECT_EQ(e.type, "other") << e.name;
    }
  }
  // A name that is not UTF-8 (a job may make one) is listed escaped, as
  // other, and no path reaches it.
  Write(out_ / "odd\xFFname", "x");
  auto listed = ReadOutputAt(out_, "", 0, 0);
  ASSERT_TRUE(listed.has_value());
  bool escaped = false;
  for (const auto& e : listed->entries) {
    if (e.name == "odd\\xFFname") escaped = e.type == "other";
  }
  EXPECT_TRUE(escaped);
  auto odd = ReadOutputAt(out_, "odd\xFFname", 0, 10);
  ASSERT_FALSE(odd.has_value());
  EXPECT_NE(odd.error().message.find("not valid UTF-8"), std::string::npos) << odd.error().message;
  auto gone = ReadOutputAt(dir_.path() / "no-such-run", "", 0, 0);
  ASSERT_FALSE(gone.has_value());
  EXPECT_EQ(gone.error().code, Code::kNotFound);
}

TEST_F(OutputsTest, AFileTheRunsIdentityDoesNotOwnIsNotRead) {
  if (::geteuid() != 0) GTEST_SKIP() << "changing owners needs root";
  // The output directory is the run identity's; a hard link to a file of
  // another owner (root's, say) is what a job could plant without reading it.
  ASSERT_EQ(::chown(out_.c_str(), 2000900002, 2000900002), 0);
  ASSERT_EQ(::chown((out_ / "metrics.json").c_str(), 2000900002, 2000900002), 0);
  Write(out_ / "roots", "root's secret");
  auto r = ReadOutputAt(out_, "roots", 0, 100);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Code::kPermissionDenied);
  EXPECT_NE(r.error().message.find("not the run's own"), std::string::npos) << r.error().message;
  // The same through a directory of another owner.
  auto through = ReadOutputAt(out_, "ckpt/step-10.pt", 0, 100);
  ASSERT_FALSE(through.has_value());
  EXPECT_EQ(through.error().code, Code::kPermissionDenied);
  auto own = ReadOutputAt(out_, "metrics.json", 0, 100);
  ASSERT_TRUE(own.has_value()) << own.error().message;
  EXPECT_EQ(own->data, R"({"loss": 0.1})");
}

TEST(RunnerOutputs, ARunWritesToBerthOutputDirWhichOutlivesItsAckUntilTheRetention) {
  testing::TempDir dir;
  ManualClock clock(1'800'000'000'000);
  RunnerOptions o;
  o.data_dir = dir.path() / "agent";
  o.shim_path = BERTH_SHIM_PATH;
  o.node_name = "node-1";
  o.output_retention_ms = 3'600'000;
  Runner runner(o, clock);
  ASSERT_TRUE(runner.Scan().has_value());
  StartOrder order;
  order.run_id = "9.0.1";
  order.command = {"sh", "-c",
                   "echo 0.25 > \"$BERTH_OUTPUT_DIR/loss\"; echo \"$BERTH_OUTPUT_DIR\""};
  ASSERT_TRUE(runner.Start(order).has_value());
  std::string log;
  bool exited = false;
  ASSERT_TRUE(testing::WaitFor([&] {
    for (auto& ev : runner.Poll()) {
      if (ev.kind == RunEvent::Kind::kLog) log += ev.data;
      if (ev.kind == RunEvent::Kind::kExited) exited = true;
    }
    return exited;
  }));
  EXPECT_EQ(log, runner.OutputDir("9.0.1").string() + "\n");
  struct stat st {};
  ASSERT_EQ(::stat(runner.OutputDir("9.0.1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700U);
  ASSERT_EQ(::stat(runner.OutputDir("9.0.1").parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711U);

  ASSERT_TRUE(runner.Ack("9.0.1").has_value());
  auto read = runner.ReadOutput("9.0.1", "loss", 0, 100);
  ASSERT_TRUE(read.has_value()) << read.error().message;
  EXPECT_EQ(read->data, "0.25\n");
  // Kept for the retention, counted from the ack, then swept.
  clock.Advance(3'599'000);
  runner.SweepOutputs(clock.NowMs());
  EXPECT_TRUE(runner.ReadOutput("9.0.1", "loss", 0, 100).has_value());
  clock.Advance(2'000);
  runner.SweepOutputs(clock.NowMs());
  auto swept = runner.ReadOutput("9.0.1", "", 0, 0);
  ASSERT_FALSE(swept.has_value());
  EXPECT_EQ(swept.error().code, Code::kNotFound);
  EXPECT_NE(swept.error().message.find("kept 1h after the run"), std::string::npos)
      << swept.error().message;
  EXPECT_FALSE(runner.ReadOutput("../etc", "", 0, 0).has_value());
}

}  // namespace
}  // namespace berth::agent
