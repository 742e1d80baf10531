// Inference services in the SQLite store: the services table (one row per
// service, its current revision) and service_revisions (the specs, the
// newest kServiceRevisionsKept per service). Each change writes the row,
// the revision and its audit record in one transaction; a refusal rolls
// all of it back.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "model/json.h"
#include "store/audit_chain.h"
#include "store/service_rules.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_scope.h"
#include "store/sqlite_store.h"

namespace berth::store {
namespace {

constexpr std::string_view kServiceColumns =
    "s.id, s.tenant, s.name, s.revision, s.created_ms, s.created_by, s.updated_ms, s.updated_by, "
    "r.spec";

// A stored spec reads back as it was applied; one that no longer parses
// (a later Berth narrowed a bound) is an internal error naming it.
Result<model::ServiceSpec> ReadSpec(const std::string& text, std::string_view what) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    return Fail(Code::kInternal, fmt::format("stored spec of {} is not JSON", what));
  }
  auto spec = model::ServiceSpecFromJson(j);
  if (!spec) {
    return Fail(Code::kInternal, fmt::format("stored spec of {} no longer parses ({}: {})", what,
                                             spec.error().field, spec.error().message));
  }
  return spec;
}

Result<ServiceRecord> ReadService(const Statement& st) {
  ServiceRecord s;
  s.id = st.Int(0);
  s.tenant = st.Text(1);
  s.name = st.Text(2);
  s.revision = st.Int(3);
  s.created_ms = st.Int(4);
  s.created_by = st.Text(5);
  s.updated_ms = st.Int(6);
  s.updated_by = st.Text(7);
  auto spec = ReadSpec(st.Text(8), ServiceObjectName(s.tenant, s.name));
  if (!spec) return std::unexpected(spec.error());
  s.spec = std::move(*spec);
  return s;
}

}  // namespace

Result<std::optional<ServiceRecord>> SqliteStore::LoadService(const std::string& tenant,
                                                              const std::string& name) {
  auto st = db_.Prepare(
      fmt::format("SELECT {} FROM services s JOIN service_revisions r ON r.service_id = s.id AND "
                  "r.revision = s.revision WHERE s.tenant = ? AND s.name = ?",
                  kServiceColumns));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, tenant).Bind(2, name);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<ServiceRecord>();
  auto s = ReadService(*st);
  if (!s) return std::unexpected(s.error());
  auto revs = db_.Prepare(
      "SELECT revision, spec, created_ms, created_by, change, restores FROM service_revisions "
      "WHERE service_id = ? ORDER BY revision DESC");
  if (!revs) return std::unexpected(revs.error());
  revs->Bind(1, s->id);
  for (;;) {
    auto r = revs->Step();
    if (!r) return std::unexpected(r.error());
    if (!*r) break;
    ServiceRevision rev;
    rev.revision = revs->Int(0);
    auto spec = ReadSpec(revs->Text(1), fmt::format("{} revision {}",
                                                    ServiceObjectName(tenant, name), rev.revision));
    if (!spec) return std::unexpected(spec.error());
    rev.spec = std::move(*spec);
    rev.created_ms = revs->Int(2);
    rev.created_by = revs->Text(3);
    rev.change = revs->Text(4);
    rev.restores = revs->OptInt(5);
    s->revisions.push_back(std::move(rev));
  }
  return std::optional<ServiceRecord>(std::move(*s));
}

Status SqliteStore::AddServiceRevision(ServiceRecord& s, const model::ServiceSpec& spec,
                                       const std::string& by, TimeMs now, std::string_view change,
                                       std::optional<std::int64_t> restores) {
  s.revision += 1;
  s.spec = spec;
  s.updated_ms = now;
  s.updated_by = by;
  auto ins = db_.Prepare(
      "INSERT INTO service_revisions(service_id, revision, spec, created_ms, created_by, change, "
      "restores) VALUES(?,?,?,?,?,?,?)");
  if (!ins) return std::unexpected(ins.error());
  BERTH_RETURN_IF_ERROR(ins->Bind(1, s.id)
                            .Bind(2, s.revision)
                            .Bind(3, model::ToJson(spec).dump())
                            .Bind(4, now)
                            .Bind(5, by)
                            .Bind(6, change)
                            .Bind(7, restores)
                            .Run());
  auto upd = db_.Prepare("UPDATE services SET revision=?, updated_ms=?, updated_by=? WHERE id=?");
  if (!upd) return std::unexpected(upd.error());
  BERTH_RETURN_IF_ERROR(upd->Bind(1, s.revision).Bind(2, now).Bind(3, by).Bind(4, s.id).Run());
  auto trim = db_.Prepare("DELETE FROM service_revisions WHERE service_id=? AND revision<=?");
  if (!trim) return std::unexpected(trim.error());
  BERTH_RETURN_IF_ERROR(trim->Bind(1, s.id)
                            .Bind(2, s.revision - static_cast<std::int64_t>(kServiceRevisionsKept))
                            .Run());
  s.revisions.insert(s.revisions.begin(),
                     ServiceRevision{s.revision, spec, now, by, std::string(change), restores});
  if (s.revisions.size() > kServiceRevisionsKept) s.revisions.resize(kServiceRevisionsKept);
  return Ok();
}

Result<ServiceApply> SqliteStore::ApplyService(const model::ServiceSpec& spec,
                                               const std::string& by, TimeMs now,
                                               std::size_t max_per_tenant,
                                               const ServiceAdmission& admit,
                                               const AuditOf<ServiceApply>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto current = LoadService(spec.tenant, spec.name);
  if (!current) return std::unexpected(current.error());
  if (*current && (*current)->spec == spec) {
    return ServiceApply{ServiceApplied::kUnchanged, std::move(**current)};
  }
  if (admit) BERTH_RETURN_IF_ERROR(admit(spec));
  ServiceApply out;
  if (!*current) {
    auto count = db_.Prepare("SELECT COUNT(*) FROM services WHERE tenant = ?");
    if (!count) return std::unexpected(count.error());
    count->Bind(1, spec.tenant);
    auto row = count->Step();
    if (!row) return std::unexpected(row.error());
    if (static_cast<std::size_t>(count->Int(0)) >= max_per_tenant) {
      return std::unexpected(TooManyServices(spec.tenant, max_per_tenant));
    }
    count->Reset();
    auto ins = db_.Prepare(
        "INSERT INTO services(tenant, name, revision, created_ms, created_by, updated_ms, "
        "updated_by) VALUES(?,?,0,?,?,?,?) RETURNING id");
    if (!ins) return std::unexpected(ins.error());
    ins->Bind(1, spec.tenant).Bind(2, spec.name).Bind(3, now).Bind(4, by).Bind(5, now).Bind(6, by);
    auto made = ins->Step();
    if (!made) return std::unexpected(made.error());
    ServiceRecord s;
    s.id = ins->Int(0);
    ins->Reset();
    s.tenant = spec.tenant;
    s.name = spec.name;
    s.created_ms = now;
    s.created_by = by;
    BERTH_RETURN_IF_ERROR(AddServiceRevision(s, spec, by, now, "apply", std::nullopt));
    out = ServiceApply{ServiceApplied::kCreated, std::move(s)};
  } else {
    ServiceRecord s = std::move(**current);
    BERTH_RETURN_IF_ERROR(AddServiceRevision(s, spec, by, now, "apply", std::nullopt));
    out = ServiceApply{ServiceApplied::kRevised, std::move(s)};
  }
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, out));
  return out;
}

Result<ServiceRecord> SqliteStore::GetService(const std::string& tenant, const std::string& name) {
  std::lock_guard lock(mu_);
  auto s = LoadService(tenant, name);
  if (!s) return std::unexpected(s.error());
  if (!*s) return std::unexpected(ServiceNotFound(tenant, name));
  return std::move(**s);
}

Result<std::vector<ServiceRecord>> SqliteStore::ListServices(const ServiceFilter& filter) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(fmt::format(
      "SELECT {} FROM services s JOIN service_revisions r ON r.service_id = s.id AND "
      "r.revision = s.revision WHERE (?1 = '' OR s.tenant = ?1) AND (?2 = 0 OR s.id < ?2) AND "
      "(?4 = '' OR coalesce({}, 'service') = ?4){} "
      "ORDER BY s.id DESC LIMIT ?3",
      kServiceColumns, SqlJsonText(db_.dialect(), "r.spec", "kind"),
      ScopeSql(filter.tenants, "s.tenant", 5)));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, filter.tenant).Bind(2, filter.before_id.value_or(0)).Bind(3, SqlLimit(filter.limit));
  st->Bind(4, filter.kind ? std::string(model::ServiceKindName(*filter.kind)) : std::string());
  BindScope(*st, 5, filter.tenants);
  std::vector<ServiceRecord> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) return out;
    auto s = ReadService(*st);
    if (!s) return std::unexpected(s.error());
    out.push_back(std::move(*s));
  }
}

Result<ServiceRecord> SqliteStore::LoadExistingService(const std::string& tenant,
                                                       const std::string& name) {
  auto s = LoadService(tenant, name);
  if (!s) return std::unexpected(s.error());
  if (!*s) return std::unexpected(ServiceNotFound(tenant, name));
  return std::move(**s);
}

Result<ServiceRecord> SqliteStore::ScaleService(
    const std::string& tenant, const std::string& name, model::ReplicaBounds bounds,
    const std::string& by, TimeMs now, const AuditOf<ServiceRecord, ServiceRecord>& audit) {
  BERTH_RETURN_IF_ERROR(CheckScaleBounds(bounds));
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto current = LoadExistingService(tenant, name);
  if (!current) return std::unexpected(current.error());
  if (current->spec.kind == model::ServiceKind::kSession) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("{}/{} is a session: it runs one replica and is not scaled; stop it "
                            "with berth session stop",
                            tenant, name),
                "name");
  }
  if (current->spec.replicas == bounds) return std::move(*current);
  ServiceRecord s = *current;
  model::ServiceSpec spec = s.spec;
  spec.replicas = bounds;
  BERTH_RETURN_IF_ERROR(AddServiceRevision(s, spec, by, now, "scale", std::nullopt));
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, *current, s));
  return s;
}

Result<ServiceRecord> SqliteStore::RollbackService(
    const std::string& tenant, const std::string& name, const std::string& by, TimeMs now,
    const ServiceAdmission& admit, const AuditOf<ServiceRecord, ServiceRecord>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto current = LoadExistingService(tenant, name);
  if (!current) return std::unexpected(current.error());
  auto before = RevisionBefore(current->revisions, current->revision);
  if (!before) return std::unexpected(NoRevisionBefore(tenant, name, current->revision));
  if (admit) BERTH_RETURN_IF_ERROR(admit(before->spec));
  ServiceRecord s = *current;
  BERTH_RETURN_IF_ERROR(AddServiceRevision(s, before->spec, by, now, "rollback", before->revision));
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, *current, s));
  return s;
}

Result<ServiceRecord> SqliteStore::DeleteService(const std::string& tenant, const std::string& name,
                                                 const std::string& /*by*/, TimeMs /*now*/,
                                                 const AuditOf<ServiceRecord>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto current = LoadExistingService(tenant, name);
  if (!current) return std::unexpected(current.error());
  auto revs = db_.Prepare("DELETE FROM service_revisions WHERE service_id = ?");
  if (!revs) return std::unexpected(revs.error());
  BERTH_RETURN_IF_ERROR(revs->Bind(1, current->id).Run());
  auto rollout = db_.Prepare("DELETE FROM service_rollouts WHERE service_id = ?");
  if (!rollout) return std::unexpected(rollout.error());
  BERTH_RETURN_IF_ERROR(rollout->Bind(1, current->id).Run());
  auto del = db_.Prepare("DELETE FROM services WHERE id = ?");
  if (!del) return std::unexpected(del.error());
  BERTH_RETURN_IF_ERROR(del->Bind(1, current->id).Run());
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, *current));
  return std::move(*current);
}

Result<std::optional<RolloutProgress>> SqliteStore::LoadRolloutProgress(std::int64_t service_id) {
  auto st =
      db_.Prepare("SELECT revision, step, since_ms, by FROM service_rollouts WHERE service_id = ?");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, service_id);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<RolloutProgress>{};
  RolloutProgress p;
  p.revision = st->Int(0);
  p.step = static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(st->Int(1), 0, std::numeric_limits<std::uint32_t>::max()));
  p.since_ms = st->Int(2);
  p.by = st->Text(3);
  return std::optional<RolloutProgress>{std::move(p)};
}

Result<std::optional<RolloutProgress>> SqliteStore::GetRolloutProgress(const std::string& tenant,
                                                                       const std::string& name) {
  std::lock_guard lock(mu_);
  auto service = LoadExistingService(tenant, name);
  if (!service) return std::unexpected(service.error());
  return LoadRolloutProgress(service->id);
}

Result<RolloutProgress> SqliteStore::SetRolloutProgress(
    const std::string& tenant, const std::string& name,
    const std::optional<RolloutProgress>& expected, const RolloutProgress& next,
    const AuditOf<RolloutProgress>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto service = LoadExistingService(tenant, name);
  if (!service) return std::unexpected(service.error());
  auto now = LoadRolloutProgress(service->id);
  if (!now) return std::unexpected(now.error());
  if (*now != expected) return std::unexpected(RolloutMoved(tenant, name));
  auto put = db_.Prepare(
      "INSERT INTO service_rollouts(service_id, revision, step, since_ms, by) VALUES(?,?,?,?,?) "
      "ON CONFLICT(service_id) DO UPDATE SET revision = excluded.revision, step = excluded.step, "
      "since_ms = excluded.since_ms, by = excluded.by");
  if (!put) return std::unexpected(put.error());
  BERTH_RETURN_IF_ERROR(put->Bind(1, service->id)
                            .Bind(2, next.revision)
                            .Bind(3, static_cast<std::int64_t>(next.step))
                            .Bind(4, next.since_ms)
                            .Bind(5, next.by)
                            .Run());
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, next));
  return next;
}

}  // namespace berth::store
