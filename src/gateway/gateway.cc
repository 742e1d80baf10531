#include "gateway/gateway.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

extern char** environ;

namespace berth::gateway {

namespace {

using GatewaySteady = std::chrono::steady_clock;

// errno in words (strerror is not thread-safe).
std::string GatewayErrno() {
  return std::generic_category().message(errno);
}

// Sends one command line to a HAProxy CLI socket (non-interactive: HAProxy
// answers and closes) and reads the whole answer.
Result<std::string> GatewaySocketCommand(const std::filesystem::path& path,
                                         const std::string& command,
                                         std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string p = path.string();
  if (p.size() >= sizeof(addr.sun_path)) {
    return Fail(Code::kInvalidArgument, "socket path too long: " + p);
  }
  std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Fail(Code::kInternal, fmt::format("socket: {}", GatewayErrno()));
  struct FdCloser {
    int fd;
    ~FdCloser() { close(fd); }
  } closer{fd};
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Fail(Code::kUnavailable, fmt::format("connect {}: {}", p, GatewayErrno()));
  }
  const std::string line = command + "\n";
  std::size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fail(Code::kUnavailable, fmt::format("send {}: {}", p, GatewayErrno()));
    sent += static_cast<std::size_t>(n);
  }
  // The master CLI answers a command and closes only once the client is
  // done writing (the runtime socket closes either way).
  shutdown(fd, SHUT_WR);
  const auto deadline = GatewaySteady::now() + timeout;
  std::string out;
  char buf[16384];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - GatewaySteady::now());
    if (left.count() <= 0) {
      return Fail(Code::kUnavailable, fmt::format("'{}' on {}: no answer in time", command, p));
    }
    pollfd pfd{fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      // The master CLI may reset the connection as it re-executes on reload.
      if (errno == ECONNRESET) return out;
      return Fail(Code::kUnavailable, fmt::format("recv {}: {}", p, GatewayErrno()));
    }
    if (n == 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

// Alive and not a zombie (a daemonized HAProxy is not our child: its exit
// is reaped by init, and until then kill(pid, 0) still succeeds).
bool GatewayProcessAlive(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text;
  std::getline(stat, text);
  const auto close_paren = text.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= text.size()) return true;
  return text[close_paren + 2] != 'Z';
}

std::string GatewayReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes through a temp file and a rename, mode 0600.
Status GatewayWriteFile(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return Fail(Code::kInternal, fmt::format("open {}: {}", tmp.string(), GatewayErrno()));
  }
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return Fail(Code::kInternal, fmt::format("write {}: {}", tmp.string(), GatewayErrno()));
    }
    done += static_cast<std::size_t>(n);
  }
  close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Fail(Code::kInternal, fmt::format("rename {}: {}", path.string(), GatewayErrno()));
  }
  return Ok();
}

pid_t GatewayReadPid(const std::filesystem::path& path) {
  const std::string text = GatewayReadFile(path);
  pid_t pid = -1;
  const char* begin = text.data();
  const char* end = begin + text.size();
  while (end > begin && (end[-1] == '\n' || end[-1] == ' ')) --end;
  auto [ptr, ec] = std::from_chars(begin, end, pid);
  if (ec != std::errc() || ptr != end) return -1;
  return pid;
}

// Runs `binary args...` with stdout and stderr appended to `log`; its exit
// code, or -1 if it could not start or ran past `timeout` (then killed).
int GatewayRun(const std::filesystem::path& binary, const std::vector<std::string>& args,
               const std::filesystem::path& log, std::chrono::milliseconds timeout) {
  std::vector<std::string> argv_s{binary.string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(argv_s.size() + 1);
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  // berthd's own descriptors (its API socket, its store) stay out of HAProxy.
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group: a signal to berthd's group does not reach it.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return -1;
  const auto deadline = GatewaySteady::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -1;
    if (GatewaySteady::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string GatewayTail(const std::string& text, std::size_t n = 600) {
  return text.size() <= n ? text : text.substr(text.size() - n);
}

std::vector<std::string> GatewayBackendNames(const std::string& show_backend) {
  std::vector<std::string> names;
  std::istringstream in(show_backend);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    names.push_back(line);
  }
  return names;
}

}  // namespace

Result<GatewayProcesses> ParseShowProc(std::string_view text) {
  GatewayProcesses procs;
  enum { kNone, kWorkers, kOld, kPrograms } section = kNone;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string line(text.substr(start, end - start));
    start = end + 1;
    if (line.empty()) continue;
    if (line.starts_with("# workers")) {
      section = kWorkers;
      continue;
    }
    if (line.starts_with("# old workers")) {
      section = kOld;
      continue;
    }
    if (line.starts_with("# programs")) {
      section = kPrograms;
      continue;
    }
    if (line[0] == '#') continue;
    std::istringstream in(line);
    long pid = -1;
    std::string type;
    if (!(in >> pid >> type)) {
      return Fail(Code::kInternal, fmt::format("show proc: cannot read '{}'", line));
    }
    if (type == "master") {
      procs.master = static_cast<pid_t>(pid);
      in >> procs.reloads;
      const auto failed_at = line.find("[failed: ");
      if (failed_at != std::string::npos) {
        procs.failed_reloads = std::atoi(line.c_str() + failed_at + 9);
      }
    } else if (type == "worker" && section == kWorkers) {
      procs.workers.push_back(static_cast<pid_t>(pid));
    } else if (type == "worker" && section == kOld) {
      procs.old_workers.push_back(static_cast<pid_t>(pid));
    }
  }
  if (procs.master <= 0) return Fail(Code::kInternal, "show proc: no master line");
  return procs;
}

Result<std::unique_ptr<Gateway>> Gateway::Start(GatewayOptions options) {
  BERTH_RETURN_IF_ERROR(ValidateOptions(options));
  const auto& dir = options.state_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Fail(Code::kInternal, fmt::format("create {}: {}", dir.string(), ec.message()),
                "state_dir");
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return InvalidField("state_dir", dir.string() + " is not a directory (or is a link)");
  }
  if (st.st_uid != geteuid()) {
    return InvalidField("state_dir", dir.string() + " belongs to another user");
  }
  if (chmod(dir.c_str(), 0700) != 0) {
    return Fail(Code::kInternal, fmt::format("chmod {}: {}", dir.string(), GatewayErrno()));
  }

  std::unique_ptr<Gateway> gw(new Gateway(std::move(options)));
  // The request log's socket is bound before HAProxy starts or is adopted,
  // so its first line finds it. An adopted HAProxy sends to the path, not
  // to a connected socket: it reaches this new one at its next request.
  auto log = RequestLogCollector::Start(gw->Path(kLogSocket));
  if (!log) return std::unexpected(log.error());
  gw->log_ = std::move(*log);
  const pid_t pid = GatewayReadPid(gw->Path(kPidFile));
  if (GatewayProcessAlive(pid)) {
    auto procs = gw->Processes();
    auto info = gw->AdminCommand("show info");
    if (procs && procs->master == pid && info && info->find("Name: HAProxy") != std::string::npos) {
      gw->master_pid_ = pid;
      gw->adopted_ = true;
      gw->shape_ = ParseConfigShape(GatewayReadFile(gw->Path(kConfigFile)));
      return gw;
    }
    const std::string cmdline = GatewayReadFile(fmt::format("/proc/{}/cmdline", pid));
    if (cmdline.find(gw->Path(kConfigFile).string()) != std::string::npos) {
      return Fail(Code::kFailedPrecondition,
                  fmt::format("HAProxy (pid {}) runs on {} but its sockets do not answer; stop "
                              "it before starting another",
                              pid, dir.string()),
                  "state_dir");
    }
  }
  // Nothing live: a stale pid file and sockets from an HAProxy that is gone.
  for (const char* name : {kPidFile, kAdminSocket, kMasterSocket}) {
    std::filesystem::remove(gw->Path(name), ec);
  }
  BERTH_RETURN_IF_ERROR(gw->WriteFiles({}));
  gw->shape_ = ConfigShape(gw->options_, {});
  BERTH_RETURN_IF_ERROR(gw->Launch());
  return gw;
}

Gateway::~Gateway() {
  if (log_) log_->Stop();
}

Status Gateway::WriteFiles(const std::vector<Route>& routes) {
  BERTH_RETURN_IF_ERROR(GatewayWriteFile(Path(kLuaFile), HoldLua()));
  BERTH_RETURN_IF_ERROR(GatewayWriteFile(Path(kMapFile), RenderRouteMap(routes)));
  BERTH_RETURN_IF_ERROR(GatewayWriteFile(Path(kAuthMapFile), RenderAuthMap(routes)));
  return GatewayWriteFile(Path(kConfigFile), RenderConfig(options_, routes));
}

Status Gateway::Launch() {
  const std::filesystem::path log = Path("haproxy.log");
  const int rc = GatewayRun(options_.haproxy_binary,
                            {"-W", "-D", "-S", Path(kMasterSocket).string() + ",mode,600", "-p",
                             Path(kPidFile).string(), "-f", Path(kConfigFile).string()},
                            log, std::chrono::seconds(20));
  if (rc != 0) {
    return Fail(Code::kUnavailable, fmt::format("haproxy did not start (exit {}): {}", rc,
                                                GatewayTail(GatewayReadFile(log))));
  }
  const auto deadline = GatewaySteady::now() + std::chrono::seconds(10);
  while (GatewaySteady::now() < deadline) {
    const pid_t pid = GatewayReadPid(Path(kPidFile));
    if (pid > 0 && Processes() && AdminCommand("show info")) {
      master_pid_ = pid;
      return Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Fail(Code::kUnavailable, fmt::format("haproxy started but its sockets did not answer: {}",
                                              GatewayTail(GatewayReadFile(log))));
}

Result<std::string> Gateway::AdminCommand(const std::string& command) {
  return GatewaySocketCommand(Path(kAdminSocket), command, std::chrono::seconds(5));
}

Result<std::string> Gateway::MasterCommand(const std::string& command) {
  return GatewaySocketCommand(Path(kMasterSocket), command, std::chrono::seconds(5));
}

Result<GatewayProcesses> Gateway::Processes() {
  auto text = MasterCommand("show proc");
  if (!text) return std::unexpected(text.error());
  return ParseShowProc(*text);
}

Status Gateway::Reload(const std::vector<Route>& routes) {
  auto before = Processes();
  if (!before) return std::unexpected(before.error());
  const std::string old_config = GatewayReadFile(Path(kConfigFile));
  const std::string old_map = GatewayReadFile(Path(kMapFile));
  const std::string old_auth_map = GatewayReadFile(Path(kAuthMapFile));
  BERTH_RETURN_IF_ERROR(GatewayWriteFile(Path(kLuaFile), HoldLua()));
  // The running worker holds its map in memory: rewriting the file changes
  // nothing until the reload.
  BERTH_RETURN_IF_ERROR(GatewayWriteFile(Path(kMapFile), RenderRouteMap(routes)));
  BERTH_RETURN_IF_ERROR(GatewayWriteFile(Path(kAuthMapFile), RenderAuthMap(routes)));
  const std::filesystem::path candidate = Path("haproxy.cfg.new");
  BERTH_RETURN_IF_ERROR(GatewayWriteFile(candidate, RenderConfig(options_, routes)));
  const std::filesystem::path log = Path("haproxy.log");
  const int check = GatewayRun(options_.haproxy_binary, {"-c", "-q", "-f", candidate.string()}, log,
                               std::chrono::seconds(20));
  auto restore = [&] {
    (void)GatewayWriteFile(Path(kMapFile), old_map);
    (void)GatewayWriteFile(Path(kAuthMapFile), old_auth_map);
    (void)GatewayWriteFile(Path(kConfigFile), old_config);
  };
  if (check != 0) {
    restore();
    return Fail(Code::kInternal, fmt::format("the rendered configuration does not load: {}",
                                             GatewayTail(GatewayReadFile(log))));
  }
  if (std::rename(candidate.c_str(), Path(kConfigFile).c_str()) != 0) {
    restore();
    return Fail(Code::kInternal, fmt::format("rename: {}", GatewayErrno()));
  }
  (void)MasterCommand("reload");  // the master re-executes; it may close without a word
  const pid_t old_worker = before->workers.empty() ? -1 : before->workers.front();
  const auto deadline = GatewaySteady::now() + std::chrono::seconds(15);
  bool reloaded = false;
  while (GatewaySteady::now() < deadline) {
    auto now = Processes();
    if (now && now->failed_reloads > before->failed_reloads) {
      restore();
      return Fail(Code::kInternal,
                  fmt::format("haproxy refused the reload: {}", GatewayTail(GatewayReadFile(log))));
    }
    if (now && now->reloads > before->reloads && !now->workers.empty() &&
        now->workers.front() != old_worker) {
      reloaded = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!reloaded) return Fail(Code::kUnavailable, "haproxy did not reload in 15 s");
  // The new worker answers on the admin socket once it serves every route.
  std::set<std::string> want;
  for (const Route& r : routes) want.insert(BackendName(r.tenant, r.service));
  while (GatewaySteady::now() < deadline) {
    auto names = AdminCommand("show backend");
    if (names) {
      std::set<std::string> have;
      for (auto& n : GatewayBackendNames(*names)) have.insert(n);
      if (std::includes(have.begin(), have.end(), want.begin(), want.end())) return Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Fail(Code::kUnavailable, "the reloaded haproxy did not list every route in 15 s");
}

Status Gateway::Restart(const std::vector<Route>& routes) {
  std::error_code ec;
  for (const char* name : {kPidFile, kAdminSocket, kMasterSocket}) {
    std::filesystem::remove(Path(name), ec);
  }
  BERTH_RETURN_IF_ERROR(WriteFiles(routes));
  shape_ = ConfigShape(options_, routes);
  return Launch();
}

Result<SyncReport> Gateway::Sync(const std::vector<Route>& routes) {
  BERTH_RETURN_IF_ERROR(ValidateRoutes(routes));
  // Latency of routes that left is forgotten: service churn does not grow it.
  std::vector<std::string> backends;
  for (const Route& r : routes) backends.push_back(BackendName(r.tenant, r.service));
  log_->Retain(backends);
  SyncReport report;
  if (!GatewayProcessAlive(master_pid_)) {
    // HAProxy died (killed, crashed): start it again with the routes and
    // their servers as they are wanted now. Requests were refused while it
    // was down; this is the one case Berth starts a second process.
    BERTH_RETURN_IF_ERROR(Restart(routes));
    report.restarted = true;
    for (const Route& r : routes) {
      report.routes_added.push_back(fmt::format("{}/{}", r.tenant, r.service));
      for (const RouteBackend& b : r.backends) {
        if (!b.draining) report.added.push_back(fmt::format("{}/{}/{}", r.tenant, r.service, b.id));
      }
    }
    return report;
  }
  auto stat = AdminCommand("show stat");
  if (!stat) return std::unexpected(stat.error());
  auto live = ParseShowStat(*stat);
  if (!live) return std::unexpected(live.error());

  const std::string shape = ConfigShape(options_, routes);
  if (shape != shape_) {
    // The new configuration keeps every server the worker has now: wanted
    // ones as wanted, the others disabled until a later Sync deletes them.
    std::map<std::string, const RouteStats*> live_by_backend;
    for (const RouteStats& r : *live) live_by_backend[BackendName(r.tenant, r.service)] = &r;
    std::vector<Route> rendered = routes;
    std::set<std::string> wanted_backends;
    for (Route& r : rendered) {
      const std::string be = BackendName(r.tenant, r.service);
      wanted_backends.insert(be);
      auto it = live_by_backend.find(be);
      if (it == live_by_backend.end()) {
        report.routes_added.push_back(fmt::format("{}/{}", r.tenant, r.service));
        continue;
      }
      std::set<std::string> ids;
      for (const auto& b : r.backends) ids.insert(b.id);
      for (const ServerStats& s : it->second->servers) {
        if (ids.contains(s.id)) continue;
        r.backends.push_back(RouteBackend{.id = s.id,
                                          .address = s.address,
                                          .port = s.port,
                                          .weight = s.weight,
                                          .draining = true});
      }
    }
    for (const RouteStats& r : *live) {
      if (!wanted_backends.contains(BackendName(r.tenant, r.service))) {
        report.routes_removed.push_back(fmt::format("{}/{}", r.tenant, r.service));
      }
    }
    BERTH_RETURN_IF_ERROR(Reload(rendered));
    shape_ = shape;
    report.reloaded = true;
    stat = AdminCommand("show stat");
    if (!stat) return std::unexpected(stat.error());
    live = ParseShowStat(*stat);
    if (!live) return std::unexpected(live.error());
  }

  auto procs = Processes();
  if (!procs) return std::unexpected(procs.error());
  ServerPlan plan = PlanServers(routes, *live, !procs->old_workers.empty());
  for (const std::string& command : plan.commands) {
    auto answer = AdminCommand(command);
    if (!answer) return std::unexpected(answer.error());
    std::string_view a = *answer;
    while (!a.empty() && (a.back() == '\n' || a.back() == ' ')) a.remove_suffix(1);
    const bool ok = a.empty() || a == "New server registered." || a == "Server deleted.";
    if (!ok) {
      return Fail(Code::kInternal,
                  fmt::format("haproxy refused '{}': {}", command, std::string(a)));
    }
  }
  report.added = std::move(plan.report.added);
  report.enabled = std::move(plan.report.enabled);
  report.drained = std::move(plan.report.drained);
  report.removed = std::move(plan.report.removed);
  report.draining = std::move(plan.report.draining);
  report.updated = std::move(plan.report.updated);
  report.commands = std::move(plan.report.commands);
  return report;
}

Result<std::vector<RouteStats>> Gateway::Stats() {
  auto stat = AdminCommand("show stat");
  if (!stat) return std::unexpected(stat.error());
  auto routes = ParseShowStat(*stat);
  if (!routes) return std::unexpected(routes.error());
  auto held = AdminCommand("show berth-held");
  if (!held) return std::unexpected(held.error());
  BERTH_RETURN_IF_ERROR(MergeHeld(*held, *routes));
  return routes;
}

Status Gateway::Stop(std::chrono::milliseconds grace) {
  const pid_t pid = master_pid_ > 0 ? master_pid_ : GatewayReadPid(Path(kPidFile));
  auto wait_gone = [&](std::chrono::milliseconds limit) {
    const auto deadline = GatewaySteady::now() + limit;
    while (GatewaySteady::now() < deadline) {
      if (!GatewayProcessAlive(pid)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return !GatewayProcessAlive(pid);
  };
  if (GatewayProcessAlive(pid)) {
    kill(pid, SIGUSR1);  // soft stop: listeners close, in-flight requests finish
    if (!wait_gone(grace)) {
      kill(pid, SIGTERM);
      if (!wait_gone(std::chrono::seconds(3))) {
        kill(pid, SIGKILL);
        if (!wait_gone(std::chrono::seconds(3))) {
          return Fail(Code::kInternal, fmt::format("haproxy (pid {}) did not stop", pid));
        }
      }
    }
  }
  if (log_) log_->Stop();
  std::error_code ec;
  for (const char* name : {kPidFile, kAdminSocket, kMasterSocket, kLogSocket}) {
    std::filesystem::remove(Path(name), ec);
  }
  master_pid_ = -1;
  return Ok();
}

Result<std::vector<RouteLatency>> Gateway::TakeLatency() {
  if (auto error = log_->ReaderError(); !error.empty()) {
    return Fail(Code::kUnavailable, "the request log reader stopped: " + error);
  }
  return log_->TakeWindow();
}

Result<std::vector<RouteLatencyHistogram>> Gateway::LatencyHistograms() {
  if (auto error = log_->ReaderError(); !error.empty()) {
    return Fail(Code::kUnavailable, "the request log reader stopped: " + error);
  }
  return log_->Cumulative();
}

RequestLogCounters Gateway::RequestLogStats() {
  return log_->Counters();
}

Result<std::int64_t> Gateway::DroppedRequestLogs() {
  auto info = AdminCommand("show info");
  if (!info) return std::unexpected(info.error());
  std::istringstream in(*info);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("DroppedLogs: ")) continue;
    std::int64_t n = 0;
    const char* begin = line.c_str() + 13;
    const char* end = line.c_str() + line.size();
    auto [ptr, err] = std::from_chars(begin, end, n);
    if (err != std::errc() || ptr != end) break;
    return n;
  }
  return Fail(Code::kInternal, "show info: no DroppedLogs line");
}

}  // namespace berth::gateway
