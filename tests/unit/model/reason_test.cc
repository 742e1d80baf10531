// Reasons rendered in English and Simplified Chinese: the same numbers in both.
#include "model/reason.h"

#include <gtest/gtest.h>

namespace berth::model {
namespace {

void ExpectHasAll(const std::string& text, std::initializer_list<std::string_view> parts) {
  for (auto part : parts) {
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' missing from: " << text;
  }
}

TEST(ReasonZhTest, NoNodeFitsCarriesTheNodeCountsPerCause) {
  Reason r{ReasonCode::kNoNodeFits,
           {{"nodes", 3},
            {"gpus_per_replica", 2},
            {std::string(kCauseTooFewGpus), 2},
            {std::string(kCauseNotReady), 1}},
           ""};
  EXPECT_EQ(RenderReason(r, Lang::kZh),
            "0/3 个节点可以容纳需要 2 块 GPU 的副本：1 个未就绪，2 个空闲 GPU 不足");
  EXPECT_EQ(RenderReason(r, Lang::kEn),
            "0/3 nodes can take a replica needing 2 GPUs: 1 not ready, 2 too few free GPUs");
  EXPECT_EQ(RenderReason(r), RenderReason(r, Lang::kEn));
}

TEST(ReasonZhTest, SharingCausesInBothLanguages) {
  Reason r{ReasonCode::kNoNodeFits,
           {{"nodes", 3},
            {"gpus_per_replica", 0},
            {std::string(kSliceMgpu), 250},
            {std::string(kCauseNotSharing), 1},
            {std::string(kCauseSharedFull), 2}},
           ""};
  EXPECT_EQ(RenderReason(r, Lang::kEn),
            "0/3 nodes can take a replica needing a 0.25 share of one GPU: 1 no GPU of the "
            "requested kind in sharing mode, 2 too little free memory or share left on their "
            "sharing GPUs");
  EXPECT_EQ(RenderReason(r, Lang::kZh),
            "0/3 个节点可以容纳需要 一块 GPU 的 0.25 份额 的副本：1 "
            "个没有处于共享模式的所需型号 GPU，2 个共享 GPU 上剩余的显存或份额不足");
  Reason whole{ReasonCode::kNoNodeFits,
               {{"nodes", 2}, {"gpus_per_replica", 2}, {std::string(kCauseHeldBySlices), 2}},
               ""};
  ExpectHasAll(RenderReason(whole, Lang::kEn), {"needing 2 GPUs", "2 GPUs held by slices"});
  ExpectHasAll(RenderReason(whole, Lang::kZh), {"2 块 GPU", "被共享作业的切片占用"});
  Reason mem{
      ReasonCode::kNoNodeFits,
      {{"nodes", 1}, {std::string(kSliceBytes), 20LL << 30}, {std::string(kCauseGpuMemory), 1}},
      ""};
  ExpectHasAll(RenderReason(mem, Lang::kEn), {"a 20 GiB memory slice of one GPU"});
  ExpectHasAll(RenderReason(mem, Lang::kZh), {"20 GiB 显存"});
}

TEST(ReasonZhTest, GangOrderAndWouldRun) {
  Reason r{ReasonCode::kNoNodeFits,
           {{"nodes", 4},
            {"replicas", 3},
            {"gpus_per_replica", 8},
            {std::string(kCauseGang), 1},
            {std::string(kCauseGpuMemory), 4},
            {std::string(kAheadJobs), 2},
            {std::string(kAheadGpus), 16},
            {std::string(kWouldFitGpusPerReplica), 4}},
           ""};
  std::string zh = RenderReason(r, Lang::kZh);
  ExpectHasAll(zh, {"3 个副本", "8 块 GPU", "只有 1 个", "4 个节点", "4 个 GPU 显存不足",
                    "还有 2 个作业，共需 16 块 GPU", "每个副本改用 4 块 GPU"});
  EXPECT_NE(zh, RenderReason(r, Lang::kEn));
}

TEST(ReasonZhTest, QuotaNumbersInGpus) {
  Reason r{ReasonCode::kOverQuota,
           {{std::string(kQueueRequested), 2500},
            {std::string(kQueueUsed), 6000},
            {std::string(kQueueGuaranteed), 8000},
            {std::string(kQueueBorrowLimit), 0},
            {std::string(kQueueBorrowable), 0}},
           "vision/training gpus"};
  EXPECT_EQ(RenderReason(r, Lang::kZh),
            "超出所在队列的配额：申请 2.5 块 GPU；队列 vision/training 已用 6 块 GPU，保障 8 块 "
            "GPU，最多还可借 0 块 GPU，当前可借 0 块 GPU");
  r.counts.erase(std::string(kQueueBorrowLimit));
  r.code = ReasonCode::kNotPreemptibleOverGuarantee;
  r.detail = "vision/training gpus:A100";
  std::string zh = RenderReason(r, Lang::kZh);
  ExpectHasAll(zh,
               {"不可抢占", "申请 2.5 块 GPU（型号 A100）", "借用不设上限", "可将它设为可抢占"});
  EXPECT_NE(zh, RenderReason(r, Lang::kEn));
}

// The example in docs/jobs.md.
TEST(ReasonZhTest, OverQuotaExampleFromTheDocs) {
  Reason r{ReasonCode::kOverQuota,
           {{std::string(kQueueRequested), 4000},
            {std::string(kQueueUsed), 8000},
            {std::string(kQueueGuaranteed), 8000},
            {std::string(kQueueBorrowLimit), 2000},
            {std::string(kQueueBorrowable), 2000}},
           "vision/training gpus"};
  EXPECT_EQ(RenderReason(r, Lang::kEn),
            "over its queue's quota: it asks for 4 GPUs; queue vision/training uses 8 GPUs, with "
            "8 GPUs guaranteed, and may borrow up to 2 GPUs more; 2 GPUs can be borrowed now");
  EXPECT_EQ(RenderReason(r, Lang::kZh),
            "超出所在队列的配额：申请 4 块 GPU；队列 vision/training 已用 8 块 GPU，保障 8 块 "
            "GPU，最多还可借 2 块 GPU，当前可借 2 块 GPU");
}

TEST(ReasonZhTest, FragmentedPreemptedReclaimed) {
  Reason frag{ReasonCode::kFragmented,
              {{std::string(kFreeGpus), 16},
               {std::string(kNeededGpus), 16},
               {std::string(kLargestFree), 3}},
              "gpu_model=H100"};
  ExpectHasAll(RenderReason(frag, Lang::kZh), {"资源碎片化", "16 块 GPU 空闲", "所需的 16 块 GPU",
                                               "最多空闲 3 块 GPU", "改用 H100 型号"});

  Reason pre{ReasonCode::kPreempted,
             {{std::string(kByJob), 42}, {std::string(kWorkLostMs), 90'500}},
             "vision/training"};
  EXPECT_EQ(RenderReason(pre, Lang::kZh),
            "被队列 vision/training 中优先级更高的作业 42 抢占；自上次检查点以来约 1 分钟 30 "
            "秒的进度已丢失");

  Reason rec{ReasonCode::kReclaimed,
             {{std::string(kByJob), 7}, {std::string(kWorkLostMs), 1'200'000}},
             "nlp/default"};
  std::string zh = RenderReason(rec, Lang::kZh);
  ExpectHasAll(zh, {"队列 nlp/default", "作业 7", "约 20 分钟的进度", "收回"});
  EXPECT_NE(zh, RenderReason(rec, Lang::kEn));

  Reason moved{ReasonCode::kMoved,
               {{std::string(kByJob), 9}, {std::string(kWorkLostMs), 90'000}},
               "vision/train"};
  ExpectHasAll(RenderReason(moved),
               {"moved", "job 9", "vision/train", "about 1m 30s of work", "restarts"});
  ExpectHasAll(RenderReason(moved, Lang::kZh),
               {"迁移", "作业 9", "vision/train", "约 1 分钟 30 秒的进度"});
}

TEST(ReasonTest, SaysWhetherMovingJobsCouldMakeRoom) {
  Reason r{ReasonCode::kFragmented,
           {{std::string(kFreeGpus), 8},
            {std::string(kNeededGpus), 8},
            {std::string(kLargestFree), 4},
            {std::string(kMoveCandidates), 3},
            {std::string(kMaxMovesKey), 2}},
           {}};
  ExpectHasAll(RenderReason(r), {"moving up to 2 of the 3 running job(s) that checkpoint"});
  ExpectHasAll(RenderReason(r, Lang::kZh), {"3 个会保存检查点", "最多迁移 2 个"});
  r.counts[std::string(kMoveCandidates)] = 0;
  ExpectHasAll(RenderReason(r), {"no running job that checkpoints could be moved"});
}

TEST(ReasonZhTest, EveryCodeHasAChineseSentenceDifferentFromEnglish) {
  for (int c = 1; c <= static_cast<int>(kLastReasonCode); ++c) {
    Reason r{static_cast<ReasonCode>(c), {{"replica", 1}, {"exit_code", 3}}, "x"};
    std::string zh = RenderReason(r, Lang::kZh);
    EXPECT_FALSE(zh.empty()) << ReasonCodeName(r.code);
    EXPECT_NE(zh, RenderReason(r, Lang::kEn)) << ReasonCodeName(r.code);
  }
  EXPECT_EQ(RenderReason({ReasonCode::kFailedExitCode, {{"replica", 1}, {"exit_code", 3}}, ""},
                         Lang::kZh),
            "副本 1 退出，退出码 3");
  EXPECT_EQ(RenderReason({ReasonCode::kCancelled, {}, "alice"}, Lang::kZh), "已被 alice 取消");
}

TEST(ReasonEtaTest, KnownStartInBothLanguages) {
  Reason r{ReasonCode::kNoNodeFits,
           {{"nodes", 1},
            {"gpus_per_replica", 8},
            {std::string(kCauseTooFewGpus), 1},
            {std::string(kEtaMs), 1'700'005'400'000},
            {std::string(kEtaInMs), 5'400'000},
            {std::string(kEtaReserved), 1}},
           ""};
  EXPECT_EQ(RenderReason(r),
            "0/1 nodes can take a replica needing 8 GPUs: 1 too few free GPUs; estimated start in "
            "about 1h 30m, around 23:43 UTC (GPUs are reserved for it)");
  ExpectHasAll(RenderReason(r, Lang::kZh),
               {"预计约 1 小时 30 分钟后开始，约 UTC 23:43（已为它预留 GPU）"});
  r.counts[std::string(kEtaReserved)] = 0;
  r.counts[std::string(kEtaInMs)] = 2 * 86'400'000 + 3 * 3'600'000;
  // Another day than the cycle's: the date too.
  ExpectHasAll(RenderReason(r),
               {"in about 2d 3h, around 2023-11-14 23:43 UTC (an estimate; no GPUs reserved)"});
  ExpectHasAll(RenderReason(r, Lang::kZh),
               {"约 2 天 3 小时后开始，约 UTC 2023-11-14 23:43（估计值，未预留 GPU）"});
  r.counts[std::string(kEtaInMs)] = 0;
  ExpectHasAll(RenderReason(r), {"estimated start now, as GPUs free up"});
  r.counts[std::string(kEtaInMs)] = 45'000;
  ExpectHasAll(RenderReason(r), {"in about 45s"});
  ExpectHasAll(RenderReason(r, Lang::kZh), {"约 45 秒后开始"});
}

TEST(ReasonEtaTest, RenderedFromTheRenderersNow) {
  Reason r{ReasonCode::kBehindInQueue,
           {{"blocked_by", 10},
            {std::string(kNotBeforeMs), 10'800'000},
            {std::string(kNotBeforeInMs), 7'200'000}},  // written by a cycle at 1h
           ""};
  ExpectHasAll(RenderReason(r, Lang::kEn), {"(in about 2h, around 03:00 UTC)"});
  ExpectHasAll(RenderReason(r, Lang::kEn, 7'200'000), {"(in about 1h, around 03:00 UTC)"});
  ExpectHasAll(RenderReason(r, Lang::kZh, 9'000'000), {"约 30 分钟后，约 UTC 03:00"});
  Reason head{ReasonCode::kNoNodes,
              {{std::string(kEtaMs), 10'800'000},
               {std::string(kEtaInMs), 7'200'000},
               {std::string(kEtaReserved), 1}},
              ""};
  ExpectHasAll(RenderReason(head, Lang::kEn, 11'000'000), {"estimated start now"});
}

TEST(ReasonEtaTest, UnknownStartSaysWhy) {
  Reason r{ReasonCode::kNoNodeFits,
           {{std::string(kEtaUnknown), static_cast<std::int64_t>(EtaUnknown::kBlockedByUnlimited)},
            {std::string(kEtaBlockedBy), 7},
            {std::string(kEtaBlockers), 3}},
           ""};
  ExpectHasAll(RenderReason(r),
               {"estimated start unknown: job 7 (and 2 more) on GPUs it needs has no max runtime"});
  ExpectHasAll(RenderReason(r, Lang::kZh),
               {"无法估计开始时间：它需要的 GPU 被作业 7 占用，该作业没有设置最长运行时间（另有 2 "
                "个这样的作业）"});
  const std::pair<EtaUnknown, std::string_view> cases[] = {
      {EtaUnknown::kCapacity, "does not fit even when every running job has ended"},
      {EtaUnknown::kQuota, "waits for its queue's quota"},
      {EtaUnknown::kInfeasible, "no node could ever take it"}};
  for (auto [why, text] : cases) {
    Reason u{ReasonCode::kOverQuota,
             {{std::string(kEtaUnknown), static_cast<std::int64_t>(why)}},
             "q gpus"};
    ExpectHasAll(RenderReason(u), {"estimated start unknown: ", text});
    ExpectHasAll(RenderReason(u, Lang::kZh), {"无法估计开始时间："});
  }
}

TEST(ReasonEtaTest, ReservedFreeGpusSayHowToUseThem) {
  Reason r{ReasonCode::kNoNodeFits,
           {{"nodes", 1},
            {"gpus_per_replica", 4},
            {std::string(kCauseTooFewGpus), 1},
            {std::string(kReservedFreeGpus), 4}},
           ""};
  EXPECT_EQ(
      RenderReason(r),
      "0/1 nodes can take a replica needing 4 GPUs: 1 too few free GPUs; free now but reserved "
      "for jobs that start before it would end: 4 GPUs (only a job whose max runtime ends by "
      "then may use them)");
  ExpectHasAll(RenderReason(r, Lang::kZh), {"另有 4 块 GPU 空闲，但已预留"});
}

TEST(ReasonEtaTest, BehindAHeadSaysNotBeforeItStarts) {
  Reason r{ReasonCode::kBehindInQueue,
           {{"blocked_by", 10},
            {std::string(kAheadJobs), 1},
            {std::string(kNotBeforeMs), 1'700'007'200'000},
            {std::string(kNotBeforeInMs), 7'200'000}},
           ""};
  EXPECT_EQ(RenderReason(r),
            "waiting behind job 10 in queue order (1 ahead); not before job 10 starts (in about "
            "2h, around 2023-11-15 00:13 UTC)");
  EXPECT_EQ(RenderReason(r, Lang::kZh),
            "按队列顺序排在作业 10 之后（前面还有 1 个）；不会早于作业 10 开始（约 2 "
            "小时后，约 UTC 2023-11-15 00:13）");
  r.counts.erase(std::string(kNotBeforeInMs));
  EXPECT_EQ(RenderReason(r), "waiting behind job 10 in queue order (1 ahead)");
}

TEST(ReasonUnitsTest, AmountsInAPersonsUnits) {
  EXPECT_EQ(FormatGpus(6000, Lang::kEn), "6 GPUs");
  EXPECT_EQ(FormatGpus(1000, Lang::kEn), "1 GPU");
  EXPECT_EQ(FormatGpus(500, Lang::kEn), "0.5 GPU");
  EXPECT_EQ(FormatGpus(2250, Lang::kEn), "2.25 GPUs");
  EXPECT_EQ(FormatGpus(0, Lang::kEn), "0 GPUs");
  EXPECT_EQ(FormatGpus(500, Lang::kZh), "0.5 块 GPU");
  EXPECT_EQ(FormatCores(4000, Lang::kEn), "4 cores");
  EXPECT_EQ(FormatCores(500, Lang::kEn), "0.5 core");
  EXPECT_EQ(FormatSize(64ULL << 30), "64 GiB");
  EXPECT_EQ(FormatSize(1536ULL << 20), "1.5 GiB");
  EXPECT_EQ(FormatSize(480'103'981'056), "447.1 GiB");
  EXPECT_EQ(FormatSize(1000), "1000 bytes");
  EXPECT_EQ(FormatDuration((2 * 3600 + 15 * 60) * 1000, Lang::kEn), "2h 15m");
  EXPECT_EQ(FormatDuration(90'000, Lang::kEn), "1m 30s");
  EXPECT_EQ(FormatDuration(90'000, Lang::kZh), "1 分钟 30 秒");
  EXPECT_EQ(FormatClock(1'700'005'400'000, 1'700'000'000'000, Lang::kEn), "23:43 UTC");
  EXPECT_EQ(FormatClock(1'700'007'200'000, 1'700'000'000'000, Lang::kEn), "2023-11-15 00:13 UTC");
  EXPECT_EQ(EtaUnknownText(4, 0, 0, Lang::kEn), "no node could ever take it");
  EXPECT_EQ(EtaUnknownText(1, 7, 3, Lang::kEn),
            "job 7 (and 2 more) on GPUs it needs has no max runtime");
  EXPECT_EQ(EtaUnknownText(9, 0, 0, Lang::kEn), "a cause this version does not know");
}

// Quota of CPU and memory in cores and GiB, not millicores and bytes.
TEST(ReasonUnitsTest, QuotaOfOtherResourcesInTheirUnits) {
  Reason r{ReasonCode::kOverQuota,
           {{std::string(kQueueRequested), 68'719'476'736},
            {std::string(kQueueUsed), 480'103'981'056},
            {std::string(kQueueGuaranteed), 549'755'813'888},
            {std::string(kQueueBorrowable), 0}},
           "vision/training memory"};
  EXPECT_EQ(RenderReason(r),
            "over its queue's quota: it asks for 64 GiB of memory; queue vision/training uses "
            "447.1 GiB, with 512 GiB guaranteed, and may borrow without limit; 0 bytes can be "
            "borrowed now");
  ExpectHasAll(RenderReason(r, Lang::kZh), {"申请内存 64 GiB", "保障 512 GiB"});
  r.detail = "vision/training cpu";
  r.counts = {{std::string(kQueueRequested), 4000},
              {std::string(kQueueUsed), 60'000},
              {std::string(kQueueGuaranteed), 64'000},
              {std::string(kQueueBorrowable), 0}};
  ExpectHasAll(RenderReason(r), {"asks for 4 cores of CPU", "uses 60 cores, with 64 cores"});
}

TEST(ReasonZhTest, ParseLang) {
  EXPECT_EQ(ParseLang("en"), Lang::kEn);
  EXPECT_EQ(ParseLang("zh"), Lang::kZh);
  EXPECT_EQ(ParseLang("zh_CN.UTF-8"), Lang::kZh);
  EXPECT_EQ(ParseLang("en-US"), Lang::kEn);
  EXPECT_EQ(ParseLang("fr"), std::nullopt);
  EXPECT_EQ(ParseLang(""), std::nullopt);
  EXPECT_EQ(LangName(Lang::kZh), "zh");
}

}  // namespace
}  // namespace berth::model

namespace berth::model {
namespace {

TEST(ReasonReliefTest, SaysWhetherReclaimOrPreemptionCouldHelpInBothLanguages) {
  Reason r{ReasonCode::kNoNodeFits,
           {{"nodes", 2},
            {"gpus_per_replica", 8},
            {std::string(kCauseTooFewGpus), 2},
            {std::string(kReclaimCandidates), 0},
            {std::string(kPreemptCandidates), 3},
            {std::string(kEvictableAfterMinRuntime), 2},
            {std::string(kMinRuntimeEndsInMs), 15 * 60 * 1000}},
           {}};
  std::string en = RenderReason(r);
  EXPECT_NE(en.find("no other queue holds lent GPUs"), std::string::npos) << en;
  EXPECT_NE(en.find("preempting all 3 lower-priority job(s)"), std::string::npos) << en;
  EXPECT_NE(en.find("2 more job(s) become evictable"), std::string::npos) << en;
  EXPECT_NE(en.find("15m"), std::string::npos) << en;
  std::string zh = RenderReason(r, Lang::kZh);
  EXPECT_NE(zh.find("抢占其队列中全部 3 个低优先级作业"), std::string::npos) << zh;
  EXPECT_NE(zh.find("最早在 15 分钟后"), std::string::npos) << zh;

  r.counts.erase(std::string(kReclaimCandidates));
  r.counts[std::string(kReclaimNotBelowGuarantee)] = 1;
  EXPECT_NE(RenderReason(r).find("not below its guarantee"), std::string::npos);
  // Without the keys nothing is added: the scheduler did not look.
  Reason plain{ReasonCode::kNoNodeFits, {{"nodes", 1}, {"gpus_per_replica", 1}}, {}};
  EXPECT_EQ(RenderReason(plain).find("eviction"), std::string::npos);
}

// A reference to another tenant's job, once hidden, says only that, in
// both languages; one to the reader's own tenant's job keeps its id.
TEST(ReasonOtherTenantJobs, HiddenReferencesSayAnotherTenantInBothLanguages) {
  Reason r{ReasonCode::kReclaimed, {{"by_job", 42}, {"work_lost_ms", 90'000}}, "red/main"};
  Reason own = r;
  MarkOtherTenantJob(r, kByJob);
  EXPECT_TRUE(NamesOtherTenantJob(r, kByJob));
  EXPECT_FALSE(NamesOtherTenantJob(own, kByJob));
  // Marked but not hidden (the platform admin's view): the id shows.
  EXPECT_NE(RenderReason(r, Lang::kEn).find("(for job 42)"), std::string::npos)
      << RenderReason(r, Lang::kEn);
  EXPECT_FALSE(HideOtherTenantsJobs(own));
  EXPECT_EQ(own.counts.at("by_job"), 42);
  ASSERT_TRUE(HideOtherTenantsJobs(r));
  EXPECT_FALSE(r.counts.contains("by_job"));
  EXPECT_EQ(r.counts.at("by_job_other_tenant"), 1);
  const std::string en = RenderReason(r, Lang::kEn);
  EXPECT_EQ(en,
            "reclaimed by queue red/main (for job of another tenant), which is below its "
            "guarantee and lent these GPUs; about 1m 30s of work since the last checkpoint was "
            "lost");
  const std::string zh = RenderReason(r, Lang::kZh);
  ExpectHasAll(zh, {"用于其他租户的作业", "red/main"});
  EXPECT_EQ(zh.find("42"), std::string::npos) << zh;

  Reason eta{ReasonCode::kNoNodeFits,
             {{std::string(kEtaUnknown), 1},
              {std::string(kEtaBlockedBy), 7},
              {std::string(kEtaBlockers), 3}},
             ""};
  MarkOtherTenantJob(eta, kEtaBlockedBy);
  HideOtherTenantsJobs(eta);
  ExpectHasAll(RenderReason(eta, Lang::kEn),
               {"job of another tenant (and 2 more) on GPUs it needs has no max runtime"});
  ExpectHasAll(RenderReason(eta, Lang::kZh), {"被其他租户的作业 占用"});
  EXPECT_EQ(JobRefText(7, Lang::kZh), "作业 7");
  EXPECT_EQ(JobRefText(0, Lang::kEn), "job of another tenant");
}

}  // namespace
}  // namespace berth::model
