// The audit chain: records append with a hash chain, and every way of
// quietly rewriting the table through a second connection (an edit, a
// deletion, a swap, a cut tail with records appended after it) is found by
// Verify, which names the first bad record. Records committed with the
// changes they record, on the stores' own connections, extend the same
// chain.
#include "store/audit_log.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "store/audit_chain.h"
#include "store/identity_store.h"
#include "store/meter_store.h"
#include "store/sqlite_store.h"

namespace berth::store {
namespace {

class AuditLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-audit-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // The store first, as berthd does: the audit log shares its database.
    auto s = SqliteStore::Open(dir_, 1000);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    store_ = std::move(*s);
    auto log = AuditLog::Open(dir_);
    ASSERT_TRUE(log.has_value()) << log.error().message;
    log_ = std::move(*log);
  }
  void TearDown() override {
    log_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  AuditEntry Entry(int i) {
    AuditEntry e;
    e.time_ms = 1'700'000'000'000 + i * 1000;
    e.actor = i % 2 == 0 ? "alice" : "bob";
    e.tenant = i % 3 == 0 ? "vision" : "";
    e.action = "job.submit";
    e.object = "job/" + std::to_string(i);
    e.after = R"({"state":"Pending"})";
    e.request_id = "req-" + std::to_string(i);
    e.source = "127.0.0.1";
    e.outcome = "ok";
    return e;
  }
  // Appends n records and waits for the head file to hold them, as it does
  // a write after the last commit: what follows acts on a settled log.
  void AppendN(int n) {
    for (int i = 1; i <= n; ++i) {
      auto e = log_->Append(Entry(i));
      ASSERT_TRUE(e.has_value()) << e.error().message;
    }
    auto flushed = FlushAuditHead(log_->head_path());
    ASSERT_TRUE(flushed.has_value()) << flushed.error().message;
  }
  // SQL on a connection of its own, as someone with the database file would.
  void Tamper(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "berth.db").c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char* err = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    std::string msg = err != nullptr ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << msg;
  }
  AuditEntry Row(std::int64_t seq) {
    auto all = log_->Query(AuditFilter{});
    EXPECT_TRUE(all.has_value());
    for (const auto& e : *all) {
      if (e.seq == seq) return e;
    }
    ADD_FAILURE() << "no record " << seq;
    return {};
  }
  // An INSERT of `e` as it stands (seq, hashes and all).
  static std::string InsertSql(const AuditEntry& e) {
    auto q = [](const std::string& s) { return "'" + s + "'"; };
    return "INSERT INTO audit_log(seq, time_ms, actor, tenant, action, object, before_json, "
           "after_json, request_id, source, outcome, prev_hash, hash) VALUES(" +
           std::to_string(e.seq) + "," + std::to_string(e.time_ms) + "," + q(e.actor) + "," +
           q(e.tenant) + "," + q(e.action) + "," + q(e.object) + "," + q(e.before) + "," +
           q(e.after) + "," + q(e.request_id) + "," + q(e.source) + "," + q(e.outcome) + "," +
           q(e.prev_hash) + "," + q(e.hash) + ");";
  }
  AuditVerdict Verify() {
    auto v = log_->Verify();
    EXPECT_TRUE(v.has_value()) << v.error().message;
    return v.value_or(AuditVerdict{});
  }

  std::filesystem::path dir_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<AuditLog> log_;
};

TEST_F(AuditLogTest, AppendsAChainThatVerifies) {
  AppendN(10);
  auto all = log_->Query(AuditFilter{});
  ASSERT_TRUE(all.has_value());
  ASSERT_EQ(all->size(), 10u);
  EXPECT_EQ(all->front().seq, 1);
  EXPECT_EQ(all->front().prev_hash, kAuditGenesisHash);
  for (std::size_t i = 1; i < all->size(); ++i) {
    EXPECT_EQ((*all)[i].seq, (*all)[i - 1].seq + 1);
    EXPECT_EQ((*all)[i].prev_hash, (*all)[i - 1].hash);
  }
  auto v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 10);
  EXPECT_EQ(v.head.seq, 10);
  ASSERT_TRUE(v.meta_head && v.file_head);
  EXPECT_EQ(v.meta_head->hash, all->back().hash);
  EXPECT_EQ(v.file_head->hash, all->back().hash);
  EXPECT_TRUE(v.notes.empty());
}

TEST_F(AuditLogTest, AnEmptyLogVerifies) {
  auto v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 0);
}

TEST_F(AuditLogTest, TheHashCoversEveryFieldAndTheLinkBefore) {
  auto e = Entry(1);
  e.seq = 1;
  e.prev_hash = std::string(kAuditGenesisHash);
  auto base = AuditHash(e);
  ASSERT_TRUE(base.has_value());
  EXPECT_EQ(base->size(), 64u);
  auto changed = [&](auto edit) {
    auto copy = e;
    edit(copy);
    return *AuditHash(copy) != *base;
  };
  EXPECT_TRUE(changed([](AuditEntry& c) { c.seq = 2; }));
  EXPECT_TRUE(changed([](AuditEntry& c) { c.time_ms += 1; }));
  EXPECT_TRUE(changed([](AuditEntry& c) { c.actor = "mallory"; }));
  EXPECT_TRUE(changed([](AuditEntry& c) { c.tenant = "x"; }));
  EXPECT_TRUE(changed([](AuditEntry& c) { c.action = "job.cancel"; }));
  EXPECT_TRUE(changed([](AuditEntry& c) { c.object = "job/2"; }));
  EXPECT_TRUE(changed([](AuditEntry& c) { c.before = "{}"; }));
  EXPECT_TRUE(changed([](AuditEntry& c) { c.after = "{}"; }));
  EXPECT_TRUE(changed([](AuditEntry& c) { c.request_id = "r"; }));
  EXPECT_TRUE(changed([](AuditEntry& c) { c.source = "10.0.0.1"; }));
  EXPECT_TRUE(changed([](AuditEntry& c) { c.outcome = "denied: NOT_FOUND"; }));
  EXPECT_TRUE(changed([](AuditEntry& c) { c.prev_hash[0] = '1'; }));
  // Moving a byte from one field to the next is a different record.
  EXPECT_TRUE(changed([](AuditEntry& c) {
    c.actor = "bo";
    c.tenant = "b" + c.tenant;
  }));
}

TEST_F(AuditLogTest, AnEditedFieldIsFoundAtThatRecord) {
  AppendN(10);
  Tamper("UPDATE audit_log SET actor='mallory' WHERE seq=4");
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 4) << v.problem;
  EXPECT_NE(v.problem.find("edited"), std::string::npos) << v.problem;
}

// A forger who recomputes the edited record's hash and relinks the next one
// is caught at the next record: its own hash covers the link it now carries.
TEST_F(AuditLogTest, AnEditWithItsHashRecomputedIsFoundAtTheNextRecord) {
  AppendN(10);
  auto e = Row(4);
  e.outcome = "denied: NOT_FOUND";
  e.hash = *AuditHash(e);
  Tamper("UPDATE audit_log SET outcome='" + e.outcome + "', hash='" + e.hash + "' WHERE seq=4;" +
         "UPDATE audit_log SET prev_hash='" + e.hash + "' WHERE seq=5;");
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 5) << v.problem;
}

TEST_F(AuditLogTest, ADeletedRecordIsFoundAsAGap) {
  AppendN(10);
  Tamper("DELETE FROM audit_log WHERE seq=6");
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 6) << v.problem;
  EXPECT_NE(v.problem.find("missing"), std::string::npos) << v.problem;
}

TEST_F(AuditLogTest, ADeletedFirstRecordIsFound) {
  AppendN(3);
  Tamper("DELETE FROM audit_log WHERE seq=1");
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 1) << v.problem;
}

// A deletion with the later records renumbered to close the gap: no gap,
// but the link no longer fits.
TEST_F(AuditLogTest, ADeletionWithRenumberingIsFound) {
  AppendN(6);
  Tamper("DELETE FROM audit_log WHERE seq=3; UPDATE audit_log SET seq=seq-1 WHERE seq>3;");
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 3) << v.problem;
}

TEST_F(AuditLogTest, TwoSwappedRecordsAreFound) {
  AppendN(10);
  Tamper(
      "UPDATE audit_log SET seq=-5 WHERE seq=5; UPDATE audit_log SET seq=5 WHERE seq=6; "
      "UPDATE audit_log SET seq=6 WHERE seq=-5;");
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 5) << v.problem;
}

// The tail cut off: the chain left is valid, but both remembered heads
// name a record that is no longer there.
TEST_F(AuditLogTest, ACutTailIsFoundAgainstTheRememberedHead) {
  AppendN(10);
  Tamper("DELETE FROM audit_log WHERE seq>7");
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 8) << v.problem;
  EXPECT_NE(v.problem.find("removed from the end"), std::string::npos) << v.problem;
}

// Cut the tail, and berthd appends on: new records chain from the
// remembered head, leaving the gap.
TEST_F(AuditLogTest, ACutTailThenAppendsLeaveAGap) {
  AppendN(10);
  Tamper("DELETE FROM audit_log WHERE seq>7");
  for (int i = 11; i <= 13; ++i) ASSERT_TRUE(log_->Append(Entry(i)).has_value());
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 8) << v.problem;
  EXPECT_NE(v.problem.find("missing"), std::string::npos) << v.problem;
}

// The same with the meta head rewritten to the cut end: the head file
// still remembers record 10, so the appends chain from there.
TEST_F(AuditLogTest, ACutTailWithMetaRewrittenThenAppendsLeaveAGap) {
  AppendN(10);
  auto seventh = Row(7);
  Tamper(
      "DELETE FROM audit_log WHERE seq>7; UPDATE meta SET value='7' WHERE "
      "key='audit_head_seq'; UPDATE meta SET value='" +
      seventh.hash + "' WHERE key='audit_head_hash';");
  for (int i = 11; i <= 13; ++i) ASSERT_TRUE(log_->Append(Entry(i)).has_value());
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 8) << v.problem;
  EXPECT_NE(v.problem.find("missing"), std::string::npos) << v.problem;
}

// The forger cuts the tail and appends records that chain correctly from
// the new end, with the meta head rewritten to match. The head file still
// remembers the old record 10, so the rewrite is named there.
TEST_F(AuditLogTest, ACutTailWithForgedRecordsChainedOnIsFound) {
  AppendN(10);
  auto prev = Row(7);
  std::string sql = "DELETE FROM audit_log WHERE seq>7;";
  for (int seq = 8; seq <= 11; ++seq) {
    auto e = Entry(100 + seq);
    e.seq = seq;
    e.prev_hash = prev.hash;
    e.hash = *AuditHash(e);
    sql += InsertSql(e);
    prev = e;
  }
  sql += "UPDATE meta SET value='11' WHERE key='audit_head_seq';";
  sql += "UPDATE meta SET value='" + prev.hash + "' WHERE key='audit_head_hash';";
  Tamper(sql);
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 10) << v.problem;
  EXPECT_NE(v.problem.find("rewritten"), std::string::npos) << v.problem;
}

// The same with fewer forged records than were cut: the log ends before the
// remembered head.
TEST_F(AuditLogTest, ACutTailWithFewerForgedRecordsIsFound) {
  AppendN(10);
  auto prev = Row(7);
  auto e = Entry(200);
  e.seq = 8;
  e.prev_hash = prev.hash;
  e.hash = *AuditHash(e);
  Tamper("DELETE FROM audit_log WHERE seq>7;" + InsertSql(e) +
         "UPDATE meta SET value='8' WHERE key='audit_head_seq';"
         "UPDATE meta SET value='" +
         e.hash + "' WHERE key='audit_head_hash';");
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 9) << v.problem;
}

TEST_F(AuditLogTest, AHeadFileOneBehindIsANoteNotTampering) {
  AppendN(5);
  auto fourth = Row(4);
  std::ofstream(log_->head_path(), std::ios::trunc)
      << R"({"seq":4,"hash":")" << fourth.hash << "\"}\n";
  auto v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.notes.size(), 1u);
}

TEST_F(AuditLogTest, AHeadFileBehindByTheLastBatchIsANoteAndFurtherBehindIsTampering) {
  AppendN(5);
  // As if records 3..5 were committed in one batch and berthd died before
  // the head file was written.
  Tamper("UPDATE meta SET value='3' WHERE key='audit_batch_first';");
  auto second = Row(2);
  std::ofstream(log_->head_path(), std::ios::trunc)
      << R"({"seq":2,"hash":")" << second.hash << "\"}\n";
  auto v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  ASSERT_EQ(v.notes.size(), 1u);
  EXPECT_NE(v.notes[0].find("3 records behind"), std::string::npos) << v.notes[0];
  // Behind by more than that batch: records added behind Berth's back.
  auto first = Row(1);
  std::ofstream(log_->head_path(), std::ios::trunc)
      << R"({"seq":1,"hash":")" << first.hash << "\"}\n";
  v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 2) << v.problem;
}

TEST_F(AuditLogTest, ConcurrentAppendsMakeOneGaplessChain) {
  constexpr int kThreads = 8;
  constexpr int kEach = 30;
  std::vector<std::thread> threads;
  std::mutex mu;
  std::set<std::int64_t> seqs;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto e = log_->Append(Entry(t * kEach + i));
        ASSERT_TRUE(e.has_value()) << e.error().message;
        std::lock_guard lock(mu);
        EXPECT_TRUE(seqs.insert(e->seq).second) << "seq " << e->seq << " twice";
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(seqs.size(), static_cast<std::size_t>(kThreads * kEach));
  EXPECT_EQ(*seqs.begin(), 1);
  EXPECT_EQ(*seqs.rbegin(), kThreads * kEach);
  auto v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_TRUE(v.notes.empty());
  EXPECT_EQ(v.records, kThreads * kEach);
}

// Appends from two connections at once share the head file's writes, made
// by the file's writer thread after the commits: while they run the file
// trails the table by no more than kMaxAuditLag, and once the appends stop
// it catches up by itself, so a clean stop leaves it current.
TEST_F(AuditLogTest, AppendsFromTwoConnectionsShareHeadFileWritesThatCatchUp) {
  auto second = AuditLog::Open(dir_);
  ASSERT_TRUE(second.has_value()) << second.error().message;
  constexpr int kEach = 40;
  std::atomic<int> too_far{0};
  auto run = [&](AuditLog& log, int base) {
    for (int i = 0; i < kEach; ++i) {
      auto e = log.Append(Entry(base + i));
      ASSERT_TRUE(e.has_value()) << e.error().message;
      auto file = AuditFileHead(log.head_path());
      ASSERT_TRUE(file.has_value()) << file.error().message;
      const std::int64_t held = *file ? (*file)->seq : 0;
      if (e->seq - held > static_cast<std::int64_t>(kMaxAuditLag)) too_far.fetch_add(1);
    }
  };
  std::thread a([&] { run(*log_, 0); });
  std::thread b([&] { run(**second, 1000); });
  a.join();
  b.join();
  EXPECT_EQ(too_far.load(), 0);
  // Nobody flushes: the writer thread alone brings the file to the last
  // record, within a few of its rests.
  std::optional<AuditHead> file;
  for (int i = 0; i < 500; ++i) {
    auto read = AuditFileHead(log_->head_path());
    ASSERT_TRUE(read.has_value()) << read.error().message;
    file = *read;
    if (file && file->seq == 2 * kEach) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(file.has_value());
  EXPECT_EQ(file->seq, 2 * kEach);
  auto v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_TRUE(v.notes.empty());
  EXPECT_EQ(v.records, 2 * kEach);
  ASSERT_TRUE(v.file_head.has_value());
  EXPECT_EQ(v.file_head->seq, 2 * kEach);
}

// The head file is a witness written after the commits, never a condition
// of them: while it cannot be written every append still commits, a flush
// says why the file is behind, and once it can be written again the next
// append brings it current.
TEST_F(AuditLogTest, AHeadFileThatCannotBeWrittenHoldsUpNoCommit) {
  AppendN(2);
  const std::filesystem::path blocker = log_->head_path().string() + ".tmp";
  std::filesystem::create_directory(blocker);  // the temp file cannot be made
  for (int i = 3; i <= 6; ++i) {
    auto e = log_->Append(Entry(i));
    ASSERT_TRUE(e.has_value()) << e.error().message;
    EXPECT_EQ(e->seq, i);
  }
  auto flushed = FlushAuditHead(log_->head_path());
  ASSERT_FALSE(flushed.has_value());
  EXPECT_NE(flushed.error().message.find("audit.head"), std::string::npos)
      << flushed.error().message;
  auto file = AuditFileHead(log_->head_path());
  ASSERT_TRUE(file.has_value() && file->has_value());
  EXPECT_EQ((*file)->seq, 2);
  std::filesystem::remove(blocker);
  ASSERT_TRUE(log_->Append(Entry(7)).has_value());
  auto v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_TRUE(v.notes.empty());
  ASSERT_TRUE(v.file_head.has_value());
  EXPECT_EQ(v.file_head->seq, 7);
}

// However far back the meta table says the file may be, a lag past
// kMaxAuditLag is records added behind Berth's back, not a crash.
TEST_F(AuditLogTest, AHeadFileBehindByMoreThanTheLagBoundIsTampering) {
  AppendN(2);
  auto prev = Row(2);
  std::string sql = "BEGIN;";
  const auto last = static_cast<std::int64_t>(kMaxAuditLag) + 3;
  for (std::int64_t seq = 3; seq <= last; ++seq) {
    auto e = Entry(static_cast<int>(seq));
    e.seq = seq;
    e.prev_hash = prev.hash;
    e.hash = *AuditHash(e);
    sql += InsertSql(e);
    prev = e;
  }
  sql += "UPDATE meta SET value='" + std::to_string(last) + "' WHERE key='audit_head_seq';";
  sql += "UPDATE meta SET value='" + prev.hash + "' WHERE key='audit_head_hash';";
  sql += "UPDATE meta SET value='3' WHERE key='audit_batch_first'; COMMIT;";
  Tamper(sql);
  // The file still remembers record 2: one record more than the bound.
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 3) << v.problem;
  EXPECT_NE(v.problem.find("behind Berth's back"), std::string::npos) << v.problem;
  // Exactly at the bound it is the lag a crash can leave.
  Tamper("DELETE FROM audit_log WHERE seq=" + std::to_string(last) + "; UPDATE meta SET value='" +
         std::to_string(last - 1) + "' WHERE key='audit_head_seq'; UPDATE meta SET value='" +
         Row(last - 1).hash + "' WHERE key='audit_head_hash';");
  v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  ASSERT_EQ(v.notes.size(), 1u);
  EXPECT_NE(v.notes[0].find(std::to_string(kMaxAuditLag) + " records behind"), std::string::npos)
      << v.notes[0];
}

TEST_F(AuditLogTest, RowsAddedBehindBerthsBackAreFound) {
  AppendN(5);
  auto prev = Row(5);
  auto e = Entry(6);
  e.seq = 6;
  e.prev_hash = prev.hash;
  e.hash = *AuditHash(e);
  Tamper(InsertSql(e));
  auto v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 6) << v.problem;
}

TEST_F(AuditLogTest, QueryFiltersAndKeepsTheNewest) {
  AppendN(10);
  AuditFilter f;
  f.actor = "alice";
  auto r = log_->Query(f);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->size(), 5u);
  f = AuditFilter{};
  f.tenant = "vision";
  r = log_->Query(f);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->size(), 3u);  // 3, 6, 9
  f = AuditFilter{};
  f.since = 1'700'000'000'000 + 3 * 1000;
  f.until = 1'700'000'000'000 + 6 * 1000;
  r = log_->Query(f);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ(r->front().seq, 3);
  f = AuditFilter{};
  f.limit = 2;
  r = log_->Query(f);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(r->front().seq, 9);
  EXPECT_EQ(r->back().seq, 10);
  f = AuditFilter{};
  f.action = "job.";
  r = log_->Query(f);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->size(), 10u);
  f.action = "policy.apply";
  r = log_->Query(f);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->empty());
}

TEST_F(AuditLogTest, TheChainSurvivesAReopen) {
  AppendN(3);
  log_.reset();
  auto log = AuditLog::Open(dir_);
  ASSERT_TRUE(log.has_value());
  log_ = std::move(*log);
  auto e = log_->Append(Entry(4));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->seq, 4);
  EXPECT_TRUE(Verify().ok);
}

// Every store commits its changes' records into the one chain, each on its
// own connection and concurrently with the audit log's appends: the chain
// still verifies, with no seq twice and none missing, and the head file
// ends where the table does.
TEST_F(AuditLogTest, ChangesOnEveryConnectionCommitIntoOneChainThatVerifies) {
  auto ids = IdentityStore::Open(dir_);
  ASSERT_TRUE(ids.has_value()) << ids.error().message;
  auto meter = MeterStore::Open(dir_);
  ASSERT_TRUE(meter.has_value()) << meter.error().message;
  constexpr int kEach = 20;
  auto record = [this](int i) { return [e = Entry(i)] { return std::optional(e); }; };
  std::vector<std::thread> writers;
  writers.emplace_back([&] {
    for (int i = 0; i < kEach; ++i) ASSERT_TRUE(log_->Append(Entry(i)).has_value());
  });
  writers.emplace_back([&] {
    model::JobSpec spec;
    spec.name = "j";
    spec.command = {"true"};
    spec.resources.gpus = 1;
    for (int i = 0; i < kEach; ++i) {
      auto made = store_->CreateJobs(spec, 1500, "alice", [&](const std::vector<std::int64_t>&) {
        return std::optional(Entry(100 + i));
      });
      ASSERT_TRUE(made.has_value()) << made.error().message;
    }
  });
  writers.emplace_back([&] {
    for (int i = 0; i < kEach; ++i) {
      Identity who;
      who.name = "user" + std::to_string(i);
      auto made = (*ids)->CreateIdentity(
          who, [&](const Identity&) { return std::optional(Entry(200 + i)); });
      ASSERT_TRUE(made.has_value()) << made.error().message;
    }
  });
  writers.emplace_back([&] {
    for (int i = 0; i < kEach; ++i) {
      model::Budget b;
      b.tenant = "t" + std::to_string(i);
      b.mgpu_ms = 1000;
      ASSERT_TRUE((*meter)->SetBudget(b, record(300 + i)).has_value());
    }
  });
  for (auto& t : writers) t.join();

  AuditVerdict v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 4 * kEach);
  EXPECT_EQ(v.head.seq, 4 * kEach);
  ASSERT_TRUE(v.file_head.has_value());
  EXPECT_EQ(v.file_head->seq, 4 * kEach);
  EXPECT_TRUE(v.notes.empty());
  std::set<std::string> objects;
  auto all = log_->Query(AuditFilter{});
  ASSERT_TRUE(all.has_value());
  for (const auto& e : *all) objects.insert(e.object);
  EXPECT_EQ(objects.size(), static_cast<std::size_t>(4 * kEach));
}

// A change that is refused or rolled back leaves no record, on any store.
TEST_F(AuditLogTest, ARefusedChangeCommitsNoRecord) {
  auto ids = IdentityStore::Open(dir_);
  ASSERT_TRUE(ids.has_value()) << ids.error().message;
  auto meter = MeterStore::Open(dir_);
  ASSERT_TRUE(meter.has_value()) << meter.error().message;
  int made = 0;
  auto counting = [&made, this] {
    ++made;
    return std::optional(Entry(1));
  };
  // A policy the validator refuses; a budget that is not there to delete;
  // an identity twice; a token revoked twice.
  EXPECT_FALSE(store_
                   ->ApplyPolicyOnBase("queues: 7", "alice", "", std::nullopt, 2000,
                                       [&](const std::int64_t&) { return counting(); })
                   .has_value());
  auto gone = (*meter)->DeleteBudget("nobody", counting);
  ASSERT_TRUE(gone.has_value());
  EXPECT_FALSE(*gone);
  Identity who;
  who.name = "carol";
  ASSERT_TRUE((*ids)->CreateIdentity(who).has_value());
  EXPECT_FALSE(
      (*ids)->CreateIdentity(who, [&](const Identity&) { return counting(); }).has_value());
  auto token = (*ids)->CreateToken("carol", "", std::nullopt, "alice", 1000);
  ASSERT_TRUE(token.has_value()) << token.error().message;
  ASSERT_TRUE((*ids)->RevokeToken(token->record.id, "alice", 1100).has_value());
  EXPECT_FALSE((*ids)
                   ->RevokeToken(token->record.id, "alice", 1200,
                                 [&](const TokenRecord&) { return counting(); })
                   .has_value());
  EXPECT_EQ(made, 0);
  AuditVerdict v = Verify();
  EXPECT_TRUE(v.ok) << v.problem;
  EXPECT_EQ(v.records, 0);

  // And one that is taken commits exactly its record.
  ASSERT_TRUE(
      (*ids)
          ->RevokeToken((*ids)->CreateToken("carol", "", std::nullopt, "alice", 1300)->record.id,
                        "alice", 1400, [&](const TokenRecord&) { return counting(); })
          .has_value());
  EXPECT_EQ(made, 1);
  EXPECT_EQ(Verify().records, 1);
}

}  // namespace
}  // namespace berth::store
