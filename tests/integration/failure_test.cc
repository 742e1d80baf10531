// Failure classification end to end: a job that prints a CUDA out-of-memory
// message and exits 1 is shown as a GPU out-of-memory failure, with that line
// as its evidence and what to do, in `berth why` (English and Chinese) and
// `berth job`; a command that does not exist is shown as such.
#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

TEST_F(IntegrationTest, ACudaOutOfMemoryIsShownWithItsLogLineAsEvidence) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s));

  const std::string oom =
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; "
      "79.15 GiB total capacity)";
  std::string error;
  auto id = berthd.Submit(
      JobSpecJson("oom", Sh("echo step 1; echo '" + oom + "' >&2; echo cleanup; exit 1"), 1),
      &error);
  ASSERT_NE(id, 0) << error;
  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s));
  ASSERT_EQ(berthd.JobState(id), "Failed");

  // The log reaches berthd in chunks; the classification follows it.
  json why;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = Cli(berthd, {"why", std::to_string(id), "-o", "json"});
        if (r.exit_code != 0) return false;
        why = json::parse(r.out, nullptr, false);
        return why.is_object() && why["failure"].is_object() &&
               why["failure"]["class"] == "gpu_out_of_memory";
      },
      10s))
      << why.dump(2);
  EXPECT_EQ(why["failure"]["evidence"], oom);

  auto text = Cli(berthd, {"why", std::to_string(id), "--lang", "en"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("ran out of memory"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Tried to allocate 20.00 GiB"), std::string::npos) << text.out;
  auto zh = Cli(berthd, {"why", std::to_string(id), "--lang", "zh"});
  ASSERT_EQ(zh.exit_code, 0) << zh.err;
  EXPECT_NE(zh.out.find("显存不足"), std::string::npos) << zh.out;
  auto job = Cli(berthd, {"job", std::to_string(id)});
  ASSERT_EQ(job.exit_code, 0) << job.err;
  EXPECT_NE(job.out.find("gpu_out_of_memory"), std::string::npos) << job.out;

  // A program that is not there: its own class, whatever it printed.
  auto missing = berthd.Submit(JobSpecJson("typo", {"trian-no-such-program"}, 0), &error);
  ASSERT_NE(missing, 0) << error;
  ASSERT_TRUE(berthd.WaitForTerminal(missing, 30s));
  json m = berthd.Job(missing);
  ASSERT_TRUE(m["failure"].is_object()) << m.dump(2);
  EXPECT_EQ(m["failure"]["class"], "command_not_found") << m.dump(2);
}

}  // namespace
}  // namespace berth::it
