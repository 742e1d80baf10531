// berthd with its state in PostgreSQL (--store postgresql://...) on a real
// PostgreSQL 15 server: jobs, their runs and the audit trail live in the
// database, not in the data directory; a kill -9 of berthd loses nothing
// acknowledged and starts no job twice; the audit chain's check finds a
// record rewritten in the database.
#include <thread>

#include "integration/fixture.h"
#include "store/sqlite_db.h"

namespace berth::it {
namespace {

using nlohmann::json;

class PostgresStoreTest : public PostgresIntegrationTest {
 protected:
  // A statement's rows on the test's server, each as its columns' text.
  std::vector<std::vector<std::string>> Rows(const std::string& sql) {
    std::vector<std::vector<std::string>> out;
    auto db = store::Database::Connect(server_->conninfo());
    EXPECT_TRUE(db.has_value()) << db.error().message;
    if (!db) return out;
    auto st = db->Prepare(sql);
    EXPECT_TRUE(st.has_value()) << st.error().message;
    if (!st) return out;
    for (;;) {
      auto row = st->Step();
      EXPECT_TRUE(row.has_value()) << row.error().message;
      if (!row || !*row) return out;
      out.emplace_back();
      for (int c = 0; c < 3; ++c) out.back().push_back(st->Text(c));
    }
  }

  // A berthd whose state was moved or restored carries on: a new job gets
  // an id after `last_id` and runs, the audit chain is intact and the
  // default tenant's 100 GPU-hour budget is there.
  void ExpectItCarriesOn(Berthd& berthd, std::int64_t last_id) {
    ASSERT_TRUE(berthd.WaitForNode("Ready", 20s)) << berthd.log();
    const std::int64_t next = berthd.Submit(JobSpecJson("next", Sh("exit 0"), 1));
    EXPECT_GT(next, last_id) << "job ids started over";
    EXPECT_TRUE(berthd.WaitForState(next, "Succeeded", 30s)) << berthd.JobState(next);
    CommandResult r = Cli(berthd, {"audit", "verify"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("intact"), std::string::npos) << r.out;
    r = Cli(berthd, {"budget", "list"});
    EXPECT_NE(r.out.find("100"), std::string::npos) << r.out;
  }
};

TEST_F(PostgresStoreTest, BerthdKeepsItsStateInPostgresThroughAKill) {
  Berthd& berthd = NewBerthd(AllInOne({"--store", server_->conninfo()}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s)) << berthd.log();
  EXPECT_FALSE(std::filesystem::exists(berthd.data_dir() / "berth.db"))
      << "the state went to SQLite in the data dir";

  // Running when berthd dies; ends after it is back.
  const std::int64_t id = berthd.Submit(JobSpecJson("exit7", Sh("sleep 4; exit 7"), 1));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(berthd.WaitForState(id, "Running", 30s)) << berthd.JobState(id);
  const auto pid = berthd.Job(id).at("placement").at(0).at("pid").get<pid_t>();
  berthd.Kill();
  EXPECT_TRUE(ProcessAlive(pid)) << "the job died with berthd";
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForTerminal(id, 30s)) << berthd.JobState(id);
  json job = berthd.Job(id);
  EXPECT_EQ(job.at("state"), "Failed") << job.dump(2);
  EXPECT_EQ(job.at("exit_code"), 7) << job.dump(2);
  int starts = 0;
  for (const auto& e : job.at("timeline")) starts += e.value("event", "") == "Started" ? 1 : 0;
  EXPECT_EQ(starts, 1) << "started again after the restart: " << job.dump(2);

  // The rows are PostgreSQL's.
  auto rows = Rows("SELECT id::text, state, name FROM jobs ORDER BY id");
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0], (std::vector<std::string>{std::to_string(id), "Failed", "exit7"}));
  rows = Rows("SELECT count(*)::text, '', '' FROM runs WHERE job_id = " + std::to_string(id));
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0][0], "1");
  CommandResult r;

  // Metering, budgets, reports and alerts read and write there too.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"usage", "-o", "json"},
                                             {"budget", "set", "default", "--gpu-hours", "100"},
                                             {"budget", "list"},
                                             {"report", "ops", "--from", "1h"},
                                             {"alerts"},
                                             {"nodes"},
                                             {"policy", "show"}}) {
    r = Cli(berthd, args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.out << r.err;
  }
  r = Cli(berthd, {"usage", "-o", "json"});
  EXPECT_NE(r.out.find("\"default\""), std::string::npos) << r.out;

  // The audit chain is whole, then names the record rewritten behind
  // berthd's back.
  const std::int64_t cancelled = berthd.Submit(JobSpecJson("held", Sh("sleep 60"), 1));
  ASSERT_GT(cancelled, 0);
  r = Cli(berthd, {"cancel", std::to_string(cancelled)});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = Cli(berthd, {"audit", "verify"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("intact"), std::string::npos) << r.out;
  rows = Rows("SELECT seq::text, action, actor FROM audit_log WHERE action = 'job.cancel'");
  ASSERT_EQ(rows.size(), 1U) << "the cancel left no record";
  auto db = store::Database::Connect(server_->conninfo());
  ASSERT_TRUE(db.has_value()) << db.error().message;
  // Someone with the database's keys: writing as the leader's term gets
  // past the write fence (which keeps deposed berthd out, not the owner).
  auto term = Rows("SELECT term::text, '', '' FROM leader_lease");
  ASSERT_EQ(term.size(), 1U);
  ASSERT_TRUE(db->Exec("SELECT set_config('berth.term', '" + term[0][0] + "', false)"));
  ASSERT_TRUE(db->Exec("UPDATE audit_log SET actor = 'someone-else' WHERE seq = " + rows[0][0])
                  .has_value());
  r = Cli(berthd, {"audit", "verify"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("broken at record " + rows[0][0]), std::string::npos) << r.out << r.err;

  // Every statement berthd ran (scheduling, metering, telemetry, alerts,
  // the API's reads) was one PostgreSQL takes: its errors name a SQLSTATE.
  const std::string log = berthd.log();
  EXPECT_EQ(log.find("SQLSTATE"), std::string::npos) << log;
  EXPECT_EQ(log.find("[error]"), std::string::npos) << log;
}

TEST_F(PostgresStoreTest, AnInstallationMovesFromSqliteToPostgresWithItsJobsAndAuditChain) {
  Berthd& berthd = NewBerthd(AllInOne());
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s)) << berthd.log();
  const std::int64_t done = berthd.Submit(JobSpecJson("done", Sh("exit 0"), 1));
  ASSERT_GT(done, 0);
  ASSERT_TRUE(berthd.WaitForState(done, "Succeeded", 30s)) << berthd.JobState(done);
  const std::int64_t cancelled = berthd.Submit(JobSpecJson("cancelled", Sh("sleep 60"), 1));
  ASSERT_GT(cancelled, 0);
  ASSERT_TRUE(berthd.WaitForState(cancelled, "Running", 30s)) << berthd.JobState(cancelled);
  CommandResult r = Cli(berthd, {"cancel", std::to_string(cancelled)});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_TRUE(berthd.WaitForTerminal(cancelled, 30s)) << berthd.JobState(cancelled);
  r = Cli(berthd, {"budget", "set", "default", "--gpu-hours", "100"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  berthd.Stop();

  const std::vector<std::string> migrate = {
      "migrate", "--from", "sqlite:" + berthd.data_dir().string(), "--to", server_->conninfo()};
  r = RunCommand(BinDir() / "berthd", migrate, dir_.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("moved"), std::string::npos) << r.out;
  EXPECT_EQ(Rows("SELECT count(*)::text, '', '' FROM jobs")[0][0], "2");
  // Into a database that is no longer fresh: refused, nothing changed.
  r = RunCommand(BinDir() / "berthd", migrate, dir_.path());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("fresh database"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(Rows("SELECT count(*)::text, '', '' FROM jobs")[0][0], "2");

  // berthd on PostgreSQL takes over where SQLite left off.
  berthd.options().extra_args = {"--store", server_->conninfo()};
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  EXPECT_EQ(berthd.JobState(done), "Succeeded");
  EXPECT_EQ(berthd.JobState(cancelled), "Cancelled");
  ExpectItCarriesOn(berthd, cancelled);
}

TEST_F(PostgresStoreTest, APgDumpOfARunningBerthdRestoresIntoADatabaseBerthdRunsOn) {
  Berthd& berthd = NewBerthd(AllInOne({"--store", server_->conninfo()}));
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  ASSERT_TRUE(berthd.WaitForNode("Ready", 20s)) << berthd.log();
  const std::int64_t done = berthd.Submit(JobSpecJson("done", Sh("exit 0"), 1));
  ASSERT_GT(done, 0);
  ASSERT_TRUE(berthd.WaitForState(done, "Succeeded", 30s)) << berthd.JobState(done);
  CommandResult r = Cli(berthd, {"budget", "set", "default", "--gpu-hours", "100"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  // Online, while berthd serves: pg_dump reads one consistent snapshot.
  const auto dump = dir_.path() / "berth.dump";
  r = RunCommand(tests::PgBinDir() / "pg_dump",
                 {"--format=custom", "--file", dump.string(), "--dbname", server_->conninfo()},
                 dir_.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  berthd.Kill();

  // Restored into a fresh database, as after losing the first.
  auto admin = store::Database::Connect(server_->conninfo());
  ASSERT_TRUE(admin.has_value()) << admin.error().message;
  ASSERT_TRUE(admin->Exec("CREATE DATABASE restored"));
  r = RunCommand(tests::PgBinDir() / "pg_restore",
                 {"--no-owner", "--dbname", server_->conninfo("restored"), dump.string()},
                 dir_.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  berthd.options().extra_args = {"--store", server_->conninfo("restored")};
  ASSERT_TRUE(berthd.Start()) << berthd.log();
  EXPECT_EQ(berthd.JobState(done), "Succeeded");
  ExpectItCarriesOn(berthd, done);
}

TEST_F(PostgresStoreTest, APasswordInTheStoreFlagIsRefusedBeforeAnythingStarts) {
  const std::string with_password = "postgresql://berth:s3cret@127.0.0.1:1/berth";
  CommandResult r = RunCommand(BinDir() / "berthd",
                               {"--data-dir", (dir_.path() / "data").string(), "--store",
                                with_password, "--plain-http", "--plain-agents"},
                               dir_.path());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string said = r.out + r.err;
  EXPECT_NE(said.find("--store"), std::string::npos) << said;
  EXPECT_NE(said.find("pgpass"), std::string::npos) << said;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "data" / "berth.db"));
  EXPECT_EQ((r.out + r.err).find("s3cret"), std::string::npos) << "the password was echoed";
}

}  // namespace
}  // namespace berth::it
