#include "model/reason.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "common/units.h"
#include "model/message_template.h"
#include "model/reason_catalogue.h"
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
    case ReasonCode::kLivenessFailed:
      return "LivenessFailed";
    case ReasonCode::kHeadroomReclaimed:
      return "HeadroomReclaimed";
  }
  return "None";
}

namespace {

std::int64_t Count(const Reason& r, std::string_view key) {
  auto it = r.counts.find(key);
  return it == r.counts.end() ? 0 : it->second;
}

std::string Say(Phrase phrase, Lang lang, const TemplateArgs& args = {}) {
  return FillTemplate(PhraseText(phrase).In(lang), args);
}

// Milli-GPUs as GPUs: 16000 -> "16", 500 -> "0.5".
std::string Gpus(std::int64_t milli) {
  const char* sign = milli < 0 ? "-" : "";
  const std::int64_t m = milli < 0 ? -milli : milli;
  if (m % 1000 == 0) return fmt::format("{}{}", sign, m / 1000);
  std::string frac = fmt::format("{:03}", m % 1000);
  while (frac.back() == '0') frac.pop_back();
  return fmt::format("{}{}.{}", sign, m / 1000, frac);
}

}  // namespace

std::string FormatGpuHours(std::int64_t mgpu_ms, int decimals) {
  return fmt::format("{:.{}f}", static_cast<double>(mgpu_ms) / 3.6e9, decimals);
}

std::string FormatGpus(std::int64_t milli, Lang lang) {
  const bool one = milli > 0 && milli <= 1000;
  return Say(Phrase::kGpuAmount, lang, TemplateArgs().Set(one ? "one" : "many", Gpus(milli)));
}

std::string FormatCores(std::int64_t millis, Lang lang) {
  const bool one = millis > 0 && millis <= 1000;
  return Say(Phrase::kCoreAmount, lang, TemplateArgs().Set(one ? "one" : "many", Gpus(millis)));
}

std::string FormatSize(std::uint64_t bytes) {
  // The largest binary unit it reaches, to one decimal: "80 GiB", "447.1 GiB".
  static constexpr std::array<std::string_view, 6> kUnits{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} {}", bytes, bytes == 1 ? "byte" : "bytes");
  std::size_t u = 0;
  while (u + 1 < kUnits.size() && bytes >> (10 * (u + 2)) > 0) ++u;
  const std::uint64_t whole = bytes >> (10 * (u + 1));
  const std::uint64_t rest = bytes - (whole << (10 * (u + 1)));
  // Tenths, rounded down, so that a size never reads larger than it is.
  // (rest < 2^60, so ten times it fits.)
  const std::uint64_t tenths = rest * 10 >> (10 * (u + 1));
  if (tenths == 0) return fmt::format("{} {}", whole, kUnits[u]);
  return fmt::format("{}.{} {}", whole, tenths, kUnits[u]);
}

std::string FormatClock(std::int64_t unix_ms, std::int64_t ref_ms, Lang lang) {
  using namespace std::chrono;
  const sys_time<milliseconds> t{milliseconds(unix_ms)};
  const auto day = floor<days>(t);
  const hh_mm_ss hms{floor<minutes>(t - day)};
  TemplateArgs a;
  a.Set("time", fmt::format("{:02}:{:02}", hms.hours().count(), hms.minutes().count()));
  if (day == floor<days>(sys_time<milliseconds>{milliseconds(ref_ms)})) {
    return Say(Phrase::kClock, lang, a);
  }
  const year_month_day ymd{day};
  a.Set("date", fmt::format("{:04}-{:02}-{:02}", static_cast<int>(ymd.year()),
                            static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day())));
  return Say(Phrase::kClockDate, lang, a);
}

// A duration for people, in its two largest units: "45s", "12m", "1h 20m", "2d 3h".
std::string FormatDuration(std::int64_t ms, Lang lang) {
  std::int64_t s = std::max<std::int64_t>(0, ms) / 1000;
  std::int64_t d = s / 86'400, h = s % 86'400 / 3600, m = s % 3600 / 60;
  TemplateArgs a;
  if (d > 0) {
    a.Set("d", d);
    if (h > 0) a.Set("h", h);
    return Say(Phrase::kDays, lang, a);
  }
  if (h > 0) {
    a.Set("h", h);
    if (m > 0) a.Set("m", m);
    return Say(Phrase::kHours, lang, a);
  }
  if (m > 0) {
    a.Set("m", m);
    if (s % 60 > 0) a.Set("s", s % 60);
    return Say(Phrase::kMinutes, lang, a);
  }
  return Say(Phrase::kSeconds, lang, a.Set("s", s));
}

void MarkOtherTenantJob(Reason& reason, std::string_view key) {
  reason.counts[std::string(key) + std::string(kOtherTenantSuffix)] = 1;
}

bool NamesOtherTenantJob(const Reason& reason, std::string_view key) {
  auto it = reason.counts.find(std::string(key) + std::string(kOtherTenantSuffix));
  return it != reason.counts.end() && it->second != 0;
}

bool HideOtherTenantsJobs(Reason& reason) {
  bool hid = false;
  for (std::string_view key : kJobRefKeys) {
    if (!NamesOtherTenantJob(reason, key)) continue;
    if (auto it = reason.counts.find(key); it != reason.counts.end()) {
      reason.counts.erase(it);
      hid = true;
    }
  }
  return hid;
}

std::string JobRefText(std::int64_t id, Lang lang) {
  TemplateArgs a;
  if (id > 0) a.Set("id", id);
  return Say(Phrase::kJobRef, lang, a);
}

std::string EtaUnknownText(std::int64_t kind, std::int64_t blocked_by, std::int64_t blockers,
                           Lang lang) {
  switch (static_cast<EtaUnknown>(kind)) {
    case EtaUnknown::kBlockedByUnlimited: {
      TemplateArgs a;
      a.Set("job", JobRefText(blocked_by, lang));
      if (blockers > 1) a.Set("more", blockers - 1);
      return Say(Phrase::kEtaUnknownBlocked, lang, a);
    }
    case EtaUnknown::kCapacity:
      return Say(Phrase::kEtaUnknownCapacity, lang);
    case EtaUnknown::kQuota:
      return Say(Phrase::kEtaUnknownQuota, lang);
    case EtaUnknown::kInfeasible:
      return Say(Phrase::kEtaUnknownInfeasible, lang);
  }
  return Say(Phrase::kEtaUnknownOther, lang);
}

namespace {

std::string Duration(std::int64_t ms, Lang lang) {
  return FormatDuration(ms, lang);
}

// What one replica needs: whole GPUs, or its slice of one GPU.
std::string Need(const Reason& r, Lang lang) {
  TemplateArgs a;
  if (auto m = Count(r, kSliceMgpu); m > 0) a.Set("share", Gpus(m));
  if (auto b = Count(r, kSliceBytes); b > 0) {
    a.Set("slice", FormatSize(static_cast<std::uint64_t>(b)));
  }
  a.Set("gpus", FormatGpus(Count(r, "gpus_per_replica") * 1000, lang));
  return Say(Phrase::kNeed, lang, a);
}

// The node causes of kNoNodeFits with their counts, in the catalogue's order.
std::string NodeCauses(const Reason& r, Lang lang) {
  std::string out;
  for (const auto& [key, text] : NodeCauseTexts()) {
    if (auto n = Count(r, key); n > 0) {
      if (!out.empty()) out += Say(Phrase::kListSeparator, lang);
      out += FillTemplate(text.In(lang), TemplateArgs().Set("n", n));
    }
  }
  return out;
}

}  // namespace

std::string RenderNodeLayer(std::int64_t nodes, std::int64_t could_take,
                            const std::vector<std::pair<std::string, std::int64_t>>& ranked,
                            const std::map<std::string, std::int64_t, std::less<>>& alone,
                            Lang lang) {
  // The catalogue's words for a cause key; a key it does not know is left out.
  auto words = [](std::span<const NodeCauseText> table, std::string_view key) -> const Message* {
    for (const auto& entry : table) {
      if (entry.key == key) return &entry.text;
    }
    return nullptr;
  };
  std::string listed;
  std::string opened;
  for (const auto& [key, n] : ranked) {
    const Message* text = words(NodeCauseTexts(), key);
    if (text == nullptr || n <= 0) continue;
    if (!listed.empty()) listed += Say(Phrase::kListSeparator, lang);
    listed += FillTemplate(text->In(lang), TemplateArgs().Set("n", n));
    const auto it = alone.find(key);
    const Message* change = words(NodeCauseChanges(), key);
    if (it == alone.end() || it->second <= 0 || change == nullptr) continue;
    if (!opened.empty()) opened += Say(Phrase::kListSeparator, lang);
    opened += Say(Phrase::kNodeLayerAlone, lang,
                  TemplateArgs().Set("change", std::string(change->In(lang))).Set("n", it->second));
  }
  TemplateArgs a;
  a.Set("ok", could_take).Set("nodes", nodes);
  if (!opened.empty()) a.Set("alone", opened);
  if (!listed.empty()) a.Set("causes", listed);
  return Say(Phrase::kNodeLayer, lang, a);
}

namespace {

std::string Ahead(const Reason& r, Lang lang) {
  if (Count(r, kAheadJobs) == 0) return "";
  return Say(Phrase::kAhead, lang,
             TemplateArgs()
                 .Set("jobs", Count(r, kAheadJobs))
                 .Set("gpus", FormatGpus(Count(r, kAheadGpus) * 1000, lang)));
}

// A job with an image and nodes without a container runtime: how many of
// the nodes have none, and the image when detail carries it ("image=NAME").
std::string NeedsContainerRuntime(const Reason& r, Lang lang) {
  const std::int64_t without = Count(r, kNodesWithoutContainerRuntime);
  if (without <= 0) return "";
  TemplateArgs a;
  a.Set("without", without).Set("nodes", Count(r, "nodes"));
  if (r.detail.starts_with(kImageDetailPrefix) && r.detail.size() > kImageDetailPrefix.size()) {
    a.Set("image", r.detail.substr(kImageDetailPrefix.size()));
  }
  return Say(Phrase::kNeedsContainerRuntime, lang, a);
}

// "Would run now if": a GPU count per replica, and a GPU model or a pool
// (from detail, "gpu_model=H100", "gpu_memory=42949672960" or "pool=west").
std::string WouldRun(const Reason& r, Lang lang) {
  std::string out;
  if (auto g = Count(r, kWouldFitGpusPerReplica); g > 0) {
    out += Say(Phrase::kWouldRunWithGpus, lang,
               TemplateArgs().Set("gpus", FormatGpus(g * 1000, lang)));
  }
  if (r.detail.starts_with("gpu_model=")) {
    out += Say(Phrase::kWouldRunWithModel, lang, TemplateArgs().Set("model", r.detail.substr(10)));
  } else if (r.detail.starts_with("gpu_memory=")) {
    std::uint64_t bytes = 0;
    std::string_view v = std::string_view(r.detail).substr(11);
    std::from_chars(v.data(), v.data() + v.size(), bytes);
    out +=
        Say(Phrase::kWouldRunWithGpuMemory, lang, TemplateArgs().Set("memory", FormatSize(bytes)));
  } else if (r.detail.starts_with("pool=")) {
    out += Say(Phrase::kWouldRunInPool, lang, TemplateArgs().Set("pool", r.detail.substr(5)));
  } else if (r.detail.starts_with("queue_pool=")) {
    // "queue_pool=QUEUE POOL": the queue that binds the job's pools.
    const std::string rest = r.detail.substr(11);
    const auto space = rest.find(' ');
    if (space != std::string::npos) {
      out += Say(
          Phrase::kWouldRunIfQueueBound, lang,
          TemplateArgs().Set("queue", rest.substr(0, space)).Set("pool", rest.substr(space + 1)));
    }
  } else if (r.detail.starts_with("headroom_pool=")) {
    out += Say(Phrase::kWouldRunPreemptible, lang, TemplateArgs().Set("pool", r.detail.substr(14)));
  }
  return out;
}

// The queue's numbers. detail is "QUEUE RESOURCE" ("vision gpus",
// "vision gpus/A100"); amounts are in the resource's unit (milli-GPUs for
// GPUs, millicores for CPU, bytes for memory) and rendered in a person's.
std::string QuotaPhrase(const Reason& r, Lang lang) {
  auto space = r.detail.find(' ');
  std::string queue = r.detail.substr(0, space);
  std::string resource = space == std::string::npos ? "gpus" : r.detail.substr(space + 1);
  bool gpus = resource.starts_with("gpus");
  auto amount = [&](std::string_view key) {
    const std::int64_t v = Count(r, key);
    if (gpus) return FormatGpus(v, lang);
    if (resource == "cpu") return FormatCores(v, lang);
    if (resource == "memory" || resource == "gpu_memory") {
      return FormatSize(static_cast<std::uint64_t>(std::max<std::int64_t>(v, 0)));
    }
    return std::to_string(v);
  };
  TemplateArgs a;
  a.Set("queue", queue)
      .Set("requested", amount(kQueueRequested))
      .Set("used", amount(kQueueUsed))
      .Set("guaranteed", amount(kQueueGuaranteed))
      .Set("borrowable", amount(kQueueBorrowable));
  if (r.counts.contains(kQueueBorrowLimit)) a.Set("limit", amount(kQueueBorrowLimit));
  if (!gpus) {
    std::string name = resource == "cpu"          ? Say(Phrase::kResourceCpu, lang)
                       : resource == "memory"     ? Say(Phrase::kResourceMemory, lang)
                       : resource == "gpu_memory" ? Say(Phrase::kResourceGpuMemory, lang)
                                                  : resource;
    return Say(Phrase::kQuotaOther, lang, a.Set("resource", name));
  }
  if (resource != "gpus") a.Set("model", resource.substr(5));
  return Say(Phrase::kQuotaGpus, lang, a);
}

// The arguments of a code's sentence (reason_catalogue.cc); the nested
// phrases are rendered in `lang`, everything else is the same in every language.
TemplateArgs CodeArgs(const Reason& r, Lang lang) {
  TemplateArgs a;
  a.Set("detail", r.detail);
  switch (r.code) {
    case ReasonCode::kBehindInQueue:
      a.Set("blocked_by", Count(r, "blocked_by"))
          .Set("ahead",
               r.counts.contains(kAheadJobs) ? Count(r, kAheadJobs) : Count(r, "position"));
      break;
    case ReasonCode::kNoNodeFits:
      if (auto placed = Count(r, kCauseGang); placed > 0) a.Set("placed", placed);
      a.Set("replicas", Count(r, "replicas"))
          .Set("nodes", Count(r, "nodes"))
          .Set("need", Need(r, lang))
          .Set("causes", NodeCauses(r, lang))
          .Set("container", NeedsContainerRuntime(r, lang))
          .Set("ahead", Ahead(r, lang))
          .Set("would_run", WouldRun(r, lang));
      break;
    case ReasonCode::kFailedExitCode:
      if (auto signal = Count(r, "signal"); signal != 0) a.Set("signal", signal);
      a.Set("replica", Count(r, "replica")).Set("exit_code", Count(r, "exit_code"));
      break;
    case ReasonCode::kFailedToStart:
    case ReasonCode::kRunLost:
    case ReasonCode::kGpuFailed:
    case ReasonCode::kLivenessFailed:
      a.Set("replica", Count(r, "replica"));
      break;
    case ReasonCode::kMaxRuntimeExceeded:
      a.Set("max_runtime", Duration(Count(r, "max_runtime_s") * 1000, lang));
      break;
    case ReasonCode::kCancelled:
      if (!r.detail.empty()) a.Set("by", r.detail);
      break;
    case ReasonCode::kOverQuota:
      a.Set("quota", QuotaPhrase(r, lang)).Set("ahead", Ahead(r, lang));
      break;
    case ReasonCode::kNotPreemptibleOverGuarantee:
      a.Set("quota", QuotaPhrase(r, lang));
      break;
    case ReasonCode::kFragmented:
      a.Set("free", FormatGpus(Count(r, kFreeGpus) * 1000, lang))
          .Set("needed", FormatGpus(Count(r, kNeededGpus) * 1000, lang))
          .Set("largest", FormatGpus(Count(r, kLargestFree) * 1000, lang))
          .Set("ahead", Ahead(r, lang))
          .Set("would_run", WouldRun(r, lang));
      break;
    case ReasonCode::kPreempted:
    case ReasonCode::kReclaimed:
    case ReasonCode::kMoved:
      a.Set("by_job", JobRefText(Count(r, kByJob), lang))
          .Set("work_lost", Duration(Count(r, kWorkLostMs), lang));
      break;
    case ReasonCode::kHeadroomReclaimed: {
      // detail: "<service> <pool>".
      const auto space = r.detail.find(' ');
      a.Set("by_job", JobRefText(Count(r, kByJob), lang))
          .Set("work_lost", Duration(Count(r, kWorkLostMs), lang))
          .Set("service", r.detail.substr(0, space))
          .Set("pool", space == std::string::npos ? "" : r.detail.substr(space + 1));
      break;
    }
    case ReasonCode::kWaitingForEvictions:
      a.Set("evictions", Count(r, "evictions"));
      break;
    case ReasonCode::kRetrying:
      a.Set("failures", Count(r, "failures"))
          .Set("max_attempts", Count(r, "max_attempts"))
          .Set("backoff", Duration(Count(r, "backoff_s") * 1000, lang));
      break;
    case ReasonCode::kOverBudget: {
      // detail: "<month> <unit>".
      const auto space = r.detail.find(' ');
      a.Set("month", r.detail.substr(0, space))
          .Set("unit", space == std::string::npos ? "" : r.detail.substr(space + 1))
          .Set("used", FormatMoney(Count(r, kBudgetUsed)))
          .Set("limit", FormatMoney(Count(r, kBudgetLimit)));
      break;
    }
    case ReasonCode::kNone:
    case ReasonCode::kQueued:
    case ReasonCode::kNoNodes:
    case ReasonCode::kScheduled:
    case ReasonCode::kRunning:
    case ReasonCode::kSucceeded:
    case ReasonCode::kQueueUnknown:
    case ReasonCode::kDrained:
      break;
  }
  return a;
}

// The retry outcome a terminal failure carries: after how many attempts, and
// whether the policy did not retry this class or ran out of attempts.
std::string Attempts(const Reason& r, Lang lang) {
  std::string out;
  if (auto n = Count(r, "attempts"); n > 1) {
    out = Say(Phrase::kAttempts, lang, TemplateArgs().Set("attempts", n));
  }
  if (Count(r, "retries_exhausted") == 0) return out;
  if (const auto cap = Count(r, "retry_cap"); cap > 0) {
    // The policy's cap stopped a retry the job's own block allowed.
    TemplateArgs a;
    a.Set("source",
          Say(Count(r, "retry_cap_queue") != 0 ? Phrase::kRetryCapQueue : Phrase::kRetryCapPolicy,
              lang))
        .Set(cap == 1 ? "one" : "many", cap)
        .Set("asked", Count(r, "retry_asked"));
    return out + Say(Phrase::kRetriesCapped, lang, a);
  }
  return out + Say(Phrase::kRetriesExhausted, lang);
}

// The estimated start of a waiting job, appended to whatever holds it back.
// Times are shown from the cycle's now (the *_in_ms keys): a reason has no
// clock of its own, and eta_ms stays for scripts.
std::string EtaStart(const Reason& r, Lang lang) {
  if (r.counts.contains(kEtaInMs)) {
    TemplateArgs a;
    if (auto in = Count(r, kEtaInMs); in > 0) a.Set("in", Duration(in, lang));
    if (auto at = Count(r, kEtaMs); at > 0) {
      a.Set("at", FormatClock(at, at - Count(r, kEtaInMs), lang));
    }
    a.Set("how", Say(Count(r, kEtaReserved) != 0 ? Phrase::kEtaGpusReserved
                     : Count(r, kEtaBasis) == static_cast<std::int64_t>(EtaBasis::kPredicted)
                         ? Phrase::kEtaPredicted
                         : Phrase::kEtaEstimate,
                     lang));
    return Say(Phrase::kEtaKnown, lang, a);
  }
  if (r.counts.contains(kEtaUnknown)) {
    TemplateArgs a;
    const std::int64_t kind = Count(r, kEtaUnknown);
    if (kind >= 1 && kind <= 4) {
      a.Set("why", EtaUnknownText(kind, Count(r, kEtaBlockedBy), Count(r, kEtaBlockers), lang));
    }
    return Say(Phrase::kEtaUnknownWhy, lang, a);
  }
  if (r.counts.contains(kNotBeforeInMs)) {
    TemplateArgs a;
    a.Set("job", Count(r, "blocked_by")).Set("in", Duration(Count(r, kNotBeforeInMs), lang));
    if (auto at = Count(r, kNotBeforeMs); at > 0) {
      a.Set("at", FormatClock(at, at - Count(r, kNotBeforeInMs), lang));
    }
    return Say(Phrase::kNotBefore, lang, a);
  }
  return "";
}

std::string Eta(const Reason& r, Lang lang) {
  std::string reserved;
  if (auto n = Count(r, kReservedFreeGpus); n > 0) {
    reserved =
        Say(Phrase::kReservedGpus, lang, TemplateArgs().Set("gpus", FormatGpus(n * 1000, lang)));
  }
  return reserved + EtaStart(r, lang);
}

// Whether reclaim, preemption or moving jobs could help (kReclaim*,
// kPreemptCandidates, kMoveCandidates, kEvictableAfterMinRuntime); empty when
// the scheduler did not look.
std::string Relief(const Reason& r, Lang lang) {
  std::vector<std::string> parts;
  if (r.counts.contains(kReclaimNotBelowGuarantee)) {
    parts.push_back(Say(Phrase::kReliefNotBelowGuarantee, lang));
  } else if (auto it = r.counts.find(kReclaimCandidates); it != r.counts.end()) {
    parts.push_back(it->second == 0 ? Say(Phrase::kReliefNoLentGpus, lang)
                                    : Say(Phrase::kReliefReclaimAll, lang,
                                          TemplateArgs().Set("jobs", it->second)));
  }
  if (auto it = r.counts.find(kPreemptCandidates); it != r.counts.end()) {
    parts.push_back(it->second == 0 ? Say(Phrase::kReliefNoPreemptible, lang)
                                    : Say(Phrase::kReliefPreemptAll, lang,
                                          TemplateArgs().Set("jobs", it->second)));
  }
  if (auto it = r.counts.find(kMoveCandidates); it != r.counts.end()) {
    parts.push_back(
        it->second == 0
            ? Say(Phrase::kReliefNoMovable, lang)
            : Say(Phrase::kReliefMoveAll, lang,
                  TemplateArgs().Set("jobs", it->second).Set("max_moves", Count(r, kMaxMovesKey))));
  }
  if (auto young = Count(r, kEvictableAfterMinRuntime); young > 0) {
    parts.push_back(Say(Phrase::kReliefAfterMinRuntime, lang,
                        TemplateArgs()
                            .Set("jobs", young)
                            .Set("first_in", Duration(Count(r, kMinRuntimeEndsInMs), lang))));
  }
  if (auto at = Count(r, kReclaimAtMs); at > 0) {
    const std::int64_t in = Count(r, kReclaimInMs);
    parts.push_back(Say(Phrase::kReliefReclaimGrace, lang,
                        TemplateArgs()
                            .Set("at", FormatClock(at, at - in, lang))
                            .Set("in", Duration(in, lang))
                            .Set("jobs", Count(r, kReclaimVictims))
                            .Set("job", JobRefText(Count(r, kReclaimFirstVictim), lang))
                            .Set("lost", FormatGpuHours(Count(r, kReclaimLostMgpuMs), 1))
                            .Set("worst", Duration(Count(r, kReclaimWorkLostMs), lang))));
  }
  if (parts.empty()) return "";
  std::string out = Say(Phrase::kEviction, lang);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += Say(Phrase::kPartSeparator, lang);
    out += parts[i];
  }
  return out;
}

}  // namespace

std::string WouldRunText(const Reason& r, Lang lang) {
  // Only the sentences that say a hint carry one (CodeArgs' {would_run}).
  if (r.code != ReasonCode::kNoNodeFits && r.code != ReasonCode::kFragmented) return "";
  std::string out = WouldRun(r, lang);
  // The catalogue's hints open with the clause separator of the sentence
  // they end ("; ", "；"); said on their own, they do without it.
  for (std::string_view lead : {std::string_view("; "), std::string_view("；")}) {
    if (out.starts_with(lead)) return out.substr(lead.size());
  }
  return out;
}

std::string_view LangName(Lang lang) {
  return lang == Lang::kZh ? "zh" : "en";
}

std::optional<Lang> ParseLang(std::string_view text) {
  std::string_view base = text.substr(0, text.find_first_of("-_."));
  if (base == "en") return Lang::kEn;
  if (base == "zh") return Lang::kZh;
  return std::nullopt;
}

// The code's sentence, then what any reason may carry: the retry outcome, the
// estimated start, and whether eviction could help.
std::string RenderReason(const Reason& r, Lang lang) {
  return FillTemplate(CodeText(r.code).In(lang), CodeArgs(r, lang)) + Attempts(r, lang) +
         Eta(r, lang) + Relief(r, lang);
}

std::string RenderReason(const Reason& r) {
  return RenderReason(r, Lang::kEn);
}

std::string RenderForecast(std::int64_t start_ms, std::int64_t made_at_ms, bool predicted,
                           std::int64_t now_ms, Lang lang) {
  TemplateArgs a;
  if (start_ms > now_ms) a.Set("in", Duration(start_ms - now_ms, lang));
  if (start_ms > 0) a.Set("at", FormatClock(start_ms, now_ms, lang));
  if (now_ms - made_at_ms >= 1000) a.Set("ago", Duration(now_ms - made_at_ms, lang));
  a.Set("how", Say(predicted ? Phrase::kForecastPredicted : Phrase::kForecastDeclared, lang));
  return Say(Phrase::kForecast, lang, a);
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
