// berth-submit-bench: how fast a job goes from a REST submission to a running
// process, and how many submissions berthd acknowledges per second. A
// scenario driver, not a micro-benchmark: it starts its own all-in-one berthd
// (8 simulated H100s) on a temp data dir and free loopback ports, drives it
// over REST like any client, and prints every figure it measures.
//
//   1. Latency on an idle host: --jobs jobs, one at a time (each waits for
//      the previous one to finish), command `true`, first with 0 GPUs, then
//      with 1. Latency is placement[0].started_at_ms (the shim's exec time,
//      wall clock) minus the client's wall clock just before the POST.
//   2. Sustained acknowledged submissions: for each count in --clients
//      (e.g. 1,4,16), that many clients POST jobs for --seconds seconds.
//      Every job needs all 8 GPUs and sleeps, so one runs and the rest
//      queue, and the queue grows from one run to the next. --prefill first
//      fills the queue with that many pending jobs (as arrays), so the rate
//      is measured behind a deep queue. Group commit's counters (/metrics)
//      give the submissions per commit.
//   3. Arrays: one array of --array elements (8-GPU jobs that queue), its
//      acknowledgement time, --array-runs times.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "bench_berthd.h"
#include "integration/harness.h"

namespace {

using namespace berth::it;
using nlohmann::json;

struct Summary {
  std::size_t n = 0;
  double first_p50 = 0;  // p50 of the first tenth of the samples, in order
  double last_p50 = 0;   // and of the last tenth: drift as the store grows
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

Summary Summarise(std::vector<double> v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  auto tenth = static_cast<std::ptrdiff_t>(std::max<std::size_t>(1, v.size() / 10));
  s.first_p50 = Percentile({v.begin(), v.begin() + tenth}, 0.5);
  s.last_p50 = Percentile({v.end() - tenth, v.end()}, 0.5);
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return Percentile(v, q); };
  s.p50 = at(0.50);
  s.p90 = at(0.90);
  s.p99 = at(0.99);
  s.max = v.back();
  return s;
}

double Round1(double x) {
  return std::round(x * 10.0) / 10.0;
}

json ToJson(const Summary& s) {
  return {{"n", s.n},
          {"p50_ms", Round1(s.p50)},
          {"p90_ms", Round1(s.p90)},
          {"p99_ms", Round1(s.p99)},
          {"max_ms", Round1(s.max)},
          {"first_tenth_p50_ms", Round1(s.first_p50)},
          {"last_tenth_p50_ms", Round1(s.last_p50)}};
}

double WallMs() {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(now).count()) /
         1000.0;
}

double SteadyMs() {
  auto now = std::chrono::steady_clock::now().time_since_epoch();
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(now).count()) /
         1000.0;
}

std::string Spec(const std::string& name, const std::vector<std::string>& command, int gpus) {
  json spec{{"name", name}, {"command", command}};
  if (gpus > 0) spec["resources"] = {{"gpus", gpus}};
  return spec.dump();
}

bool Terminal(const std::string& s) {
  return s == "Succeeded" || s == "Failed" || s == "Cancelled";
}

// Phase 1. Returns submit-to-exec latencies in ms; a job that did not
// succeed is reported and left out.
std::vector<double> IdleLatency(const Berthd& berthd, int jobs, int gpus) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(jobs));
  const Http& http = berthd.http();
  for (int i = 0; i < jobs; ++i) {
    double before = WallMs();
    auto r = http.Post("/v1/jobs", Spec(fmt::format("lat{}-{}", gpus, i), {"true"}, gpus));
    if (r.status != 201) {
      std::cerr << fmt::format("submit {} failed: HTTP {} {}\n", i, r.status, r.text);
      continue;
    }
    auto id = r.body.at("id").get<std::int64_t>();
    json job;
    bool done = WaitFor(
        [&] {
          job = berthd.Job(id);
          return job.is_object() && Terminal(job.value("state", ""));
        },
        60s, 5ms);
    if (!done || job.at("state") != "Succeeded" || job.at("placement").empty() ||
        job.at("placement")[0].at("started_at_ms").is_null()) {
      std::cerr << fmt::format("job {} did not succeed: {}\n", id, job.dump());
      continue;
    }
    auto started = job.at("placement")[0].at("started_at_ms").get<double>();
    out.push_back(started - before);
  }
  return out;
}

struct Throughput {
  std::size_t acked = 0;
  std::size_t refused = 0;
  double seconds = 0;
  Summary latency;
};

// Phase 2.
Throughput SustainedSubmits(const Berthd& berthd, int clients, int seconds) {
  std::mutex mu;
  std::vector<double> latencies;
  std::atomic<std::size_t> refused{0};
  std::atomic<int> seq{0};
  double start = SteadyMs();
  double end = start + seconds * 1000.0;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      Http http(berthd.api_port());
      http.set_token(berthd.http().token());
      std::vector<double> mine;
      for (double t = SteadyMs(); t < end; t = SteadyMs()) {
        auto r =
            http.Post("/v1/jobs", Spec(fmt::format("q{}", seq.fetch_add(1)), {"sleep", "600"}, 8));
        if (r.status == 201) {
          mine.push_back(SteadyMs() - t);
        } else {
          refused.fetch_add(1);
        }
      }
      std::lock_guard lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  Throughput out;
  out.seconds = (SteadyMs() - start) / 1000.0;
  out.acked = latencies.size();
  out.refused = refused.load();
  out.latency = Summarise(std::move(latencies));
  return out;
}

// Submits an array of `size` 8-GPU jobs that queue; returns its id and the
// time to its acknowledgement, or nullopt (reported) when refused.
std::optional<std::pair<std::int64_t, double>> SubmitArray(const Berthd& berthd,
                                                           const std::string& name, int size) {
  json spec = json::parse(Spec(name, {"sleep", "600"}, 8));
  spec["array"] = size;
  const double t = SteadyMs();
  auto r = berthd.http().Post("/v1/jobs", spec.dump());
  const double ms = SteadyMs() - t;
  if (r.status != 201) {
    std::cerr << fmt::format("array {} refused: HTTP {} {}\n", name, r.status, r.text);
    return std::nullopt;
  }
  return std::pair{r.body.at("id").get<std::int64_t>(), ms};
}

// A counter from berthd's /metrics, 0 when absent.
double MetricValue(const Berthd& berthd, std::string_view name) {
  auto r = berthd.http().Get("/metrics");
  const std::string& text = r.text;
  for (std::size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    if ((at > 0 && text[at - 1] != '\n') || text.compare(at + name.size(), 1, " ") != 0) continue;
    return std::strtod(text.c_str() + at + name.size() + 1, nullptr);
  }
  return 0;
}

// Cancels every job that is not finished, `clients` at a time.
std::size_t CancelUnfinished(const Berthd& berthd, int clients) {
  // The queue may be deeper than one page: the jobs holding GPUs first.
  auto r = GetAllPages(berthd.http(), "/v1/jobs?state=Scheduled,Running&limit=5000", "jobs");
  if (r.status != 200) return 0;
  std::vector<std::int64_t> ids;
  for (const auto& j : r.body.at("jobs")) ids.push_back(j.at("id").get<std::int64_t>());
  // Oldest first: under FIFO the one job holding the GPUs is the oldest.
  std::sort(ids.begin(), ids.end());
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      Http http(berthd.api_port());
      http.set_token(berthd.http().token());
      for (auto i = next.fetch_add(1); i < ids.size(); i = next.fetch_add(1)) {
        (void)http.Post(fmt::format("/v1/jobs/{}/cancel", ids[i]), "", "application/json");
      }
    });
  }
  for (auto& t : threads) t.join();
  return ids.size();
}

void PrintLatency(const std::string& label, const Summary& s) {
  std::cout << fmt::format("{:<16} {:>6} {:>8.1f} {:>8.1f} {:>8.1f} {:>8.1f} {:>12.1f} {:>11.1f}\n",
                           label, s.n, s.p50, s.p90, s.p99, s.max, s.first_p50, s.last_p50);
}

int Run(int argc, char** argv) {
  CLI::App app{
      "berth-submit-bench: submit-to-start latency and sustained submission rate of an "
      "all-in-one berthd it starts itself"};
  int jobs = 1000;
  std::vector<int> client_counts{16};
  int seconds = 10;
  int prefill = 0;
  int array = 10'000;
  int array_runs = 3;
  std::string berthd_path;
  app.add_option("--jobs", jobs, "jobs per latency run (0 GPUs, then 1 GPU)")
      ->capture_default_str();
  app.add_option("--clients", client_counts,
                 "concurrent clients for the submission rate; several (1,4,16) run one after "
                 "another")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--prefill", prefill, "pending jobs to queue (as arrays) before the rate runs")
      ->capture_default_str();
  app.add_option("--array", array, "elements of the array whose acknowledgement is timed; 0: none")
      ->capture_default_str();
  app.add_option("--array-runs", array_runs, "how many such arrays")->capture_default_str();
  app.add_option("--seconds", seconds, "how long to measure the submission rate")
      ->capture_default_str();
  app.add_option("--berthd", berthd_path, "berthd to run (default: the one beside this binary)");
  std::string store;
  app.add_option("--store", store,
                 "berthd's --store: postgresql://... to measure the PostgreSQL backend (default: "
                 "SQLite in the benchmark's data dir)");
  CLI11_PARSE(app, argc, argv);

  TempDir dir("berth-bench");
  // The benchmark is the one caller: per-caller rate limits would measure
  // the limiter, not berthd.
  std::vector<std::string> berthd_args = {"--rate-limit", "0"};
  if (!store.empty()) berthd_args.insert(berthd_args.end(), {"--store", store});
  auto started = berth::bench::StartBerthd(dir, berthd_path, berthd_args);
  if (!started) return 1;
  Berthd& berthd = *started;
  std::cout << fmt::format(
      "berthd {} (all-in-one, 8 simulated H100-80GB), data in {}, state in {}\n",
      berthd_path.empty() ? (BinDir() / "berthd").string() : berthd_path, dir.path().string(),
      store.empty() ? "SQLite" : "PostgreSQL");

  auto lat0 = Summarise(IdleLatency(berthd, jobs, 0));
  auto lat1 = Summarise(IdleLatency(berthd, jobs, 1));
  std::cout << "\nsubmit -> process start, idle host, one job at a time (ms)\n";
  std::cout << fmt::format("{:<16} {:>6} {:>8} {:>8} {:>8} {:>8} {:>12} {:>11}\n", "`true`", "jobs",
                           "p50", "p90", "p99", "max", "p50 1st 10%", "p50 last 10%");
  PrintLatency("0 GPUs", lat0);
  PrintLatency("1 GPU", lat1);
  std::cout.flush();

  std::size_t prefilled = 0;
  for (int n = 0; static_cast<int>(prefilled) < prefill; ++n) {
    const int size = std::min(10'000, prefill - static_cast<int>(prefilled));
    auto a = SubmitArray(berthd, fmt::format("prefill{}", n), size);
    if (!a) break;
    prefilled += static_cast<std::size_t>(size);
  }
  if (prefill > 0) std::cout << fmt::format("\nqueue prefilled with {} pending jobs\n", prefilled);

  json rates = json::array();
  const int max_clients = *std::max_element(client_counts.begin(), client_counts.end());
  for (int clients : client_counts) {
    const double commits0 = MetricValue(berthd, "berth_store_submit_commits_total");
    const double subs0 = MetricValue(berthd, "berth_store_submissions_committed_total");
    auto tp = SustainedSubmits(berthd, clients, seconds);
    const double commits = MetricValue(berthd, "berth_store_submit_commits_total") - commits0;
    const double subs = MetricValue(berthd, "berth_store_submissions_committed_total") - subs0;
    double rate = tp.seconds > 0 ? static_cast<double>(tp.acked) / tp.seconds : 0;
    std::cout << fmt::format(
        "\nacknowledged submissions, {} clients, {:.1f} s (8-GPU jobs that queue)\n", clients,
        tp.seconds);
    std::cout << fmt::format(
        "  acked {}   refused/failed {}   {:.0f} acks/s   submit p50 {:.1f} ms   "
        "p99 {:.1f} ms   max {:.1f} ms   p50 first/last tenth {:.1f}/{:.1f} ms   "
        "{:.2f} submissions per commit\n",
        tp.acked, tp.refused, rate, tp.latency.p50, tp.latency.p99, tp.latency.max,
        tp.latency.first_p50, tp.latency.last_p50, commits > 0 ? subs / commits : 0.0);
    std::cout.flush();
    rates.push_back({{"clients", clients},
                     {"seconds", Round1(tp.seconds)},
                     {"acked", tp.acked},
                     {"refused", tp.refused},
                     {"acks_per_s", Round1(rate)},
                     {"submissions_per_commit", commits > 0 ? Round1(subs / commits) : 0.0},
                     {"latency", ToJson(tp.latency)}});
  }

  std::vector<double> array_ms;
  std::vector<std::int64_t> arrays;
  for (int i = 0; array > 0 && i < array_runs; ++i) {
    auto a = SubmitArray(berthd, fmt::format("sweep{}", i), array);
    if (!a) continue;
    arrays.push_back(a->first);
    array_ms.push_back(a->second);
  }
  auto arr = Summarise(array_ms);
  if (!array_ms.empty()) {
    std::cout << fmt::format(
        "\narray of {} elements, acknowledged in: median {:.1f} ms, max {:.1f} ms ({} runs)\n",
        array, arr.p50, arr.max, arr.n);
  }
  for (auto id : arrays) {
    (void)berthd.http().Post(fmt::format("/v1/arrays/{}/cancel", id), "", "application/json");
  }
  auto cancelled = CancelUnfinished(berthd, max_clients);
  std::cout << fmt::format("  cleaned up: {} unfinished jobs cancelled\n", cancelled);
  std::cout.flush();
  berthd.Stop();

  json result{{"bench", "submit"},
              {"jobs", jobs},
              {"latency_0gpu", ToJson(lat0)},
              {"latency_1gpu", ToJson(lat1)},
              {"prefilled", prefilled},
              {"submit", rates},
              {"array", {{"size", array}, {"ack_ms", ToJson(arr)}}}};
  std::cout << result.dump() << '\n';
  bool ok = lat0.n == static_cast<std::size_t>(jobs) && lat1.n == static_cast<std::size_t>(jobs);
  return ok ? 0 : 1;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "berth-submit-bench: " << e.what() << '\n';
    return 1;
  }
}
