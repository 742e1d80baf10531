// The one HTML escaper and the one CSV writer.
#include "common/text_escape.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(HtmlEscapeTest, EscapesTheFiveSpecialCharacters) {
  EXPECT_EQ(HtmlEscape(R"(<a href="x">Tom & Jerry's</a>)"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;");
  EXPECT_EQ(HtmlEscape("plain text, 文字"), "plain text, 文字");
  EXPECT_EQ(HtmlEscape(""), "");
  // An entity already written is escaped again: the input is text, not HTML.
  EXPECT_EQ(HtmlEscape("&amp;"), "&amp;amp;");
}

TEST(CsvTest, QuotesOnlyFieldsThatNeedIt) {
  EXPECT_EQ(CsvField("alice"), "alice");
  EXPECT_EQ(CsvField(""), "");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(CsvField("cr\rhere"), "\"cr\rhere\"");
  // No formula guard: the value is kept as it is.
  EXPECT_EQ(CsvField("=1+1"), "=1+1");
}

TEST(CsvTest, ARowJoinsFieldsWithCommasAndEndsInCrlf) {
  EXPECT_EQ(CsvRow({"seq", "a,b", "", "x\"y"}), "seq,\"a,b\",,\"x\"\"y\"\r\n");
  EXPECT_EQ(CsvRow({}), "\r\n");
}

}  // namespace
}  // namespace berth
