#include "model/reason_catalogue.h"

#include <array>
#include <cstddef>

namespace berth::model {
namespace {

struct CodeEntry {
  ReasonCode code;
  Message text;
};

// One entry per ReasonCode, in the enum's order.
constexpr std::array kCodeTexts{
    CodeEntry{ReasonCode::kNone, {"", ""}},
    CodeEntry{ReasonCode::kQueued, {"waiting for the next scheduling cycle", "等待下一轮调度"}},
    CodeEntry{ReasonCode::kNoNodes,
              {"no nodes are registered; start berth-agent on a GPU host",
               "集群里还没有注册任何节点；请在 GPU 主机上启动 berth-agent"}},
    CodeEntry{ReasonCode::kBehindInQueue,
              {"waiting behind job {blocked_by} in queue order ({ahead} ahead)",
               "按队列顺序排在作业 {blocked_by} 之后（前面还有 {ahead} 个）"}},
    // {placed} is set for a gang only: then the first alternative reads.
    CodeEntry{ReasonCode::kNoNodeFits,
              {"[the gang does not fit: only {placed} of {replicas} replicas needing {need} each "
               "have room; for the next one, {nodes} of {nodes} nodes were rejected: {causes}"
               "|0/{nodes} nodes can take a replica needing {need}: {causes}]"
               "{container}{ahead}{would_run}",
               "[整组副本放不下：{replicas} 个副本（每个需要 {need}）中只有 {placed} 个有位置；"
               "对下一个副本，{nodes} 个节点全部不满足：{causes}"
               "|0/{nodes} 个节点可以容纳需要 {need} 的副本：{causes}]"
               "{container}{ahead}{would_run}"}},
    CodeEntry{ReasonCode::kScheduled, {"placed; starting on its node(s)", "已分配节点，正在启动"}},
    CodeEntry{ReasonCode::kRunning, {"running", "运行中"}},
    CodeEntry{ReasonCode::kSucceeded, {"all replicas exited 0", "所有副本均以退出码 0 结束"}},
    // {signal} is set only when a signal killed it.
    CodeEntry{ReasonCode::kFailedExitCode,
              {"replica {replica} [was killed by signal {signal}|exited with code {exit_code}]",
               "副本 {replica} [被信号 {signal} 终止|退出，退出码 {exit_code}]"}},
    CodeEntry{ReasonCode::kFailedToStart,
              {"replica {replica} could not start: {detail}", "副本 {replica} 无法启动：{detail}"}},
    CodeEntry{ReasonCode::kMaxRuntimeExceeded,
              {"stopped after its max_runtime of {max_runtime}",
               "运行时间达到上限 max_runtime（{max_runtime}），已被停止"}},
    CodeEntry{ReasonCode::kCancelled, {"cancelled[ by {by}]", "已[被 {by} ]取消"}},
    CodeEntry{ReasonCode::kRunLost,
              {"replica {replica} was lost: {detail}", "副本 {replica} 已丢失：{detail}"}},
    CodeEntry{ReasonCode::kQueueUnknown,
              {"queue '{detail}' is not in the scheduling policy; ask an admin to add it",
               "调度策略中没有队列“{detail}”；请联系管理员添加"}},
    CodeEntry{ReasonCode::kOverQuota,
              {"over its queue's quota: {quota}{ahead}", "超出所在队列的配额：{quota}{ahead}"}},
    CodeEntry{ReasonCode::kNotPreemptibleOverGuarantee,
              {"a non-preemptible job runs only within its queue's guarantee: {quota}; mark it "
               "preemptible or ask for a larger guarantee",
               "不可抢占的作业只能在队列的保障额度内运行：{quota}；可将它设为可抢占，或申请更大的"
               "保障额度"}},
    CodeEntry{ReasonCode::kFragmented,
              {"fragmented: {free} are free on nodes it may use, enough for the {needed} it "
               "needs, but not where its replicas fit (at most {largest} free on one node)"
               "{ahead}{would_run}",
               "资源碎片化：可用节点上共有 {free} 空闲，够它所需的 {needed}，"
               "但分布零散，副本放不下（单个节点最多空闲 {largest}）{ahead}{would_run}"}},
    CodeEntry{ReasonCode::kPreempted,
              {"preempted by higher-priority {by_job} of queue {detail}; about {work_lost} "
               "of work since the last checkpoint was lost",
               "被队列 {detail} 中优先级更高的{by_job} 抢占；自上次检查点以来约 "
               "{work_lost}的进度已丢失"}},
    CodeEntry{ReasonCode::kReclaimed,
              {"reclaimed by queue {detail} (for {by_job}), which is below its guarantee and "
               "lent these GPUs; about {work_lost} of work since the last checkpoint was lost",
               "被队列 {detail} 收回 GPU（用于{by_job}）：该队列用量低于保障额度，这些 GPU "
               "是它借出的；自上次检查点以来约 {work_lost}的进度已丢失"}},
    CodeEntry{ReasonCode::kWaitingForEvictions,
              {"placed; starts once the {evictions} job(s) evicted for it have stopped ({detail})",
               "已分配节点；为它驱逐的 {evictions} 个作业停止后即启动（{detail}）"}},
    CodeEntry{ReasonCode::kMoved,
              {"moved to make room for {by_job} of queue {detail}: its gang fit only with this "
               "job elsewhere; it restarts at once on the GPUs planned for it, and about "
               "{work_lost} of work since the last checkpoint was lost",
               "为队列 {detail} 的{by_job} 腾出位置而迁移：只有把本作业挪到别处，它的整组副本"
               "才放得下；本作业随即在为它规划好的 GPU 上重启，自上次检查点以来约 {work_lost}"
               "的进度已丢失"}},
    CodeEntry{ReasonCode::kGpuFailed,
              {"replica {replica}'s GPU failed: {detail}; Berth cordoned that GPU",
               "副本 {replica} 的 GPU 出现硬件故障：{detail}；Berth 已隔离（cordon）该 GPU"}},
    CodeEntry{ReasonCode::kRetrying,
              {"attempt {failures} of {max_attempts} failed ({detail}); its retry policy places "
               "it again after a {backoff} backoff",
               "第 {failures} 次尝试（共 {max_attempts} 次）失败（{detail}）；按重试策略等待 "
               "{backoff}后重新调度"}},
    CodeEntry{ReasonCode::kDrained,
              {"stopped because node {detail} is being drained; waiting to be placed elsewhere",
               "节点 {detail} 正在排空（drain），作业已停止，等待调度到其他节点"}},
    CodeEntry{ReasonCode::kOverBudget,
              {"its tenant is over its enforced budget for {month}: used {used} of {limit} {unit}; "
               "low-priority jobs wait until next month or a larger budget (berth budget list)",
               "租户已超出 {month} 的强制预算：已用 {used}，预算 {limit} {unit}；低优先级作业将等待"
               "到下个月或预算调高（berth budget list）"}},
    CodeEntry{ReasonCode::kLivenessFailed,
              {"replica {replica} failed its liveness probe ({detail}); its agent stopped it and "
               "its service replaces it",
               "副本 {replica} 未通过存活探针（liveness）：{detail}；节点代理已将其停止，"
               "所属服务会替换它"}},
    CodeEntry{ReasonCode::kHeadroomReclaimed,
              {"reclaimed for inference service {service} ({by_job}) from pool {pool}'s "
               "inference headroom; about {work_lost} of work since the last checkpoint was lost",
               "为推理服务 {service}（{by_job}）收回资源池 {pool} 中留给推理的余量"
               "（inference_headroom）；自上次检查点以来约 {work_lost}的进度已丢失"}},
};

struct PhraseEntry {
  Phrase phrase;
  std::string_view name;
  Message text;
};

// One entry per Phrase, in the enum's order.
constexpr std::array kPhraseTexts{
    PhraseEntry{Phrase::kListSeparator, "ListSeparator", {", ", "，"}},
    PhraseEntry{Phrase::kPartSeparator, "PartSeparator", {"; ", "；"}},
    // The first alternative whose argument is set: a share, a memory slice, whole GPUs.
    PhraseEntry{Phrase::kNeed,
                "Need",
                {"[a {share} share of one GPU|a {slice} memory slice of one GPU|{gpus}]",
                 "[一块 GPU 的 {share} 份额|一块 GPU 上 {slice} 显存|{gpus}]"}},
    PhraseEntry{Phrase::kAhead,
                "Ahead",
                {"; {jobs} job(s) asking for {gpus} are ahead of it in its queue",
                 "；队列中排在它前面的还有 {jobs} 个作业，共需 {gpus}"}},
    PhraseEntry{
        Phrase::kWouldRunWithGpus,
        "WouldRunWithGpus",
        {"; it would run now with {gpus} per replica", "；若每个副本改用 {gpus}，现在即可运行"}},
    PhraseEntry{
        Phrase::kWouldRunWithModel,
        "WouldRunWithModel",
        {"; it would run now with gpu_model {model}", "；若改用 {model} 型号的 GPU，现在即可运行"}},
    PhraseEntry{Phrase::kWouldRunWithGpuMemory,
                "WouldRunWithGpuMemory",
                {"; it would run now with gpu_memory {memory} per GPU",
                 "；若把每块 GPU 的显存需求降到 {memory}，现在即可运行"}},
    PhraseEntry{Phrase::kWouldRunInPool,
                "WouldRunInPool",
                {"; it would run now in pool {pool}", "；若改到资源池 {pool}，现在即可运行"}},
    // Amounts with their unit ("2.5 GPUs", GpuAmount); {model} only for a
    // resource that names one ("gpus/A100"); {limit} only when the queue's
    // borrowing has a limit.
    PhraseEntry{Phrase::kQuotaGpus,
                "QuotaGpus",
                {"it asks for {requested}[ of model {model}]; queue {queue} uses {used}, with "
                 "{guaranteed} guaranteed, and [may borrow up to {limit} more|may borrow without "
                 "limit]; {borrowable} can be borrowed now",
                 "申请 {requested}[（型号 {model}）]；队列 {queue} 已用 {used}，保障 {guaranteed}，"
                 "[最多还可借 {limit}|借用不设上限]，当前可借 {borrowable}"}},
    // Amounts in the resource's unit for people ("4 cores", "64 GiB");
    // {resource} from the kResource* phrases.
    PhraseEntry{Phrase::kQuotaOther,
                "QuotaOther",
                {"it asks for {requested} of {resource}; queue {queue} uses {used}, with "
                 "{guaranteed} guaranteed, and [may borrow up to {limit} more|may borrow without "
                 "limit]; {borrowable} can be borrowed now",
                 "申请{resource} {requested}；队列 {queue} 已用 {used}，保障 {guaranteed}，"
                 "[最多还可借 {limit}|借用不设上限]，当前可借 {borrowable}"}},
    PhraseEntry{Phrase::kAttempts,
                "Attempts",
                {" (after {attempts} attempts)", "（共尝试 {attempts} 次）"}},
    PhraseEntry{Phrase::kRetriesExhausted,
                "RetriesExhausted",
                {"; its retry policy has no attempts left", "；重试策略的次数已用完"}},
    PhraseEntry{Phrase::kRetriesCapped,
                "RetriesCapped",
                {"; {source} allows [{one} attempt|{many} attempts] (the job asked for {asked})",
                 "；{source}只允许尝试 [{one}|{many}] 次（作业要求 {asked} 次）"}},
    PhraseEntry{Phrase::kRetryCapQueue,
                "RetryCapQueue",
                {"its queue's retry policy", "所在队列的重试策略"}},
    PhraseEntry{Phrase::kRetryCapPolicy,
                "RetryCapPolicy",
                {"the cluster's retry policy", "集群的重试策略"}},
    PhraseEntry{Phrase::kReservedGpus,
                "ReservedGpus",
                {"; free now but reserved for jobs that start before it would end: {gpus} (only a "
                 "job whose max runtime ends by then may use them)",
                 "；另有 {gpus} 空闲，但已预留给在它结束前就要开始的作业"
                 "（只有最长运行时间在那之前结束的作业才能使用）"}},
    // {in} (a duration) only when the start is in the future; {at} (a clock
    // time, kClock or kClockDate) when the reason has the absolute start.
    PhraseEntry{Phrase::kEtaKnown,
                "EtaKnown",
                {"; estimated start [in about {in}|now, as GPUs free up][, around {at}] ({how})",
                 "；预计[约 {in}后开始|GPU 一空出即开始][，约 {at}]（{how}）"}},
    PhraseEntry{Phrase::kEtaGpusReserved,
                "EtaGpusReserved",
                {"GPUs are reserved for it", "已为它预留 GPU"}},
    PhraseEntry{Phrase::kEtaEstimate,
                "EtaEstimate",
                {"an estimate; no GPUs reserved", "估计值，未预留 GPU"}},
    PhraseEntry{
        Phrase::kEtaPredicted,
        "EtaPredicted",
        {"predicted from past run times; no GPUs reserved", "根据以往运行时间预测，未预留 GPU"}},
    // {why}: one of the causes below; none for a cause this build does not know.
    PhraseEntry{Phrase::kEtaUnknownWhy,
                "EtaUnknownWhy",
                {"; estimated start unknown[: {why}]", "；无法估计开始时间[：{why}]"}},
    // {more} only when other such jobs block it too.
    PhraseEntry{Phrase::kEtaUnknownBlocked,
                "EtaUnknownBlocked",
                {"{job}[ (and {more} more)] on GPUs it needs has no max runtime",
                 "它需要的 GPU 被{job} 占用，该作业没有设置最长运行时间"
                 "[（另有 {more} 个这样的作业）]"}},
    PhraseEntry{Phrase::kEtaUnknownCapacity,
                "EtaUnknownCapacity",
                {"it does not fit even when every running job has ended",
                 "即使所有运行中的作业都结束，它也放不下"}},
    PhraseEntry{Phrase::kEtaUnknownQuota,
                "EtaUnknownQuota",
                {"it waits for its queue's quota, not for GPUs", "它在等待队列配额，而不是 GPU"}},
    PhraseEntry{Phrase::kEtaUnknownInfeasible,
                "EtaUnknownInfeasible",
                {"no node could ever take it", "没有任何节点能容纳它"}},
    PhraseEntry{Phrase::kEtaUnknownOther,
                "EtaUnknownOther",
                {"a cause this version does not know", "此版本不认识的原因"}},
    PhraseEntry{Phrase::kNotBefore,
                "NotBefore",
                {"; not before job {job} starts (in about {in}[, around {at}])",
                 "；不会早于作业 {job} 开始（约 {in}后[，约 {at}]）"}},
    // The second unit only when it is not zero.
    PhraseEntry{Phrase::kDays, "Days", {"{d}d[ {h}h]", "{d} 天[ {h} 小时]"}},
    PhraseEntry{Phrase::kHours, "Hours", {"{h}h[ {m}m]", "{h} 小时[ {m} 分钟]"}},
    PhraseEntry{Phrase::kMinutes, "Minutes", {"{m}m[ {s}s]", "{m} 分钟[ {s} 秒]"}},
    PhraseEntry{Phrase::kSeconds, "Seconds", {"{s}s", "{s} 秒"}},
    // {one} for at most one GPU (a whole one or a share), {many} otherwise.
    PhraseEntry{Phrase::kGpuAmount,
                "GpuAmount",
                {"[{one} GPU|{many} GPUs]", "[{one} 块 GPU|{many} 块 GPU]"}},
    PhraseEntry{
        Phrase::kCoreAmount, "CoreAmount", {"[{one} core|{many} cores]", "[{one} 核|{many} 核]"}},
    PhraseEntry{Phrase::kClock, "Clock", {"{time} UTC", "UTC {time}"}},
    PhraseEntry{Phrase::kClockDate, "ClockDate", {"{date} {time} UTC", "UTC {date} {time}"}},
    PhraseEntry{Phrase::kResourceCpu, "ResourceCpu", {"CPU", "CPU"}},
    PhraseEntry{Phrase::kResourceMemory, "ResourceMemory", {"memory", "内存"}},
    PhraseEntry{Phrase::kResourceGpuMemory, "ResourceGpuMemory", {"GPU memory", "显存"}},
    PhraseEntry{Phrase::kEviction, "Eviction", {"; eviction: ", "；驱逐："}},
    PhraseEntry{Phrase::kReliefNotBelowGuarantee,
                "ReliefNotBelowGuarantee",
                {"its queue is not below its guarantee, so it cannot reclaim lent GPUs",
                 "其队列用量不低于保障额度，不能收回借出的 GPU"}},
    PhraseEntry{
        Phrase::kReliefNoLentGpus,
        "ReliefNoLentGpus",
        {"no other queue holds lent GPUs it could use", "没有其他队列占用它可用的借出 GPU"}},
    PhraseEntry{Phrase::kReliefReclaimAll,
                "ReliefReclaimAll",
                {"reclaiming all {jobs} job(s) running on lent GPUs would not free enough",
                 "收回全部 {jobs} 个占用借出 GPU 的作业也腾不出足够资源"}},
    PhraseEntry{Phrase::kReliefNoPreemptible,
                "ReliefNoPreemptible",
                {"no lower-priority preemptible job of its queue runs where it could",
                 "其队列中没有可抢占的低优先级作业运行在它可用的节点上"}},
    PhraseEntry{Phrase::kReliefPreemptAll,
                "ReliefPreemptAll",
                {"preempting all {jobs} lower-priority job(s) of its queue would not free enough",
                 "抢占其队列中全部 {jobs} 个低优先级作业也腾不出足够资源"}},
    PhraseEntry{Phrase::kReliefNoMovable,
                "ReliefNoMovable",
                {"no running job that checkpoints could be moved to make room",
                 "没有可迁移的、会保存检查点的运行中作业来腾出位置"}},
    PhraseEntry{Phrase::kReliefMoveAll,
                "ReliefMoveAll",
                {"moving up to {max_moves} of the {jobs} running job(s) that checkpoint would not "
                 "make room",
                 "在 {jobs} 个会保存检查点的运行中作业里最多迁移 {max_moves} 个也腾不出位置"}},
    PhraseEntry{Phrase::kReliefAfterMinRuntime,
                "ReliefAfterMinRuntime",
                {"{jobs} more job(s) become evictable once they have run for the policy's "
                 "min_runtime, the first in {first_in}",
                 "另有 {jobs} 个作业在运行满策略的最短运行时间后可被驱逐，最早在 {first_in}后"}},
    PhraseEntry{Phrase::kReliefReclaimGrace,
                "ReliefReclaimGrace",
                {"it reclaims lent GPUs at {at} (in {in}) unless their borrowers end or "
                 "checkpoint first; reclaiming now would stop {jobs} borrower job(s), {job} "
                 "first, and lose {lost} GPU-hours of unsaved work, at most {worst} per job",
                 "将在 {at}（{in}后）收回借出的 GPU，除非借用者先结束或保存检查点；现在收回需停止 "
                 "{jobs} 个借用作业（首个为{job}），丢失 {lost} GPU 小时未保存的工作，"
                 "每个作业最多 {worst}"}},
    // {id} when the reader may know it.
    PhraseEntry{Phrase::kJobRef,
                "JobRef",
                {"[job {id}|job of another tenant]", "[作业 {id}|其他租户的作业]"}},
    PhraseEntry{Phrase::kWouldRunPreemptible,
                "WouldRunPreemptible",
                {"; pool {pool} keeps its last GPUs for inference replicas (its "
                 "inference_headroom): only a preemptible job may use them, so it would run now "
                 "if it were preemptible",
                 "；资源池 {pool} 把最后几块 GPU 留给推理副本（inference_headroom）："
                 "只有可抢占的作业才能使用，若将它设为可抢占，现在即可运行"}},
    PhraseEntry{Phrase::kWouldRunIfQueueBound,
                "WouldRunIfQueueBound",
                {"; its queue {queue} is not bound to pool {pool}, where it would run now (a "
                 "platform admin binds pools to queues in the policy)",
                 "；其队列 {queue} 未绑定资源池 {pool}，而它在该资源池现在即可运行"
                 "（资源池与队列的绑定由平台管理员在策略中设置）"}},
    // {causes}: the node causes' list; unset when every node could take it.
    // {causes}: the node causes' list, least change first, a node counted
    // under each of its causes; unset when every node could take it. {alone}: kNodeLayerAlone for
    // each cause that alone keeps some nodes out; unset when none does.
    PhraseEntry{Phrase::kNodeLayer,
                "NodeLayer",
                {"; beyond that, {ok}/{nodes} nodes could ever take a replica[: {alone}][ (what "
                 "rules the others out: {causes})]",
                 "；除此之外，{nodes} 个节点中有 {ok} 个能够容纳它的副本[：{alone}][（排除其余"
                 "节点的原因：{causes}）]"}},
    // {image}: the job's image, unset when the reason does not carry it.
    PhraseEntry{Phrase::kNeedsContainerRuntime,
                "NeedsContainerRuntime",
                {"; it needs a node with a container runtime (podman) for [image {image}|its "
                 "image]: {without} of {nodes} nodes have none",
                 "；它的镜像[ {image} ]需要带容器运行时（podman）的节点：{nodes} 个节点中有 "
                 "{without} 个没有"}},
    PhraseEntry{Phrase::kNodeLayerAlone,
                "NodeLayerAlone",
                {"{change} alone would open {n}", "仅{change}即可放开 {n} 个"}},
    // {in} only while the start is ahead; {ago} only when the forecast was
    // made a second or more before.
    PhraseEntry{
        Phrase::kForecast,
        "Forecast",
        {"; forecast: [starts in about {in}|due to start now][, around {at}] ({how}; "
         "[made {ago} ago|made just now])",
         "；预测：[约 {in}后开始|应当即将开始][，约 {at}]（{how}；[{ago}前所作|刚刚所作]）"}},
    PhraseEntry{Phrase::kForecastDeclared,
                "ForecastDeclared",
                {"the scheduler run forward to the declared max runtimes of what runs and waits, "
                 "with no new arrivals",
                 "按正在运行和等待的作业所声明的最长运行时间向前推演调度，未计入新提交的作业"}},
    PhraseEntry{Phrase::kForecastPredicted,
                "ForecastPredicted",
                {"the scheduler run forward over predicted run times, with no new arrivals",
                 "按预测的运行时间向前推演调度，未计入新提交的作业"}},
};

// Node causes of kNoNodeFits, in the order they are listed.
constexpr std::array kNodeCauseTexts{
    NodeCauseText{kCauseNotReady, {"{n} not ready", "{n} 个未就绪"}},
    NodeCauseText{kCauseCordoned, {"{n} cordoned or draining", "{n} 个已隔离或正在排空"}},
    NodeCauseText{kCausePool,
                  {"{n} outside the job's or queue's pools", "{n} 个不在作业或队列的资源池内"}},
    NodeCauseText{kCauseInferenceHeadroom,
                  {"{n} in a pool whose remaining GPUs are its inference headroom",
                   "{n} 个所在资源池剩余的 GPU 是留给推理的余量（inference_headroom）"}},
    NodeCauseText{kCauseSelector,
                  {"{n} labels not matching the node selector", "{n} 个标签与节点选择器不匹配"}},
    NodeCauseText{kCauseUnhealthy,
                  {"{n} only unhealthy or cordoned GPUs of the requested kind",
                   "{n} 个所需型号的 GPU 均不健康或已隔离"}},
    NodeCauseText{kCauseTopology,
                  {"{n} no NVLink island or single node with room for the replicas",
                   "{n} 个不满足拓扑约束（NVLink 互联组或单机放不下这些副本）"}},
    NodeCauseText{kCauseTaint,
                  {"{n} a NoSchedule taint the job does not tolerate",
                   "{n} 个带有作业未容忍的 NoSchedule 污点"}},
    NodeCauseText{kCauseNoContainerRuntime,
                  {"{n} no container runtime (podman) for the job's image",
                   "{n} 个没有运行作业镜像所需的容器运行时（podman）"}},
    NodeCauseText{kCauseGpuModel,
                  {"{n} no GPU of the requested model", "{n} 个没有所需型号的 GPU"}},
    NodeCauseText{kCauseGpuMemory, {"{n} GPUs with too little memory", "{n} 个 GPU 显存不足"}},
    NodeCauseText{kCauseTooFewGpusInTotal,
                  {"{n} fewer GPUs of the requested kind than one replica needs",
                   "{n} 个所需型号的 GPU 总数少于单个副本所需"}},
    NodeCauseText{kCauseTooFewGpus, {"{n} too few free GPUs", "{n} 个空闲 GPU 不足"}},
    NodeCauseText{kCauseCpu, {"{n} too little free CPU", "{n} 个空闲 CPU 不足"}},
    NodeCauseText{kCauseMemory, {"{n} too little free memory", "{n} 个空闲内存不足"}},
    NodeCauseText{kCauseNotSharing,
                  {"{n} no GPU of the requested kind in sharing mode",
                   "{n} 个没有处于共享模式的所需型号 GPU"}},
    NodeCauseText{kCauseSharedFull,
                  {"{n} too little free memory or share left on their sharing GPUs",
                   "{n} 个共享 GPU 上剩余的显存或份额不足"}},
    NodeCauseText{kCauseHeldBySlices,
                  {"{n} GPUs held by slices of shared jobs, not free for whole-GPU use",
                   "{n} 个 GPU 被共享作业的切片占用，不能整卡使用"}},
};

// The change that lifts each node cause, in kNodeCauseTexts' order.
constexpr std::array kNodeCauseChanges{
    NodeCauseText{kCauseNotReady, {"the node becoming ready", "节点恢复就绪"}},
    NodeCauseText{kCauseCordoned, {"uncordoning the node", "解除节点隔离"}},
    NodeCauseText{kCausePool, {"a change of pools", "调整资源池"}},
    NodeCauseText{kCauseInferenceHeadroom, {"being preemptible", "设为可抢占"}},
    NodeCauseText{kCauseSelector, {"changing the node selector", "修改节点选择器"}},
    NodeCauseText{kCauseUnhealthy, {"the GPUs recovering", "GPU 恢复健康"}},
    NodeCauseText{kCauseTopology, {"relaxing the topology", "放宽拓扑约束"}},
    NodeCauseText{kCauseTaint, {"tolerating the taint", "容忍该污点"}},
    NodeCauseText{kCauseNoContainerRuntime,
                  {"a container runtime (podman) on the node", "节点安装容器运行时（podman）"}},
    NodeCauseText{kCauseGpuModel, {"changing the GPU model", "更换 GPU 型号"}},
    NodeCauseText{kCauseGpuMemory, {"lowering the GPU memory minimum", "降低显存需求"}},
    NodeCauseText{kCauseTooFewGpusInTotal, {"fewer GPUs per replica", "减少每个副本的 GPU 数量"}},
    NodeCauseText{kCauseTooFewGpus, {"GPUs freeing up", "GPU 空出"}},
    NodeCauseText{kCauseCpu, {"CPU freeing up", "CPU 空出"}},
    NodeCauseText{kCauseMemory, {"memory freeing up", "内存空出"}},
    NodeCauseText{kCauseNotSharing, {"a GPU in sharing mode", "GPU 切换到共享模式"}},
    NodeCauseText{kCauseSharedFull,
                  {"room freeing up on the sharing GPUs", "共享 GPU 上空出显存或份额"}},
    NodeCauseText{kCauseHeldBySlices, {"the slices ending", "占用的切片结束"}},
};

constexpr bool SameCauses(const auto& a, const auto& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].key != b[i].key) return false;
  }
  return true;
}
static_assert(SameCauses(kNodeCauseTexts, kNodeCauseChanges),
              "kNodeCauseChanges needs one entry per node cause, in kNodeCauseTexts' order");

template <typename Table, typename Key>
constexpr bool InEnumOrder(const Table& table, Key last, auto key_of) {
  if (table.size() != static_cast<std::size_t>(last) + 1) return false;
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (static_cast<std::size_t>(key_of(table[i])) != i) return false;
  }
  return true;
}
static_assert(InEnumOrder(kCodeTexts, kLastReasonCode, [](const CodeEntry& e) { return e.code; }),
              "kCodeTexts needs one entry per ReasonCode, in the enum's order");
static_assert(InEnumOrder(kPhraseTexts, kLastPhrase, [](const PhraseEntry& e) { return e.phrase; }),
              "kPhraseTexts needs one entry per Phrase, in the enum's order");

}  // namespace

const Message& CodeText(ReasonCode code) {
  static constexpr Message kNoText{"", ""};
  const auto i = static_cast<std::size_t>(code);
  return i < kCodeTexts.size() ? kCodeTexts[i].text : kNoText;
}

const Message& PhraseText(Phrase phrase) {
  return kPhraseTexts[static_cast<std::size_t>(phrase)].text;
}

std::span<const NodeCauseText> NodeCauseTexts() {
  return kNodeCauseTexts;
}

std::span<const NodeCauseText> NodeCauseChanges() {
  return kNodeCauseChanges;
}

std::string_view PhraseName(Phrase phrase) {
  return kPhraseTexts[static_cast<std::size_t>(phrase)].name;
}

}  // namespace berth::model
