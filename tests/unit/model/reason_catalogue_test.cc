// The reason catalogue: every code and phrase in both languages, well formed,
// with the same placeholders in English and Chinese, and every placeholder of
// a code's sentence given a value by the renderer.
#include "model/reason_catalogue.h"

#include <gtest/gtest.h>

#include <string>

#include "model/message_template.h"

namespace berth::model {
namespace {

void ExpectSameShapeInBothLanguages(const Message& m, const std::string& what) {
  EXPECT_EQ(TemplateSyntaxError(m.en), "") << what << " (en): " << m.en;
  EXPECT_EQ(TemplateSyntaxError(m.zh), "") << what << " (zh): " << m.zh;
  EXPECT_EQ(TemplatePlaceholders(m.en), TemplatePlaceholders(m.zh))
      << what << " names different placeholders in English and Chinese:\n  " << m.en << "\n  "
      << m.zh;
}

TEST(ReasonCatalogueTest, EveryCodeHasBothLanguagesWithTheSamePlaceholders) {
  EXPECT_EQ(CodeText(ReasonCode::kNone).en, "");
  EXPECT_EQ(CodeText(ReasonCode::kNone).zh, "");
  for (int c = 1; c <= static_cast<int>(kLastReasonCode); ++c) {
    const auto code = static_cast<ReasonCode>(c);
    const Message& m = CodeText(code);
    const std::string name(ReasonCodeName(code));
    EXPECT_FALSE(m.en.empty()) << name << " has no English text";
    EXPECT_FALSE(m.zh.empty()) << name << " has no Chinese text";
    EXPECT_NE(m.en, m.zh) << name;
    ExpectSameShapeInBothLanguages(m, name);
  }
}

TEST(ReasonCatalogueTest, EveryPhraseAndNodeCauseHasBothLanguagesWithTheSamePlaceholders) {
  for (int p = 0; p <= static_cast<int>(kLastPhrase); ++p) {
    const auto phrase = static_cast<Phrase>(p);
    const Message& m = PhraseText(phrase);
    const std::string name(PhraseName(phrase));
    EXPECT_FALSE(m.en.empty()) << name;
    EXPECT_FALSE(m.zh.empty()) << name;
    ExpectSameShapeInBothLanguages(m, name);
  }
  EXPECT_EQ(NodeCauseTexts().size(), 18U);
  for (const auto& [key, text] : NodeCauseTexts()) {
    ExpectSameShapeInBothLanguages(text, std::string(key));
    EXPECT_EQ(TemplatePlaceholders(text.en), std::vector<std::string>{"n"}) << key;
  }
  // The change that lifts each cause: the same causes in the same order,
  // both languages, no placeholders (the node layer's phrase has the count).
  ASSERT_EQ(NodeCauseChanges().size(), NodeCauseTexts().size());
  for (std::size_t i = 0; i < NodeCauseChanges().size(); ++i) {
    const auto& [key, change] = NodeCauseChanges()[i];
    EXPECT_EQ(key, NodeCauseTexts()[i].key);
    EXPECT_FALSE(change.en.empty()) << key;
    EXPECT_FALSE(change.zh.empty()) << key;
    EXPECT_NE(change.en, change.zh) << key;
    EXPECT_TRUE(TemplatePlaceholders(change.en).empty()) << key;
    EXPECT_TRUE(TemplatePlaceholders(change.zh).empty()) << key;
  }
}

TEST(ReasonCatalogueTest, AnUnknownCodeRendersNothing) {
  EXPECT_EQ(CodeText(static_cast<ReasonCode>(static_cast<int>(kLastReasonCode) + 1)).en, "");
}

// A placeholder the renderer leaves without a value shows as "{name}"; render
// every code with the numbers its sentence reads and look for one.
TEST(ReasonCatalogueTest, TheRendererGivesEveryPlaceholderAValue) {
  Reason r{ReasonCode::kNone,
           {{"replica", 1},
            {"exit_code", 3},
            {"blocked_by", 4},
            {"nodes", 2},
            {"replicas", 3},
            {"gpus_per_replica", 8},
            {std::string(kCauseGang), 1},
            {std::string(kCauseTooFewGpus), 2},
            {std::string(kAheadJobs), 1},
            {std::string(kAheadGpus), 8},
            {std::string(kQueueRequested), 1000}},
           "vision gpus"};
  for (int c = 0; c <= static_cast<int>(kLastReasonCode); ++c) {
    r.code = static_cast<ReasonCode>(c);
    for (Lang lang : {Lang::kEn, Lang::kZh}) {
      for (auto signal : {0, 9}) {
        r.counts["signal"] = signal;
        const std::string text = RenderReason(r, lang);
        EXPECT_EQ(text.find_first_of("{}[]|"), std::string::npos)
            << ReasonCodeName(r.code) << " " << LangName(lang) << ": " << text;
      }
    }
  }
}

}  // namespace
}  // namespace berth::model
