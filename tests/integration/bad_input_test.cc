// Bad job specs over REST, bytes that are not UTF-8 among them, are refused
// with 400 and a JSON error that names the offending field, and nothing is
// stored.
#include <string>

#include "integration/fixture.h"

namespace berth::it {
namespace {

struct BadSpec {
  std::string what;
  std::string body;
  std::string field;  // empty: the error names no field
};

TEST_F(IntegrationTest, BadInputIsRefusedAndNotStored) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  // The GPU model check needs the inventory, so wait for the node.
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  const std::vector<BadSpec> cases{
      {"unknown field", "name: x\ncommand: [\"true\"]\ncolour: blue\n", "colour"},
      {"negative GPU count", "name: x\ncommand: [\"true\"]\nresources: {gpus: -1}\n",
       "resources.gpus"},
      {"GPU model no node has",
       "name: x\ncommand: [\"true\"]\nresources: {gpus: 1, gpu_model: TPU-v5}\n",
       "resources.gpu_model"},
      {"malformed YAML", "name: [x\ncommand: {\n", ""},
      {"64-character name", "name: " + std::string(64, 'a') + "\ncommand: [\"true\"]\n", "name"},
      // Bytes that are not UTF-8 could be stored but never served as JSON.
      {"byte 0xFF in an argument", "name: x\ncommand: [\"true\", \"a\xFF\"]\n", "command[1]"},
      {"byte 0xFF in a JSON env value",
       "{\"name\": \"x\", \"command\": [\"true\"], \"env\": {\"FOO\": \"\xFF\"}}", "env.FOO"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto r = berthd.http().Post("/v1/jobs", c.body);
    EXPECT_EQ(r.status, 400) << r.text;
    ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.text;
    const auto& error = r.body["error"];
    EXPECT_EQ(error.value("code", ""), "InvalidArgument") << r.text;
    EXPECT_FALSE(error.value("message", "").empty()) << r.text;
    EXPECT_EQ(error.value("field", ""), c.field) << r.text;
  }

  auto jobs = berthd.Jobs();
  ASSERT_TRUE(jobs.is_array());
  EXPECT_TRUE(jobs.empty()) << jobs.dump(2);
}

}  // namespace
}  // namespace berth::it
