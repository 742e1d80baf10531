// The reason catalogue's template language: placeholders, optional segments
// with alternatives, and the syntax check the catalogue test runs.
#include "model/message_template.h"

#include <gtest/gtest.h>

namespace berth::model {
namespace {

TEST(MessageTemplateTest, FillsNamedPlaceholders) {
  TemplateArgs a;
  a.Set("replica", 2).Set("code", std::string("137"));
  EXPECT_EQ(FillTemplate("replica {replica} exited with code {code}", a),
            "replica 2 exited with code 137");
  // A later Set replaces the value.
  a.Set("replica", 3);
  EXPECT_EQ(FillTemplate("{replica}{replica}", a), "33");
}

TEST(MessageTemplateTest, AMissingArgumentShowsItsName) {
  EXPECT_EQ(FillTemplate("job {job} waits", TemplateArgs()), "job {job} waits");
}

TEST(MessageTemplateTest, ValuesAreNotReadAsTemplateSyntax) {
  EXPECT_EQ(FillTemplate("by {by}", TemplateArgs().Set("by", "[{x}|y]")), "by [{x}|y]");
}

TEST(MessageTemplateTest, AnOptionalSegmentTakesTheFirstAlternativeWithAllItsValues) {
  const std::string_view t = "replica 1 [killed by {signal}|exited with {code}|ended]";
  EXPECT_EQ(FillTemplate(t, TemplateArgs().Set("signal", 9).Set("code", 0)),
            "replica 1 killed by 9");
  EXPECT_EQ(FillTemplate(t, TemplateArgs().Set("code", 3)), "replica 1 exited with 3");
  EXPECT_EQ(FillTemplate(t, TemplateArgs()), "replica 1 ended");
  // Without an alternative that always matches, nothing is written.
  EXPECT_EQ(FillTemplate("cancelled[ by {by}].", TemplateArgs()), "cancelled.");
  EXPECT_EQ(FillTemplate("cancelled[ by {by}].", TemplateArgs().Set("by", "alice")),
            "cancelled by alice.");
  // Every placeholder of an alternative must have a value.
  EXPECT_EQ(FillTemplate("[{a} and {b}|one]", TemplateArgs().Set("a", 1)), "one");
  // An empty value is a value.
  EXPECT_EQ(FillTemplate("x[{a}y]", TemplateArgs().Set("a", "")), "xy");
}

TEST(MessageTemplateTest, ListsPlaceholdersOnceEach) {
  EXPECT_EQ(TemplatePlaceholders("{b} [{a}|{b} {c}] {a}"),
            (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(TemplatePlaceholders("no placeholders").empty());
}

TEST(MessageTemplateTest, SyntaxErrorsAreNamed) {
  EXPECT_EQ(TemplateSyntaxError("a {b} [c {d}|e] f"), "");
  EXPECT_NE(TemplateSyntaxError("a {b"), "");
  EXPECT_NE(TemplateSyntaxError("a b}"), "");
  EXPECT_NE(TemplateSyntaxError("a {}"), "");
  EXPECT_NE(TemplateSyntaxError("a [b"), "");
  EXPECT_NE(TemplateSyntaxError("a b]"), "");
  EXPECT_NE(TemplateSyntaxError("a [b [c]]"), "");
  EXPECT_NE(TemplateSyntaxError("a | b"), "");
  EXPECT_NE(TemplateSyntaxError("a {b [c]}"), "");
}

}  // namespace
}  // namespace berth::model
