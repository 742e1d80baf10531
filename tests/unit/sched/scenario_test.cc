// Scenario tests as data: every tests/scenarios/*.yaml is a cluster, a
// policy, running and pending jobs, and the expected placements, evictions
// and reasons. The format is described in docs/scheduling.md.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/units.h"
#include "model/reason.h"
#include "sched/core_scheduler.h"
#include "sched/hints.h"
#include "sched/layers.h"
#include "unit/sched/plan_check.h"

namespace berth::sched {
namespace {

namespace fs = std::filesystem;

std::int64_t Ms(const YAML::Node& n) {
  if (!n) return 0;
  auto v = ParseDurationMs(n.as<std::string>());
  if (!v) throw std::runtime_error("bad duration " + n.as<std::string>());
  return *v;
}

std::uint64_t Bytes(const YAML::Node& n, std::uint64_t dflt) {
  if (!n) return dflt;
  auto v = ParseBytes(n.as<std::string>());
  if (!v) throw std::runtime_error("bad size " + n.as<std::string>());
  return *v;
}

model::Priority Prio(const YAML::Node& n) {
  if (!n) return model::Priority::kNormal;
  auto p = model::ParsePriority(n.as<std::string>());
  if (!p) throw std::runtime_error("bad priority " + n.as<std::string>());
  return *p;
}

std::map<std::string, std::string> StrMap(const YAML::Node& n) {
  std::map<std::string, std::string> out;
  if (n) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      out[it->first.as<std::string>()] = it->second.as<std::string>();
    }
  }
  return out;
}

void AddNodes(const YAML::Node& n, Snapshot& s) {
  int count = n["count"] ? n["count"].as<int>() : 1;
  for (int c = 0; c < count; ++c) {
    NodeView v;
    v.name = n["name"].as<std::string>();
    if (n["count"]) v.name += "-" + std::to_string(c);
    v.ready = n["ready"] ? n["ready"].as<bool>() : true;
    v.labels = StrMap(n["labels"]);
    // `container_runtime: podman`: its agent found podman (none when absent).
    v.container_runtime = n["container_runtime"].as<std::string>("") == "podman";
    if (auto t = n["taints"]) {
      for (const auto& x : t) {
        v.taints.push_back({x["key"].as<std::string>(), x["value"].as<std::string>(""),
                            x["effect"].as<std::string>("NoSchedule")});
      }
    }
    v.cpu_millis_free = (n["cpu"] ? n["cpu"].as<std::uint64_t>() : 64) * 1000;
    v.memory_bytes_free = Bytes(n["memory"], 512ULL << 30);
    auto gpus = n["gpus"] ? n["gpus"].as<std::uint32_t>() : 8;
    auto islands = n["islands"] ? n["islands"].as<std::uint32_t>() : 1;
    std::set<std::uint32_t> unhealthy;
    if (auto u = n["unhealthy"]) {
      for (const auto& x : u) unhealthy.insert(x.as<std::uint32_t>());
    }
    // shared_gpus: all | [indices]: the GPUs in sharing mode.
    std::set<std::uint32_t> shared;
    if (auto sh = n["shared_gpus"]) {
      if (sh.IsScalar()) {
        if (sh.as<std::string>() != "all") throw std::runtime_error("bad shared_gpus");
        for (std::uint32_t i = 0; i < gpus; ++i) shared.insert(i);
      } else {
        for (const auto& x : sh) shared.insert(x.as<std::uint32_t>());
      }
    }
    for (std::uint32_t i = 0; i < gpus; ++i) {
      GpuView g;
      g.sharing = shared.contains(i);
      g.index = i;
      g.uuid = v.name + "-" + std::to_string(i);
      g.model = n["model"].as<std::string>("H100-80GB");
      g.memory_bytes = Bytes(n["gpu_memory"], 80ULL << 30);
      g.healthy = !unhealthy.contains(i);
      g.nvlink_island = i / std::max<std::uint32_t>(1, gpus / islands);
      v.gpus.push_back(g);
    }
    s.nodes.push_back(std::move(v));
  }
}

model::Resources Res(const YAML::Node& n) {
  model::Resources r;
  r.gpus = n["gpus"].as<std::uint32_t>(0);
  r.gpu_model = n["gpu_model"].as<std::string>("");
  r.gpu_memory_bytes = Bytes(n["gpu_memory"], 0);
  r.cpu_millis = n["cpu"].as<std::uint32_t>(0) * 1000;
  r.memory_bytes = Bytes(n["memory"], 0);
  if (auto sh = n["gpu_share"]) {  // "0.25" (a share) or "20Gi" (memory)
    auto text = sh.as<std::string>();
    if (text.starts_with("0.")) {
      std::string digits = (text.substr(2) + "000").substr(0, 3);
      r.gpu_share_millis = static_cast<std::uint32_t>(std::stoul(digits));
    } else {
      r.gpu_share_bytes = Bytes(sh, 0);
    }
  }
  return r;
}

// `predicted: {runtime: 2h, basis: tenant+shape, samples: 5}`: a run-time
// prediction as berthd's snapshot builder gives it (none when absent).
RuntimePrediction Predicted(const YAML::Node& n) {
  RuntimePrediction p;
  if (!n) return p;
  p.runtime_ms = Ms(n["runtime"]);
  const auto basis = n["basis"].as<std::string>("shape");
  for (auto b : {RuntimeBasis::kUserName, RuntimeBasis::kUserShape, RuntimeBasis::kTenantShape,
                 RuntimeBasis::kShape}) {
    if (RuntimeBasisName(b) == basis) p.basis = b;
  }
  p.samples = n["samples"].as<std::int32_t>(1);
  return p;
}

void AddRunning(const YAML::Node& n, Snapshot& s) {
  RunningJob r;
  r.id = n["id"].as<std::int64_t>();
  r.tenant = n["tenant"].as<std::string>("default");
  r.queue = n["queue"].as<std::string>("default");
  r.priority = Prio(n["priority"]);
  if (n["preemptible"]) r.preemptible = n["preemptible"].as<bool>();
  r.started_at_ms = Ms(n["started"]);
  r.last_checkpoint_ms = Ms(n["checkpoint"]);
  r.resources = Res(n);
  r.max_runtime_ms = Ms(n["max_runtime"]);
  r.predicted = Predicted(n["predicted"]);
  r.checkpoints = n["checkpoints"].as<bool>(false);
  r.image = n["image"].as<std::string>("");
  std::uint32_t replica = 0;
  for (const auto& p : n["placement"]) {
    ReplicaPlacement rp{replica++, p["node"].as<std::string>(), {}};
    for (const auto& g : p["gpus"]) rp.gpu_indices.push_back(g.as<std::uint32_t>());
    HoldGpus(s.nodes, r.resources, {rp}, true);
    for (auto& node : s.nodes) {
      if (node.name != rp.node) continue;
      node.cpu_millis_free -= r.resources.cpu_millis;
      node.memory_bytes_free -= r.resources.memory_bytes;
    }
    r.replicas.push_back(std::move(rp));
  }
  s.running.push_back(std::move(r));
}

void AddPending(const YAML::Node& n, Snapshot& s) {
  PendingJob j;
  j.id = n["id"].as<std::int64_t>();
  j.tenant = n["tenant"].as<std::string>("default");
  j.queue = n["queue"].as<std::string>("default");
  j.priority = Prio(n["priority"]);
  j.submitted_at_ms = n["submitted"] ? Ms(n["submitted"]) : j.id;
  j.replicas = n["replicas"].as<std::uint32_t>(1);
  j.resources = Res(n);
  if (n["preemptible"]) j.preemptible = n["preemptible"].as<bool>();
  j.node_selector = StrMap(n["node_selector"]);
  if (auto t = n["tolerations"]) {
    for (const auto& x : t) {
      j.tolerations.push_back({x["key"].as<std::string>(), x["value"].as<std::string>(""),
                               x["effect"].as<std::string>("")});
    }
  }
  j.pool = n["pool"].as<std::string>("");
  j.image = n["image"].as<std::string>("");
  j.max_runtime_ms = Ms(n["max_runtime"]);
  j.predicted = Predicted(n["predicted"]);
  j.reclaim_since_ms = Ms(n["reclaim_since"]);
  if (auto t = n["topology"]) {
    j.topology.one_node = t["one_node"].as<bool>(false);
    auto island = t["nvlink_island"].as<std::string>("none");
    j.topology.nvlink_island = island == "require"  ? model::NvlinkIsland::kRequire
                               : island == "prefer" ? model::NvlinkIsland::kPrefer
                                                    : model::NvlinkIsland::kNone;
  }
  s.pending.push_back(std::move(j));
}

void RunScenario(const fs::path& file) {
  SCOPED_TRACE(file.filename().string());
  YAML::Node doc = YAML::LoadFile(file.string());
  ASSERT_TRUE(doc.IsMap());
  ASSERT_EQ(doc.begin()->first.as<std::string>(), "intent") << "a scenario opens with its intent";
  ASSERT_FALSE(doc["intent"].as<std::string>().empty());

  Snapshot s;
  s.now_ms = Ms(doc["now"]);
  if (auto p = doc["policy"]) {
    YAML::Emitter out;
    out << p;
    auto policy = model::ParsePolicy(out.c_str());
    ASSERT_TRUE(policy.has_value()) << policy.error().field << ": " << policy.error().message;
    s.policy = *policy;
  }
  for (const auto& n : doc["nodes"]) AddNodes(n, s);
  for (const auto& n : doc["running"]) AddRunning(n, s);
  for (const auto& n : doc["pending"]) AddPending(n, s);
  const YAML::Node usage_node = doc["usage"];  // iterators must not outlive the node
  for (auto it = usage_node.begin(); it != usage_node.end(); ++it) {
    s.decayed_usage[it->first.as<std::string>()] = it->second.as<std::int64_t>();
  }

  Plan plan = CoreScheduler().Schedule(s);
  EXPECT_EQ(CheckPlan(s, plan), "");
  Plan again = CoreScheduler().Schedule(s);
  EXPECT_EQ(plan.placements.size(), again.placements.size()) << "deterministic";
  // Every "would run now if" the core gives holds when the cycle runs again
  // with that change (sched/hints.h), as berthd checks before showing it.
  {
    const HintCheck hints = VerifyHints(CoreScheduler(), s, plan, plan.pending.size());
    EXPECT_EQ(hints.refuted, 0U) << "a hint the cycle does not bear out";
    EXPECT_EQ(hints.verified, hints.found);
  }

  const YAML::Node expect = doc["expect"];
  ASSERT_TRUE(expect.IsMap()) << "a scenario says what it expects";
  std::map<std::int64_t, const Placement*> placed;
  std::map<std::int64_t, const Placement*> moved;
  for (const auto& p : plan.placements) (p.moved ? moved : placed)[p.job_id] = &p;
  std::map<std::int64_t, const PendingDecision*> waiting;
  for (const auto& d : plan.pending) waiting[d.job_id] = &d;

  if (auto e = expect["placed"]) {
    std::set<std::int64_t> want;
    for (auto it = e.begin(); it != e.end(); ++it) {
      auto id = it->first.as<std::int64_t>();
      want.insert(id);
      ASSERT_TRUE(placed.contains(id))
          << "job " << id << " should be placed: "
          << (waiting.contains(id) ? model::RenderReason(waiting[id]->reason) : "");
      if (it->second.IsSequence()) {
        std::vector<std::string> nodes;
        for (const auto& rp : placed[id]->replicas) nodes.push_back(rp.node);
        EXPECT_EQ(nodes, it->second.as<std::vector<std::string>>()) << "job " << id;
      }
    }
    for (const auto& [id, p] : placed) EXPECT_TRUE(want.contains(id)) << "job " << id << " placed";
  }
  // {job: head} or {job: {head: id, causes: {cause: nodes}}}: the job ran
  // ahead of that waiting head (Placement::ahead_of); with `ahead` present,
  // no other placement did.
  if (const YAML::Node e = expect["ahead"]) {
    std::set<std::int64_t> want;
    for (auto it = e.begin(); it != e.end(); ++it) {
      auto id = it->first.as<std::int64_t>();
      want.insert(id);
      ASSERT_TRUE(placed.contains(id)) << "job " << id << " should be placed ahead";
      ASSERT_TRUE(placed[id]->ahead_of.has_value()) << "job " << id << " ran ahead";
      const auto& got = *placed[id]->ahead_of;
      EXPECT_FALSE(got.causes.empty()) << "job " << id;
      if (it->second.IsScalar()) {
        EXPECT_EQ(got.head_job, it->second.as<std::int64_t>()) << "job " << id;
        continue;
      }
      // {head: id, causes: {cause: nodes}}
      EXPECT_EQ(got.head_job, it->second["head"].as<std::int64_t>()) << "job " << id;
      if (const YAML::Node causes = it->second["causes"]) {
        std::map<std::string, std::int64_t, std::less<>> want_causes;
        for (auto c = causes.begin(); c != causes.end(); ++c) {
          want_causes[c->first.as<std::string>()] = c->second.as<std::int64_t>();
        }
        EXPECT_EQ(got.causes, want_causes) << "job " << id;
      }
    }
    for (const auto& [id, p] : placed) {
      EXPECT_TRUE(want.contains(id) || !p->ahead_of) << "job " << id << " ran ahead";
    }
  }
  if (auto e = expect["moved"]) {  // {job: [node of replica 0, ...]}
    std::set<std::int64_t> want;
    for (auto it = e.begin(); it != e.end(); ++it) {
      auto id = it->first.as<std::int64_t>();
      want.insert(id);
      ASSERT_TRUE(moved.contains(id)) << "job " << id << " should be moved";
      std::vector<std::string> nodes;
      for (const auto& rp : moved[id]->replicas) nodes.push_back(rp.node);
      EXPECT_EQ(nodes, it->second.as<std::vector<std::string>>()) << "job " << id;
    }
    for (const auto& [id, p] : moved) EXPECT_TRUE(want.contains(id)) << "job " << id << " moved";
  }
  if (expect["placed"] || expect["moved"] || expect["no_moves"]) {
    for (const auto& [id, p] : moved) {
      EXPECT_TRUE(expect["moved"] && expect["moved"][id]) << "job " << id << " moved";
    }
  }
  if (auto e = expect["gpus"]) {  // {job: [[indices of replica 0], ...]}
    for (auto it = e.begin(); it != e.end(); ++it) {
      auto id = it->first.as<std::int64_t>();
      ASSERT_TRUE(placed.contains(id));
      std::vector<std::vector<std::uint32_t>> got;
      for (const auto& rp : placed[id]->replicas) got.push_back(rp.gpu_indices);
      EXPECT_EQ(got, it->second.as<std::vector<std::vector<std::uint32_t>>>()) << "job " << id;
    }
  }
  std::set<std::int64_t> want_evicted;
  for (const auto& e : expect["evictions"]) {
    auto id = e["job"].as<std::int64_t>();
    want_evicted.insert(id);
    auto it = std::find_if(plan.evictions.begin(), plan.evictions.end(),
                           [&](const Eviction& v) { return v.job_id == id; });
    ASSERT_NE(it, plan.evictions.end()) << "job " << id << " should be evicted";
    if (e["by"]) {
      EXPECT_EQ(it->by_job, e["by"].as<std::int64_t>());
    }
    if (e["by_queue"]) {
      EXPECT_EQ(it->by_queue, e["by_queue"].as<std::string>());
    }
    if (e["cause"]) {
      EXPECT_EQ(EvictionCauseName(it->cause), e["cause"].as<std::string>());
    }
    if (e["work_lost"]) {
      EXPECT_EQ(it->work_lost_ms, Ms(e["work_lost"]));
    }
    EXPECT_NE(model::RenderReason(it->reason).find(it->by_queue), std::string::npos);
  }
  if (expect["evictions"] || expect["no_evictions"]) {
    for (const auto& v : plan.evictions) {
      EXPECT_TRUE(want_evicted.contains(v.job_id)) << "job " << v.job_id << " evicted";
    }
  }
  const YAML::Node reasons_node = expect["reasons"];  // iterators must not outlive the node
  for (auto it = reasons_node.begin(); it != reasons_node.end(); ++it) {
    auto id = it->first.as<std::int64_t>();
    ASSERT_TRUE(waiting.contains(id)) << "job " << id << " should be waiting";
    EXPECT_EQ(model::ReasonCodeName(waiting[id]->reason.code), it->second.as<std::string>())
        << "job " << id << ": " << model::RenderReason(waiting[id]->reason);
  }
  const YAML::Node counts_node = expect["counts"];  // iterators must not outlive the node
  for (auto it = counts_node.begin(); it != counts_node.end(); ++it) {
    auto id = it->first.as<std::int64_t>();
    ASSERT_TRUE(waiting.contains(id));
    const auto& counts = waiting[id]->reason.counts;
    const YAML::Node want = it->second;
    for (auto c = want.begin(); c != want.end(); ++c) {
      auto key = c->first.as<std::string>();
      ASSERT_TRUE(counts.contains(key)) << "job " << id << " reason lacks " << key << ": "
                                        << model::RenderReason(waiting[id]->reason);
      EXPECT_EQ(counts.at(key), c->second.as<std::int64_t>()) << "job " << id << " " << key;
    }
  }
  for (auto lang : {model::Lang::kEn, model::Lang::kZh}) {
    // iterators must not outlive the node
    const YAML::Node message_node = expect[lang == model::Lang::kEn ? "message" : "message_zh"];
    for (auto it = message_node.begin(); it != message_node.end(); ++it) {
      auto id = it->first.as<std::int64_t>();
      ASSERT_TRUE(waiting.contains(id));
      auto text = model::RenderReason(waiting[id]->reason, lang);
      const YAML::Node parts = it->second;
      for (const auto& part : parts) {
        EXPECT_NE(text.find(part.as<std::string>()), std::string::npos)
            << "job " << id << ": '" << text << "' lacks '" << part.as<std::string>() << "'";
      }
    }
  }
  // {job: [text, ...]}: the node layer `berth why` adds for a waiting job
  // held by something other than the nodes (sched/layers.h, rendered as the
  // API does) has each of these.
  for (auto lang : {model::Lang::kEn, model::Lang::kZh}) {
    const YAML::Node layer_node = expect[lang == model::Lang::kEn ? "node_layer" : "node_layer_zh"];
    for (auto it = layer_node.begin(); it != layer_node.end(); ++it) {
      auto id = it->first.as<std::int64_t>();
      const auto job = std::find_if(s.pending.begin(), s.pending.end(),
                                    [id](const PendingJob& p) { return p.id == id; });
      ASSERT_NE(job, s.pending.end()) << "job " << id << " should be pending";
      const NodeLayer layer = NodeLayerOf(s.nodes, s.policy, *job);
      const std::string text =
          model::RenderNodeLayer(layer.nodes, layer.could_take, layer.excluded, layer.alone, lang);
      const YAML::Node parts = it->second;  // a copy: it->second dies with the iterator's proxy
      for (const auto& part : parts) {
        EXPECT_NE(text.find(part.as<std::string>()), std::string::npos)
            << "job " << id << ": '" << text << "' lacks '" << part.as<std::string>() << "'";
      }
    }
  }
  // {job: [text, ...]}: none of these appears in the English message (a
  // hint that must not be given).
  const YAML::Node absent_node = expect["no_message"];
  for (auto it = absent_node.begin(); it != absent_node.end(); ++it) {
    auto id = it->first.as<std::int64_t>();
    ASSERT_TRUE(waiting.contains(id));
    auto text = model::RenderReason(waiting[id]->reason, model::Lang::kEn);
    const YAML::Node parts = it->second;  // a copy: it->second dies with the iterator's proxy
    for (const auto& part : parts) {
      EXPECT_EQ(text.find(part.as<std::string>()), std::string::npos)
          << "job " << id << ": '" << text << "' has '" << part.as<std::string>() << "'";
    }
  }
  // {job: {start: duration, nodes: [node of replica 0, ...]}}; with
  // `reservations` present, no other job holds one.
  if (const YAML::Node want = expect["reservations"]) {
    std::map<std::int64_t, const Reservation*> got;
    for (const auto& r : plan.reservations) got[r.job_id] = &r;
    for (auto it = want.begin(); it != want.end(); ++it) {
      auto id = it->first.as<std::int64_t>();
      ASSERT_TRUE(got.contains(id)) << "job " << id << " should hold a reservation";
      if (it->second["start"]) {
        EXPECT_EQ(got[id]->start_ms, Ms(it->second["start"])) << "job " << id;
      }
      if (it->second["nodes"]) {
        std::vector<std::string> nodes;
        for (const auto& rp : got[id]->replicas) nodes.push_back(rp.node);
        EXPECT_EQ(nodes, it->second["nodes"].as<std::vector<std::string>>()) << "job " << id;
      }
      got.erase(id);
    }
    for (const auto& [id, r] : got) ADD_FAILURE() << "job " << id << " holds a reservation";
  }
}

std::vector<fs::path> Scenarios() {
  const char* root = std::getenv("BERTH_SOURCE_DIR");
  if (root == nullptr || *root == '\0') root = BERTH_SOURCE_DIR_DEFAULT;
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(root) / "tests" / "scenarios")) {
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Scenarios, EveryFilePasses) {
  auto files = Scenarios();
  ASSERT_GE(files.size(), 7U) << "BERTH_SOURCE_DIR must point at the source tree";
  for (const auto& f : files) {
    try {
      RunScenario(f);
    } catch (const std::exception& e) {
      ADD_FAILURE() << f.filename() << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace berth::sched
