// RenderWhy: the `berth why ID` view. The sentence comes from berthd, already
// in the asked language; the numbers follow in a person's units (GPUs, GiB,
// durations, clock times, causes in words), each under a plain label. The raw
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
constexpr model::Lang kEn = model::Lang::kEn;

// The reason's numbers as (label, value) lines in a person's units. Keys
// this view does not know are kept as they are, so nothing is hidden.
Lines ReasonFacts(const model::Reason& r) {
  std::map<std::string, std::int64_t, std::less<>> left(r.counts.begin(), r.counts.end());
  auto take = [&left](std::string_view key) -> std::optional<std::int64_t> {
    auto it = left.find(key);
    if (it == left.end()) return std::nullopt;
    std::int64_t v = it->second;
    left.erase(it);
    return v;
  };
  auto gpus = [](std::int64_t n) { return model::FormatGpus(n * 1000, kEn); };
  auto duration = [](std::int64_t ms) { return model::FormatDuration(ms, kEn); };
  Lines out;

  // What one replica asks for, and where it was looked for.
  const auto slice_mgpu = take(model::kSliceMgpu);
  const auto slice_bytes = take(model::kSliceBytes);
  const auto per_replica = take("gpus_per_replica");
  if (slice_mgpu && *slice_mgpu > 0) {
    out.emplace_back("per replica", "a " + model::FormatGpus(*slice_mgpu, kEn) + " share of a GPU");
  } else if (slice_bytes && *slice_bytes > 0) {
    out.emplace_back("per replica", model::FormatSize(static_cast<std::uint64_t>(*slice_bytes)) +
                                        " of one GPU's memory");
  } else if (per_replica) {
    out.emplace_back("per replica", gpus(*per_replica));
  }
  if (auto n = take("replicas")) out.emplace_back("replicas", std::to_string(*n));
  if (auto n = take("nodes")) out.emplace_back("nodes looked at", std::to_string(*n));
  std::string causes;
  for (const auto& [key, text] : model::NodeCauseTexts()) {
    if (auto n = take(key); n && *n > 0) {
      if (!causes.empty()) causes += ", ";
      causes += model::FillTemplate(text.In(kEn), model::TemplateArgs().Set("n", *n));
    }
  }
  if (auto placed = take(model::kCauseGang); placed && *placed > 0) {
    out.emplace_back("replicas with room", std::to_string(*placed));
  }
  if (!causes.empty()) out.emplace_back("nodes rejected", causes);
  if (auto n = take(model::kFreeGpus)) out.emplace_back("free on usable nodes", gpus(*n));
  if (auto n = take(model::kNeededGpus)) out.emplace_back("needed", gpus(*n));
  if (auto n = take(model::kLargestFree)) out.emplace_back("most free on one node", gpus(*n));
  if (auto n = take(model::kWouldFitGpusPerReplica)) {
    out.emplace_back("would run now with", gpus(*n) + " per replica");
  }

  // The queue's numbers, in the unit of the resource they count.
  std::string resource = "gpus";
  if (r.code == model::ReasonCode::kOverQuota ||
      r.code == model::ReasonCode::kNotPreemptibleOverGuarantee) {
    if (auto space = r.detail.find(' '); space != std::string::npos) {
      resource = r.detail.substr(space + 1);
    }
  }
  auto amount = [&resource](std::int64_t v) {
    if (resource == "cpu") return model::FormatCores(v, kEn);
    if (resource == "memory" || resource == "gpu_memory") {
      return model::FormatSize(static_cast<std::uint64_t>(std::max<std::int64_t>(v, 0)));
    }
    if (resource.starts_with("gpus")) return model::FormatGpus(v, kEn);
    return std::to_string(v);
  };
  if (auto v = take(model::kQueueRequested)) out.emplace_back("asks for", amount(*v));
  if (auto v = take(model::kQueueUsed)) out.emplace_back("queue uses", amount(*v));
  if (auto v = take(model::kQueueGuaranteed)) out.emplace_back("queue guaranteed", amount(*v));
  if (auto v = take(model::kQueueBorrowLimit)) {
    out.emplace_back("may borrow", "up to " + amount(*v) + " more");
  }
  if (auto v = take(model::kQueueBorrowable)) out.emplace_back("borrowable now", amount(*v));

  // Its place in line and its start.
  const auto position = take(model::kPosition);
  const auto ahead_jobs = take(model::kAheadJobs);
  const auto ahead_gpus = take(model::kAheadGpus);
  if (position) {
    std::string text = fmt::format("{} in its queue", *position);
    if (ahead_jobs && *ahead_jobs > 0) {
      text += fmt::format(" ({} job(s) ahead, asking for {})", *ahead_jobs,
                          gpus(ahead_gpus.value_or(0)));
    }
    out.emplace_back("position", text);
  }
  const auto blocked_by = take("blocked_by");
  if (blocked_by) out.emplace_back("waits behind", fmt::format("job {}", *blocked_by));
  const auto eta = take(model::kEtaMs);
  const auto eta_in = take(model::kEtaInMs);
  const auto reserved = take(model::kEtaReserved);
  if (eta) {
    const std::int64_t in = eta_in.value_or(0);
    out.emplace_back("estimated start",
                     fmt::format("{}, around {} ({})", in > 0 ? "in about " + duration(in) : "now",
                                 model::FormatClock(*eta, *eta - in, kEn),
                                 reserved.value_or(0) != 0 ? "GPUs are reserved for it"
                                                           : "an estimate; no GPUs reserved"));
  }
  const auto unknown = take(model::kEtaUnknown);
  const auto eta_blocked_by = take(model::kEtaBlockedBy);
  const auto eta_blockers = take(model::kEtaBlockers);
  if (unknown) {
    out.emplace_back("estimated start",
                     "unknown: " + model::EtaUnknownText(*unknown, eta_blocked_by.value_or(0),
                                                         eta_blockers.value_or(0), kEn));
  }
  const auto not_before = take(model::kNotBeforeMs);
  const auto not_before_in = take(model::kNotBeforeInMs);
  if (not_before) {
    const std::int64_t in = not_before_in.value_or(0);
    out.emplace_back("not before",
                     fmt::format("{}, around {}", in > 0 ? "in about " + duration(in) : "now",
                                 model::FormatClock(*not_before, *not_before - in, kEn)));
  }
  if (auto n = take(model::kReservedFreeGpus)) {
    out.emplace_back("free but reserved", gpus(*n) + " (for jobs that start before it would end)");
  }

  // Whether eviction could help.
  if (auto v = take(model::kReclaimNotBelowGuarantee); v && *v != 0) {
    out.emplace_back("may reclaim", "no: its queue is not below its guarantee");
  }
  if (auto n = take(model::kReclaimCandidates)) {
    out.emplace_back("could reclaim", fmt::format("{} job(s), not enough", *n));
  }
  if (auto n = take(model::kPreemptCandidates)) {
    out.emplace_back("could preempt", fmt::format("{} job(s), not enough", *n));
  }
  const auto max_moves = take(model::kMaxMovesKey);
  if (auto n = take(model::kMoveCandidates)) {
    out.emplace_back("could move", fmt::format("{} job(s) that checkpoint, at most {} at once", *n,
                                               max_moves.value_or(0)));
  }
  const auto young = take(model::kEvictableAfterMinRuntime);
  const auto young_in = take(model::kMinRuntimeEndsInMs);
  if (young) {
    out.emplace_back("evictable later", fmt::format("{} job(s), the first in {}", *young,
                                                    duration(young_in.value_or(0))));
  }

  // An evicted job, a stopped one, a retry, a budget.
  if (auto v = take(model::kByJob)) out.emplace_back("by job", std::to_string(*v));
  if (auto v = take(model::kWorkLostMs)) out.emplace_back("work lost", duration(*v));
  if (auto v = take("max_runtime_s")) out.emplace_back("max runtime", duration(*v * 1000));
  if (auto v = take("backoff_s")) out.emplace_back("backoff", duration(*v * 1000));
  if (auto v = take(model::kBudgetUsed)) out.emplace_back("budget used", model::FormatMoney(*v));
  if (auto v = take(model::kBudgetLimit)) out.emplace_back("budget", model::FormatMoney(*v));
  for (const auto& [key, value] : left) out.emplace_back(key, std::to_string(value));
  return out;
}

}  // namespace

std::string RenderWhy(const json& why) {
  std::string out;
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
  lines.emplace_back("job", fmt::format("{} ({})", IntText(why, "id"), Text(why, "name")));
  if (Field(why, "tenant") != nullptr || Field(why, "queue") != nullptr) {
    lines.emplace_back("queue", Text(why, "tenant") + "/" + Text(why, "queue"));
  }
  lines.emplace_back("state", Text(why, "state"));
  lines.emplace_back("code", Text(why, "reason.code"));
  if (std::string cls = Text(why, "failure.class"); cls != "-" && !cls.empty()) {
    lines.emplace_back("failure", cls);
    lines.emplace_back("evidence", Text(why, "failure.evidence"));
  }
  if (const json* reason = Field(why, "reason"); reason != nullptr && reason->is_object()) {
    model::Reason r;
    try {
      r = model::ReasonFromJson(*reason);
    } catch (const json::exception&) {
      r = {};  // counts that are not numbers: shown as they are below
    }
    if (r.counts.empty()) {
      if (const json* counts = Field(why, "reason.counts");
          counts != nullptr && counts->is_object()) {
        for (const auto& item : counts->items())
          lines.emplace_back(item.key(), ValueText(item.value()));
      }
    }
    for (auto& line : ReasonFacts(r)) lines.push_back(std::move(line));
  }
  if (std::string detail = Text(why, "reason.detail"); detail != "-" && !detail.empty()) {
    lines.emplace_back("detail", detail);
  }
  std::size_t width = 0;
  for (const auto& [key, value] : lines) width = std::max(width, key.size() + 1);
  for (const auto& [key, value] : lines) {
    out += fmt::format("{:<{}}  {}\n", key + ":", width, OneLine(value));
  }

  const json& timeline = Array(why, "timeline");
  if (!timeline.empty()) {
    Table table({"TIME", "EVENT", "MESSAGE"});
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
