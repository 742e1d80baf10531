// RenderWhy: the `berth why ID` view. The sentence comes from berthd, already
// in the asked language; the numbers follow in a person's units (GPUs, GiB,
// durations, clock times, causes in words), each under a plain label in the
// same language. The raw
// numbers under their API names are in `-o json`.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "cli/json_view.h"
#include "cli/render.h"
#include "cli/table.h"
#include "common/units.h"
#include "model/json.h"
#include "model/message_template.h"
#include "model/reason.h"
#include "model/reason_catalogue.h"
#include "model/usage.h"

namespace berth::cli {

using nlohmann::json;

namespace {

using Lines = std::vector<std::pair<std::string, std::string>>;
using model::Message;

// The view's own words, English and Simplified Chinese side by side; the
// reason's sentence and the numbers' units come from model/reason_catalogue.
namespace words {
constexpr Message kJob{"job", "作业"};
constexpr Message kQueue{"queue", "队列"};
constexpr Message kState{"state", "状态"};
constexpr Message kCode{"code", "原因代码"};
constexpr Message kFailure{"failure", "失败类别"};
constexpr Message kEvidence{"evidence", "证据"};
constexpr Message kDetail{"detail", "详情"};
constexpr Message kTime{"TIME", "时间"};
constexpr Message kEvent{"EVENT", "事件"};
constexpr Message kMessage{"MESSAGE", "说明"};
constexpr Message kPerReplica{"per replica", "每个副本"};
constexpr Message kShare{"a {} share of a GPU", "一块 GPU 的 {} 份额"};
constexpr Message kMemorySlice{"{} of one GPU's memory", "一块 GPU 的 {} 显存"};
constexpr Message kReplicas{"replicas", "副本数"};
constexpr Message kNodesLooked{"nodes looked at", "查看的节点"};
constexpr Message kReplicasWithRoom{"replicas with room", "有空间的副本"};
constexpr Message kNodesRejected{"nodes rejected", "被排除的节点"};
constexpr Message kFreeOnUsable{"free on usable nodes", "可用节点上空闲"};
constexpr Message kNeeded{"needed", "需要"};
constexpr Message kMostFree{"most free on one node", "单个节点最多空闲"};
constexpr Message kWouldRunWith{"would run now with", "改为即可立即运行"};
constexpr Message kPerReplicaValue{"{} per replica", "每个副本 {}"};
constexpr Message kAsksFor{"asks for", "申请"};
constexpr Message kQueueUses{"queue uses", "队列已用"};
constexpr Message kQueueGuaranteed{"queue guaranteed", "队列保障"};
constexpr Message kMayBorrow{"may borrow", "可借用"};
constexpr Message kUpToMore{"up to {} more", "最多再借 {}"};
constexpr Message kBorrowableNow{"borrowable now", "当前可借"};
constexpr Message kPosition{"position", "排队位置"};
constexpr Message kInItsQueue{"{} in its queue", "队列中第 {} 位"};
constexpr Message kAheadAsking{" ({} job(s) ahead, asking for {})",
                               "（前面 {} 个作业，共申请 {}）"};
constexpr Message kWaitsBehind{"waits behind", "等待"};
constexpr Message kJobN{"job {}", "作业 {}"};
constexpr Message kEstimatedStart{"estimated start", "预计开始"};
constexpr Message kInAbout{"in about {}", "约 {} 后"};
constexpr Message kNow{"now", "现在"};
constexpr Message kAround{"{}, around {} ({})", "{}，约 {}（{}）"};
constexpr Message kAroundNoNote{"{}, around {}", "{}，约 {}"};
constexpr Message kGpusReserved{"GPUs are reserved for it", "已为其预留 GPU"};
constexpr Message kNoGpusReserved{"an estimate; no GPUs reserved", "仅为估计，未预留 GPU"};
constexpr Message kUnknown{"unknown: {}", "未知：{}"};
constexpr Message kEtaBasis{"start estimated from", "开始时间依据"};
constexpr Message kBasisDeclared{"declared max runtimes", "声明的最长运行时间"};
constexpr Message kBasisPredicted{"predicted run times (no max runtime declared)",
                                  "预测的运行时间（未声明最长运行时间）"};
constexpr Message kBasisGrace{"the end of its reclaim grace", "其回收宽限的结束"};
constexpr Message kAfterJob{"must end first", "需先结束"};
constexpr Message kAfterJobAt{"{}, around {}", "{}，约 {}"};
constexpr Message kAfterOverrun{
    "{}, around {} (already past its predicted run time: expected to run as long again)",
    "{}，约 {}（已超过预测运行时间：按再运行同样时长估计）"};
constexpr Message kPredictedRuntime{"predicted run time", "预测运行时间"};
constexpr Message kPredictedFrom{"{}, the median of {} finished run(s) of {}",
                                 "{}，取 {} 次已完成运行（{}）的中位数"};
constexpr Message kSameUserName{"the same user and job name", "同一用户、同名作业"};
constexpr Message kSameUserShape{"the same user and shape", "同一用户、同样规格"};
constexpr Message kSameTenantShape{"the same tenant and shape", "同一租户、同样规格"};
constexpr Message kSameShape{"the same shape", "同样规格"};
constexpr Message kNotBefore{"not before", "最早开始"};
constexpr Message kFreeButReserved{"free but reserved", "空闲但已预留"};
constexpr Message kForEarlierJobs{"{} (for jobs that start before it would end)",
                                  "{}（留给在它结束前开始的作业）"};
constexpr Message kMayReclaim{"may reclaim", "可否回收"};
constexpr Message kNotBelowGuarantee{"no: its queue is not below its guarantee",
                                     "否：其队列未低于保障"};
constexpr Message kCouldReclaim{"could reclaim", "可回收"};
constexpr Message kCouldPreempt{"could preempt", "可抢占"};
constexpr Message kNotEnough{"{} job(s), not enough", "{} 个作业，不够"};
constexpr Message kCouldMove{"could move", "可迁移"};
constexpr Message kThatCheckpoint{"{} job(s) that checkpoint, at most {} at once",
                                  "{} 个可保存检查点的作业，每次最多 {} 个"};
constexpr Message kEvictableLater{"evictable later", "稍后可驱逐"};
constexpr Message kFirstIn{"{} job(s), the first in {}", "{} 个作业，最早一个在 {} 后"};
constexpr Message kReclaimGrace{"reclaim grace", "回收宽限"};
constexpr Message kReclaimsAt{"reclaims lent GPUs {}, around {}; needed them since {}",
                              "{}收回借出的 GPU，约 {}；自 {} 起需要回收"};
constexpr Message kReclaimNow{"reclaiming now", "现在回收"};
constexpr Message kWouldStop{
    "would stop {} borrower job(s) ({} first), losing {} GPU-hours, at most {} per job",
    "需停止 {} 个借用作业（首个为{}），丢失 {} GPU 小时，每个作业最多 {}"};
constexpr Message kByJob{"for", "为了"};
constexpr Message kWorkLost{"work lost", "丢失的工作"};
constexpr Message kMaxRuntime{"max runtime", "最长运行时间"};
constexpr Message kBackoff{"backoff", "退避"};
constexpr Message kBudgetUsed{"budget used", "预算已用"};
constexpr Message kBudget{"budget", "预算"};
constexpr Message kListSeparator{", ", "，"};
constexpr Message kForecast{"forecast", "预测"};
constexpr Message kForecastStart{"starts around {} ({} basis, {} scheduler runs)",
                                 "约 {} 开始（依据：{}，推演 {} 轮调度）"};
constexpr Message kSmallestChange{"smallest change, checked by the scheduler: {}",
                                  "最小改动（已由调度器验证）：{}"};
}  // namespace words

// The message in `lang`, its {} filled from `args` in order.
template <typename... Args>
std::string Say(const Message& m, model::Lang lang, Args&&... args) {
  return fmt::format(fmt::runtime(m.In(lang)), std::forward<Args>(args)...);
}

// The reason's numbers as (label, value) lines in a person's units. Keys
// this view does not know are kept as they are, so nothing is hidden.
Lines ReasonFacts(const model::Reason& r, model::Lang lang) {
  std::map<std::string, std::int64_t, std::less<>> left(r.counts.begin(), r.counts.end());
  auto take = [&left](std::string_view key) -> std::optional<std::int64_t> {
    auto it = left.find(key);
    if (it == left.end()) return std::nullopt;
    std::int64_t v = it->second;
    left.erase(it);
    return v;
  };
  // The marks of references to other tenants' jobs are said in those
  // references' words, not as lines of their own.
  for (std::string_view key : model::kJobRefKeys) {
    left.erase(std::string(key) + std::string(model::kOtherTenantSuffix));
  }
  auto hidden = [&r](std::string_view key) { return model::NamesOtherTenantJob(r, key); };
  auto gpus = [lang](std::int64_t n) { return model::FormatGpus(n * 1000, lang); };
  auto duration = [lang](std::int64_t ms) { return model::FormatDuration(ms, lang); };
  auto when = [&](std::int64_t in) {
    return in > 0 ? Say(words::kInAbout, lang, duration(in)) : Say(words::kNow, lang);
  };
  Lines out;

  // What one replica asks for, and where it was looked for.
  const auto slice_mgpu = take(model::kSliceMgpu);
  const auto slice_bytes = take(model::kSliceBytes);
  const auto per_replica = take("gpus_per_replica");
  if (slice_mgpu && *slice_mgpu > 0) {
    out.emplace_back(Say(words::kPerReplica, lang),
                     Say(words::kShare, lang, model::FormatGpus(*slice_mgpu, lang)));
  } else if (slice_bytes && *slice_bytes > 0) {
    out.emplace_back(Say(words::kPerReplica, lang),
                     Say(words::kMemorySlice, lang,
                         model::FormatSize(static_cast<std::uint64_t>(*slice_bytes))));
  } else if (per_replica) {
    out.emplace_back(Say(words::kPerReplica, lang), gpus(*per_replica));
  }
  if (auto n = take("replicas")) out.emplace_back(Say(words::kReplicas, lang), std::to_string(*n));
  if (auto n = take("nodes")) out.emplace_back(Say(words::kNodesLooked, lang), std::to_string(*n));
  std::string causes;
  for (const auto& [key, text] : model::NodeCauseTexts()) {
    if (auto n = take(key); n && *n > 0) {
      if (!causes.empty()) causes += Say(words::kListSeparator, lang);
      causes += model::FillTemplate(text.In(lang), model::TemplateArgs().Set("n", *n));
    }
  }
  if (auto placed = take(model::kCauseGang); placed && *placed > 0) {
    out.emplace_back(Say(words::kReplicasWithRoom, lang), std::to_string(*placed));
  }
  if (!causes.empty()) out.emplace_back(Say(words::kNodesRejected, lang), causes);
  if (auto n = take(model::kFreeGpus)) out.emplace_back(Say(words::kFreeOnUsable, lang), gpus(*n));
  if (auto n = take(model::kNeededGpus)) out.emplace_back(Say(words::kNeeded, lang), gpus(*n));
  if (auto n = take(model::kLargestFree)) out.emplace_back(Say(words::kMostFree, lang), gpus(*n));
  if (auto n = take(model::kWouldFitGpusPerReplica)) {
    out.emplace_back(Say(words::kWouldRunWith, lang), Say(words::kPerReplicaValue, lang, gpus(*n)));
  }

  // The queue's numbers, in the unit of the resource they count.
  std::string resource = "gpus";
  if (r.code == model::ReasonCode::kOverQuota ||
      r.code == model::ReasonCode::kNotPreemptibleOverGuarantee) {
    if (auto space = r.detail.find(' '); space != std::string::npos) {
      resource = r.detail.substr(space + 1);
    }
  }
  auto amount = [&resource, lang](std::int64_t v) {
    if (resource == "cpu") return model::FormatCores(v, lang);
    if (resource == "memory" || resource == "gpu_memory") {
      return model::FormatSize(static_cast<std::uint64_t>(std::max<std::int64_t>(v, 0)));
    }
    if (resource.starts_with("gpus")) return model::FormatGpus(v, lang);
    return std::to_string(v);
  };
  if (auto v = take(model::kQueueRequested))
    out.emplace_back(Say(words::kAsksFor, lang), amount(*v));
  if (auto v = take(model::kQueueUsed)) out.emplace_back(Say(words::kQueueUses, lang), amount(*v));
  if (auto v = take(model::kQueueGuaranteed))
    out.emplace_back(Say(words::kQueueGuaranteed, lang), amount(*v));
  if (auto v = take(model::kQueueBorrowLimit)) {
    out.emplace_back(Say(words::kMayBorrow, lang), Say(words::kUpToMore, lang, amount(*v)));
  }
  if (auto v = take(model::kQueueBorrowable))
    out.emplace_back(Say(words::kBorrowableNow, lang), amount(*v));

  // Its place in line and its start.
  const auto position = take(model::kPosition);
  const auto ahead_jobs = take(model::kAheadJobs);
  const auto ahead_gpus = take(model::kAheadGpus);
  if (position) {
    std::string text = Say(words::kInItsQueue, lang, *position);
    if (ahead_jobs && *ahead_jobs > 0) {
      text += Say(words::kAheadAsking, lang, *ahead_jobs, gpus(ahead_gpus.value_or(0)));
    }
    out.emplace_back(Say(words::kPosition, lang), text);
  }
  const auto blocked_by = take("blocked_by");
  if (blocked_by)
    out.emplace_back(Say(words::kWaitsBehind, lang), Say(words::kJobN, lang, *blocked_by));
  const auto eta = take(model::kEtaMs);
  const auto eta_in = take(model::kEtaInMs);
  const auto reserved = take(model::kEtaReserved);
  if (eta) {
    const std::int64_t in = eta_in.value_or(0);
    out.emplace_back(
        Say(words::kEstimatedStart, lang),
        Say(words::kAround, lang, when(in), model::FormatClock(*eta, *eta - in, lang),
            Say(reserved.value_or(0) != 0 ? words::kGpusReserved : words::kNoGpusReserved, lang)));
  }
  const auto eta_basis = take(model::kEtaBasis);
  const auto after_job = take(model::kEtaAfterJob);
  const auto after_ms = take(model::kEtaAfterMs);
  const auto after_overrun = take(model::kEtaAfterOverrun);
  if (eta_basis) {
    const Message& basis = *eta_basis == static_cast<std::int64_t>(model::EtaBasis::kPredicted)
                               ? words::kBasisPredicted
                           : *eta_basis == static_cast<std::int64_t>(model::EtaBasis::kGrace)
                               ? words::kBasisGrace
                               : words::kBasisDeclared;
    out.emplace_back(Say(words::kEtaBasis, lang), Say(basis, lang));
  }
  if (after_job || hidden(model::kEtaAfterJob)) {
    const std::int64_t at = after_ms.value_or(0);
    // The date shows when it is another day than the cycle's.
    const std::string clock = model::FormatClock(at, eta && eta_in ? *eta - *eta_in : at, lang);
    out.emplace_back(Say(words::kAfterJob, lang),
                     Say(after_overrun.value_or(0) != 0 ? words::kAfterOverrun : words::kAfterJobAt,
                         lang, model::JobRefText(after_job.value_or(0), lang), clock));
  }
  const auto predicted = take(model::kPredictedRuntimeMs);
  const auto predicted_basis = take(model::kPredictedBasis);
  const auto predicted_samples = take(model::kPredictedSamples);
  if (predicted) {
    const std::int64_t b = predicted_basis.value_or(0);
    const Message& from = b == 1   ? words::kSameUserName
                          : b == 2 ? words::kSameUserShape
                          : b == 3 ? words::kSameTenantShape
                                   : words::kSameShape;
    out.emplace_back(Say(words::kPredictedRuntime, lang),
                     Say(words::kPredictedFrom, lang, duration(*predicted),
                         predicted_samples.value_or(0), Say(from, lang)));
  }
  const auto unknown = take(model::kEtaUnknown);
  const auto eta_blocked_by = take(model::kEtaBlockedBy);
  const auto eta_blockers = take(model::kEtaBlockers);
  if (unknown) {
    out.emplace_back(Say(words::kEstimatedStart, lang),
                     Say(words::kUnknown, lang,
                         model::EtaUnknownText(*unknown, eta_blocked_by.value_or(0),
                                               eta_blockers.value_or(0), lang)));
  }
  const auto not_before = take(model::kNotBeforeMs);
  const auto not_before_in = take(model::kNotBeforeInMs);
  if (not_before) {
    const std::int64_t in = not_before_in.value_or(0);
    out.emplace_back(Say(words::kNotBefore, lang),
                     Say(words::kAroundNoNote, lang, when(in),
                         model::FormatClock(*not_before, *not_before - in, lang)));
  }
  if (auto n = take(model::kReservedFreeGpus)) {
    out.emplace_back(Say(words::kFreeButReserved, lang),
                     Say(words::kForEarlierJobs, lang, gpus(*n)));
  }

  // Whether eviction could help.
  if (auto v = take(model::kReclaimNotBelowGuarantee); v && *v != 0) {
    out.emplace_back(Say(words::kMayReclaim, lang), Say(words::kNotBelowGuarantee, lang));
  }
  if (auto n = take(model::kReclaimCandidates)) {
    out.emplace_back(Say(words::kCouldReclaim, lang), Say(words::kNotEnough, lang, *n));
  }
  if (auto n = take(model::kPreemptCandidates)) {
    out.emplace_back(Say(words::kCouldPreempt, lang), Say(words::kNotEnough, lang, *n));
  }
  const auto max_moves = take(model::kMaxMovesKey);
  if (auto n = take(model::kMoveCandidates)) {
    out.emplace_back(Say(words::kCouldMove, lang),
                     Say(words::kThatCheckpoint, lang, *n, max_moves.value_or(0)));
  }
  const auto young = take(model::kEvictableAfterMinRuntime);
  const auto young_in = take(model::kMinRuntimeEndsInMs);
  if (young) {
    out.emplace_back(Say(words::kEvictableLater, lang),
                     Say(words::kFirstIn, lang, *young, duration(young_in.value_or(0))));
  }

  // Waiting out the reclaim grace: when the guarantee wins, and what
  // reclaiming now would cost the borrowers.
  const auto grace_at = take(model::kReclaimAtMs);
  const auto grace_in = take(model::kReclaimInMs);
  const auto grace_since = take(model::kReclaimSinceMs);
  const auto grace_jobs = take(model::kReclaimVictims);
  const auto grace_first = take(model::kReclaimFirstVictim);
  const auto grace_worst = take(model::kReclaimWorkLostMs);
  const auto grace_lost = take(model::kReclaimLostMgpuMs);
  if (grace_at) {
    const std::int64_t in = grace_in.value_or(0);
    const std::int64_t ref = *grace_at - in;
    out.emplace_back(
        Say(words::kReclaimGrace, lang),
        Say(words::kReclaimsAt, lang, when(in), model::FormatClock(*grace_at, ref, lang),
            model::FormatClock(grace_since.value_or(ref), ref, lang)));
    out.emplace_back(
        Say(words::kReclaimNow, lang),
        Say(words::kWouldStop, lang, grace_jobs.value_or(0),
            model::JobRefText(grace_first.value_or(0), lang),
            model::FormatGpuHours(grace_lost.value_or(0), 1), duration(grace_worst.value_or(0))));
  }

  // An evicted job, a stopped one, a retry, a budget.
  // A job of another tenant is named only by that (model::HideOtherTenantsJobs).
  const auto by_job = take(model::kByJob);
  if (by_job || hidden(model::kByJob)) {
    out.emplace_back(Say(words::kByJob, lang), model::JobRefText(by_job.value_or(0), lang));
  }
  if (auto v = take(model::kWorkLostMs))
    out.emplace_back(Say(words::kWorkLost, lang), duration(*v));
  if (auto v = take("max_runtime_s"))
    out.emplace_back(Say(words::kMaxRuntime, lang), duration(*v * 1000));
  if (auto v = take("backoff_s")) out.emplace_back(Say(words::kBackoff, lang), duration(*v * 1000));
  if (auto v = take(model::kBudgetUsed))
    out.emplace_back(Say(words::kBudgetUsed, lang), model::FormatMoney(*v));
  if (auto v = take(model::kBudgetLimit))
    out.emplace_back(Say(words::kBudget, lang), model::FormatMoney(*v));
  for (const auto& [key, value] : left) out.emplace_back(key, std::to_string(value));
  return out;
}

}  // namespace

std::string RenderWhy(const json& why, model::Lang lang) {
  std::string out;
  // Least change first: a verified hint (the job as it is, changed in one
  // way, placed by a second scheduling run) is the smallest change known to
  // let it run, so it leads; the sentence of what holds it now follows, and
  // the node layer after that (within it, the causes whose lifting alone
  // opens the most nodes first).
  const json* reason = Field(why, "reason");
  const bool has_reason = reason != nullptr && reason->is_object();
  model::Reason r;
  if (has_reason) {
    try {
      r = model::ReasonFromJson(*reason);
    } catch (const json::exception&) {
      r = {};  // counts that are not numbers: shown as they are below, no hint
    }
  }
  if (std::string hint = model::WouldRunText(r, lang); !hint.empty()) {
    out += Say(words::kSmallestChange, lang, hint) + "\n";
  }
  std::string message = Text(why, "reason.message");
  if (message == "-" || message.empty()) message = Text(why, "reason.code");
  out += OneLine(message) + "\n";
  // A failure says what to do, with its evidence (a log line, an exit code).
  if (std::string failure = Text(why, "failure.message"); failure != "-" && !failure.empty()) {
    out += OneLine(failure) + "\n";
  }
  out += "\n";

  std::vector<std::pair<std::string, std::string>> lines;
  lines.reserve(32);  // the fields and the counts; GCC 12 at -O3 misreads growth from empty
  lines.emplace_back(Say(words::kJob, lang),
                     fmt::format("{} ({})", IntText(why, "id"), Text(why, "name")));
  if (Field(why, "tenant") != nullptr || Field(why, "queue") != nullptr) {
    lines.emplace_back(Say(words::kQueue, lang), Text(why, "tenant") + "/" + Text(why, "queue"));
  }
  lines.emplace_back(Say(words::kState, lang), Text(why, "state"));
  lines.emplace_back(Say(words::kCode, lang), Text(why, "reason.code"));
  if (std::string cls = Text(why, "failure.class"); cls != "-" && !cls.empty()) {
    lines.emplace_back(Say(words::kFailure, lang), cls);
    lines.emplace_back(Say(words::kEvidence, lang), Text(why, "failure.evidence"));
  }
  if (has_reason) {
    if (r.counts.empty()) {
      if (const json* counts = Field(why, "reason.counts");
          counts != nullptr && counts->is_object()) {
        for (const auto& item : counts->items())
          lines.emplace_back(item.key(), ValueText(item.value()));
      }
    }
    for (auto& line : ReasonFacts(r, lang)) lines.push_back(std::move(line));
  }
  // The forecast's start (the scheduler run forward), as a clock time.
  if (const json* f = Field(why, "reason.forecast"); f != nullptr && f->is_object()) {
    const std::int64_t start = f->value("start_ms", std::int64_t{0});
    const std::int64_t made = f->value("made_at_ms", std::int64_t{0});
    if (start > 0) {
      lines.emplace_back(
          Say(words::kForecast, lang),
          Say(words::kForecastStart, lang, model::FormatClock(start, made, lang),
              f->value("basis", std::string("-")), f->value("cycles", std::int64_t{0})));
    }
  }
  if (std::string detail = Text(why, "reason.detail"); detail != "-" && !detail.empty()) {
    lines.emplace_back(Say(words::kDetail, lang), detail);
  }
  std::size_t width = 0;
  for (const auto& [key, value] : lines) width = std::max(width, DisplayWidth(key) + 1);
  for (const auto& [key, value] : lines) {
    out += key + ":" + std::string(width - DisplayWidth(key) - 1 + 2, ' ') + OneLine(value) + "\n";
  }

  const json& timeline = Array(why, "timeline");
  if (!timeline.empty()) {
    Table table({Say(words::kTime, lang), Say(words::kEvent, lang), Say(words::kMessage, lang)});
    for (const auto& entry : timeline) {
      auto time = Int(entry, "time_ms");
      table.AddRow({time ? FormatTimeMs(*time) : "-", Text(entry, "event"),
                    OneLine(Text(entry, "message"))});
    }
    out += '\n' + table.Render();
  }
  return out;
}

}  // namespace berth::cli
