// Service controller benchmark: what one steady round of berthd's service
// controller costs (control/service_controller.h) beside a deep queue of
// training jobs, on a real SQLite store in a temporary directory.
//
// The store holds --pending training jobs (submitted as arrays) and
// --services services of --replicas replicas each, all pending; a round
// then finds every service at its desired count and changes nothing, so it
// measures what every 2 s costs berthd: reading the services and their
// live replicas. Prints the round's p50 and p99 over --rounds rounds.
//
//   berth-replica-bench [--pending N] [--services S] [--replicas R] [--rounds K]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/clock.h"
#include "control/controller.h"
#include "control/service_controller.h"
#include "model/service.h"
#include "sched/core_scheduler.h"
#include "store/sqlite_store.h"

namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr const char* kPolicy = R"(queues:
  - name: ml
    children:
      - name: train
      - name: serve
        kind: inference
tenants:
  ml:
    limits: {pending_jobs: 1000000, pending_jobs_per_member: 1000000}
)";

double Ms(SteadyClock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"berth-replica-bench: one steady round of the service controller"};
  int pending = 100'000;
  int services = 100;
  int replicas = 4;
  int rounds = 50;
  app.add_option("--pending", pending, "training jobs waiting in the queue")->capture_default_str();
  app.add_option("--services", services, "services")->capture_default_str();
  app.add_option("--replicas", replicas, "replicas per service")->capture_default_str();
  app.add_option("--rounds", rounds, "rounds measured")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("berth-replica-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  berth::ManualClock clock(1'800'000'000'000);
  auto opened = berth::store::SqliteStore::Open(dir, clock.NowMs());
  if (!opened) {
    std::fprintf(stderr, "cannot open the store: %s\n", opened.error().message.c_str());
    return 1;
  }
  auto& store = **opened;
  if (auto v = store.ApplyPolicy(kPolicy, "bench", "", clock.NowMs()); !v) {
    std::fprintf(stderr, "policy: %s\n", v.error().message.c_str());
    return 1;
  }
  berth::sched::CoreScheduler scheduler;
  berth::server::Controller controller(store, scheduler, clock,
                                       berth::server::ControllerOptions{dir / "logs"});
  berth::server::ServiceController service_controller(store, controller, clock);

  // The deep queue, 10,000 jobs per array.
  const auto fill_start = SteadyClock::now();
  for (int left = pending; left > 0; left -= 10'000) {
    berth::model::JobSpec spec;
    spec.name = "train";
    spec.tenant = "ml";
    spec.queue = "train";
    spec.command = {"train"};
    spec.resources.gpus = 1;
    spec.array = berth::model::JobArray{0, static_cast<std::uint32_t>(std::min(left, 10'000)), {}};
    if (auto ids = store.CreateJobs(spec, clock.NowMs(), "bench"); !ids) {
      std::fprintf(stderr, "jobs: %s\n", ids.error().message.c_str());
      return 1;
    }
  }
  for (int s = 0; s < services; ++s) {
    auto spec = berth::model::ParseServiceSpec(
        "name: svc" + std::to_string(s) + "\ntenant: ml\nqueue: serve\ncommand: [serve]\n" +
        "replicas: {min: " + std::to_string(replicas) + ", max: " + std::to_string(replicas) +
        "}\nresources: {gpus: 1}\n");
    if (!spec) {
      std::fprintf(stderr, "service: %s\n", spec.error().message.c_str());
      return 1;
    }
    if (auto applied = store.ApplyService(*spec, "bench", clock.NowMs(), 1'000'000); !applied) {
      std::fprintf(stderr, "service: %s\n", applied.error().message.c_str());
      return 1;
    }
  }
  // The first round makes every replica.
  if (auto st = service_controller.Reconcile(); !st) {
    std::fprintf(stderr, "round: %s\n", st.error().message.c_str());
    return 1;
  }
  std::printf("store: %d pending training jobs, %d services x %d replicas (made in %.0f ms)\n",
              pending, services, replicas, Ms(SteadyClock::now() - fill_start));

  std::vector<double> took;
  for (int r = 0; r < rounds; ++r) {
    clock.Advance(2'000);
    const auto t0 = SteadyClock::now();
    if (auto st = service_controller.Reconcile(); !st) {
      std::fprintf(stderr, "round: %s\n", st.error().message.c_str());
      return 1;
    }
    took.push_back(Ms(SteadyClock::now() - t0));
  }
  std::sort(took.begin(), took.end());
  auto at = [&](double q) {
    return took[std::min(took.size() - 1, static_cast<std::size_t>(q * took.size()))];
  };
  std::printf("steady round: p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d rounds\n", at(0.5),
              at(0.99), took.back(), rounds);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
