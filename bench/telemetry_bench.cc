// Telemetry store benchmark: NODES x 8 GPUs (default 1,250 x 8 = 10,000)
// sampled every 10 s for ROUNDS rounds (default 360: a simulated hour) on a
// ManualClock, into a real berth.db in a temporary directory. Each round
// ingests one sample per GPU, then flushes twice, 5 simulated seconds apart,
// as berthd does. Three GPUs in four are held by runs of 1, 2, 4 or 8 GPUs.
// Prints samples ingested per wall second (ingest alone, ingest + flush),
// flush p50/max, bytes on disk per GPU-day, and RunSummaries and GpuHistory
// latency for one run and one GPU over the hour.
//
//   berth-telemetry-bench [--nodes N] [--rounds R]
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/clock.h"
#include "store/sqlite_db.h"
#include "store/telemetry_store.h"

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double Percentile(std::vector<double> v, int p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, v.size() * static_cast<std::size_t>(p) / 100)];
}

std::uintmax_t DiskBytes(const std::filesystem::path& dir) {
  std::uintmax_t total = 0;
  for (const char* name : {"berth.db", "berth.db-wal"}) {
    std::error_code ec;
    auto n = std::filesystem::file_size(dir / name, ec);
    if (!ec) total += n;
  }
  return total;
}

int Run(int nodes, int rounds) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "berth-tbench-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::filesystem::path dir = tmpl;
  auto opened = berth::store::TelemetryStore::Open(dir, {});
  if (!opened) {
    std::fprintf(stderr, "open: %s\n", opened.error().message.c_str());
    return 1;
  }
  auto& store = **opened;
  berth::ManualClock clock(1'699'999'200'000);  // hour-aligned

  // One sample template per GPU; runs of 1, 2, 4 and 8 GPUs on GPUs 0-5 of
  // each node (3 in 4 held), GPUs 6 and 7 free.
  std::vector<berth::model::GpuSample> samples;
  const int shapes[] = {8, 4, 2, 1, 1};
  std::int64_t job = 1;
  std::string some_run;
  for (int n = 0; n < nodes; ++n) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%05d", n);
    std::vector<std::string> run_of(8);
    std::uint32_t next = 0;
    for (int k = 0; next < 6; ++k) {
      const auto take =
          std::min<std::uint32_t>(static_cast<std::uint32_t>(shapes[(n + k) % 5]), 6 - next);
      const std::string id = std::to_string(job++) + ".0.0";
      for (std::uint32_t g = 0; g < take; ++g) run_of[next + g] = id;
      next += take;
    }
    if (n == nodes / 2) some_run = run_of[0];
    for (std::uint32_t g = 0; g < 8; ++g) {
      berth::model::GpuSample s;
      s.node = name;
      s.gpu = g;
      char uuid[48];
      std::snprintf(uuid, sizeof uuid, "GPU-%08d-%04u-bench-0000-000000000000", n, g);
      s.uuid = uuid;
      s.memory_total_bytes = std::uint64_t{80} << 30;
      if (!run_of[g].empty()) s.run_ids = {run_of[g]};
      samples.push_back(std::move(s));
    }
  }
  const std::string some_gpu = samples[samples.size() / 2].uuid;

  double ingest_ms = 0;
  double flush_total_ms = 0;
  std::vector<double> flush_ms;
  std::int64_t ingested = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto now = clock.NowMs();
    for (std::size_t i = 0; i < samples.size(); ++i) {
      auto& s = samples[i];
      s.at_ms = now + static_cast<std::int64_t>(i % 1000);  // agents are not in lockstep
      const auto busy = !s.run_ids.empty();
      s.util_pct =
          busy ? static_cast<std::uint32_t>((i * 7 + static_cast<std::size_t>(round) * 13) % 101)
               : 0;
      s.mem_util_pct = s.util_pct / 2;
      s.memory_used_bytes = busy ? s.memory_total_bytes / 100 * (40 + s.util_pct / 2) : 0;
      s.temperature_c = 35 + static_cast<std::int32_t>(s.util_pct / 3);
      s.power_mw = 70'000 + s.util_pct * 6'000;
    }
    const auto t0 = Clock::now();
    store.Ingest(samples);
    ingest_ms += Ms(Clock::now() - t0);
    ingested += static_cast<std::int64_t>(samples.size());
    for (int half = 0; half < 2; ++half) {
      clock.Advance(5'000);
      const auto f0 = Clock::now();
      auto st = store.Flush(clock.NowMs());
      const double ms = Ms(Clock::now() - f0);
      if (!st) {
        std::fprintf(stderr, "flush: %s\n", st.error().message.c_str());
        return 1;
      }
      flush_ms.push_back(ms);
      flush_total_ms += ms;
    }
  }
  // Write the last open minute too, then fold the WAL into the file.
  if (auto st = store.Flush(clock.NowMs() + 60'000); !st) {
    std::fprintf(stderr, "flush: %s\n", st.error().message.c_str());
    return 1;
  }
  {
    auto db = berth::store::Database::OpenState(dir);
    if (db) (void)db->Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  const double hours = static_cast<double>(rounds) * 10.0 / 3600.0;
  const double gpus = static_cast<double>(samples.size());
  const auto bytes = DiskBytes(dir);

  std::vector<double> summary_ms;
  std::int64_t summary_samples = 0;
  const std::vector<std::string> one_run = {some_run};
  for (int i = 0; i < 50; ++i) {
    const auto t0 = Clock::now();
    auto r = store.RunSummaries(one_run, 0, clock.NowMs() + 60'000);
    summary_ms.push_back(Ms(Clock::now() - t0));
    if (!r) {
      std::fprintf(stderr, "summaries: %s\n", r.error().message.c_str());
      return 1;
    }
    summary_samples = r->empty() ? 0 : r->begin()->second.samples;
  }
  std::vector<double> history_ms;
  std::size_t history_buckets = 0;
  for (int i = 0; i < 50; ++i) {
    const auto t0 = Clock::now();
    auto h = store.GpuHistory(some_gpu, 0, clock.NowMs() + 60'000, 0);
    history_ms.push_back(Ms(Clock::now() - t0));
    if (h) history_buckets = h->size();
  }

  std::printf("gpus=%.0f rounds=%d (%.2f simulated hours, a sample per GPU every 10 s)\n", gpus,
              rounds, hours);
  std::printf("ingest alone:   %.0f samples/s (%lld samples in %.1f ms)\n",
              static_cast<double>(ingested) / (ingest_ms / 1000.0),
              static_cast<long long>(ingested), ingest_ms);
  std::printf("ingest + flush: %.0f samples/s (flushes took %.1f ms in all)\n",
              static_cast<double>(ingested) / ((ingest_ms + flush_total_ms) / 1000.0),
              flush_total_ms);
  std::printf("flush (%zu, every 5 simulated s): p50=%.2f ms p99=%.2f ms max=%.2f ms\n",
              flush_ms.size(), Percentile(flush_ms, 50), Percentile(flush_ms, 99),
              Percentile(flush_ms, 100));
  std::printf("on disk: %.1f MiB for %.2f h = %.0f bytes per GPU-day in minute buckets\n",
              static_cast<double>(bytes) / (1024.0 * 1024.0), hours,
              static_cast<double>(bytes) / gpus / hours * 24.0);
  std::printf("RunSummaries(one run, whole window): p50=%.2f ms max=%.2f ms (%lld samples)\n",
              Percentile(summary_ms, 50), Percentile(summary_ms, 100),
              static_cast<long long>(summary_samples));
  std::printf("GpuHistory(one GPU, whole window): p50=%.2f ms max=%.2f ms (%zu buckets)\n",
              Percentile(history_ms, 50), Percentile(history_ms, 100), history_buckets);
  std::printf("ingested=%lld late=%lld\n", static_cast<long long>(store.ingested()),
              static_cast<long long>(store.late()));
  opened->reset();
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 1250;
  int rounds = 360;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
      nodes = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: berth-telemetry-bench [--nodes N] [--rounds R]\n");
      return 2;
    }
  }
  return Run(nodes, rounds);
}
