#include "support/pg_server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace berth::tests {
namespace fs = std::filesystem;
fs::path PgBinDir() {
  const char* env = std::getenv("BERTH_PG_BIN_DIR");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path("/usr/lib/postgresql/15/bin");
}

namespace {

using Clock = std::chrono::steady_clock;

std::string PgReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

// The last `n` bytes of a log, for error messages.
std::string Tail(const std::string& text, std::size_t n = 2000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

// Who the server processes run as.
struct RunAs {
  bool switch_user = false;  // true when the test runs as root
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
};

// Runs `argv` (argv[0] a path) as `as` in `cwd`, stdout and stderr appended
// to `log`, stdin from /dev/null. With `die_with_us` the child is killed
// when this thread ends (the test process, for a server started in SetUp).
// Returns the child's pid, or -1.
pid_t Spawn(const std::vector<std::string>& argv, const fs::path& log, const RunAs& as,
            const fs::path& cwd, bool die_with_us) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return -1;
  if (as.switch_user && ::fchown(log_fd, as.uid, as.gid) != 0) {
    ::close(log_fd);
    return -1;
  }
  const std::string dir = cwd.string();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0) {
      ::_exit(126);
    }
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    if (as.switch_user) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(as.gid) != 0 || ::setuid(as.uid) != 0) {
        ::_exit(126);
      }
    }
    // After setuid, which clears it.
    if (die_with_us) {
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(126);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(log_fd);
  return pid;
}

// Runs to completion; the exit status, or -1.
int RunToEnd(const std::vector<std::string>& argv, const fs::path& log, const RunAs& as,
             const fs::path& cwd) {
  const pid_t pid = Spawn(argv, log, as, cwd, false);
  if (pid < 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::expected<void, std::string> ChownTree(const fs::path& root, const RunAs& as) {
  if (!as.switch_user) return {};
  if (::lchown(root.c_str(), as.uid, as.gid) != 0) {
    return std::unexpected(fmt::format("chown {}: {}", root.string(), std::strerror(errno)));
  }
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (::lchown(entry.path().c_str(), as.uid, as.gid) != 0) {
      return std::unexpected(
          fmt::format("chown {}: {}", entry.path().string(), std::strerror(errno)));
    }
  }
  return {};
}

std::optional<RunAs> LookUp(const std::string& name) {
  const passwd* pw = ::getpwnam(name.c_str());
  if (pw == nullptr) return std::nullopt;
  return RunAs{true, pw->pw_uid, pw->pw_gid, name};
}

// The user the servers run as: this process's own unless it is root.
std::expected<RunAs, std::string> ServerUser() {
  static std::mutex mu;
  static std::optional<RunAs> chosen;
  std::lock_guard lock(mu);
  if (chosen) return *chosen;
  if (::geteuid() != 0) {
    const passwd* pw = ::getpwuid(::geteuid());
    chosen = RunAs{false, ::geteuid(), ::getegid(), pw != nullptr ? pw->pw_name : "?"};
    return *chosen;
  }
  const char* env = std::getenv("BERTH_PG_TEST_USER");
  if (env != nullptr && *env != '\0') {
    chosen = LookUp(env);
    if (!chosen) return std::unexpected(fmt::format("BERTH_PG_TEST_USER={}: no such user", env));
    return *chosen;
  }
  const std::string name = "berth-pg-test";
  chosen = LookUp(name);
  if (!chosen) {
    // A system user with no home and no shell, only to own test servers.
    // Another test process may be making it at the same moment: whoever
    // loses finds it made.
    const fs::path log = fs::temp_directory_path() / "berth-pg-useradd.log";
    (void)RunToEnd({"/usr/sbin/useradd", "--system", "--user-group", "--no-create-home",
                    "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name},
                   log, RunAs{}, "/");
    chosen = LookUp(name);
  }
  if (!chosen) chosen = LookUp("nobody");
  if (!chosen) {
    return std::unexpected(
        "running as root, and neither the user berth-pg-test (useradd failed) nor nobody exists "
        "to run PostgreSQL, which refuses root");
  }
  return *chosen;
}

std::expected<fs::path, std::string> MakeTempDir(const std::string& prefix, const RunAs& as) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return std::unexpected(fmt::format("mkdtemp {}: {}", tmpl, std::strerror(errno)));
  }
  if (as.switch_user && ::chown(tmpl.c_str(), as.uid, as.gid) != 0) {
    return std::unexpected(fmt::format("chown {}: {}", tmpl, std::strerror(errno)));
  }
  return fs::path(tmpl);
}

// The initdb'd template: <tmp>/berth-pg15-template-uid<uid>/data, made once
// per machine and user. initdb writes into a staging directory that is
// renamed into place, so a concurrent test process sees none or all of it.
std::expected<fs::path, std::string> TemplateDir(const RunAs& as) {
  static std::mutex mu;
  static std::optional<fs::path> made;
  std::lock_guard lock(mu);
  if (made) return *made;
  const fs::path final_dir =
      fs::temp_directory_path() / fmt::format("berth-pg15-template-uid{}", ::geteuid());
  const auto ready = [&] { return fs::exists(final_dir / "data" / "global" / "pg_control"); };
  if (ready()) {
    made = final_dir / "data";
    return *made;
  }
  auto staging = MakeTempDir(final_dir.filename().string() + ".", as);
  if (!staging) return std::unexpected(staging.error());
  const fs::path log = *staging / "initdb.log";
  // No fsync (the template is rebuilt if lost), trust on loopback only (the
  // server listens nowhere else), UTF-8 with the C locale (byte order; no
  // locale package needed), and 1 MB WAL segments so that each copy is
  // 15 MB smaller.
  const int rc = RunToEnd(
      {(PgBinDir() / "initdb").string(), "-D", (*staging / "data").string(), "-U", "postgres", "-A",
       "trust", "--no-sync", "-E", "UTF8", "--locale=C", "--wal-segsize=1", "--no-instructions"},
      log, as, *staging);
  if (rc != 0) {
    std::string out = PgReadFile(log);
    std::error_code ec;
    fs::remove_all(*staging, ec);
    return std::unexpected(fmt::format("initdb as {} exited with {}: {}", as.name, rc, Tail(out)));
  }
  if (::rename(staging->c_str(), final_dir.c_str()) != 0) {
    std::error_code ec;
    if (!ready()) {
      // A leftover without pg_control: replace it.
      fs::remove_all(final_dir, ec);
      if (::rename(staging->c_str(), final_dir.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        fs::remove_all(*staging, ec);
        return std::unexpected(fmt::format("rename to {}: {}", final_dir.string(), why));
      }
    } else {
      fs::remove_all(*staging, ec);  // another test process made it first
    }
  }
  made = final_dir / "data";
  return *made;
}

// Whether `port` on 127.0.0.1 can be bound now (0: the kernel's pick);
// returns the port bound, or 0.
int PgTryBind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  socklen_t len = sizeof addr;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  int bound = 0;
  if (::bind(fd, sa, sizeof addr) == 0 && ::getsockname(fd, sa, &len) == 0) {
    bound = ntohs(addr.sin_port);
  }
  ::close(fd);
  return bound;
}

// A free port below the kernel's ephemeral range, as the integration
// harness picks them (tests/integration/harness.cc): there another test's
// outgoing connection cannot take it before postgres binds it.
int PgFreePort() {
  static std::mutex mu;
  static std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
  static std::set<int> given;
  int low = 32768;
  {
    std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
    int l = 0;
    int h = 0;
    if (in >> l >> h && l > 1024) low = l;
  }
  std::lock_guard lock(mu);
  if (low > 10'000) {
    std::uniform_int_distribution<int> pick(10'000, low - 1);
    for (int attempt = 0; attempt < 200; ++attempt) {
      const int port = pick(rng);
      if (given.contains(port) || PgTryBind(port) != port) continue;
      given.insert(port);
      return port;
    }
  }
  return PgTryBind(0);
}

}  // namespace

std::optional<std::string> PgServerUnavailable() {
  const fs::path bin = PgBinDir();
  for (const char* tool : {"initdb", "postgres"}) {
    if (::access((bin / tool).c_str(), X_OK) != 0) {
      return fmt::format(
          "PostgreSQL server binaries not found ({} is missing): install the Debian package "
          "postgresql-15 (scripts/install-deps.sh), or set BERTH_PG_BIN_DIR",
          (bin / tool).string());
    }
  }
  return std::nullopt;
}

std::expected<std::unique_ptr<PgServer>, std::string> PgServer::Start(PgServerOptions options) {
  if (auto why = PgServerUnavailable()) return std::unexpected(*why);
  auto as = ServerUser();
  if (!as) return std::unexpected(as.error());
  auto tmpl = TemplateDir(*as);
  if (!tmpl) return std::unexpected(tmpl.error());
  auto dir = MakeTempDir("berth-pg-", *as);
  if (!dir) return std::unexpected(dir.error());
  std::unique_ptr<PgServer> server(new PgServer(*dir, options));
  std::error_code ec;
  fs::copy(*tmpl, *dir / "data", fs::copy_options::recursive, ec);
  if (ec) return std::unexpected(fmt::format("copy {}: {}", tmpl->string(), ec.message()));
  // postgres insists that its data directory is its user's and closed to others.
  fs::permissions(*dir / "data", fs::perms::owner_all, ec);
  if (!options.trust_network.empty()) {
    std::ofstream hba(*dir / "data" / "pg_hba.conf", std::ios::app);
    hba << "host all all " << options.trust_network << " trust\n";
    if (!hba.flush()) return std::unexpected("cannot append to pg_hba.conf");
  }
  if (auto owned = ChownTree(*dir / "data", *as); !owned) return std::unexpected(owned.error());
  if (auto up = server->Launch(); !up) return std::unexpected(up.error());
  return server;
}

std::expected<void, std::string> PgServer::Restart() {
  const int port = port_;
  Stop();
  // The port may be held a moment longer by the old server's sockets.
  std::expected<void, std::string> up;
  for (int attempt = 0; attempt < 20; ++attempt) {
    up = Launch(port);
    if (up) return up;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return up;
}

std::expected<void, std::string> PgServer::Launch(int port) {
  auto as = ServerUser();
  if (!as) return std::unexpected(as.error());
  const fs::path log = dir_ / "postgres.log";
  for (int attempt = 0; attempt < (port > 0 ? 1 : 5); ++attempt) {
    port_ = port > 0 ? port : PgFreePort();
    std::vector<std::string> argv = {(PgBinDir() / "postgres").string(), "-D",
                                     (dir_ / "data").string(), "-p", std::to_string(port_), "-c",
                                     fmt::format("listen_addresses={}", options_.listen),
                                     // TCP only: no socket in /var/run/postgresql,
                                     // which the test user may not write.
                                     "-c", "unix_socket_directories=", "-c", "max_connections=40"};
    if (!options_.durable) argv.insert(argv.end(), {"-c", "fsync=off"});
    const std::size_t log_before = PgReadFile(log).size();
    pid_ = Spawn(argv, log, *as, dir_, true);
    if (pid_ < 0) {
      pid_ = 0;
      return std::unexpected(fmt::format("cannot start postgres: {}", std::strerror(errno)));
    }
    const std::string ping = conninfo() + " connect_timeout=2";
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    for (;;) {
      if (PQping(ping.c_str()) == PQPING_OK) return {};
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        const std::string out = PgReadFile(log).substr(log_before);
        // Another process took the port between the probe and the bind.
        if (out.find("could not bind") != std::string::npos ||
            out.find("already in use") != std::string::npos) {
          break;
        }
        return std::unexpected(
            fmt::format("postgres as {} on port {} exited: {}", as->name, port_, Tail(out)));
      }
      if (Clock::now() > deadline) {
        Stop();
        return std::unexpected(fmt::format("postgres on port {} not ready within 30 s: {}", port_,
                                           Tail(PgReadFile(log))));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (port > 0) {
    return std::unexpected(fmt::format("postgres could not bind port {}", port));
  }
  return std::unexpected(
      fmt::format("postgres found no free port in 5 tries: {}", Tail(PgReadFile(log))));
}

std::string PgServer::conninfo(std::string_view db) const {
  return fmt::format("host={} port={} user=postgres dbname={}", options_.listen, port_, db);
}

std::string PgServer::log() const {
  return PgReadFile(dir_ / "postgres.log");
}

void PgServer::Stop() {
  if (pid_ <= 0) return;
  // SIGQUIT: immediate shutdown; the postmaster ends its backends first.
  ::kill(pid_, SIGQUIT);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  pid_ = 0;
}

PgServer::~PgServer() {
  Stop();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

}  // namespace berth::tests
