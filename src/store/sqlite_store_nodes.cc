// SqliteStore's nodes: registration, readiness, cordons and GPU health
// (store.h's NodeStore).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/units.h"
#include "model/json.h"
#include "model/node.h"
#include "store/audit_chain.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_store.h"

namespace berth::store {

using nlohmann::json;

Status SqliteStore::UpsertNode(const model::NodeInfo& info, TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto st = db_.Prepare(
      "INSERT INTO nodes(name, info, state, registered_ms, state_changed_ms) "
      "VALUES(?1, ?2, 'Ready', ?3, ?3) ON CONFLICT(name) DO UPDATE SET info=?2, "
      "state_changed_ms=CASE WHEN nodes.state='Ready' THEN nodes.state_changed_ms ELSE ?3 END, "
      "state='Ready'");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(
      st->Bind(1, info.name).Bind(2, model::ToJson(info).dump()).Bind(3, now).Run());
  auto ev = db_.Prepare("INSERT INTO node_events(node, time_ms, event, message) VALUES(?,?,?,?)");
  if (!ev) return std::unexpected(ev.error());
  BERTH_RETURN_IF_ERROR(
      ev->Bind(1, info.name)
          .Bind(2, now)
          .Bind(3, "Registered")
          .Bind(4, fmt::format("{} GPUs via {}", info.gpus.size(), info.gpu_provider))
          .Run());
  return tx.Commit();
}

Status SqliteStore::SetNodeState(const std::string& name, model::NodeState state, TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto known = db_.Prepare("SELECT 1 FROM nodes WHERE name=?");
  if (!known) return std::unexpected(known.error());
  auto found = known->Bind(1, name).Step();
  if (!found) return std::unexpected(found.error());
  if (!*found) return Fail(Code::kNotFound, fmt::format("node {} not found", name));
  auto st = db_.Prepare("UPDATE nodes SET state=?, state_changed_ms=? WHERE name=? AND state<>?");
  if (!st) return std::unexpected(st.error());
  auto s = model::NodeStateName(state);
  BERTH_RETURN_IF_ERROR(st->Bind(1, s).Bind(2, now).Bind(3, name).Bind(4, s).Run());
  auto ev = db_.Prepare("INSERT INTO node_events(node, time_ms, event, message) VALUES(?,?,?,?)");
  if (!ev) return std::unexpected(ev.error());
  BERTH_RETURN_IF_ERROR(ev->Bind(1, name).Bind(2, now).Bind(3, s).Bind(4, "").Run());
  return tx.Commit();
}

Result<std::vector<NodeRecord>> SqliteStore::ListNodes() {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare("SELECT info, state, state_changed_ms FROM nodes ORDER BY name");
  if (!st) return std::unexpected(st.error());
  std::vector<NodeRecord> out;
  std::map<std::string, std::size_t> index;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    NodeRecord n;
    n.info = model::NodeInfoFromJson(json::parse(st->Text(0)));
    n.state = st->Text(1) == "Ready" ? model::NodeState::kReady : model::NodeState::kNotReady;
    n.state_changed_ms = st->Int(2);
    index[n.info.name] = out.size();
    out.push_back(std::move(n));
  }
  auto c = db_.Prepare("SELECT node, gpu, kind, reason, by, automatic, at_ms FROM cordons");
  if (!c) return std::unexpected(c.error());
  for (;;) {
    auto row = c->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    auto it = index.find(c->Text(0));
    if (it == index.end()) continue;
    // A kind a newer Berth wrote reads as a cordon (model::ParseCordonKind).
    Cordon cordon{model::ParseCordonKind(c->Text(2)).value_or(model::CordonKind::kCordon),
                  c->Text(3), c->Text(4), c->Int(5) != 0, c->Int(6)};
    if (c->Int(1) < 0) {
      out[it->second].cordon = std::move(cordon);
    } else {
      out[it->second].gpu_cordons[static_cast<std::uint32_t>(c->Int(1))] = std::move(cordon);
    }
  }
  return out;
}

Status SqliteStore::AddNodeEvent(const std::string& node, TimeMs t, std::string_view event,
                                 const std::string& message) {
  auto ev = db_.Prepare("INSERT INTO node_events(node, time_ms, event, message) VALUES(?,?,?,?)");
  if (!ev) return std::unexpected(ev.error());
  return ev->Bind(1, node).Bind(2, t).Bind(3, std::string(event)).Bind(4, message).Run();
}

Result<std::vector<NodeEvent>> SqliteStore::NodeEvents(const std::string& node, std::size_t limit) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(
      "SELECT time_ms, event, message FROM (SELECT id, time_ms, event, message FROM node_events "
      "WHERE node=? ORDER BY id DESC LIMIT ?) AS newest ORDER BY id");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, node).Bind(2, static_cast<std::int64_t>(limit));
  std::vector<NodeEvent> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    out.push_back({st->Int(0), st->Text(1), st->Text(2)});
  }
  return out;
}

Result<model::NodeInfo> SqliteStore::LoadNodeInfo(const std::string& node) {
  auto st = db_.Prepare("SELECT info FROM nodes WHERE name=?");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, node);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) {
    return Fail(Code::kNotFound,
                fmt::format("node '{}' is not known; `berth nodes` lists the nodes", node));
  }
  return model::NodeInfoFromJson(json::parse(st->Text(0)));
}

namespace {

Status CheckGpu(const model::NodeInfo& info, std::uint32_t gpu) {
  for (const auto& g : info.gpus) {
    if (g.index == gpu) return Ok();
  }
  return Fail(Code::kNotFound, fmt::format("node {} has no GPU {}; it has GPUs 0 to {}", info.name,
                                           gpu, info.gpus.empty() ? 0 : info.gpus.size() - 1));
}

std::string Target(const std::string& node, std::optional<std::uint32_t> gpu) {
  return gpu ? fmt::format("GPU {} of node {}", *gpu, node) : fmt::format("node {}", node);
}

}  // namespace

Status SqliteStore::SetCordon(const std::string& node, std::optional<std::uint32_t> gpu,
                              const Cordon& cordon, TimeMs now, const AuditOf<>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto info = LoadNodeInfo(node);
  if (!info) return std::unexpected(info.error());
  if (gpu) BERTH_RETURN_IF_ERROR(CheckGpu(*info, *gpu));
  auto st = db_.Prepare(
      "INSERT INTO cordons(node, gpu, kind, reason, by, automatic, at_ms) VALUES(?,?,?,?,?,?,?) "
      "ON CONFLICT(node, gpu) DO UPDATE SET kind = excluded.kind, reason = excluded.reason, "
      "by = excluded.by, automatic = excluded.automatic, at_ms = excluded.at_ms");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, node)
                            .Bind(2, gpu ? std::int64_t{*gpu} : std::int64_t{-1})
                            .Bind(3, model::CordonKindName(cordon.kind))
                            .Bind(4, cordon.reason)
                            .Bind(5, cordon.by)
                            .Bind(6, std::int64_t{cordon.automatic ? 1 : 0})
                            .Bind(7, now)
                            .Run());
  const bool drain = cordon.kind == model::CordonKind::kDrain;
  const std::string event = gpu ? "GpuCordoned" : drain ? "Draining" : "Cordoned";
  BERTH_RETURN_IF_ERROR(
      AddNodeEvent(node, now, event,
                   fmt::format("{} {} by {}{}{}", Target(node, gpu), drain ? "drained" : "cordoned",
                               cordon.by, cordon.automatic ? " (automatically)" : "",
                               cordon.reason.empty() ? "" : ": " + cordon.reason)));
  return CommitAudited(tx, db_, audit_head_, audit);
}

Result<bool> SqliteStore::Uncordon(const std::string& node, std::optional<std::uint32_t> gpu,
                                   const std::string& by, TimeMs now, const AuditOf<>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto info = LoadNodeInfo(node);
  if (!info) return std::unexpected(info.error());
  if (gpu) BERTH_RETURN_IF_ERROR(CheckGpu(*info, *gpu));
  auto st = db_.Prepare("DELETE FROM cordons WHERE node=? AND gpu=?");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(
      st->Bind(1, node).Bind(2, gpu ? std::int64_t{*gpu} : std::int64_t{-1}).Run());
  const bool had = db_.Changes() > 0;
  if (had) {
    BERTH_RETURN_IF_ERROR(AddNodeEvent(node, now, gpu ? "GpuUncordoned" : "Uncordoned",
                                       fmt::format("{} uncordoned by {}", Target(node, gpu), by)));
  }
  if (gpu) {
    // Its hardware alerts are resolved, and their sinks told so.
    auto open = db_.Prepare("SELECT id FROM alerts WHERE node=? AND gpu=? AND resolved_ms IS NULL");
    if (!open) return std::unexpected(open.error());
    open->Bind(1, node).Bind(2, std::int64_t{*gpu});
    std::vector<std::int64_t> ids;
    for (;;) {
      auto row = open->Step();
      if (!row) return std::unexpected(row.error());
      if (!*row) break;
      ids.push_back(open->Int(0));
    }
    BERTH_RETURN_IF_ERROR(ResolveAlertsLocked(ids, by, now));
  }
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit));
  return had;
}

Status SqliteStore::SetGpuHealth(const std::string& node, std::uint32_t gpu, bool healthy,
                                 const std::string& detail, TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto info = LoadNodeInfo(node);
  if (!info) return std::unexpected(info.error());
  BERTH_RETURN_IF_ERROR(CheckGpu(*info, gpu));
  for (auto& g : info->gpus) {
    if (g.index != gpu) continue;
    g.health = healthy ? model::Health::kHealthy : model::Health::kUnhealthy;
    g.health_detail = healthy ? std::string() : detail;
  }
  auto st = db_.Prepare("UPDATE nodes SET info=? WHERE name=?");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, model::ToJson(*info).dump()).Bind(2, node).Run());
  BERTH_RETURN_IF_ERROR(
      AddNodeEvent(node, now, healthy ? "GpuHealthy" : "GpuUnhealthy",
                   healthy ? fmt::format("GPU {} reports healthy again", gpu)
                           : fmt::format("GPU {} reports unhealthy: {}", gpu, detail)));
  return tx.Commit();
}

Result<bool> SqliteStore::SetContainerRuntime(const std::string& node, const std::string& runtime,
                                              TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto info = LoadNodeInfo(node);
  if (!info) return std::unexpected(info.error());
  if (info->container_runtime == runtime) return false;
  const std::string before = info->container_runtime;
  info->container_runtime = runtime;
  auto st = db_.Prepare("UPDATE nodes SET info=? WHERE name=?");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, model::ToJson(*info).dump()).Bind(2, node).Run());
  BERTH_RETURN_IF_ERROR(AddNodeEvent(
      node, now, "ContainerRuntimeChanged",
      runtime.empty() ? fmt::format("{} is no longer on the agent's search path: no container "
                                    "runtime, jobs with an image are not placed here",
                                    before)
                      : fmt::format("the agent found {} on its search path: jobs with an image "
                                    "may be placed here",
                                    runtime)));
  BERTH_RETURN_IF_ERROR(tx.Commit());
  return true;
}

}  // namespace berth::store

namespace berth::store {

namespace {

// The revocation time of `node`'s certificates, read inside a transaction.
Result<std::optional<TimeMs>> RevokedAtLocked(Database& db, const std::string& node) {
  auto st = db.Prepare("SELECT revoked_ms FROM node_revocations WHERE node=?");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, node);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<TimeMs>();
  return std::optional<TimeMs>(st->Int(0));
}

}  // namespace

Status SqliteStore::RemoveNode(const std::string& node, const std::string& by, TimeMs now,
                               const AuditOf<>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto info = LoadNodeInfo(node);
  if (!info) return std::unexpected(info.error());
  // Checked in the removal's own transaction: a pass that placed work there
  // a moment ago is seen.
  auto runs = db_.Prepare(
      "SELECT run_id, job_id FROM runs WHERE node=? AND state IN ('Starting','Running') "
      "ORDER BY job_id, run_id");
  if (!runs) return std::unexpected(runs.error());
  runs->Bind(1, node);
  std::vector<std::string> active;
  for (;;) {
    auto row = runs->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    active.push_back(fmt::format("{} (job {})", runs->Text(0), runs->Int(1)));
  }
  if (!active.empty()) {
    std::string list;
    for (const auto& a : active) list += (list.empty() ? "" : ", ") + a;
    return Fail(Code::kFailedPrecondition,
                fmt::format("node {} still has {} active run(s): {}. Drain it first (`berth "
                            "drain {}` stops them and queues their jobs elsewhere; or `berth "
                            "cordon {}` and wait for them to finish, or cancel their jobs), then "
                            "remove it",
                            node, active.size(), list, node, node),
                "node");
  }
  for (const char* sql : {"DELETE FROM nodes WHERE name=?", "DELETE FROM cordons WHERE node=?"}) {
    auto del = db_.Prepare(sql);
    if (!del) return std::unexpected(del.error());
    BERTH_RETURN_IF_ERROR(del->Bind(1, node).Run());
  }
  auto rev = db_.Prepare(
      "INSERT INTO node_revocations(node, revoked_ms, by) VALUES(?1, ?2, ?3) "
      "ON CONFLICT(node) DO UPDATE SET revoked_ms = CASE WHEN node_revocations.revoked_ms > "
      "excluded.revoked_ms THEN node_revocations.revoked_ms ELSE excluded.revoked_ms END, "
      "by = excluded.by");
  if (!rev) return std::unexpected(rev.error());
  BERTH_RETURN_IF_ERROR(rev->Bind(1, node).Bind(2, now).Bind(3, by).Run());
  BERTH_RETURN_IF_ERROR(AddNodeEvent(
      node, now, "Removed",
      fmt::format("node {} removed by {}; its certificates issued until now are revoked", node,
                  by)));
  return CommitAudited(tx, db_, audit_head_, audit);
}

Result<std::optional<TimeMs>> SqliteStore::NodeRevokedAt(const std::string& node) {
  std::lock_guard lock(mu_);
  return RevokedAtLocked(db_, node);
}

Status SqliteStore::RecordNodeCertRenewal(const std::string& node, TimeMs presented_not_before_ms,
                                          TimeMs expires_ms, TimeMs now, const AuditOf<>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto info = LoadNodeInfo(node);
  if (!info) {
    if (info.error().code != Code::kNotFound) return std::unexpected(info.error());
    return Fail(Code::kPermissionDenied,
                fmt::format("node {} is not in the inventory (removed?); its certificate is not "
                            "renewed",
                            node));
  }
  auto revoked = RevokedAtLocked(db_, node);
  if (!revoked) return std::unexpected(revoked.error());
  if (*revoked && model::NodeCertRevoked(presented_not_before_ms, **revoked)) {
    return Fail(Code::kPermissionDenied,
                fmt::format("the certificate of node {} was revoked when the node was removed at "
                            "{}; it is not renewed",
                            node, FormatTimeMs(**revoked)));
  }
  BERTH_RETURN_IF_ERROR(
      AddNodeEvent(node, now, "CertRenewed",
                   fmt::format("new node certificate, valid until {}", FormatTimeMs(expires_ms))));
  return CommitAudited(tx, db_, audit_head_, audit);
}

}  // namespace berth::store
