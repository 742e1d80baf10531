#include "cli/poc_rerun.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "cli/format.h"
#include "cli/json_view.h"
#include "cli/poc_report.h"
#include "common/text_escape.h"

namespace berth::cli::poc {
namespace {

using nlohmann::json;

const std::vector<std::string> kRerunHeaders{"case", "verdict before", "verdict now"};

// One row per re-run case: id, verdict then, verdict now.
std::vector<std::vector<std::string>> RerunRows(const json& report) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : Array(report, "cases")) {
    rows.push_back({fmt::format("{}/{}", Text(c, "group"), Text(c, "id")),
                    Text(c, "previous_verdict"), Text(c, "verdict")});
  }
  return rows;
}

std::string RerunIntro(const json& report) {
  return fmt::format(
      "This run re-tests only the cases selected (--failed, --case) from run {} ({}, started {}); "
      "the other cases were not re-run and are not in this report, so its scores are over the "
      "re-run cases only.",
      Text(report, "rerun_of.run"), Text(report, "rerun_of.path"),
      FormatUtc(Int(report, "rerun_of.started_ms").value_or(0)));
}

}  // namespace

Result<EarlierReport> ReadEarlierReport(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file(path);
  if (fs::is_directory(file, ec)) file /= "report.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return Fail(Code::kInvalidArgument,
                fmt::format("{}: cannot read the earlier report (give the --out directory of a "
                            "berth poc run, or its report.json)",
                            file.string()),
                "report");
  }
  std::stringstream text;
  text << in.rdbuf();
  EarlierReport r;
  r.path = file.string();
  r.doc = json::parse(text.str(), nullptr, false);
  if (r.doc.is_discarded() || !r.doc.is_object()) {
    return Fail(Code::kInvalidArgument,
                fmt::format("{}: not JSON, so not a berth poc report", r.path), "report");
  }
  const json* cases = Field(r.doc, "cases");
  if (cases == nullptr || !cases->is_array() || Text(r.doc, "run.id") == "-" ||
      Text(r.doc, "environment.suite.sha256") == "-") {
    return Fail(Code::kInvalidArgument,
                fmt::format("{}: not a berth poc report (it lacks cases, run.id or "
                            "environment.suite.sha256)",
                            r.path),
                "report");
  }
  return r;
}

std::set<std::string> FailedCases(const json& report) {
  std::set<std::string> out;
  for (const auto& c : Array(report, "cases")) {
    if (Text(c, "verdict") == "fail") out.insert(Text(c, "id"));
  }
  return out;
}

Result<std::set<std::string>> SelectRerunCases(const json& report, bool failed,
                                               const std::vector<std::string>& ids) {
  if (!failed && ids.empty()) {
    return Fail(Code::kInvalidArgument,
                "say which cases to re-run: --failed (the cases that failed), --case ID "
                "(repeatable), or both",
                "case");
  }
  std::set<std::string> known;
  std::string listed;
  for (const auto& c : Array(report, "cases")) {
    const std::string id = Text(c, "id");
    if (known.insert(id).second) listed += (listed.empty() ? "" : ", ") + id;
  }
  for (const auto& id : ids) {
    if (!known.contains(id)) {
      return Fail(Code::kInvalidArgument,
                  fmt::format("--case {}: the report has no such case; its cases are {}", id,
                              listed.empty() ? std::string("(none)") : listed),
                  "case");
    }
  }
  std::set<std::string> out = failed ? FailedCases(report) : std::set<std::string>();
  out.insert(ids.begin(), ids.end());
  return out;
}

Status CheckSameSuite(const EarlierReport& earlier, const Suite& suite,
                      const std::string& suite_path) {
  const std::string then = Text(earlier.doc, "environment.suite.sha256");
  if (then == suite.sha256) return Ok();
  return Fail(
      Code::kFailedPrecondition,
      fmt::format("{} was made with suite {} {} (sha256 {}), but {} has sha256 {}: a "
                  "re-run must run the same suite text, else its verdicts are not "
                  "comparable; pass --suite with the suite file that run used",
                  earlier.path, Text(earlier.doc, "environment.suite.name"),
                  Text(earlier.doc, "environment.suite.version"), then,
                  suite_path.empty() ? std::string("the built-in suite") : "--suite " + suite_path,
                  suite.sha256),
      "suite");
}

void MarkRerun(json& report, const EarlierReport& earlier) {
  report["rerun_of"] = {{"run", Text(earlier.doc, "run.id")},
                        {"path", earlier.path},
                        {"started_ms", Int(earlier.doc, "run.started_ms").value_or(0)}};
  std::map<std::string, const json*> before;
  for (const auto& c : Array(earlier.doc, "cases")) before[Text(c, "id")] = &c;
  if (!report.contains("cases")) return;
  for (auto& c : report["cases"]) {
    auto it = before.find(Text(c, "id"));
    c["previous_verdict"] = it != before.end() ? Text(*it->second, "verdict") : "-";
    c["previous_reason"] = it != before.end() ? Text(*it->second, "reason") : "-";
  }
}

std::string WithRerunMarkdown(std::string rendered, const json& report) {
  if (Field(report, "rerun_of") == nullptr) return rendered;
  std::string section = "## Re-run\n\n" + PocMdCell(RerunIntro(report)) + "\n\n";
  PocMdTable(section, kRerunHeaders, RerunRows(report));
  const auto at = rendered.find("## Environment");
  if (at == std::string::npos) return rendered + "\n" + section;
  rendered.insert(at, section);
  return rendered;
}

std::string WithRerunHtml(std::string rendered, const json& report) {
  if (Field(report, "rerun_of") == nullptr) return rendered;
  std::string section =
      "<h2 id=\"rerun\">Re-run</h2>\n<p>" + HtmlEscape(RerunIntro(report)) + "</p>\n";
  PocHtmlTable(section, kRerunHeaders, RerunRows(report));
  auto at = rendered.find("<h2>Environment</h2>");
  if (at == std::string::npos) at = rendered.rfind("</body>");
  if (at == std::string::npos) return rendered + section;
  rendered.insert(at, section);
  return rendered;
}

}  // namespace berth::cli::poc
