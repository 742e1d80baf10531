// The small text forms the CLI's tables are built from.
#include "cli/format.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/json_view.h"
#include "cli/table.h"

namespace berth::cli {
namespace {

TEST(FormatAge, CoarsensAsItGrows) {
  EXPECT_EQ(FormatAge(0), "0s");
  EXPECT_EQ(FormatAge(45'999), "45s");
  EXPECT_EQ(FormatAge(60'000), "1m");
  EXPECT_EQ(FormatAge(192'000), "3m12s");
  EXPECT_EQ(FormatAge(42 * 60'000 + 17'000), "42m");
  EXPECT_EQ(FormatAge(5 * 3'600'000 + 3 * 60'000), "5h3m");
  EXPECT_EQ(FormatAge(20 * 3'600'000 + 59 * 60'000), "20h");
  EXPECT_EQ(FormatAge(3 * 86'400'000 + 4 * 3'600'000), "3d4h");
  EXPECT_EQ(FormatAge(12 * 86'400'000LL + 5 * 3'600'000LL), "12d");
}

TEST(FormatAge, ClockSkewIsZeroNotNegative) {
  EXPECT_EQ(FormatAge(-5'000), "0s");
}

TEST(JsonView, ABooleanIsReadOnlyWhenItIsOne) {
  const auto doc = nlohmann::json::parse(
      R"({"on": true, "off": false, "null": null, "word": "yes", "one": 1, "s": {"up": true}})");
  EXPECT_TRUE(Bool(doc, "on"));
  EXPECT_FALSE(Bool(doc, "off", true));
  EXPECT_TRUE(Bool(doc, "s.up"));
  // Absent, null or not a boolean: the fallback, never a throw.
  for (const char* key : {"missing", "null", "word", "one", "s.down", "on.deeper"}) {
    EXPECT_FALSE(Bool(doc, key)) << key;
    EXPECT_TRUE(Bool(doc, key, true)) << key;
  }
  EXPECT_TRUE(Bool(nlohmann::json::array(), "on", true));
}

TEST(AgeSince, UnknownStartIsDash) {
  EXPECT_EQ(AgeSince(100'000, std::nullopt), "-");
  EXPECT_EQ(AgeSince(100'000, 40'000), "1m");
}

TEST(FormatMemory, ExactWhenShortApproximateOtherwise) {
  EXPECT_EQ(FormatMemory(85'899'345'920), "80Gi");
  EXPECT_EQ(FormatMemory(512), "512");
  EXPECT_EQ(FormatMemory(1536ULL << 20), "1536Mi");
  EXPECT_EQ(FormatMemory(2'063'731'998'720), "1.9Ti");
  EXPECT_EQ(FormatMemory(85'520'809'984), "79.6Gi");
}

TEST(FormatCpuMillis, WholeCpusPlainFractionsInMillis) {
  EXPECT_EQ(FormatCpuMillis(16'000), "16");
  EXPECT_EQ(FormatCpuMillis(1'500), "1500m");
}

TEST(FormatExit, SignalWinsOverCode) {
  EXPECT_EQ(FormatExit(std::nullopt, std::nullopt), "-");
  EXPECT_EQ(FormatExit(0, std::nullopt), "0");
  EXPECT_EQ(FormatExit(137, 9), "SIGKILL");
  EXPECT_EQ(FormatExit(std::nullopt, 200), "signal 200");
  // Rows written before signals were stored as NULL say 0 for "none".
  EXPECT_EQ(FormatExit(1, 0), "1");
}

TEST(ShellJoin, QuotesOnlyWhatAShellWouldSplit) {
  EXPECT_EQ(ShellJoin({"python3", "train.py", "--lr=0.1"}), "python3 train.py --lr=0.1");
  EXPECT_EQ(ShellJoin({"sh", "-c", "echo it's $HOME"}), R"(sh -c 'echo it'\''s $HOME')");
  EXPECT_EQ(ShellJoin({"echo", ""}), "echo ''");
}

TEST(Table, AlignsColumnsWithoutTrailingBlanks) {
  Table table({"ID", "NAME", "STATE"});
  table.AddRow({"12", "resnet50", "Running"});
  table.AddRow({"7", "", "Pending"});
  EXPECT_EQ(table.Render(),
            "ID   NAME       STATE\n"
            "12   resnet50   Running\n"
            "7    -          Pending\n");
}

TEST(Table, ShortRowsArePaddedAndNewlinesFlattened) {
  Table table({"A", "B"});
  table.AddRow({"x\ny"});
  EXPECT_EQ(table.Render(), "A     B\nx y   -\n");
}

TEST(Table, WidthCountsCharactersNotBytes) {
  Table table({"N", "M"});
  table.AddRow({"é", "x"});
  EXPECT_EQ(table.Render(), "N   M\né   x\n");
}

TEST(Truncate, CutsWithEllipsisAndKeepsWholeCharacters) {
  EXPECT_EQ(Truncate("short", 10), "short");
  EXPECT_EQ(Truncate("0123456789abc", 10), "0123456...");
  EXPECT_EQ(Truncate("ééééé", 4), "é...");
}

// A terminal gives a Han character two columns: tables of Chinese reasons
// and `berth why --lang zh` line up only when widths count them so.
TEST(Table, WideCharactersTakeTwoColumns) {
  EXPECT_EQ(DisplayWidth("作业"), 4U);
  EXPECT_EQ(DisplayWidth("GPU 不足：2"), 11U);
  EXPECT_EQ(DisplayWidth("\xff"), 1U);  // a stray byte is one column, never a crash
  Table table({"原因", "N"});
  table.AddRow({"x", "1"});
  EXPECT_EQ(table.Render(), "原因   N\nx      1\n");
  EXPECT_EQ(Truncate("节点未就绪节点", 7), "节点...");
  EXPECT_EQ(Truncate("节点未就绪节点", 8), "节点...");
  EXPECT_EQ(Truncate("a节点未就绪", 8), "a节点...");
}

}  // namespace
}  // namespace berth::cli
