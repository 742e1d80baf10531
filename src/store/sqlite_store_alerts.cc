// Alerts in the SQLite store: the one writer of the alerts table. An alert's
// rule, subject and sinks live in alert_keys (a table of their own, so a
// schema-5 database needs no migration); raising or resolving an alert and
// queueing its webhook deliveries (alert_deliveries, the outbox) happen in
// one transaction, so a crash can lose neither.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "model/alert_rules.h"
#include "store/audit_chain.h"
#include "store/sqlite_rows.h"
#include "store/sqlite_store.h"

namespace berth::store {
namespace {

using nlohmann::json;

constexpr std::string_view kAlertSelect =
    "SELECT a.id, a.kind, a.severity, a.node, a.gpu, a.message, a.raised_ms, a.resolved_ms, "
    "a.resolved_by, COALESCE(k.rule, ''), COALESCE(k.subject, ''), COALESCE(k.sinks, '[]') "
    "FROM alerts a LEFT JOIN alert_keys k ON k.alert_id = a.id";

constexpr std::string_view kDeliverySelect =
    "SELECT id, alert_id, sink, event, attempts, next_attempt_ms, last_error, delivered_ms, "
    "failed, created_ms FROM alert_deliveries";

Alert ReadAlert(const Statement& st) {
  Alert a;
  a.id = st.Int(0);
  // Names a newer Berth wrote read as kUnknown, and are shown as "unknown".
  a.kind = model::ParseAlertKind(st.Text(1)).value_or(model::AlertKind::kUnknown);
  a.severity = model::ParseAlertSeverity(st.Text(2)).value_or(model::AlertSeverity::kUnknown);
  a.node = st.Text(3);
  if (auto g = st.OptInt(4)) a.gpu = static_cast<std::uint32_t>(*g);
  a.message = st.Text(5);
  a.raised_ms = st.Int(6);
  a.resolved_ms = st.OptInt(7);
  a.resolved_by = st.Text(8);
  a.rule = st.Text(9);
  a.subject = st.Text(10);
  auto sinks = json::parse(st.Text(11), nullptr, false);
  if (sinks.is_array()) a.sinks = sinks.get<std::vector<std::string>>();
  return a;
}

AlertDelivery ReadDelivery(const Statement& st) {
  AlertDelivery d;
  d.id = st.Int(0);
  d.alert_id = st.Int(1);
  d.sink = st.Text(2);
  d.event = st.Text(3);
  d.attempts = static_cast<std::int32_t>(st.Int(4));
  d.next_attempt_ms = st.Int(5);
  d.last_error = st.Text(6);
  d.delivered_ms = st.OptInt(7);
  d.failed = st.Int(8) != 0;
  d.created_ms = st.Int(9);
  return d;
}

// Queues one `event` delivery of alert `alert_id` per sink (mu_ held).
Status QueueDeliveries(Database& db, std::int64_t alert_id, const std::vector<std::string>& sinks,
                       std::string_view event, TimeMs now) {
  for (const auto& sink : sinks) {
    auto st = db.Prepare(
        "INSERT INTO alert_deliveries(alert_id, sink, event, next_attempt_ms, created_ms) "
        "VALUES(?,?,?,?,?)");
    if (!st) return std::unexpected(st.error());
    BERTH_RETURN_IF_ERROR(
        st->Bind(1, alert_id).Bind(2, sink).Bind(3, event).Bind(4, now).Bind(5, now).Run());
  }
  return Ok();
}

}  // namespace

Result<std::int64_t> SqliteStore::InsertAlert(const Alert& alert) {
  auto st = db_.Prepare(
      "INSERT INTO alerts(kind, severity, node, gpu, message, raised_ms) VALUES(?,?,?,?,?,?) "
      "RETURNING id");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, model::AlertKindName(alert.kind))
      .Bind(2, model::AlertSeverityName(alert.severity))
      .Bind(3, alert.node)
      .Bind(4, alert.gpu ? std::optional<std::int64_t>(*alert.gpu) : std::nullopt)
      .Bind(5, alert.message)
      .Bind(6, alert.raised_ms);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  const std::int64_t id = st->Int(0);
  auto key = db_.Prepare("INSERT INTO alert_keys(alert_id, rule, subject, sinks) VALUES(?,?,?,?)");
  if (!key) return std::unexpected(key.error());
  BERTH_RETURN_IF_ERROR(key->Bind(1, id)
                            .Bind(2, alert.rule)
                            .Bind(3, alert.subject)
                            .Bind(4, json(alert.sinks).dump())
                            .Run());
  BERTH_RETURN_IF_ERROR(QueueDeliveries(db_, id, alert.sinks, "raised", alert.raised_ms));
  return id;
}

Status SqliteStore::ResolveAlertsLocked(const std::vector<std::int64_t>& ids, const std::string& by,
                                        TimeMs now) {
  for (auto id : ids) {
    auto st = db_.Prepare(
        "UPDATE alerts SET resolved_ms=?, resolved_by=? WHERE id=? AND resolved_ms IS NULL");
    if (!st) return std::unexpected(st.error());
    BERTH_RETURN_IF_ERROR(st->Bind(1, now).Bind(2, by).Bind(3, id).Run());
    if (db_.Changes() == 0) continue;
    auto sinks = db_.Prepare("SELECT sinks FROM alert_keys WHERE alert_id=?");
    if (!sinks) return std::unexpected(sinks.error());
    sinks->Bind(1, id);
    auto row = sinks->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) continue;
    auto list = json::parse(sinks->Text(0), nullptr, false);
    if (!list.is_array()) continue;
    BERTH_RETURN_IF_ERROR(
        QueueDeliveries(db_, id, list.get<std::vector<std::string>>(), "resolved", now));
  }
  return Ok();
}

Result<std::vector<Alert>> SqliteStore::LoadAlerts(const std::string& where) {
  auto st = db_.Prepare(fmt::format("{} {} ORDER BY a.id", kAlertSelect, where));
  if (!st) return std::unexpected(st.error());
  return CollectRows<Alert>(*st, ReadAlert);
}

Result<std::int64_t> SqliteStore::RaiseAlert(const Alert& alert) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto id = InsertAlert(alert);
  if (!id) return std::unexpected(id.error());
  BERTH_RETURN_IF_ERROR(tx.Commit());
  return *id;
}

Result<std::optional<std::int64_t>> SqliteStore::RaiseAlertOnce(const Alert& alert,
                                                                AlertDedupe dedupe) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto seen = db_.Prepare(fmt::format(
      "SELECT 1 FROM alert_keys k JOIN alerts a ON a.id = k.alert_id WHERE k.rule=? AND "
      "k.subject=? {} LIMIT 1",
      dedupe == AlertDedupe::kOpen ? "AND a.resolved_ms IS NULL" : ""));
  if (!seen) return std::unexpected(seen.error());
  seen->Bind(1, alert.rule).Bind(2, alert.subject);
  auto row = seen->Step();
  if (!row) return std::unexpected(row.error());
  if (*row) return std::optional<std::int64_t>();
  auto id = InsertAlert(alert);
  if (!id) return std::unexpected(id.error());
  BERTH_RETURN_IF_ERROR(tx.Commit());
  return std::optional<std::int64_t>(*id);
}

Result<std::vector<Alert>> SqliteStore::FindAlerts(const AlertFilter& filter) {
  std::lock_guard lock(mu_);
  // The newest `limit` matches, then put back in id order.
  auto st = db_.Prepare(fmt::format(
      "SELECT * FROM ({} WHERE (?1 = 0 OR a.resolved_ms IS NULL) AND (?2 = '' OR "
      "a.kind = ?2) AND (?3 = 0 OR a.id < ?3) ORDER BY a.id DESC LIMIT ?4) AS newest ORDER BY 1",
      kAlertSelect));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, std::int64_t{filter.open_only ? 1 : 0})
      .Bind(2, filter.kind ? model::AlertKindName(*filter.kind) : std::string_view())
      .Bind(3, filter.before_id.value_or(0))
      .Bind(4, SqlLimit(filter.limit));
  return CollectRows<Alert>(*st, ReadAlert);
}

Result<Alert> SqliteStore::GetAlert(std::int64_t id) {
  std::lock_guard lock(mu_);
  auto list = LoadAlerts(fmt::format("WHERE a.id = {}", id));
  if (!list) return std::unexpected(list.error());
  if (list->empty()) return Fail(Code::kNotFound, fmt::format("alert {} not found", id));
  return list->front();
}

Result<bool> SqliteStore::ResolveAlert(std::int64_t id, const std::string& by, TimeMs now,
                                       const AuditOf<Alert>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto list = LoadAlerts(fmt::format("WHERE a.id = {}", id));
  if (!list) return std::unexpected(list.error());
  if (list->empty()) return Fail(Code::kNotFound, fmt::format("alert {} not found", id));
  if (list->front().resolved_ms) return false;
  BERTH_RETURN_IF_ERROR(ResolveAlertsLocked({id}, by, now));
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, list->front()));
  return true;
}

Result<std::int64_t> SqliteStore::ApplyAlertRules(const std::string& yaml, const std::string& by,
                                                  const std::string& comment, TimeMs now,
                                                  std::optional<std::int64_t> base,
                                                  const AuditOf<std::int64_t>& audit) {
  auto parsed = model::ParseAlertRules(yaml);
  if (!parsed) return std::unexpected(parsed.error());
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  if (base) {
    auto cur = db_.Prepare(
        "SELECT version, applied_by FROM alert_rule_versions ORDER BY version DESC LIMIT 1");
    if (!cur) return std::unexpected(cur.error());
    auto row = cur->Step();
    if (!row) return std::unexpected(row.error());
    const std::int64_t current = *row ? cur->Int(0) : 0;
    if (current != *base) {
      return Fail(Code::kFailedPrecondition,
                  fmt::format("the alert rules changed since version {}: version {} was applied "
                              "by {}; see them with `berth alert rules show`, then apply again "
                              "with --base {}",
                              *base, current, *row ? cur->Text(1) : std::string("nobody"), current),
                  "base_version");
    }
  }
  auto st = db_.Prepare(
      "INSERT INTO alert_rule_versions(version, yaml, applied_ms, applied_by, comment) "
      "VALUES((SELECT COALESCE(MAX(version), 0) + 1 FROM alert_rule_versions),?,?,?,?) "
      "RETURNING version");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, yaml).Bind(2, now).Bind(3, by).Bind(4, comment);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  const std::int64_t version = st->Int(0);
  st->Reset();
  BERTH_RETURN_IF_ERROR(CommitAudited(tx, db_, audit_head_, audit, version));
  return version;
}

Result<std::optional<AlertRulesVersion>> SqliteStore::ActiveAlertRules() {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(
      "SELECT version, yaml, applied_ms, applied_by, comment FROM alert_rule_versions ORDER BY "
      "version DESC LIMIT 1");
  if (!st) return std::unexpected(st.error());
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<AlertRulesVersion>();
  AlertRulesVersion v;
  v.version = st->Int(0);
  v.yaml = st->Text(1);
  v.applied_ms = st->Int(2);
  v.applied_by = st->Text(3);
  v.comment = st->Text(4);
  return std::optional<AlertRulesVersion>(std::move(v));
}

Result<std::vector<AlertDelivery>> SqliteStore::DueDeliveries(TimeMs now, std::size_t limit) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(fmt::format(
      "{} WHERE delivered_ms IS NULL AND failed = 0 AND next_attempt_ms <= ? ORDER BY id LIMIT ?",
      kDeliverySelect));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, now).Bind(2, static_cast<std::int64_t>(limit));
  return CollectRows<AlertDelivery>(*st, ReadDelivery);
}

Status SqliteStore::RecordDeliveryAttempt(std::int64_t id, const std::string& error,
                                          std::optional<TimeMs> next_attempt_ms, TimeMs now) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(
      "UPDATE alert_deliveries SET attempts = attempts + 1, last_error = ?, delivered_ms = ?, "
      "failed = ?, next_attempt_ms = ? WHERE id = ?");
  if (!st) return std::unexpected(st.error());
  const bool ok = error.empty();
  st->Bind(1, error)
      .Bind(2, ok ? std::optional<std::int64_t>(now) : std::nullopt)
      .Bind(3, std::int64_t{!ok && !next_attempt_ms ? 1 : 0})
      .Bind(4, next_attempt_ms.value_or(now))
      .Bind(5, id);
  BERTH_RETURN_IF_ERROR(st->Run());
  if (db_.Changes() == 0) return Fail(Code::kNotFound, fmt::format("delivery {} not found", id));
  return Ok();
}

Result<std::vector<AlertDelivery>> SqliteStore::ListDeliveries(
    std::size_t limit, std::optional<std::int64_t> before_id) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(
      fmt::format("{} WHERE (?1 = 0 OR id < ?1) ORDER BY id DESC LIMIT ?2", kDeliverySelect));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, before_id.value_or(0)).Bind(2, SqlLimit(limit));
  return CollectRows<AlertDelivery>(*st, ReadDelivery);
}

}  // namespace berth::store
