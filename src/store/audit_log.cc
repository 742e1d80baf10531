#include "store/audit_log.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "store/sqlite_scope.h"

namespace berth::store {
namespace {

constexpr std::string_view kAuditColumns =
    "seq, time_ms, actor, tenant, action, object, before_json, after_json, request_id, source, "
    "outcome, prev_hash, hash";

AuditEntry ReadEntry(const Statement& st) {
  AuditEntry e;
  e.seq = st.Int(0);
  e.time_ms = st.Int(1);
  e.actor = st.Text(2);
  e.tenant = st.Text(3);
  e.action = st.Text(4);
  e.object = st.Text(5);
  e.before = st.Text(6);
  e.after = st.Text(7);
  e.request_id = st.Text(8);
  e.source = st.Text(9);
  e.outcome = st.Text(10);
  e.prev_hash = st.Text(11);
  e.hash = st.Text(12);
  return e;
}

}  // namespace

Result<std::unique_ptr<AuditLog>> AuditLog::Open(const StoreLocation& where) {
  auto db = OpenStateDatabase(where);
  if (!db) return std::unexpected(db.error());
  BERTH_RETURN_IF_ERROR(EnsureAuditSchema(*db));
  auto reader = OpenReadDatabase(where);
  if (!reader) return std::unexpected(reader.error());
  return std::unique_ptr<AuditLog>(
      new AuditLog(std::move(*db), std::move(*reader), where.audit_head()));
}

AuditLog::~AuditLog() {
  if (auto st = FlushAuditHead(head_path_); !st) spdlog::error("{}", st.error().message);
}

Result<AuditEntry> AuditLog::Append(AuditEntry entry) {
  Pending me{&entry};
  std::unique_lock lock(queue_mu_);
  queued_.push_back(&me);
  // Whoever finds no commit in flight commits everything queued so far.
  while (!me.done) {
    if (committing_) {
      queue_cv_.wait(lock);
      continue;
    }
    committing_ = true;
    // At most kMaxAuditBatch at once: the head file's lag after a crash is
    // counted in batches (kMaxAuditLag).
    const std::size_t n = std::min(queued_.size(), kMaxAuditBatch);
    std::vector<Pending*> batch(queued_.begin(), queued_.begin() + static_cast<std::ptrdiff_t>(n));
    queued_.erase(queued_.begin(), queued_.begin() + static_cast<std::ptrdiff_t>(n));
    lock.unlock();
    Status st = [&] {
      std::lock_guard db_lock(mu_);
      return CommitBatch(batch);
    }();
    lock.lock();
    for (Pending* p : batch) {
      p->status = st;
      p->done = true;
    }
    committing_ = false;
    queue_cv_.notify_all();
  }
  if (!me.status) return std::unexpected(me.status.error());
  return entry;
}

Status AuditLog::CommitBatch(const std::vector<Pending*>& batch) {
  Transaction tx(db_);
  BERTH_RETURN_IF_ERROR(tx.Begin());
  std::vector<AuditEntry*> records;
  records.reserve(batch.size());
  for (Pending* p : batch) records.push_back(p->entry);
  auto chained = AuditAppend::Chain(db_, head_path_, records);
  if (!chained) return std::unexpected(chained.error());
  BERTH_RETURN_IF_ERROR(tx.Commit());
  chained->Publish();
  return Ok();
}

Result<std::vector<AuditEntry>> AuditLog::Query(const AuditFilter& filter) {
  // The read connection: a long query never holds up an append.
  std::lock_guard lock(read_mu_);
  std::string sql = fmt::format("SELECT {} FROM audit_log WHERE 1=1", kAuditColumns);
  if (filter.since) sql += " AND time_ms >= ?1";
  if (filter.until) sql += " AND time_ms < ?2";
  if (!filter.actor.empty()) sql += " AND actor = ?3";
  if (!filter.tenant.empty()) sql += " AND tenant = ?4";
  const bool prefix = !filter.action.empty() && filter.action.back() == '.';
  if (!filter.action.empty())
    sql += prefix ? " AND substr(action, 1, length(?5)) = ?5" : " AND action = ?5";
  if (filter.after_seq) sql += " AND seq < ?7";
  sql += ScopeSql(filter.tenants, "tenant", 8, /*keep_untenanted=*/true);
  sql += " ORDER BY seq DESC LIMIT ?6";
  auto st = reader_.Prepare(sql);
  if (!st) return std::unexpected(st.error());
  if (filter.since) st->Bind(1, *filter.since);
  if (filter.until) st->Bind(2, *filter.until);
  if (!filter.actor.empty()) st->Bind(3, filter.actor);
  if (!filter.tenant.empty()) st->Bind(4, filter.tenant);
  if (!filter.action.empty()) st->Bind(5, filter.action);
  st->Bind(6, static_cast<std::int64_t>(filter.limit));
  if (filter.after_seq) st->Bind(7, *filter.after_seq);
  BindScope(*st, 8, filter.tenants);
  std::vector<AuditEntry> out;
  for (;;) {
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (!*row) break;
    out.push_back(ReadEntry(*st));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

Result<AuditVerdict> AuditLog::Verify() {
  std::lock_guard lock(mu_);
  // The file is checked as of every commit this process made, not as of
  // its writer thread's last write.
  BERTH_RETURN_IF_ERROR(FlushAuditHead(head_path_));
  AuditVerdict v;
  auto bad = [&v](std::optional<std::int64_t> seq, std::string problem) {
    if (!v.ok) return;  // the first problem is the one reported
    v.ok = false;
    v.first_bad_seq = seq;
    v.problem = std::move(problem);
  };
  // Hashes by seq, for checking the remembered heads afterwards.
  std::map<std::int64_t, std::string> hashes;
  {
    auto st = db_.Prepare(fmt::format("SELECT {} FROM audit_log ORDER BY seq", kAuditColumns));
    if (!st) return std::unexpected(st.error());
    std::int64_t expected = 1;
    std::string prev(kAuditGenesisHash);
    for (;;) {
      auto row = st->Step();
      if (!row) return std::unexpected(row.error());
      if (!*row) break;
      AuditEntry e = ReadEntry(*st);
      ++v.records;
      hashes[e.seq] = e.hash;
      v.head = AuditHead{e.seq, e.hash};
      if (e.seq != expected) {
        bad(expected, e.seq > expected
                          ? fmt::format("record {} is missing: the log goes from record {} to {}",
                                        expected, expected - 1, e.seq)
                          : fmt::format("record {} is out of sequence", e.seq));
      } else if (e.prev_hash != prev) {
        bad(e.seq, fmt::format("its prev_hash does not match record {}'s hash: a record before it "
                               "was removed, reordered or rewritten",
                               e.seq - 1));
      } else {
        auto hash = AuditHash(e);
        if (!hash) return std::unexpected(hash.error());
        if (*hash != e.hash) {
          bad(e.seq, "its contents do not match its hash: the record was edited");
        }
      }
      prev = e.hash;
      expected = e.seq + 1;
    }
  }

  // From which record on the head file may not hold the chain yet, as of the
  // last commit (an older berthd kept none).
  std::optional<std::int64_t> batch_first;
  {
    auto st = db_.Prepare("SELECT value FROM meta WHERE key='audit_batch_first'");
    if (!st) return std::unexpected(st.error());
    auto row = st->Step();
    if (!row) return std::unexpected(row.error());
    if (*row) batch_first = st->OptInt(0);
  }
  // The chain alone cannot see its tail cut off (or cut and re-grown):
  // compare it with the heads remembered outside its rows.
  auto check_head = [&](const AuditHead& h, std::string_view where, bool may_lag) {
    if (h.seq > v.head.seq) {
      bad(v.head.seq + 1,
          fmt::format("the log ends at record {} but {} remembers record {}: records {}..{} were "
                      "removed from the end",
                      v.head.seq, where, h.seq, v.head.seq + 1, h.seq));
      return;
    }
    if (h.seq <= 0) return;
    auto it = hashes.find(h.seq);
    if (it == hashes.end()) return;  // a gap, already reported by the chain
    if (it->second != h.hash) {
      bad(h.seq, fmt::format("record {} differs from the one {} remembers: the log was rewritten "
                             "at or before it",
                             h.seq, where));
      return;
    }
    if (h.seq < v.head.seq) {
      // The file is written after commits: a crash in between leaves it at
      // or after the head the meta table says it may still hold (at most
      // kMaxAuditLag records behind).
      const bool last_batch = h.seq == v.head.seq - 1 ||
                              (batch_first && h.seq >= *batch_first - 1 &&
                               v.head.seq - h.seq <= static_cast<std::int64_t>(kMaxAuditLag));
      if (may_lag && last_batch) {
        v.notes.push_back(fmt::format(
            "{} is {} record{} behind (berthd stopped between a commit and the file write)", where,
            v.head.seq - h.seq, v.head.seq - h.seq == 1 ? "" : "s"));
      } else {
        bad(h.seq + 1, fmt::format("records {}..{} come after the head {} remembers (record {}): "
                                   "they were added behind Berth's back",
                                   h.seq + 1, v.head.seq, where, h.seq));
      }
    }
  };
  auto meta = AuditMetaHead(db_);
  if (!meta) return std::unexpected(meta.error());
  v.meta_head = *meta;
  if (v.meta_head) {
    check_head(*v.meta_head, "the meta table", false);
  } else if (v.records > 0) {
    bad(std::nullopt, "the meta table remembers no head although the log has records");
  }
  if (head_path_.empty()) {
    // PostgreSQL: the head is remembered in the database only. Someone who
    // can write the database can cut the tail and move the meta head with
    // it; the chain still shows any edit, removal or reordering before it.
    v.notes.push_back(
        "the head is remembered in the database only (PostgreSQL): a cut at the end of the log "
        "made together with the meta table is not visible to this check");
    return v;
  }
  auto file = AuditFileHead(head_path_);
  if (!file) {
    bad(std::nullopt, file.error().message);
  } else {
    v.file_head = *file;
  }
  if (v.file_head) {
    check_head(*v.file_head, head_path_.filename().string(), true);
  } else if (file && v.records > 1) {
    bad(std::nullopt,
        fmt::format("{} is missing although the log has records", head_path_.string()));
  } else if (file && v.records == 1) {
    v.notes.push_back(fmt::format("{} is missing; it is written after the first record",
                                  head_path_.filename().string()));
  }
  return v;
}

}  // namespace berth::store
