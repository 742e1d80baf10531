// The one strict reader of a YAML mapping (model/yaml_object.h), alone and
// through every document type that uses it: a key given twice is refused
// with its full field path wherever it sits, as is an unknown key.
#include "model/yaml_object.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/alert_rules.h"
#include "model/job.h"
#include "model/policy.h"
#include "model/usage.h"

namespace berth::model {
namespace {

constexpr std::string_view kFields[] = {"gpus", "cpu"};

TEST(YamlObject, ReadsAMappingOfAllowedKeys) {
  auto o = YamlObject::Read(YAML::Load("{gpus: 2}"), "resources", kFields);
  ASSERT_TRUE(o.has_value()) << o.error().message;
  EXPECT_TRUE(o->Has("gpus"));
  EXPECT_FALSE(o->Has("cpu"));
  EXPECT_EQ(o->Get("gpus").Scalar(), "2");
  EXPECT_EQ(o->PathOf("gpus"), "resources.gpus");
  EXPECT_EQ(FieldPath("", "gpus"), "gpus");
}

// yaml-cpp keeps both pairs of a repeated key in the parsed mapping (which
// is what lets the reader see the repeat); a lookup returns only one.
TEST(YamlObject, YamlCppKeepsBothPairsOfARepeatedKey) {
  const YAML::Node n = YAML::Load("{gpus: 1, gpus: 8}");
  EXPECT_EQ(n.size(), 2U);
}

TEST(YamlObject, RefusesARepeatedKeyNamingItsPath) {
  auto o = YamlObject::Read(YAML::Load("{gpus: 1, cpu: 2, gpus: 8}"), "queues[0].quota", kFields);
  ASSERT_FALSE(o.has_value());
  EXPECT_EQ(o.error().code, Code::kInvalidArgument);
  EXPECT_EQ(o.error().field, "queues[0].quota.gpus");
  EXPECT_EQ(o.error().message, "field 'queues[0].quota.gpus' is given twice; give it once");
  auto any = YamlObject::ReadAnyKeys(YAML::Load("{A: 1, A: 2}"), "env");
  ASSERT_FALSE(any.has_value());
  EXPECT_EQ(any.error().field, "env.A");
}

TEST(YamlObject, RefusesAnUnknownKeyListingTheAllowedOnes) {
  auto o = YamlObject::Read(YAML::Load("{gpus: 1, colour: blue}"), "resources", kFields);
  ASSERT_FALSE(o.has_value());
  EXPECT_EQ(o.error().field, "resources.colour");
  EXPECT_EQ(o.error().message, "unknown field 'colour'; allowed fields are: gpus, cpu");
  EXPECT_TRUE(YamlObject::ReadAnyKeys(YAML::Load("{colour: blue}"), "env").has_value());
}

TEST(YamlObject, RefusesANonMappingAndAKeyThatIsNotAName) {
  for (const char* doc : {"[gpus]", "gpus", "~"}) {
    SCOPED_TRACE(doc);
    auto o = YamlObject::Read(YAML::Load(doc), "resources", kFields, "must be a mapping {gpus}");
    ASSERT_FALSE(o.has_value());
    EXPECT_EQ(o.error().field, "resources");
    EXPECT_EQ(o.error().message, "must be a mapping {gpus}");
  }
  auto missing = YamlObject::Read(YAML::Load("{}")["x"], "x", kFields);
  EXPECT_FALSE(missing.has_value());
  auto o = YamlObject::Read(YAML::Load("{[a]: 1}"), "resources", kFields);
  ASSERT_FALSE(o.has_value());
  EXPECT_EQ(o.error().field, "resources");
  EXPECT_EQ(o.error().message, "field names must be plain strings");
}

struct Twice {
  const char* what;
  const char* yaml;
  const char* field;
};

Status ParseAs(std::string_view what, std::string_view yaml) {
  auto fail = [](const auto& r) -> Status {
    if (r) return Ok();
    return std::unexpected(r.error());
  };
  if (what == "job") return fail(ParseJobSpec(yaml));
  if (what == "policy") return fail(ParsePolicy(yaml));
  if (what == "prices") return fail(ParsePriceTable(yaml));
  return fail(ParseAlertRules(yaml));
}

class RepeatedKey : public ::testing::TestWithParam<Twice> {};

// Before the strict reader, price tables and alert rules kept one copy of a
// repeated key silently.
TEST_P(RepeatedKey, IsRefusedWithItsFieldPath) {
  const Twice& c = GetParam();
  const Status st = ParseAs(c.what, c.yaml);
  ASSERT_FALSE(st.has_value()) << c.yaml;
  EXPECT_EQ(st.error().code, Code::kInvalidArgument);
  EXPECT_EQ(st.error().field, c.field);
  EXPECT_EQ(st.error().message, fmt::format("field '{}' is given twice; give it once", c.field));
}

INSTANTIATE_TEST_SUITE_P(
    EveryDocument, RepeatedKey,
    ::testing::Values(
        Twice{"job", "name: a\ncommand: [x]\ncheckpoint: {dir: /c, dir: /d}\n", "checkpoint.dir"},
        Twice{"job", "name: a\nname: b\ncommand: [x]\n", "name"},
        Twice{"policy", "queues:\n  - name: a\n    kind: training\n    kind: inference\n",
              "queues[0].kind"},
        Twice{"prices", "currency: USD\ncurrency: EUR\ndefault: 1\n", "currency"},
        Twice{"prices", "prices:\n  - {model: H100, per_gpu_hour: 2, per_gpu_hour: 0}\n",
              "prices[0].per_gpu_hour"},
        Twice{"alerts", "rules: []\nrules:\n  - {name: a, kind: budget}\n", "rules"},
        Twice{"alerts", "rules:\n  - {name: a, kind: budget, severity: info, severity: critical}\n",
              "rules[0].severity"},
        Twice{"alerts",
              "sinks:\n  - {name: s, url: https://h.example/a, url: http://h.example/b}\n"
              "rules: []\n",
              "sinks[0].url"}),
    [](const ::testing::TestParamInfo<Twice>& param) {
      return fmt::format("{}_{}", param.param.what, param.index);
    });

}  // namespace
}  // namespace berth::model
