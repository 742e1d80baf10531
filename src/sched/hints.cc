#include "sched/hints.h"

#include <algorithm>
#include <charconv>
#include <string_view>
#include <utility>
#include <vector>

namespace berth::sched {
namespace {

constexpr std::string_view kModelPrefix = "gpu_model=";
constexpr std::string_view kMemoryPrefix = "gpu_memory=";
constexpr std::string_view kPoolPrefix = "pool=";
constexpr std::string_view kHeadroomPrefix = "headroom_pool=";
constexpr std::string_view kQueuePoolPrefix = "queue_pool=";

bool HintDetail(std::string_view detail) {
  return detail.starts_with(kModelPrefix) || detail.starts_with(kMemoryPrefix) ||
         detail.starts_with(kPoolPrefix) || detail.starts_with(kHeadroomPrefix) ||
         detail.starts_with(kQueuePoolPrefix);
}

// Whether `plan` starts `job_id` (a consolidation's move of a running job
// is not a start).
bool Places(const Plan& plan, std::int64_t job_id) {
  return std::any_of(plan.placements.begin(), plan.placements.end(),
                     [job_id](const Placement& p) { return p.job_id == job_id && !p.moved; });
}

// A reason whose hint was dropped gets back the image it would have named
// (the cycle names it only where no hint holds the detail).
void NameImageAfterDrop(const Snapshot& snapshot, std::int64_t job_id, model::Reason& reason) {
  if (!reason.detail.empty() || reason.code != model::ReasonCode::kNoNodeFits ||
      !reason.counts.contains(model::kNodesWithoutContainerRuntime)) {
    return;
  }
  auto it = std::find_if(snapshot.pending.begin(), snapshot.pending.end(),
                         [job_id](const PendingJob& p) { return p.id == job_id; });
  if (it != snapshot.pending.end() && !it->image.empty()) {
    reason.detail = std::string(model::kImageDetailPrefix) + it->image;
  }
}

}  // namespace

std::optional<Hint> HintOf(const model::Reason& reason) {
  if (auto it = reason.counts.find(model::kWouldFitGpusPerReplica);
      it != reason.counts.end() && it->second > 0) {
    return Hint{Hint::Kind::kGpusPerReplica, {}, static_cast<std::uint64_t>(it->second)};
  }
  const std::string_view d = reason.detail;
  if (d.starts_with(kModelPrefix) && d.size() > kModelPrefix.size()) {
    return Hint{Hint::Kind::kGpuModel, std::string(d.substr(kModelPrefix.size())), 0};
  }
  if (d.starts_with(kMemoryPrefix)) {
    std::uint64_t bytes = 0;
    const std::string_view v = d.substr(kMemoryPrefix.size());
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), bytes);
    if (ec != std::errc{} || end != v.data() + v.size() || bytes == 0) return std::nullopt;
    return Hint{Hint::Kind::kGpuMemory, {}, bytes};
  }
  if (d.starts_with(kPoolPrefix) && d.size() > kPoolPrefix.size()) {
    return Hint{Hint::Kind::kPool, std::string(d.substr(kPoolPrefix.size())), 0};
  }
  if (d.starts_with(kQueuePoolPrefix)) {
    const std::string_view rest = d.substr(kQueuePoolPrefix.size());
    const auto space = rest.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == rest.size()) {
      return std::nullopt;
    }
    Hint h{Hint::Kind::kQueuePool, std::string(rest.substr(space + 1)), 0};
    h.queue = std::string(rest.substr(0, space));
    return h;
  }
  if (d.starts_with(kHeadroomPrefix) && d.size() > kHeadroomPrefix.size()) {
    return Hint{Hint::Kind::kPreemptible, std::string(d.substr(kHeadroomPrefix.size())), 0};
  }
  return std::nullopt;
}

void DropHint(model::Reason& reason) {
  reason.counts.erase(std::string(model::kWouldFitGpusPerReplica));
  if (HintDetail(reason.detail)) reason.detail.clear();
}

bool ApplyHint(const Hint& hint, PendingJob& job) {
  switch (hint.kind) {
    case Hint::Kind::kGpusPerReplica: {
      const std::uint64_t total = std::uint64_t{job.resources.gpus} * job.replicas;
      if (hint.number == 0 || total == 0 || total % hint.number != 0) return false;
      job.resources.gpus = static_cast<std::uint32_t>(hint.number);
      job.replicas = static_cast<std::uint32_t>(total / hint.number);
      return true;
    }
    case Hint::Kind::kGpuModel:
      job.resources.gpu_model = hint.value;
      return true;
    case Hint::Kind::kGpuMemory:
      job.resources.gpu_memory_bytes = hint.number;
      return true;
    case Hint::Kind::kPool:
      job.pool = hint.value;
      return true;
    case Hint::Kind::kPreemptible:
      job.preemptible = true;
      return true;
    case Hint::Kind::kQueuePool:
      return false;
  }
  return false;
}

namespace {

// The policy with `hint.value` bound to queue `hint.queue` as well; false
// when the queue does not exist or already has it.
bool BindPool(const Hint& hint, model::Policy& policy) {
  for (auto& q : policy.queues) {
    if (q.path != hint.queue) continue;
    if (q.pools.empty() || policy.FindPool(hint.value) == nullptr ||
        std::find(q.pools.begin(), q.pools.end(), hint.value) != q.pools.end()) {
      return false;
    }
    q.pools.push_back(hint.value);
    return true;
  }
  return false;
}

}  // namespace

bool HintHolds(const Scheduler& scheduler, Snapshot& scratch, std::int64_t job_id,
               const Hint& hint) {
  auto it = std::find_if(scratch.pending.begin(), scratch.pending.end(),
                         [job_id](const PendingJob& p) { return p.id == job_id; });
  if (it == scratch.pending.end()) return false;
  if (hint.kind == Hint::Kind::kQueuePool) {
    model::Policy before = scratch.policy;
    if (!BindPool(hint, scratch.policy)) return false;
    const bool placed = Places(scheduler.Schedule(scratch), job_id);
    scratch.policy = std::move(before);
    return placed;
  }
  PendingJob original = *it;
  if (!ApplyHint(hint, *it)) {
    *it = std::move(original);
    return false;
  }
  const bool placed = Places(scheduler.Schedule(scratch), job_id);
  *it = std::move(original);
  return placed;
}

HintCheck VerifyHints(const Scheduler& scheduler, const Snapshot& snapshot, Plan& plan,
                      std::size_t budget, const ShownBefore& shown_before) {
  struct Candidate {
    bool shown = false;
    std::int64_t job_id = 0;
    std::size_t decision = 0;
    Hint hint;
  };
  std::vector<Candidate> candidates;
  for (std::size_t i = 0; i < plan.pending.size(); ++i) {
    auto hint = HintOf(plan.pending[i].reason);
    if (!hint) continue;
    const std::int64_t id = plan.pending[i].job_id;
    const bool shown = shown_before && shown_before(id, *hint);
    candidates.push_back({shown, id, i, std::move(*hint)});
  }
  HintCheck check;
  check.found = candidates.size();
  if (candidates.empty()) return check;
  // Hints nobody has seen yet first; among them, and among the rest, the
  // oldest job first.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::pair(a.shown, a.job_id) < std::pair(b.shown, b.job_id);
  });
  std::optional<Snapshot> scratch;
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    const Candidate& c = candidates[k];
    model::Reason& reason = plan.pending[c.decision].reason;
    if (k < budget) {
      if (!scratch) scratch.emplace(snapshot);
      if (HintHolds(scheduler, *scratch, c.job_id, c.hint)) {
        ++check.verified;
      } else {
        ++check.refuted;
        DropHint(reason);
        NameImageAfterDrop(snapshot, c.job_id, reason);
      }
    } else if (c.shown) {
      ++check.kept_from_before;
    } else {
      ++check.unchecked;
      DropHint(reason);
      NameImageAfterDrop(snapshot, c.job_id, reason);
    }
  }
  return check;
}

}  // namespace berth::sched
