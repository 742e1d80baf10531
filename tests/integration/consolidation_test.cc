// Consolidation end to end: a 4-GPU job waits while 4 GPUs are free but
// split over two nodes; berthd stops a 2-GPU job that checkpoints, starts it
// again on the other node as planned (restart count 1, same checkpoint
// directory), and the 4-GPU job gets a whole node. Both timelines say so.
// Without a job that checkpoints, the 4-GPU job waits, and `why` gives the
// gang shape that would run now only after a second cycle bore it out.
#include <fstream>
#include <sstream>
#include <thread>

#include "integration/fixture.h"

namespace berth::it {
namespace {

using nlohmann::json;

std::vector<std::string> NodesOf(const json& job, int attempt) {
  std::vector<std::string> out;
  for (const auto& r : job["placement"]) {
    if (r["attempt"].get<int>() == attempt) out.push_back(r["node"].get<std::string>());
  }
  return out;
}

// Two simulated nodes of 4 GPUs; jobs that run until a file appears.
class ConsolidationTest : public IntegrationTest {
 protected:
  Berthd& StartTwoNodes() {
    BerthdOptions options = AllInOne({"--stop-grace", "10s"});
    options.simulate = WriteCluster(std::vector<std::string>{"n1", "n2"}, 4);
    Berthd& berthd = NewBerthd(options);
    EXPECT_TRUE(berthd.Start()) << berthd.log();
    EXPECT_TRUE(berthd.WaitForNode("Ready", 20s));
    return berthd;
  }
  // Runs until `file` exists; SIGTERM ends it at once.
  static std::vector<std::string> Until(const std::filesystem::path& file) {
    return Sh("trap 'exit 0' TERM; while [ ! -e " + file.string() + " ]; do sleep 0.1; done");
  }
  // Submits a 2-GPU job and waits until it runs.
  static std::int64_t SubmitRunning(const Berthd& berthd, const std::string& name,
                                    std::vector<std::string> cmd, json extra = json::object()) {
    std::string error;
    auto id = berthd.Submit(JobSpecJson(name, std::move(cmd), 2, std::move(extra)), &error);
    EXPECT_NE(id, 0) << error;
    EXPECT_TRUE(berthd.WaitForState(id, "Running", 30s)) << berthd.Job(id).dump(2);
    return id;
  }
};

TEST_F(ConsolidationTest, AGangGetsAWholeNodeByMovingAJobThatCheckpoints) {
  Berthd& berthd = StartTwoNodes();
  ASSERT_FALSE(HasFailure());

  const auto fill_done = dir_ / "fill-done";
  const auto all_done = dir_ / "all-done";
  const auto ckpt_dir = dir_ / "ckpt";
  OwnedByTenant(ckpt_dir);
  // Packing puts the first two on n1 and the next two on n2; the fillers
  // then end, leaving two free GPUs on each node.
  auto fill_a = SubmitRunning(berthd, "fill-a", Until(fill_done));
  auto ckpt = SubmitRunning(berthd, "ckpt",
                            Sh("echo restart=$BERTH_RESTART_COUNT dir=$BERTH_CHECKPOINT_DIR >> "
                               "$BERTH_CHECKPOINT_DIR/attempts; trap 'exit 0' TERM; while [ ! -e " +
                               all_done.string() + " ]; do sleep 0.1; done"),
                            json{{"checkpoint", {{"dir", ckpt_dir.string()}, {"grace", "5s"}}}});
  auto keep = SubmitRunning(berthd, "keep", Until(all_done));
  auto fill_b = SubmitRunning(berthd, "fill-b", Until(fill_done));
  ASSERT_EQ(NodesOf(berthd.Job(ckpt), 1), std::vector<std::string>{"n1"});
  ASSERT_EQ(NodesOf(berthd.Job(keep), 1), std::vector<std::string>{"n2"});
  WriteFile(fill_done, "");
  for (auto id : {fill_a, fill_b}) {
    ASSERT_TRUE(berthd.WaitForTerminal(id, 30s));
    ASSERT_EQ(berthd.JobState(id), "Succeeded");
  }

  std::string error;
  auto big = berthd.Submit(JobSpecJson("big", Until(all_done), 4), &error);
  ASSERT_NE(big, 0) << error;
  ASSERT_TRUE(berthd.WaitForState(big, "Running", 30s)) << berthd.Job(big).dump(2);
  ASSERT_TRUE(berthd.WaitForState(ckpt, "Running", 30s)) << berthd.Job(ckpt).dump(2);

  // The big job took n1 whole; the job that checkpoints moved to n2, and the
  // job that does not checkpoint stayed where it was.
  json big_job = berthd.Job(big);
  json ckpt_job = berthd.Job(ckpt);
  EXPECT_EQ(NodesOf(big_job, 1), std::vector<std::string>{"n1"}) << big_job.dump(2);
  EXPECT_EQ(NodesOf(ckpt_job, 2), std::vector<std::string>{"n2"}) << ckpt_job.dump(2);
  EXPECT_EQ(NodesOf(berthd.Job(keep), 1), std::vector<std::string>{"n2"});
  EXPECT_EQ(berthd.JobState(keep), "Running");
  EXPECT_EQ(CountEvents(ckpt_job, "Moving"), 1) << ckpt_job.dump(2);
  EXPECT_EQ(CountEvents(big_job, "Consolidating"), 1) << big_job.dump(2);
  EXPECT_EQ(CountEvents(berthd.Job(keep), "Moving"), 0);

  // It ran again with the same checkpoint directory and restart count 1.
  ASSERT_TRUE(WaitFor(
      [&] {
        std::ifstream in(ckpt_dir / "attempts");
        std::stringstream text;
        text << in.rdbuf();
        return text.str().find("restart=1") != std::string::npos;
      },
      10s));
  std::ifstream in(ckpt_dir / "attempts");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "restart=0 dir=" + ckpt_dir.string() + "\nrestart=1 dir=" + ckpt_dir.string() + "\n");
  WriteFile(all_done, "");
  for (auto id : {ckpt, keep, big}) ASSERT_TRUE(berthd.WaitForTerminal(id, 30s));
}

// Nothing can move: the 4-GPU job waits with its free GPUs split 2 + 2, and
// its reason says it would run now as two replicas of 2. berthd showed the
// hint only after running the cycle again with that change (the metrics
// count it verified), and `berth why` leads with it; and the split job,
// submitted as the hint says, runs.
TEST_F(ConsolidationTest, AHintIsShownOnlyOnceASecondCycleBoreItOut) {
  Berthd& berthd = StartTwoNodes();
  ASSERT_FALSE(HasFailure());

  const auto fill_done = dir_ / "fill-done";
  const auto all_done = dir_ / "all-done";
  // Packing: the first two on n1, the next two on n2; a filler on each ends.
  auto fill_a = SubmitRunning(berthd, "fill-a", Until(fill_done));
  auto keep_a = SubmitRunning(berthd, "keep-a", Until(all_done));
  auto keep_b = SubmitRunning(berthd, "keep-b", Until(all_done));
  auto fill_b = SubmitRunning(berthd, "fill-b", Until(fill_done));
  ASSERT_NE(NodesOf(berthd.Job(keep_a), 1), NodesOf(berthd.Job(keep_b), 1));
  WriteFile(fill_done, "");
  for (auto id : {fill_a, fill_b}) ASSERT_TRUE(berthd.WaitForTerminal(id, 30s));

  std::string error;
  auto big = berthd.Submit(JobSpecJson("big", Until(all_done), 4), &error);
  ASSERT_NE(big, 0) << error;
  Reply why;
  ASSERT_TRUE(WaitFor(
      [&] {
        why = berthd.http().Get("/v1/jobs/" + std::to_string(big) + "/why");
        return why.status == 200 && why.body["reason"].value("code", "") == "Fragmented" &&
               why.body["reason"]["counts"].contains("would_run_with_gpus_per_replica");
      },
      20s))
      << why.text;
  EXPECT_EQ(why.body["reason"]["counts"]["would_run_with_gpus_per_replica"], 2) << why.text;
  EXPECT_NE(
      why.body["reason"].value("message", "").find("it would run now with 2 GPUs per replica"),
      std::string::npos)
      << why.text;
  // The hint on its own, in the language asked for, for the console to lead with.
  EXPECT_EQ(why.body["reason"].value("hint", ""), "it would run now with 2 GPUs per replica")
      << why.text;
  const Reply why_zh = berthd.http().Get("/v1/jobs/" + std::to_string(big) + "/why?lang=zh");
  EXPECT_EQ(why_zh.body["reason"].value("hint", ""), "若每个副本改用 2 块 GPU，现在即可运行")
      << why_zh.text;
  // `berth why` leads with the verified hint: the smallest change known to
  // let it run, before the sentence of what holds it now.
  const auto cli = Cli(berthd, {"why", std::to_string(big), "--lang", "en"});
  EXPECT_TRUE(
      cli.out.starts_with("smallest change, checked by the scheduler: it would run now "
                          "with 2 GPUs per replica\nfragmented: "))
      << cli.out << cli.err;
  const std::string metrics = berthd.http().Get("/metrics").text;
  EXPECT_NE(metrics.find("berth_scheduler_hints_checked_total{outcome=\"verified\"} "),
            std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find("berth_scheduler_hints_checked_total{outcome=\"verified\"} 0\n"),
            std::string::npos)
      << "the hint shown was checked first";

  // As the hint says: two replicas of 2 GPUs run now.
  ASSERT_EQ(berthd.http().Post("/v1/jobs/" + std::to_string(big) + "/cancel", "").status, 200);
  auto split_id =
      berthd.Submit(JobSpecJson("split", Until(all_done), 2, json{{"replicas", 2}}), &error);
  ASSERT_NE(split_id, 0) << error;
  EXPECT_TRUE(berthd.WaitForState(split_id, "Running", 30s)) << berthd.Job(split_id).dump(2);
  WriteFile(all_done, "");
  for (auto id : {keep_a, keep_b, split_id}) ASSERT_TRUE(berthd.WaitForTerminal(id, 30s));
}

// A job behind a waiting head hears the head's reason and, beyond it, what
// the nodes would say: here a node selector no node matches, so it could
// never run even once the head has gone; in Chinese too, and as data.
TEST_F(ConsolidationTest, AJobBehindItsHeadHearsWhatTheNodesWouldSayNext) {
  Berthd& berthd = StartTwoNodes();
  ASSERT_FALSE(HasFailure());
  const auto all_done = dir_ / "all-done";
  auto keep_a = SubmitRunning(berthd, "keep-a", Until(all_done));
  auto keep_b = SubmitRunning(berthd, "keep-b", Until(all_done));
  auto keep_c = SubmitRunning(berthd, "keep-c", Until(all_done));
  std::string error;
  auto head = berthd.Submit(JobSpecJson("head", Until(all_done), 4), &error);
  ASSERT_NE(head, 0) << error;
  auto behind = berthd.Submit(
      JobSpecJson("behind", Until(all_done), 1, json{{"node_selector", {{"zone", "nowhere"}}}}),
      &error);
  ASSERT_NE(behind, 0) << error;
  const std::string path = "/v1/jobs/" + std::to_string(behind) + "/why";
  Reply why;
  ASSERT_TRUE(WaitFor(
      [&] {
        why = berthd.http().Get(path);
        return why.status == 200 && why.body["reason"].value("code", "") == "BehindInQueue";
      },
      20s))
      << why.text;
  const json& layers = why.body["reason"]["layers"];
  ASSERT_EQ(layers.size(), 2U) << why.text;
  EXPECT_EQ(layers[0]["layer"], "order");
  EXPECT_EQ(layers[1]["layer"], "nodes");
  EXPECT_EQ(layers[1]["nodes"], 2);
  EXPECT_EQ(layers[1]["could_take"], 0);
  EXPECT_EQ(layers[1]["excluded"],
            json::parse(R"([{"cause": "node_selector_mismatch", "nodes": 2, "alone": 2}])"));
  EXPECT_NE(why.body["reason"]["message"].get<std::string>().find(
                "beyond that, 0/2 nodes could ever take a replica: changing the node selector "
                "alone would open 2 (what rules the others out: 2 labels not matching the node "
                "selector)"),
            std::string::npos)
      << why.text;
  const Reply zh = berthd.http().Get(path + "?lang=zh");
  EXPECT_NE(zh.body["reason"]["message"].get<std::string>().find(
                "除此之外，2 个节点中有 0 个能够容纳它的副本"),
            std::string::npos)
      << zh.text;
  // The head's own reason is about the nodes: one layer, no second sentence.
  const Reply head_why = berthd.http().Get("/v1/jobs/" + std::to_string(head) + "/why");
  ASSERT_EQ(head_why.body["reason"]["layers"].size(), 1U) << head_why.text;
  EXPECT_EQ(head_why.body["reason"]["layers"][0]["layer"], "nodes");
  EXPECT_EQ(head_why.body["reason"]["message"].get<std::string>().find("beyond that"),
            std::string::npos);
  WriteFile(all_done, "");
  for (auto id : {head, behind}) {
    ASSERT_EQ(berthd.http().Post("/v1/jobs/" + std::to_string(id) + "/cancel", "").status, 200);
  }
  for (auto id : {keep_a, keep_b, keep_c}) ASSERT_TRUE(berthd.WaitForTerminal(id, 30s));
}

// While a moved job takes its grace period to stop, the GPUs planned for it
// and for the gang are promised: a job submitted meanwhile that would fit
// there waits instead of taking them.
TEST_F(ConsolidationTest, GpusPlannedForAMoveAreNotGivenAwayWhileItStops) {
  Berthd& berthd = StartTwoNodes();
  ASSERT_FALSE(HasFailure());

  const auto fill_done = dir_ / "fill-done";
  const auto all_done = dir_ / "all-done";
  auto fill_a = SubmitRunning(berthd, "fill-a", Until(fill_done));
  // It takes its time to stop: SIGTERM is ignored until the all-done file
  // exists or 3 s have passed.
  auto slow = SubmitRunning(
      berthd, "slow-ckpt",
      Sh("trap 'i=0; while [ ! -e " + all_done.string() +
         " ] && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; exit 0' TERM; while [ ! -e " +
         all_done.string() + " ]; do sleep 0.1; done"),
      json{{"checkpoint", {{"grace", "8s"}}}});
  auto keep = SubmitRunning(berthd, "keep", Until(all_done));
  auto fill_b = SubmitRunning(berthd, "fill-b", Until(fill_done));
  WriteFile(fill_done, "");
  for (auto id : {fill_a, fill_b}) ASSERT_TRUE(berthd.WaitForTerminal(id, 30s));

  std::string error;
  auto big = berthd.Submit(JobSpecJson("big", Until(all_done), 4), &error);
  ASSERT_NE(big, 0) << error;
  ASSERT_TRUE(WaitFor([&] { return CountEvents(berthd.Job(slow), "Moving") == 1; }, 20s))
      << berthd.Job(slow).dump(2);
  // n1 has 2 free GPUs (planned for the gang) and n2 has 2 (planned for the
  // moved job): a 2-GPU job fits either, but gets neither while the move is
  // in flight.
  auto late = berthd.Submit(JobSpecJson("late", Until(all_done), 2), &error);
  ASSERT_NE(late, 0) << error;
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(berthd.JobState(late), "Pending") << berthd.Job(late).dump(2);
  EXPECT_EQ(berthd.JobState(big), "Pending");
  EXPECT_EQ(berthd.Job(big)["reason"]["code"], "WaitingForEvictions") << berthd.Job(big).dump(2);

  // Once the moved job has stopped, the gang and the moved job start as
  // planned; the late job still has no room.
  ASSERT_TRUE(berthd.WaitForState(big, "Running", 30s)) << berthd.Job(big).dump(2);
  ASSERT_TRUE(berthd.WaitForState(slow, "Running", 30s)) << berthd.Job(slow).dump(2);
  EXPECT_EQ(NodesOf(berthd.Job(big), 1), std::vector<std::string>{"n1"});
  EXPECT_EQ(NodesOf(berthd.Job(slow), 2), std::vector<std::string>{"n2"});
  EXPECT_EQ(berthd.JobState(late), "Pending");
  WriteFile(all_done, "");
  for (auto id : {slow, keep, big, late}) ASSERT_TRUE(berthd.WaitForTerminal(id, 60s));
}

}  // namespace
}  // namespace berth::it
