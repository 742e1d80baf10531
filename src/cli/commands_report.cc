// `berth report ops`: the operations report (GET /v1/reports/ops) as
// Markdown, one self-contained HTML file, or the API's JSON (docs/cli.md,
// docs/metering.md "Operations report"). Both renderers work from the JSON,
// compute percentages from its exact integers, and escape every value that
// came from the server: a job or tenant name cannot become markup.
#include <fmt/format.h>

#include <ctime>
#include <fstream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_view.h"
#include "common/text_escape.h"
#include "model/reason.h"

namespace berth::cli {
namespace {

using nlohmann::json;

std::int64_t Int(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<std::int64_t>() : 0;
}

std::string Hours(std::int64_t mgpu_ms) {
  return model::FormatGpuHours(mgpu_ms, 3);
}

std::string Pct(double num, double den) {
  if (den <= 0) return "—";
  return fmt::format("{:.1f}%", 100.0 * num / den);
}

std::string Duration(std::int64_t ms) {
  if (ms < 60'000) return fmt::format("{:.1f}s", static_cast<double>(ms) / 1000.0);
  if (ms < 3'600'000) return fmt::format("{:.1f}m", static_cast<double>(ms) / 60'000.0);
  return fmt::format("{:.1f}h", static_cast<double>(ms) / 3'600'000.0);
}

// A report as rows of plain cells; each renderer escapes them its own way.
struct Section {
  std::string title;
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  std::string note;  // a line under the table
};

std::vector<std::string> FigureCells(const json& f, const json& report) {
  const json& w = f.value("wait", json::object());
  const json& m = f.value("measured", json());
  const std::int64_t alloc = Int(f, "allocated_mgpu_ms");
  std::string util = "not measured";
  std::string mem = "not measured";
  if (m.is_object()) {
    util = Pct(static_cast<double>(Int(m, "used_mgpu_ms")),
               static_cast<double>(Int(m, "sampled_mgpu_ms")));
    mem = Pct(m.value("memory_used_sum", 0.0), m.value("memory_capacity_sum", 0.0));
  }
  const json& fleet = report.value("fleet", json());
  const std::string alloc_pct =
      fleet.is_object()
          ? Pct(static_cast<double>(alloc), static_cast<double>(Int(fleet, "capacity_mgpu_ms")))
          : "—";
  const std::int64_t started = Int(w, "started");
  // Jobs submitted and failed in the window; "—" from a berthd before they
  // were added (and in an inference row, whose figures have none).
  auto jobs = [&f](const char* key) {
    auto it = f.find(key);
    return it != f.end() && it->is_number() ? fmt::format("{}", it->get<std::int64_t>())
                                            : std::string("—");
  };
  return {Hours(alloc),
          alloc_pct,
          util,
          mem,
          started == 0 ? "—" : Duration(Int(w, "total_wait_ms") / started),
          started == 0 ? "—" : Duration(Int(w, "p95_wait_ms")),
          fmt::format("{}", started),
          Int(w, "waiting") == 0 ? "0"
                                 : fmt::format("{} (oldest {})", Int(w, "waiting"),
                                               Duration(Int(w, "oldest_wait_ms"))),
          jobs("jobs_submitted"),
          jobs("jobs_failed"),
          fmt::format("{}", Int(f, "runs_finished")),
          fmt::format("{} ({})", Int(f, "runs_failed"),
                      Pct(static_cast<double>(Int(f, "runs_failed")),
                          static_cast<double>(Int(f, "runs_finished")))),
          [&] {
            std::int64_t n = 0;
            const json ev = f.value("evictions", json::object());  // GCC 12: no P2718
            for (const auto& [k, v] : ev.items()) {
              n += v.get<std::int64_t>();
            }
            return fmt::format("{}", n);
          }(),
          Hours(Int(f, "lost_mgpu_ms")),
          Str(f, "cost"),
          fmt::format("{}", Int(f, "interventions"))};
}

const std::vector<std::string> kFigureHeaders{
    "GPU-hours", "Allocation", "GPU util", "GPU memory",   "Avg wait", "p95 wait",
    "Started",   "Waiting",    "Jobs",     "Jobs failed",  "Runs",     "Failed",
    "Evictions", "Lost GPU-h", "Cost",     "Interventions"};

std::vector<Section> Sections(const json& r) {
  std::vector<Section> out;
  const std::string currency = Str(r, "currency");
  const json& fleet = r.value("fleet", json());

  Section summary{"Summary", {"Figure", "Value"}, {}, ""};
  summary.rows.push_back(
      {"Window", FormatUtc(Int(r, "from_ms")) + " to " + FormatUtc(Int(r, "to_ms"))});
  if (fleet.is_object()) {
    summary.rows.push_back({"GPUs", fmt::format("{}", Int(fleet, "gpus"))});
    summary.rows.push_back({"Capacity GPU-hours", Hours(Int(fleet, "capacity_mgpu_ms"))});
    const json& fm = fleet.value("measured", json());
    summary.rows.push_back({"Fleet GPU utilization (sample average)",
                            fm.is_object()
                                ? Pct(fm.value("util_sum", 0.0), 100.0 * fm.value("samples", 0.0))
                                : "not measured"});
    // Alerts are about the fleet: the API gives them (in `fleet`) to
    // platform admins only, so a member's report has no such row.
    const json& alerts = fleet.value("alerts_opened", json());
    summary.rows.push_back({"Alerts opened", alerts.is_number()
                                                 ? fmt::format("{}", alerts.get<std::int64_t>())
                                                 : "not kept (this berthd runs no alert rules)"});
  }
  const json& total = r.value("total", json::object());
  auto cells = FigureCells(total, r);
  for (std::size_t i = 0; i < kFigureHeaders.size(); ++i) {
    std::string name = kFigureHeaders[i];
    if (name == "Cost") name += " (" + currency + ")";
    summary.rows.push_back({name, cells[i]});
  }
  if (!Bool(r, "measured")) {
    summary.note = "GPU and memory utilization are not measured: this berthd has no GPU telemetry.";
  }
  out.push_back(std::move(summary));

  Section tenants{"Per tenant", {"Tenant"}, {}, ""};
  for (const auto& h : kFigureHeaders) {
    tenants.headers.push_back(h == "Cost" ? h + " (" + currency + ")" : h);
  }
  for (const auto& t : r.value("tenants", json::array())) {
    std::vector<std::string> row{Str(t, "tenant")};
    for (auto& c : FigureCells(t, r)) row.push_back(std::move(c));
    tenants.rows.push_back(std::move(row));
  }
  out.push_back(std::move(tenants));

  // Inference apart from training: the replicas' GPU-hours, use and resident
  // memory, how long a new replica waited for GPUs, and what stopped them.
  Section inference{"Inference services (replicas)", {"Service"}, {}, ""};
  for (const auto& h : kFigureHeaders) {
    inference.headers.push_back(h == "Cost" ? h + " (" + currency + ")" : h);
  }
  const json& inf = r.value("inference", json::object());
  const json services = inf.value("services", json::array());
  if (!services.empty()) {
    std::vector<std::string> row{"all services"};
    for (auto& c : FigureCells(inf, r)) row.push_back(std::move(c));
    inference.rows.push_back(std::move(row));
  }
  for (const auto& s : services) {
    std::vector<std::string> row{Str(s, "tenant") + "/" + Str(s, "service")};
    for (auto& c : FigureCells(s, r)) row.push_back(std::move(c));
    inference.rows.push_back(std::move(row));
  }
  inference.note =
      "Replicas are jobs of their service: their figures are in the tenant's and the summary's "
      "too. Wait is how long a new replica waited for GPUs; GPU memory is what the resident "
      "models used of their GPUs.";
  out.push_back(std::move(inference));

  // What the gateway logged of each service's requests, by the hours that
  // overlap the window.
  Section requests{
      "Inference requests (through the gateway, to the hour)",
      {"Service", "Requests", "5xx", "Held at zero", "p50", "p95", "p99", "SLO windows met"},
      {},
      ""};
  for (const auto& s : services) {
    const json q = s.value("requests", json());
    if (!q.is_object()) continue;
    const auto n = Int(q, "requests");
    const auto ms = [&](const char* key) { return fmt::format("{:.0f} ms", q.value(key, 0.0)); };
    requests.rows.push_back(
        {Str(s, "tenant") + "/" + Str(s, "service"), fmt::format("{}", n),
         Pct(static_cast<double>(Int(q, "responses_5xx")), static_cast<double>(n)),
         fmt::format("{}", Int(q, "held")), ms("p50_ms"), ms("p95_ms"), ms("p99_ms"),
         Pct(static_cast<double>(Int(q, "slo_windows_met")),
             static_cast<double>(Int(q, "slo_windows")))});
  }
  if (!requests.rows.empty()) {
    requests.note =
        "Counted whole for every hour that overlaps the window. An SLO window is one round of "
        "the service controller (2 s) with requests; met when its p95 kept the spec's target.";
    out.push_back(std::move(requests));
  }

  Section outcomes{
      "Runs by outcome and failures by class", {"Tenant", "Kind", "Name", "Runs"}, {}, ""};
  auto add_counts = [&](const std::string& tenant, const json& f) {
    for (const char* kind : {"outcomes", "failures_by_class", "evictions"}) {
      const json counts = f.value(kind, json::object());
      for (const auto& [k, v] : counts.items()) {
        const std::string label = std::string_view(kind) == "outcomes"            ? "outcome"
                                  : std::string_view(kind) == "failures_by_class" ? "failure class"
                                                                                  : "eviction";
        outcomes.rows.push_back({tenant, label, k, fmt::format("{}", v.get<std::int64_t>())});
      }
    }
  };
  add_counts("all", total);
  for (const auto& t : r.value("tenants", json::array())) add_counts(Str(t, "tenant"), t);
  out.push_back(std::move(outcomes));

  // GPU-hours evictions threw away, per tenant whose jobs lost them and
  // per kind (what reclaims of borrowed GPUs cost each tenant).
  Section wasted{"GPU-hours lost to evictions", {"Tenant", "Kind", "Lost GPU-h"}, {}, ""};
  for (const auto& t : r.value("tenants", json::array())) {
    const json by_kind = t.value("lost_by_kind", json::object());
    for (const auto& [kind, v] : by_kind.items()) {
      wasted.rows.push_back({Str(t, "tenant"), kind, Hours(Int(v, "lost_mgpu_ms"))});
    }
  }
  out.push_back(std::move(wasted));

  Section evictions{"Evictions",
                    {"Time", "Kind", "Tenant", "Job", "Run", "GPUs", "Lost since", "Lost GPU-h"},
                    {},
                    ""};
  for (const auto& e : r.value("evictions", json::array())) {
    evictions.rows.push_back({FormatUtc(Int(e, "time_ms")), Str(e, "kind"), Str(e, "tenant"),
                              fmt::format("{} {}", Int(e, "job_id"), Str(e, "job_name")),
                              Str(e, "run_id"),
                              fmt::format("{:.3f}", static_cast<double>(Int(e, "mgpu")) / 1000.0),
                              Str(e, "lost_since"), Hours(Int(e, "lost_mgpu_ms"))});
  }
  out.push_back(std::move(evictions));

  Section by_action{"Manual interventions by action", {"Action", "Count"}, {}, ""};
  const json by_action_counts = r.value("interventions_by_action", json::object());
  for (const auto& [k, v] : by_action_counts.items()) {
    by_action.rows.push_back({k, fmt::format("{}", v.get<std::int64_t>())});
  }
  out.push_back(std::move(by_action));
  Section list{"Manual interventions", {"Time", "Actor", "Action", "Target", "Tenant"}, {}, ""};
  for (const auto& i : r.value("interventions", json::array())) {
    list.rows.push_back({FormatUtc(Int(i, "time_ms")), Str(i, "actor"), Str(i, "action"),
                         Str(i, "object"), Str(i, "tenant")});
  }
  out.push_back(std::move(list));
  return out;
}

// Inert in a Markdown table cell: the characters that start markup or end a
// cell are backslash-escaped, <, > and & become HTML entities, and line
// breaks become spaces.
std::string MarkdownCell(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '|':
      case '\\':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
        out += '\\';
        out += c;
        break;
      case '<':
      case '>':
      case '&':
        out += HtmlEscape(std::string_view(&c, 1));
        break;
      case '\n':
      case '\r':
        out += ' ';
        break;
      default:
        out += c;
    }
  }
  return out.empty() ? " " : out;
}

}  // namespace

std::string RenderOpsMarkdown(const json& report) {
  std::string out = "# Operations report\n\n";
  for (const auto& s : Sections(report)) {
    out += "## " + s.title + "\n\n";
    if (s.rows.empty()) {
      out += "None.\n\n";
      continue;
    }
    out += "|";
    for (const auto& h : s.headers) out += " " + MarkdownCell(h) + " |";
    out += "\n|";
    for (std::size_t i = 0; i < s.headers.size(); ++i) out += " --- |";
    out += "\n";
    for (const auto& row : s.rows) {
      out += "|";
      for (const auto& c : row) out += " " + MarkdownCell(c) + " |";
      out += "\n";
    }
    out += "\n";
    if (!s.note.empty()) out += MarkdownCell(s.note) + "\n\n";
  }
  return out;
}

std::string RenderOpsHtml(const json& report) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>Berth operations report</title>\n<style>\n"
      "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\n"
      "table{border-collapse:collapse;margin:0 0 1.5em}\n"
      "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:14px}\n"
      "th{background:#f2f2f2}\ntd.n{text-align:right}\np.note{color:#666}\n"
      "</style>\n</head>\n<body>\n<h1>Operations report</h1>\n";
  for (const auto& s : Sections(report)) {
    out += "<h2>" + HtmlEscape(s.title) + "</h2>\n";
    if (s.rows.empty()) {
      out += "<p>None.</p>\n";
      continue;
    }
    out += "<table>\n<tr>";
    for (const auto& h : s.headers) out += "<th>" + HtmlEscape(h) + "</th>";
    out += "</tr>\n";
    for (const auto& row : s.rows) {
      out += "<tr>";
      for (const auto& c : row) out += "<td>" + HtmlEscape(c) + "</td>";
      out += "</tr>\n";
    }
    out += "</table>\n";
    if (!s.note.empty()) out += "<p class=\"note\">" + HtmlEscape(s.note) + "</p>\n";
  }
  out += "</body>\n</html>\n";
  return out;
}

Status ShowOpsReport(ApiClient& api, const OpsReportArgs& args, const Output& output) {
  auto response = api.Get("/v1/reports/ops" + QueryString({{"from", args.from}, {"to", args.to}}));
  if (!response) return std::unexpected(response.error());
  std::string text;
  if (args.format == "json") {
    text = response->dump(2) + "\n";
  } else if (args.format == "html") {
    text = RenderOpsHtml(*response);
  } else {
    text = RenderOpsMarkdown(*response);
  }
  if (args.out_file.empty()) {
    output.out << text;
    return Ok();
  }
  std::ofstream f(args.out_file, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) {
    return std::unexpected(Error{
        Code::kInvalidArgument,
        fmt::format("could not write '{}'; give --out a writable path", args.out_file), "--out"});
  }
  output.out << fmt::format("wrote {} ({} bytes)\n", args.out_file, text.size());
  return Ok();
}

}  // namespace berth::cli
