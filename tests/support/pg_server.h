// A real PostgreSQL 15 server for a test, started from initdb's output: the
// ground of the tests of Berth's PostgreSQL layer (src/store/pg_*.h) and,
// next, of the conformance suite on PostgreSQL and the HA tests (issue 20).
//
// initdb runs once per machine and user into a template directory under the
// temp directory (about 1 s; later test processes reuse it). Each server is a
// copy of the template (about 0.1 s) in a directory of its own, started as
// `postgres` on 127.0.0.1 and a free port below the ephemeral range, and
// stopped and removed when the PgServer is destroyed. PostgreSQL refuses to
// run as root: as root the servers run as the system user berth-pg-test
// (made with useradd when missing; BERTH_PG_TEST_USER names another), which
// owns their directories. The server is a child of the test process that
// dies with it, so a crashed test leaves no server behind.
//
// Plain C++ (no GoogleTest): pg_fixture.h adds the fixture.
#pragma once

#include <sys/types.h>

#include <expected>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace berth::tests {

// Why PostgreSQL servers cannot be started here (the server binaries are
// missing, naming the package), or nullopt. BERTH_PG_BIN_DIR overrides
// where they are looked for (/usr/lib/postgresql/15/bin).
std::optional<std::string> PgServerUnavailable();

// Where PostgreSQL 15's programs are (initdb, pg_ctl, pg_dump, pg_restore):
// $BERTH_PG_BIN_DIR, else /usr/lib/postgresql/15/bin.
std::filesystem::path PgBinDir();

struct PgServerOptions {
  // fsync=on: for tests of what survives a crash of the server or host.
  // Off by default, which makes commits cheap and loses nothing unless the
  // host itself goes down.
  bool durable = false;
  // The address postgres listens on: loopback, or a host's address on a
  // test's network (tests/support/netns.h; start the server while the
  // thread is in that host's namespace). conninfo() names it.
  std::string listen = "127.0.0.1";
  // A network whose clients are trusted as on loopback ("10.77.0.0/24"):
  // a line added to pg_hba.conf.
  std::string trust_network;
};

class PgServer {
 public:
  // A running server, or why not (initdb's or postgres's log attached).
  static std::expected<std::unique_ptr<PgServer>, std::string> Start(PgServerOptions options = {});
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;
  ~PgServer();

  int port() const { return port_; }
  // A libpq connection string for the superuser `postgres` (trust
  // authentication on loopback) and database `db`.
  std::string conninfo(std::string_view db = "postgres") const;
  // The server's log (stdout and stderr of postgres).
  std::string log() const;
  const std::filesystem::path& dir() const { return dir_; }
  // Stops the server at once (immediate shutdown, as after a crash); the
  // directory stays until the PgServer is destroyed.
  void Stop();
  // Stops the server as Stop() does and starts it again on the same port
  // and data (a crash and restart of the database, as clients see it).
  std::expected<void, std::string> Restart();

 private:
  PgServer(std::filesystem::path dir, PgServerOptions options)
      : dir_(std::move(dir)), options_(options) {}
  // Starts postgres on a free port, trying another when the port is taken;
  // with `port` set, on that port only.
  std::expected<void, std::string> Launch(int port = 0);

  std::filesystem::path dir_;
  PgServerOptions options_;
  int port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace berth::tests
