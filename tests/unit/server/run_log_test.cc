// A run's log under berthd's size limit: head, one marker, the latest
// output; absolute offsets keep working through resent chunks and restarts.
#include "control/run_log.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace berth::server {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kLimit = 8192;  // head 2048, tail 6144

// Numbered lines, so that any misplaced byte shows.
std::string Output(std::size_t bytes) {
  std::string out;
  for (int i = 0; out.size() < bytes; ++i) out += fmt::format("line {:06}\n", i);
  out.resize(bytes);
  return out;
}

class RunLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "berth-runlog-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ / "7" / "run-1.log";
    fs::create_directories(path_.parent_path());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Ships `text` from `from` in 1000-byte chunks, as an agent does.
  void Ship(const std::string& text, std::size_t from, std::size_t to) {
    for (std::size_t at = from; at < to; at += 1000) {
      std::size_t n = std::min<std::size_t>(1000, to - at);
      ASSERT_TRUE(WriteRunLog(path_, at, std::string_view(text).substr(at, n), kLimit).has_value());
    }
  }

  // Bytes on disk for this run: every generation and the index.
  std::uint64_t DiskBytes() const {
    std::uint64_t n = 0;
    for (const auto& e : fs::directory_iterator(path_.parent_path())) n += fs::file_size(e.path());
    return n;
  }

  fs::path dir_;
  fs::path path_;
};

TEST_F(RunLogTest, UnderTheLimitTheLogIsExactlyWhatWasSent) {
  const std::string text = Output(5000);
  Ship(text, 0, text.size());
  EXPECT_EQ(ReadWholeRunLog(path_, kLimit), text);
  EXPECT_EQ(RunLogReceived(path_), text.size());
  EXPECT_FALSE(fs::exists(path_.string() + ".index"));
}

TEST_F(RunLogTest, PastTheLimitReadersSeeHeadMarkerAndLatestOutput) {
  const std::string text = Output(40'000);
  Ship(text, 0, 25'000);
  // Resent chunks: in the head, in the dropped middle, in the tail. Each
  // must change nothing.
  ASSERT_TRUE(WriteRunLog(path_, 1000, text.substr(1000, 1000), kLimit).has_value());
  ASSERT_TRUE(WriteRunLog(path_, 10'000, text.substr(10'000, 1000), kLimit).has_value());
  ASSERT_TRUE(WriteRunLog(path_, 24'000, text.substr(24'000, 1000), kLimit).has_value());
  Ship(text, 25'000, text.size());

  EXPECT_EQ(RunLogReceived(path_), 40'000u) << "the agent must resume after every byte received";
  const std::string marker = fmt::format(
      "[berth: {} bytes of output dropped here: this run's log passed its limit of 8Ki, so Berth "
      "keeps its head and its latest output]\n",
      40'000 - kLimit);
  // The head ends mid-line ("line 000186\n" is 12 bytes): the marker starts
  // on a line of its own.
  const std::string want = text.substr(0, 2048) + "\n" + marker + text.substr(40'000 - 6144);
  EXPECT_EQ(ReadWholeRunLog(path_, kLimit), want);
  EXPECT_LE(DiskBytes(), kLimit + kLimit / 4 + 100) << "the log keeps growing on disk";

  // The classifier's tail: the latest bytes, and the marker only when it
  // reaches back past the kept tail.
  EXPECT_EQ(RunLogTail(path_, 1000, kLimit), text.substr(39'000));
  // 7000 bytes back reaches 856 bytes into the dropped middle.
  EXPECT_EQ(RunLogTail(path_, 7000, kLimit),
            "[berth: 856 bytes of output dropped here: this run's log passed its limit of 8Ki, "
            "so Berth keeps its head and its latest output]\n" +
                text.substr(40'000 - 6144));
}

TEST_F(RunLogTest, ReadersSeeTheLimitEvenBeforeTheFirstTrim) {
  // 9,000 bytes: past the 8 KiB limit, within the slack before a trim.
  const std::string text = Output(9000);
  Ship(text, 0, text.size());
  EXPECT_FALSE(fs::exists(path_.string() + ".index"));
  EXPECT_EQ(ReadWholeRunLog(path_, kLimit),
            text.substr(0, 2048) + "\n" +
                fmt::format("[berth: {} bytes of output dropped here: this run's log passed its "
                            "limit of 8Ki, so Berth keeps its head and its latest output]\n",
                            9000 - kLimit) +
                text.substr(9000 - 6144));
  EXPECT_EQ(RunLogReceived(path_), 9000u);
}

TEST_F(RunLogTest, AFollowerThatFellBehindATrimIsToldHowMuchItMissed) {
  const std::string text = Output(30'000);
  Ship(text, 0, 3000);
  auto first = ReadRunLog(path_, 0, 64 * 1024, kLimit);
  EXPECT_EQ(first.data, text.substr(0, 3000));
  Ship(text, 3000, text.size());
  auto next = ReadRunLog(path_, first.next, 64 * 1024, kLimit);
  const std::uint64_t tail_from = 30'000 - 6144;
  EXPECT_NE(
      next.data.find(fmt::format("[berth: {} bytes of output dropped here", tail_from - 3000)),
      std::string::npos)
      << next.data;
  EXPECT_EQ(next.next, tail_from);
  auto rest = ReadRunLog(path_, next.next, 64 * 1024, kLimit);
  EXPECT_EQ(rest.data, text.substr(tail_from));
}

TEST_F(RunLogTest, TheMappingSurvivesARestartAndALeftoverTrim) {
  const std::string text = Output(50'000);
  Ship(text, 0, 20'000);
  // What a berthd killed mid-trim leaves: the next generation's file,
  // never committed by the index. Nothing in memory carries over either:
  // every call reads the index afresh, as a restarted berthd does.
  const auto index = path_.string() + ".index";
  ASSERT_TRUE(fs::exists(index));
  auto gen = nlohmann::json::parse(std::ifstream(index)).at("gen").get<int>();
  {
    std::ofstream(fmt::format("{}.{}", path_.string(), gen + 1))
        << "garbage from a trim that never committed";
  }
  EXPECT_EQ(RunLogReceived(path_), 20'000u);
  // The agent resumes from what berthd reports, resending a little more.
  Ship(text, 19'000, text.size());
  EXPECT_EQ(RunLogReceived(path_), 50'000u);
  const std::string view = ReadWholeRunLog(path_, kLimit);
  EXPECT_TRUE(view.starts_with(text.substr(0, 2048))) << view.substr(0, 100);
  EXPECT_TRUE(view.ends_with(text.substr(50'000 - 6144)));
  EXPECT_NE(view.find(fmt::format("[berth: {} bytes", 50'000 - kLimit)), std::string::npos);
  EXPECT_EQ(view.find("garbage"), std::string::npos);
}

// A run's end syncs the generation in use, whatever trims came before,
// and reports every byte received; a run that printed nothing has no log.
TEST_F(RunLogTest, SyncingReportsEveryByteReceivedAfterTrimsAndNothingForASilentRun) {
  EXPECT_EQ(SyncRunLog(dir_ / "8" / "silent.log").value(), 0U);
  const std::string text = Output(50'000);
  Ship(text, 0, text.size());
  ASSERT_TRUE(fs::exists(path_.string() + ".index")) << "the log was trimmed";
  EXPECT_EQ(SyncRunLog(path_).value(), 50'000U);
  EXPECT_EQ(RunLogReceived(path_), 50'000U);
}

TEST_F(RunLogTest, NoLimitKeepsEverything) {
  const std::string text = Output(30'000);
  for (std::size_t at = 0; at < text.size(); at += 1000) {
    ASSERT_TRUE(WriteRunLog(path_, at, std::string_view(text).substr(at, 1000), 0).has_value());
  }
  EXPECT_EQ(ReadWholeRunLog(path_, 0), text);
}

}  // namespace
}  // namespace berth::server
