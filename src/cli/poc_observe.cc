#include "cli/poc_observe.h"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <set>

#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/poc_report.h"
#include "common/text_escape.h"

namespace berth::cli::poc {
namespace {

using nlohmann::json;

constexpr TimeMs kObserveDayMs = 24LL * 3600 * 1000;
constexpr std::string_view kObserveDash = "—";

std::string ObserveDayLabel(TimeMs day_start) {
  const std::chrono::sys_days d{std::chrono::days{day_start / kObserveDayMs}};
  const std::chrono::year_month_day ymd{d};
  return fmt::format("{:04}-{:02}-{:02}", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
}

// The figures the row reads: the total, or --tenant's entry; null when the
// tenant is absent from the report (nothing of it in the window).
const json* ObserveFigures(const json& ops, const std::string& tenant) {
  if (tenant.empty()) return Field(ops, "total");
  for (const auto& t : Array(ops, "tenants")) {
    if (Text(t, "tenant") == tenant) return &t;
  }
  return nullptr;
}

json ObserveIntOrNull(const json& obj, std::string_view path) {
  auto v = Int(obj, path);
  return v ? json(*v) : json(nullptr);
}

// The notes are a set: a reason shows once however many cells it empties.
json ObserveRow(const ObserveSource& src, const ObserveMeta& meta, std::set<std::string>& notes,
                std::set<std::string>& tenants) {
  json row{{"day", src.window.label},
           {"from_ms", src.window.from},
           {"to_ms", src.window.to},
           {"partial", src.window.partial},
           {"jobs", nullptr},
           {"failed_jobs", nullptr},
           {"mean_wait_ms", nullptr},
           {"p95_wait_ms", nullptr},
           {"gpu_utilization_pct", nullptr},
           {"gpu_memory_utilization_pct", nullptr},
           {"alerts_opened", nullptr},
           {"interventions", nullptr},
           {"cost", json::object()},
           {"cost_micros", nullptr},
           {"error", nullptr}};
  if (!src.error.empty() || !src.ops.is_object()) {
    row["error"] = src.error.empty() ? "no report" : src.error;
    notes.insert(
        fmt::format("{}: the API refused the operations report of this window, so its "
                    "row is empty: {}",
                    src.window.label, row["error"].get<std::string>()));
    return row;
  }
  const json& ops = src.ops;
  const json* found = ObserveFigures(ops, meta.tenant);
  // A tenant absent from the report had nothing in the window: no job, no
  // usage record, no intervention. Its counts are zero; its averages are
  // undefined.
  const json none = json{{"jobs_submitted", 0},
                         {"jobs_failed", 0},
                         {"interventions", 0},
                         {"cost_micros", 0},
                         {"wait", {{"started", 0}}},
                         {"measured", Bool(ops, "measured") ? json::object() : json(nullptr)}};
  const json& f = found != nullptr ? *found : none;
  if (found == nullptr) {
    notes.insert(
        fmt::format("tenant {} is absent from a day's operations report when it had "
                    "no job, usage record or intervention in that day: its counts are "
                    "0 and its averages —",
                    meta.tenant));
  }
  if (Field(f, "jobs_submitted") != nullptr) {
    row["jobs"] = ObserveIntOrNull(f, "jobs_submitted");
    row["failed_jobs"] = ObserveIntOrNull(f, "jobs_failed");
  } else {
    notes.insert(
        "jobs and failed jobs: this berthd's operations report has no jobs_submitted or "
        "jobs_failed (a release before they were added), so they are —");
  }
  const auto started = Int(f, "wait.started").value_or(0);
  if (started > 0) {
    row["mean_wait_ms"] = Int(f, "wait.total_wait_ms").value_or(0) / started;
    row["p95_wait_ms"] = ObserveIntOrNull(f, "wait.p95_wait_ms");
  } else {
    notes.insert(
        "mean and p95 wait are over the jobs whose first run started in the window: — where "
        "none started");
  }
  const json* measured = Field(f, "measured");
  if (measured == nullptr || !measured->is_object()) {
    notes.insert(
        "GPU and GPU-memory utilization: the operations report is not measured (berthd has no "
        "GPU telemetry), so they are —");
  } else if (Int(*measured, "runs_sampled").value_or(0) == 0) {
    notes.insert(
        "GPU and GPU-memory utilization are measured over the runs with telemetry samples: — "
        "where no run of the window was sampled");
  } else {
    if (const json* u = Field(*measured, "gpu_utilization_pct"); u && u->is_number()) {
      row["gpu_utilization_pct"] = *u;
    }
    if (Int(*measured, "memory_capacity_sum").value_or(0) > 0) {
      if (const json* m = Field(*measured, "gpu_memory_utilization_pct"); m && m->is_number()) {
        row["gpu_memory_utilization_pct"] = *m;
      }
    } else {
      notes.insert("GPU-memory utilization: the samples carry no GPU memory size, so it is —");
    }
  }
  const json* fleet = Field(ops, "fleet");
  if (!meta.tenant.empty()) {
    notes.insert(
        "alerts opened: alerts are about the fleet (nodes, GPUs, queues), not a tenant, "
        "so a --tenant table shows —");
  } else if (fleet == nullptr || !fleet->is_object()) {
    notes.insert(
        "alerts opened: the operations report counts alerts for platform admins only "
        "(they are the fleet's), so they are — for this caller");
  } else if (const json* a = Field(*fleet, "alerts_opened"); a != nullptr && a->is_number()) {
    row["alerts_opened"] = *a;
  } else {
    notes.insert(
        "alerts opened: this berthd's operations report does not count alerts (no "
        "alert store, or a release before alerts_opened), so they are —");
  }
  row["interventions"] = ObserveIntOrNull(f, "interventions");
  for (const auto& t : Array(ops, "tenants")) {
    const std::string name = Text(t, "tenant");
    if (!meta.tenant.empty() && name != meta.tenant) continue;
    row["cost"][name] = {{"cost", Text(t, "cost")},
                         {"cost_micros", Int(t, "cost_micros").value_or(0)}};
    tenants.insert(name);
  }
  // The total's (every tenant the caller sees) or the tenant's.
  row["cost_micros"] = ObserveIntOrNull(f, "cost_micros");
  return row;
}

// A wait for people: 850ms, 1.5s, 12m05s, 3h04m.
std::string ObserveMs(const json& v) {
  if (!v.is_number()) return std::string(kObserveDash);
  const auto ms = v.get<std::int64_t>();
  if (ms < 1000) return fmt::format("{}ms", ms);
  if (ms < 60'000) return fmt::format("{:.1f}s", static_cast<double>(ms) / 1000.0);
  const std::int64_t s = ms / 1000;
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}
std::string ObservePct(const json& v) {
  return v.is_number() ? fmt::format("{:.1f}%", v.get<double>()) : std::string(kObserveDash);
}
std::string ObserveCount(const json& v) {
  return v.is_number() ? ValueText(v) : std::string(kObserveDash);
}
// micro-units as money with two decimals, the way the ops report prints it.
std::string ObserveMoney(std::int64_t micros) {
  const bool neg = micros < 0;
  const std::uint64_t m =
      neg ? static_cast<std::uint64_t>(-(micros + 1)) + 1 : static_cast<std::uint64_t>(micros);
  return fmt::format("{}{}.{:02}", neg ? "-" : "", m / 1'000'000, (m % 1'000'000) / 10'000);
}

const std::vector<std::string> kObserveHeaders = {
    "day",          "jobs",          "failed jobs",          "mean wait", "p95 wait", "GPU util",
    "GPU mem util", "alerts opened", "manual interventions", "cost"};

std::vector<std::string> ObserveCells(const json& row) {
  const json& cost = row.value("cost_micros", json());
  std::string day = Text(row, "day");
  if (Bool(row, "partial")) day += " (to now)";
  return {day,
          ObserveCount(row.value("jobs", json())),
          ObserveCount(row.value("failed_jobs", json())),
          ObserveMs(row.value("mean_wait_ms", json())),
          ObserveMs(row.value("p95_wait_ms", json())),
          ObservePct(row.value("gpu_utilization_pct", json())),
          ObservePct(row.value("gpu_memory_utilization_pct", json())),
          ObserveCount(row.value("alerts_opened", json())),
          ObserveCount(row.value("interventions", json())),
          cost.is_number() ? ObserveMoney(cost.get<std::int64_t>()) : std::string(kObserveDash)};
}

// Rows of the cost-per-tenant table: a day, then each tenant's cost.
std::vector<std::vector<std::string>> ObserveCostRows(const json& o) {
  std::vector<std::vector<std::string>> rows;
  auto one = [&o](const json& row, const std::string& label) {
    std::vector<std::string> cells{label};
    for (const auto& t : Array(o, "tenants")) {
      const std::string name = t.get<std::string>();
      if (const json* e = Field(row, "error"); e != nullptr && e->is_string()) {
        cells.emplace_back(kObserveDash);
      } else if (const auto c = row.find("cost");
                 c != row.end() && c->is_object() && c->contains(name)) {
        cells.push_back(ObserveMoney(Int((*c)[name], "cost_micros").value_or(0)));
      } else {
        cells.emplace_back("0.00");
      }
    }
    return cells;
  };
  for (const auto& row : Array(o, "rows")) rows.push_back(one(row, Text(row, "day")));
  if (const json* p = Field(o, "period"); p != nullptr && p->is_object()) {
    rows.push_back(one(*p, "whole period"));
  }
  return rows;
}

std::string ObserveIntro(const json& o) {
  return fmt::format(
      "Last {} UTC day(s) on {}, as {} ({}), generated {}. Currency {}. Each row is one "
      "operations report (GET /v1/reports/ops) of that day; the whole-period row is one report "
      "over all of them.",
      IntText(o, "days"), Text(o, "server"), Text(o, "caller"),
      Field(o, "tenant") != nullptr && Field(o, "tenant")->is_string()
          ? "tenant " + Text(o, "tenant")
          : (Bool(o, "platform_admin") ? "every tenant and the fleet"
                                       : "the tenants it is a member of"),
      FormatUtc(Int(o, "generated_ms").value_or(0)), Text(o, "currency"));
}

std::vector<std::vector<std::string>> ObserveDailyRows(const json& o) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : Array(o, "rows")) rows.push_back(ObserveCells(row));
  if (const json* p = Field(o, "period"); p != nullptr && p->is_object()) {
    auto cells = ObserveCells(*p);
    cells[0] = "whole period";
    rows.push_back(std::move(cells));
  }
  return rows;
}

std::vector<std::string> ObserveCostHeaders(const json& o) {
  std::vector<std::string> h{"day"};
  for (const auto& t : Array(o, "tenants")) h.push_back(t.get<std::string>());
  return h;
}

}  // namespace

Status CheckObserveDays(std::int64_t days) {
  if (days >= 1 && days <= kObserveMaxDays) return Ok();
  return Fail(Code::kInvalidArgument,
              fmt::format("--days must be from 1 to {} (UTC days back from today), not {}",
                          kObserveMaxDays, days),
              "days");
}

std::vector<ObserveWindow> ObserveDays(TimeMs now, int days) {
  std::vector<ObserveWindow> out;
  const TimeMs today = now - ((now % kObserveDayMs) + kObserveDayMs) % kObserveDayMs;
  for (int i = days - 1; i >= 0; --i) {
    ObserveWindow w;
    w.from = today - i * kObserveDayMs;
    w.label = ObserveDayLabel(w.from);
    w.to = w.from + kObserveDayMs;
    if (i == 0) {
      // Today ends now; a window must not be empty, so at midnight it is 1 ms.
      w.to = std::max(now, w.from + 1);
      w.partial = true;
    }
    out.push_back(std::move(w));
  }
  return out;
}

json BuildObserve(const std::vector<ObserveSource>& days, const ObserveSource& period,
                  const ObserveMeta& meta) {
  std::set<std::string> notes;
  std::set<std::string> tenants;
  json rows = json::array();
  std::string currency;
  for (const auto& d : days) {
    rows.push_back(ObserveRow(d, meta, notes, tenants));
    if (currency.empty() && d.ops.is_object()) currency = Text(d.ops, "currency");
  }
  json whole = ObserveRow(period, meta, notes, tenants);
  whole["day"] = "whole period";
  if (currency.empty() && period.ops.is_object()) currency = Text(period.ops, "currency");
  notes.insert(
      "the whole-period row is one operations report over every day: its p95 wait is the nearest "
      "rank over every job of the period, not an average of the daily p95s");
  notes.insert("cost per tenant: a tenant absent from a day's report had no usage that day (0.00)");
  json o{{"generated_ms", meta.generated_ms},
         {"server", meta.server},
         {"caller", meta.caller},
         {"platform_admin", meta.platform_admin},
         {"tenant", meta.tenant.empty() ? json(nullptr) : json(meta.tenant)},
         {"days", days.size()},
         {"currency", currency.empty() || currency == "-" ? "USD" : currency},
         {"tenants", tenants},
         {"rows", std::move(rows)},
         {"period", std::move(whole)},
         {"notes", notes}};
  return o;
}

std::string RenderObserveMarkdown(const json& o) {
  std::string out = "# Berth after go-live: daily operations\n\n";
  out += PocMdCell(ObserveIntro(o)) + "\n\n## Daily\n\n";
  PocMdTable(out, kObserveHeaders, ObserveDailyRows(o));
  out += "## Cost per tenant\n\n";
  if (Array(o, "tenants").empty()) {
    out += "No tenant had usage in the period.\n\n";
  } else {
    PocMdTable(out, ObserveCostHeaders(o), ObserveCostRows(o));
  }
  out += "## Notes\n\n";
  for (const auto& n : Array(o, "notes")) out += "- " + PocMdCell(ValueText(n)) + "\n";
  return out;
}

std::string RenderObserveHtml(const json& o) {
  std::string out = PocHtmlHead("Berth after go-live: daily operations");
  out += "<h1>Berth after go-live: daily operations</h1>\n";
  out += "<p>" + HtmlEscape(ObserveIntro(o)) + "</p>\n<h2>Daily</h2>\n";
  PocHtmlTable(out, kObserveHeaders, ObserveDailyRows(o));
  out += "<h2>Cost per tenant</h2>\n";
  if (Array(o, "tenants").empty()) {
    out += "<p>No tenant had usage in the period.</p>\n";
  } else {
    PocHtmlTable(out, ObserveCostHeaders(o), ObserveCostRows(o));
  }
  out += "<h2>Notes</h2>\n<ul>\n";
  for (const auto& n : Array(o, "notes")) out += "<li>" + HtmlEscape(ValueText(n)) + "</li>\n";
  out += "</ul>\n</body>\n</html>\n";
  return out;
}

}  // namespace berth::cli::poc
