// berth-takeover-bench: how long the control plane is gone when its leader
// dies. Starts a PostgreSQL 15 server of its own (tests/support/pg_server,
// from initdb in a temp dir), two berthd on it (--store, --leader-ttl) and
// one berth-agent with both berthd's agent addresses (a simulated node of 8
// GPUs), then runs --trials trials:
//
//   1. a job on the leader, waited on until it succeeds (warm);
//   2. kill -9 of the leader at wall clock T;
//   3. the standby polled until /readyz answers 200 (its takeover): ready;
//   4. at once a 1-GPU job submitted to it, polled until it has a
//      placement: placed = that placement's started_at_ms (the shim's exec
//      time, wall clock) - T. This is "kill to the first placement by the
//      new leader", agent reconnection included;
//   5. the killed berthd started again (it comes back as a standby).
//
// Then every job acknowledged in any trial is checked on the last leader:
// each succeeded and started exactly once. Prints the distributions.
#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include "integration/harness.h"
#include "support/pg_server.h"

namespace {

using namespace berth::it;
using namespace std::chrono_literals;
using nlohmann::json;

std::int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

void Print(const std::string& what, const std::vector<double>& v) {
  fmt::print(
      "{:<34} n={:<3} min {:>6.0f}  p50 {:>6.0f}  p90 {:>6.0f}  p99 {:>6.0f}  max {:>6.0f} ms\n",
      what, v.size(), Percentile(v, 0.0), Percentile(v, 0.5), Percentile(v, 0.9),
      Percentile(v, 0.99), Percentile(v, 1.0));
}

std::string Spec(const std::string& name, int gpus) {
  return json{{"name", name}, {"command", {"sh", "-c", "exit 0"}}, {"resources", {{"gpus", gpus}}}}
      .dump();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"berth-takeover-bench: kill -9 of the leading berthd, time to the next placement"};
  int trials = 20;
  std::string ttl = "3s";
  app.add_option("--trials", trials, "kills of the leader")->capture_default_str();
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
  TempDir dir;
  auto member = [&](const std::string& name) {
    BerthdOptions o;
    o.name = name;
    o.all_in_one = false;
    // No rate limit: the bench polls its jobs every 5 ms.
    o.extra_args = {"--store", (*server)->conninfo(), "--leader-ttl", ttl, "--rate-limit", "0"};
    return o;
  };
  std::vector<std::unique_ptr<Berthd>> berthd;
  berthd.push_back(std::make_unique<Berthd>(dir, member("berthd-a")));
  berthd.push_back(std::make_unique<Berthd>(dir, member("berthd-b")));
  if (!berthd[0]->Start() || !berthd[1]->StartStandby()) {
    std::cerr << "berthd did not come up:\n" << berthd[0]->log() << berthd[1]->log();
    dir.keep();
    return 1;
  }
  const std::string token = berthd[0]->http().token();
  berthd[1]->set_token(token);
  const auto cluster = dir.path() / "cluster.yaml";
  {
    std::ofstream out(cluster);
    out << "nodes:\n  - name: takeover-node\n    cpus: 16\n    memory: 64Gi\n    gpus: {model: "
           "H100-80GB, memory: 80Gi, count: 8}\n";
  }
  auto agent =
      StartAgent(dir, *berthd[0], dir.path() / "agent", cluster, "agent.log", {},
                 {"--server", berthd[1]->agent_address() + "," + berthd[0]->agent_address()});
  if (!berthd[0]->WaitForNode("Ready", 30s)) {
    std::cerr << "the agent did not register:\n" << berthd[0]->log();
    dir.keep();
    return 1;
  }

  std::vector<double> ready_ms;
  std::vector<double> placed_ms;
  std::vector<std::int64_t> acknowledged;
  int leader = 0;
  for (int t = 0; t < trials; ++t) {
    Berthd& lead = *berthd[leader];
    Berthd& standby = *berthd[1 - leader];
    const std::int64_t warm = lead.Submit(Spec(fmt::format("warm-{}", t), 1));
    if (warm <= 0 || !lead.WaitForState(warm, "Succeeded", 60s)) {
      std::cerr << "trial " << t << ": the leader did not run a job\n" << lead.log();
      dir.keep();
      return 1;
    }
    acknowledged.push_back(warm);
    const std::int64_t killed_at = WallMs();
    lead.Kill();
    if (!standby.WaitUntilReady(60s)) {
      std::cerr << "trial " << t << ": the standby did not take over\n" << standby.log();
      dir.keep();
      return 1;
    }
    ready_ms.push_back(static_cast<double>(WallMs() - killed_at));
    const std::int64_t probe = standby.Submit(Spec(fmt::format("probe-{}", t), 1));
    if (probe <= 0) {
      std::cerr << "trial " << t << ": the new leader refused a job\n";
      return 1;
    }
    acknowledged.push_back(probe);
    std::int64_t started = 0;
    WaitFor(
        [&] {
          json job = standby.Job(probe);
          if (job.is_object() && job.contains("placement") && job["placement"].is_array() &&
              !job["placement"].empty()) {
            const json& at = job["placement"][0]["started_at_ms"];
            if (at.is_number_integer()) started = at.get<std::int64_t>();
          }
          return started > 0;
        },
        60s, 5ms);
    if (started == 0) {
      std::cerr << "trial " << t << ": the new leader placed nothing\n" << standby.log();
      dir.keep();
      return 1;
    }
    placed_ms.push_back(static_cast<double>(started - killed_at));
    fmt::print("trial {:>2}: ready {:>5} ms, first placement {:>5} ms\n", t + 1, ready_ms.back(),
               placed_ms.back());
    if (!lead.StartStandby()) {
      std::cerr << "trial " << t << ": the old leader did not come back as a standby\n";
      dir.keep();
      return 1;
    }
    lead.set_token(token);
    leader = 1 - leader;
  }

  // Nothing acknowledged lost, nothing started twice.
  Berthd& last = *berthd[leader];
  int lost = 0;
  int twice = 0;
  for (std::int64_t id : acknowledged) {
    if (!last.WaitForState(id, "Succeeded", 60s)) ++lost;
    const json job = last.Job(id);
    if (CountEvents(job, "Started") != 1) {
      ++twice;
      std::cerr << "job " << id << " did not start exactly once:\n" << job.dump(2) << "\n";
      dir.keep();
    }
  }
  fmt::print("\nberth-takeover-bench: {} trials, --leader-ttl {}, one agent (8 simulated GPUs)\n",
             trials, ttl);
  Print("kill -9 to standby ready", ready_ms);
  Print("kill -9 to first placement", placed_ms);
  fmt::print("acknowledged jobs {}: not succeeded {}, started other than once {}\n",
             acknowledged.size(), lost, twice);
  fmt::print(
      "for comparison: Slurm's backup slurmctld takes over after SlurmctldTimeout "
      "(120 s by default); Kubernetes' leader election uses a 15 s lease\n");
  return lost == 0 && twice == 0 ? 0 : 1;
}
