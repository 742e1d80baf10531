#include "store/meter_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "store/audit_chain.h"
#include "store/sqlite_scope.h"

namespace berth::store {
namespace {

using nlohmann::json;

constexpr std::string_view kMeterSchema = R"sql(
CREATE TABLE IF NOT EXISTS price_versions(
  version INTEGER PRIMARY KEY, yaml TEXT NOT NULL, applied_ms INTEGER NOT NULL,
  applied_by TEXT NOT NULL, comment TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS budgets(
  tenant TEXT PRIMARY KEY, mgpu_ms INTEGER, cost_micros INTEGER, alert_percents TEXT NOT NULL,
  enforce INTEGER NOT NULL, set_ms INTEGER NOT NULL, set_by TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS runs_by_started ON runs(started_ms);
)sql";

}  // namespace

Result<std::unique_ptr<MeterStore>> MeterStore::Open(const StoreLocation& where) {
  auto db = OpenStateDatabase(where);
  if (!db) return std::unexpected(db.error());
  // The runs index needs the runs table: a database the store made already.
  auto has_runs =
      db->Prepare(db->dialect() == Dialect::kPostgres
                      ? "SELECT 1 FROM information_schema.tables WHERE table_schema = "
                        "current_schema() AND table_name = 'runs'"
                      : "SELECT 1 FROM sqlite_master WHERE type='table' AND name='runs'");
  if (!has_runs) return std::unexpected(has_runs.error());
  auto row = has_runs->Step();
  if (!row) return std::unexpected(row.error());
  std::string schema(kMeterSchema);
  if (!*row) schema = schema.substr(0, schema.find("CREATE INDEX IF NOT EXISTS runs_by_started"));
  BERTH_RETURN_IF_ERROR(db->Exec(SchemaFor(db->dialect(), schema)));
  BERTH_RETURN_IF_ERROR(EnsureAuditSchema(*db));
  return std::unique_ptr<MeterStore>(new MeterStore(std::move(*db), where.audit_head()));
}

Result<std::int64_t> MeterStore::ApplyPrices(const std::string& yaml, const std::string& by,
                                             const std::string& comment, TimeMs now,
                                             std::optional<std::int64_t> base,
                                             const AuditOf<std::int64_t>& audit) {
  auto parsed = model::ParsePriceTable(yaml);
  if (!parsed) return std::unexpected(parsed.error());
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  std::int64_t version = 0;
  TimeMs last_applied = 0;
  {
    auto max = db_.Prepare(
        "SELECT COALESCE(MAX(version), 0), COALESCE(MAX(applied_ms), 0) FROM price_versions");
    if (!max) return std::unexpected(max.error());
    auto row = max->Step();
    if (!row) return std::unexpected(row.error());
    version = max->Int(0) + 1;
    last_applied = max->Int(1);
  }
  if (base && *base != version - 1) {
    auto who = db_.Prepare("SELECT applied_by FROM price_versions WHERE version=?");
    if (!who) return std::unexpected(who.error());
    who->Bind(1, version - 1);
    auto row = who->Step();
    if (!row) return std::unexpected(row.error());
    return Fail(
        Code::kFailedPrecondition,
        fmt::format("the price table changed since version {}: version {} was applied "
                    "by {}; see it with `berth price show`, then apply again with "
                    "--base {}",
                    *base, version - 1, *row ? who->Text(0) : std::string("nobody"), version - 1),
        "base_version");
  }
  // Versions take effect in order: a clock that stepped back still gives the
  // newest version the latest start.
  const TimeMs applied = std::max(now, last_applied);
  auto ins = db_.Prepare(
      "INSERT INTO price_versions(version, yaml, applied_ms, applied_by, comment) "
      "VALUES(?,?,?,?,?)");
  if (!ins) return std::unexpected(ins.error());
  BERTH_RETURN_IF_ERROR(
      ins->Bind(1, version).Bind(2, yaml).Bind(3, applied).Bind(4, by).Bind(5, comment).Run());
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, version));
  return version;
}

Result<std::vector<StoredPriceVersion>> MeterStore::PriceVersions() {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(
      "SELECT version, yaml, applied_ms, applied_by, comment FROM price_versions ORDER BY version");
  if (!st) return std::unexpected(st.error());
  std::vector<StoredPriceVersion> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    StoredPriceVersion v;
    v.price.version = st->Int(0);
    v.yaml = st->Text(1);
    v.price.applied_ms = st->Int(2);
    v.applied_by = st->Text(3);
    v.comment = st->Text(4);
    auto table = model::ParsePriceTable(v.yaml);
    if (!table) {
      return Fail(Code::kInternal, fmt::format("stored price version {} no longer parses: {}",
                                               v.price.version, table.error().message));
    }
    v.price.table = std::move(*table);
    out.push_back(std::move(v));
  }
  return out;
}

Result<std::vector<UsageRun>> MeterStore::UsageRuns(TimeMs from, TimeMs to,
                                                    const std::string& tenant,
                                                    const model::TenantScope& scope,
                                                    std::size_t max_rows) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(fmt::format(
      "SELECT r.run_id, r.job_id, r.replica, r.attempt, r.node, r.gpu_indices, r.gpu_uuids, "
      "r.gpu_share_millis, r.gpu_share_bytes, r.started_ms, r.finished_ms, r.stopped_for, "
      "r.failure_class, r.exit_code, r.signal, j.tenant, j.queue, j.submitted_by, "
      "COALESCE({}, ''), COALESCE(j.service, '') "
      "FROM runs r JOIN jobs j ON j.id = r.job_id "
      "WHERE r.started_ms IS NOT NULL AND r.started_ms < ?1 "
      "AND (r.finished_ms IS NULL OR r.finished_ms > ?2) AND (?3 = '' OR j.tenant = ?3){} "
      "ORDER BY r.started_ms, r.run_id LIMIT ?4",
      SqlJsonText(db_.dialect(), "j.spec", "pool"), ScopeSql(scope, "j.tenant", 5)));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, to).Bind(2, from).Bind(3, tenant);
  st->Bind(4, static_cast<std::int64_t>(
                  std::min<std::size_t>(max_rows, std::numeric_limits<std::int64_t>::max())));
  BindScope(*st, 5, scope);
  std::vector<UsageRun> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    UsageRun u;
    u.run_id = st->Text(0);
    u.job_id = st->Int(1);
    u.replica = static_cast<std::uint32_t>(st->Int(2));
    u.attempt = static_cast<std::uint32_t>(st->Int(3));
    u.node = st->Text(4);
    u.gpu_indices = json::parse(st->Text(5)).get<std::vector<std::uint32_t>>();
    u.gpu_uuids = json::parse(st->Text(6)).get<std::vector<std::string>>();
    u.gpu_share_millis = static_cast<std::uint32_t>(st->Int(7));
    u.gpu_share_bytes = static_cast<std::uint64_t>(st->Int(8));
    u.started_ms = st->Int(9);
    u.finished_ms = st->OptInt(10);
    u.stopped_for = model::ParseStopCause(st->Text(11)).value_or(model::StopCause::kUnknown);
    u.failure_class = st->Text(12);
    if (auto c = st->OptInt(13)) u.exit_code = static_cast<std::int32_t>(*c);
    if (auto s = st->OptInt(14)) u.signal = static_cast<std::int32_t>(*s);
    u.tenant = st->Text(15);
    u.queue = st->Text(16);
    u.user = st->Text(17);
    u.job_pool = st->Text(18);
    u.service = st->Text(19);
    out.push_back(std::move(u));
  }
  return out;
}

Status MeterStore::SetBudget(const model::Budget& b, const AuditOf<>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto st = db_.Prepare(
      "INSERT INTO budgets(tenant, mgpu_ms, cost_micros, alert_percents, enforce, set_ms, set_by) "
      "VALUES(?,?,?,?,?,?,?) ON CONFLICT(tenant) DO UPDATE SET mgpu_ms = excluded.mgpu_ms, "
      "cost_micros = excluded.cost_micros, alert_percents = excluded.alert_percents, "
      "enforce = excluded.enforce, set_ms = excluded.set_ms, set_by = excluded.set_by");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, b.tenant)
                            .Bind(2, b.mgpu_ms)
                            .Bind(3, b.cost_micros)
                            .Bind(4, json(b.alert_percents).dump())
                            .Bind(5, std::int64_t{b.enforce ? 1 : 0})
                            .Bind(6, b.set_ms)
                            .Bind(7, b.set_by)
                            .Run());
  return CommitAudited(tx, db_, audit_head_, audit);
}

Result<bool> MeterStore::DeleteBudget(const std::string& tenant, const AuditOf<>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto st = db_.Prepare("DELETE FROM budgets WHERE tenant = ?");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, tenant).Run());
  if (db_.Changes() == 0) return false;  // nothing removed, nothing to record
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit));
  return true;
}

Result<std::vector<model::Budget>> MeterStore::ListBudgets(const model::TenantScope& scope) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(fmt::format(
      "SELECT tenant, mgpu_ms, cost_micros, alert_percents, enforce, set_ms, set_by FROM budgets "
      "WHERE 1=1{} ORDER BY tenant",
      ScopeSql(scope, "tenant", 1)));
  if (!st) return std::unexpected(st.error());
  BindScope(*st, 1, scope);
  std::vector<model::Budget> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    model::Budget b;
    b.tenant = st->Text(0);
    b.mgpu_ms = st->OptInt(1);
    b.cost_micros = st->OptInt(2);
    b.alert_percents = json::parse(st->Text(3)).get<std::vector<std::int32_t>>();
    b.enforce = st->Int(4) != 0;
    b.set_ms = st->Int(5);
    b.set_by = st->Text(6);
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace berth::store
