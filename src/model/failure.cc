#include "model/failure.h"

#include <fmt/format.h>

#include <array>
#include <vector>

namespace berth::model {
namespace {

struct Pattern {
  FailureClass cls;
  std::string_view text;
};

// In the order a cause is believed: a GPU hardware error explains an
// out-of-memory or a collective failure that follows it, and an
// out-of-memory on one rank explains the collective failures of the others.
constexpr std::array<Pattern, 23> kPatterns{{
    {FailureClass::kGpuHardware, "NVRM: Xid"},
    {FailureClass::kGpuHardware, "GPU is lost"},
    {FailureClass::kGpuHardware, "uncorrectable ECC"},
    {FailureClass::kGpuHardware, "ECC error"},
    {FailureClass::kGpuHardware, "fallen off the bus"},
    {FailureClass::kGpuHardware, "cudaErrorECCUncorrectable"},
    // Written by berth-shim when the run's cgroup counted an OOM kill.
    {FailureClass::kHostOutOfMemory, "killed by the kernel's OOM killer"},
    {FailureClass::kGpuOutOfMemory, "CUDA out of memory"},
    {FailureClass::kGpuOutOfMemory, "OutOfMemoryError"},
    {FailureClass::kGpuOutOfMemory, "CUDA error: out of memory"},
    {FailureClass::kGpuOutOfMemory, "CUBLAS_STATUS_ALLOC_FAILED"},
    {FailureClass::kGpuOutOfMemory, "cudaErrorMemoryAllocation"},
    {FailureClass::kGpuOutOfMemory, "RESOURCE_EXHAUSTED: Out of memory"},
    {FailureClass::kGpuOutOfMemory, "out of memory while trying to allocate"},
    {FailureClass::kCommunication, "NCCL error"},
    {FailureClass::kCommunication, "ncclSystemError"},
    {FailureClass::kCommunication, "ncclInternalError"},
    {FailureClass::kCommunication, "ncclUnhandledCudaError"},
    {FailureClass::kCommunication, "ncclRemoteError"},
    {FailureClass::kCommunication, "ProcessGroupNCCL"},
    {FailureClass::kCommunication, "Watchdog caught collective operation timeout"},
    {FailureClass::kCommunication, "Gloo connectFullMesh failed"},
    {FailureClass::kCommunication, "c10d::DistNetworkError"},
}};

constexpr std::size_t kMaxEvidence = 300;

std::string Trim(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  if (line.size() > kMaxEvidence) return std::string(line.substr(0, kMaxEvidence)) + "...";
  return std::string(line);
}

// The last line holding a pattern of the most believed class.
std::optional<Failure> FromLog(std::string_view log) {
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start < log.size();) {
    std::size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    lines.push_back(log.substr(start, end - start));
    start = end + 1;
  }
  for (FailureClass cls : {FailureClass::kGpuHardware, FailureClass::kHostOutOfMemory,
                           FailureClass::kGpuOutOfMemory, FailureClass::kCommunication}) {
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
      for (const auto& p : kPatterns) {
        if (p.cls == cls && it->find(p.text) != std::string_view::npos) {
          return Failure{cls, Trim(*it)};
        }
      }
    }
  }
  return std::nullopt;
}

std::int64_t Count(const Reason& r, std::string_view key) {
  auto it = r.counts.find(key);
  return it == r.counts.end() ? 0 : it->second;
}

}  // namespace

std::string_view FailureClassName(FailureClass c) {
  switch (c) {
    case FailureClass::kUserCode:
      return "user_code";
    case FailureClass::kGpuOutOfMemory:
      return "gpu_out_of_memory";
    case FailureClass::kHostOutOfMemory:
      return "host_out_of_memory";
    case FailureClass::kCommunication:
      return "communication";
    case FailureClass::kCommandNotFound:
      return "command_not_found";
    case FailureClass::kGpuHardware:
      return "gpu_hardware";
    case FailureClass::kNodeLost:
      return "node_lost";
    case FailureClass::kRunIdentity:
      return "run_identity";
    case FailureClass::kMaxRuntime:
      return "max_runtime";
    case FailureClass::kCancelled:
      return "cancelled";
    case FailureClass::kEvicted:
      return "evicted";
    case FailureClass::kRefused:
      return "refused";
  }
  return "user_code";
}

std::optional<Failure> ClassifyFailure(const Reason& reason, std::string_view log_tail) {
  switch (reason.code) {
    case ReasonCode::kFailedExitCode: {
      if (auto f = FromLog(log_tail)) return f;
      if (Count(reason, "exit_code") == 127) {
        return Failure{FailureClass::kCommandNotFound, "exit code 127"};
      }
      std::string evidence = reason.counts.contains("signal")
                                 ? fmt::format("signal {}", Count(reason, "signal"))
                                 : fmt::format("exit code {}", Count(reason, "exit_code"));
      return Failure{FailureClass::kUserCode, std::move(evidence)};
    }
    case ReasonCode::kFailedToStart:
      if (Count(reason, "run_identity") > 0)
        return Failure{FailureClass::kRunIdentity, reason.detail};
      return Failure{FailureClass::kCommandNotFound, reason.detail};
    case ReasonCode::kRunLost:
      return Failure{FailureClass::kNodeLost, reason.detail};
    case ReasonCode::kGpuFailed:
      return Failure{FailureClass::kGpuHardware, reason.detail};
    case ReasonCode::kLivenessFailed:
      // A replica that stops answering is its own code's failure.
      return Failure{FailureClass::kUserCode, "liveness probe: " + reason.detail};
    case ReasonCode::kRetrying: {
      // detail: "<class>: <what failed>"; the class was read from the log
      // tail when the attempt failed.
      auto colon = reason.detail.find(": ");
      std::string_view cls = std::string_view(reason.detail).substr(0, colon);
      for (int i = 0; i <= static_cast<int>(kLastFailureClass); ++i) {
        auto c = static_cast<FailureClass>(i);
        if (FailureClassName(c) == cls) {
          if (auto f = FromLog(log_tail); f && f->cls == c) return f;  // the telling line
          return Failure{
              c, colon == std::string::npos ? std::string() : reason.detail.substr(colon + 2)};
        }
      }
      return std::nullopt;
    }
    case ReasonCode::kMaxRuntimeExceeded:
      return Failure{FailureClass::kMaxRuntime,
                     fmt::format("max_runtime {} s", Count(reason, "max_runtime_s"))};
    case ReasonCode::kCancelled:
      return Failure{FailureClass::kCancelled,
                     reason.detail.empty() ? std::string() : "cancelled by " + reason.detail};
    case ReasonCode::kPreempted:
    case ReasonCode::kReclaimed:
    case ReasonCode::kMoved:
      return Failure{FailureClass::kEvicted,
                     fmt::format("{} for {} of queue {}", ReasonCodeName(reason.code),
                                 JobRefText(Count(reason, kByJob), Lang::kEn), reason.detail)};
    case ReasonCode::kHeadroomReclaimed:
      return Failure{FailureClass::kEvicted,
                     fmt::format("{} for {} of service {}", ReasonCodeName(reason.code),
                                 JobRefText(Count(reason, kByJob), Lang::kEn),
                                 reason.detail.substr(0, reason.detail.find(' ')))};
    case ReasonCode::kOverQuota:
    case ReasonCode::kNotPreemptibleOverGuarantee:
      return Failure{FailureClass::kRefused, RenderReason(reason)};
    default:
      return std::nullopt;
  }
}

std::string RenderFailure(const Failure& f, Lang lang) {
  const bool zh = lang == Lang::kZh;
  std::string what;
  switch (f.cls) {
    case FailureClass::kUserCode:
      what = zh ? "程序自身出错退出；请查看日志末尾（berth logs）修复代码或参数"
                : "the program itself failed; read the end of its log (berth logs) and fix the "
                  "code or its arguments";
      break;
    case FailureClass::kGpuOutOfMemory:
      what = zh ? "GPU 显存不足；请减小批大小或模型规模、开启梯度检查点，或申请显存更大的 GPU"
                  "（resources.gpu_model / gpu_memory）"
                : "the GPU ran out of memory; use a smaller batch or model, enable activation "
                  "checkpointing, or ask for GPUs with more memory (resources.gpu_model / "
                  "gpu_memory)";
      break;
    case FailureClass::kHostOutOfMemory:
      what = zh ? "作业超出了它的内存上限（resources.memory），被内核的 OOM killer 终止；"
                  "这是主机内存而不是 GPU 显存：请调大 resources.memory，或减少数据加载进程与缓存"
                : "the job used more host memory than its limit (resources.memory) and the "
                  "kernel's OOM killer ended it; this is host RAM, not GPU memory: raise "
                  "resources.memory or use fewer data-loader workers and smaller caches";
      break;
    case FailureClass::kCommunication:
      what = zh ? "副本间通信（NCCL/Gloo）失败；若其他副本先出错请先看它们的日志，"
                  "否则检查网络与 NCCL 设置（NCCL_DEBUG=INFO 可给出详情）后重试"
                : "communication between replicas (NCCL/Gloo) failed; if another replica failed "
                  "first, its log has the cause, else check the network and NCCL settings "
                  "(NCCL_DEBUG=INFO says more) and retry";
      break;
    case FailureClass::kCommandNotFound:
      what = zh ? "命令无法启动；请检查 command 的程序名、PATH 和 working_dir"
                : "the command could not be started; check the program name in command, PATH "
                  "and working_dir";
      break;
    case FailureClass::kGpuHardware:
      what = zh ? "GPU 硬件出错，不是作业的问题；请重新提交，并告知平台管理员该 GPU"
                : "a GPU hardware error, not the job's fault; submit it again and tell the "
                  "platform admins about that GPU";
      break;
    case FailureClass::kRunIdentity:
      what = zh ? "节点无法以租户的运行身份启动作业，这不是作业的问题；请平台管理员在该节点创建该用"
                  "户，"
                  "或修改策略中的 tenants.<租户>.run_as"
                : "the node could not run the job as its tenant's run identity, not the job's "
                  "fault; a platform admin must create that user on the node or change "
                  "tenants.<tenant>.run_as in the policy";
      break;
    case FailureClass::kNodeLost:
      what = zh ? "节点失联，副本丢失，不是作业的问题；请重新提交"
                : "the node was lost with the replica on it, not the job's fault; submit it "
                  "again";
      break;
    case FailureClass::kMaxRuntime:
      what = zh ? "运行超过 max_runtime 被停止；请调大 max_runtime，或更频繁地保存检查点"
                : "stopped at its max_runtime; raise max_runtime or checkpoint more often";
      break;
    case FailureClass::kCancelled:
      what = zh ? "作业被取消" : "the job was cancelled";
      break;
    case FailureClass::kEvicted:
      what = zh ? "为其他作业让出 GPU 而被停止，已重新排队；声明 checkpoint 可从断点继续"
                : "stopped to give its GPUs to another job, and queued again; declare a "
                  "checkpoint to resume where it stopped";
      break;
    case FailureClass::kRefused:
      what = zh ? "队列配额不允许；请等待、缩小请求，或申请更多配额"
                : "its queue's quota does not allow it; wait, ask for less, or ask for more "
                  "quota";
      break;
  }
  if (f.evidence.empty()) return what;
  return zh ? fmt::format("{}（依据：{}）", what, f.evidence)
            : fmt::format("{} (evidence: {})", what, f.evidence);
}

}  // namespace berth::model
