#include "store/sqlite_store.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/failpoint.h"
#include "common/units.h"
#include "control/transitions.h"
#include "model/json.h"
#include "model/policy.h"
#include "store/sqlite_rows.h"

namespace berth::store {
namespace {

using nlohmann::json;

// 1: the skeleton (tenants and queues tables). 2: versioned policy; the
// policy's queues replace the tenants and queues tables; jobs and job events
// record the policy version they were scheduled under. 3: runs record their
// slice of a shared GPU (gpu_share_millis, gpu_share_bytes). 4: runs record
// their last reported checkpoint, whether a stop was clean and their failure
// class; jobs count their failures and when a retry may start.
constexpr int kSchemaVersion = 6;

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
  submitted_by TEXT NOT NULL DEFAULT '', array_id INTEGER);
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
  stop_detail TEXT NOT NULL DEFAULT '');
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
CREATE TABLE IF NOT EXISTS pending_counts(
  tenant TEXT NOT NULL, submitted_by TEXT NOT NULL, n INTEGER NOT NULL,
  PRIMARY KEY(tenant, submitted_by)) WITHOUT ROWID;
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

std::string ReasonText(const model::Reason& r) {
  auto j = model::ToJson(r);
  j.erase("message");  // rendered at read time, in the reader's language
  return j.dump();
}

}  // namespace

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::filesystem::path& data_dir,
                                                       TimeMs now) {
  auto db = Database::OpenState(data_dir);
  if (!db) return std::unexpected(db.error());
  auto reader = Database::OpenReader((data_dir / "berth.db").string());
  if (!reader) return std::unexpected(reader.error());
  std::unique_ptr<SqliteStore> store(new SqliteStore(std::move(*db), std::move(*reader)));
  BERTH_RETURN_IF_ERROR(store->Migrate(now));
  return store;
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
  // After the columns exist, on a new or a migrated database alike.
  BERTH_RETURN_IF_ERROR(db_.Exec(
      "CREATE INDEX IF NOT EXISTS jobs_by_array ON jobs(array_id) WHERE array_id IS NOT NULL"));
  // The queued-job counts the pending-job limits read are kept by triggers
  // in every transaction that moves a job; recounted at each open all the
  // same, so a database from before them (or edited by hand) starts right.
  BERTH_RETURN_IF_ERROR(
      db_.Exec("DELETE FROM pending_counts;"
               "INSERT INTO pending_counts SELECT tenant, submitted_by, COUNT(*) FROM jobs "
               "WHERE state = 'Pending' GROUP BY tenant, submitted_by;"));
  auto set = db_.Prepare("INSERT OR REPLACE INTO meta(key, value) VALUES('schema_version', ?)");
  if (!set) return std::unexpected(set.error());
  BERTH_RETURN_IF_ERROR(set->Bind(1, std::to_string(kSchemaVersion)).Run());
  BERTH_RETURN_IF_ERROR(MigrateQueuesToPolicy(*had_queue_tables, now));
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

std::string UnknownQueueMessage(const model::Policy& policy, const std::string& tenant,
                                const std::string& queue) {
  std::vector<std::string> same_tenant;
  for (const auto& q : policy.queues) {
    if (q.tenant == tenant && q.path.size() > tenant.size() + 1) {
      same_tenant.push_back(q.path.substr(tenant.size() + 1));
    }
  }
  std::string known = same_tenant.empty() ? fmt::format("tenant '{}' has no queues in it", tenant)
                                          : fmt::format("queues of tenant {}: {}", tenant,
                                                        fmt::join(same_tenant, ", "));
  return fmt::format("queue {}/{} does not exist in policy v{}; {} (see berth policy show)", tenant,
                     queue, policy.version, known);
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
  auto meta =
      db_.Prepare("INSERT OR REPLACE INTO meta(key, value) VALUES('active_policy_version', ?)");
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
                                                    std::optional<std::int64_t> base, TimeMs now) {
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
  if (auto st = tx.Commit(); !st) {
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
                                                 const std::string& comment, TimeMs now) {
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
  if (auto st = tx.Commit(); !st) {
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

Status SqliteStore::AddEvent(std::int64_t job_id, TimeMs t, model::JobState state,
                             std::string_view event, std::string_view message,
                             std::optional<std::int64_t> policy_version) {
  auto st = db_.Prepare(
      "INSERT INTO job_events(job_id, time_ms, state, event, message, policy_version) "
      "VALUES(?,?,?,?,?,?)");
  if (!st) return std::unexpected(st.error());
  return st->Bind(1, job_id)
      .Bind(2, t)
      .Bind(3, model::JobStateName(state))
      .Bind(4, event)
      .Bind(5, message)
      .Bind(6, policy_version)
      .Run();
}

Status SqliteStore::SetJobState(std::int64_t job_id, model::JobState state,
                                const model::Reason& reason) {
  auto st = db_.Prepare("UPDATE jobs SET state=?, reason=? WHERE id=?");
  if (!st) return std::unexpected(st.error());
  return st->Bind(1, model::JobStateName(state)).Bind(2, ReasonText(reason)).Bind(3, job_id).Run();
}

Result<std::int64_t> SqliteStore::CreateJob(const model::JobSpec& spec, TimeMs now,
                                            std::string_view submitted_by) {
  auto ids = CreateJobs(spec, now, submitted_by);
  if (!ids) return std::unexpected(ids.error());
  return ids->front();
}

Result<std::vector<std::int64_t>> SqliteStore::CreateJobs(const model::JobSpec& spec, TimeMs now,
                                                          std::string_view submitted_by) {
  Submission me{&spec, now, submitted_by};
  std::unique_lock lock(commit_mu_);
  queued_.push_back(&me);
  // Whoever finds no commit in flight takes everything queued so far and
  // commits it; the others wait for it, and the next batch forms meanwhile.
  while (!me.done) {
    if (committing_) {
      commit_cv_.wait(lock);
      continue;
    }
    committing_ = true;
    std::vector<Submission*> batch;
    batch.swap(queued_);
    lock.unlock();
    CommitSubmissions(batch);
    lock.lock();
    ++commit_stats_.commits;
    commit_stats_.submissions += batch.size();
    for (Submission* s : batch) s->done = true;
    committing_ = false;
    commit_cv_.notify_all();
  }
  return std::move(me.ids);
}

CommitStats SqliteStore::commit_stats() {
  std::lock_guard lock(commit_mu_);
  return commit_stats_;
}

void SqliteStore::CommitSubmissions(const std::vector<Submission*>& batch) {
  std::lock_guard lock(mu_);
  auto fail_all = [&](const Error& e) {
    for (Submission* s : batch) s->ids = std::unexpected(e);
  };
  // Checked here, under the store's lock, so a job cannot slip into a queue
  // that a policy change removes at the same moment.
  auto active = Active();
  if (!active) return fail_all(active.error());
  const model::Policy& policy = (*active)->policy;
  Transaction tx(db_);
  if (auto st = tx.Begin(); !st) return fail_all(st.error());
  auto next = db_.Prepare(
      "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name='jobs'), 0), "
      "COALESCE((SELECT MAX(id) FROM jobs), 0))");
  auto job_st = db_.Prepare(
      "INSERT INTO jobs(id, name, tenant, queue, spec, state, reason, submitted_ms, submitted_by, "
      "array_id) VALUES(?,?,?,?,?,?,?,?,?,?)");
  auto event_st = db_.Prepare(
      "INSERT INTO job_events(job_id, time_ms, state, event, message) VALUES(?,?,?,?,?)");
  // Read inside the transaction: submissions earlier in this batch count.
  auto counts_st = db_.Prepare(
      "SELECT COALESCE(SUM(n), 0), COALESCE(SUM(CASE WHEN submitted_by=? THEN n END), 0) "
      "FROM pending_counts WHERE tenant=?");
  if (!counts_st) return fail_all(counts_st.error());
  if (!next) return fail_all(next.error());
  if (!job_st) return fail_all(job_st.error());
  if (!event_st) return fail_all(event_st.error());
  auto row = next->Step();
  if (!row) return fail_all(row.error());
  // Ids are given, not left to AUTOINCREMENT, so an array's elements know
  // the array's id (the first's) before they are written. One writer holds
  // mu_, so nobody else takes these.
  std::int64_t id = next->Int(0) + 1;
  const std::string pending(model::JobStateName(model::JobState::kPending));
  const std::string queued = ReasonText({model::ReasonCode::kQueued, {}, {}});
  std::vector<Submission*> stored;
  for (Submission* sub : batch) {
    const model::JobSpec& spec = *sub->spec;
    if (policy.FindQueue(spec.tenant + "/" + spec.queue) == nullptr) {
      sub->ids = InvalidField("queue", UnknownQueueMessage(policy, spec.tenant, spec.queue));
      continue;
    }
    if (auto grants = model::CheckStorageGrants(policy, spec); !grants) {
      sub->ids = std::unexpected(grants.error());
      continue;
    }
    if (auto limits = model::CheckSpecLimits(policy, spec, model::ToJson(spec).dump().size());
        !limits) {
      sub->ids = std::unexpected(limits.error());
      continue;
    }
    if (auto limits = CheckPendingLimits(*counts_st, policy, spec, sub->by); !limits) {
      sub->ids = std::unexpected(limits.error());
      continue;
    }
    // One submission's failure rolls back only its own rows.
    if (auto sp = db_.Exec("SAVEPOINT submission"); !sp) {
      sub->ids = std::unexpected(sp.error());
      continue;
    }
    const std::uint32_t count = model::JobCount(spec);
    const std::int64_t first = id;
    const std::string message = fmt::format("submitted to queue {}/{}", spec.tenant, spec.queue);
    // The element specs differ only in array_element and the parameter
    // set: the rest is printed once.
    model::JobSpec base = model::ArrayElementSpec(spec, 0);
    json printed = model::ToJson(base);
    std::vector<std::int64_t> ids;
    ids.reserve(count);
    Status st = Ok();
    for (std::uint32_t i = 0; i < count && st; ++i, ++id) {
      if (spec.array) {
        json element = printed;
        element["array_element"] = {
            {"id", first}, {"index", spec.array->first + i}, {"size", spec.array->count}};
        if (i < spec.array->params.size()) {
          auto env = spec.env;
          for (const auto& [k, v] : spec.array->params[i]) env[k] = v;
          element["env"] = env;
        }
        job_st->Bind(5, element.dump());
        job_st->Bind(10, first);
      } else {
        job_st->Bind(5, printed.dump());
        job_st->BindNull(10);
      }
      st = job_st->Bind(1, id)
               .Bind(2, spec.name)
               .Bind(3, spec.tenant)
               .Bind(4, spec.queue)
               .Bind(6, pending)
               .Bind(7, queued)
               .Bind(8, sub->now)
               .Bind(9, sub->by)
               .Run();
      job_st->Reset();
      if (!st) break;
      st = event_st->Bind(1, id)
               .Bind(2, sub->now)
               .Bind(3, pending)
               .Bind(4, std::string_view("Submitted"))
               .Bind(5, message)
               .Run();
      event_st->Reset();
      ids.push_back(id);
    }
    if (!st) {
      (void)db_.Exec("ROLLBACK TO submission; RELEASE submission");
      id = first;
      sub->ids = std::unexpected(st.error());
      continue;
    }
    if (auto rel = db_.Exec("RELEASE submission"); !rel) {
      sub->ids = std::unexpected(rel.error());
      continue;
    }
    sub->ids = std::move(ids);
    stored.push_back(sub);
  }
  if (stored.empty()) return;  // nothing to commit: the transaction rolls back
  if (auto st = tx.Commit(); !st) {
    for (Submission* sub : stored) sub->ids = std::unexpected(st.error());
  }
}

Status SqliteStore::CheckPendingLimits(Statement& counts, const model::Policy& policy,
                                       const model::JobSpec& spec, std::string_view by) {
  counts.Bind(1, by).Bind(2, spec.tenant);
  auto row = counts.Step();
  if (!row) return std::unexpected(row.error());
  const std::int64_t tenant_pending = *row ? counts.Int(0) : 0;
  const std::int64_t member_pending = *row ? counts.Int(1) : 0;
  counts.Reset();
  const std::int64_t adds = model::JobCount(spec);
  const model::EffectiveLimit member =
      model::LimitOf(policy, spec.tenant, &model::Limits::pending_jobs_per_member);
  // Submissions with no identity (tests, tools on the store) have no member.
  if (!by.empty() && member_pending + adds > member.value) {
    return Fail(
        Code::kResourceExhausted,
        fmt::format("{} has {} pending jobs in tenant {} and this submission adds {}; "
                    "the limit is {} per member (limit pending_jobs_per_member, {}). "
                    "Wait for some to start, or cancel some",
                    by, member_pending, spec.tenant, adds, member.value, member.Describe()));
  }
  const model::EffectiveLimit tenant =
      model::LimitOf(policy, spec.tenant, &model::Limits::pending_jobs);
  if (tenant_pending + adds > tenant.value) {
    return Fail(Code::kResourceExhausted,
                fmt::format("tenant {} has {} pending jobs and this submission adds {}; the "
                            "limit is {} (limit pending_jobs, {}). Wait for some to start, or "
                            "cancel some",
                            spec.tenant, tenant_pending, adds, tenant.value, tenant.Describe()));
  }
  return Ok();
}

Result<PendingCount> SqliteStore::PendingCounts(const std::string& tenant,
                                                std::string_view submitted_by) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(
      "SELECT COALESCE(SUM(n), 0), COALESCE(SUM(CASE WHEN submitted_by=? THEN n END), 0) "
      "FROM pending_counts WHERE tenant=?");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, submitted_by).Bind(2, tenant);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  return PendingCount{st->Int(0), st->Int(1)};
}

Result<std::vector<RunRecord>> SqliteStore::LoadRuns(std::string_view where, std::int64_t arg) {
  auto st = db_.Prepare(fmt::format(
      "SELECT {} FROM runs WHERE {} ORDER BY job_id, attempt, replica", kRunColumns, where));
  if (!st) return std::unexpected(st.error());
  if (where.find('?') != std::string_view::npos) st->Bind(1, arg);
  std::vector<RunRecord> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    out.push_back(ReadRun(*st));
  }
  return out;
}

Result<std::optional<JobRecord>> SqliteStore::LoadJob(std::int64_t id, bool with_timeline) {
  auto st = db_.Prepare(fmt::format("SELECT {} FROM jobs WHERE id=?", kJobColumns));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, id);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<JobRecord>{};
  JobRecord job = ReadJob(*st);
  auto runs = LoadRuns("job_id=?", id);
  if (!runs) return std::unexpected(runs.error());
  job.runs = std::move(*runs);
  if (with_timeline) {
    auto ev = db_.Prepare(
        "SELECT time_ms, state, event, message, policy_version FROM job_events WHERE job_id=? "
        "ORDER BY id");
    if (!ev) return std::unexpected(ev.error());
    ev->Bind(1, id);
    for (;;) {
      auto r = ev->Step();
      if (!r) return std::unexpected(r.error());
      if (!*r) break;
      job.timeline.push_back({ev->Int(0),
                              model::ParseJobState(ev->Text(1)).value_or(model::JobState::kPending),
                              ev->Text(2), ev->Text(3), ev->OptInt(4)});
    }
  }
  return std::optional<JobRecord>(std::move(job));
}

Result<JobRecord> SqliteStore::GetJob(std::int64_t id) {
  std::lock_guard lock(mu_);
  auto job = LoadJob(id, /*with_timeline=*/true);
  if (!job) return std::unexpected(job.error());
  if (!*job) return Fail(Code::kNotFound, fmt::format("job {} not found", id));
  return std::move(**job);
}

Result<std::string> SqliteStore::JobTenant(std::int64_t id) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare("SELECT tenant FROM jobs WHERE id=?");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, id);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return Fail(Code::kNotFound, fmt::format("job {} not found", id));
  return st->Text(0);
}

Result<std::vector<JobRecord>> SqliteStore::PendingJobs() {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(fmt::format(
      "SELECT {} FROM jobs WHERE state='Pending' ORDER BY submitted_ms, id", kJobColumns));
  if (!st) return std::unexpected(st.error());
  std::vector<JobRecord> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    out.push_back(ReadJob(*st, &specs_));
  }
  return out;
}

Result<std::vector<RunRecord>> SqliteStore::ActiveRuns() {
  std::lock_guard lock(mu_);
  return LoadRuns("state IN ('Starting','Running')", 0);
}

Result<model::JobState> SqliteStore::CancelLocked(std::int64_t id, const std::string& by,
                                                  TimeMs now) {
  auto job = LoadJob(id, false);
  if (!job) return std::unexpected(job.error());
  if (!*job) return Fail(Code::kNotFound, fmt::format("job {} not found", id));
  auto update = control::CancelJob(**job, by, now);
  if (!update) return std::unexpected(update.error());
  BERTH_RETURN_IF_ERROR(PersistRunStops(update->job));
  BERTH_RETURN_IF_ERROR(PersistJob(*update));
  return (*job)->state;
}

Result<JobRecord> SqliteStore::CancelJob(std::int64_t id, const std::string& by, TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto was = CancelLocked(id, by, now);
  if (!was) return std::unexpected(was.error());
  BERTH_RETURN_IF_ERROR(tx.Commit());
  auto after = LoadJob(id, true);
  if (!after) return std::unexpected(after.error());
  return std::move(**after);
}

Result<ArrayCancel> SqliteStore::CancelArray(std::int64_t array_id, const std::string& by,
                                             TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  ArrayCancel out;
  auto st = db_.Prepare("SELECT id, state, tenant FROM jobs WHERE array_id=? ORDER BY id");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, array_id);
  std::vector<std::int64_t> open;
  bool any = false;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    any = true;
    out.tenant = st->Text(2);
    auto state = model::ParseJobState(st->Text(1));
    if (state && !model::IsTerminal(*state)) open.push_back(st->Int(0));
  }
  if (!any) return Fail(Code::kNotFound, fmt::format("array {} not found", array_id));
  for (std::int64_t id : open) {
    auto was = CancelLocked(id, by, now);
    if (!was) return std::unexpected(was.error());
    ++(*was == model::JobState::kPending ? out.cancelled : out.stopping);
  }
  BERTH_RETURN_IF_ERROR(tx.Commit());
  return out;
}

Status SqliteStore::ApplyPlan(const sched::Plan& plan, const std::vector<NodeRecord>& nodes,
                              std::int64_t policy_version, TimeMs now) {
  control::NodeIndex by_name;
  for (const auto& n : nodes) by_name[n.info.name] = &n.info;

  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  // Evictions, placements and reasons are one decision: all of it is
  // durable, or none of it.
  for (const auto& e : plan.evictions) {
    auto job = LoadJob(e.job_id, false);
    if (!job) return std::unexpected(job.error());
    if (!*job) continue;
    std::optional<JobRecord> by;
    if (e.cause == sched::EvictionCause::kMove) {
      auto loaded = LoadJob(e.by_job, false);
      if (!loaded) return std::unexpected(loaded.error());
      by = std::move(*loaded);
    }
    auto update = control::EvictJob(**job, e, by ? &*by : nullptr, now);
    if (!update) continue;
    BERTH_RETURN_IF_ERROR(PersistRunStops(update->victim.job));
    BERTH_RETURN_IF_ERROR(PersistJob(update->victim));
    if (update->by) BERTH_RETURN_IF_ERROR(PersistJob(*update->by));
  }
  if (!plan.evictions.empty()) Failpoint("plan.after_evictions");
  for (const auto& p : plan.placements) {
    auto job = LoadJob(p.job_id, false);
    if (!job) return std::unexpected(job.error());
    if (!*job) continue;
    auto update = control::PlaceJob(**job, p, by_name, policy_version, now);
    if (!update) continue;
    BERTH_RETURN_IF_ERROR(InsertRuns(update->job));
    BERTH_RETURN_IF_ERROR(PersistJob(*update));
  }
  for (const auto& d : plan.pending) {
    auto st = db_.Prepare("UPDATE jobs SET reason=? WHERE id=? AND state='Pending' AND reason<>?");
    if (!st) return std::unexpected(st.error());
    auto text = ReasonText(d.reason);
    BERTH_RETURN_IF_ERROR(st->Bind(1, text).Bind(2, d.job_id).Bind(3, text).Run());
  }
  return tx.Commit();
}

Status SqliteStore::PersistJob(const model::JobUpdate& update) {
  const JobRecord& j = update.job;
  auto st = db_.Prepare(
      "UPDATE jobs SET state=?, reason=?, started_ms=?, finished_ms=?, exit_code=?, signal=?, "
      "failures=?, retry_after_ms=?, attempts=?, policy_version=?, cancel_requested=?, "
      "cancelled_by=? WHERE id=?");
  if (!st) return std::unexpected(st.error());
  auto wide = [](std::optional<std::int32_t> v) {
    return v ? std::optional<std::int64_t>(*v) : std::nullopt;
  };
  BERTH_RETURN_IF_ERROR(st->Bind(1, model::JobStateName(j.state))
                            .Bind(2, ReasonText(j.reason))
                            .Bind(3, j.started_at_ms)
                            .Bind(4, j.finished_at_ms)
                            .Bind(5, wide(j.exit_code))
                            .Bind(6, wide(j.signal))
                            .Bind(7, std::int64_t{j.failures})
                            .Bind(8, j.retry_after_ms)
                            .Bind(9, std::int64_t{j.attempts})
                            .Bind(10, j.policy_version)
                            .Bind(11, std::int64_t{j.cancel_requested ? 1 : 0})
                            .Bind(12, j.cancelled_by)
                            .Bind(13, j.id)
                            .Run());
  for (const auto& e : update.events) {
    BERTH_RETURN_IF_ERROR(AddEvent(j.id, e.time_ms, e.state, e.event, e.message, e.policy_version));
  }
  return Ok();
}

Status SqliteStore::PersistRunStops(const JobRecord& job) {
  for (const auto& r : job.runs) {
    if (!r.stop_requested || r.state == model::RunState::kExited) continue;
    auto st = db_.Prepare(
        "UPDATE runs SET stop_requested=1, stopped_for=?, failure_class=?, stop_detail=? "
        "WHERE run_id=?");
    if (!st) return std::unexpected(st.error());
    BERTH_RETURN_IF_ERROR(st->Bind(1, r.stopped_for)
                              .Bind(2, r.failure_class)
                              .Bind(3, r.stop_detail)
                              .Bind(4, r.run_id)
                              .Run());
  }
  return Ok();
}

Status SqliteStore::InsertRuns(const JobRecord& job) {
  for (const auto& r : job.runs) {
    auto ins = db_.Prepare(
        "INSERT INTO runs(run_id, job_id, replica, attempt, node, gpu_indices, gpu_uuids, "
        "gpu_share_millis, gpu_share_bytes, state) VALUES(?,?,?,?,?,?,?,?,?,?)");
    if (!ins) return std::unexpected(ins.error());
    BERTH_RETURN_IF_ERROR(ins->Bind(1, r.run_id)
                              .Bind(2, r.job_id)
                              .Bind(3, std::int64_t{r.replica})
                              .Bind(4, std::int64_t{r.attempt})
                              .Bind(5, r.node)
                              .Bind(6, json(r.gpu_indices).dump())
                              .Bind(7, json(r.gpu_uuids).dump())
                              .Bind(8, std::int64_t{r.gpu_share_millis})
                              .Bind(9, static_cast<std::int64_t>(r.gpu_share_bytes))
                              .Bind(10, model::RunStateName(r.state))
                              .Run());
  }
  return Ok();
}

Status SqliteStore::MarkRunStarted(const std::string& run_id, std::int64_t pid, TimeMs started_at,
                                   TimeMs now) {
  (void)now;
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto st = db_.Prepare("SELECT job_id FROM runs WHERE run_id=?");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, run_id);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return Fail(Code::kNotFound, fmt::format("run {} not found", run_id));
  auto job = LoadJob(st->Int(0), false);
  if (!job) return std::unexpected(job.error());
  if (!*job) return tx.Commit();
  auto update = control::StartRun(**job, run_id, pid, started_at);
  if (!update) return tx.Commit();  // already known
  auto up = db_.Prepare("UPDATE runs SET state=?, pid=?, started_ms=? WHERE run_id=?");
  if (!up) return std::unexpected(up.error());
  BERTH_RETURN_IF_ERROR(up->Bind(1, model::RunStateName(update->run.state))
                            .Bind(2, update->run.pid)
                            .Bind(3, update->run.started_at_ms)
                            .Bind(4, run_id)
                            .Run());
  BERTH_RETURN_IF_ERROR(PersistJob(update->job));
  return tx.Commit();
}

Result<JobRecord> SqliteStore::MarkRunExited(const RunExit& exit, TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto st = db_.Prepare("SELECT job_id FROM runs WHERE run_id=?");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, exit.run_id);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return Fail(Code::kNotFound, fmt::format("run {} not found", exit.run_id));
  const std::int64_t job_id = st->Int(0);
  auto job = LoadJob(job_id, false);
  if (!job) return std::unexpected(job.error());
  if (!*job) return Fail(Code::kNotFound, fmt::format("job {} not found", job_id));
  // Decided by control::RecordExit (and SettleAttempt when it was the last
  // run of its attempt); an exit already recorded changes nothing.
  if (auto update = control::RecordExit(**job, exit, now)) {
    const RunRecord& run = update->run;
    auto up = db_.Prepare(
        "UPDATE runs SET state=?, exit_code=?, signal=?, finished_ms=?, started_ms=?, "
        "stopped_for=?, start_error=?, clean_stop=?, failure_class=?, last_checkpoint_ms=? "
        "WHERE run_id=?");
    if (!up) return std::unexpected(up.error());
    auto wide = [](std::optional<std::int32_t> v) {
      return v ? std::optional<std::int64_t>(*v) : std::nullopt;
    };
    BERTH_RETURN_IF_ERROR(up->Bind(1, model::RunStateName(run.state))
                              .Bind(2, wide(run.exit_code))
                              .Bind(3, wide(run.signal))
                              .Bind(4, run.finished_at_ms)
                              .Bind(5, run.started_at_ms)
                              .Bind(6, run.stopped_for)
                              .Bind(7, run.start_error)
                              .Bind(8, run.clean_stop
                                           ? std::optional<std::int64_t>(*run.clean_stop ? 1 : 0)
                                           : std::nullopt)
                              .Bind(9, run.failure_class)
                              .Bind(10, run.last_checkpoint_ms)
                              .Bind(11, run.run_id)
                              .Run());
    BERTH_RETURN_IF_ERROR(PersistRunStops(update->job.job));
    BERTH_RETURN_IF_ERROR(PersistJob(update->job));
  }
  BERTH_RETURN_IF_ERROR(tx.Commit());
  auto after = LoadJob(job_id, false);
  if (!after) return std::unexpected(after.error());
  return std::move(**after);
}

Status SqliteStore::RecordCheckpoint(const std::string& run_id, TimeMs at) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(
      "UPDATE runs SET last_checkpoint_ms=? WHERE run_id=? AND "
      "(last_checkpoint_ms IS NULL OR last_checkpoint_ms < ?)");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, at).Bind(2, run_id).Bind(3, at).Run());
  auto found = db_.Prepare("SELECT 1 FROM runs WHERE run_id=?");
  if (!found) return std::unexpected(found.error());
  found->Bind(1, run_id);
  auto row = found->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return Fail(Code::kNotFound, fmt::format("run {} not found", run_id));
  return Ok();
}

Status SqliteStore::RequestStop(std::int64_t job_id, const std::string& why, TimeMs now) {
  (void)now;
  auto cause = model::ParseStopCause(why);
  if (!cause || *cause == model::StopCause::kNone) {
    return Fail(Code::kInvalidArgument, fmt::format("'{}' is no stop cause", why));
  }
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto job = LoadJob(job_id, false);
  if (!job) return std::unexpected(job.error());
  if (*job) {
    if (auto update = control::StopJob(**job, *cause)) {
      BERTH_RETURN_IF_ERROR(PersistRunStops(update->job));
    }
  }
  return tx.Commit();
}

Result<std::optional<RunRecord>> SqliteStore::GetRun(const std::string& run_id) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(fmt::format("SELECT {} FROM runs WHERE run_id=?", kRunColumns));
  if (!st) return std::unexpected(st.error());
  st->Bind(1, run_id);
  auto row = st->Step();
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<RunRecord>{};
  return std::optional<RunRecord>(ReadRun(*st));
}

Result<std::vector<RunUsage>> SqliteStore::FinishedRunsSince(TimeMs since) {
  std::lock_guard lock(mu_);
  auto st = db_.Prepare(
      "SELECT json_extract(j.spec, '$.tenant'), json_extract(j.spec, '$.queue'), "
      "CASE WHEN r.gpu_share_millis > 0 THEN r.gpu_share_millis "
      "ELSE json_array_length(r.gpu_indices) * 1000 END, r.started_ms, r.finished_ms FROM runs r "
      "JOIN jobs j ON j.id = r.job_id WHERE r.finished_ms >= ? AND r.started_ms IS NOT NULL "
      "ORDER BY r.finished_ms, r.run_id");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, since);
  std::vector<RunUsage> out;
  while (true) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    RunUsage u;
    u.tenant = st->Text(0);
    u.queue = st->Text(1);
    u.mgpu = st->Int(2);
    u.started_ms = st->Int(3);
    u.finished_ms = st->Int(4);
    out.push_back(std::move(u));
  }
  return out;
}

Status SqliteStore::UpsertNode(const model::NodeInfo& info, TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto st = db_.Prepare(
      "INSERT INTO nodes(name, info, state, registered_ms, state_changed_ms) "
      "VALUES(?1, ?2, 'Ready', ?3, ?3) ON CONFLICT(name) DO UPDATE SET info=?2, "
      "state_changed_ms=CASE WHEN state='Ready' THEN state_changed_ms ELSE ?3 END, state='Ready'");
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
    Cordon cordon{c->Text(2), c->Text(3), c->Text(4), c->Int(5) != 0, c->Int(6)};
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
      "WHERE node=? ORDER BY id DESC LIMIT ?) ORDER BY id");
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
                              const Cordon& cordon, TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto info = LoadNodeInfo(node);
  if (!info) return std::unexpected(info.error());
  if (gpu) BERTH_RETURN_IF_ERROR(CheckGpu(*info, *gpu));
  auto st = db_.Prepare(
      "INSERT OR REPLACE INTO cordons(node, gpu, kind, reason, by, automatic, at_ms) "
      "VALUES(?,?,?,?,?,?,?)");
  if (!st) return std::unexpected(st.error());
  BERTH_RETURN_IF_ERROR(st->Bind(1, node)
                            .Bind(2, gpu ? std::int64_t{*gpu} : std::int64_t{-1})
                            .Bind(3, cordon.kind)
                            .Bind(4, cordon.reason)
                            .Bind(5, cordon.by)
                            .Bind(6, std::int64_t{cordon.automatic ? 1 : 0})
                            .Bind(7, now)
                            .Run());
  const std::string event = gpu ? "GpuCordoned" : cordon.kind == "drain" ? "Draining" : "Cordoned";
  BERTH_RETURN_IF_ERROR(
      AddNodeEvent(node, now, event,
                   fmt::format("{} {} by {}{}{}", Target(node, gpu),
                               cordon.kind == "drain" ? "drained" : "cordoned", cordon.by,
                               cordon.automatic ? " (automatically)" : "",
                               cordon.reason.empty() ? "" : ": " + cordon.reason)));
  return tx.Commit();
}

Result<bool> SqliteStore::Uncordon(const std::string& node, std::optional<std::uint32_t> gpu,
                                   const std::string& by, TimeMs now) {
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
  BERTH_RETURN_IF_ERROR(tx.Commit());
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

Result<std::vector<std::int64_t>> SqliteStore::StopRunsOnGpu(const std::string& node,
                                                             std::uint32_t gpu,
                                                             const std::string& detail,
                                                             TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto ids = ActiveJobsOn(node);
  if (!ids) return std::unexpected(ids.error());
  std::vector<std::int64_t> jobs;
  for (auto id : *ids) {
    auto job = LoadJob(id, false);
    if (!job) return std::unexpected(job.error());
    if (!*job) continue;
    auto update = control::FailGpu(**job, node, gpu, detail, now);
    if (!update) continue;
    BERTH_RETURN_IF_ERROR(PersistRunStops(update->job));
    BERTH_RETURN_IF_ERROR(PersistJob(*update));
    jobs.push_back(id);
  }
  BERTH_RETURN_IF_ERROR(tx.Commit());
  return jobs;
}

Result<std::vector<std::int64_t>> SqliteStore::StopRunsOnNode(const std::string& node, TimeMs now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  auto ids = ActiveJobsOn(node);
  if (!ids) return std::unexpected(ids.error());
  std::vector<std::int64_t> jobs;
  for (auto id : *ids) {
    auto job = LoadJob(id, false);
    if (!job) return std::unexpected(job.error());
    if (!*job) continue;
    auto update = control::DrainJob(**job, node, now);
    if (!update) continue;
    BERTH_RETURN_IF_ERROR(PersistRunStops(update->job));
    BERTH_RETURN_IF_ERROR(PersistJob(*update));
    jobs.push_back(id);
  }
  BERTH_RETURN_IF_ERROR(tx.Commit());
  return jobs;
}

Result<std::vector<std::int64_t>> SqliteStore::ActiveJobsOn(const std::string& node) {
  auto st = db_.Prepare(
      "SELECT DISTINCT job_id FROM runs WHERE node=? AND state IN ('Starting','Running') "
      "ORDER BY job_id");
  if (!st) return std::unexpected(st.error());
  st->Bind(1, node);
  std::vector<std::int64_t> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    out.push_back(st->Int(0));
  }
  return out;
}

}  // namespace berth::store
