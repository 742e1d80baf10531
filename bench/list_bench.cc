// berth-list-bench: what listing a deep queue and reading a long report
// cost, against an all-in-one berthd it starts itself (8 simulated H100s,
// loopback, no rate limit). It queues --jobs jobs (one array; each asks
// for all 8 GPUs, so one runs and the rest wait), then prints:
//
//   1. GET /v1/jobs for every job, page after page: bytes and wall time,
//      as summaries (the default) and with full=true. A berthd without
//      pages (before issue 17 item 5) answers one request of limit=10000
//      with full jobs; the bench detects it and measures that instead.
//   2. Submissions while another client reads the operations report over
//      all time in a loop: submit p50 and max, against submissions with
//      no report running. A report that holds the store's writer shows as
//      submissions as slow as the report.
//
// Run it once with --berthd pointing at an older build for the "before".
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "bench_berthd.h"
#include "integration/harness.h"

namespace {

using namespace berth::it;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Listing {
  int status = 0;
  std::size_t jobs = 0;
  std::size_t bytes = 0;
  std::size_t requests = 0;
  double ms = 0;
};

// Every job: follows `next` from `first`.
Listing ListAll(const Http& http, const std::string& first) {
  Listing out;
  std::string after;
  const auto t = Clock::now();
  for (;;) {
    auto r = http.Get(after.empty() ? first : first + "&after=" + after);
    ++out.requests;
    out.status = r.status;
    if (r.status != 200) return out;
    out.bytes += r.text.size();
    out.jobs += r.body.at("jobs").size();
    if (!r.body.contains("next")) break;
    after = r.body.at("next").get<std::string>();
  }
  out.ms = MsSince(t);
  return out;
}

Listing Median(std::vector<Listing> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const Listing& a, const Listing& b) { return a.ms < b.ms; });
  return runs[runs.size() / 2];
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

// Submits `n` one-element jobs one after another; their latencies in ms.
std::vector<double> Submits(const Berthd& berthd, int n, const std::string& prefix) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const auto t = Clock::now();
    auto r = berthd.http().Post("/v1/jobs",
                                json{{"name", fmt::format("{}{}", prefix, i)},
                                     {"command", {"sleep", "600"}},
                                     {"resources", {{"gpus", 8}}}}
                                    .dump(),
                                "application/json");
    if (r.status == 201) ms.push_back(MsSince(t));
  }
  return ms;
}

int Run(int argc, char** argv) {
  CLI::App app{"berth-list-bench: the job list and the operations report over a deep queue"};
  int jobs = 10'000;
  int repeats = 3;
  int submits = 200;
  std::string berthd_path;
  app.add_option("--jobs", jobs, "jobs to queue (one array)")->capture_default_str();
  app.add_option("--repeats", repeats, "listings per shape (the median is printed)")
      ->capture_default_str();
  app.add_option("--submits", submits, "submissions timed with and without a report running")
      ->capture_default_str();
  app.add_option("--berthd", berthd_path, "berthd to run (default: the one beside this binary)");
  CLI11_PARSE(app, argc, argv);

  TempDir dir("berth-list-bench");
  auto started = berth::bench::StartBerthd(dir, berthd_path, {"--rate-limit", "0"});
  if (!started) return 1;
  Berthd& berthd = *started;
  const auto t = Clock::now();
  auto array = berthd.http().Post("/v1/jobs",
                                  json{{"name", "sweep"},
                                       {"command", {"sleep", "600"}},
                                       {"resources", {{"gpus", 8}}},
                                       {"array", jobs}}
                                      .dump(),
                                  "application/json");
  if (array.status != 201) {
    std::cerr << "the array was refused: " << array.text << '\n';
    return 1;
  }
  std::cout << fmt::format("berthd {}: {} jobs queued in {:.0f} ms\n",
                           berthd_path.empty() ? (BinDir() / "berthd").string() : berthd_path, jobs,
                           MsSince(t));

  const bool paged = berthd.http().Get("/v1/jobs?limit=1&full=true").status == 200;
  std::cout << fmt::format("\nGET /v1/jobs, every job ({} run{}, median)\n", repeats,
                           repeats == 1 ? "" : "s");
  std::cout << fmt::format("{:<34} {:>7} {:>9} {:>12} {:>10}\n", "shape", "jobs", "requests",
                           "bytes", "ms");
  auto print = [&](const std::string& shape, const std::string& first) {
    std::vector<Listing> runs;
    for (int i = 0; i < repeats; ++i) runs.push_back(ListAll(berthd.http(), first));
    const Listing m = Median(runs);
    if (m.status != 200) {
      std::cout << fmt::format("{:<34} HTTP {}\n", shape, m.status);
      return;
    }
    std::cout << fmt::format("{:<34} {:>7} {:>9} {:>12} {:>10.1f}\n", shape, m.jobs, m.requests,
                             m.bytes, m.ms);
  };
  if (paged) {
    print("summaries, pages of 500 (default)", "/v1/jobs?limit=500");
    print("summaries, pages of 5000", "/v1/jobs?limit=5000");
    print("full=true, pages of 5000", "/v1/jobs?limit=5000&full=true");
  } else {
    print("full, one request (limit=10000)", "/v1/jobs?limit=10000");
  }

  // Submissions alone, then while a client reads the report over all time.
  const auto alone = Submits(berthd, submits, "alone");
  std::atomic<bool> stop{false};
  std::atomic<int> reports{0};
  std::atomic<int> asked{0};
  std::vector<double> report_ms;  // the reader's alone until it is joined
  std::thread reader([&] {
    Http http(berthd.api_port(), 120s);
    http.set_token(berthd.http().token());
    while (!stop.load()) {
      const auto r0 = Clock::now();
      auto r = http.Get("/v1/reports/ops?from=0");
      report_ms.push_back(MsSince(r0));
      asked.fetch_add(1);
      if (r.status == 200) reports.fetch_add(1);
    }
  });
  // Start timing once the reader is inside its first report.
  std::this_thread::sleep_for(50ms);
  const auto during = Submits(berthd, submits, "during");
  stop = true;
  reader.join();
  std::cout << fmt::format(
      "\nsubmissions one at a time ({} each), ms       p50      p99      max\n", submits);
  std::cout << fmt::format("{:<42} {:>8.1f} {:>8.1f} {:>8.1f}\n", "no report running",
                           Percentile(alone, 0.5), Percentile(alone, 0.99), Percentile(alone, 1));
  std::cout << fmt::format("{:<42} {:>8.1f} {:>8.1f} {:>8.1f}\n",
                           "while GET /v1/reports/ops?from=0 loops", Percentile(during, 0.5),
                           Percentile(during, 0.99), Percentile(during, 1));
  std::cout << fmt::format("the report over all time: {} asked, {} answered, p50 {:.0f} ms\n",
                           asked.load(), reports.load(), Percentile(report_ms, 0.5));
  berthd.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return Run(argc, argv);
}
