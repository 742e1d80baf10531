// `berth why` of a job waiting out its reclaim grace: when the guarantee
// wins and since when, and what reclaiming now would cost the borrowers, in
// clock times, durations and GPU-hours rather than the raw counts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/render.h"

namespace berth::cli {
namespace {

using nlohmann::json;

json GraceWhy() {
  // Now 02:00 UTC on the epoch's day; needed the reclaim since 01:45, the
  // guarantee wins at 02:15; job 1 would lose 30m on 8 GPUs.
  return {{"id", 10},
          {"name", "train"},
          {"tenant", "vision"},
          {"queue", "training"},
          {"state", "Pending"},
          {"reason",
           {{"code", "NoNodeFits"},
            {"message", "0/2 nodes can take a replica needing 8 GPUs"},
            {"counts",
             {{"reclaim_since_ms", 6'300'000},
              {"reclaim_at_ms", 8'100'000},
              {"reclaim_in_ms", 900'000},
              {"reclaim_victims", 1},
              {"reclaim_first_victim", 1},
              {"reclaim_work_lost_ms", 1'800'000},
              {"reclaim_lost_mgpu_ms", 14'400'000'000LL}}}}}};
}

TEST(RenderWhyTest, AReclaimGraceReadsInClockTimesAndGpuHours) {
  const std::string en = RenderWhy(GraceWhy(), model::Lang::kEn);
  EXPECT_NE(en.find("reclaim grace"), std::string::npos) << en;
  EXPECT_NE(
      en.find("reclaims lent GPUs in about 15m, around 02:15 UTC; needed them since 01:45 UTC"),
      std::string::npos)
      << en;
  EXPECT_NE(en.find("would stop 1 borrower job(s) (job 1 first), losing 4.0 GPU-hours, at most "
                    "30m per job"),
            std::string::npos)
      << en;
  // Every count was turned into words: none is left under its raw name.
  EXPECT_EQ(en.find("reclaim_lost_mgpu_ms"), std::string::npos) << en;
  EXPECT_EQ(en.find("reclaim_since_ms"), std::string::npos) << en;
  const std::string zh = RenderWhy(GraceWhy(), model::Lang::kZh);
  EXPECT_NE(zh.find("回收宽限"), std::string::npos) << zh;
  EXPECT_NE(zh.find("需停止 1 个借用作业（首个为作业 1），丢失 4.0 GPU 小时"), std::string::npos)
      << zh;
}

json PredictedWhy() {
  // Now 02:00 UTC; the head starts around 04:00 once job 2 ends, which has
  // already run past its prediction; the job's own prediction is 5h from 3
  // runs of the same user and job name.
  return {{"id", 10},
          {"name", "train"},
          {"tenant", "vision"},
          {"queue", "training"},
          {"state", "Pending"},
          {"reason",
           {{"code", "NoNodeFits"},
            {"message", "0/1 nodes can take a replica needing 8 GPUs"},
            {"counts",
             {{"eta_ms", 14'400'000},
              {"eta_in_ms", 7'200'000},
              {"eta_reserved", 0},
              {"eta_basis", 2},
              {"eta_after_job", 2},
              {"eta_after_ms", 14'400'000},
              {"eta_after_overrun", 1},
              {"predicted_runtime_ms", 18'000'000},
              {"predicted_basis", 1},
              {"predicted_samples", 3}}}}}};
}

TEST(RenderWhyTest, AnEtaNamesItsBasisAndThePredictionItStandsOn) {
  const std::string en = RenderWhy(PredictedWhy(), model::Lang::kEn);
  EXPECT_NE(en.find("predicted run times (no max runtime declared)"), std::string::npos) << en;
  EXPECT_NE(en.find("job 2, around 04:00 UTC (already past its predicted run time"),
            std::string::npos)
      << en;
  EXPECT_NE(en.find("5h, the median of 3 finished run(s) of the same user and job name"),
            std::string::npos)
      << en;
  for (const char* raw :
       {"eta_basis", "eta_after_job", "predicted_runtime_ms", "predicted_basis"}) {
    EXPECT_EQ(en.find(raw), std::string::npos) << raw << "\n" << en;
  }
  const std::string zh = RenderWhy(PredictedWhy(), model::Lang::kZh);
  EXPECT_NE(zh.find("预测的运行时间"), std::string::npos) << zh;
  EXPECT_NE(zh.find("同一用户、同名作业"), std::string::npos) << zh;
  EXPECT_NE(zh.find("已超过预测运行时间"), std::string::npos) << zh;
}

// A verified hint is the smallest change known to let the job run: `berth
// why` says it first, before the sentence of what holds the job now.
json HintWhy(json counts, std::string detail) {
  return {{"id", 11},
          {"name", "big"},
          {"state", "Pending"},
          {"reason",
           {{"code", "NoNodeFits"},
            {"message", "0/2 nodes can take a replica needing 8 GPUs: 2 too few free GPUs"},
            {"detail", std::move(detail)},
            {"counts", std::move(counts)}}}};
}

TEST(RenderWhyTest, AVerifiedHintLeadsAsTheSmallestChange) {
  const std::string en = RenderWhy(
      HintWhy({{"nodes", 2}, {"would_run_with_gpus_per_replica", 4}}, ""), model::Lang::kEn);
  EXPECT_TRUE(
      en.starts_with("smallest change, checked by the scheduler: it would run now with "
                     "4 GPUs per replica\n0/2 nodes can take a replica needing 8 GPUs"))
      << en;
  const std::string model =
      RenderWhy(HintWhy({{"nodes", 2}}, "gpu_model=A100-80GB"), model::Lang::kZh);
  EXPECT_TRUE(
      model.starts_with("最小改动（已由调度器验证）：若改用 A100-80GB 型号的 GPU，现在即可运行\n"))
      << model;
  // Without a hint the sentence comes first, as before.
  const std::string none = RenderWhy(HintWhy({{"nodes", 2}}, ""), model::Lang::kEn);
  EXPECT_TRUE(none.starts_with("0/2 nodes can take a replica")) << none;
}

}  // namespace
}  // namespace berth::cli
