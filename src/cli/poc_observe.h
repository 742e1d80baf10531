// `berth poc observe --days N` (docs/poc.md "After go-live"): the daily
// table a platform team watches once Berth runs real work. Each UTC day of
// the last N (today up to now) is one operations report (GET
// /v1/reports/ops, src/meter/ops_report.h) and the whole period is one
// more, so the period's p95 wait is the server's nearest rank over every
// job of the period, never an average of daily percentiles. The table
// takes only what the reports hold: a figure a report lacks (no telemetry,
// no job started, alerts for a member) is null in observe.json and "—" in
// the Markdown and HTML, with the reason in the notes, never a zero.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace berth::cli::poc {

inline constexpr std::int64_t kObserveMaxDays = 90;

// One window: a UTC day ("2026-12-07"), today's ending at now, or the period.
struct ObserveWindow {
  std::string label;
  TimeMs from = 0;
  TimeMs to = 0;
  bool partial = false;  // ends at now, not at the day's end
};

// Errors name --days and the range.
Status CheckObserveDays(std::int64_t days);

// The last `days` UTC days, oldest first, the last one today up to `now`.
std::vector<ObserveWindow> ObserveDays(TimeMs now, int days);

// A window and the ops report document the API gave for it (null with
// `error` set when the API refused it).
struct ObserveSource {
  ObserveWindow window;
  nlohmann::json ops;
  std::string error;
};

struct ObserveMeta {
  std::string server;
  std::string caller;
  bool platform_admin = false;
  std::string tenant;  // --tenant; "" for every tenant the caller sees
  TimeMs generated_ms = 0;
};

// observe.json: {generated_ms, server, caller, platform_admin, tenant,
// days, currency, tenants, rows [...], period {...}, notes [...]}. A row:
// day, from_ms, to_ms, partial, jobs, failed_jobs, mean_wait_ms,
// p95_wait_ms, gpu_utilization_pct, gpu_memory_utilization_pct,
// alerts_opened, interventions, cost {tenant: {cost, cost_micros}},
// cost_micros (the total's, or --tenant's), error.
nlohmann::json BuildObserve(const std::vector<ObserveSource>& days, const ObserveSource& period,
                            const ObserveMeta& meta);

std::string RenderObserveMarkdown(const nlohmann::json& observe);
// One self-contained file: inline style, no script, nothing fetched.
std::string RenderObserveHtml(const nlohmann::json& observe);

}  // namespace berth::cli::poc
