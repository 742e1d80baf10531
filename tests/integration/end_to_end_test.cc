// A GPU job through the real CLI, all-in-one berthd and berth-shim: the job
// sees exactly the GPUs Berth holds for it, and gives them back when it ends.
#include <regex>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

// The GPUs of `gpus_doc` (berth gpus -o json) held by job `id`, or by any job
// when id is 0.
std::vector<json> HeldBy(const json& gpus_doc, std::int64_t id) {
  std::vector<json> out;
  for (const auto& g : gpus_doc.at("gpus")) {
    const auto& job = g.at("job");
    if (job.is_null()) continue;
    if (id == 0 || job.at("id").get<std::int64_t>() == id) out.push_back(g);
  }
  return out;
}

TEST_F(IntegrationTest, EndToEnd) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  auto spec = dir_ / "job.yaml";
  WriteFile(spec,
            "name: e2e\n"
            "command: [sh, -c, 'echo CVD=$CUDA_VISIBLE_DEVICES; sleep 3']\n"
            "resources: {gpus: 2}\n");
  auto submitted = Cli(berthd, {"submit", spec.string(), "-o", "json"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  auto id = json::parse(submitted.out).at("id").get<std::int64_t>();

  // Held from the moment it is placed until its exit is recorded.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto s = berthd.JobState(id);
        return s == "Scheduled" || s == "Running";
      },
      30s))
      << berthd.JobState(id);
  auto during = Cli(berthd, {"gpus", "-o", "json"});
  ASSERT_EQ(during.exit_code, 0) << during.err;
  auto during_doc = json::parse(during.out);
  EXPECT_EQ(HeldBy(during_doc, id).size(), 2U) << during.out;
  EXPECT_EQ(HeldBy(during_doc, 0).size(), 2U) << during.out;

  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s)) << berthd.JobState(id);

  auto job = berthd.Job(id);
  auto logs = Cli(berthd, {"logs", std::to_string(id)});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  std::smatch m;
  static const std::regex kCvd(R"(^CVD=(\d+),(\d+)\n$)");
  ASSERT_TRUE(std::regex_match(logs.out, m, kCvd)) << "logs: '" << logs.out << "'";
  std::vector<std::uint32_t> seen{static_cast<std::uint32_t>(std::stoul(m[1])),
                                  static_cast<std::uint32_t>(std::stoul(m[2]))};
  EXPECT_NE(seen[0], seen[1]);
  EXPECT_EQ(json(seen), job.at("placement").at(0).at("gpus")) << job.dump(2);

  auto after = Cli(berthd, {"gpus", "-o", "json"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_TRUE(HeldBy(json::parse(after.out), 0).empty()) << after.out;

  auto shown = Cli(berthd, {"job", std::to_string(id), "-o", "json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  auto doc = json::parse(shown.out);
  EXPECT_EQ(doc.at("state"), "Succeeded") << shown.out;
  EXPECT_EQ(doc.at("exit_code"), 0) << shown.out;
  // In this order (other events may sit between them).
  std::vector<std::string> want{"Submitted", "Scheduled", "Started", "Exited", "Succeeded"};
  std::size_t next = 0;
  for (const auto& e : doc.at("timeline")) {
    if (next < want.size() && e.at("event") == want[next]) ++next;
  }
  EXPECT_EQ(next, want.size()) << "timeline lacks " << want[std::min(next, want.size() - 1)]
                               << " in order: " << doc.at("timeline").dump(2);
  EXPECT_EQ(CountEvents(doc, "Started"), 1);
}

}  // namespace
}  // namespace berth::it
