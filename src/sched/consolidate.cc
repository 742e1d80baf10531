// Consolidation: a waiting gang that fits nowhere as the GPUs lie may have
// running jobs that checkpoint moved elsewhere in the same plan (policy
// `consolidation`). Like reclaim and preemption, every try runs inside the
// cluster's statement and is rolled back unless the gang and every moved job
// fit and pass quota; the moves that turn out unnecessary are dropped.
#include <algorithm>
#include <set>
#include <tuple>

#include "common/checked.h"
#include "sched/cycle.h"

namespace berth::sched {
namespace {

// GPUs a running job holds on node `name`.
std::uint32_t GpusOn(const RunningJob& r, std::string_view name) {
  std::uint32_t n = 0;
  for (const auto& rp : r.replicas) {
    if (rp.node == name) n += static_cast<std::uint32_t>(rp.gpu_indices.size());
  }
  return n;
}

// Nodes tried as the place for a replica, one at a time, before the moves
// of several are combined (gangs of several replicas).
constexpr std::size_t kMaxRooms = 8;

}  // namespace

void Cycle::FindMovable() {
  if (movable_built_) return;
  movable_built_ = true;
  movable_on_.assign(cluster_.size(), {});
  for (std::size_t i = 0; i < s_.running.size(); ++i) {
    const RunningJob& r = s_.running[i];
    if (!r.checkpoints || !running_preemptible_[i] || r.resources.gpus == 0 ||
        model::IsSlice(r.resources)) {
      continue;
    }
    for (std::size_t n : RunningNodes(i)) {
      if (movable_on_[n].empty()) movable_nodes_.push_back(n);
      movable_on_[n].push_back(i);
    }
  }
  std::sort(movable_nodes_.begin(), movable_nodes_.end());
}

bool Cycle::MayMove(const JobCtx& ctx, std::size_t i) const {
  const RunningJob& r = s_.running[i];
  return !evicted_[i] && running_priority_[i] <= ctx.priority &&
         SaturatingSub(s_.now_ms, r.started_at_ms) >= s_.policy.min_runtime_ms;
}

const JobCtx& Cycle::MoverCtx(std::size_t i) {
  if (auto it = movers_.find(i); it != movers_.end()) return it->second;
  const RunningJob& r = s_.running[i];
  // Placed again by its spec's constraints only: no prediction, and not as
  // a service replica.
  PendingJob& p = mover_jobs_.emplace_back(PendingJobOf(r));
  p.predicted = {};
  p.service.clear();
  return movers_.emplace(i, Resolve(p)).first->second;
}

std::vector<Cycle::Room> Cycle::FindRooms(const JobCtx& ctx) {
  const auto& res = ctx.shape.resources;
  std::vector<Room> rooms;
  std::set<std::size_t> movable;
  // Nodes short of a replica's GPUs, the most free first: the first rooms
  // found need the fewest moves. At most kMaxRooms are tried.
  cluster_.ForNodesBelow(res, res.gpus, [&](std::size_t n, std::uint32_t free) {
    if (movable_on_[n].empty() || !cluster_.StaticCause(n, ctx.shape).empty()) return true;
    const auto& name = cluster_.Node(n).name;
    Room room{res.gpus - free, n, {}};
    std::uint32_t could_free = 0;
    for (std::size_t i : movable_on_[n]) {
      if (!MayMove(ctx, i)) continue;
      room.jobs.push_back(i);
      movable.insert(i);
      could_free += GpusOn(s_.running[i], name);
    }
    if (room.jobs.empty() || free + could_free < res.gpus) return true;
    std::sort(room.jobs.begin(), room.jobs.end(), [&](std::size_t a, std::size_t b) {
      const RunningJob& ra = s_.running[a];
      const RunningJob& rb = s_.running[b];
      return std::tuple(running_priority_[a], WorkLostMs(ra), ra.id) <
             std::tuple(running_priority_[b], WorkLostMs(rb), rb.id);
    });
    rooms.push_back(std::move(room));
    return rooms.size() < kMaxRooms;
  });
  move_relief_.candidates = static_cast<std::int64_t>(movable.size());
  return rooms;
}

bool Cycle::PlaceByMoving(const JobCtx& ctx) {
  move_relief_ = {};
  const auto& cfg = s_.policy.consolidation;
  const auto& res = ctx.shape.resources;
  if (!cfg.enabled || cfg.max_moves <= 0 || res.gpus == 0 || model::IsSlice(res)) return false;
  FindMovable();
  // Nothing in the cluster checkpoints: nothing to say either.
  if (movable_nodes_.empty()) return false;
  // Moves only rearrange GPUs: the free ones must add up to the gang.
  if (cluster_.FreeGpus() < std::uint64_t{res.gpus} * ctx.shape.replicas) return false;
  // Each try costs up to a walk of the nodes and a few dozen gang
  // placements: the policy caps the tries per cycle, in fair-share order.
  if (move_tries_ >= s_.policy.consolidation.max_jobs_per_cycle) return false;
  ++move_tries_;
  move_relief_.tried = true;
  const std::vector<Room> rooms = FindRooms(ctx);
  if (rooms.empty()) return false;

  // Every try starts from here; the quota book is put back by its own log.
  const std::size_t mark = cluster_.Mark();
  std::vector<std::tuple<std::size_t, Usage, bool>> book_log;  // leaf, usage, added
  auto undo = [&] {
    cluster_.Rollback(mark);
    for (auto it = book_log.rbegin(); it != book_log.rend(); ++it) {
      auto& [leaf, usage, added] = *it;
      if (added) {
        book_.Remove(leaf, usage);
      } else {
        book_.Add(leaf, usage);
      }
    }
    book_log.clear();
  };
  auto charge = [&](std::size_t leaf, const Usage& u, bool add) {
    if (add) {
      book_.Add(leaf, u);
    } else {
      book_.Remove(leaf, u);
    }
    book_log.emplace_back(leaf, u, add);
  };
  std::vector<ReplicaPlacement> placed_job;
  std::vector<Move> moves;
  // Stops `chosen`, places the gang, then every chosen job again, largest
  // first. On success the state holds it all (quota charged).
  auto attempt = [&](std::vector<std::size_t> chosen) {
    undo();
    moves.clear();
    for (std::size_t v : chosen) {
      cluster_.Release(s_.running[v]);
      charge(*running_queue_[v], RunningUsage(v), false);
    }
    HideReserved(EndOf(*ctx.job));
    auto placed = cluster_.PlaceGang(ctx.shape, nullptr);
    if (!placed) return false;
    UnhideReserved();
    Usage delta = UsageOf(cluster_, ctx.shape.resources, *placed);
    if (book_.Check(*ctx.leaf, delta, ctx.preemptible)) return false;
    charge(*ctx.leaf, delta, true);
    placed_job = std::move(*placed);
    std::stable_sort(chosen.begin(), chosen.end(), [&](std::size_t a, std::size_t b) {
      return s_.running[a].resources.gpus * s_.running[a].replicas.size() >
             s_.running[b].resources.gpus * s_.running[b].replicas.size();
    });
    for (std::size_t v : chosen) {
      const JobCtx& m = MoverCtx(v);
      if (!m.leaf) return false;
      HideReserved(EndOf(*m.job));
      auto again = cluster_.PlaceGang(m.shape, nullptr);
      if (!again) return false;
      UnhideReserved();
      Usage d = UsageOf(cluster_, m.shape.resources, *again);
      if (book_.Check(*m.leaf, d, m.preemptible)) return false;
      charge(*m.leaf, d, true);
      moves.push_back({v, std::move(*again)});
    }
    return true;
  };

  const auto max_moves = static_cast<std::size_t>(cfg.max_moves);
  std::vector<std::size_t> chosen;
  bool fits = false;
  // One room at a time (a replica's worth of GPUs on one node), then, for
  // gangs of several replicas, the rooms' jobs together.
  for (std::size_t k = 0; k < rooms.size() && !fits; ++k) {
    chosen.clear();
    for (std::size_t i : rooms[k].jobs) {
      if (chosen.size() == max_moves) break;
      chosen.push_back(i);
      if (attempt(chosen)) {
        fits = true;
        break;
      }
    }
  }
  if (!fits && ctx.shape.replicas > 1) {
    chosen.clear();
    for (std::size_t k = 0; k < rooms.size() && !fits && chosen.size() < max_moves; ++k) {
      for (std::size_t i : rooms[k].jobs) {
        if (chosen.size() == max_moves) break;
        if (std::find(chosen.begin(), chosen.end(), i) != chosen.end()) continue;
        chosen.push_back(i);
        if (attempt(chosen)) {
          fits = true;
          break;
        }
      }
    }
  }
  if (!fits) {
    undo();
    moves.clear();
    return false;
  }
  // Drop moves the placement does not need, latest-chosen first: a job that
  // went back where it was, or whose GPUs the gang did not take.
  for (std::size_t i = chosen.size(); i-- > 0;) {
    if (chosen.size() == 1) break;  // the gang did not fit without moves
    std::vector<std::size_t> fewer = chosen;
    fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(i));
    if (attempt(fewer)) chosen = std::move(fewer);
  }
  if (!attempt(chosen)) {  // cannot happen: `chosen` fitted before
    undo();
    return false;
  }
  book_log.clear();  // the moves stay, charged
  CommitMoves(ctx, std::move(placed_job), std::move(moves));
  return true;
}

void Cycle::CommitMoves(const JobCtx& ctx, std::vector<ReplicaPlacement> replicas,
                        std::vector<Move> moves) {
  Commit(ctx, std::move(replicas), Usage{}, {}, EvictionCause::kMove);  // quota already charged
  const std::size_t job_placement = plan_.placements.size() - 1;
  for (auto& m : moves) {
    const RunningJob& r = s_.running[m.running];
    evicted_[m.running] = true;
    Eviction e;
    e.job_id = r.id;
    e.by_job = ctx.job->id;
    e.by_queue = ctx.path;
    e.cause = EvictionCause::kMove;
    e.work_lost_ms = WorkLostMs(r);
    e.reason.code = model::ReasonCode::kMoved;
    e.reason.counts[std::string(model::kByJob)] = ctx.job->id;
    e.reason.counts[std::string(model::kWorkLostMs)] = e.work_lost_ms;
    e.reason.detail = ctx.path;
    e.moved_from = r.replicas;
    e.moved_to = m.replicas;
    plan_.evictions.push_back(std::move(e));
    plan_.placements[job_placement].after_evicting.push_back(r.id);
    if (!EndKnown(r)) {
      for (std::size_t n : RunningNodes(m.running)) unlimited_on_.Erase(n, r.id);
    }
    // Its new place counts as started now, as any placement of this cycle.
    const JobCtx& mc = MoverCtx(m.running);
    const TimeMs end = EndOf(*mc.job);
    Started st{end, false, plan_.placements.size(), r.resources, r.id, {}};
    for (const auto& rp : m.replicas) {
      auto n = NodeIndex(rp.node);
      if (!n || std::find(st.nodes.begin(), st.nodes.end(), *n) != st.nodes.end()) continue;
      st.nodes.push_back(*n);
      if (end == kNever && !rp.gpu_indices.empty()) unlimited_on_.Add(*n, r.id);
    }
    started_.push_back(std::move(st));
    plan_.placements.push_back(Placement{r.id, std::move(m.replicas), {r.id}, true});
  }
}

}  // namespace berth::sched
