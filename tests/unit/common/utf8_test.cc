#include "common/utf8.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(Utf8, ValidSequencesPassAndEveryKindOfInvalidOneIsCaught) {
  EXPECT_TRUE(ValidUtf8(""));
  EXPECT_TRUE(ValidUtf8("model.pt"));
  EXPECT_TRUE(ValidUtf8("模型-检查点.pt"));
  EXPECT_TRUE(ValidUtf8("\xF0\x9F\x9A\x80"));           // U+1F680, four bytes
  EXPECT_TRUE(ValidUtf8("\xF4\x8F\xBF\xBF"));           // U+10FFFF, the last
  for (const char* bad : {"\xFF", "a\x80", "\xC0\xAF",  // a lone continuation, an overlong '/'
                          "\xE0\x80\xAF",               // overlong, three bytes
                          "\xED\xA0\x80",               // a surrogate
                          "\xF4\x90\x80\x80",           // above U+10FFFF
                          "\xE6\xA8",                   // cut short
                          "\xF5\x80\x80\x80"}) {
    EXPECT_FALSE(ValidUtf8(bad)) << EscapeInvalidUtf8(bad);
  }
}

TEST(Utf8, EscapingKeepsValidTextAndNamesEachOddByte) {
  EXPECT_EQ(EscapeInvalidUtf8("ok-模型"), "ok-模型");
  EXPECT_EQ(EscapeInvalidUtf8("a\xFF"
                              "b\xE6\xA8"),
            "a\\xFFb\\xE6\\xA8");
  EXPECT_TRUE(ValidUtf8(EscapeInvalidUtf8("\xC0\xAF\xED\xA0\x80")));
}

TEST(Utf8, TheFirstOddByteIsFoundAndNamedWithItsOffset) {
  EXPECT_EQ(FirstInvalidUtf8("模型"), std::nullopt);
  EXPECT_EQ(FirstInvalidUtf8("\xFF"), 0U);
  EXPECT_EQ(FirstInvalidUtf8("模\xE6\xA8"), 3U);  // a sequence cut short: its lead byte
  EXPECT_TRUE(CheckUtf8("ok", "env.FOO").has_value());
  auto st = CheckUtf8("ab\xFF", "env.F\xFFO");
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, Code::kInvalidArgument);
  EXPECT_EQ(st.error().field, "env.F\\xFFO");  // the field's own odd bytes escaped
  EXPECT_EQ(st.error().message, "is not valid UTF-8 (byte 0xFF at offset 2); send UTF-8 text");
}

}  // namespace
}  // namespace berth
