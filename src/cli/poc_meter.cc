#include "cli/poc_meter.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "cli/json_view.h"
#include "model/usage.h"

namespace berth::cli::poc {
namespace {

using nlohmann::json;

// The price table of GET /v1/prices's answer, as metering prices with it.
model::PriceTable PocMeterTable(const json& prices) {
  model::PriceTable t;
  const json* table = Field(prices, "table");
  if (table == nullptr) return t;
  t.default_micros_per_gpu_hour = Int(*table, "default_micros").value_or(0);
  for (const auto& p : Array(*table, "prices")) {
    t.prices.push_back(
        {Text(p, "model"), Text(p, "pool"), Int(p, "per_gpu_hour_micros").value_or(0)});
  }
  return t;
}

// round_half_up(mgpu_ms × micros per GPU-hour / 3.6e9), as metering prices
// a piece (docs/metering.md "Exact arithmetic").
std::int64_t PocMeterCost(std::int64_t mgpu_ms, std::int64_t micros_per_gpu_hour) {
  constexpr model::Int128 kDen = 3'600'000'000;
  const model::Int128 num = static_cast<model::Int128>(mgpu_ms) * micros_per_gpu_hour;
  return static_cast<std::int64_t>((num + kDen / 2) / kDen);
}

std::string PocMeterHours(std::int64_t mgpu_ms) {
  return fmt::format("{:.6f} GPU-hours", static_cast<double>(mgpu_ms) / 3.6e9);
}

}  // namespace

MeterJudgement JudgeMetering(const json& job, const json& records, const json& prices,
                             std::int64_t gpus) {
  MeterJudgement r;
  const std::string tenant = Text(job, "tenant");
  const std::int64_t mgpu = gpus * 1000;
  // The runs of the job's last attempt and how long they ran.
  std::int64_t run_ms = 0;
  std::int64_t attempt = 0;
  for (const auto& run : Array(job, "placement")) {
    attempt = std::max(attempt, Int(run, "attempt").value_or(0));
    const auto start = Int(run, "started_at_ms");
    const auto end = Int(run, "finished_at_ms");
    if (start && end && *end > *start) run_ms += *end - *start;
  }
  const std::int64_t want = run_ms * mgpu;
  const std::int64_t slack = want / 10 + mgpu * 1000;
  r.expected = fmt::format(
      "usage records of tenant {} holding the job's GPU time ({} ms run × {} GPU(s) = {}, within "
      "10% and one GPU-second), priced above zero at the price table's rate for its GPU",
      tenant, run_ms, gpus, PocMeterHours(want));
  std::vector<const json*> mine;
  for (const auto& rec : Array(records, "records")) {
    if (Int(rec, "attempt").value_or(0) == attempt) mine.push_back(&rec);
  }
  if (mine.empty()) {
    r.actual = fmt::format("no usage record of the job's attempt {} ({} record(s) in all)", attempt,
                           Array(records, "records").size());
    return r;
  }
  std::int64_t got = 0;
  for (const json* rec : mine) {
    if (Text(*rec, "tenant") != tenant) {
      r.actual = fmt::format("run {} is metered to tenant {}, not {}", Text(*rec, "run_id"),
                             Text(*rec, "tenant"), tenant);
      return r;
    }
    got += Int(*rec, "mgpu_ms").value_or(0);
  }
  if (run_ms == 0 || got < want - slack || got > want + slack) {
    r.actual = fmt::format("the records hold {} ({} mGPU-ms) for {} ms of run", PocMeterHours(got),
                           got, run_ms);
    return r;
  }
  r.actual = fmt::format("{} record(s) of tenant {}, {} ({} mGPU-ms)", mine.size(), tenant,
                         PocMeterHours(got), got);
  const auto version = Int(prices, "version");
  if (!version) {
    r.ok = true;
    r.actual +=
        "; not priced: no price table is in force (berth price apply), so cost is not "
        "judged";
    return r;
  }
  const model::PriceTable table = PocMeterTable(prices);
  for (const json* rec : mine) {
    const std::string gpu_model = Text(*rec, "gpu_model");
    const std::string pool = Text(*rec, "pool");
    const std::int64_t rate = model::PriceFor(table, gpu_model, pool);
    const std::int64_t cost = Int(*rec, "cost_micros").value_or(0);
    const std::int64_t mgpu_ms = Int(*rec, "mgpu_ms").value_or(0);
    if (rate <= 0) {
      r.actual += fmt::format(
          "; price table version {} prices GPU model {} in pool '{}' at {} per GPU-hour, so run "
          "{}'s {} cost {}",
          *version, gpu_model, pool, model::FormatMoney(rate), Text(*rec, "run_id"),
          PocMeterHours(mgpu_ms), model::FormatMoney(cost));
      return r;
    }
    const json* versions = Field(*rec, "price_versions");
    const bool one_version = versions != nullptr && versions->is_array() && versions->size() == 1 &&
                             (*versions)[0] == *version;
    const std::int64_t price = PocMeterCost(mgpu_ms, rate);
    if ((one_version && cost != price) || cost <= 0) {
      r.actual += fmt::format("; run {} costs {} micros, where {} at {} per GPU-hour is {}",
                              Text(*rec, "run_id"), cost, PocMeterHours(mgpu_ms),
                              model::FormatMoney(rate), price);
      return r;
    }
    r.actual +=
        fmt::format("; run {} costs {} ({} per GPU-hour, price version {})", Text(*rec, "run_id"),
                    Text(*rec, "cost"), model::FormatMoney(rate), *version);
  }
  r.ok = true;
  return r;
}

}  // namespace berth::cli::poc
