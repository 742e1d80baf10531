// Every parser of documents from outside refuses a byte that is not UTF-8
// wherever it stands (a value, a key, a list element, deep in a block),
// naming the field as its other errors do, and accepts nothing; the error
// itself is valid UTF-8, so berthd can write it as JSON.
#include <gtest/gtest.h>

#include <string>

#include "common/utf8.h"
#include "model/alert_rules.h"
#include "model/job.h"
#include "model/policy.h"
#include "model/usage.h"

namespace berth::model {
namespace {

struct Utf8Case {
  std::string doc;
  std::string field;
  std::string byte_at;  // "byte 0xFF at offset N"
};

void ExpectRefused(const Error& e, const Utf8Case& c) {
  EXPECT_EQ(e.code, Code::kInvalidArgument);
  EXPECT_EQ(e.field, c.field) << e.message;
  EXPECT_NE(e.message.find("is not valid UTF-8 (" + c.byte_at + "); send UTF-8 text"),
            std::string::npos)
      << e.message;
  EXPECT_TRUE(ValidUtf8(e.message)) << EscapeInvalidUtf8(e.message);
  EXPECT_TRUE(ValidUtf8(e.field)) << EscapeInvalidUtf8(e.field);
}

TEST(Utf8Input, JobSpecRefusesTheByteInEveryKindOfField) {
  const Utf8Case cases[] = {
      {"name: a\ncommand: [python3, \"tr\xFFin.py\"]\n", "command[1]", "byte 0xFF at offset 2"},
      {"name: a\ncommand: [x]\nargs: [\"\xFF\"]\n", "args[0]", "byte 0xFF at offset 0"},
      {"name: a\ncommand: [x]\nenv: {FOO: \"ba\xFFr\"}\n", "env.FOO", "byte 0xFF at offset 2"},
      {"name: a\ncommand: [x]\nenv: {\"F\xFFO\": bar}\n", "env.F\\xFFO", "byte 0xFF at offset 1"},
      {"name: \"j\xFF\"\ncommand: [x]\n", "name", "byte 0xFF at offset 1"},
      {"name: a\ncommand: [x]\nworking_dir: \"/data/\xC0\xAF\"\n", "working_dir",
       "byte 0xC0 at offset 6"},
      {"name: a\ncommand: [x]\nresources: {gpus: 1, gpu_model: \"H100\xFF\"}\n",
       "resources.gpu_model", "byte 0xFF at offset 4"},
      {"name: a\ncommand: [x]\nnode_selector: {zone: \"\xED\xA0\x80\"}\n", "node_selector.zone",
       "byte 0xED at offset 0"},
      {"name: a\ncommand: [x]\ntolerations:\n  - {key: k, value: \"v\xFF\"}\n",
       "tolerations[0].value", "byte 0xFF at offset 1"},
      {"name: a\ncommand: [x]\nimage: \"img\xFF\"\n", "image", "byte 0xFF at offset 3"},
      {"name: a\ncommand: [x]\nmounts: [{path: \"/d\xFF\"}]\n", "mounts[0].path",
       "byte 0xFF at offset 2"},
      // An unknown field is refused for its bytes first: its name is escaped.
      {"name: a\ncommand: [x]\n\"col\xFFur\": red\n", "col\\xFFur", "byte 0xFF at offset 3"},
      // JSON, as POST /v1/jobs sends it.
      {"{\"name\": \"a\", \"command\": [\"x\", \"y\xFF\"], \"env\": {\"FOO\": \"1\"}}",
       "command[1]", "byte 0xFF at offset 1"},
      {"{\"name\": \"a\", \"command\": [\"x\"], \"env\": {\"FOO\": \"\xE6\xA8\"}}", "env.FOO",
       "byte 0xE6 at offset 0"},
  };
  for (const auto& c : cases) {
    auto spec = ParseJobSpec(c.doc);
    ASSERT_FALSE(spec.has_value()) << EscapeInvalidUtf8(c.doc);
    ExpectRefused(spec.error(), c);
  }
}

TEST(Utf8Input, JobSpecKeepsValidUtf8AsItIs) {
  auto spec = ParseJobSpec(
      "name: a\ncommand: [python3, \"训练.py\"]\nenv: {NOTE: \"modèle 🚀\"}\n"
      "node_selector: {zone: \"東京\"}\n");
  ASSERT_TRUE(spec.has_value()) << spec.error().field << ": " << spec.error().message;
  EXPECT_EQ(spec->command[1], "训练.py");
  EXPECT_EQ(spec->env.at("NOTE"), "modèle 🚀");
}

TEST(Utf8Input, AYamlErrorQuotingTheByteIsEscaped) {
  // yaml-cpp's message for an unknown escape quotes the byte after '\'.
  auto spec = ParseJobSpec("name: a\ncommand: [\"\\\xFF\"]\n");
  ASSERT_FALSE(spec.has_value());
  EXPECT_EQ(spec.error().code, Code::kInvalidArgument);
  EXPECT_TRUE(ValidUtf8(spec.error().message)) << EscapeInvalidUtf8(spec.error().message);
}

TEST(Utf8Input, AliasesCannotMakeTheCheckRunAway) {
  // Ten lists of ten, each the one before repeated: 10^10 values once expanded.
  std::string doc = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    doc += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) doc += prev + (k < 9 ? ", " : "");
    doc += "]\n";
  }
  auto spec = ParseJobSpec(doc);
  ASSERT_FALSE(spec.has_value());
  EXPECT_EQ(spec.error().code, Code::kInvalidArgument);
  EXPECT_NE(spec.error().message.find("aliases"), std::string::npos) << spec.error().message;
}

// Found by fuzz_job_spec: an alias inside its own anchor makes yaml-cpp build
// a cycle, and the walk recursed until the stack ran out.
TEST(Utf8Input, AnAliasInsideItsOwnAnchorIsRefused) {
  for (const char* doc : {"name: a\ncommand: &c [x, *c]\n", "a: &a {b: *a}\n",
                          "name: a\ncommand: [x]\nenv: &e {A: *e}\n"}) {
    auto spec = ParseJobSpec(doc);
    ASSERT_FALSE(spec.has_value()) << doc;
    EXPECT_EQ(spec.error().code, Code::kInvalidArgument);
    EXPECT_NE(spec.error().message.find("levels deep"), std::string::npos) << spec.error().message;
  }
  auto policy = ParsePolicy("queues: &q [{name: v, children: *q}]\n");
  ASSERT_FALSE(policy.has_value());
  EXPECT_NE(policy.error().message.find("levels deep"), std::string::npos)
      << policy.error().message;
}

TEST(Utf8Input, PolicyRefusesTheByteAnywhere) {
  const Utf8Case cases[] = {
      {"pools: [{name: a, selector: {zone: \"\xFF\"}}]\n", "pools[0].selector.zone",
       "byte 0xFF at offset 0"},
      {"queues:\n  - name: v\n    children:\n      - name: \"t\xFF\"\n",
       "queues[0].children[0].name", "byte 0xFF at offset 1"},
      {"queues: [{name: v}]\ntenants:\n  v:\n    run_as: {user: \"r\xFFot\"}\n",
       "tenants.v.run_as.user", "byte 0xFF at offset 1"},
      {"queues: [{name: v, quota: {\"gpus/H\xFF\": 1}}]\n", "queues[0].quota.gpus/H\\xFF",
       "byte 0xFF at offset 6"},
  };
  for (const auto& c : cases) {
    auto p = ParsePolicy(c.doc);
    ASSERT_FALSE(p.has_value()) << EscapeInvalidUtf8(c.doc);
    ExpectRefused(p.error(), c);
  }
}

TEST(Utf8Input, AlertRulesRefuseTheByte) {
  const Utf8Case cases[] = {
      {"sinks: [{name: ops, url: \"https://h/\xFF\"}]\nrules: []\n", "sinks[0].url",
       "byte 0xFF at offset 10"},
      {"rules: [{name: \"n\xFF\", kind: budget}]\n", "rules[0].name", "byte 0xFF at offset 1"},
  };
  for (const auto& c : cases) {
    auto r = ParseAlertRules(c.doc);
    ASSERT_FALSE(r.has_value()) << EscapeInvalidUtf8(c.doc);
    ExpectRefused(r.error(), c);
  }
}

TEST(Utf8Input, PriceTablesAndUsageGroupingsRefuseTheByte) {
  auto t = ParsePriceTable("currency: \"US\xFF\"\n");
  ASSERT_FALSE(t.has_value());
  ExpectRefused(t.error(), {"", "currency", "byte 0xFF at offset 2"});
  t = ParsePriceTable("prices: [{model: \"H\xFF\", per_gpu_hour: 2}]\n");
  ASSERT_FALSE(t.has_value());
  ExpectRefused(t.error(), {"", "prices[0].model", "byte 0xFF at offset 1"});
  auto keys = ParseUsageKeys("tenant,d\xFFy");
  ASSERT_FALSE(keys.has_value());
  ExpectRefused(keys.error(), {"", "by", "byte 0xFF at offset 8"});
}

}  // namespace
}  // namespace berth::model
