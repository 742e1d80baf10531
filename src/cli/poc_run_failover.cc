// `berth poc run`'s failover step: the operator's command stops the leading
// berthd and the run watches another take over.
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "cli/poc_runner.h"
#include "common/units.h"

namespace berth::cli::poc::runner {

// Runs the operator's command against the leader, then polls every
// address until a different berthd leads at a higher term.
PocStepResult PocRunner::Failover(const Step& step, json& evidence) {
  PocStepResult r;
  r.ok = false;
  r.expected = fmt::format(
      "--failover-command stops the leader and a different berthd leads at a "
      "higher term within {}",
      FormatDurationMs(step.within_ms));
  const auto before = Health();
  const auto lead = PocLeaderOf(before);
  json ev{{"command", opt_.failover_command}, {"before", PocHealthList(before)}};
  if (!lead) {
    r.actual = "no berthd answers as leader before the failover: " + PocHealthList(before);
    evidence["failover"] = std::move(ev);
    return r;
  }
  const PocHealth old = before[*lead];
  ev["old_leader"] = old.leader;
  ev["old_leader_url"] = old.url;
  ev["old_term"] = old.term;
  const TimeMs began = Now();
  const CommandOutcome ran = opt_.run_command ? opt_.run_command(opt_.failover_command, old.url)
                                              : RunFailoverCommand(opt_.failover_command, old.url);
  const TimeMs stopped = Now();
  ev["exit_status"] = ran.exit_status;
  ev["output_tail"] = ran.output_tail;
  ev["command_ms"] = stopped - began;
  if (ran.exit_status != 0) {
    r.actual = fmt::format("the failover command exited {}: {}", ran.exit_status,
                           PocQuote(ran.output_tail));
    evidence["failover"] = std::move(ev);
    return r;
  }
  const TimeMs deadline = stopped + step.within_ms;
  std::vector<PocHealth> seen;
  while (true) {
    seen = Health();
    for (const auto& h : seen) {
      if (h.error.empty() && h.role == "leader" && h.leader != old.leader && h.term > old.term) {
        const TimeMs took = Now() - stopped;
        ev["new_leader"] = h.leader;
        ev["new_leader_url"] = h.url;
        ev["new_term"] = h.term;
        ev["takeover_ms"] = took;
        ev["after"] = PocHealthList(seen);
        r.ok = true;
        r.actual = fmt::format(
            "{} (term {}) stopped by the command (exit 0); {} leads at term {} {} ms after it",
            old.url, old.term, h.url, h.term, took);
        evidence["failover"] = std::move(ev);
        return r;
      }
    }
    if (Now() >= deadline || Interrupted()) break;
    opt_.sleep(opt_.poll_ms);
  }
  ev["after"] = PocHealthList(seen);
  r.actual = fmt::format("no other berthd leads at a term above {} after {}: {}", old.term,
                         FormatDurationMs(step.within_ms), PocHealthList(seen));
  evidence["failover"] = std::move(ev);
  return r;
}

std::vector<PocHealth> PocRunner::Health() const {
  std::vector<PocHealth> seen;
  for (std::size_t i = 0; i < admin_.urls().size(); ++i) {
    PocHealth h;
    h.url = admin_.urls()[i].text;
    auto got = admin_.GetFrom(i, "/healthz");
    if (!got) {
      h.error = got.error().message;
    } else {
      h.role = Text(*got, "role") == "-" ? "" : Text(*got, "role");
      h.leader = Text(*got, "leader") == "-" ? "" : Text(*got, "leader");
      h.term = Int(*got, "term").value_or(0);
    }
    seen.push_back(std::move(h));
  }
  return seen;
}

}  // namespace berth::cli::poc::runner

namespace berth::cli::poc {

CommandOutcome RunFailoverCommand(const std::string& command, const std::string& leader) {
  constexpr std::size_t kTail = 2000;
  CommandOutcome out;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    out.output_tail = "cannot make a pipe for the command's output";
    return out;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!std::string_view(*e).starts_with("BERTH_POC_LEADER=")) env_text.emplace_back(*e);
  }
  env_text.push_back("BERTH_POC_LEADER=" + leader);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh";
  std::string dash_c = "-c";
  std::string cmd = command;
  char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, "/bin/sh", &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (spawned != 0) {
    ::close(fds[0]);
    out.output_tail = fmt::format("cannot start /bin/sh: error {}", spawned);
    return out;
  }
  std::string output;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buf, static_cast<std::size_t>(n));
    if (output.size() > 2 * kTail) output.erase(0, output.size() - kTail);
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.exit_status = WIFEXITED(status)     ? WEXITSTATUS(status)
                    : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                          : -1;
  if (output.size() > kTail) output.erase(0, output.size() - kTail);
  out.output_tail = std::move(output);
  return out;
}

}  // namespace berth::cli::poc
