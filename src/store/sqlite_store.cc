#include "store/sqlite_store.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/units.h"
#include "model/json.h"
#include "model/policy.h"
#include "store/audit_chain.h"
#include "store/sqlite_rows.h"

namespace berth::store {
namespace {

using nlohmann::json;

// 1: the skeleton (tenants and queues tables). 2: versioned policy; the
// policy's queues replace the tenants and queues tables; jobs and job events
// record the policy version they were scheduled under. 3: runs record their
// slice of a shared GPU (gpu_share_millis, gpu_share_bytes). 4: runs record
// their last reported checkpoint, whether a stop was clean and their failure
// class; jobs count their failures and when a retry may start. 5: who
// submitted each job. 6: job arrays. 7: inference services and their
// revisions (new tables only, made by kSchema). 8, 9: replicas' ports and
// readiness. 10: services' canary rollout progress (a new table).
constexpr int kSchemaVersion = 10;

// The tables, as SQLite takes them; SchemaFor gives PostgreSQL's.
constexpr std::string_view kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS policy_versions(
  version INTEGER PRIMARY KEY, yaml TEXT NOT NULL, normalized TEXT NOT NULL,
  applied_ms INTEGER NOT NULL, applied_by TEXT NOT NULL, comment TEXT NOT NULL,
  rolled_back_from INTEGER, restores INTEGER);
CREATE TABLE IF NOT EXISTS jobs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL, tenant TEXT NOT NULL, queue TEXT NOT NULL,
  spec TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '{}',
  submitted_ms INTEGER NOT NULL, started_ms INTEGER, finished_ms INTEGER,
  exit_code INTEGER, signal INTEGER,
  cancel_requested INTEGER NOT NULL DEFAULT 0, cancelled_by TEXT NOT NULL DEFAULT '',
  attempts INTEGER NOT NULL DEFAULT 0, policy_version INTEGER,
  failures INTEGER NOT NULL DEFAULT 0, retry_after_ms INTEGER,
  submitted_by TEXT NOT NULL DEFAULT '', array_id INTEGER, service TEXT);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, submitted_ms);
CREATE INDEX IF NOT EXISTS jobs_by_submitted ON jobs(submitted_ms);
CREATE TABLE IF NOT EXISTS runs(
  run_id TEXT PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(id),
  replica INTEGER NOT NULL, attempt INTEGER NOT NULL, node TEXT NOT NULL,
  gpu_indices TEXT NOT NULL, gpu_uuids TEXT NOT NULL, state TEXT NOT NULL,
  pid INTEGER NOT NULL DEFAULT 0, started_ms INTEGER, finished_ms INTEGER,
  exit_code INTEGER, signal INTEGER, stopped_for TEXT NOT NULL DEFAULT '',
  start_error TEXT NOT NULL DEFAULT '', stop_requested INTEGER NOT NULL DEFAULT 0,
  gpu_share_millis INTEGER NOT NULL DEFAULT 0, gpu_share_bytes INTEGER NOT NULL DEFAULT 0,
  last_checkpoint_ms INTEGER, clean_stop INTEGER, failure_class TEXT NOT NULL DEFAULT '',
  stop_detail TEXT NOT NULL DEFAULT '', port INTEGER NOT NULL DEFAULT 0, ready INTEGER,
  probe_detail TEXT NOT NULL DEFAULT '', ready_changed_ms INTEGER);
CREATE INDEX IF NOT EXISTS runs_by_job ON runs(job_id);
CREATE INDEX IF NOT EXISTS runs_by_state ON runs(state);
CREATE TABLE IF NOT EXISTS job_events(
  id INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL REFERENCES jobs(id),
  time_ms INTEGER NOT NULL, state TEXT NOT NULL, event TEXT NOT NULL, message TEXT NOT NULL,
  policy_version INTEGER);
CREATE INDEX IF NOT EXISTS events_by_job ON job_events(job_id, id);
CREATE TABLE IF NOT EXISTS nodes(
  name TEXT PRIMARY KEY, info TEXT NOT NULL, state TEXT NOT NULL,
  registered_ms INTEGER NOT NULL, state_changed_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS node_events(
  id INTEGER PRIMARY KEY AUTOINCREMENT, node TEXT NOT NULL, time_ms INTEGER NOT NULL,
  event TEXT NOT NULL, message TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS node_events_by_node ON node_events(node, id);
CREATE TABLE IF NOT EXISTS node_revocations(
  node TEXT PRIMARY KEY, revoked_ms INTEGER NOT NULL, by TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cordons(
  node TEXT NOT NULL, gpu INTEGER NOT NULL, kind TEXT NOT NULL, reason TEXT NOT NULL,
  by TEXT NOT NULL, automatic INTEGER NOT NULL, at_ms INTEGER NOT NULL,
  PRIMARY KEY(node, gpu));
CREATE TABLE IF NOT EXISTS alerts(
  id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, severity TEXT NOT NULL,
  node TEXT NOT NULL, gpu INTEGER, message TEXT NOT NULL, raised_ms INTEGER NOT NULL,
  resolved_ms INTEGER, resolved_by TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS alert_keys(
  alert_id INTEGER PRIMARY KEY, rule TEXT NOT NULL, subject TEXT NOT NULL,
  sinks TEXT NOT NULL DEFAULT '[]');
CREATE INDEX IF NOT EXISTS alert_keys_by_subject ON alert_keys(rule, subject);
CREATE TABLE IF NOT EXISTS alert_rule_versions(
  version INTEGER PRIMARY KEY, yaml TEXT NOT NULL, applied_ms INTEGER NOT NULL,
  applied_by TEXT NOT NULL, comment TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS alert_deliveries(
  id INTEGER PRIMARY KEY AUTOINCREMENT, alert_id INTEGER NOT NULL, sink TEXT NOT NULL,
  event TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, next_attempt_ms INTEGER NOT NULL,
  last_error TEXT NOT NULL DEFAULT '', delivered_ms INTEGER, failed INTEGER NOT NULL DEFAULT 0,
  created_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS alert_deliveries_due ON alert_deliveries(delivered_ms, failed,
  next_attempt_ms);
CREATE TABLE IF NOT EXISTS quota_requests(
  id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, queue TEXT NOT NULL,
  resource TEXT NOT NULL, guaranteed INTEGER, borrow_limit INTEGER, weight INTEGER,
  lending_limit INTEGER, reason TEXT NOT NULL, state TEXT NOT NULL, filed_by TEXT NOT NULL,
  filed_ms INTEGER NOT NULL, decided_by TEXT NOT NULL DEFAULT '', decided_ms INTEGER,
  decision_comment TEXT NOT NULL DEFAULT '', policy_version INTEGER);
CREATE INDEX IF NOT EXISTS quota_requests_by_state ON quota_requests(state, id);
CREATE TABLE IF NOT EXISTS services(
  id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, name TEXT NOT NULL,
  revision INTEGER NOT NULL, created_ms INTEGER NOT NULL, created_by TEXT NOT NULL,
  updated_ms INTEGER NOT NULL, updated_by TEXT NOT NULL, UNIQUE(tenant, name));
CREATE TABLE IF NOT EXISTS service_revisions(
  service_id INTEGER NOT NULL REFERENCES services(id), revision INTEGER NOT NULL,
  spec TEXT NOT NULL, created_ms INTEGER NOT NULL, created_by TEXT NOT NULL,
  change TEXT NOT NULL, restores INTEGER, PRIMARY KEY(service_id, revision));
CREATE TABLE IF NOT EXISTS service_rollouts(
  service_id INTEGER PRIMARY KEY REFERENCES services(id), revision INTEGER NOT NULL,
  step INTEGER NOT NULL, since_ms INTEGER NOT NULL, by TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pending_counts(
  tenant TEXT NOT NULL, submitted_by TEXT NOT NULL, n INTEGER NOT NULL,
  PRIMARY KEY(tenant, submitted_by)) WITHOUT ROWID;
)sql";

// SQLite's triggers that keep pending_counts (PostgreSQL's: kPgTriggers).
constexpr std::string_view kSqliteTriggers = R"sql(
CREATE TRIGGER IF NOT EXISTS pending_counts_insert AFTER INSERT ON jobs
  WHEN NEW.state = 'Pending' BEGIN
  INSERT INTO pending_counts VALUES(NEW.tenant, NEW.submitted_by, 1)
    ON CONFLICT DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS pending_counts_enter AFTER UPDATE OF state ON jobs
  WHEN NEW.state = 'Pending' AND OLD.state <> 'Pending' BEGIN
  INSERT INTO pending_counts VALUES(NEW.tenant, NEW.submitted_by, 1)
    ON CONFLICT DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS pending_counts_leave AFTER UPDATE OF state ON jobs
  WHEN OLD.state = 'Pending' AND NEW.state <> 'Pending' BEGIN
  UPDATE pending_counts SET n = n - 1
    WHERE tenant = OLD.tenant AND submitted_by = OLD.submitted_by;
END;
CREATE TRIGGER IF NOT EXISTS pending_counts_delete AFTER DELETE ON jobs
  WHEN OLD.state = 'Pending' BEGIN
  UPDATE pending_counts SET n = n - 1
    WHERE tenant = OLD.tenant AND submitted_by = OLD.submitted_by;
END;
)sql";

// PostgreSQL's pending counts: one trigger function for what SQLite's four
// triggers do. A PostgreSQL database starts at kSchemaVersion (it has no
// older schema to migrate), so its partial indexes are made here too.
constexpr std::string_view kPgTriggers = R"sql(
CREATE OR REPLACE FUNCTION berth_pending_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' AND OLD.state = 'Pending'
     AND (TG_OP = 'DELETE' OR NEW.state <> 'Pending') THEN
    UPDATE pending_counts SET n = n - 1
      WHERE tenant = OLD.tenant AND submitted_by = OLD.submitted_by;
  END IF;
  IF TG_OP <> 'DELETE' AND NEW.state = 'Pending'
     AND (TG_OP = 'INSERT' OR OLD.state <> 'Pending') THEN
    INSERT INTO pending_counts VALUES(NEW.tenant, NEW.submitted_by, 1)
      ON CONFLICT(tenant, submitted_by) DO UPDATE SET n = pending_counts.n + 1;
  END IF;
  RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER pending_counts AFTER INSERT OR UPDATE OF state OR DELETE ON jobs
  FOR EACH ROW EXECUTE FUNCTION berth_pending_counts();
CREATE INDEX IF NOT EXISTS jobs_by_array ON jobs(array_id) WHERE array_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_by_service ON jobs(tenant, service) WHERE service IS NOT NULL;
)sql";

constexpr std::string_view kPolicyColumns =
    "version, yaml, normalized, applied_ms, applied_by, comment, rolled_back_from, restores";

// Jobs in these states hold a place in their queue.
constexpr std::string_view kActiveStates = "('Pending','Scheduled','Running')";

PolicyVersion ReadPolicyVersion(const Statement& st) {
  PolicyVersion v;
  v.version = st.Int(0);
  v.yaml = st.Text(1);
  v.normalized = st.Text(2);
  v.applied_ms = st.Int(3);
  v.applied_by = st.Text(4);
  v.comment = st.Text(5);
  v.rolled_back_from = st.OptInt(6);
  v.restores = st.OptInt(7);
  return v;
}

// Parses a stored version's text into v.policy.
Status ParseStored(PolicyVersion& v) {
  auto policy = model::ParsePolicy(v.yaml);
  if (!policy) {
    return Fail(Code::kInternal,
                fmt::format("stored policy v{} no longer parses ({}{}{}); apply a fixed policy",
                            v.version, policy.error().field,
                            policy.error().field.empty() ? "" : ": ", policy.error().message));
  }
  v.policy = std::move(*policy);
  v.policy.version = v.version;
  return Ok();
}

std::string Plural(std::int64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace

SqliteStore::SqliteStore(Database db, Database reader, std::filesystem::path audit_head)
    : db_(std::move(db)), audit_head_(std::move(audit_head)), reader_(std::move(reader)) {
  db_.SetRowHook(&SqliteStore::OnRowChanged, this);
}

SqliteStore::~SqliteStore() {
  if (auto st = FlushAuditHead(audit_head_); !st) spdlog::error("{}", st.error().message);
}

void SqliteStore::OnRowChanged(void* self, std::string_view table, std::int64_t rowid) {
  if (table == "jobs") static_cast<SqliteStore*>(self)->NoteJobChanged(rowid);
}

void SqliteStore::NoteJobChanged(std::int64_t id) {
  if (!track_changes_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(changed_mu_);
  changed_jobs_.insert(id);
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const StoreLocation& where, TimeMs now) {
  if (where.postgres()) return OpenPostgres(where, now);
  const std::filesystem::path& data_dir = where.data_dir;
  auto db = Database::OpenState(data_dir);
  if (!db) return std::unexpected(db.error());
  auto reader = Database::OpenReader((data_dir / "berth.db").string());
  if (!reader) return std::unexpected(reader.error());
  std::unique_ptr<SqliteStore> store(
      new SqliteStore(std::move(*db), std::move(*reader), data_dir / "audit.head"));
  store->sole_writer_ = where.sole_writer;
  BERTH_RETURN_IF_ERROR(store->Migrate(now));
  return store;
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::OpenPostgres(const StoreLocation& where,
                                                               TimeMs now) {
  auto db = OpenStateDatabase(where);
  if (!db) return std::unexpected(db.error());
  auto reader = OpenReadDatabase(where);
  if (!reader) return std::unexpected(reader.error());
  std::unique_ptr<SqliteStore> store(new SqliteStore(std::move(*db), std::move(*reader), {}));
  store->sole_writer_ = where.sole_writer;
  BERTH_RETURN_IF_ERROR(store->MigratePostgres(now));
  return store;
}

Status SqliteStore::MigratePostgres(TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  // Two berthd opening one fresh database at once: one makes the schema,
  // the other waits for it (CREATE ... IF NOT EXISTS alone races). The key
  // is "berth-mi".
  {
    auto schema_lock = db_.Prepare("SELECT pg_advisory_xact_lock(7090199032654294377)");
    if (!schema_lock) return std::unexpected(schema_lock.error());
    BERTH_RETURN_IF_ERROR(schema_lock->Run());
  }
  BERTH_RETURN_IF_ERROR(db_.Exec(SchemaFor(Dialect::kPostgres, kSchema)));
  BERTH_RETURN_IF_ERROR(db_.Exec(kPgTriggers));
  BERTH_RETURN_IF_ERROR(EnsureAuditSchema(db_));
  auto version = db_.Prepare("SELECT value FROM meta WHERE key='schema_version'");
  if (!version) return std::unexpected(version.error());
  auto row = version->Step();
  if (!row) return std::unexpected(row.error());
  if (*row && std::stoi(version->Text(0)) > kSchemaVersion) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("the state database has schema version {} but this berthd knows "
                            "only up to {}; run a newer berthd",
                            version->Text(0), kSchemaVersion));
  }
  BERTH_RETURN_IF_ERROR(FinishMigration(false, now));
  BERTH_RETURN_IF_ERROR(tx.Commit());
  active_.reset();
  return Ok();
}

// Both backends' last steps, inside the migration's transaction.
Status SqliteStore::FinishMigration(bool had_queue_tables, TimeMs now) {
  // The queued-job counts the pending-job limits read are kept by triggers
  // in every transaction that moves a job; recounted at each open all the
  // same, so a database from before them (or edited by hand) starts right.
  BERTH_RETURN_IF_ERROR(
      db_.Exec("DELETE FROM pending_counts;"
               "INSERT INTO pending_counts SELECT tenant, submitted_by, COUNT(*) FROM jobs "
               "WHERE state = 'Pending' GROUP BY tenant, submitted_by;"));
  auto set = db_.Prepare(
      "INSERT INTO meta(key, value) VALUES('schema_version', ?) "
      "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  if (!set) return std::unexpected(set.error());
  BERTH_RETURN_IF_ERROR(set->Bind(1, std::to_string(kSchemaVersion)).Run());
  return MigrateQueuesToPolicy(had_queue_tables, now);
}

Status SqliteStore::Migrate(TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  Result<bool> had_queue_tables = false;
  {
    // Scoped: an open read of sqlite_master would lock out the DROP TABLE below.
    auto old_tables =
        db_.Prepare("SELECT 1 FROM sqlite_master WHERE type='table' AND name='queues'");
    if (!old_tables) return std::unexpected(old_tables.error());
    had_queue_tables = old_tables->Step();
    if (!had_queue_tables) return std::unexpected(had_queue_tables.error());
  }
  BERTH_RETURN_IF_ERROR(db_.Exec(kSchema));
  BERTH_RETURN_IF_ERROR(db_.Exec(kSqliteTriggers));
  BERTH_RETURN_IF_ERROR(EnsureAuditSchema(db_));
  std::optional<int> stored;  // none: a fresh database
  {
    auto version = db_.Prepare("SELECT value FROM meta WHERE key='schema_version'");
    if (!version) return std::unexpected(version.error());
    auto row = version->Step();
    if (!row) return std::unexpected(row.error());
    if (*row) stored = std::stoi(version->Text(0));
  }
  if (stored && *stored > kSchemaVersion) {
    return Fail(Code::kFailedPrecondition,
                fmt::format("the state database has schema version {} but this berthd knows "
                            "only up to {}; run a newer berthd",
                            *stored, kSchemaVersion));
  }
  if (stored && *stored < 2) {
    // Schema 1 tables predate the policy_version columns.
    BERTH_RETURN_IF_ERROR(
        db_.Exec("ALTER TABLE jobs ADD COLUMN policy_version INTEGER;"
                 "ALTER TABLE job_events ADD COLUMN policy_version INTEGER;"));
  }
  if (stored && *stored < 3) {
    // Schema 2 runs predate GPU sharing: every run held whole GPUs. (A
    // schema-1 database had no runs table: kSchema just made it whole.)
    auto has =
        db_.Prepare("SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name='gpu_share_millis'");
    if (!has) return std::unexpected(has.error());
    auto row = has->Step();
    if (!row) return std::unexpected(row.error());
    if (has->Int(0) == 0) {
      BERTH_RETURN_IF_ERROR(
          db_.Exec("ALTER TABLE runs ADD COLUMN gpu_share_millis INTEGER NOT NULL DEFAULT 0;"
                   "ALTER TABLE runs ADD COLUMN gpu_share_bytes INTEGER NOT NULL DEFAULT 0;"));
    }
  }
  if (stored && *stored < 4) {
    // Tables an older schema made lack the schema-4 columns (a table kSchema
    // just made has them).
    auto has_column = [&](std::string_view table, std::string_view column) -> Result<bool> {
      auto has = db_.Prepare(fmt::format(
          "SELECT COUNT(*) FROM pragma_table_info('{}') WHERE name='{}'", table, column));
      if (!has) return std::unexpected(has.error());
      auto row = has->Step();
      if (!row) return std::unexpected(row.error());
      return has->Int(0) != 0;
    };
    auto runs = has_column("runs", "last_checkpoint_ms");
    if (!runs) return std::unexpected(runs.error());
    if (!*runs) {
      BERTH_RETURN_IF_ERROR(
          db_.Exec("ALTER TABLE runs ADD COLUMN last_checkpoint_ms INTEGER;"
                   "ALTER TABLE runs ADD COLUMN clean_stop INTEGER;"
                   "ALTER TABLE runs ADD COLUMN failure_class TEXT NOT NULL DEFAULT '';"
                   "ALTER TABLE runs ADD COLUMN stop_detail TEXT NOT NULL DEFAULT '';"));
    }
    auto jobs = has_column("jobs", "failures");
    if (!jobs) return std::unexpected(jobs.error());
    if (!*jobs) {
      BERTH_RETURN_IF_ERROR(
          db_.Exec("ALTER TABLE jobs ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;"
                   "ALTER TABLE jobs ADD COLUMN retry_after_ms INTEGER;"));
    }
  }
  if (stored && *stored < 5) {
    // Schema 5: who submitted each job (tenancy and metering). New tables
    // of schema 5 come from kSchema; columns added to old tables go here.
    auto has =
        db_.Prepare("SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name='submitted_by'");
    if (!has) return std::unexpected(has.error());
    auto row = has->Step();
    if (!row) return std::unexpected(row.error());
    if (has->Int(0) == 0) {
      BERTH_RETURN_IF_ERROR(
          db_.Exec("ALTER TABLE jobs ADD COLUMN submitted_by TEXT NOT NULL DEFAULT '';"));
    }
  }
  if (stored && *stored < 6) {
    // Schema 6: job arrays (each element's array id).
    auto has = db_.Prepare("SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name='array_id'");
    if (!has) return std::unexpected(has.error());
    auto row = has->Step();
    if (!row) return std::unexpected(row.error());
    if (has->Int(0) == 0) {
      BERTH_RETURN_IF_ERROR(db_.Exec("ALTER TABLE jobs ADD COLUMN array_id INTEGER;"));
    }
  }
  if (stored && *stored < 8) {
    // Schema 8: a service's replicas (the owning service's name).
    auto has = db_.Prepare("SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name='service'");
    if (!has) return std::unexpected(has.error());
    auto row = has->Step();
    if (!row) return std::unexpected(row.error());
    if (has->Int(0) == 0)
      BERTH_RETURN_IF_ERROR(db_.Exec("ALTER TABLE jobs ADD COLUMN service TEXT;"));
    // And each replica's port on its node.
    auto port = db_.Prepare("SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name='port'");
    if (!port) return std::unexpected(port.error());
    auto port_row = port->Step();
    if (!port_row) return std::unexpected(port_row.error());
    if (port->Int(0) == 0) {
      BERTH_RETURN_IF_ERROR(
          db_.Exec("ALTER TABLE runs ADD COLUMN port INTEGER NOT NULL DEFAULT 0;"));
    }
  }
  if (stored && *stored < 9) {
    // Schema 9: service replicas' readiness, as their agents' probes say it.
    auto has = db_.Prepare("SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name='ready'");
    if (!has) return std::unexpected(has.error());
    auto row = has->Step();
    if (!row) return std::unexpected(row.error());
    if (has->Int(0) == 0) {
      BERTH_RETURN_IF_ERROR(
          db_.Exec("ALTER TABLE runs ADD COLUMN ready INTEGER;"
                   "ALTER TABLE runs ADD COLUMN probe_detail TEXT NOT NULL DEFAULT '';"
                   "ALTER TABLE runs ADD COLUMN ready_changed_ms INTEGER;"));
    }
  }
  // After the columns exist, on a new or a migrated database alike.
  BERTH_RETURN_IF_ERROR(db_.Exec(
      "CREATE INDEX IF NOT EXISTS jobs_by_array ON jobs(array_id) WHERE array_id IS NOT NULL;"
      "CREATE INDEX IF NOT EXISTS jobs_by_service ON jobs(tenant, service) "
      "WHERE service IS NOT NULL"));
  BERTH_RETURN_IF_ERROR(FinishMigration(*had_queue_tables, now));
  BERTH_RETURN_IF_ERROR(tx.Commit());
  active_.reset();
  return Ok();
}

// A database without a policy gets version 1: the default policy (tenant
// "default" with queue "default"), so the first job needs no set-up, plus any
// queue a schema-1 database had in its queues table. Those tables are then
// dropped: the policy is the one list of queues.
Status SqliteStore::MigrateQueuesToPolicy(bool had_queue_tables, TimeMs now) {
  bool have_policy = false;
  {
    auto count = db_.Prepare("SELECT COUNT(*) FROM policy_versions");
    if (!count) return std::unexpected(count.error());
    auto row = count->Step();
    if (!row) return std::unexpected(row.error());
    have_policy = count->Int(0) > 0;
  }
  model::Policy policy = model::DefaultPolicy();
  std::string comment = "the default policy of a fresh install";
  if (had_queue_tables) {
    auto queues = db_.Prepare("SELECT tenant, name FROM queues ORDER BY tenant, name");
    if (!queues) return std::unexpected(queues.error());
    for (;;) {
      auto q = queues->Step();
      if (!q) return std::unexpected(q.error());
      if (!*q) break;
      // In the policy a tenant is the top-level queue of its own queues.
      std::string tenant = queues->Text(0);
      if (policy.FindQueue(tenant) == nullptr) {
        model::QueuePolicy top;
        top.path = tenant;
        top.tenant = tenant;
        policy.queues.push_back(std::move(top));
      }
      std::string path = tenant + "/" + queues->Text(1);
      if (policy.FindQueue(path) != nullptr) continue;
      model::QueuePolicy qp;
      qp.path = path;
      qp.tenant = tenant;
      qp.parent = tenant;
      policy.queues.push_back(std::move(qp));
    }
    comment = "carried over from the queues of a schema-1 database";
  }
  if (!have_policy) {
    auto v = AddPolicyVersion(model::PolicyToYaml(policy), "berthd", comment, std::nullopt,
                              std::nullopt, now);
    if (!v) return std::unexpected(v.error());
  }
  if (had_queue_tables) {
    BERTH_RETURN_IF_ERROR(db_.Exec("DROP TABLE queues; DROP TABLE IF EXISTS tenants;"));
  }
  return Ok();
}

Result<std::optional<PolicyVersion>> SqliteStore::LoadPolicyVersion(std::int64_t version) {
  auto st =
      db_.Prepare(fmt::format("SELECT {} FROM policy_versions WHERE version=?", kPolicyColumns));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, version);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<PolicyVersion>{};
  return std::optional<PolicyVersion>(ReadPolicyVersion(*st));
}

Result<const PolicyVersion*> SqliteStore::Active() {
  if (active_) return &*active_;
  auto st = db_.Prepare("SELECT value FROM meta WHERE key='active_policy_version'");
  if (!st) return std::unexpected(st.error());
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return Fail(Code::kInternal, "the state database has no active policy");
  std::int64_t version = std::stoll(st->Text(0));
  auto v = LoadPolicyVersion(version);
  if (!v) return std::unexpected(v.error());
  if (!*v) {
    return Fail(Code::kInternal,
                fmt::format("the active policy v{} is missing from the state database", version));
  }
  BERTH_RETURN_IF_ERROR(ParseStored(**v));
  active_ = std::move(**v);
  return &*active_;
}

Result<PolicyVersion> SqliteStore::AddPolicyVersion(const std::string& yaml_text,
                                                    const std::string& by,
                                                    const std::string& comment,
                                                    std::optional<std::int64_t> rolled_back_from,
                                                    std::optional<std::int64_t> restores,
                                                    TimeMs now) {
  auto parsed = model::ParsePolicy(yaml_text);
  if (!parsed) return std::unexpected(parsed.error());
  PolicyVersion v;
  v.yaml = yaml_text;
  v.normalized = model::PolicyToYaml(*parsed);
  v.applied_ms = now;
  v.applied_by = by;
  v.comment = comment;
  v.rolled_back_from = rolled_back_from;
  v.restores = restores;
  v.policy = std::move(*parsed);

  auto max = db_.Prepare("SELECT COALESCE(MAX(version), 0) FROM policy_versions");
  if (!max) return std::unexpected(max.error());
  auto row = max->Step();
  if (!row) return std::unexpected(row.error());
  v.version = max->Int(0) + 1;
  v.policy.version = v.version;

  if (v.version > 1) {
    // Applying must not strand work: every queue the active policy has that
    // the new one drops must be empty of pending and running jobs.
    auto active = Active();
    if (!active) return std::unexpected(active.error());
    std::set<std::string> removed;
    for (const auto& q : (*active)->policy.queues) {
      if (v.policy.FindQueue(q.path) == nullptr) removed.insert(q.path);
    }
    if (!removed.empty()) {
      auto held = db_.Prepare(
          fmt::format("SELECT tenant || '/' || queue AS path, COUNT(*) FROM jobs WHERE state IN {} "
                      "GROUP BY path ORDER BY path",
                      kActiveStates));
      if (!held) return std::unexpected(held.error());
      std::vector<std::string> stranded;
      std::int64_t total = 0;
      for (;;) {
        auto r = held->Step();
        if (!r) return std::unexpected(r.error());
        if (!*r) break;
        if (!removed.contains(held->Text(0))) continue;
        stranded.push_back(
            fmt::format("{} ({})", held->Text(0), Plural(held->Int(1), "job", "jobs")));
        total += held->Int(1);
      }
      if (!stranded.empty()) {
        return InvalidField(
            "queues",
            fmt::format("this policy removes {} that still {} pending or running jobs: {}; keep "
                        "{} in the policy until {} finish, or cancel {} first",
                        stranded.size() == 1 ? "a queue" : "queues",
                        stranded.size() == 1 ? "holds" : "hold", fmt::join(stranded, ", "),
                        stranded.size() == 1 ? "it" : "them",
                        total == 1 ? "that job" : "those jobs", total == 1 ? "it" : "them"));
      }
    }
  }

  auto ins = db_.Prepare(
      "INSERT INTO policy_versions(version, yaml, normalized, applied_ms, applied_by, comment, "
      "rolled_back_from, restores) VALUES(?,?,?,?,?,?,?,?)");
  if (!ins) return std::unexpected(ins.error());
  BERTH_RETURN_IF_ERROR(ins->Bind(1, v.version)
                            .Bind(2, v.yaml)
                            .Bind(3, v.normalized)
                            .Bind(4, v.applied_ms)
                            .Bind(5, v.applied_by)
                            .Bind(6, v.comment)
                            .Bind(7, v.rolled_back_from)
                            .Bind(8, v.restores)
                            .Run());
  auto meta = db_.Prepare(
      "INSERT INTO meta(key, value) VALUES('active_policy_version', ?) "
      "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  if (!meta) return std::unexpected(meta.error());
  BERTH_RETURN_IF_ERROR(meta->Bind(1, std::to_string(v.version)).Run());
  return v;
}

Result<std::int64_t> SqliteStore::ApplyPolicy(const std::string& yaml_text, const std::string& by,
                                              const std::string& comment, TimeMs now) {
  return ApplyPolicyOnBase(yaml_text, by, comment, std::nullopt, now);
}

Result<std::int64_t> SqliteStore::ApplyPolicyOnBase(const std::string& yaml_text,
                                                    const std::string& by,
                                                    const std::string& comment,
                                                    std::optional<std::int64_t> base, TimeMs now,
                                                    const AuditOf<std::int64_t>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  if (base) {
    auto cur = db_.Prepare(
        "SELECT version, applied_by, applied_ms FROM policy_versions ORDER BY version DESC "
        "LIMIT 1");
    if (!cur) return std::unexpected(cur.error());
    auto row = cur->Step();
    if (!row) return std::unexpected(row.error());
    if (*row && cur->Int(0) != *base) {
      return Fail(Code::kFailedPrecondition,
                  fmt::format("the policy changed since version {}: version {} was applied by {} "
                              "at {} ms; see what changed with `berth policy diff {} {}`, then "
                              "apply again with --base {}",
                              *base, cur->Int(0), cur->Text(1), cur->Int(2), *base, cur->Int(0),
                              cur->Int(0)),
                  "base_version");
    }
  }
  auto v = AddPolicyVersion(yaml_text, by, comment, std::nullopt, std::nullopt, now);
  if (!v) return std::unexpected(v.error());
  if (auto st = CommitAudited(tx, db_, audit_head_, audit, v->version); !st) {
    active_.reset();
    return std::unexpected(st.error());
  }
  active_ = std::move(*v);
  return active_->version;
}

Result<PolicyVersion> SqliteStore::PreviewPolicy(const std::string& yaml_text,
                                                 const std::string& by, TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);  // never committed: rolled back when it goes out of scope
  BERTH_RETURN_IF_ERROR(tx.Begin());
  return AddPolicyVersion(yaml_text, by, "", std::nullopt, std::nullopt, now);
}

Result<std::int64_t> SqliteStore::RollbackPolicy(std::int64_t to_version, const std::string& by,
                                                 const std::string& comment, TimeMs now,
                                                 const AuditOf<std::int64_t>& audit) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto old = LoadPolicyVersion(to_version);
  if (!old) return std::unexpected(old.error());
  const std::optional<PolicyVersion>& found = *old;
  if (!found) return Fail(Code::kNotFound, fmt::format("policy version {} not found", to_version));
  std::string text = found->yaml;
  auto active = Active();
  if (!active) return std::unexpected(active.error());
  std::int64_t from = (*active)->version;
  auto v = AddPolicyVersion(text, by,
                            comment.empty() ? fmt::format("rollback to v{}", to_version) : comment,
                            from, to_version, now);
  if (!v) {
    // The guard names the field of the request that caused it.
    if (v.error().field == "queues") {
      v.error().field = "to";
      std::string& m = v.error().message;
      if (m.starts_with("this policy ")) m.replace(0, 11, fmt::format("v{}", to_version));
      m = fmt::format("cannot roll back to v{}: {}", to_version, m);
    }
    return std::unexpected(v.error());
  }
  if (auto st = CommitAudited(tx, db_, audit_head_, audit, v->version); !st) {
    active_.reset();
    return std::unexpected(st.error());
  }
  active_ = std::move(*v);
  return active_->version;
}

Result<PolicyVersion> SqliteStore::ActivePolicy() {
  std::lock_guard lock(mu_);
  auto active = Active();
  if (!active) return std::unexpected(active.error());
  return **active;
}

Result<std::vector<PolicyVersion>> SqliteStore::ListPolicyVersions() {
  std::lock_guard lock(mu_);
  auto st =
      db_.Prepare(fmt::format("SELECT {} FROM policy_versions ORDER BY version", kPolicyColumns));
  if (!st) return std::unexpected(st.error());
  std::vector<PolicyVersion> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    out.push_back(ReadPolicyVersion(*st));
  }
  return out;
}

Result<PolicyVersion> SqliteStore::GetPolicyVersion(std::int64_t version) {
  std::lock_guard lock(mu_);
  if (active_ && active_->version == version) return *active_;
  auto v = LoadPolicyVersion(version);
  if (!v) return std::unexpected(v.error());
  if (!*v) return Fail(Code::kNotFound, fmt::format("policy version {} not found", version));
  BERTH_RETURN_IF_ERROR(ParseStored(**v));
  return std::move(**v);
}

Result<bool> SqliteStore::QueueExists(const std::string& tenant, const std::string& queue) {
  std::lock_guard lock(mu_);
  auto active = Active();
  if (!active) return std::unexpected(active.error());
  return (*active)->policy.FindQueue(tenant + "/" + queue) != nullptr;
}

}  // namespace berth::store
