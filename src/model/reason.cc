#include "model/reason.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "common/units.h"
#include "model/usage.h"

namespace berth::model {

std::string_view ReasonCodeName(ReasonCode code) {
  switch (code) {
    case ReasonCode::kNone:
      return "None";
    case ReasonCode::kQueued:
      return "Queued";
    case ReasonCode::kNoNodes:
      return "NoNodes";
    case ReasonCode::kBehindInQueue:
      return "BehindInQueue";
    case ReasonCode::kNoNodeFits:
      return "NoNodeFits";
    case ReasonCode::kScheduled:
      return "Scheduled";
    case ReasonCode::kRunning:
      return "Running";
    case ReasonCode::kSucceeded:
      return "Succeeded";
    case ReasonCode::kFailedExitCode:
      return "FailedExitCode";
    case ReasonCode::kFailedToStart:
      return "FailedToStart";
    case ReasonCode::kMaxRuntimeExceeded:
      return "MaxRuntimeExceeded";
    case ReasonCode::kCancelled:
      return "Cancelled";
    case ReasonCode::kRunLost:
      return "RunLost";
    case ReasonCode::kQueueUnknown:
      return "QueueUnknown";
    case ReasonCode::kOverQuota:
      return "OverQuota";
    case ReasonCode::kNotPreemptibleOverGuarantee:
      return "NotPreemptibleOverGuarantee";
    case ReasonCode::kFragmented:
      return "Fragmented";
    case ReasonCode::kPreempted:
      return "Preempted";
    case ReasonCode::kReclaimed:
      return "Reclaimed";
    case ReasonCode::kWaitingForEvictions:
      return "WaitingForEvictions";
    case ReasonCode::kMoved:
      return "Moved";
    case ReasonCode::kGpuFailed:
      return "GpuFailed";
    case ReasonCode::kRetrying:
      return "Retrying";
    case ReasonCode::kDrained:
      return "Drained";
    case ReasonCode::kOverBudget:
      return "OverBudget";
  }
  return "None";
}

namespace {

// kOverBudget's detail: "<month> <unit>".
std::pair<std::string, std::string> SplitBudgetDetail(const std::string& detail) {
  const auto space = detail.find(' ');
  if (space == std::string::npos) return {detail, ""};
  return {detail.substr(0, space), detail.substr(space + 1)};
}

std::int64_t Count(const Reason& r, std::string_view key) {
  auto it = r.counts.find(key);
  return it == r.counts.end() ? 0 : it->second;
}

// Milli-GPUs as GPUs: 16000 -> "16", 500 -> "0.5".
std::string Gpus(std::int64_t milli) {
  if (milli % 1000 == 0) return std::to_string(milli / 1000);
  std::string frac = fmt::format("{:03}", milli % 1000);
  while (frac.back() == '0') frac.pop_back();
  return fmt::format("{}.{}", milli / 1000, frac);
}

// detail is "QUEUE RESOURCE" ("vision gpus"); amounts are in the resource's
// unit (milli-GPUs for GPUs).
std::string QuotaNumbers(const Reason& r) {
  auto space = r.detail.find(' ');
  std::string queue = r.detail.substr(0, space);
  std::string resource = space == std::string::npos ? "gpus" : r.detail.substr(space + 1);
  bool gpus = resource.starts_with("gpus");
  auto amount = [&](std::string_view key) {
    return gpus ? Gpus(Count(r, key)) : std::to_string(Count(r, key));
  };
  std::string unit =
      gpus ? (resource == "gpus" ? "GPU(s)" : resource.substr(5) + " GPU(s)") : resource;
  std::string limit = r.counts.contains(kQueueBorrowLimit)
                          ? fmt::format("may borrow up to {} more", amount(kQueueBorrowLimit))
                          : std::string("may borrow without limit");
  return fmt::format(
      "it asks for {} {}; queue {} uses {} of {} guaranteed and {}; {} can be "
      "borrowed now",
      amount(kQueueRequested), unit, queue, amount(kQueueUsed), amount(kQueueGuaranteed), limit,
      amount(kQueueBorrowable));
}

// What one replica needs: "2 GPU(s)", or its slice of one GPU.
std::string Need(const Reason& r) {
  if (auto m = Count(r, kSliceMgpu); m > 0) return fmt::format("a {} share of one GPU", Gpus(m));
  if (auto b = Count(r, kSliceBytes); b > 0) {
    return fmt::format("a {} memory slice of one GPU", FormatBytes(static_cast<std::uint64_t>(b)));
  }
  return fmt::format("{} GPU(s)", Count(r, "gpus_per_replica"));
}

std::string NeedZh(const Reason& r) {
  if (auto m = Count(r, kSliceMgpu); m > 0) return fmt::format("一块 GPU 的 {} 份额", Gpus(m));
  if (auto b = Count(r, kSliceBytes); b > 0) {
    return fmt::format("一块 GPU 上 {} 显存", FormatBytes(static_cast<std::uint64_t>(b)));
  }
  return fmt::format("{} 块 GPU", Count(r, "gpus_per_replica"));
}

std::string Order(const Reason& r) {
  if (Count(r, kAheadJobs) == 0) return "";
  return fmt::format("; {} job(s) asking for {} GPU(s) are ahead of it in its queue",
                     Count(r, kAheadJobs), Count(r, kAheadGpus));
}

std::string WouldRun(const Reason& r) {
  std::string out;
  if (auto g = Count(r, kWouldFitGpusPerReplica); g > 0) {
    out += fmt::format("; it would run now with {} GPU(s) per replica", g);
  }
  if (r.detail.starts_with("gpu_model=")) {
    out += fmt::format("; it would run now with gpu_model {}", r.detail.substr(10));
  } else if (r.detail.starts_with("pool=")) {
    out += fmt::format("; it would run now in pool {}", r.detail.substr(5));
  }
  return out;
}

// A duration for people: "45s", "12m", "1h 20m", "2d 3h".
std::string Duration(std::int64_t ms, bool zh) {
  std::int64_t s = std::max<std::int64_t>(0, ms) / 1000;
  std::int64_t d = s / 86'400, h = s % 86'400 / 3600, m = s % 3600 / 60;
  if (zh) {
    if (d > 0) return h > 0 ? fmt::format("{} 天 {} 小时", d, h) : fmt::format("{} 天", d);
    if (h > 0) return m > 0 ? fmt::format("{} 小时 {} 分钟", h, m) : fmt::format("{} 小时", h);
    if (m > 0) return fmt::format("{} 分钟", m);
    return fmt::format("{} 秒", s);
  }
  if (d > 0) return h > 0 ? fmt::format("{}d {}h", d, h) : fmt::format("{}d", d);
  if (h > 0) return m > 0 ? fmt::format("{}h {}m", h, m) : fmt::format("{}h", h);
  if (m > 0) return fmt::format("{}m", m);
  return fmt::format("{}s", s);
}

std::string EtaStart(const Reason& r);
std::string EtaStartZh(const Reason& r);

// The estimated start of a waiting job, appended to whatever holds it back.
// Times are shown from the cycle's now (the *_in_ms keys): a reason has no
// clock of its own, and eta_ms stays for scripts.
std::string Eta(const Reason& r) {
  std::string reserved;
  if (auto n = Count(r, kReservedFreeGpus); n > 0) {
    reserved = fmt::format(
        "; {} more free GPU(s) are reserved for jobs that start before it would end (only a job "
        "whose max runtime ends by then may use them)",
        n);
  }
  return reserved + EtaStart(r);
}

std::string EtaStart(const Reason& r) {
  if (r.counts.contains(kEtaInMs)) {
    std::int64_t in = Count(r, kEtaInMs);
    std::string when = in <= 0 ? std::string("now, as GPUs free up")
                               : fmt::format("in about {}", Duration(in, false));
    return fmt::format(
        "; estimated start {} ({})", when,
        Count(r, kEtaReserved) != 0 ? "GPUs are reserved for it" : "an estimate; no GPUs reserved");
  }
  if (r.counts.contains(kEtaUnknown)) {
    switch (static_cast<EtaUnknown>(Count(r, kEtaUnknown))) {
      case EtaUnknown::kBlockedByUnlimited: {
        std::int64_t more = Count(r, kEtaBlockers) - 1;
        return fmt::format(
            "; estimated start unknown: job {}{} on GPUs it needs has no max runtime",
            Count(r, kEtaBlockedBy), more > 0 ? fmt::format(" (and {} more)", more) : "");
      }
      case EtaUnknown::kCapacity:
        return "; estimated start unknown: it does not fit even when every running job has ended";
      case EtaUnknown::kQuota:
        return "; estimated start unknown: it waits for its queue's quota, not for GPUs";
      case EtaUnknown::kInfeasible:
        return "; estimated start unknown: no node could ever take it";
    }
    return "; estimated start unknown";
  }
  if (r.counts.contains(kNotBeforeInMs)) {
    return fmt::format("; not before job {} starts (in about {})", Count(r, "blocked_by"),
                       Duration(Count(r, kNotBeforeInMs), false));
  }
  return "";
}

std::string EtaZh(const Reason& r) {
  std::string reserved;
  if (auto n = Count(r, kReservedFreeGpus); n > 0) {
    reserved = fmt::format(
        "；另有 {} 块空闲 GPU "
        "已预留给在它结束前就要开始的作业（只有最长运行时间在那之前结束的作业才能使用）",
        n);
  }
  return reserved + EtaStartZh(r);
}

std::string EtaStartZh(const Reason& r) {
  if (r.counts.contains(kEtaInMs)) {
    std::int64_t in = Count(r, kEtaInMs);
    std::string when =
        in <= 0 ? std::string("GPU 一空出即开始") : fmt::format("约 {}后开始", Duration(in, true));
    return fmt::format("；预计{}（{}）", when,
                       Count(r, kEtaReserved) != 0 ? "已为它预留 GPU" : "估计值，未预留 GPU");
  }
  if (r.counts.contains(kEtaUnknown)) {
    switch (static_cast<EtaUnknown>(Count(r, kEtaUnknown))) {
      case EtaUnknown::kBlockedByUnlimited: {
        std::int64_t more = Count(r, kEtaBlockers) - 1;
        return fmt::format(
            "；无法估计开始时间：它需要的 GPU 被作业 {} 占用，该作业没有设置最长运行时间{}",
            Count(r, kEtaBlockedBy), more > 0 ? fmt::format("（另有 {} 个这样的作业）", more) : "");
      }
      case EtaUnknown::kCapacity:
        return "；无法估计开始时间：即使所有运行中的作业都结束，它也放不下";
      case EtaUnknown::kQuota:
        return "；无法估计开始时间：它在等待队列配额，而不是 GPU";
      case EtaUnknown::kInfeasible:
        return "；无法估计开始时间：没有任何节点能容纳它";
    }
    return "；无法估计开始时间";
  }
  if (r.counts.contains(kNotBeforeInMs)) {
    return fmt::format("；不会早于作业 {} 开始（约 {}后）", Count(r, "blocked_by"),
                       Duration(Count(r, kNotBeforeInMs), true));
  }
  return "";
}

std::string RenderEn(const Reason& r) {
  switch (r.code) {
    case ReasonCode::kNone:
      return "";
    case ReasonCode::kQueued:
      return "waiting for the next scheduling cycle";
    case ReasonCode::kNoNodes:
      return "no nodes are registered; start berth-agent on a GPU host";
    case ReasonCode::kBehindInQueue:
      return fmt::format(
          "waiting behind job {} in queue order ({} ahead)", Count(r, "blocked_by"),
          r.counts.contains(kAheadJobs) ? Count(r, kAheadJobs) : Count(r, "position"));
    case ReasonCode::kNoNodeFits: {
      std::string causes;
      static constexpr std::array<std::pair<std::string_view, std::string_view>, 16> kCauses{{
          {kCauseNotReady, "not ready"},
          {kCauseCordoned, "cordoned or draining"},
          {kCausePool, "outside the job's or queue's pools"},
          {kCauseSelector, "labels not matching the node selector"},
          {kCauseUnhealthy, "only unhealthy or cordoned GPUs of the requested kind"},
          {kCauseTopology, "no NVLink island or single node with room for the replicas"},
          {kCauseTaint, "a NoSchedule taint the job does not tolerate"},
          {kCauseGpuModel, "no GPU of the requested model"},
          {kCauseGpuMemory, "GPUs with too little memory"},
          {kCauseTooFewGpusInTotal, "fewer GPUs of the requested kind than one replica needs"},
          {kCauseTooFewGpus, "too few free GPUs"},
          {kCauseCpu, "too little free CPU"},
          {kCauseMemory, "too little free memory"},
          {kCauseNotSharing, "no GPU of the requested kind in sharing mode"},
          {kCauseSharedFull, "too little free memory or share left on their sharing GPUs"},
          {kCauseHeldBySlices, "GPUs held by slices of shared jobs, not free for whole-GPU use"},
      }};
      for (auto [key, text] : kCauses) {
        if (auto n = Count(r, key); n > 0) {
          causes += fmt::format("{}{} {}", causes.empty() ? "" : ", ", n, text);
        }
      }
      if (auto placed = Count(r, kCauseGang); placed > 0) {
        return fmt::format(
                   "the gang does not fit: only {} of {} replicas needing {} each have "
                   "room; "
                   "for the next one, {} of {} nodes were rejected: {}",
                   placed, Count(r, "replicas"), Need(r), Count(r, "nodes"), Count(r, "nodes"),
                   causes) +
               Order(r) + WouldRun(r);
      }
      return fmt::format("0/{} nodes can take a replica needing {}: {}", Count(r, "nodes"), Need(r),
                         causes) +
             Order(r) + WouldRun(r);
    }
    case ReasonCode::kScheduled:
      return "placed; starting on its node(s)";
    case ReasonCode::kRunning:
      return "running";
    case ReasonCode::kSucceeded:
      return "all replicas exited 0";
    case ReasonCode::kFailedExitCode:
      return Count(r, "signal") != 0 ? fmt::format("replica {} was killed by signal {}",
                                                   Count(r, "replica"), Count(r, "signal"))
                                     : fmt::format("replica {} exited with code {}",
                                                   Count(r, "replica"), Count(r, "exit_code"));
    case ReasonCode::kFailedToStart:
      return fmt::format("replica {} could not start: {}", Count(r, "replica"), r.detail);
    case ReasonCode::kMaxRuntimeExceeded:
      return fmt::format("stopped after its max_runtime of {} s", Count(r, "max_runtime_s"));
    case ReasonCode::kCancelled:
      return r.detail.empty() ? "cancelled" : fmt::format("cancelled by {}", r.detail);
    case ReasonCode::kRunLost:
      return fmt::format("replica {} was lost: {}", Count(r, "replica"), r.detail);
    case ReasonCode::kQueueUnknown:
      return fmt::format("queue '{}' is not in the scheduling policy; ask an admin to add it",
                         r.detail);
    case ReasonCode::kOverQuota:
      return "over its queue's quota: " + QuotaNumbers(r) + Order(r);
    case ReasonCode::kNotPreemptibleOverGuarantee:
      return "a non-preemptible job runs only within its queue's guarantee: " + QuotaNumbers(r) +
             "; mark it preemptible or ask for a larger guarantee";
    case ReasonCode::kFragmented:
      return fmt::format(
                 "fragmented: {} GPU(s) are free on nodes it may use, enough for the {} it needs, "
                 "but not where its replicas fit (at most {} free on one node)",
                 Count(r, kFreeGpus), Count(r, kNeededGpus), Count(r, kLargestFree)) +
             Order(r) + WouldRun(r);
    case ReasonCode::kPreempted:
      return fmt::format(
          "preempted by higher-priority job {} of queue {}; about {} s of work since the last "
          "checkpoint was lost",
          Count(r, kByJob), r.detail, Count(r, kWorkLostMs) / 1000);
    case ReasonCode::kReclaimed:
      return fmt::format(
          "reclaimed by queue {} (for job {}), which is below its guarantee and lent these GPUs; "
          "about {} s of work since the last checkpoint was lost",
          r.detail, Count(r, kByJob), Count(r, kWorkLostMs) / 1000);
    case ReasonCode::kWaitingForEvictions:
      return fmt::format("placed; starts once the {} job(s) evicted for it have stopped ({})",
                         Count(r, "evictions"), r.detail);
    case ReasonCode::kGpuFailed:
      return fmt::format("replica {}'s GPU failed: {}; Berth cordoned that GPU",
                         Count(r, "replica"), r.detail);
    case ReasonCode::kRetrying:
      return fmt::format(
          "attempt {} of {} failed ({}); its retry policy places it again after a {} s backoff",
          Count(r, "failures"), Count(r, "max_attempts"), r.detail, Count(r, "backoff_s"));
    case ReasonCode::kDrained:
      return fmt::format("stopped because node {} is being drained; waiting to be placed elsewhere",
                         r.detail);
    case ReasonCode::kOverBudget: {
      const auto [month, unit] = SplitBudgetDetail(r.detail);
      return fmt::format(
          "its tenant is over its enforced budget for {}: used {} of {} {}; low-priority jobs wait "
          "until next month or a larger budget (berth budget list)",
          month, FormatMoney(Count(r, kBudgetUsed)), FormatMoney(Count(r, kBudgetLimit)), unit);
    }
    case ReasonCode::kMoved:
      return fmt::format(
          "moved to make room for job {} of queue {}: its gang fit only with this job elsewhere; "
          "it restarts at once on the GPUs planned for it, and about {} s of work since the last "
          "checkpoint was lost",
          Count(r, kByJob), r.detail, Count(r, kWorkLostMs) / 1000);
  }
  return "";
}

// --- Simplified Chinese ---------------------------------------------------

// "vision gpus" -> "申请 2 块 GPU；队列 vision 已用 6 块，保障 8 块，最多还可借 4 块，当前可借 0
// 块".
std::string QuotaNumbersZh(const Reason& r) {
  auto space = r.detail.find(' ');
  std::string queue = r.detail.substr(0, space);
  std::string resource = space == std::string::npos ? "gpus" : r.detail.substr(space + 1);
  bool gpus = resource.starts_with("gpus");
  auto amount = [&](std::string_view key) {
    return gpus ? Gpus(Count(r, key)) + " 块" : std::to_string(Count(r, key));
  };
  std::string asks =
      gpus ? fmt::format("申请 {} {}", amount(kQueueRequested),
                         resource == "gpus" ? std::string("GPU") : resource.substr(5) + " GPU")
           : fmt::format("申请 {} {}", resource, amount(kQueueRequested));
  std::string limit = r.counts.contains(kQueueBorrowLimit)
                          ? fmt::format("最多还可借 {}", amount(kQueueBorrowLimit))
                          : std::string("借用不设上限");
  return fmt::format("{}；队列 {} 已用 {}，保障 {}，{}，当前可借 {}", asks, queue,
                     amount(kQueueUsed), amount(kQueueGuaranteed), limit, amount(kQueueBorrowable));
}

std::string OrderZh(const Reason& r) {
  if (Count(r, kAheadJobs) == 0) return "";
  return fmt::format("；队列中排在它前面的还有 {} 个作业，共需 {} 块 GPU", Count(r, kAheadJobs),
                     Count(r, kAheadGpus));
}

std::string WouldRunZh(const Reason& r) {
  std::string out;
  if (auto g = Count(r, kWouldFitGpusPerReplica); g > 0) {
    out += fmt::format("；若每个副本改用 {} 块 GPU，现在即可运行", g);
  }
  if (r.detail.starts_with("gpu_model=")) {
    out += fmt::format("；若改用 {} 型号的 GPU，现在即可运行", r.detail.substr(10));
  } else if (r.detail.starts_with("pool=")) {
    out += fmt::format("；若改到资源池 {}，现在即可运行", r.detail.substr(5));
  }
  return out;
}

// Node-level causes, in the same order as the English rendering.
std::string NodeCausesZh(const Reason& r) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 16> kCauses{{
      {kCauseNotReady, "个未就绪"},
      {kCauseCordoned, "个已隔离或正在排空"},
      {kCausePool, "个不在作业或队列的资源池内"},
      {kCauseSelector, "个标签与节点选择器不匹配"},
      {kCauseUnhealthy, "个所需型号的 GPU 均不健康或已隔离"},
      {kCauseTopology, "个不满足拓扑约束（NVLink 互联组或单机放不下这些副本）"},
      {kCauseTaint, "个带有作业未容忍的 NoSchedule 污点"},
      {kCauseGpuModel, "个没有所需型号的 GPU"},
      {kCauseGpuMemory, "个 GPU 显存不足"},
      {kCauseTooFewGpusInTotal, "个所需型号的 GPU 总数少于单个副本所需"},
      {kCauseTooFewGpus, "个空闲 GPU 不足"},
      {kCauseCpu, "个空闲 CPU 不足"},
      {kCauseMemory, "个空闲内存不足"},
      {kCauseNotSharing, "个没有处于共享模式的所需型号 GPU"},
      {kCauseSharedFull, "个共享 GPU 上剩余的显存或份额不足"},
      {kCauseHeldBySlices, "个 GPU 被共享作业的切片占用，不能整卡使用"},
  }};
  std::string causes;
  for (auto [key, text] : kCauses) {
    if (auto n = Count(r, key); n > 0) {
      causes += fmt::format("{}{} {}", causes.empty() ? "" : "，", n, text);
    }
  }
  return causes;
}

// The retry outcome a terminal failure carries: after how many attempts, and
// whether the policy did not retry this class or ran out of attempts.
std::string Attempts(const Reason& r) {
  std::string out;
  if (Count(r, "attempts") > 1) out = fmt::format(" (after {} attempts)", Count(r, "attempts"));
  if (Count(r, "retries_exhausted") != 0) out += "; its retry policy has no attempts left";
  return out;
}

std::string AttemptsZh(const Reason& r) {
  std::string out;
  if (Count(r, "attempts") > 1) out = fmt::format("（共尝试 {} 次）", Count(r, "attempts"));
  if (Count(r, "retries_exhausted") != 0) out += "；重试策略的次数已用完";
  return out;
}

std::string RenderZh(const Reason& r) {
  switch (r.code) {
    case ReasonCode::kNone:
      return "";
    case ReasonCode::kQueued:
      return "等待下一轮调度";
    case ReasonCode::kNoNodes:
      return "集群里还没有注册任何节点；请在 GPU 主机上启动 berth-agent";
    case ReasonCode::kBehindInQueue:
      return fmt::format(
          "按队列顺序排在作业 {} 之后（前面还有 {} 个）", Count(r, "blocked_by"),
          r.counts.contains(kAheadJobs) ? Count(r, kAheadJobs) : Count(r, "position"));
    case ReasonCode::kNoNodeFits:
      if (auto placed = Count(r, kCauseGang); placed > 0) {
        return fmt::format(
                   "整组副本放不下：{} 个副本（每个需要 {}）中只有 {} 个有位置；"
                   "对下一个副本，{} 个节点全部不满足：{}",
                   Count(r, "replicas"), NeedZh(r), placed, Count(r, "nodes"), NodeCausesZh(r)) +
               OrderZh(r) + WouldRunZh(r);
      }
      return fmt::format("0/{} 个节点可以容纳需要 {} 的副本：{}", Count(r, "nodes"), NeedZh(r),
                         NodeCausesZh(r)) +
             OrderZh(r) + WouldRunZh(r);
    case ReasonCode::kScheduled:
      return "已分配节点，正在启动";
    case ReasonCode::kRunning:
      return "运行中";
    case ReasonCode::kSucceeded:
      return "所有副本均以退出码 0 结束";
    case ReasonCode::kFailedExitCode:
      return Count(r, "signal") != 0
                 ? fmt::format("副本 {} 被信号 {} 终止", Count(r, "replica"), Count(r, "signal"))
                 : fmt::format("副本 {} 退出，退出码 {}", Count(r, "replica"),
                               Count(r, "exit_code"));
    case ReasonCode::kFailedToStart:
      return fmt::format("副本 {} 无法启动：{}", Count(r, "replica"), r.detail);
    case ReasonCode::kMaxRuntimeExceeded:
      return fmt::format("运行时间达到上限 max_runtime（{} 秒），已被停止",
                         Count(r, "max_runtime_s"));
    case ReasonCode::kCancelled:
      return r.detail.empty() ? "已取消" : fmt::format("已被 {} 取消", r.detail);
    case ReasonCode::kRunLost:
      return fmt::format("副本 {} 已丢失：{}", Count(r, "replica"), r.detail);
    case ReasonCode::kQueueUnknown:
      return fmt::format("调度策略中没有队列“{}”；请联系管理员添加", r.detail);
    case ReasonCode::kOverQuota:
      return "超出所在队列的配额：" + QuotaNumbersZh(r) + OrderZh(r);
    case ReasonCode::kNotPreemptibleOverGuarantee:
      return "不可抢占的作业只能在队列的保障额度内运行：" + QuotaNumbersZh(r) +
             "；可将它设为可抢占，或申请更大的保障额度";
    case ReasonCode::kFragmented:
      return fmt::format(
                 "资源碎片化：可用节点上共有 {} 块空闲 GPU，够它所需的 {} 块，"
                 "但分布零散，副本放不下（单个节点最多空闲 {} 块）",
                 Count(r, kFreeGpus), Count(r, kNeededGpus), Count(r, kLargestFree)) +
             OrderZh(r) + WouldRunZh(r);
    case ReasonCode::kPreempted:
      return fmt::format(
          "被队列 {} 中优先级更高的作业 {} 抢占；自上次检查点以来约 {} 秒的进度已丢失", r.detail,
          Count(r, kByJob), Count(r, kWorkLostMs) / 1000);
    case ReasonCode::kReclaimed:
      return fmt::format(
          "被队列 {} 收回 GPU（用于作业 {}）：该队列用量低于保障额度，这些 GPU 是它借出的；"
          "自上次检查点以来约 {} 秒的进度已丢失",
          r.detail, Count(r, kByJob), Count(r, kWorkLostMs) / 1000);
    case ReasonCode::kWaitingForEvictions:
      return fmt::format("已分配节点；为它驱逐的 {} 个作业停止后即启动（{}）",
                         Count(r, "evictions"), r.detail);
    case ReasonCode::kGpuFailed:
      return fmt::format("副本 {} 的 GPU 出现硬件故障：{}；Berth 已隔离（cordon）该 GPU",
                         Count(r, "replica"), r.detail);
    case ReasonCode::kRetrying:
      return fmt::format("第 {} 次尝试（共 {} 次）失败（{}）；按重试策略等待 {} 秒后重新调度",
                         Count(r, "failures"), Count(r, "max_attempts"), r.detail,
                         Count(r, "backoff_s"));
    case ReasonCode::kDrained:
      return fmt::format("节点 {} 正在排空（drain），作业已停止，等待调度到其他节点", r.detail);
    case ReasonCode::kOverBudget: {
      const auto [month, unit] = SplitBudgetDetail(r.detail);
      return fmt::format(
          "租户已超出 {} 的强制预算：已用 {}，预算 {} {}；低优先级作业将等待到下个月或预算调高"
          "（berth budget list）",
          month, FormatMoney(Count(r, kBudgetUsed)), FormatMoney(Count(r, kBudgetLimit)), unit);
    }
    case ReasonCode::kMoved:
      return fmt::format(
          "为队列 {} 的作业 {} 腾出位置而迁移：只有把本作业挪到别处，它的整组副本才放得下；"
          "本作业随即在为它规划好的 GPU 上重启，自上次检查点以来约 {} 秒的进度已丢失",
          r.detail, Count(r, kByJob), Count(r, kWorkLostMs) / 1000);
  }
  return "";
}

}  // namespace

std::string_view LangName(Lang lang) {
  return lang == Lang::kZh ? "zh" : "en";
}

std::optional<Lang> ParseLang(std::string_view text) {
  std::string_view base = text.substr(0, text.find_first_of("-_."));
  if (base == "en") return Lang::kEn;
  if (base == "zh") return Lang::kZh;
  return std::nullopt;
}

// Whether reclaim or preemption could help (kReclaim*, kPreemptCandidates,
// kEvictableAfterMinRuntime); empty when the scheduler did not look.
std::string ReliefEn(const Reason& r) {
  std::vector<std::string> parts;
  if (r.counts.contains(kReclaimNotBelowGuarantee)) {
    parts.emplace_back("its queue is not below its guarantee, so it cannot reclaim lent GPUs");
  } else if (auto it = r.counts.find(kReclaimCandidates); it != r.counts.end()) {
    parts.push_back(it->second == 0
                        ? std::string("no other queue holds lent GPUs it could use")
                        : fmt::format("reclaiming all {} job(s) running on lent GPUs would not "
                                      "free enough",
                                      it->second));
  }
  if (auto it = r.counts.find(kPreemptCandidates); it != r.counts.end()) {
    parts.push_back(it->second == 0
                        ? std::string("no lower-priority preemptible job of its queue runs where "
                                      "it could")
                        : fmt::format("preempting all {} lower-priority job(s) of its queue would "
                                      "not free enough",
                                      it->second));
  }
  if (auto it = r.counts.find(kMoveCandidates); it != r.counts.end()) {
    parts.push_back(it->second == 0
                        ? std::string("no running job that checkpoints could be moved to make room")
                        : fmt::format("moving up to {} of the {} running job(s) that checkpoint "
                                      "would not make room",
                                      Count(r, kMaxMovesKey), it->second));
  }
  if (auto young = Count(r, kEvictableAfterMinRuntime); young > 0) {
    parts.push_back(
        fmt::format("{} more job(s) become evictable once they have run for the "
                    "policy's min_runtime, the first in {}",
                    young, FormatDurationMs(Count(r, kMinRuntimeEndsInMs))));
  }
  if (parts.empty()) return "";
  std::string out = "; eviction: ";
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i > 0 ? "; " : "") + parts[i];
  return out;
}

std::string ReliefZh(const Reason& r) {
  std::vector<std::string> parts;
  if (r.counts.contains(kReclaimNotBelowGuarantee)) {
    parts.emplace_back("其队列用量不低于保障额度，不能收回借出的 GPU");
  } else if (auto it = r.counts.find(kReclaimCandidates); it != r.counts.end()) {
    parts.push_back(
        it->second == 0
            ? std::string("没有其他队列占用它可用的借出 GPU")
            : fmt::format("收回全部 {} 个占用借出 GPU 的作业也腾不出足够资源", it->second));
  }
  if (auto it = r.counts.find(kPreemptCandidates); it != r.counts.end()) {
    parts.push_back(
        it->second == 0
            ? std::string("其队列中没有可抢占的低优先级作业运行在它可用的节点上")
            : fmt::format("抢占其队列中全部 {} 个低优先级作业也腾不出足够资源", it->second));
  }
  if (auto it = r.counts.find(kMoveCandidates); it != r.counts.end()) {
    parts.push_back(
        it->second == 0
            ? std::string("没有可迁移的、会保存检查点的运行中作业来腾出位置")
            : fmt::format("在 {} 个会保存检查点的运行中作业里最多迁移 {} 个也腾不出位置",
                          it->second, Count(r, kMaxMovesKey)));
  }
  if (auto young = Count(r, kEvictableAfterMinRuntime); young > 0) {
    parts.push_back(fmt::format("另有 {} 个作业在运行满策略的最短运行时间后可被驱逐，最早在 {} 后",
                                young, FormatDurationMs(Count(r, kMinRuntimeEndsInMs))));
  }
  if (parts.empty()) return "";
  std::string out = "；驱逐：";
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i > 0 ? "；" : "") + parts[i];
  return out;
}

std::string RenderReason(const Reason& r) {
  return RenderEn(r) + Attempts(r) + Eta(r) + ReliefEn(r);
}

std::string RenderReason(const Reason& r, Lang lang) {
  return lang == Lang::kZh ? RenderZh(r) + AttemptsZh(r) + EtaZh(r) + ReliefZh(r)
                           : RenderEn(r) + Attempts(r) + Eta(r) + ReliefEn(r);
}

std::string RenderReason(const Reason& r, Lang lang, std::int64_t now_ms) {
  Reason at = r;
  for (auto [abs, rel] : {std::pair{kEtaMs, kEtaInMs}, std::pair{kNotBeforeMs, kNotBeforeInMs}}) {
    if (auto it = at.counts.find(abs); it != at.counts.end()) {
      at.counts[std::string(rel)] = it->second - now_ms;
    }
  }
  return RenderReason(at, lang);
}

}  // namespace berth::model
