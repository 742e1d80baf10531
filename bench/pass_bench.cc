// berth-pass-bench: the control loop's pass at fleet scale, on SQLite and on
// PostgreSQL in the same run. A pass is what berthd's controller does each
// tick: read the nodes, the active runs and the pending queue from the
// store, decide with the scheduling core, commit the plan in one
// transaction, and send the start orders. The bench drives the real
// Controller (src/control) over the real store of each backend, with
// --nodes registered nodes of --gpus GPUs each (agents whose streams take
// every order and report nothing back) and --pending queued jobs of 1, 2, 4
// and 8 GPUs.
//
// Each of --rounds rounds times one placing pass (the cluster is empty: it
// places until the cluster is full), then --steady passes over the full
// cluster (nothing fits: the pass reads everything and decides, and writes
// only the reasons that changed), then ends every run as an agent would
// report it (untimed) and moves the manual clock on a second.
//
// PostgreSQL is a server the bench starts itself (initdb in a temp
// directory, fsync on, as SQLite's commits are durable); --store sqlite or
// postgresql runs one backend only.
//
//   berth-pass-bench [--nodes 1000] [--gpus 8] [--pending 16000] [--rounds 3]
//                    [--steady 10] [--store both|sqlite|postgresql]
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "control/agent_session.h"
#include "control/controller.h"
#include "control/lifecycle.h"
#include "sched/core_scheduler.h"
#include "store/sqlite_store.h"
#include "support/pg_server.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using berth::server::AgentSession;
using berth::server::Controller;

// An agent's stream that takes every order.
class AcceptingSession : public AgentSession {
 public:
  explicit AcceptingSession(std::string node, std::atomic<std::int64_t>& starts)
      : node_(std::move(node)), starts_(starts) {}
  bool Send(const berth::v1::ServerMessage& msg) override {
    if (msg.has_start_run()) starts_.fetch_add(1);
    return true;
  }
  const std::string& node() const override { return node_; }

 private:
  std::string node_;
  std::atomic<std::int64_t>& starts_;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

struct Figures {
  std::string backend;
  double submit_ms = 0;
  std::vector<double> placing_ms;
  std::vector<std::int64_t> placed;
  std::vector<double> steady_ms;
  double finish_ms = 0;  // ending one round's runs, as agents report them
};

int Fail(const std::string& what) {
  std::cerr << "berth-pass-bench: " << what << '\n';
  return 1;
}

struct Options {
  int nodes = 1000;
  int gpus = 8;
  int pending = 16000;
  int rounds = 3;
  int steady = 10;
};

int RunBackend(const std::string& backend, const berth::store::StoreLocation& where,
               const fs::path& logs, const Options& o, Figures& f) {
  f.backend = backend;
  berth::ManualClock clock(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count());
  auto opened = berth::store::SqliteStore::Open(where, clock.NowMs());
  if (!opened) return Fail(backend + ": " + opened.error().message);
  std::unique_ptr<berth::store::SqliteStore> store = std::move(*opened);
  berth::sched::CoreScheduler scheduler;
  berth::server::ControllerOptions options{logs};
  auto controller = std::make_unique<Controller>(*store, scheduler, clock, options);

  std::atomic<std::int64_t> starts = 0;
  for (int n = 0; n < o.nodes; ++n) {
    berth::v1::Register reg;
    auto* node = reg.mutable_node();
    const std::string name = fmt::format("node-{:04}", n);
    node->set_name(name);
    node->set_cpus(128);
    node->set_memory_bytes(1024ULL << 30);
    for (int g = 0; g < o.gpus; ++g) {
      auto* gpu = node->add_gpus();
      gpu->set_index(static_cast<std::uint32_t>(g));
      gpu->set_uuid(fmt::format("GPU-{}-{}", n, g));
      gpu->set_model(n % 2 == 0 ? "H100-80GB" : "A100-80GB");
      gpu->set_memory_bytes(80ULL << 30);
      gpu->set_health("healthy");
    }
    auto session = std::make_shared<AcceptingSession>(name, starts);
    if (auto st = controller->OnRegister(reg, session); !st) {
      return Fail(backend + ": register " + name + ": " + st.error().message);
    }
  }

  // The queue: arrays of each shape, the way a sweep arrives.
  const auto submit_start = Clock::now();
  const std::array<int, 4> shapes{1, 2, 4, 8};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    berth::model::JobSpec spec;
    spec.name = fmt::format("sweep-{}gpu", shapes[i]);
    spec.command = {"sleep", "3600"};
    spec.resources.gpus = static_cast<std::uint32_t>(shapes[i]);
    spec.array = berth::model::JobArray{
        0, static_cast<std::uint32_t>(o.pending / static_cast<int>(shapes.size())), {}};
    if (auto ids = store->CreateJobs(spec, clock.NowMs(), "bench"); !ids) {
      return Fail(backend + ": submit: " + ids.error().message);
    }
  }
  f.submit_ms = Ms(Clock::now() - submit_start);

  for (int round = 0; round < o.rounds; ++round) {
    const std::int64_t before = starts.load();
    auto t0 = Clock::now();
    if (auto st = controller->RunPass(); !st) return Fail(backend + ": " + st.error().message);
    f.placing_ms.push_back(Ms(Clock::now() - t0));
    f.placed.push_back(starts.load() - before);
    for (int s = 0; s < o.steady; ++s) {
      clock.Advance(200);
      t0 = Clock::now();
      if (auto st = controller->RunPass(); !st) return Fail(backend + ": " + st.error().message);
      f.steady_ms.push_back(Ms(Clock::now() - t0));
    }
    // Every run starts and ends, as its agent would report.
    t0 = Clock::now();
    auto active = store->ActiveRuns();
    if (!active) return Fail(backend + ": " + active.error().message);
    const berth::TimeMs now = clock.NowMs();
    for (const auto& run : *active) {
      if (auto st = berth::control::MarkRunStarted(*store, run.run_id, 4242, now, now); !st) {
        return Fail(backend + ": start " + run.run_id + ": " + st.error().message);
      }
      berth::v1::RunExited exit;
      exit.set_run_id(run.run_id);
      exit.set_exit_code(0);
      exit.set_started_at_ms(now);
      exit.set_ended_at_ms(now + 1000);
      if (auto st = controller->OnRunExited(run.node, exit); !st) {
        return Fail(backend + ": exit " + run.run_id + ": " + st.error().message);
      }
    }
    f.finish_ms = std::max(f.finish_ms, Ms(Clock::now() - t0));
    clock.Advance(1000);
  }
  controller.reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string which = "both";
  CLI::App app{"berth-pass-bench: the controller's pass at fleet scale, SQLite vs PostgreSQL"};
  app.add_option("--nodes", o.nodes, "registered nodes")->capture_default_str();
  app.add_option("--gpus", o.gpus, "GPUs per node")->capture_default_str();
  app.add_option("--pending", o.pending, "queued jobs (a quarter each of 1, 2, 4 and 8 GPUs)")
      ->capture_default_str();
  app.add_option("--rounds", o.rounds, "placing passes, each onto an empty cluster")
      ->capture_default_str();
  app.add_option("--steady", o.steady, "passes over the full cluster after each placing pass")
      ->capture_default_str();
  app.add_option("--store", which, "both, sqlite or postgresql")
      ->check(CLI::IsMember({"both", "sqlite", "postgresql"}))
      ->capture_default_str();
  bool whole_queue = false;
  app.add_flag("--whole-queue", whole_queue,
               "every pass reads the pending queue whole, as a store does where another process "
               "may write jobs beside it (StoreLocation::sole_writer false), for comparison");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::err);  // a thousand registrations say nothing worth reading
  if (o.nodes < 1 || o.gpus < 1 || o.pending < 4 || o.rounds < 1 || o.steady < 0) {
    return Fail("--nodes, --gpus, --rounds at least 1, --pending at least 4, --steady at least 0");
  }

  std::string tmpl = (fs::temp_directory_path() / "berth-pass-bench-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return Fail("mkdtemp failed");
  const fs::path dir = tmpl;
  std::vector<Figures> all;
  int rc = 0;
  if (which != "postgresql") {
    fs::create_directories(dir / "sqlite");
    Figures f;
    berth::store::StoreLocation where(dir / "sqlite");
    where.sole_writer = !whole_queue;
    rc = RunBackend("SQLite", where, dir / "sqlite-logs", o, f);
    if (rc == 0) all.push_back(f);
  }
  std::unique_ptr<berth::tests::PgServer> pg;
  if (rc == 0 && which != "sqlite") {
    if (auto why = berth::tests::PgServerUnavailable()) return Fail(*why);
    berth::tests::PgServerOptions pg_options;
    pg_options.durable = true;
    auto server = berth::tests::PgServer::Start(pg_options);
    if (!server) return Fail(server.error());
    pg = std::move(*server);
    Figures f;
    auto where = berth::store::StoreLocation::Postgres(pg->conninfo());
    where.sole_writer = !whole_queue;
    rc = RunBackend("PostgreSQL", where, dir / "pg-logs", o, f);
    if (rc == 0) all.push_back(f);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (rc != 0) return rc;

  fmt::print(
      "berth-pass-bench: {} nodes x {} GPUs, {} queued jobs, {} rounds of 1 placing + {} "
      "steady passes\n\n",
      o.nodes, o.gpus, o.pending, o.rounds, o.steady);
  fmt::print("{:<11} {:>10} {:>18} {:>10} {:>15} {:>15} {:>16}\n", "backend", "submit ms",
             "placing pass ms", "placed", "steady p50 ms", "steady p99 ms", "end runs ms");
  for (const auto& f : all) {
    const double placing_p50 = Percentile(f.placing_ms, 0.5);
    const double placing_max = *std::max_element(f.placing_ms.begin(), f.placing_ms.end());
    fmt::print("{:<11} {:>10.0f} {:>8.0f} (max {:>4.0f}) {:>10} {:>15.1f} {:>15.1f} {:>16.0f}\n",
               f.backend, f.submit_ms, placing_p50, placing_max,
               f.placed.empty() ? 0 : f.placed.front(), Percentile(f.steady_ms, 0.5),
               Percentile(f.steady_ms, 0.99), f.finish_ms);
  }
  std::cout << '\n';
  return 0;
}
