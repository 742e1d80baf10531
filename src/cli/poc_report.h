// The report of a `berth poc run` (docs/poc.md): the runner's document
// (poc_run.h) scored and rendered. Scores are weighted pass rates per
// capability and per perspective over the cases judged (skipped cases count
// in neither the numerator nor the denominator, and are listed apart); the
// must-fix, limited-launch and later-optimization lists come from the failed
// cases' risk. Markdown and one self-contained HTML file (inline style, no
// script, nothing fetched) are made from the JSON alone, and every value
// that came from the suite or the server is escaped.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace berth::cli::poc {

// Adds "summary", "scores" {capabilities, perspectives, overall} and
// "conclusions" {must_fix, limited_launch, later_optimization, not_evaluated}
// to `report` from its "cases".
void ScoreReport(nlohmann::json& report);

std::string RenderMarkdown(const nlohmann::json& report);
std::string RenderHtml(const nlohmann::json& report);

// The tables of berth poc's reports (run, rerun, observe). A Markdown cell
// keeps to one line with its pipes escaped; an HTML table has every header
// and cell escaped and sits in a box that scrolls sideways on a narrow
// screen instead of the page, focusable so the keyboard reaches it.
std::string PocMdCell(std::string_view text);
void PocMdTable(std::string& out, const std::vector<std::string>& headers,
                const std::vector<std::vector<std::string>>& rows);
// The head of each HTML report: the page's title, a viewport for phones
// and one inline stylesheet (nothing fetched), up to the opened <body>.
std::string PocHtmlHead(std::string_view title);
void PocHtmlTable(std::string& out, const std::vector<std::string>& headers,
                  const std::vector<std::vector<std::string>>& rows);

}  // namespace berth::cli::poc
