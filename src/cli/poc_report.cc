#include "cli/poc_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <string_view>
#include <vector>

#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/poc_burst.h"
#include "cli/poc_suite.h"
#include "common/text_escape.h"
#include "common/units.h"

namespace berth::cli::poc {

std::string PocMdCell(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|') {
      out += "\\|";
    } else if (ch == '\n' || ch == '\r') {
      out += ' ';
    } else {
      out += ch;
    }
  }
  return out;
}

void PocMdTable(std::string& out, const std::vector<std::string>& headers,
                const std::vector<std::vector<std::string>>& rows) {
  out += "|";
  for (const auto& h : headers) out += " " + PocMdCell(h) + " |";
  out += "\n|";
  for (std::size_t i = 0; i < headers.size(); ++i) out += " --- |";
  out += "\n";
  for (const auto& row : rows) {
    out += "|";
    for (const auto& cell : row) out += " " + PocMdCell(cell) + " |";
    out += "\n";
  }
  out += "\n";
}

void PocHtmlTable(std::string& out, const std::vector<std::string>& headers,
                  const std::vector<std::vector<std::string>>& rows) {
  // A wide table scrolls inside its box, never the page; the box takes the
  // keyboard's focus so its hidden columns can be reached.
  out += "<div class=\"wide\" tabindex=\"0\">\n<table>\n<tr>";
  for (const auto& h : headers) out += "<th>" + HtmlEscape(h) + "</th>";
  out += "</tr>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const auto& cell : row) out += "<td>" + HtmlEscape(cell) + "</td>";
    out += "</tr>\n";
  }
  out += "</table>\n</div>\n";
}

namespace {

using nlohmann::json;

// Weights of the cases of one capability or perspective, by verdict.
struct PocTally {
  std::int64_t passed = 0;
  std::int64_t failed = 0;
  std::int64_t skipped = 0;
  int cases_passed = 0;
  int cases_failed = 0;
  int cases_skipped = 0;
  int cases_not_run = 0;

  void Add(const json& c) {
    const std::int64_t w = Int(c, "weight").value_or(1);
    const std::string v = Text(c, "verdict");
    if (v == "pass") {
      passed += w;
      ++cases_passed;
    } else if (v == "fail") {
      failed += w;
      ++cases_failed;
    } else if (v == "interrupted" || v == "not_run") {
      // An interrupted run's: neither judged nor skipped for a reason of
      // the cluster's.
      ++cases_not_run;
    } else {
      skipped += w;
      ++cases_skipped;
    }
  }
  json ToJson() const {
    const std::int64_t judged = passed + failed;
    // One decimal, computed from the integers so the same run scores alike.
    json score = judged == 0 ? json() : json(std::round(1000.0 * passed / judged) / 10.0);
    return {{"score", score},
            {"weight_passed", passed},
            {"weight_failed", failed},
            {"weight_skipped", skipped},
            {"cases_passed", cases_passed},
            {"cases_failed", cases_failed},
            {"cases_skipped", cases_skipped},
            {"cases_not_run", cases_not_run}};
  }
};

std::string PocScoreText(const json& tally) {
  const json* s = Field(tally, "score");
  if (s == nullptr || !s->is_number()) return "not judged";
  return fmt::format("{:.1f}%", s->get<double>());
}

std::string PocMs(const json& obj, std::string_view key) {
  auto v = Int(obj, key);
  return v ? FormatDurationMs(*v) : "-";
}

// {"gpus": 2, "cpu_millis": 0} -> "gpus=2"; zero and empty fields left out.
std::string PocResources(const json& s) {
  std::string out;
  const json* res = Field(s, "resources");
  if (res != nullptr && res->is_object()) {
    for (const auto& [k, v] : res->items()) {
      if (v.is_null() || (v.is_number() && v.get<double>() == 0) ||
          (v.is_string() && v.get<std::string>().empty())) {
        continue;
      }
      out += fmt::format("{}{}={}", out.empty() ? "" : " ", k, ValueText(v));
    }
  }
  const auto replicas = Int(s, "replicas").value_or(1);
  if (replicas > 1) out = fmt::format("{} x ({})", replicas, out);
  return out.empty() ? "no GPUs" : out;
}

std::string PocFailure(const json& s) {
  const json* f = Field(s, "failure");
  if (f == nullptr || !f->is_object()) return "-";
  return fmt::format("{}: {}", Text(*f, "class"), Text(*f, "message"));
}

std::string PocIds(const json& array) {
  std::string out;
  for (const auto& v : array) out += (out.empty() ? "" : ", ") + ValueText(v);
  return out.empty() ? "-" : out;
}

// "mean 41% (min 12%, max 97%), peak 30.5 GiB of 80 GiB, 6 samples", or
// "no samples" when telemetry saw none of the job's runs.
std::string PocTelemetry(const json& s) {
  const json* t = Field(s, "telemetry");
  if (t == nullptr || !t->is_object() || Int(*t, "samples").value_or(0) == 0) return "no samples";
  auto pct = [&t](std::string_view key) {
    const json* v = Field(*t, key);
    return v != nullptr && v->is_number() ? fmt::format("{:.0f}%", v->get<double>())
                                          : std::string("-");
  };
  auto bytes = [&t](std::string_view key) {
    auto v = Int(*t, key);
    return v ? FormatBytes(static_cast<std::uint64_t>(*v)) : std::string("-");
  };
  return fmt::format("mean {} (min {}, max {}), peak memory {} of {}, {} samples",
                     pct("mean_util_pct"), pct("min_util_pct"), pct("max_util_pct"),
                     bytes("peak_memory_bytes"), bytes("memory_total_bytes"),
                     IntText(*t, "samples"));
}

// Error states and alerts in one cell: "exit 3; alert budget (warning): ...".
std::string PocErrorsAndAlerts(const json& s) {
  std::string out;
  for (const auto& e : Array(s, "error_states")) out += (out.empty() ? "" : "; ") + ValueText(e);
  for (const auto& a : Array(s, "alerts")) {
    out += fmt::format("{}alert {} {} ({}): {}", out.empty() ? "" : "; ", IntText(a, "id"),
                       Text(a, "kind"), Text(a, "severity"), Text(a, "message"));
  }
  return out.empty() ? "-" : out;
}

// A sample's state; a service replica that took held calls says its cold
// start as berthd measured it.
std::string PocSampleState(const json& s) {
  if (auto cold = Int(s, "cold_start_ms")) {
    return fmt::format("{} (scaled from zero: cold start {} ms)", Text(s, "state"), *cold);
  }
  return Text(s, "state");
}

// What a case's own cleanup did (the services it applied, deleted when it
// ended), for both renderers; "" when it had nothing of its own to undo.
std::string PocCaseCleanupText(const json& c) {
  const json* cleanup = Field(c, "cleanup");
  if (cleanup == nullptr || !cleanup->is_object()) return "";
  std::string deleted;
  for (const auto& s : Array(*cleanup, "services_deleted")) {
    deleted += (deleted.empty() ? "" : ", ") + ValueText(s);
  }
  std::string out = fmt::format("services deleted: {}", deleted.empty() ? "none" : deleted);
  for (const auto& p : Array(*cleanup, "service_problems")) out += "; problem: " + ValueText(p);
  return out;
}

// The samples table's rows, the same cells for both renderers.
std::vector<std::vector<std::string>> PocSampleRows(const json& c) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : Array(c, "samples")) {
    if (Text(s, "kind") == "burst") {
      rows.push_back(BurstSampleCells(s));
      continue;
    }
    rows.push_back(
        {Text(s, "name"), IntText(s, "job_id"),
         fmt::format("{} / {} / {}", Text(s, "tenant"), Text(s, "user"), Text(s, "queue")),
         PocResources(s), Text(s, "expected"), PocSampleState(s), PocMs(s, "queueing_ms"),
         PocMs(s, "run_ms"), PocFailure(s), PocTelemetry(s), PocErrorsAndAlerts(s)});
  }
  return rows;
}

const std::vector<std::string> kPocSampleHeaders = {"sample",
                                                    "job",
                                                    "tenant / user / queue",
                                                    "resources asked",
                                                    "expected",
                                                    "state",
                                                    "queueing time",
                                                    "run time",
                                                    "failure reason",
                                                    "GPU utilization and memory",
                                                    "error states and alerts"};

std::vector<std::vector<std::string>> PocEnvRows(const json& env) {
  std::string models;
  if (const json* m = Field(env, "gpu_models"); m != nullptr && m->is_object()) {
    for (const auto& [model, n] : m->items()) {
      models += fmt::format("{}{} x {}", models.empty() ? "" : ", ", ValueText(n), model);
    }
  }
  std::string drivers;
  if (const json* d = Field(env, "drivers"); d != nullptr && d->is_object()) {
    for (const auto& [what, n] : d->items()) {
      drivers += fmt::format("{}{} on {} node(s)", drivers.empty() ? "" : "; ", what, ValueText(n));
    }
  }
  return {
      {"cluster (--allow-on)", Text(env, "cluster")},
      {"server", Text(env, "server")},
      {"berthd version (GET /healthz)", Text(env, "berthd_version")},
      {"Berth API version (GET /v1/openapi.json)", Text(env, "api_version")},
      {"berth CLI version", Text(env, "cli_version")},
      {"control plane role (GET /healthz)", Text(env, "role")},
      {"nodes (Ready)", fmt::format("{} ({})", IntText(env, "nodes"), IntText(env, "nodes_ready"))},
      {"GPUs (healthy)",
       fmt::format("{} ({})", IntText(env, "gpus"), IntText(env, "gpus_healthy"))},
      {"GPU models", models.empty() ? "-" : models},
      {"GPU drivers", drivers.empty() ? "-" : drivers},
      {"policy version before the run", IntText(env, "policy_version_before")},
      {"policy version during the run", IntText(env, "policy_version_during")},
      {"price table version", IntText(env, "price_version")},
      {"suite", fmt::format("{} {}", Text(env, "suite.name"), Text(env, "suite.version"))},
      {"suite SHA-256", Text(env, "suite.sha256")}};
}

// In the order the suite format lists them (kPocCapabilities,
// kPocPerspectives), then any other name the report holds.
template <std::size_t N>
std::vector<std::vector<std::string>> PocScoreRows(const json& scores,
                                                   const std::string_view (&order)[N]) {
  std::vector<std::vector<std::string>> rows;
  if (!scores.is_object()) return rows;
  std::vector<std::string> names;
  for (auto name : order) {
    if (scores.contains(std::string(name))) names.emplace_back(name);
  }
  for (const auto& [name, t] : scores.items()) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  for (const auto& name : names) {
    const json& t = scores[name];
    rows.push_back(
        {name, PocScoreText(t),
         fmt::format("{} / {} / {}", IntText(t, "cases_passed"), IntText(t, "cases_failed"),
                     IntText(t, "cases_skipped")),
         fmt::format("{} of {}", IntText(t, "weight_passed"),
                     Int(t, "weight_passed").value_or(0) + Int(t, "weight_failed").value_or(0))});
  }
  return rows;
}

const std::vector<std::string> kPocScoreHeaders = {"", "score", "passed / failed / skipped",
                                                   "weight passed of judged"};

struct PocList {
  const char* key;
  const char* title;
  const char* meaning;
};
constexpr PocList kPocLists[] = {
    {"must_fix", "Must fix", "failed cases of high risk: fix before launch"},
    {"limited_launch", "Limited launch",
     "failed cases of medium risk: launch only where they "
     "do not matter, with the gap stated"},
    {"later_optimization", "Later optimization", "failed cases of low risk: plan after launch"},
};

std::string PocSummaryLine(const json& report) {
  const std::string not_run =
      Field(report, "interrupted") == nullptr
          ? ""
          : fmt::format(", {} not run (interrupted by {})", IntText(report, "summary.not_run"),
                        Text(report, "interrupted.signal"));
  return fmt::format("{} passed, {} failed, {} skipped{}; overall weighted score {}",
                     IntText(report, "summary.passed"), IntText(report, "summary.failed"),
                     IntText(report, "summary.skipped"), not_run,
                     PocScoreText(report.value("scores", json::object()).value("overall", json())));
}

}  // namespace

void ScoreReport(json& report) {
  std::map<std::string, PocTally> caps;
  std::map<std::string, PocTally> views;
  for (auto c : kPocCapabilities) caps[std::string(c)];
  for (auto p : kPocPerspectives) views[std::string(p)];
  PocTally overall;
  json conclusions{{"must_fix", json::array()},
                   {"limited_launch", json::array()},
                   {"later_optimization", json::array()},
                   {"not_evaluated", json::array()},
                   {"not_run", json::array()}};
  for (const auto& c : Array(report, "cases")) {
    caps[Text(c, "capability")].Add(c);
    views[Text(c, "perspective")].Add(c);
    overall.Add(c);
    const std::string verdict = Text(c, "verdict");
    json item{{"id", Text(c, "id")},         {"group", Text(c, "group")},
              {"title", Text(c, "title")},   {"risk", Text(c, "risk")},
              {"reason", Text(c, "reason")}, {"retest", Text(c, "retest")}};
    if (verdict == "interrupted" || verdict == "not_run") {
      conclusions["not_run"].push_back(item);
    } else if (verdict == "skipped") {
      conclusions["not_evaluated"].push_back(item);
    } else if (verdict == "fail") {
      const std::string risk = Text(c, "risk");
      conclusions[risk == "high"  ? "must_fix"
                  : risk == "low" ? "later_optimization"
                                  : "limited_launch"]
          .push_back(item);
    }
  }
  json scores{{"capabilities", json::object()}, {"perspectives", json::object()}};
  for (const auto& [name, t] : caps) scores["capabilities"][name] = t.ToJson();
  for (const auto& [name, t] : views) scores["perspectives"][name] = t.ToJson();
  scores["overall"] = overall.ToJson();
  report["scores"] = scores;
  report["conclusions"] = conclusions;
  report["summary"] = {{"passed", overall.cases_passed},
                       {"failed", overall.cases_failed},
                       {"skipped", overall.cases_skipped},
                       {"not_run", overall.cases_not_run},
                       {"cases", overall.cases_passed + overall.cases_failed +
                                     overall.cases_skipped + overall.cases_not_run}};
}

std::string RenderMarkdown(const json& report) {
  std::string out =
      fmt::format("# Berth acceptance report: {}\n\n", Text(report, "environment.suite.name"));
  out += fmt::format("Run {} on {} by {}, {} to {}. {}.\n\n", Text(report, "run.id"),
                     PocMdCell(Text(report, "environment.cluster")), Text(report, "run.admin"),
                     FormatUtc(Int(report, "run.started_ms").value_or(0)),
                     FormatUtc(Int(report, "run.finished_ms").value_or(0)), PocSummaryLine(report));
  out += "## Environment\n\n";
  PocMdTable(out, {"fingerprint", "value"},
             PocEnvRows(Field(report, "environment") ? report["environment"] : json()));
  out += "## Scores\n\nWeighted pass rate of the cases judged; skipped cases count in neither.\n\n";
  const json scores = report.value("scores", json::object());
  PocMdTable(out, {"capability", "score", "passed / failed / skipped", "weight passed of judged"},
             PocScoreRows(scores.value("capabilities", json::object()), kPocCapabilities));
  PocMdTable(out, {"perspective", "score", "passed / failed / skipped", "weight passed of judged"},
             PocScoreRows(scores.value("perspectives", json::object()), kPocPerspectives));
  out += "## Conclusions\n\n";
  const json conclusions = report.value("conclusions", json::object());
  for (const auto& list : kPocLists) {
    out += fmt::format("### {} ({})\n\n", list.title, list.meaning);
    const json& items = conclusions.value(list.key, json::array());
    if (items.empty()) out += "None.\n";
    for (const auto& i : items) {
      out += fmt::format("- **{}/{}** {}: {}. Re-test: {}\n", Text(i, "group"), Text(i, "id"),
                         PocMdCell(Text(i, "title")), PocMdCell(Text(i, "reason")),
                         PocMdCell(Text(i, "retest")));
    }
    out += "\n";
  }
  out += "### Not evaluated (skipped)\n\n";
  const json& skipped = conclusions.value("not_evaluated", json::array());
  if (skipped.empty()) out += "None.\n";
  for (const auto& i : skipped) {
    out += fmt::format("- **{}/{}** {}: {}\n", Text(i, "group"), Text(i, "id"),
                       PocMdCell(Text(i, "title")), PocMdCell(Text(i, "reason")));
  }
  if (const json& not_run = conclusions.value("not_run", json::array()); !not_run.empty()) {
    out += fmt::format("\n### Not run (interrupted by {})\n\n",
                       PocMdCell(Text(report, "interrupted.signal")));
    for (const auto& i : not_run) {
      out += fmt::format("- **{}/{}** {}: {}\n", Text(i, "group"), Text(i, "id"),
                         PocMdCell(Text(i, "title")), PocMdCell(Text(i, "reason")));
    }
  }
  out += "\n## Cases\n\n";
  for (const auto& c : Array(report, "cases")) {
    out += fmt::format("### {}/{}: {} — {}\n\n", Text(c, "group"), Text(c, "id"),
                       PocMdCell(Text(c, "title")), Text(c, "verdict"));
    out += fmt::format("Capability {}, perspective {}, weight {}, risk {} ({} if it fails).\n\n",
                       Text(c, "capability"), Text(c, "perspective"), IntText(c, "weight"),
                       Text(c, "risk"), Text(c, "if_it_fails"));
    if (!Text(c, "reason").empty() && Text(c, "reason") != "-") {
      out += fmt::format("Why: {}\n\n", PocMdCell(Text(c, "reason")));
    }
    out += fmt::format("Re-test: {}\n\n", PocMdCell(Text(c, "retest")));
    auto rows = PocSampleRows(c);
    if (!rows.empty()) PocMdTable(out, kPocSampleHeaders, rows);
    std::vector<std::vector<std::string>> steps;
    for (const auto& s : Array(c, "steps")) {
      steps.push_back({Text(s, "step"), Text(s, "kind"), Bool(s, "ok") ? "ok" : "FAILED",
                       Text(s, "expected"), Text(s, "actual")});
    }
    if (!steps.empty()) PocMdTable(out, {"step", "kind", "", "expected", "actual"}, steps);
    const json ev = c.value("evidence", json::object());
    std::string requests;
    for (const auto& r : Array(ev, "requests")) {
      requests += fmt::format("{}`{}` as {} → {}", requests.empty() ? "" : "; ", Text(r, "request"),
                              Text(r, "as"), Text(r, "status"));
    }
    out += fmt::format("Evidence: jobs {}; audit records {}; requests: {}\n\n",
                       PocIds(Array(ev, "jobs")), PocIds(Array(ev, "audit_records")),
                       requests.empty() ? "-" : PocMdCell(requests));
    if (const std::string cleaned = PocCaseCleanupText(c); !cleaned.empty()) {
      out += fmt::format("Case cleanup: {}.\n\n", PocMdCell(cleaned));
    }
  }
  const json cleanup = report.value("cleanup", json::object());
  out += "## Cleanup\n\n";
  out += fmt::format(
      "Jobs cancelled: {}; jobs already ended: {}; tokens revoked: {}; identities disabled: {}; "
      "policy: {}.\n",
      PocIds(Array(cleanup, "jobs_cancelled")), IntText(cleanup, "jobs_already_ended"),
      Array(cleanup, "tokens_revoked").size(), PocIds(Array(cleanup, "identities_disabled")),
      Field(cleanup, "policy") != nullptr
          ? fmt::format("version {} restored as version {}", IntText(cleanup, "policy.restored"),
                        IntText(cleanup, "policy.as_version"))
          : "unchanged");
  for (const auto& p : Array(cleanup, "problems")) {
    out += fmt::format("- problem: {}\n", PocMdCell(ValueText(p)));
  }
  return out;
}

namespace {

std::string PocH(std::string_view s) {
  return HtmlEscape(s);
}

// An id safe in an attribute and a fragment: the case ids are short names
// already (poc_suite.cc), escaped all the same.
std::string PocAnchor(const json& c) {
  return PocH("case-" + Text(c, "id"));
}

}  // namespace

std::string PocHtmlHead(std::string_view title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<title>" +
         HtmlEscape(title) +
         "</title>\n<style>\n"
         "body{font-family:system-ui,sans-serif;margin:2em auto;padding:0 1em;max-width:1200px;"
         "color:#222}\n"
         "h1,h2,h3,p,li{overflow-wrap:anywhere}\n"
         ".wide{max-width:100%;overflow-x:auto}\n"
         "table{border-collapse:collapse;margin:0.5em 0 1em}\n"
         "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top;"
         "overflow-wrap:anywhere}\n"
         "th{background:#f3f3f3}\n"
         ".verdict{font-weight:bold;padding:2px 6px;border-radius:3px}\n"
         ".pass{background:#d6f5d6;color:#135213}.fail{background:#fbd5d5;color:#7a1010}\n"
         ".skipped{background:#eee;color:#555}\n"
         "section.case{border-top:1px solid #ddd;margin-top:1.5em}\n"
         "code{background:#f6f6f6;padding:0 3px}\n"
         "</style>\n</head>\n<body>\n";
}

std::string RenderHtml(const json& report) {
  std::string out = PocHtmlHead("Berth acceptance report");
  out += fmt::format("<h1>Berth acceptance report: {}</h1>\n",
                     PocH(Text(report, "environment.suite.name")));
  out += fmt::format(
      "<p>Run <code>{}</code> on <code>{}</code> by {}, {} to {}. {}.</p>\n",
      PocH(Text(report, "run.id")), PocH(Text(report, "environment.cluster")),
      PocH(Text(report, "run.admin")), FormatUtc(Int(report, "run.started_ms").value_or(0)),
      FormatUtc(Int(report, "run.finished_ms").value_or(0)), PocH(PocSummaryLine(report)));
  out += "<h2>Environment</h2>\n";
  PocHtmlTable(out, {"fingerprint", "value"},
               PocEnvRows(Field(report, "environment") ? report["environment"] : json()));
  out +=
      "<h2>Scores</h2>\n<p>Weighted pass rate of the cases judged; skipped cases count in "
      "neither.</p>\n";
  const json scores = report.value("scores", json::object());
  auto headers = kPocScoreHeaders;
  headers[0] = "capability";
  PocHtmlTable(out, headers,
               PocScoreRows(scores.value("capabilities", json::object()), kPocCapabilities));
  headers[0] = "perspective";
  PocHtmlTable(out, headers,
               PocScoreRows(scores.value("perspectives", json::object()), kPocPerspectives));
  out += "<h2>Conclusions</h2>\n";
  const json conclusions = report.value("conclusions", json::object());
  auto list_html = [&out](const json& items, bool retest) {
    if (items.empty()) {
      out += "<p>None.</p>\n";
      return;
    }
    out += "<ul>\n";
    for (const auto& i : items) {
      out += fmt::format("<li><a href=\"#{}\">{}/{}</a> {}: {}", PocH("case-" + Text(i, "id")),
                         PocH(Text(i, "group")), PocH(Text(i, "id")), PocH(Text(i, "title")),
                         PocH(Text(i, "reason")));
      if (retest) out += fmt::format(". Re-test: {}", PocH(Text(i, "retest")));
      out += "</li>\n";
    }
    out += "</ul>\n";
  };
  for (const auto& list : kPocLists) {
    out += fmt::format("<h3 id=\"{}\">{}</h3>\n<p>{}</p>\n", list.key, list.title, list.meaning);
    list_html(conclusions.value(list.key, json::array()), true);
  }
  out += "<h3 id=\"not_evaluated\">Not evaluated (skipped)</h3>\n";
  list_html(conclusions.value("not_evaluated", json::array()), false);
  if (const json& not_run = conclusions.value("not_run", json::array()); !not_run.empty()) {
    out += fmt::format("<h3 id=\"not_run\">Not run (interrupted by {})</h3>\n",
                       PocH(Text(report, "interrupted.signal")));
    list_html(not_run, false);
  }
  out += "<h2>Cases</h2>\n";
  for (const auto& c : Array(report, "cases")) {
    const std::string verdict = Text(c, "verdict");
    out += fmt::format(
        "<section class=\"case\" id=\"{}\">\n<h3>{}/{}: {} <span class=\"verdict {}\">{}</span>"
        "</h3>\n",
        PocAnchor(c), PocH(Text(c, "group")), PocH(Text(c, "id")), PocH(Text(c, "title")),
        verdict == "pass" || verdict == "fail" ? verdict : "skipped", PocH(verdict));
    out += fmt::format(
        "<p>Capability {}, perspective {}, weight {}, risk {} ({} if it fails).</p>\n",
        PocH(Text(c, "capability")), PocH(Text(c, "perspective")), PocH(IntText(c, "weight")),
        PocH(Text(c, "risk")), PocH(Text(c, "if_it_fails")));
    if (!Text(c, "reason").empty() && Text(c, "reason") != "-") {
      out += fmt::format("<p>Why: {}</p>\n", PocH(Text(c, "reason")));
    }
    out += fmt::format("<p>Re-test: {}</p>\n", PocH(Text(c, "retest")));
    auto rows = PocSampleRows(c);
    if (!rows.empty()) PocHtmlTable(out, kPocSampleHeaders, rows);
    std::vector<std::vector<std::string>> steps;
    for (const auto& s : Array(c, "steps")) {
      steps.push_back({Text(s, "step"), Text(s, "kind"), Bool(s, "ok") ? "ok" : "FAILED",
                       Text(s, "expected"), Text(s, "actual")});
    }
    if (!steps.empty()) PocHtmlTable(out, {"step", "kind", "", "expected", "actual"}, steps);
    const json ev = c.value("evidence", json::object());
    std::vector<std::vector<std::string>> reqs;
    for (const auto& r : Array(ev, "requests")) {
      reqs.push_back({Text(r, "request"), Text(r, "as"), Text(r, "status")});
    }
    out += fmt::format("<p>Evidence: jobs {}; audit records {}.</p>\n",
                       PocH(PocIds(Array(ev, "jobs"))), PocH(PocIds(Array(ev, "audit_records"))));
    if (!reqs.empty()) PocHtmlTable(out, {"API request", "as", "status"}, reqs);
    if (const std::string cleaned = PocCaseCleanupText(c); !cleaned.empty()) {
      out += fmt::format("<p>Case cleanup: {}.</p>\n", PocH(cleaned));
    }
    out += "</section>\n";
  }
  const json cleanup = report.value("cleanup", json::object());
  out += "<h2>Cleanup</h2>\n";
  std::vector<std::vector<std::string>> rows = {
      {"jobs cancelled", PocIds(Array(cleanup, "jobs_cancelled"))},
      {"jobs already ended", IntText(cleanup, "jobs_already_ended")},
      {"tokens revoked", std::to_string(Array(cleanup, "tokens_revoked").size())},
      {"identities disabled", PocIds(Array(cleanup, "identities_disabled"))},
      {"policy",
       Field(cleanup, "policy") != nullptr
           ? fmt::format("version {} restored as version {}", IntText(cleanup, "policy.restored"),
                         IntText(cleanup, "policy.as_version"))
           : "unchanged"}};
  for (const auto& p : Array(cleanup, "problems")) rows.push_back({"problem", ValueText(p)});
  PocHtmlTable(out, {"", ""}, rows);
  out += "</body>\n</html>\n";
  return out;
}

}  // namespace berth::cli::poc
