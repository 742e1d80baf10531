// berth-agent-storm-bench: many agents registering with one berthd at once,
// over mutual TLS, cold and after a takeover. Starts a PostgreSQL 15 server
// of its own (tests/support/pg_server), two berthd on it sharing one CA
// (the second gets a copy of the first's tls/ before it starts, as an
// operator gives every control-plane host the same CA), and --agents
// berth-agent processes, each a simulated node of --gpus GPUs with its own
// node certificate (berthd cert node) and both berthd's agent addresses.
//
//   1. cold: every agent started at once; time until the leader lists them
//      all Ready; the leader's CPU time and resident memory then, and
//      after --steady seconds of heartbeats and telemetry;
//   2. takeover: kill -9 of the leader; time until the standby serves, and
//      until it lists every node Ready again (each agent's reconnection,
//      re-registration and reconciliation); the new leader's CPU time and
//      memory.
//
// Prints the figures. Run from a release build.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include "integration/harness.h"
#include "support/pg_server.h"

namespace {

using namespace berth::it;
using namespace std::chrono_literals;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

struct Usage {
  double cpu_s = 0;  // user + system
  double rss_mib = 0;
  double peak_mib = 0;
};

Usage UsageOf(pid_t pid) {
  Usage u;
  const std::string text = ReadFile(fmt::format("/proc/{}/stat", pid));
  // The fields after the command (which may hold spaces) start past ')'.
  const auto close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(text.substr(close + 2));
    std::string f;
    long long utime = 0;
    long long stime = 0;
    for (int i = 3; i <= 15 && fields >> f; ++i) {
      if (i == 14) utime = std::stoll(f);
      if (i == 15) stime = std::stoll(f);
    }
    u.cpu_s = static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(status, line);) {
    auto kib = [&](const char* key) {
      return std::stod(line.substr(std::string(key).size())) / 1024.0;
    };
    if (line.starts_with("VmRSS:")) u.rss_mib = kib("VmRSS:");
    if (line.starts_with("VmHWM:")) u.peak_mib = kib("VmHWM:");
  }
  return u;
}

int ReadyNodes(const Berthd& b) {
  Reply r = b.http().Get("/v1/nodes");
  if (r.status != 200 || !r.body.contains("nodes")) return -1;
  int ready = 0;
  for (const json& n : r.body["nodes"]) ready += n.value("state", "") == "Ready";
  return ready;
}

double Seconds(SteadyClock::time_point from) {
  return std::chrono::duration<double>(SteadyClock::now() - from).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "berth-agent-storm-bench: many agents registering at once, cold and after a takeover"};
  int agents = 100;
  int gpus = 8;
  int steady = 20;
  std::string ttl = "3s";
  app.add_option("--agents", agents, "berth-agent processes")->capture_default_str();
  app.add_option("--gpus", gpus, "simulated GPUs per agent's node")->capture_default_str();
  app.add_option("--steady", steady, "seconds of steady heartbeats measured after the cold start")
      ->capture_default_str();
  app.add_option("--leader-ttl", ttl, "berthd --leader-ttl")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (auto why = berth::tests::PgServerUnavailable()) {
    std::cerr << "no PostgreSQL server to run: " << *why << "\n";
    return 2;
  }
  auto server = berth::tests::PgServer::Start();
  if (!server) {
    std::cerr << "cannot start PostgreSQL: " << server.error() << "\n";
    return 1;
  }
  TempDir dir("berth-storm");
  auto member = [&](const std::string& name) {
    BerthdOptions o;
    o.name = name;
    o.all_in_one = false;
    o.tls = true;
    o.extra_args = {"--store", (*server)->conninfo(), "--leader-ttl", ttl, "--rate-limit", "0"};
    return o;
  };
  Berthd a(dir, member("berthd-a"));
  Berthd b(dir, member("berthd-b"));
  if (!a.Start(60s)) {
    std::cerr << "berthd-a did not lead:\n" << a.log();
    dir.keep();
    return 1;
  }
  // One CA for the control plane: b starts with a's.
  std::filesystem::create_directories(b.data_dir());
  std::filesystem::copy(a.data_dir() / "tls", b.data_dir() / "tls",
                        std::filesystem::copy_options::recursive);
  if (!b.StartStandby(60s)) {
    std::cerr << "berthd-b did not stand by:\n" << b.log();
    dir.keep();
    return 1;
  }
  b.set_token(a.http().token());

  const std::string servers = a.agent_address() + "," + b.agent_address();
  std::vector<std::filesystem::path> clusters;
  for (int i = 0; i < agents; ++i) {
    clusters.push_back(dir / fmt::format("node-{}.yaml", i));
    WriteFile(clusters.back(),
              fmt::format("nodes:\n  - name: storm-{:03}\n    cpus: 64\n    memory: 512Gi\n    "
                          "gpus: {{model: H100-80GB, memory: 80Gi, count: {}}}\n",
                          i, gpus));
  }
  // Certificates first (berthd cert node, one process each), so that the
  // storm itself is only the agents.
  std::vector<std::unique_ptr<Process>> procs;
  std::vector<std::vector<std::string>> args(agents);
  const auto certs_from = SteadyClock::now();
  for (int i = 0; i < agents; ++i) {
    const std::string node = fmt::format("storm-{:03}", i);
    const auto out = dir / fmt::format("agent-{}-certs", i);
    if (!IssueNodeCert(dir, a, node, out)) {
      dir.keep();
      return 1;
    }
    args[i] = {"--data-dir", (dir / fmt::format("agent-{}", i)).string(),
               "--simulate", clusters[i].string(),
               "--server",   servers,
               "--tls-ca",   (out / "ca.pem").string(),
               "--tls-cert", (out / (node + ".pem")).string(),
               "--tls-key",  (out / (node + "-key.pem")).string()};
  }
  fmt::print("{} node certificates issued in {:.1f} s\n", agents, Seconds(certs_from));

  const Usage before = UsageOf(a.pid());
  const auto cold_from = SteadyClock::now();
  for (int i = 0; i < agents; ++i) {
    procs.push_back(std::make_unique<Process>(BinDir() / "berth-agent", args[i],
                                              dir / fmt::format("agent-{}.log", i)));
  }
  if (!WaitFor([&] { return ReadyNodes(a) == agents; }, 300s, 100ms)) {
    std::cerr << "not every agent registered: " << ReadyNodes(a) << " of " << agents << " Ready\n";
    dir.keep();
    return 1;
  }
  const double cold_s = Seconds(cold_from);
  const Usage cold = UsageOf(a.pid());
  std::this_thread::sleep_for(std::chrono::seconds(steady));
  const Usage settled = UsageOf(a.pid());

  const auto kill_from = SteadyClock::now();
  a.Kill();
  if (!b.WaitUntilReady(60s)) {
    std::cerr << "berthd-b did not take over:\n" << b.log();
    dir.keep();
    return 1;
  }
  const double serving_s = Seconds(kill_from);
  const Usage b_before = UsageOf(b.pid());
  if (!WaitFor([&] { return ReadyNodes(b) == agents; }, 300s, 100ms)) {
    std::cerr << "not every agent came back: " << ReadyNodes(b) << " of " << agents << " Ready\n";
    dir.keep();
    return 1;
  }
  const double all_back_s = Seconds(kill_from);
  const Usage b_after = UsageOf(b.pid());

  fmt::print(
      "\nberth-agent-storm-bench: {} agents x {} simulated GPUs, mutual TLS, PostgreSQL, "
      "--leader-ttl {}\n",
      agents, gpus, ttl);
  fmt::print(
      "cold start      all {} Ready in {:.2f} s; berthd CPU {:.1f} s, RSS {:.0f} MiB "
      "(peak {:.0f} MiB)\n",
      agents, cold_s, cold.cpu_s - before.cpu_s, cold.rss_mib, cold.peak_mib);
  fmt::print("steady {:>3} s   berthd CPU {:.1f} s ({:.0f}% of one core), RSS {:.0f} MiB\n", steady,
             settled.cpu_s - cold.cpu_s,
             100.0 * (settled.cpu_s - cold.cpu_s) / static_cast<double>(steady), settled.rss_mib);
  fmt::print(
      "takeover        kill -9 to the standby serving {:.2f} s; to all {} Ready {:.2f} s; "
      "new leader CPU {:.1f} s over the storm, RSS {:.0f} MiB (peak {:.0f} MiB)\n",
      serving_s, agents, all_back_s, b_after.cpu_s - b_before.cpu_s, b_after.rss_mib,
      b_after.peak_mib);
  return 0;
}
