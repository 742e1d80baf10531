#include "agent/prober.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/units.h"

extern char** environ;

namespace berth::agent {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

int ProbeMsLeft(SteadyTime deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
  return static_cast<int>(std::max<std::int64_t>(left, 0));
}

std::string ProbeTimedOut(const model::Probe& p) {
  return fmt::format("timed out after {}", FormatDurationMs(p.timeout_ms));
}

// A socket connected to 127.0.0.1:port before the deadline, or why not.
int ProbeConnect(std::uint32_t port, SteadyTime deadline, const model::Probe& p, std::string& why) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = fmt::format("cannot make a socket: {}", std::strerror(errno));
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) {
      why = fmt::format("port {}: {}", port, std::strerror(errno));
      ::close(fd);
      return -1;
    }
    pollfd pfd{fd, POLLOUT, 0};
    int n = ::poll(&pfd, 1, ProbeMsLeft(deadline));
    if (n <= 0) {
      why = fmt::format("port {}: connect {}", port, ProbeTimedOut(p));
      ::close(fd);
      return -1;
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      why = fmt::format("port {}: {}", port, std::strerror(err));
      ::close(fd);
      return -1;
    }
  }
  return fd;
}

ProbeResult ProbeHttp(const model::Probe& p, std::uint32_t port, SteadyTime deadline) {
  std::string why;
  int fd = ProbeConnect(port, deadline, p, why);
  if (fd < 0) return {false, why};
  const std::string request = fmt::format(
      "GET {} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nUser-Agent: berth-agent-probe\r\n"
      "Connection: close\r\n\r\n",
      p.http_path, port);
  std::size_t sent = 0;
  std::string answer;
  ProbeResult result{false, ""};
  while (true) {
    const bool sending = sent < request.size();
    pollfd pfd{fd, static_cast<short>(sending ? POLLOUT : POLLIN), 0};
    int n = ::poll(&pfd, 1, ProbeMsLeft(deadline));
    if (n <= 0) {
      result.detail = fmt::format("GET {}: {}", p.http_path, ProbeTimedOut(p));
      break;
    }
    if (sending) {
      ssize_t w = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (w < 0 && errno != EAGAIN && errno != EINTR) {
        result.detail = fmt::format("GET {}: {}", p.http_path, std::strerror(errno));
        break;
      }
      if (w > 0) sent += static_cast<std::size_t>(w);
      continue;
    }
    char buf[512];
    ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (r > 0) answer.append(buf, static_cast<std::size_t>(r));
    const auto eol = answer.find("\r\n");
    if (eol == std::string::npos && r > 0 && answer.size() < 4096) continue;
    // "HTTP/1.1 200 OK"
    int status = 0;
    if (answer.starts_with("HTTP/") && answer.size() >= 12) {
      const auto sp = answer.find(' ');
      if (sp != std::string::npos && sp + 4 <= answer.size()) {
        for (std::size_t i = sp + 1; i < sp + 4; ++i) {
          if (answer[i] < '0' || answer[i] > '9') {
            status = 0;
            break;
          }
          status = status * 10 + (answer[i] - '0');
        }
      }
    }
    if (status == 0) {
      result.detail =
          fmt::format("GET {}: {}", p.http_path,
                      r < 0 ? std::string(std::strerror(errno)) : std::string("no HTTP answer"));
    } else {
      result.ok = status >= 200 && status < 400;
      result.detail = fmt::format("GET {}: HTTP {}", p.http_path, status);
    }
    break;
  }
  ::close(fd);
  return result;
}

ProbeResult ProbeTcp(const model::Probe& p, std::uint32_t port, SteadyTime deadline) {
  std::string why;
  int fd = ProbeConnect(port, deadline, p, why);
  if (fd < 0) return {false, why};
  ::close(fd);
  return {true, fmt::format("port {}: connected", port)};
}

ProbeResult ProbeCommand(const model::Probe& p, const ProbeTarget& t,
                         const std::filesystem::path& shim, SteadyTime deadline) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return {false, fmt::format("cannot make a pipe: {}", std::strerror(errno))};
  }
  std::vector<std::string> args{shim.string(), "--probe", t.run_dir.string()};
  args.insert(args.end(), p.command.begin(), p.command.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own session: a timeout kills its whole process group.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  pid_t pid = 0;
  int err = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  if (err != 0) {
    ::close(out[0]);
    return {false, fmt::format("cannot start berth-shim --probe: {}", std::strerror(err))};
  }
  std::string output;
  bool timed_out = false;
  int status = 0;
  while (true) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    int left = ProbeMsLeft(deadline);
    if (left == 0) {
      timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    pollfd pfd{out[0], POLLIN, 0};
    if (::poll(&pfd, 1, std::min(left, 20)) > 0) {
      char buf[256];
      ssize_t r = ::read(out[0], buf, sizeof buf);
      if (r > 0 && output.size() < 4096) output.append(buf, static_cast<std::size_t>(r));
    }
  }
  // What it wrote just before it exited is still in the pipe: read it too,
  // without waiting on a child of its that may hold the pipe open.
  for (pollfd pfd{out[0], POLLIN, 0}; !timed_out && ::poll(&pfd, 1, 0) > 0;) {
    char buf[256];
    const ssize_t r = ::read(out[0], buf, sizeof buf);
    if (r <= 0) break;
    if (output.size() < 4096) output.append(buf, static_cast<std::size_t>(r));
  }
  ::close(out[0]);
  const std::string cmd = p.command.front();
  if (timed_out) return {false, fmt::format("{}: {}", cmd, ProbeTimedOut(p))};
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  if (output.size() > 200) output = "..." + output.substr(output.size() - 200);
  const std::string said = output.empty() ? "" : fmt::format(" ({})", output);
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    return {code == 0, fmt::format("{}: exit {}{}", cmd, code, said)};
  }
  return {false, fmt::format("{}: signal {}{}", cmd, WTERMSIG(status), said)};
}

}  // namespace

std::optional<bool> ProbeCounter::Observe(bool ok) {
  if (ok) {
    ++passes_;
    failures_ = 0;
  } else {
    ++failures_;
    passes_ = 0;
  }
  std::optional<bool> next = verdict_;
  if (ok && passes_ >= std::max<std::uint32_t>(probe_.success_threshold, 1)) next = true;
  if (!ok && failures_ >= std::max<std::uint32_t>(probe_.failure_threshold, 1)) next = false;
  if (next == verdict_) return std::nullopt;
  verdict_ = next;
  return next;
}

ProbeResult RunProbe(const model::Probe& probe, const ProbeTarget& target,
                     const std::filesystem::path& shim) {
  const SteadyTime deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(std::max<std::int64_t>(probe.timeout_ms, 1));
  switch (probe.kind) {
    case model::ProbeKind::kHttp:
      return ProbeHttp(probe, target.node_port, deadline);
    case model::ProbeKind::kTcp:
      // The service's port is the replica's; any other is the node's.
      return ProbeTcp(probe,
                      probe.tcp_port == target.service_port || probe.tcp_port == 0
                          ? target.node_port
                          : probe.tcp_port,
                      deadline);
    case model::ProbeKind::kCommand:
      return ProbeCommand(probe, target, shim, deadline);
    case model::ProbeKind::kNone:
      break;
  }
  return {true, "no probe"};
}

Prober::Prober(const Clock& clock, ProbeFn probe) : clock_(clock), probe_(std::move(probe)) {}

Prober::~Prober() {
  Stop();
}

void Prober::Start() {
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      woken_ = false;
      lock.unlock();
      const TimeMs next = RunDue();
      lock.lock();
      const TimeMs now = clock_.NowMs();
      const auto wait =
          std::chrono::milliseconds(next == 0 ? 1000 : std::clamp<TimeMs>(next - now, 0, 1000));
      cv_.wait_for(lock, wait, [this] { return stop_ || woken_; });
    }
  });
}

void Prober::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void Prober::SetTargets(std::vector<ProbeTarget> targets) {
  std::lock_guard lock(mu_);
  std::map<std::string, Watch> next;
  bool added = false;
  for (auto& t : targets) {
    if (t.readiness.kind == model::ProbeKind::kNone && t.liveness.kind == model::ProbeKind::kNone) {
      continue;
    }
    if (auto it = watches_.find(t.run_id); it != watches_.end()) {
      next.emplace(t.run_id, std::move(it->second));
      continue;
    }
    const std::string id = t.run_id;
    Watch w{std::move(t), ProbeCounter(model::Probe{}), ProbeCounter(model::Probe{})};
    w.readiness = ProbeCounter(w.target.readiness);
    w.liveness = ProbeCounter(w.target.liveness);
    next.emplace(id, std::move(w));
    added = true;
  }
  watches_ = std::move(next);
  if (added) {
    woken_ = true;
    cv_.notify_all();
  }
}

std::vector<HealthChange> Prober::TakeChanges() {
  std::lock_guard lock(mu_);
  std::vector<HealthChange> out;
  out.swap(changes_);
  return out;
}

std::optional<bool> Prober::Ready(const std::string& run_id) const {
  std::lock_guard lock(mu_);
  auto it = watches_.find(run_id);
  if (it == watches_.end() || it->second.target.readiness.kind == model::ProbeKind::kNone) {
    return std::nullopt;
  }
  return it->second.readiness.verdict();
}

TimeMs Prober::RunDue() {
  struct Due {
    std::string run_id;
    bool liveness = false;
    model::Probe probe;
    ProbeTarget target;
  };
  std::vector<Due> due;
  {
    std::lock_guard lock(mu_);
    const TimeMs now = clock_.NowMs();
    for (auto& [id, w] : watches_) {
      if (w.dead) continue;
      if (w.target.readiness.kind != model::ProbeKind::kNone && w.next_readiness_ms <= now) {
        due.push_back({id, false, w.target.readiness, w.target});
      }
      // Liveness only once the replica has been ready (or when it has no
      // readiness probe to wait for).
      const bool gated = w.target.readiness.kind != model::ProbeKind::kNone && !w.was_ready;
      if (w.target.liveness.kind != model::ProbeKind::kNone && !gated &&
          w.next_liveness_ms <= now) {
        due.push_back({id, true, w.target.liveness, w.target});
      }
    }
  }
  for (const auto& d : due) {
    ProbeResult r = probe_(d.probe, d.target);
    std::lock_guard lock(mu_);
    const TimeMs now = clock_.NowMs();
    auto it = watches_.find(d.run_id);
    if (it == watches_.end() || it->second.dead) continue;  // gone meanwhile
    Watch& w = it->second;
    if (!d.liveness) {
      w.next_readiness_ms = now + w.target.readiness.period_ms;
      if (auto v = w.readiness.Observe(r.ok)) {
        if (*v) w.was_ready = true;
        changes_.push_back({d.run_id, *v, false, r.detail, now});
      }
    } else {
      w.next_liveness_ms = now + w.target.liveness.period_ms;
      if (auto v = w.liveness.Observe(r.ok); v && !*v) {
        w.dead = true;
        changes_.push_back({d.run_id, false, true,
                            fmt::format("liveness failed {} times in a row: {}",
                                        w.target.liveness.failure_threshold, r.detail),
                            now});
      }
    }
  }
  std::lock_guard lock(mu_);
  TimeMs next = 0;
  for (const auto& [id, w] : watches_) {
    if (w.dead) continue;
    auto consider = [&](TimeMs at) { next = next == 0 ? at : std::min(next, at); };
    if (w.target.readiness.kind != model::ProbeKind::kNone) consider(w.next_readiness_ms);
    const bool gated = w.target.readiness.kind != model::ProbeKind::kNone && !w.was_ready;
    if (w.target.liveness.kind != model::ProbeKind::kNone && !gated) {
      consider(w.next_liveness_ms);
    }
  }
  return next;
}

}  // namespace berth::agent
