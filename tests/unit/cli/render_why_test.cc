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

}  // namespace
}  // namespace berth::cli
