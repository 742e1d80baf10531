// berth-service-bench: how fast a service reacts, measured end to end on a
// real all-in-one berthd with its gateway (HAProxy) and berth-model-server
// replicas on loopback (docs/services.md, "The gateway in berthd"):
//
//   scale from zero   a request to a service at zero replicas, until its
//                     answer: placement, start, the first passing
//                     readiness probe, the gateway's route, the request.
//                     The model loads in 0 ms and answers in ~0 ms, so this
//                     is Berth's own part of a cold start. berthd's own
//                     figure (the replica's ColdStart event) is beside it.
//   autoscaler        a load step (from 1 to --clients concurrent clients)
//                     on a service at one replica, until a second replica
//                     is in the gateway's route (serving): the samples, the
//                     decision, placement, start, readiness, the route.
//   training-heavy    (--training-heavy) one pool of 8 GPUs: a service at
//                     one replica, low-priority preemptible training on
//                     the other 7, then a load that needs 3 replicas for
//                     --seconds. Run twice: without inference headroom and
//                     with 2 GPUs of it; each run's client-side p50/p95/p99,
//                     the replicas reached and when, and the training jobs
//                     the service took GPUs from.
//
// All depend on the readiness probe's period (1 s here, the least a spec
// may set) and on --service-interval (berthd's default 2 s is used).
#include <fmt/format.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "integration/harness.h"

namespace {

using berth::it::Berthd;
using berth::it::BerthdOptions;
using berth::it::Http;
using berth::it::TempDir;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kServicePolicy = R"(queues:
  - name: default
    children:
      - name: default
      - name: serve
        kind: inference
)";

double ServiceBenchMs(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

std::string ServiceBenchSummary(std::vector<double> v) {
  if (v.empty()) return "no sample";
  std::sort(v.begin(), v.end());
  return fmt::format("p50 {:.0f} ms, min {:.0f} ms, max {:.0f} ms ({} runs)", v[v.size() / 2],
                     v.front(), v.back(), v.size());
}

json ServiceBenchStatus(const Berthd& berthd, const std::string& name) {
  auto got = berthd.http().Get("/v1/services/default/" + name);
  return got.status == 200 ? got.body.at("status") : json();
}

bool ServiceBenchWait(const std::function<bool()>& ok, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    if (ok()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// One training-heavy run: what clients saw and what the service got.
struct HeavyRun {
  std::vector<double> latency_ms;  // every answered request
  int failed = 0;                  // answered other than 200
  int max_routed = 0;
  double to_three_ms = -1;  // load start to 3 replicas routed; -1: never
  int evicted = 0;          // training jobs stopped for the service
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

// Policy, service, training, load, clean-up; nullopt (said on stderr) when
// a step failed.
std::optional<HeavyRun> TrainingHeavy(Berthd& berthd, const std::filesystem::path& server,
                                      int headroom, int clients, int seconds) {
  const std::string pools =
      headroom > 0 ? fmt::format(
                         "pools:\n  - {{name: default, selector: {{}}, inference_headroom: {{gpus: "
                         "{}}}}}\n",
                         headroom)
                   : std::string("pools:\n  - {name: default, selector: {}}\n");
  if (berthd.http().Post("/v1/policy", pools + kServicePolicy).status != 201) {
    std::cerr << "the training-heavy policy was refused\n";
    return std::nullopt;
  }
  const std::string name = fmt::format("heavy{}", headroom);
  const std::string spec = fmt::format(R"(name: {}
queue: serve
command: ["{}", --load-ms, "0", --ttft-ms, "200", --itl-ms, "0", --max-batch, "2"]
replicas: {{min: 1, max: 3}}
resources: {{gpus: 1}}
readiness: {{http: /health, period: 1s, timeout: 500ms}}
slo: {{latency_p95_ms: 500}}
autoscaling: {{signal: concurrency, target: 2, target_utilization: 100%, stable_window: 4s,
               panic_window: 2s, panic_threshold: 200%, down_stabilization: 10m}}
)",
                                       name, server.string());
  if (berthd.http().Post("/v1/services", spec, "application/yaml").status != 201) {
    std::cerr << "the training-heavy service was refused\n";
    return std::nullopt;
  }
  json st;
  if (!ServiceBenchWait(
          [&] {
            st = ServiceBenchStatus(berthd, name);
            return st.is_object() && st.value("routed", 0) == 1;
          },
          60s)) {
    std::cerr << "the service's first replica did not serve: " << st.dump() << '\n';
    return std::nullopt;
  }
  // Low-priority preemptible training on every other GPU, headroom included.
  std::vector<std::int64_t> training;
  for (int i = 0; i < 7; ++i) {
    const std::int64_t id = berthd.Submit(json{
        {"name", fmt::format("train-{}", i)},
        {"command", {"sleep", "3600"}},
        {"resources", {{"gpus", 1}}},
        {"priority", "low"},
        {"preemptible", true}}.dump());
    if (id <= 0) {
      std::cerr << "a training job was refused\n";
      return std::nullopt;
    }
    training.push_back(id);
  }
  for (auto id : training) {
    if (!berthd.WaitForState(id, "Running", 60s)) {
      std::cerr << "training job " << id << " did not run: " << berthd.Job(id).dump() << '\n';
      return std::nullopt;
    }
  }

  HeavyRun run;
  std::mutex mu;
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  const auto t = Clock::now();
  for (int c = 0; c < clients; ++c) {
    load.emplace_back([&] {
      Http client(berthd.gateway_port(), 30s);
      client.set_token(berthd.http().token());
      while (!stop.load()) {
        const auto sent = Clock::now();
        auto r = client.Post(fmt::format("/s/default/{}/v1/completions", name),
                             R"({"prompt":"x","max_tokens":1})", "application/json");
        const double ms = ServiceBenchMs(sent);
        std::lock_guard lock(mu);
        if (r.status == 200) {
          run.latency_ms.push_back(ms);
        } else {
          ++run.failed;
        }
      }
    });
  }
  while (ServiceBenchMs(t) < seconds * 1000.0) {
    st = ServiceBenchStatus(berthd, name);
    const int routed = st.is_object() ? st.value("routed", 0) : 0;
    run.max_routed = std::max(run.max_routed, routed);
    if (routed >= 3 && run.to_three_ms < 0) run.to_three_ms = ServiceBenchMs(t);
    std::this_thread::sleep_for(100ms);
  }
  stop = true;
  for (auto& th : load) th.join();
  for (auto id : training) {
    const json job = berthd.Job(id);
    if (job.is_object() &&
        berth::it::CountEvents(job, "Reclaiming") + berth::it::CountEvents(job, "Preempting") > 0) {
      ++run.evicted;
    }
  }

  // Clean up for the next run: the service and the training gone, GPUs free.
  (void)berthd.http().Delete("/v1/services/default/" + name);
  for (auto id : training) {
    (void)berthd.http().Post(fmt::format("/v1/jobs/{}/cancel", id), "", "application/json");
  }
  for (auto id : training) {
    const json job = berthd.Job(id);
    if (job.is_object() && job.value("state", "") != "Cancelled") {
      (void)berthd.WaitForState(id, "Cancelled", 60s);
    }
  }
  (void)ServiceBenchWait(
      [&] { return berthd.http().Get("/v1/services/default/" + name).status == 404; }, 30s);
  std::this_thread::sleep_for(3s);  // its replicas stop
  return run;
}

std::string HeavyLine(const std::string& label, const HeavyRun& r) {
  return fmt::format(
      "{}: {} requests, {} failed; p50 {:.0f} ms, p95 {:.0f} ms, p99 {:.0f} ms; replicas "
      "reached {}{}; training jobs evicted {}",
      label, r.latency_ms.size(), r.failed, Percentile(r.latency_ms, 0.50),
      Percentile(r.latency_ms, 0.95), Percentile(r.latency_ms, 0.99), r.max_routed,
      r.to_three_ms >= 0 ? fmt::format(" (3 after {:.1f} s)", r.to_three_ms / 1000.0) : "",
      r.evicted);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"berth-service-bench: scale from zero and autoscaler reaction, end to end"};
  int repeats = 5;
  int clients = 6;
  std::string berthd_path;
  app.add_option("--repeats", repeats, "measurements of each")->capture_default_str();
  app.add_option("--clients", clients, "concurrent clients of the load step")
      ->capture_default_str();
  app.add_option("--berthd", berthd_path, "berthd to run (default: the one beside this binary)");
  bool heavy = false;
  int seconds = 30;
  app.add_flag("--training-heavy", heavy,
               "only the training-heavy comparison: without and with inference headroom");
  app.add_option("--seconds", seconds, "the training-heavy load's length")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  TempDir dir("berth-service-bench");
  BerthdOptions options;
  if (!berthd_path.empty()) options.binary = berthd_path;
  options.gateway = true;
  options.extra_args = {"--rate-limit", "0"};
  Berthd berthd(dir, options);
  if (!berthd.Start() || !berthd.WaitForNode("Ready", 30s)) {
    std::cerr << "berthd did not come up; its log:\n" << berthd.log();
    dir.keep();
    return 1;
  }
  if (berthd.http().Post("/v1/policy", kServicePolicy).status != 201) {
    std::cerr << "the policy was refused\n";
    return 1;
  }
  // The replicas run as the tenant's identity: the model server where it
  // may run it.
  const auto bin = dir / "bin";
  std::filesystem::create_directories(bin);
  ::chmod(bin.c_str(), 0755);
  const auto server = bin / "berth-model-server";
  std::filesystem::copy_file(berth::it::BinDir() / "berth-model-server", server);
  ::chmod(server.c_str(), 0755);

  if (heavy) {
    // --- training-heavy: the same load without and with headroom
    auto without = TrainingHeavy(berthd, server, 0, clients, seconds);
    if (!without) return 1;
    auto with = TrainingHeavy(berthd, server, 2, clients, seconds);
    if (!with) return 1;
    std::cout << fmt::format(
        "berth-service-bench --training-heavy: 8 GPUs, a service (1..3 replicas, concurrency "
        "target 2, SLO p95 500 ms, 200 ms per request, batches of 2) under {} closed-loop "
        "clients for {} s while low-priority preemptible training holds every other GPU\n",
        clients, seconds);
    std::cout << HeavyLine("no inference headroom      ", *without) << '\n';
    std::cout << HeavyLine("inference_headroom: 2 GPUs", *with) << '\n';
    return 0;
  }

  // --- scale from zero
  const std::string zero = fmt::format(R"(name: zero
queue: serve
command: ["{}", --load-ms, "0", --ttft-ms, "0", --itl-ms, "0"]
replicas: {{min: 0, max: 1}}
resources: {{gpus: 1}}
readiness: {{http: /health, period: 1s, timeout: 500ms}}
autoscaling: {{stable_window: 2s, panic_window: 1s, down_stabilization: 0s,
               scale_to_zero: {{enabled: true, idle_window: 1s}}}}
)",
                                       server.string());
  if (berthd.http().Post("/v1/services", zero, "application/yaml").status != 201) {
    std::cerr << "the service was refused\n";
    return 1;
  }
  Http gateway(berthd.gateway_port(), 60s);
  // Callers show a Berth token (the services' default `access: tenant`).
  gateway.set_token(berthd.http().token());
  std::vector<double> client_ms;
  std::vector<double> berthd_ms;
  for (int i = 0; i < repeats; ++i) {
    json st;
    if (!ServiceBenchWait(
            [&] {
              st = ServiceBenchStatus(berthd, "zero");
              return st.is_object() && st.value("phase", "") != "pending" &&
                     st.at("replicas").empty() && st.value("desired", 1) == 0;
            },
            60s)) {
      std::cerr << "the service did not go back to zero: " << st.dump() << '\n';
      return 1;
    }
    const std::int64_t before =
        st.at("last_cold_start").is_object() ? st.at("last_cold_start").value("at_ms", 0) : 0;
    const auto t = Clock::now();
    auto r = gateway.Post("/s/default/zero/v1/completions", R"({"prompt":"x","max_tokens":1})",
                          "application/json");
    const double ms = ServiceBenchMs(t);
    if (r.status != 200) {
      std::cerr << "the held request got " << r.status << ": " << r.text << '\n';
      return 1;
    }
    client_ms.push_back(ms);
    if (ServiceBenchWait(
            [&] {
              st = ServiceBenchStatus(berthd, "zero");
              return st.is_object() && st.at("last_cold_start").is_object() &&
                     st.at("last_cold_start").value("at_ms", 0) != before;
            },
            10s)) {
      berthd_ms.push_back(st.at("last_cold_start").value("duration_ms", 0.0));
    }
  }

  // --- autoscaler reaction to a load step
  const std::string step = fmt::format(R"(name: step
queue: serve
command: ["{}", --load-ms, "0", --ttft-ms, "300", --itl-ms, "0", --max-batch, "64"]
replicas: {{min: 1, max: 4}}
resources: {{gpus: 1}}
readiness: {{http: /health, period: 1s, timeout: 500ms}}
autoscaling: {{signal: concurrency, target: 2, target_utilization: 100%, stable_window: 6s,
               panic_window: 2s, panic_threshold: 200%, down_stabilization: 0s}}
)",
                                       server.string());
  if (berthd.http().Post("/v1/services", step, "application/yaml").status != 201) {
    std::cerr << "the service was refused\n";
    return 1;
  }
  std::vector<double> react_ms;
  for (int i = 0; i < repeats; ++i) {
    json st;
    if (!ServiceBenchWait(
            [&] {
              st = ServiceBenchStatus(berthd, "step");
              return st.is_object() && st.value("routed", 0) == 1 && st.at("replicas").size() == 1;
            },
            90s)) {
      std::cerr << "the service did not settle at one replica: " << st.dump() << '\n';
      return 1;
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> load;
    const auto t = Clock::now();
    for (int c = 0; c < clients; ++c) {
      load.emplace_back([&] {
        Http client(berthd.gateway_port(), 30s);
        client.set_token(berthd.http().token());
        while (!stop.load()) {
          (void)client.Post("/s/default/step/v1/completions", R"({"prompt":"x","max_tokens":1})",
                            "application/json");
        }
      });
    }
    const bool reacted = ServiceBenchWait(
        [&] {
          st = ServiceBenchStatus(berthd, "step");
          return st.is_object() && st.value("routed", 0) >= 2;
        },
        60s);
    const double ms = ServiceBenchMs(t);
    stop = true;
    for (auto& th : load) th.join();
    if (!reacted) {
      std::cerr << "no second replica: " << st.dump() << '\n';
      return 1;
    }
    react_ms.push_back(ms);
  }

  std::cout << fmt::format(
      "berth-service-bench: all-in-one berthd with its gateway, readiness period 1s, service "
      "round 2s\n");
  std::cout << fmt::format("scale from zero, client (held request to its answer): {}\n",
                           ServiceBenchSummary(client_ms));
  std::cout << fmt::format("scale from zero, berthd's ColdStart (held seen to route joined): {}\n",
                           ServiceBenchSummary(berthd_ms));
  std::cout << fmt::format(
      "autoscaler, load step 0 -> {} clients to a second replica serving: {}\n", clients,
      ServiceBenchSummary(react_ms));
  return 0;
}
